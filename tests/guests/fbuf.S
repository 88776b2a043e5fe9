/* The fbuf device (run with -s 29,fbuf,vga=off,vnc=off -l pc-testdev):
 * PCI config space says 1234:1111 class 0380; with memory decoding on,
 * BAR2 holds the EDID header at 0 and the DISPI ID 0xB0C5 at 0x500; a
 * 640x480x32 mode set through BAR2 reads back; a framebuffer word written
 * through BAR0 reads back.  Exit through port 0xf4 with 0x22: khyve's
 * status is (0x22 << 1) | 1 = 69. */
#include "guest.inc"

#define CFG_ADDR 0xcf8
#define CFG_DATA 0xcfc
#define FBUF_CFG 0x8000e800 /* bus 0, device 29, function 0 */

/* cfgread: dword at config offset %al -> %eax.  Clobbers %edx. */
cfgread:
	movzbl	%al, %eax
	orl	$FBUF_CFG, %eax
	movw	$CFG_ADDR, %dx
	outl	%eax, %dx
	movw	$CFG_DATA, %dx
	inl	%dx, %eax
	ret

main:
	movb	$0x00, %al
	call	cfgread
	cmpl	$0x11111234, %eax
	jne	bad
	movb	$0x08, %al
	call	cfgread
	cmpl	$0x03800002, %eax
	jne	bad
	movb	$0x10, %al
	call	cfgread
	andl	$0xfffffff0, %eax
	movl	%eax, %edi		/* BAR0: framebuffer */
	movb	$0x18, %al
	call	cfgread
	andl	$0xfffffff0, %eax
	movl	%eax, %ebx		/* BAR2: registers */
	/* command register: memory decoding on */
	movl	$FBUF_CFG | 4, %eax
	movw	$CFG_ADDR, %dx
	outl	%eax, %dx
	movw	$CFG_DATA, %dx
	movw	$0x0002, %ax
	outw	%ax, %dx

	cmpl	$0xffffff00, 0(%ebx)	/* EDID header 00 ff ff ff */
	jne	bad
	cmpw	$0xb0c5, 0x500(%ebx)
	jne	bad
	movw	$640, 0x502(%ebx)
	movw	$480, 0x504(%ebx)
	movw	$32, 0x506(%ebx)
	movw	$0x41, 0x508(%ebx)	/* enabled, LFB */
	cmpw	$640, 0x502(%ebx)
	jne	bad
	cmpw	$0x41, 0x508(%ebx)
	jne	bad
	movl	$0x00c0ffee, 0x1000(%edi)
	cmpl	$0x00c0ffee, 0x1000(%edi)
	jne	bad
	cmpl	$0, 0x2000(%edi)	/* cleared by the mode set */
	jne	bad

	movl	$msg_ok, %esi
	call	puts
	movw	$0xf4, %dx
	movl	$0x22, %eax
	outl	%eax, %dx
1:	hlt
	jmp	1b
bad:
	movl	$msg_bad, %esi
	jmp	fail

msg_ok:		.asciz "fbuf ok\r\n"
msg_bad:	.asciz "fbuf FAILED\r\n"
