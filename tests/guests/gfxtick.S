/* The ticker (ticker.S's "tick 0000002a" ten times a second on COM1) drawing
 * on the fbuf device (run with -s 29,fbuf,vnc=off): it turns on
 * memory decoding, sets a 640x480x32 DISPI mode through BAR2, and before
 * each tick N paints pixel N of the top row white through BAR0, so a
 * screenshot shows how far it counted: for tests/snapshot/run, whose
 * restored guest must show the row drawn before the suspend and go on
 * drawing.  Never ends by itself. */
#include "guest.inc"

#define CFG_ADDR 0xcf8
#define CFG_DATA 0xcfc
#define FBUF_CFG 0x8000e800 /* bus 0, device 29, function 0 */
#define PM_TMR   0xb008
#define TICK     357954 /* 100 ms of the 3.579545 MHz PM timer */

/* cfgread: dword at config offset %al -> %eax.  Clobbers %edx. */
cfgread:
	movzbl	%al, %eax
	orl	$FBUF_CFG, %eax
	movw	$CFG_ADDR, %dx
	outl	%eax, %dx
	movw	$CFG_DATA, %dx
	inl	%dx, %eax
	ret

main:
	movb	$0x10, %al
	call	cfgread
	andl	$0xfffffff0, %eax
	movl	%eax, %ebp		/* BAR0: framebuffer */
	movb	$0x18, %al
	call	cfgread
	andl	$0xfffffff0, %eax
	movl	%eax, %ebx		/* BAR2: registers */
	movl	$FBUF_CFG | 4, %eax	/* command register: memory decoding on */
	movw	$CFG_ADDR, %dx
	outl	%eax, %dx
	movw	$CFG_DATA, %dx
	movw	$0x0002, %ax
	outw	%ax, %dx
	movw	$640, 0x502(%ebx)
	movw	$480, 0x504(%ebx)
	movw	$32, 0x506(%ebx)
	movw	$0x41, 0x508(%ebx)	/* enabled, LFB */

	xorl	%ebx, %ebx
1:	cmpl	$640, %ebx
	jae	2f
	movl	$0x00ffffff, (%ebp,%ebx,4)
2:	movl	$msg_tick, %esi
	call	puts
	movl	%ebx, %eax
	call	puthex8
	movl	$msg_eol, %esi
	call	puts
	incl	%ebx
	call	wait_tick
	jmp	1b

wait_tick:
	movw	$PM_TMR, %dx
	inl	%dx, %eax
	movl	%eax, %edi
3:	movw	$PM_TMR, %dx
	inl	%dx, %eax
	subl	%edi, %eax
	andl	$0xffffff, %eax	/* a 24-bit timer wraps too */
	cmpl	$TICK, %eax
	jb	3b
	ret

/* puthex8: %eax as eight hex digits. */
puthex8:
	pushl	%ebx
	pushl	%esi
	movl	%eax, %ebx
	movl	$8, %esi
4:	roll	$4, %ebx
	movl	%ebx, %eax
	andl	$0x0f, %eax
	movb	hexdigits(%eax), %al
	call	putc
	decl	%esi
	jnz	4b
	popl	%esi
	popl	%ebx
	ret

hexdigits:	.ascii "0123456789abcdef"
msg_tick:	.asciz "tick "
msg_eol:	.asciz "\r\n"
