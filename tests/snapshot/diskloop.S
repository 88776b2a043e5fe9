/* A boot sector for tests/snapshot/virtio: SeaBIOS loads it from the
 * virtio-blk disk.  It loops: read sector 2 and write the loop count to
 * sector 3 through INT 13h (SeaBIOS's virtio-blk driver), then print the
 * count's low nibble as a letter 'a'-'p' on the debug port 0x402, then
 * wait 100 ms on the ACPI PM timer.  An 'E' means a disk call failed. */
	.code16
	.text
	.globl _start
_start:
	cli
	xorw	%ax, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	%ax, %ss
	movw	$0x7c00, %sp
	sti
	movb	%dl, drive
	xorw	%si, %si
1:	movw	$0x0201, %ax		/* read one sector: C 0, H 0, S 2 */
	movw	$0x0002, %cx
	xorb	%dh, %dh
	movb	drive, %dl
	movw	$0x8000, %bx
	int	$0x13
	jc	9f
	movw	%si, 0x8000
	movw	$0x0301, %ax		/* write it back as sector 3 */
	movw	$0x0003, %cx
	xorb	%dh, %dh
	movb	drive, %dl
	movw	$0x8000, %bx
	int	$0x13
	jc	9f
	movw	%si, %ax
	andb	$0x0f, %al
	addb	$'a', %al
	movw	$0x402, %dx
	outb	%al, %dx
	incw	%si
	movw	$0xb008, %dx		/* 100 ms of the 3.579545 MHz PM timer */
	inl	%dx, %eax
	movl	%eax, %edi
2:	inl	%dx, %eax
	subl	%edi, %eax
	andl	$0xffffff, %eax
	cmpl	$357954, %eax
	jb	2b
	jmp	1b
9:	movb	$'E', %al
	movw	$0x402, %dx
	outb	%al, %dx
	hlt
	jmp	9b
drive:	.byte	0
	.org	510
	.byte	0x55, 0xaa
