/* Reset through the reset control register 0xCF9.  Expect: exit 0. */
#include "guest.inc"

main:
	movl	$msg, %esi
	call	puts
	movw	$0xcf9, %dx
	movb	$0x02, %al
	outb	%al, %dx
	movb	$0x06, %al
	outb	%al, %dx
1:	hlt
	jmp	1b
msg:	.asciz "rebooting via 0xcf9\r\n"
