/* The i8042 and its PS/2 keyboard and mouse as firmware probes them:
 * self test, keyboard reset and ID (raw and translated), mouse reset, the
 * IntelliMouse knock.  Expect: exit 1; output has "ps2 ok". */
#include "guest.inc"

#define KBC_DATA 0x60
#define KBC_CMD  0x64

/* A byte to the command or data port. */
.macro kcmd v
	movb	$\v, %al
	outb	%al, $KBC_CMD
.endm
.macro kdata v
	movb	$\v, %al
	outb	%al, $KBC_DATA
.endm
.macro aux v
	kcmd	0xd4
	kdata	\v
.endm
/* The next output byte must be `v`. */
.macro expect v
	call	rd
	cmpb	$\v, %al
	jne	bad
.endm

main:
	kcmd	0x60
	kdata	0x00		/* no interrupts, no translation, both ports on */
	kcmd	0xaa
	expect	0x55
	kcmd	0x20
	expect	0x04		/* the self test set the system flag */
	kdata	0xff
	expect	0xfa
	expect	0xaa
	kdata	0xf2
	expect	0xfa
	expect	0xab
	expect	0x83
	kcmd	0x60
	kdata	0x40		/* translation: the ID's 0x83 reads as 0x41 */
	kdata	0xf2
	expect	0xfa
	expect	0xab
	expect	0x41
	aux	0xff
	call	rd_aux
	cmpb	$0xfa, %al
	jne	bad
	expect	0xaa
	expect	0x00
	aux	0xf3
	aux	200
	aux	0xf3
	aux	100
	aux	0xf3
	aux	80
	aux	0xf2
	expect	0xfa
	expect	0xfa
	expect	0xfa
	expect	0xfa
	expect	0xfa
	expect	0xfa
	expect	0xfa
	expect	0x03
	inb	$KBC_CMD, %al	/* everything read: the buffer is empty */
	testb	$0x01, %al
	jnz	bad
	movl	$msg_ok, %esi
	call	puts
	ret

/* rd: wait (bounded) for the output buffer, return its byte in %al. */
rd:
	movl	$1000000, %ecx
1:	inb	$KBC_CMD, %al
	testb	$0x01, %al
	jnz	2f
	loop	1b
	jmp	bad
2:	inb	$KBC_DATA, %al
	ret

/* rd_aux: as rd, and the byte must come from the mouse (status AUXB). */
rd_aux:
	movl	$1000000, %ecx
1:	inb	$KBC_CMD, %al
	testb	$0x01, %al
	jnz	2f
	loop	1b
	jmp	bad
2:	testb	$0x20, %al
	jz	bad
	inb	$KBC_DATA, %al
	ret

bad:
	movl	$msg_bad, %esi
	jmp	fail

msg_ok:		.asciz "ps2 ok\r\n"
msg_bad:	.asciz "ps2 FAILED\r\n"
