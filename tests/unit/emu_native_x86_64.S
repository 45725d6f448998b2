/* SPDX-License-Identifier: MIT */
/*
 * Native reference for the analyzer's tests: runs one instruction on the real CPU from
 * a complete register set and captures the complete register set where it lands.
 *
 *	void emu_native_run(const struct user_regs_struct *in, struct user_regs_struct *out);
 *
 * loads every GPR, rsp and rflags from *in and jumps to in->rip.  The code there (the
 * instruction under test) must end up at a landing pad the test wrote with
 * emu_pad_write() (insn_test_util.h): the pad stores rax and its own address through
 * absolute moves and jumps to emu_native_landing, which stores the rest into *out and
 * returns to emu_native_run's caller.  Nothing here touches the test's stack (the pad
 * and the landing use no stack until rsp is switched to a private one) or its flags
 * (only mov and lea run between popfq and the instruction, and between the pad and
 * pushfq).
 *
 * Offsets are those of struct user_regs_struct on x86-64.
 */
#define R15 0
#define R14 8
#define R13 16
#define R12 24
#define RBP 32
#define RBX 40
#define R11 48
#define R10 56
#define R9 64
#define R8 72
#define RAX 80
#define RCX 88
#define RDX 96
#define RSI 104
#define RDI 112
#define RIP 128
#define EFLAGS 144
#define RSP 152

	.text
	.globl	emu_native_run
	.type	emu_native_run, @function
emu_native_run:
	push	%rbp
	push	%rbx
	push	%r12
	push	%r13
	push	%r14
	push	%r15
	mov	%rsi, emu_native_out(%rip)
	mov	%rsp, emu_native_host_rsp(%rip)
	mov	RIP(%rdi), %rax
	mov	%rax, emu_native_jump(%rip)
	pushq	EFLAGS(%rdi)
	popfq
	mov	R15(%rdi), %r15
	mov	R14(%rdi), %r14
	mov	R13(%rdi), %r13
	mov	R12(%rdi), %r12
	mov	RBP(%rdi), %rbp
	mov	RBX(%rdi), %rbx
	mov	R11(%rdi), %r11
	mov	R10(%rdi), %r10
	mov	R9(%rdi), %r9
	mov	R8(%rdi), %r8
	mov	RAX(%rdi), %rax
	mov	RCX(%rdi), %rcx
	mov	RDX(%rdi), %rdx
	mov	RSI(%rdi), %rsi
	mov	RSP(%rdi), %rsp
	mov	RDI(%rdi), %rdi
	jmp	*emu_native_jump(%rip)
	.size	emu_native_run, . - emu_native_run

	/* Reached from a pad: rax is in emu_native_pad_rax, the pad in emu_native_pad_rip. */
	.globl	emu_native_landing
	.type	emu_native_landing, @function
emu_native_landing:
	mov	%rsp, emu_native_tmp_rsp(%rip)
	lea	emu_native_stack_top(%rip), %rsp
	pushfq
	push	%rdi
	mov	emu_native_out(%rip), %rdi
	popq	RDI(%rdi)
	popq	EFLAGS(%rdi)
	mov	%r15, R15(%rdi)
	mov	%r14, R14(%rdi)
	mov	%r13, R13(%rdi)
	mov	%r12, R12(%rdi)
	mov	%rbp, RBP(%rdi)
	mov	%rbx, RBX(%rdi)
	mov	%r11, R11(%rdi)
	mov	%r10, R10(%rdi)
	mov	%r9, R9(%rdi)
	mov	%r8, R8(%rdi)
	mov	%rcx, RCX(%rdi)
	mov	%rdx, RDX(%rdi)
	mov	%rsi, RSI(%rdi)
	mov	emu_native_pad_rax(%rip), %rax
	mov	%rax, RAX(%rdi)
	mov	emu_native_pad_rip(%rip), %rax
	mov	%rax, RIP(%rdi)
	mov	emu_native_tmp_rsp(%rip), %rax
	mov	%rax, RSP(%rdi)
	cld
	mov	emu_native_host_rsp(%rip), %rsp
	pop	%r15
	pop	%r14
	pop	%r13
	pop	%r12
	pop	%rbx
	pop	%rbp
	ret
	.size	emu_native_landing, . - emu_native_landing

	.bss
	.balign	16
	.globl	emu_native_pad_rax
	.globl	emu_native_pad_rip
emu_native_pad_rax:	.skip 8
emu_native_pad_rip:	.skip 8
emu_native_out:		.skip 8
emu_native_host_rsp:	.skip 8
emu_native_tmp_rsp:	.skip 8
emu_native_jump:	.skip 8
	.balign	16
emu_native_stack:	.skip 1024
emu_native_stack_top:

	.section .note.GNU-stack, "", @progbits
