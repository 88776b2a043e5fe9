/* Reset through the keyboard controller (command 0xFE).  Expect: exit 0. */
#include "guest.inc"

main:
	movl	$msg, %esi
	call	puts
	movb	$0xfe, %al
	outb	%al, $0x64
1:	hlt
	jmp	1b
msg:	.asciz "rebooting via the 8042\r\n"
