/* MMIO dispatch through pc-testdev's scratch window at 0xff000000 (run with
 * -l pc-testdev): byte, word and dword writes read back; an unclaimed MMIO
 * address reads all ones; then exit through port 0xf4 with 0x21, so khyve's
 * status is (0x21 << 1) | 1 = 67.  A write into the ROM is ignored. */
#include "guest.inc"

#define IOMEM 0xff000000

main:
	movl	$0x11223344, IOMEM + 0x10
	cmpl	$0x11223344, IOMEM + 0x10
	jne	bad
	movb	$0x5a, IOMEM + 0x11
	cmpl	$0x11225a44, IOMEM + 0x10
	jne	bad
	movw	$0xbeef, IOMEM + 0xfffe
	cmpw	$0xbeef, IOMEM + 0xfffe
	jne	bad
	/* Nobody claims 0xfe000000. */
	cmpl	$0xffffffff, 0xfe000000
	jne	bad
	/* The boot ROM is read-only: the write is dropped. */
	movl	rom_word, %eax
	movl	$0, rom_word
	cmpl	rom_word, %eax
	jne	bad
	movl	$msg_ok, %esi
	call	puts
	movw	$0xf4, %dx
	movl	$0x21, %eax
	outl	%eax, %dx
1:	hlt
	jmp	1b
bad:
	movl	$msg_bad, %esi
	jmp	fail

rom_word:	.long 0x600dc0de
msg_ok:		.asciz "mmio ok\r\n"
msg_bad:	.asciz "mmio FAILED\r\n"
