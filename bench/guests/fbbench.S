/*
 * Boot sectors for bench/vnc, loaded by SeaBIOS at 0x7c00 after the VGA BIOS
 * has set 80x25 text:
 *   TEXT        every half second (9 BIOS ticks) rewrite text row 12 with
 *               80 'A's, then 80 'B's: a one-line change on a quiet screen
 *   FB_W, FB_H  find the stdvga (PCI 1234:1111) on bus 0, set a FB_W x FB_H
 *               x 32 linear mode through the Bochs DISPI ports (0x1ce/0x1cf)
 *               and fill the whole framebuffer with a new pattern, again
 *               and again: a full-screen change per fill
 * Interrupts stay on (the lab freezes on a guest spinning with them off):
 * the fills run in unreal mode, real mode with a 4 GiB ES limit, so the
 * BIOS's timer interrupt keeps working.  No FPU/SSE.
 */
	.code16
	.text
	.globl	_start
_start:
	cli
	xorw	%ax, %ax
	movw	%ax, %ds
	movw	%ax, %ss
	movw	$0x7c00, %sp
	sti
#ifdef TEXT
	movb	$0x01, %ah		/* hide the cursor (its blinking is a */
	movw	$0x2000, %cx		/* change too): int 10h, AH=1, CH bit 5 */
	int	$0x10
	movw	$0xb800, %ax
	movw	%ax, %es
	movw	$0x0741, %ax		/* 'A', light grey on black */
1:	movw	$12 * 160, %di
	movw	$80, %cx
	cld
	rep stosw
	movw	0x46c, %bx		/* BIOS tick count (18.2 Hz) */
	addw	$9, %bx
2:	hlt
	movw	0x46c, %dx
	subw	%bx, %dx
	js	2b			/* until 9 ticks have passed */
	xorb	$('A' ^ 'B'), %al
	jmp	1b
#else
	/* PCI configuration mechanism #1: the first function of 1234:1111. */
	movl	$0x80000000, %esi
1:	movl	%esi, %eax
	movw	$0xcf8, %dx
	outl	%eax, %dx
	movw	$0xcfc, %dx
	inl	%dx, %eax
	cmpl	$0x11111234, %eax
	je	2f
	addl	$0x800, %esi		/* next slot */
	cmpl	$0x80010000, %esi
	jb	1b
	jmp	halt
2:	leal	0x10(%esi), %eax	/* BAR0: the linear framebuffer */
	movw	$0xcf8, %dx
	outl	%eax, %dx
	movw	$0xcfc, %dx
	inl	%dx, %eax
	andl	$0xfffffff0, %eax
	movl	%eax, lfb

	movw	$4, %ax			/* DISPI ENABLE = 0 */
	xorw	%bx, %bx
	call	dispi
	movw	$1, %ax			/* XRES */
	movw	$FB_W, %bx
	call	dispi
	movw	$2, %ax			/* YRES */
	movw	$FB_H, %bx
	call	dispi
	movw	$3, %ax			/* BPP */
	movw	$32, %bx
	call	dispi
	movw	$4, %ax			/* ENABLE: enabled | LFB */
	movw	$0x41, %bx
	call	dispi

	/* Unreal mode: load ES from a flat 4 GiB descriptor in protected
	 * mode, return to real mode with the cached limit kept. */
	cli
	lgdtl	gdt_desc
	movl	%cr0, %eax
	orb	$1, %al
	movl	%eax, %cr0
	jmp	3f
3:	movw	$0x08, %bx
	movw	%bx, %es
	andb	$0xfe, %al
	movl	%eax, %cr0
	jmp	4f
4:	xorw	%bx, %bx		/* base 0 again, the 4 GiB limit stays; */
	movw	%bx, %es		/* interrupt handlers save and restore 0 */
	sti

	/* Each fill is a busy pattern, not one colour (which every encoder
	 * sends as a single solid rectangle): each pixel adds a per-fill
	 * step to the one before it. */
	xorl	%eax, %eax
	movl	$0x00010307, %ebx	/* the step */
5:	movl	lfb, %edi
	movl	$FB_W * FB_H, %ecx
	cld
6:	addr32 stosl
	addl	%ebx, %eax
	addr32 loop 6b
	addl	$0x00020105, %ebx
	jmp	5b

/* DISPI register AX := BX. */
dispi:
	movw	$0x1ce, %dx
	outw	%ax, %dx
	movw	$0x1cf, %dx
	movw	%bx, %ax
	outw	%ax, %dx
	ret

	.p2align 3
gdt:
	.quad	0
	.quad	0x008f92000000ffff	/* data, base 0, limit 4 GiB, 16-bit */
gdt_desc:
	.word	15
	.long	gdt
lfb:
	.long	0
#endif
halt:
	hlt
	jmp	halt

	.org	510
	.word	0xaa55
