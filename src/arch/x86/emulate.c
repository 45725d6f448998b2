// SPDX-License-Identifier: MIT
/*
 * Emulation of the instructions whose effect is a few register writes and at most one
 * stack or memory access: nops, direct and indirect jumps and calls, conditional
 * branches, loops, returns, push and pop of registers and immediates.  Applying them
 * to the register set is cheaper than a trip through a slot, and it is what makes a
 * probe on a branch exact (seed 003 single-steps them instead).
 *
 * The work is done on a copy of the registers: when a memory access fails nothing has
 * changed, and the caller runs the instruction out of line so that the program takes
 * the fault the way it would have without the probe.
 */
#include <errno.h>
#include <string.h>

#include "arch/x86/insn.h"

#define FL_CF (1u << 0)
#define FL_PF (1u << 2)
#define FL_ZF (1u << 6)
#define FL_SF (1u << 7)
#define FL_OF (1u << 11)

struct emu {
	const struct up_insn *insn;
	struct user_regs_struct r;
	up_insn_mem_fn mem;
	void *ctx;
	uint64_t mask; /* of the mode's addresses */
};

static uint64_t width_mask(unsigned bits)
{
	return bits >= 64 ? ~0ULL : (1ULL << bits) - 1;
}

static bool condition(unsigned cc, uint64_t fl)
{
	bool cf = fl & FL_CF, pf = fl & FL_PF, zf = fl & FL_ZF, sf = fl & FL_SF, of = fl & FL_OF;
	bool v;

	switch (cc >> 1) {
	case 0: v = of; break;
	case 1: v = cf; break;
	case 2: v = zf; break;
	case 3: v = cf || zf; break;
	case 4: v = sf; break;
	case 5: v = pf; break;
	case 6: v = sf != of; break;
	default: v = zf || sf != of; break;
	}
	return (cc & 1) ? !v : v;
}

static uint64_t reg_read(struct emu *e, ZydisRegister reg)
{
	ZydisMachineMode m = e->insn->mode == UP_MODE_64 ? ZYDIS_MACHINE_MODE_LONG_64
							 : ZYDIS_MACHINE_MODE_LONG_COMPAT_32;
	uint64_t *p = up_regs_gpr(&e->r, reg);

	if (!p)
		return 0;
	return *p & width_mask(ZydisRegisterGetWidth(m, reg));
}

static int stack_push(struct emu *e, uint64_t value, unsigned size)
{
	uint64_t sp = (e->r.rsp - size) & e->mask;
	int rc = e->mem(e->ctx, sp, &value, size, true);

	if (rc)
		return rc;
	/* a 32-bit process's esp: the upper half stays as it was (zero) */
	e->r.rsp = (e->r.rsp & ~e->mask) | sp;
	return 0;
}

static int stack_pop(struct emu *e, uint64_t *value, unsigned size)
{
	uint64_t sp = e->r.rsp & e->mask;
	int rc;

	*value = 0;
	rc = e->mem(e->ctx, sp, value, size, false);
	if (rc)
		return rc;
	e->r.rsp = (e->r.rsp & ~e->mask) | ((sp + size) & e->mask);
	return 0;
}

static uint64_t effective_address(struct emu *e, const struct up_insn_op *op)
{
	const struct up_insn *insn = e->insn;
	uint64_t ea;

	if (op->base == ZYDIS_REGISTER_RIP || op->base == ZYDIS_REGISTER_EIP)
		return insn->target;
	ea = (uint64_t)op->disp;
	if (op->base != ZYDIS_REGISTER_NONE)
		ea += reg_read(e, op->base);
	if (op->index != ZYDIS_REGISTER_NONE)
		ea += reg_read(e, op->index) * op->scale;
	ea &= width_mask(insn->address_width);
	if (insn->mode == UP_MODE_64) {
		if (op->segment == ZYDIS_REGISTER_FS)
			ea += e->r.fs_base;
		else if (op->segment == ZYDIS_REGISTER_GS)
			ea += e->r.gs_base;
	}
	return ea & e->mask;
}

/* The value of operand 0 of an indirect jmp/call: the target. */
static int branch_target(struct emu *e, uint64_t *target)
{
	const struct up_insn_op *op = &e->insn->op0;
	unsigned size = e->insn->operand_width / 8u;

	if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		*target = reg_read(e, op->reg);
		return 0;
	}
	if (op->type != ZYDIS_OPERAND_TYPE_MEMORY || size > 8)
		return -ENOTSUP;
	*target = 0;
	return e->mem(e->ctx, effective_address(e, op), target, size, false);
}

static uint64_t count_mask(const struct up_insn *insn)
{
	return width_mask(insn->address_width);
}

static int run(struct emu *e)
{
	const struct up_insn *insn = e->insn;
	const uint64_t next = (insn->vaddr + insn->length) & e->mask;
	uint64_t v, cmask;
	bool taken;
	int rc;

	switch (insn->emu) {
	case UP_EMU_NOP:
		e->r.rip = next;
		return 0;
	case UP_EMU_JMP:
		e->r.rip = insn->target;
		return 0;
	case UP_EMU_CALL:
		rc = stack_push(e, next, insn->op_size);
		if (rc)
			return rc;
		e->r.rip = insn->target;
		return 0;
	case UP_EMU_JCC:
		e->r.rip = condition(insn->cc, e->r.eflags) ? insn->target : next;
		return 0;
	case UP_EMU_LOOP:
	case UP_EMU_LOOPE:
	case UP_EMU_LOOPNE:
		cmask = count_mask(insn);
		v = (e->r.rcx - 1) & cmask;
		/* a 32-bit count in 64-bit mode is a write to ecx: it zero-extends */
		if (cmask == 0xffffffffULL)
			e->r.rcx = v;
		else
			e->r.rcx = (e->r.rcx & ~cmask) | v;
		taken = v != 0;
		if (insn->emu == UP_EMU_LOOPE)
			taken = taken && (e->r.eflags & FL_ZF);
		else if (insn->emu == UP_EMU_LOOPNE)
			taken = taken && !(e->r.eflags & FL_ZF);
		e->r.rip = taken ? insn->target : next;
		return 0;
	case UP_EMU_JCXZ:
		e->r.rip = (e->r.rcx & count_mask(insn)) == 0 ? insn->target : next;
		return 0;
	case UP_EMU_RET:
		rc = stack_pop(e, &v, insn->op_size);
		if (rc)
			return rc;
		e->r.rsp = (e->r.rsp & ~e->mask) | ((e->r.rsp + (uint64_t)insn->imm) & e->mask);
		e->r.rip = v & e->mask;
		return 0;
	case UP_EMU_JMP_IND:
		rc = branch_target(e, &v);
		if (rc)
			return rc;
		e->r.rip = v & e->mask;
		return 0;
	case UP_EMU_CALL_IND:
		rc = branch_target(e, &v);
		if (rc)
			return rc;
		rc = stack_push(e, next, insn->op_size);
		if (rc)
			return rc;
		e->r.rip = v & e->mask;
		return 0;
	case UP_EMU_PUSH_REG:
		rc = stack_push(e, reg_read(e, insn->op0.reg), insn->op_size);
		if (rc)
			return rc;
		e->r.rip = next;
		return 0;
	case UP_EMU_PUSH_IMM:
		rc = stack_push(e, (uint64_t)insn->imm & width_mask(insn->op_size * 8u),
				insn->op_size);
		if (rc)
			return rc;
		e->r.rip = next;
		return 0;
	case UP_EMU_POP_REG: {
		uint64_t *dst = up_regs_gpr(&e->r, insn->op0.reg);
		uint64_t m = width_mask(insn->op_size * 8u);

		if (!dst)
			return -ENOTSUP;
		rc = stack_pop(e, &v, insn->op_size);
		if (rc)
			return rc;
		/* a 16-bit pop keeps the rest of the register; wider ones replace it */
		*dst = insn->op_size == 2 ? (*dst & ~m) | (v & m) : v;
		e->r.rip = next;
		return 0;
	}
	case UP_EMU_NONE:
		break;
	}
	return -ENOTSUP;
}

int up_insn_emulate(const struct up_insn *insn, struct user_regs_struct *regs, up_insn_mem_fn mem,
		    void *ctx)
{
	struct emu e = {
		.insn = insn,
		.r = *regs,
		.mem = mem,
		.ctx = ctx,
		.mask = insn->mode == UP_MODE_32 ? 0xffffffffULL : ~0ULL,
	};
	int rc;

	if (insn->plan != UP_PLAN_EMULATE || insn->emu == UP_EMU_NONE)
		return -ENOTSUP;
	rc = run(&e);
	if (rc)
		return rc;
	*regs = e.r;
	return 0;
}
