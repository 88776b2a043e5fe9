/* A guest that keeps printing a counter on COM1, "tick 0000002a" ten times
 * a second (paced by the ACPI PM timer), and echoes every byte the i8042
 * hands it as "key XX": for tests/api/run, whose pause must stop the ticks
 * and whose send-keys must show up as scancodes.  Never ends by itself.
 * With DIRTY_PAGES defined (dirtier.S) a tick comes instead after each
 * pass that writes the count into the first word of DIRTY_PAGES pages
 * from 1 MiB up: a guest that dirties memory as fast as it can. */
#include "guest.inc"

#define PM_TMR   0xb008
#define TICK     357954 /* 100 ms of the 3.579545 MHz PM timer */
#define KBC_DATA 0x60
#define KBC_STS  0x64

main:
	xorl	%ebx, %ebx
1:	movl	$msg_tick, %esi
	call	puts
	movl	%ebx, %eax
	movl	$8, %ecx
	call	puthex
	movl	$msg_eol, %esi
	call	puts
	incl	%ebx
#ifdef DIRTY_PAGES
	call	dirty_pass
#else
	call	wait_tick
#endif
	jmp	1b

#ifdef DIRTY_PAGES
/* dirty_pass: the count (%ebx) into every page of the area. */
dirty_pass:
	movl	$0x100000, %edi
	movl	$DIRTY_PAGES, %ecx
5:	movl	%ebx, (%edi)
	addl	$4096, %edi
	decl	%ecx
	jnz	5b
	ret
#endif

/* wait_tick: 100 ms, echoing keyboard bytes meanwhile. */
wait_tick:
	movw	$PM_TMR, %dx
	inl	%dx, %eax
	movl	%eax, %edi
2:	call	echo_key
	movw	$PM_TMR, %dx
	inl	%dx, %eax
	subl	%edi, %eax
	andl	$0xffffff, %eax	/* a 24-bit timer wraps too */
	cmpl	$TICK, %eax
	jb	2b
	ret

/* echo_key: when the output buffer is full, print its byte. */
echo_key:
	inb	$KBC_STS, %al
	testb	$0x01, %al
	jz	3f
	inb	$KBC_DATA, %al
	pushl	%eax
	movl	$msg_key, %esi
	call	puts
	popl	%eax
	movl	$2, %ecx
	call	puthex
	movl	$msg_eol, %esi
	call	puts
3:	ret

/* puthex: the low %ecx (1-8) nibbles of %eax, most significant first. */
puthex:
	pushl	%ebx
	pushl	%esi
	movl	%eax, %ebx
	movl	%ecx, %esi
	movl	$8, %eax
	subl	%ecx, %eax
	shll	$2, %eax
	movl	%eax, %ecx
	shll	%cl, %ebx	/* the first nibble to print now sits in bits 31:28 */
4:	roll	$4, %ebx
	movl	%ebx, %eax
	andl	$0x0f, %eax
	movb	hexdigits(%eax), %al
	call	putc
	decl	%esi
	jnz	4b
	popl	%esi
	popl	%ebx
	ret

hexdigits:	.ascii "0123456789abcdef"
msg_tick:	.asciz "tick "
msg_key:	.asciz "key "
msg_eol:	.asciz "\r\n"
