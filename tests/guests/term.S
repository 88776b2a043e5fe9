/* A guest for tests/term/run: says "ECHO READY", then echoes what arrives
 * on COM1 (CR as CR LF) until khyve stops it, with two commands:
 *   m  leave the terminal as SeaBIOS and curses programs do: full reset,
 *      autowrap off (SeaBIOS's ESC c ESC[?7l), the DEC graphics set in G0
 *      and shifted out, bold red, cursor hidden
 *   q  power off (exit 1)
 * Upper-case text only: it reads the same in the DEC graphics set. */
#include "guest.inc"

main:
	movl	$msg_ready, %esi
	call	puts
next:	movw	$COM1_LSR, %dx
1:	inb	%dx, %al
	testb	$0x01, %al
	jz	1b
	movw	$COM1, %dx
	inb	%dx, %al
	cmpb	$'q', %al
	je	quit
	cmpb	$'m', %al
	je	mess
	call	putc
	cmpb	$'\r', %al
	jne	next
	movb	$'\n', %al
	call	putc
	jmp	next
mess:	movl	$msg_mess, %esi
	call	puts
	jmp	next
quit:	ret

msg_ready:	.asciz "ECHO READY\r\n"
msg_mess:	.asciz "\033c\033[?7l\033(0\016\033[1;31m\033[?25lMESSED\r\n"
