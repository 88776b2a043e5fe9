/* UART input: wait for one byte on COM1 and echo it back in a sentence.
 * Expect (with "x" on stdin): "got x", exit 1. */
#include "guest.inc"

main:
	movl	$msg_ready, %esi
	call	puts
	movw	$COM1_LSR, %dx
1:	inb	%dx, %al
	testb	$0x01, %al
	jz	1b
	movw	$COM1, %dx
	inb	%dx, %al
	movl	$msg_got, %esi
	call	puts
	call	putc
	movl	$msg_eol, %esi
	call	puts
	ret

msg_ready:	.asciz "ready for input\r\n"
msg_got:	.asciz "got "
msg_eol:	.asciz "\r\n"
