/*
 * Tiny guests for bench/startup, one source for every variant:
 *   MODE_EXIT  exit at once
 *   MODE_PIO   N byte writes to port 0xe9 (debug console), then exit
 *   MODE_MMIO  N dword writes to 0xff000000 (pc-testdev's window), then exit
 *   MODE_ALU   N iterations of a register-only loop, then exit
 *   MODE_HALT  write the boot probe, then halt forever (for memory readings)
 * Exit is a write of 0 to port 0xf4 (isa-debug-exit / pc-testdev): status 1
 * under both QEMU and khyve.  Entered through PVH (32-bit flat, paging
 * off) or, built with BOOTSECTOR, by a BIOS at 0x7c00 in real mode.
 * No FPU/SSE anywhere.
 */
#ifndef N
#define N 0
#endif

	.text
#ifdef BOOTSECTOR
	.code16
	.globl	_start
_start:
	cli
	xorw	%ax, %ax
	movw	%ax, %ds
	lgdtl	gdt_desc
	movl	%cr0, %eax
	orl	$1, %eax
	movl	%eax, %cr0
	ljmpl	$0x08, $body
	.p2align 3
gdt:
	.quad	0
	.quad	0x00cf9b000000ffff
	.quad	0x00cf93000000ffff
gdt_desc:
	.word	23
	.long	gdt
#else
	.globl	pvh_start
pvh_start:
#endif
	.code32
body:
	movw	$0x10, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	movb	$0x01, %al
	outb	%al, $0x80		/* boot probe: guest code runs */
	movl	$N, %ecx
#if defined(MODE_PIO)
1:	testl	%ecx, %ecx
	jz	done
	outb	%al, $0xe9
	decl	%ecx
	jmp	1b
#elif defined(MODE_MMIO)
1:	testl	%ecx, %ecx
	jz	done
	movl	%ecx, 0xff000000
	decl	%ecx
	jmp	1b
#elif defined(MODE_ALU)
1:	testl	%ecx, %ecx
	jz	done
	addl	%ecx, %edx
	decl	%ecx
	jmp	1b
#elif defined(MODE_HALT)
1:	hlt
	jmp	1b
#endif
done:
	xorl	%eax, %eax
	outl	%eax, $0xf4		/* exit: status (0 << 1) | 1 = 1 */
2:	hlt
	jmp	2b

#ifdef BOOTSECTOR
	.org	510
	.word	0xaa55
#else
#include "pvhnote.inc"
#endif
