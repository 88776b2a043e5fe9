/* Serial output, string port I/O, CMOS and UART registers, then S5.
 * Expect: exit 1; output has "hello from a khyve guest" and "pio ok". */
#include "guest.inc"

main:
	movl	$msg_hello, %esi
	call	puts

	/* rep outsb: one exit carries many bytes (count > 1). */
	movl	$msg_rep, %esi
	movl	$msg_rep_end - msg_rep, %ecx
	movw	$COM1, %dx
	rep outsb

	/* UART scratch register keeps what is written. */
	movw	$COM1 + 7, %dx
	movb	$0xa5, %al
	outb	%al, %dx
	inb	%dx, %al
	cmpb	$0xa5, %al
	jne	bad

	/* CMOS status register D: valid RAM and time (0x80). */
	movb	$0x0d, %al
	outb	%al, $0x70
	inb	$0x71, %al
	cmpb	$0x80, %al
	jne	bad

	/* An unclaimed port reads as all ones (not 0x510: with a boot ROM
	 * that is fw_cfg's selector). */
	movw	$0x530, %dx
	inl	%dx, %eax
	cmpl	$0xffffffff, %eax
	jne	bad

	/* The ACPI PM timer moves. */
	movw	$0xb008, %dx
	inl	%dx, %eax
	movl	%eax, %ebx
	movl	$100000, %ecx
5:	inl	%dx, %eax
	cmpl	%eax, %ebx
	jne	6f
	loop	5b
	jmp	bad
6:	movl	$msg_ok, %esi
	call	puts
	ret
bad:
	movl	$msg_bad, %esi
	jmp	fail

msg_hello:	.asciz "hello from a khyve guest\r\n"
msg_rep:	.ascii "rep outsb reached the UART\r\n"
msg_rep_end:
msg_ok:		.asciz "pio ok\r\n"
msg_bad:	.asciz "pio FAILED\r\n"
