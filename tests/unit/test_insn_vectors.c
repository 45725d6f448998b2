// SPDX-License-Identifier: MIT
/*
 * up_insn_analyze on hand-picked bytes, 64- and 32-bit: for each, the length, the
 * plan, the reason, and where it matters the emulation class, the absolute target of
 * a relative branch or rip-relative operand, the immediate and the operand size.
 * Lengths were checked against objdump -D -b binary -m i386:x86-64 (or -m i386).
 *
 * The table must reach every plan and every reason analyze can give (all but
 * UP_WHY_NONE and the two that only relocation gives); a self-check at the end fails
 * when an edit loses one.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "arch/x86/insn.h"
#include "insn_test_util.h"

#define VA64 0x00007f0012340000ULL
#define VA32 0x08049000ULL

struct vec {
	const char *name;
	unsigned mode;
	const char *bytes; /* a string literal: n is sizeof - 1 */
	unsigned n;
	unsigned len;
	enum up_insn_plan plan;
	enum up_insn_reason why;
	uint64_t vaddr; /* 0: VA64 or VA32 */
	bool has_emu, has_target, has_imm, has_opsz, has_cc, riprel, branch;
	enum up_insn_emu emu;
	int64_t toff; /* target - vaddr, wrapped to the mode's width */
	int64_t imm;
	uint8_t opsz;
	uint8_t cc;
};

#define V(m, nm, b, l, pl, wh, ...)                                                        \
	{ .name = nm, .mode = m, .bytes = b, .n = sizeof(b) - 1, .len = l,                  \
	  .plan = UP_PLAN_##pl, .why = UP_WHY_##wh, __VA_ARGS__ }
#define V64(...) V(64, __VA_ARGS__)
#define V32(...) V(32, __VA_ARGS__)
#define EMU(e) .has_emu = true, .emu = UP_EMU_##e
#define TGT(off) .has_target = true, .toff = (off)
#define IMM(v) .has_imm = true, .imm = (v)
#define OPSZ(s) .has_opsz = true, .opsz = (s)
#define RIP(off) .riprel = true, TGT(off)
#define BR(off) .branch = true, TGT(off)
#define AT(va) .vaddr = (va)

/* the common shapes */
#define NOP64(nm, b, l) V64(nm, b, l, EMULATE, EMU_NOP, EMU(NOP))
#define NOP32(nm, b, l) V32(nm, b, l, EMULATE, EMU_NOP, EMU(NOP))
#define PLAIN64(nm, b, l) V64(nm, b, l, XOL, XOL_PLAIN)
#define PLAIN32(nm, b, l) V32(nm, b, l, XOL, XOL_PLAIN)
#define RIPREL(nm, b, l, off) V64(nm, b, l, XOL, XOL_RIPREL, RIP(off))
#define REJ64(nm, b, l, wh) V64(nm, b, l, REJECT, REJECT_##wh)
#define REJ32(nm, b, l, wh) V32(nm, b, l, REJECT, REJECT_##wh)
#define BAD64(nm, b) V64(nm, b, 0, REJECT, REJECT_INVALID)
#define BAD32(nm, b) V32(nm, b, 0, REJECT, REJECT_INVALID)
#define CUT64(nm, b) V64(nm, b, 0, REJECT, REJECT_TRUNCATED)
#define CUT32(nm, b) V32(nm, b, 0, REJECT, REJECT_TRUNCATED)

static const struct vec vecs[] = {
	/* ---- nops: emulated ---- */
	NOP64("nop", "\x90", 1),
	NOP64("xchg %ax,%ax", "\x66\x90", 2),
	NOP64("rex.w nop", "\x48\x90", 2),
	NOP64("nopl (%rax)", "\x0f\x1f\x00", 3),
	NOP64("nopl 0x0(%rax)", "\x0f\x1f\x40\x00", 4),
	NOP64("nopl 0x0(%rax,%rax,1)", "\x0f\x1f\x44\x00\x00", 5),
	NOP64("nopw 0x0(%rax,%rax,1)", "\x66\x0f\x1f\x44\x00\x00", 6),
	NOP64("nopl 0x0(%rax) disp32", "\x0f\x1f\x80\x00\x00\x00\x00", 7),
	NOP64("nopl 0x0(%rax,%rax,1) disp32", "\x0f\x1f\x84\x00\x00\x00\x00\x00", 8),
	NOP64("nopw 0x0(%rax,%rax,1) disp32", "\x66\x0f\x1f\x84\x00\x00\x00\x00\x00", 9),
	NOP64("cs nopw", "\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00", 10),
	NOP64("data16 cs nopw", "\x66\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00", 11),
	NOP64("nop %eax (0f 1f, register form)", "\x0f\x1f\xc0", 3),
	NOP64("endbr64", "\xf3\x0f\x1e\xfa", 4),
	NOP64("endbr32", "\xf3\x0f\x1e\xfb", 4),
	NOP64("pause", "\xf3\x90", 2),
	NOP32("nop", "\x90", 1),
	NOP32("xchg %ax,%ax", "\x66\x90", 2),
	NOP32("nopl 0x0(%eax,%eax,1)", "\x0f\x1f\x44\x00\x00", 5),
	NOP32("endbr32", "\xf3\x0f\x1e\xfb", 4),
	NOP32("pause", "\xf3\x90", 2),
	/* look like nops, are not */
	PLAIN64("xchg %rax,%r8 (49 90)", "\x49\x90", 2),
	PLAIN64("xchg %eax,%eax (87 c0: zero-extends)", "\x87\xc0", 2),

	/* ---- direct branches ---- */
	V64("jmp rel8 forward", "\xeb\x10", 2, EMULATE, EMU_JMP, EMU(JMP), BR(0x12)),
	V64("jmp rel8 to itself", "\xeb\xfe", 2, EMULATE, EMU_JMP, EMU(JMP), BR(0)),
	V64("jmp rel8 -128", "\xeb\x80", 2, EMULATE, EMU_JMP, EMU(JMP), BR(2 - 128)),
	V64("jmp rel32 forward", "\xe9\x00\x01\x00\x00", 5, EMULATE, EMU_JMP, EMU(JMP),
	    BR(0x105)),
	V64("jmp rel32 to itself", "\xe9\xfb\xff\xff\xff", 5, EMULATE, EMU_JMP, EMU(JMP), BR(0)),
	V64("jmp rel32 -2^31", "\xe9\x00\x00\x00\x80", 5, EMULATE, EMU_JMP, EMU(JMP),
	    BR(5 - 0x80000000LL)),
	V64("call rel32 next", "\xe8\x00\x00\x00\x00", 5, EMULATE, EMU_CALL, EMU(CALL), BR(5),
	    OPSZ(8)),
	V64("call rel32 back", "\xe8\xf0\xff\xff\xff", 5, EMULATE, EMU_CALL, EMU(CALL), BR(-11),
	    OPSZ(8)),
	V64("call rel32 +0x7fffffff", "\xe8\xff\xff\xff\x7f", 5, EMULATE, EMU_CALL, EMU(CALL),
	    BR(5 + 0x7fffffffLL)),
	V64("loop", "\xe2\xfe", 2, EMULATE, EMU_LOOP, EMU(LOOP), BR(0)),
	V64("loope", "\xe1\x10", 2, EMULATE, EMU_LOOP, EMU(LOOPE), BR(0x12)),
	V64("loopne", "\xe0\xf0", 2, EMULATE, EMU_LOOP, EMU(LOOPNE), BR(2 - 0x10)),
	V64("jrcxz", "\xe3\x05", 2, EMULATE, EMU_LOOP, EMU(JCXZ), BR(7)),
	V64("jecxz (67 e3)", "\x67\xe3\x05", 3, EMULATE, EMU_LOOP, EMU(JCXZ), BR(8)),
	V64("loop addr32 (67 e2)", "\x67\xe2\x05", 3, EMULATE, EMU_LOOP, EMU(LOOP), BR(8)),
	V32("jmp rel8", "\xeb\x10", 2, EMULATE, EMU_JMP, EMU(JMP), BR(0x12)),
	V32("jmp rel32", "\xe9\x00\x01\x00\x00", 5, EMULATE, EMU_JMP, EMU(JMP), BR(0x105)),
	V32("jmp rel32 across 2^32", "\xe9\x00\x01\x00\x00", 5, EMULATE, EMU_JMP, EMU(JMP),
	    BR(0x105), AT(0xfffffff0)),
	V32("jmp rel8 below 0", "\xeb\xf0", 2, EMULATE, EMU_JMP, EMU(JMP), BR(2 - 0x10), AT(4)),
	V32("call rel32", "\xe8\x00\x00\x00\x00", 5, EMULATE, EMU_CALL, EMU(CALL), BR(5),
	    OPSZ(4)),
	V32("loop", "\xe2\xfe", 2, EMULATE, EMU_LOOP, EMU(LOOP), BR(0)),
	V32("jecxz", "\xe3\x05", 2, EMULATE, EMU_LOOP, EMU(JCXZ), BR(7)),
	V32("jcxz (67 e3)", "\x67\xe3\x05", 3, EMULATE, EMU_LOOP, EMU(JCXZ), BR(8)),

	/* ---- ret ---- */
	V64("ret", "\xc3", 1, EMULATE, EMU_RET, EMU(RET), OPSZ(8)),
	V64("rep ret", "\xf3\xc3", 2, EMULATE, EMU_RET, EMU(RET), OPSZ(8)),
	V64("ret $8", "\xc2\x08\x00", 3, EMULATE, EMU_RET, EMU(RET), IMM(8), OPSZ(8)),
	V64("ret $0xffff (unsigned)", "\xc2\xff\xff", 3, EMULATE, EMU_RET, EMU(RET),
	    IMM(0xffff)),
	V32("ret", "\xc3", 1, EMULATE, EMU_RET, EMU(RET), OPSZ(4)),
	V32("ret $4", "\xc2\x04\x00", 3, EMULATE, EMU_RET, EMU(RET), IMM(4), OPSZ(4)),

	/* ---- indirect jmp / call ---- */
	V64("jmp *%rax", "\xff\xe0", 2, EMULATE, EMU_JMP_IND, EMU(JMP_IND)),
	V64("jmp *%r11", "\x41\xff\xe3", 3, EMULATE, EMU_JMP_IND, EMU(JMP_IND)),
	V64("jmp *(%rax)", "\xff\x20", 2, EMULATE, EMU_JMP_IND, EMU(JMP_IND)),
	V64("jmp *0x8(%rsp)", "\xff\x64\x24\x08", 4, EMULATE, EMU_JMP_IND, EMU(JMP_IND)),
	V64("jmp *0x1000(,%rax,8)", "\xff\x24\xc5\x00\x10\x00\x00", 7, EMULATE, EMU_JMP_IND,
	    EMU(JMP_IND)),
	V64("jmp *disp(%rip)", "\xff\x25\x10\x00\x00\x00", 6, EMULATE, EMU_JMP_IND,
	    EMU(JMP_IND), RIP(0x16)),
	V64("call *%rax", "\xff\xd0", 2, EMULATE, EMU_CALL_IND, EMU(CALL_IND), OPSZ(8)),
	V64("call *%r11", "\x41\xff\xd3", 3, EMULATE, EMU_CALL_IND, EMU(CALL_IND)),
	V64("call *(%rax)", "\xff\x10", 2, EMULATE, EMU_CALL_IND, EMU(CALL_IND)),
	V64("call *0x1000 (absolute)", "\xff\x14\x25\x00\x10\x00\x00", 7, EMULATE,
	    EMU_CALL_IND, EMU(CALL_IND)),
	V64("call *disp(%rip)", "\xff\x15\xf0\xff\xff\xff", 6, EMULATE, EMU_CALL_IND,
	    EMU(CALL_IND), RIP(6 - 0x10)),
	V32("jmp *%eax", "\xff\xe0", 2, EMULATE, EMU_JMP_IND, EMU(JMP_IND)),
	V32("jmp *0x8049000 (absolute, not rip-relative)", "\xff\x25\x00\x90\x04\x08", 6,
	    EMULATE, EMU_JMP_IND, EMU(JMP_IND)),
	V32("call *%eax", "\xff\xd0", 2, EMULATE, EMU_CALL_IND, EMU(CALL_IND), OPSZ(4)),
	V32("call *0x8049000(,%eax,4)", "\xff\x14\x85\x00\x90\x04\x08", 7, EMULATE,
	    EMU_CALL_IND, EMU(CALL_IND)),

	/* ---- push / pop ---- */
	V64("push %rax", "\x50", 1, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(8)),
	V64("push %rsp", "\x54", 1, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(8)),
	V64("push %rdi", "\x57", 1, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(8)),
	V64("push %r8", "\x41\x50", 2, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(8)),
	V64("push %r12", "\x41\x54", 2, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(8)),
	V64("push %r15", "\x41\x57", 2, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(8)),
	V64("pushw %ax", "\x66\x50", 2, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(2)),
	V64("pushw %r8w", "\x66\x41\x50", 3, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(2)),
	V64("push $0x7f", "\x6a\x7f", 2, EMULATE, EMU_PUSH, EMU(PUSH_IMM), IMM(0x7f), OPSZ(8)),
	V64("push $-0x80", "\x6a\x80", 2, EMULATE, EMU_PUSH, EMU(PUSH_IMM), IMM(-0x80),
	    OPSZ(8)),
	V64("push $0x12345678", "\x68\x78\x56\x34\x12", 5, EMULATE, EMU_PUSH, EMU(PUSH_IMM),
	    IMM(0x12345678), OPSZ(8)),
	V64("push $-0x80000000", "\x68\x00\x00\x00\x80", 5, EMULATE, EMU_PUSH, EMU(PUSH_IMM),
	    IMM(-0x80000000LL), OPSZ(8)),
	V64("pushw $-1", "\x66\x6a\xff", 3, EMULATE, EMU_PUSH, EMU(PUSH_IMM), IMM(-1), OPSZ(2)),
	V64("pop %rax", "\x58", 1, EMULATE, EMU_POP, EMU(POP_REG), OPSZ(8)),
	V64("pop %rsp", "\x5c", 1, EMULATE, EMU_POP, EMU(POP_REG), OPSZ(8)),
	V64("pop %r8", "\x41\x58", 2, EMULATE, EMU_POP, EMU(POP_REG), OPSZ(8)),
	V64("pop %r15", "\x41\x5f", 2, EMULATE, EMU_POP, EMU(POP_REG), OPSZ(8)),
	V32("push %eax", "\x50", 1, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(4)),
	V32("push %esp", "\x54", 1, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(4)),
	V32("pushw %ax", "\x66\x50", 2, EMULATE, EMU_PUSH, EMU(PUSH_REG), OPSZ(2)),
	V32("push $-1", "\x6a\xff", 2, EMULATE, EMU_PUSH, EMU(PUSH_IMM), IMM(-1), OPSZ(4)),
	V32("push $0x12345678", "\x68\x78\x56\x34\x12", 5, EMULATE, EMU_PUSH, EMU(PUSH_IMM),
	    IMM(0x12345678), OPSZ(4)),
	V32("pop %eax", "\x58", 1, EMULATE, EMU_POP, EMU(POP_REG), OPSZ(4)),
	V32("pop %esp", "\x5c", 1, EMULATE, EMU_POP, EMU(POP_REG), OPSZ(4)),
	/* push and pop of memory run in a slot */
	PLAIN64("push (%rax)", "\xff\x30", 2),
	PLAIN64("pop (%rax)", "\x8f\x00", 2),
	RIPREL("push disp(%rip)", "\xff\x35\x10\x00\x00\x00", 6, 0x16),
	RIPREL("pop disp(%rip)", "\x8f\x05\x10\x00\x00\x00", 6, 0x16),

	/* ---- rip-relative: re-encoded for the slot; the target is absolute ---- */
	RIPREL("mov disp(%rip),%rax", "\x48\x8b\x05\x10\x00\x00\x00", 7, 0x17),
	RIPREL("lea -disp(%rip),%rax", "\x48\x8d\x05\xf0\xff\xff\xff", 7, 7 - 0x10),
	RIPREL("lea disp(%rip),%r15", "\x4c\x8d\x3d\x00\x00\x00\x00", 7, 7),
	RIPREL("cmpq $5,disp(%rip) (imm8 after disp)", "\x48\x83\x3d\x10\x00\x00\x00\x05", 8,
	       0x18),
	RIPREL("cmpq $imm32,disp(%rip)", "\x48\x81\x3d\x10\x00\x00\x00\x78\x56\x34\x12", 11,
	       0x1b),
	RIPREL("movl $1,disp(%rip)", "\xc7\x05\x10\x00\x00\x00\x01\x00\x00\x00", 10, 0x1a),
	RIPREL("movw $1,disp(%rip)", "\x66\xc7\x05\x10\x00\x00\x00\x01\x00", 9, 0x19),
	RIPREL("cmpb $0,disp(%rip)", "\x80\x3d\x10\x00\x00\x00\x00", 7, 0x17),
	RIPREL("movups disp(%rip),%xmm0", "\x0f\x10\x05\x10\x00\x00\x00", 7, 0x17),
	RIPREL("movdqa disp(%rip),%xmm0", "\x66\x0f\x6f\x05\x10\x00\x00\x00", 8, 0x18),
	RIPREL("movsd disp(%rip),%xmm0 (f2 is not bnd here)", "\xf2\x0f\x10\x05\x10\x00\x00\x00",
	       8, 0x18),
	RIPREL("vmovaps disp(%rip),%xmm0 (VEX)", "\xc5\xf8\x28\x05\x10\x00\x00\x00", 8, 0x18),
	RIPREL("vpalignr $8,disp(%rip),%xmm0,%xmm0 (VEX, imm)",
	       "\xc4\xe3\x79\x0f\x05\x10\x00\x00\x00\x08", 10, 0x1a),
	RIPREL("vmovaps disp(%rip),%zmm0 (EVEX)", "\x62\xf1\x7c\x48\x28\x05\x10\x00\x00\x00", 10,
	       0x1a),
	RIPREL("vpshufd $0x1b,disp(%rip),%zmm1 (EVEX, imm)",
	       "\x62\xf1\x7d\x48\x70\x0d\x10\x00\x00\x00\x1b", 11, 0x1b),
	RIPREL("lock cmpxchg %rcx,disp(%rip)", "\xf0\x48\x0f\xb1\x0d\x10\x00\x00\x00", 9, 0x19),
	RIPREL("lock incl disp(%rip)", "\xf0\xff\x05\x10\x00\x00\x00", 7, 0x17),
	RIPREL("mov %fs:disp(%rip),%rax", "\x64\x48\x8b\x05\x10\x00\x00\x00", 8, 0x18),

	/* ---- position-independent: as they are ---- */
	PLAIN64("mov %rsp,%rbp", "\x48\x89\xe5", 3),
	PLAIN64("add %rbx,%rax", "\x48\x01\xd8", 3),
	PLAIN64("xor %eax,%eax", "\x31\xc0", 2),
	PLAIN64("sub $8,%rsp", "\x48\x83\xec\x08", 4),
	PLAIN64("mov 0x8(%rsp),%rax", "\x48\x8b\x44\x24\x08", 5),
	PLAIN64("imul %ecx,%eax", "\x0f\xaf\xc1", 3),
	PLAIN64("lea 0x1000 (absolute),%rax", "\x48\x8d\x04\x25\x00\x10\x00\x00", 8),
	PLAIN64("mov %fs:0x28,%rax", "\x64\x48\x8b\x04\x25\x28\x00\x00\x00", 9),
	PLAIN64("movabs 0x1122334455667788,%rax", "\x48\xa1\x88\x77\x66\x55\x44\x33\x22\x11", 10),
	PLAIN64("leave", "\xc9", 1),
	PLAIN64("cpuid", "\x0f\xa2", 2),
	PLAIN64("rdtsc", "\x0f\x31", 2),
	PLAIN64("rep movsq", "\xf3\x48\xa5", 3),
	PLAIN64("repnz scasb", "\xf2\xae", 2),
	PLAIN64("pxor %xmm0,%xmm0 (SSE)", "\x66\x0f\xef\xc0", 4),
	PLAIN64("vzeroupper (VEX)", "\xc5\xf8\x77", 3),
	PLAIN64("vpxor %ymm0,%ymm0,%ymm0 (VEX)", "\xc5\xfd\xef\xc0", 4),
	PLAIN64("vmovaps %zmm1,%zmm0 (EVEX)", "\x62\xf1\x7c\x48\x28\xc1", 6),
	PLAIN64("vmovdqu64 0x40(%rdi),%zmm2{%k1} (EVEX, disp8*N)",
		"\x62\xf1\xfe\x49\x6f\x57\x01", 7),
	PLAIN64("lock cmpxchg %rcx,(%rdx)", "\xf0\x48\x0f\xb1\x0a", 5),
	PLAIN64("lock incl (%rax)", "\xf0\xff\x00", 3),
	PLAIN64("lock xadd %eax,(%rdx)", "\xf0\x0f\xc1\x02", 4),
	PLAIN32("mov %esp,%ebp", "\x89\xe5", 2),
	PLAIN32("mov 0x8049000,%eax (absolute)", "\xa1\x00\x90\x04\x08", 5),
	PLAIN32("lea 0x100(%ebx),%eax", "\x8d\x83\x00\x01\x00\x00", 6),
	PLAIN32("dec %eax (48: no REX in 32-bit)", "\x48", 1),
	PLAIN32("pusha", "\x60", 1),
	PLAIN32("daa", "\x27", 1),
	PLAIN32("lock xadd %eax,(%edx)", "\xf0\x0f\xc1\x02", 4),
	PLAIN32("vzeroupper (VEX)", "\xc5\xf8\x77", 3),
	PLAIN32("vmovaps %zmm1,%zmm0 (EVEX)", "\x62\xf1\x7c\x48\x28\xc1", 6),

	/* ---- single-stepped ---- */
	V64("syscall", "\x0f\x05", 2, STEP, STEP_SYSCALL),
	V32("call *%gs:0x10", "\x65\xff\x15\x10\x00\x00\x00", 7, STEP, STEP_CALL_SEG),
	V32("call *%fs:0x10", "\x64\xff\x15\x10\x00\x00\x00", 7, STEP, STEP_CALL_SEG),
	V32("call *%gs:(%eax)", "\x65\xff\x10", 3, STEP, STEP_CALL_SEG),
	V32("jmp *%gs:0x10", "\x65\xff\x25\x10\x00\x00\x00", 7, STEP, STEP_JMP_SEG),
	V32("jmp *%fs:(%eax)", "\x64\xff\x20", 3, STEP, STEP_JMP_SEG),

	/* ---- refused ---- */
	REJ64("int3", "\xcc", 1, INT3),
	REJ32("int3", "\xcc", 1, INT3),
	REJ64("int $0x80", "\xcd\x80", 2, INT),
	REJ64("int $3 (cd 03)", "\xcd\x03", 2, INT),
	REJ64("int1", "\xf1", 1, INT),
	REJ32("int $0x80", "\xcd\x80", 2, INT),
	REJ32("into", "\xce", 1, INT),
	BAD64("into (not in 64-bit)", "\xce"),
	REJ64("iretd", "\xcf", 1, IRET),
	REJ64("iretq", "\x48\xcf", 2, IRET),
	REJ64("sysret", "\x0f\x07", 2, IRET),
	REJ64("sysretq", "\x48\x0f\x07", 3, IRET),
	REJ64("sysexit", "\x0f\x35", 2, IRET),
	REJ32("iret", "\xcf", 1, IRET),
	REJ32("sysexit", "\x0f\x35", 2, IRET),
	REJ64("sysenter", "\x0f\x34", 2, SYSTEM),
	REJ32("sysenter", "\x0f\x34", 2, SYSTEM),
	REJ64("mov %ax,%ss", "\x8e\xd0", 2, SYSTEM),
	REJ64("mov %ax,%ds", "\x8e\xd8", 2, SYSTEM),
	REJ64("pop %fs", "\x0f\xa1", 2, SYSTEM),
	REJ64("pop %gs", "\x0f\xa9", 2, SYSTEM),
	REJ64("lss (%rax),%eax", "\x0f\xb2\x00", 3, SYSTEM),
	REJ32("mov %ax,%ss", "\x8e\xd0", 2, SYSTEM),
	REJ32("pop %ss", "\x17", 1, SYSTEM),
	REJ32("pop %ds", "\x1f", 1, SYSTEM),
	REJ32("pop %es", "\x07", 1, SYSTEM),
	REJ32("lds (%eax),%eax", "\xc5\x00", 2, SYSTEM),
	REJ64("hlt", "\xf4", 1, PRIVILEGED),
	REJ64("cli", "\xfa", 1, PRIVILEGED),
	REJ64("sti", "\xfb", 1, PRIVILEGED),
	REJ64("lgdt (%rax)", "\x0f\x01\x10", 3, PRIVILEGED),
	REJ64("lidt (%rax)", "\x0f\x01\x18", 3, PRIVILEGED),
	REJ64("mov %rax,%cr0", "\x0f\x22\xc0", 3, PRIVILEGED),
	REJ64("mov %cr0,%rax", "\x0f\x20\xc0", 3, PRIVILEGED),
	REJ64("mov %rax,%db0", "\x0f\x23\xc0", 3, PRIVILEGED),
	REJ64("wrmsr", "\x0f\x30", 2, PRIVILEGED),
	REJ64("rdmsr", "\x0f\x32", 2, PRIVILEGED),
	REJ64("swapgs", "\x0f\x01\xf8", 3, PRIVILEGED),
	REJ64("wbinvd", "\x0f\x09", 2, PRIVILEGED),
	REJ64("clts", "\x0f\x06", 2, PRIVILEGED),
	REJ32("hlt", "\xf4", 1, PRIVILEGED),
	REJ32("lgdt (%eax)", "\x0f\x01\x10", 3, PRIVILEGED),
	REJ32("mov %eax,%cr3", "\x0f\x22\xd8", 3, PRIVILEGED),
	REJ32("wrmsr", "\x0f\x30", 2, PRIVILEGED),
	REJ64("in $0x60,%al", "\xe4\x60", 2, IO),
	REJ64("in $0x60,%eax", "\xe5\x60", 2, IO),
	REJ64("out %al,$0x80", "\xe6\x80", 2, IO),
	REJ64("out %eax,$0x80", "\xe7\x80", 2, IO),
	REJ64("in (%dx),%al", "\xec", 1, IO),
	REJ64("in (%dx),%eax", "\xed", 1, IO),
	REJ64("in (%dx),%ax", "\x66\xed", 2, IO),
	REJ64("out %al,(%dx)", "\xee", 1, IO),
	REJ64("out %eax,(%dx)", "\xef", 1, IO),
	REJ64("insb", "\x6c", 1, IO),
	REJ64("insl", "\x6d", 1, IO),
	REJ64("outsb", "\x6e", 1, IO),
	REJ64("outsl", "\x6f", 1, IO),
	REJ64("rep insb", "\xf3\x6c", 2, IO),
	REJ32("in (%dx),%al", "\xec", 1, IO),
	REJ32("outsb", "\x6e", 1, IO),
	REJ64("ljmp *(%rax)", "\xff\x28", 2, FAR),
	REJ64("lcall *(%rax)", "\xff\x18", 2, FAR),
	REJ64("rex.w lcall *(%rax)", "\x48\xff\x18", 3, FAR),
	REJ64("lret", "\xcb", 1, FAR),
	REJ64("lret $8", "\xca\x08\x00", 3, FAR),
	REJ64("lretq", "\x48\xcb", 2, FAR),
	BAD64("ljmp ptr16:32 (not in 64-bit)", "\xea\x00\x10\x00\x00\x23\x00"),
	BAD64("lcall ptr16:32 (not in 64-bit)", "\x9a\x00\x10\x00\x00\x23\x00"),
	REJ32("ljmp $0x23,$0x1000", "\xea\x00\x10\x00\x00\x23\x00", 7, FAR),
	REJ32("lcall $0x23,$0x1000", "\x9a\x00\x10\x00\x00\x23\x00", 7, FAR),
	REJ32("ljmp *(%eax)", "\xff\x28", 2, FAR),
	REJ32("ljmp *0x8049000", "\xff\x2d\x00\x90\x04\x08", 6, FAR),
	REJ32("lcall *(%eax)", "\xff\x18", 2, FAR),
	REJ32("lret", "\xcb", 1, FAR),
	REJ32("lret $8", "\xca\x08\x00", 3, FAR),
	REJ64("xbegin", "\xc7\xf8\x00\x00\x00\x00", 6, TSX),
	REJ64("xend", "\x0f\x01\xd5", 3, TSX),
	PLAIN64("xabort $1 (a no-op outside a transaction)", "\xc6\xf8\x01", 3),
	PLAIN64("xtest (a probe never fires inside a transaction)", "\x0f\x01\xd6", 3),
	REJ32("xbegin", "\xc7\xf8\x00\x00\x00\x00", 6, TSX),
	REJ64("ud2", "\x0f\x0b", 2, UNDEFINED),
	REJ64("ud0", "\x0f\xff\xc0", 3, UNDEFINED),
	REJ64("ud1", "\x0f\xb9\xc0", 3, UNDEFINED),
	REJ32("ud2", "\x0f\x0b", 2, UNDEFINED),
	CUT64("62 00: no bound in 64-bit, an EVEX prefix, cut", "\x62\x00"),
	REJ32("bound %eax,(%eax)", "\x62\x00", 2, BOUND),
	REJ32("bound %eax,0x8049000", "\x62\x05\x00\x90\x04\x08", 6, BOUND),
	/* bnd does nothing without MPX: branches with it are emulated as without */
	V64("bnd jmp rel32", "\xf2\xe9\x00\x01\x00\x00", 6, EMULATE, EMU_JMP, EMU(JMP), BR(0x106)),
	V64("bnd call rel32", "\xf2\xe8\x00\x01\x00\x00", 6, EMULATE, EMU_CALL, EMU(CALL),
	    BR(0x106), OPSZ(8)),
	V64("bnd ret", "\xf2\xc3", 2, EMULATE, EMU_RET, EMU(RET), OPSZ(8)),
	V64("bnd jmp *%rax", "\xf2\xff\xe0", 3, EMULATE, EMU_JMP_IND, EMU(JMP_IND)),
	V64("bnd jmp *disp(%rip) (a CET PLT entry)", "\xf2\xff\x25\x10\x00\x00\x00", 7, EMULATE,
	    EMU_JMP_IND, EMU(JMP_IND), RIP(0x17)),
	V64("bnd je rel8", "\xf2\x74\x10", 3, EMULATE, EMU_JCC, EMU(JCC), BR(0x13)),
	V32("bnd jmp rel32", "\xf2\xe9\x00\x01\x00\x00", 6, EMULATE, EMU_JMP, EMU(JMP), BR(0x106)),
	/* prefixes that change a branch's or an operand's address width */
	REJ64("data16 call rel16/32 (66 e8)", "\x66\xe8\x00\x01\x00\x00", 6, PREFIX),
	REJ64("data16 jmp (66 e9)", "\x66\xe9\x00\x01\x00\x00", 6, PREFIX),
	REJ64("addr32 mov disp(%eip),%rax (67 48 8b 05)", "\x67\x48\x8b\x05\x10\x00\x00\x00", 8,
	      PREFIX),
	REJ64("addr32 jmp *disp(%eip)", "\x67\xff\x25\x10\x00\x00\x00", 7, PREFIX),
	REJ32("data16 jmp rel16 (66 e9)", "\x66\xe9\x00\x01", 4, PREFIX),
	REJ64("enclu", "\x0f\x01\xd7", 3, ENCLAVE),
	REJ64("encls", "\x0f\x01\xcf", 3, ENCLAVE),
	REJ32("enclu", "\x0f\x01\xd7", 3, ENCLAVE),

	/* ---- undecodable ---- */
	BAD64("push %es (06)", "\x06"),
	BAD64("push %cs (0e)", "\x0e"),
	BAD64("push %ds (1e)", "\x1e"),
	BAD64("daa (27)", "\x27"),
	BAD64("aaa (37)", "\x37"),
	BAD64("pusha (60)", "\x60"),
	BAD64("aam (d4 0a)", "\xd4\x0a"),
	BAD64("lock nop", "\xf0\x90"),
	BAD64("lock add %eax,%eax (register destination)", "\xf0\x01\xc0"),
	BAD64("mov %eax,%cs", "\x8e\xc8"),
	BAD64("0f 3f", "\x0f\x3f"),
	BAD32("swapgs (64-bit only)", "\x0f\x01\xf8"),
	BAD32("0f 3f", "\x0f\x3f"),

	/* ---- the buffer ends mid-instruction ---- */
	CUT64("call rel32, 2 of 5 bytes", "\xe8\x00"),
	CUT64("empty buffer", ""),
	CUT64("rex alone", "\x48"),
	CUT64("0f alone", "\x0f"),
	CUT64("66 alone", "\x66"),
	CUT64("mov disp(%rip), 6 of 7", "\x48\x8b\x05\x10\x00\x00"),
	CUT64("cmpq $imm32,disp(%rip), imm cut", "\x48\x81\x3d\x10\x00\x00\x00\x78\x56\x34"),
	CUT64("VEX, 2 bytes", "\xc5\xf8"),
	CUT64("EVEX, 4 bytes", "\x62\xf1\x7c\x48"),
	CUT64("jmp rel32, 4 of 5", "\xe9\x00\x01\x00"),
	CUT32("call rel32, 2 of 5 bytes", "\xe8\x00"),
	CUT32("empty buffer", ""),
	CUT32("ljmp ptr16:32, 6 of 7", "\xea\x00\x10\x00\x00\x23"),
};

#define NVECS (sizeof(vecs) / sizeof(vecs[0]))

static uint64_t mode_mask(unsigned mode)
{
	return mode == 32 ? 0xffffffffULL : ~0ULL;
}

static unsigned failures;

static void vfail(const struct vec *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void vfail(const struct vec *v, const char *fmt, ...)
{
	char hex[64], msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	failures++;
	print_error("FAIL %u-bit %s [%s]: %s\n", v->mode, v->name,
		    itu_hex(v->bytes, v->n, hex, sizeof(hex)), msg);
}

static void check_vec(const struct vec *v)
{
	uint64_t va = v->vaddr ? v->vaddr : v->mode == 64 ? VA64 : VA32;
	enum up_insn_mode mode = v->mode == 64 ? UP_MODE_64 : UP_MODE_32;
	uint8_t padded[UP_INSN_MAX + 16];
	struct up_insn insn, again;
	struct up_insn_dec dec;
	unsigned len;
	int rc;

	memset(&insn, 0xa5, sizeof(insn));
	rc = up_insn_analyze(&insn, v->bytes, v->n, va, mode);
	if (rc) {
		vfail(v, "up_insn_analyze returned %d", rc);
		return;
	}
	if (insn.length != v->len)
		vfail(v, "length %u, expected %u", insn.length, v->len);
	if (insn.plan != v->plan || insn.reason != v->why)
		vfail(v, "plan %s reason %s, expected %s %s", up_insn_plan_str(insn.plan),
		      up_insn_reason_name(insn.reason), up_insn_plan_str(v->plan),
		      up_insn_reason_name(v->why));
	len = up_insn_length(v->bytes, v->n, mode);
	if (len != v->len)
		vfail(v, "up_insn_length %u, expected %u", len, v->len);
	if (v->len == 0)
		return;

	if (insn.vaddr != va || insn.mode != v->mode || memcmp(insn.bytes, v->bytes, v->len))
		vfail(v, "vaddr/mode/bytes not recorded");
	if (v->has_emu && insn.emu != v->emu)
		vfail(v, "emu %d, expected %d", insn.emu, v->emu);
	if (v->plan == UP_PLAN_XOL && insn.emu != UP_EMU_NONE)
		vfail(v, "emu %d for an xol plan, expected UP_EMU_NONE", insn.emu);
	if (v->has_target) {
		uint64_t want = (va + (uint64_t)v->toff) & mode_mask(v->mode);

		if (insn.target != want)
			vfail(v, "target 0x%" PRIx64 ", expected 0x%" PRIx64, insn.target, want);
	}
	if (v->has_imm && insn.imm != v->imm)
		vfail(v, "imm %" PRId64 ", expected %" PRId64, insn.imm, v->imm);
	if (v->has_opsz && insn.op_size != v->opsz)
		vfail(v, "op_size %u, expected %u", insn.op_size, v->opsz);
	if (v->plan != UP_PLAN_REJECT) {
		if (insn.rip_relative != v->riprel)
			vfail(v, "rip_relative %d, expected %d", insn.rip_relative, v->riprel);
		if (insn.is_branch_rel != v->branch)
			vfail(v, "is_branch_rel %d, expected %d", insn.is_branch_rel, v->branch);
	}
	/* what the probe keeps decodes again whole, as the first time */
	if (up_insn_decode(&insn, &dec) || dec.zi.length != v->len ||
	    dec.zi.mnemonic != insn.mnemonic || dec.zi.operand_width != insn.operand_width)
		vfail(v, "up_insn_decode disagrees with up_insn_analyze");

	/* bytes after the instruction change nothing */
	memcpy(padded, v->bytes, v->n);
	memset(padded + v->n, 0xcc, sizeof(padded) - v->n);
	rc = up_insn_analyze(&again, padded, sizeof(padded), va, mode);
	if (rc || again.length != insn.length || again.plan != insn.plan ||
	    again.reason != insn.reason || again.target != insn.target)
		vfail(v, "decodes differently with bytes after it: length %u plan %s reason %s",
		      again.length, up_insn_plan_str(again.plan), up_insn_reason_name(again.reason));
}

static void test_vectors(void **state)
{
	size_t i;

	failures = 0;
	for (i = 0; i < NVECS; i++)
		check_vec(&vecs[i]);
	if (failures)
		fail_msg("%u failed checks over %zu vectors", failures, NVECS);
}

/* all 16 conditions, rel8 and rel32, both modes */
static void test_jcc(void **state)
{
	unsigned cc, m;

	failures = 0;
	for (m = 0; m < 2; m++)
		for (cc = 0; cc < 16; cc++) {
			enum up_insn_mode mode = m ? UP_MODE_32 : UP_MODE_64;
			uint64_t va = m ? VA32 : VA64;
			uint8_t b8[2] = { (uint8_t)(0x70 + cc), 0xf0 };
			uint8_t b32[6] = { 0x0f, (uint8_t)(0x80 + cc), 0x00, 0x10, 0x00, 0x00 };
			struct up_insn insn;
			char hex[32];
			const struct {
				const uint8_t *b;
				unsigned n;
				uint64_t target;
			} forms[2] = { { b8, 2, va + 2 - 0x10 }, { b32, 6, va + 6 + 0x1000 } };
			unsigned f;

			for (f = 0; f < 2; f++) {
				assert_int_equal(up_insn_analyze(&insn, forms[f].b, forms[f].n, va,
								 mode), 0);
				if (insn.length != forms[f].n || insn.plan != UP_PLAN_EMULATE ||
				    insn.reason != UP_WHY_EMU_JCC || insn.emu != UP_EMU_JCC ||
				    insn.cc != cc || insn.target != forms[f].target ||
				    !insn.is_branch_rel || insn.rip_relative) {
					failures++;
					print_error("FAIL %s-bit jcc [%s]: length %u plan %s reason %s "
						    "emu %d cc %u target 0x%" PRIx64 " (want 0x%" PRIx64
						    ") branch_rel %d rip_relative %d\n",
						    m ? "32" : "64",
						    itu_hex(forms[f].b, forms[f].n, hex, sizeof(hex)),
						    insn.length, up_insn_plan_str(insn.plan),
						    up_insn_reason_name(insn.reason), insn.emu, insn.cc,
						    insn.target, forms[f].target, insn.is_branch_rel,
						    insn.rip_relative);
				}
			}
		}
	assert_int_equal(failures, 0);
}

/* The table reaches every plan and every reason analyze can produce. */
static void test_coverage(void **state)
{
	bool seen_why[UP_WHY_COUNT] = { false }, seen_plan[UP_PLAN_REJECT + 1] = { false };
	unsigned i, missing = 0;

	for (i = 0; i < NVECS; i++) {
		seen_why[vecs[i].why] = true;
		seen_plan[vecs[i].plan] = true;
	}
	seen_why[UP_WHY_EMU_JCC] = true; /* test_jcc */
	for (i = 0; i < UP_WHY_COUNT; i++) {
		if (i == UP_WHY_NONE || i == UP_WHY_STEP_RIPREL_FAR ||
		    i == UP_WHY_REJECT_UNRELOCATABLE)
			continue;
		if (!seen_why[i]) {
			print_error("no vector for reason %u (%s)\n", i, up_insn_reason_name(i));
			missing++;
		}
	}
	for (i = 0; i <= UP_PLAN_REJECT; i++)
		if (!seen_plan[i]) {
			print_error("no vector for plan %u\n", i);
			missing++;
		}
	assert_int_equal(missing, 0);
}

/* ---- strings ------------------------------------------------------------------------ */

static void test_strings(void **state)
{
	static const char *const plans[] = { "emulate", "xol", "step", "reject" };
	const char *names[UP_WHY_COUNT], *strs[UP_WHY_COUNT];
	unsigned i, j;

	for (i = 0; i <= UP_PLAN_REJECT; i++) {
		const char *s = up_insn_plan_str(i);

		assert_non_null(s);
		assert_string_equal(s, plans[i]);
	}
	for (i = 0; i < UP_WHY_COUNT; i++) {
		const char *p;

		names[i] = up_insn_reason_name(i);
		strs[i] = up_insn_reason_str(i);
		if (!names[i] || !names[i][0] || !strs[i] || !strs[i][0])
			fail_msg("reason %u: name '%s' string '%s'", i, names[i] ? names[i] : "(null)",
				 strs[i] ? strs[i] : "(null)");
		/* a stable identifier: tools split on spaces */
		for (p = names[i]; *p; p++)
			if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_' ||
			      *p == '-'))
				fail_msg("reason %u: name '%s' is not an identifier", i, names[i]);
		for (j = 0; j < i; j++) {
			if (!strcmp(names[i], names[j]))
				fail_msg("reasons %u and %u share the name '%s'", j, i, names[i]);
			if (!strcmp(strs[i], strs[j]))
				fail_msg("reasons %u and %u share the message '%s'", j, i, strs[i]);
		}
	}
	/* the names the CLI's documentation and the objdump test rely on */
	assert_string_equal(up_insn_reason_name(UP_WHY_REJECT_INVALID), "invalid");
	assert_string_equal(up_insn_reason_name(UP_WHY_REJECT_TRUNCATED), "truncated");
}

static void test_format(void **state)
{
	struct up_insn insn;
	char buf[128], small[6];

	assert_int_equal(up_insn_analyze(&insn, "\x48\x89\xe5", 3, VA64, UP_MODE_64), 0);
	assert_ptr_equal(up_insn_format(&insn, buf, sizeof(buf)), buf);
	assert_string_equal(buf, "mov %rsp, %rbp");
	/* a short buffer: cut, terminated, nothing written past it */
	memset(small, 'X', sizeof(small));
	assert_ptr_equal(up_insn_format(&insn, small, 4), small);
	assert_true(memchr(small, '\0', 4) != NULL);
	assert_memory_equal(small + 4, "XX", 2);

	assert_int_equal(up_insn_analyze(&insn, "\xe8\x00\x00\x00\x00", 5, VA64, UP_MODE_64), 0);
	up_insn_format(&insn, buf, sizeof(buf));
	assert_non_null(strstr(buf, "call"));
}

static void test_bad_mode(void **state)
{
	struct up_insn insn;

	assert_int_equal(up_insn_analyze(&insn, "\x90", 1, 0x1000, (enum up_insn_mode)16),
			 -EINVAL);
	assert_int_equal(up_insn_analyze(&insn, "\x90", 1, 0x1000, (enum up_insn_mode)0),
			 -EINVAL);
	assert_int_equal(up_insn_length("\x90", 1, (enum up_insn_mode)16), 0);
}

/* An address beyond 4 GiB is not a 32-bit address: targets wrap, nothing crashes. */
static void test_vaddr_edges(void **state)
{
	struct up_insn insn;

	/* 64-bit: the top of the address space */
	assert_int_equal(up_insn_analyze(&insn, "\xeb\x10", 2, 0xfffffffffffffff0ULL,
					 UP_MODE_64), 0);
	assert_int_equal(insn.plan, UP_PLAN_EMULATE);
	assert_int_equal(insn.target, 0x2ULL);
	/* 64-bit: rip-relative below 0 wraps */
	assert_int_equal(up_insn_analyze(&insn, "\x48\x8d\x05\x00\x00\x00\x80", 7, 0x1000,
					 UP_MODE_64), 0);
	assert_int_equal(insn.reason, UP_WHY_XOL_RIPREL);
	assert_int_equal(insn.target, 0x1007ULL - 0x80000000ULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors),	  cmocka_unit_test(test_jcc),
		cmocka_unit_test(test_coverage),  cmocka_unit_test(test_strings),
		cmocka_unit_test(test_format),	  cmocka_unit_test(test_bad_mode),
		cmocka_unit_test(test_vaddr_edges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
