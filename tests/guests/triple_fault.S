/* An exception with no usable IDT: a triple fault.  Expect: exit 3. */
#include "guest.inc"

main:
	movl	$msg, %esi
	call	puts
	lidt	empty_idt
	/* #UD, not int3: the PVM host's instruction emulator gives up on a
	 * software interrupt in protected mode (KVM internal error) but
	 * delivers exceptions, which then find no IDT. */
	ud2
1:	hlt
	jmp	1b
	.p2align 3
empty_idt:
	.word	0
	.long	0
msg:	.asciz "about to triple fault\r\n"
