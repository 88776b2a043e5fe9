/* An exception with no usable IDT: a triple fault.  Expect: exit 3. */
#include "guest.inc"

main:
	movl	$msg, %esi
	call	puts
	lidt	empty_idt
	int3
1:	hlt
	jmp	1b
	.p2align 3
empty_idt:
	.word	0
	.long	0
msg:	.asciz "about to triple fault\r\n"
