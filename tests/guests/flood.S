/* A console flood: FLOOD_LEN bytes (1 MiB) of 'x' to COM1 in one
 * `rep outsb` (a page per exit on KVM with VMX/SVM, a byte per exit on
 * PVM), "flood done" and a write of 1 to port 0x80 (logged with
 * -o boot_probe=true), then wait for the ACPI power button (khyve's
 * SIGTERM) or a byte received on COM1, say "flood bye" and power off.
 * Waiting polls (with a pause loop between polls): a tiny guest has no
 * interrupt handlers, and cli; hlt would never wake.
 * Expect: exit 1 on SIGTERM or on one byte of input (tests/guests/console). */
#include "guest.inc"

#define FLOOD_BUF  0x100000
#ifndef FLOOD_LEN
#define FLOOD_LEN  0x100000
#endif
#define PM1A_STS   0xb000
#define PM1A_EN    0xb002
#define PWRBTN     0x0100 /* PM1 status/enable bit 8 (ACPI 6.4 4.8.3.1) */

main:
	movl	$FLOOD_BUF, %edi
	movl	$FLOOD_LEN, %ecx
	movb	$'x', %al
	cld
	rep stosb

	movl	$FLOOD_BUF, %esi
	movl	$FLOOD_LEN, %ecx
	movw	$COM1, %dx
	rep outsb

	movl	$msg_done, %esi
	call	puts
	movb	$1, %al
	outb	%al, $0x80

	/* Listen for the power button, as an ACPI OS does. */
	movw	$PM1A_EN, %dx
	movw	$PWRBTN, %ax
	outw	%ax, %dx
wait:
	movw	$PM1A_STS, %dx
	inw	%dx, %ax
	testw	$PWRBTN, %ax
	jnz	bye
	movw	$COM1_LSR, %dx
	inb	%dx, %al
	testb	$0x01, %al
	jnz	bye
	movl	$20000, %ecx
1:	pause
	loop	1b
	jmp	wait
bye:
	movl	$msg_bye, %esi
	call	puts
	ret

msg_done:	.asciz "\r\nflood done\r\n"
msg_bye:	.asciz "flood bye\r\n"
