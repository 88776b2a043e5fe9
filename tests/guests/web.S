/* The guest of tests/web/run (vm web's end-to-end test), as a vm guest's
 * bios_firmware with graphics=yes (fbuf in slot 29): it sets a 640x480x32
 * DISPI mode on the fbuf, paints eight colour bars with a white frame on
 * it (a screen that is clearly not black, for the VNC console in the
 * browser), then prints "WEB TICK n" (n decimal, from 0) on COM1 every
 * 200 ms, paced by the ACPI PM timer, for the serial console.  It listens
 * to the ACPI power button as tests/guests/pwrbtn.S does (PWRBTN_EN, PM1_STS
 * polled while it waits), so `vm stop` powers it off (exit 1); never ends
 * by itself.
 * Alone: khyve -s 29,fbuf,tcp=127.0.0.1:5999 -s 31,lpc -l bootrom,web.rom -l com1,stdio web */
#include "guest.inc"

#define CFG_ADDR 0xcf8
#define CFG_DATA 0xcfc
#define FBUF_CFG 0x8000e800 /* bus 0, device 29 (vm's SLOT_FBUF), function 0 */
#define PM_TMR   0xb008
#define PM1A_STS 0xb000
#define PM1A_EN  0xb002
#define PWRBTN   0x0100
#define TICK     715909 /* 200 ms of the 3.579545 MHz PM timer */
#define WIDTH    640
#define HEIGHT   480

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
	movw	$PM1A_STS, %dx
	movw	$PWRBTN, %ax
	outw	%ax, %dx		/* clear a stale status bit (write 1 to clear) */
	movw	$PM1A_EN, %dx
	outw	%ax, %dx		/* PWRBTN_EN: the guest listens to the button */
	call	paint
	xorl	%ebx, %ebx
1:	movl	$msg_tick, %esi
	call	puts
	movl	%ebx, %eax
	call	putdec
	movl	$msg_eol, %esi
	call	puts
	incl	%ebx
	call	wait_tick
	jmp	1b

/* paint: mode set through BAR2's DISPI registers, then bars through BAR0.
 * Without the fbuf (vendor 1234:1111 absent) it says so and paints nothing. */
paint:
	movb	$0x00, %al
	call	cfgread
	cmpl	$0x11111234, %eax
	jne	no_fbuf
	movb	$0x10, %al
	call	cfgread
	andl	$0xfffffff0, %eax
	movl	%eax, %edi		/* BAR0: framebuffer */
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
	movw	$WIDTH, 0x502(%ebx)
	movw	$HEIGHT, 0x504(%ebx)
	movw	$32, 0x506(%ebx)
	movw	$0x41, 0x508(%ebx)	/* enabled, LFB */

	/* Row by row with rep stosl (one exit a row where the frame buffer
	 * traps): 8 white rows, then rows of 8 white pixels, the bars (72, six
	 * of 80, 72 pixels) and 8 white, then 8 white rows.  %ebp = y. */
	cld
	xorl	%ebp, %ebp
2:	movl	$0x00ffffff, %eax
	cmpl	$8, %ebp
	jb	3f
	cmpl	$HEIGHT - 8, %ebp
	jae	3f
	movl	$8, %ecx
	rep stosl
	xorl	%esi, %esi
4:	movl	colours(,%esi,4), %eax
	movl	bar_width(,%esi,4), %ecx
	rep stosl
	incl	%esi
	cmpl	$8, %esi
	jb	4b
	movl	$0x00ffffff, %eax
	movl	$8, %ecx
	jmp	5f
3:	movl	$WIDTH, %ecx
5:	rep stosl
	incl	%ebp
	cmpl	$HEIGHT, %ebp
	jb	2b
	movl	$msg_painted, %esi
	jmp	puts
no_fbuf:
	movl	$msg_nofbuf, %esi
	jmp	puts

/* wait_tick: 200 ms by the 24-bit PM timer; returns to start32's power-off
 * (main's caller) once the power button was pressed. */
wait_tick:
	movw	$PM_TMR, %dx
	inl	%dx, %eax
	movl	%eax, %edi
6:	pause
	movw	$PM1A_STS, %dx
	inw	%dx, %ax
	testw	$PWRBTN, %ax
	jnz	pressed
	movw	$PM_TMR, %dx
	inl	%dx, %eax
	subl	%edi, %eax
	andl	$0xffffff, %eax
	cmpl	$TICK, %eax
	jb	6b
	ret

pressed:
	movl	$msg_off, %esi
	call	puts
	jmp	poweroff

/* putdec: %eax in decimal.  Clobbers %eax, %ecx, %edx. */
putdec:
	pushl	%ebx
	movl	$10, %ebx
	xorl	%ecx, %ecx
7:	xorl	%edx, %edx
	divl	%ebx
	addb	$'0', %dl
	pushl	%edx
	incl	%ecx
	testl	%eax, %eax
	jnz	7b
8:	popl	%eax
	call	putc		/* keeps %ecx */
	decl	%ecx
	jnz	8b
	popl	%ebx
	ret

	.p2align 2
colours: /* 0x00RRGGBB: white, yellow, cyan, green, magenta, red, blue, grey */
	.long	0x00c0c0c0, 0x00c0c000, 0x0000c0c0, 0x0000c000
	.long	0x00c000c0, 0x00c00000, 0x000000c0, 0x00404040
bar_width: /* pixels of each bar inside the frame: 624 in all */
	.long	72, 80, 80, 80, 80, 80, 80, 72
msg_tick:	.asciz "WEB TICK "
msg_eol:	.asciz "\r\n"
msg_painted:	.asciz "WEB SCREEN 640x480 painted\r\n"
msg_off:	.asciz "WEB POWER BUTTON: off\r\n"
msg_nofbuf:	.asciz "WEB no fbuf in slot 29: nothing painted\r\n"
