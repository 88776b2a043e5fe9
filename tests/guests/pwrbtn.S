/* A guest that waits for the ACPI power button, as an ACPI OS does, for
 * tests that stop guests with SIGTERM (tests/vm/soak): enables PWRBTN_EN,
 * says "PWRBTN READY", polls PM1_STS and powers off (exit 1) once the
 * button's status bit is set.  It polls rather than taking the SCI: no IDT
 * or PIC set-up, and each poll is a port exit, so the vCPU never spins
 * with interrupts off and no exits. */
#include "guest.inc"

#define PM1A_STS      0xb000
#define PM1A_EN       0xb002
#define PWRBTN        0x0100

main:
	movw	$PM1A_STS, %dx
	movw	$PWRBTN, %ax
	outw	%ax, %dx		/* clear a stale status bit (write 1 to clear) */
	movw	$PM1A_EN, %dx
	outw	%ax, %dx		/* PWRBTN_EN: khyve now says the guest listens */
	movl	$msg_ready, %esi
	call	puts
	movw	$PM1A_STS, %dx
1:	pause
	inw	%dx, %ax
	testw	$PWRBTN, %ax
	jz	1b
	movl	$msg_off, %esi
	call	puts
	ret

msg_ready:	.asciz "PWRBTN READY\r\n"
msg_off:	.asciz "PWRBTN PRESSED\r\n"
