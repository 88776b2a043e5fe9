/*
 * Tiny guest for bench/snap-host: puts a non-zero word at the start of
 * every 4 KiB page of TOUCH MiB of its RAM from 16 MiB up (TOUCH=0: none),
 * writes 'T' to port 0xe9 (the debug console), then writes 'h' there
 * every DELAY loop iterations forever: the heartbeat that tells a restored
 * guest runs again.  One word a page makes the page as costly to save as
 * a full one for both VMMs (each tests a page for zero up to its first
 * non-zero byte, then copies all 4 KiB; neither compresses by default),
 * and it takes this host's instruction-emulating KVM a fraction of a
 * second where filling 200 MiB took a minute.
 * Entered through PVH (32-bit flat, paging off); no FPU/SSE.
 */
#ifndef TOUCH
#define TOUCH 0
#endif
#define DELAY 4000

	.text
	.globl	pvh_start
pvh_start:
	.code32
	movw	$0x10, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	movl	$0x01000000, %edi
	movl	$(TOUCH * 256), %ecx	/* pages */
	testl	%ecx, %ecx
	jz	2f
1:	movl	%ecx, %eax
	orl	$0x5a000000, %eax
	movl	%eax, (%edi)
	addl	$4096, %edi
	decl	%ecx
	jnz	1b
2:	movb	$'T', %al
	outb	%al, $0xe9
3:	movl	$DELAY, %ecx
4:	decl	%ecx
	jnz	4b
	movb	$'h', %al
	outb	%al, $0xe9
	jmp	3b

#include "pvhnote.inc"
