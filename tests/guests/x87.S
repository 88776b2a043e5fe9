/* x87 instructions, as OVMF runs early on.  Hardware KVM runs them: exit 1,
 * output has "x87 ok".  PVM's instruction emulator handles fninit but not
 * fld1, so khyve stops with "this host's KVM cannot run ..." and exit 4. */
#include "guest.inc"

main:
	movl	$msg_start, %esi
	call	puts
	fninit
	fld1
	movl	$msg_ok, %esi
	call	puts
	ret

msg_start:	.asciz "x87 next\r\n"
msg_ok:		.asciz "x87 ok\r\n"
