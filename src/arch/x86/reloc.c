// SPDX-License-Identifier: MIT
/*
 * Relocation: the code an instruction runs as in an execution-out-of-line slot, and
 * the fixups that make the registers look as if it had run at home (seed 003's
 * "fixups", seed 004's slots).
 *
 * A rip-relative operand gets its disp32 patched in place when the slot is within
 * +-2 GiB of the operand, so the encoding stays byte-for-byte the original; beyond
 * that the operand is rewritten through a scratch register (seed 003's approach for
 * x86_64) and the instruction is single-stepped.  Relative branches are re-encoded by
 * Zydis with a rel32 to the same absolute target.  The jump back is a rel32 jmp, or
 * jmp *0(%rip) with the address after it when home is out of reach.
 */
#include <errno.h>
#include <string.h>

#include "arch/x86/insn.h"

#define GPR(field) offsetof(struct user_regs_struct, field)

uint64_t *up_regs_gpr(struct user_regs_struct *regs, ZydisRegister reg)
{
	static const size_t off[] = {
		[ZYDIS_REGISTER_RAX - ZYDIS_REGISTER_RAX] = GPR(rax),
		[ZYDIS_REGISTER_RCX - ZYDIS_REGISTER_RAX] = GPR(rcx),
		[ZYDIS_REGISTER_RDX - ZYDIS_REGISTER_RAX] = GPR(rdx),
		[ZYDIS_REGISTER_RBX - ZYDIS_REGISTER_RAX] = GPR(rbx),
		[ZYDIS_REGISTER_RSP - ZYDIS_REGISTER_RAX] = GPR(rsp),
		[ZYDIS_REGISTER_RBP - ZYDIS_REGISTER_RAX] = GPR(rbp),
		[ZYDIS_REGISTER_RSI - ZYDIS_REGISTER_RAX] = GPR(rsi),
		[ZYDIS_REGISTER_RDI - ZYDIS_REGISTER_RAX] = GPR(rdi),
		[ZYDIS_REGISTER_R8 - ZYDIS_REGISTER_RAX] = GPR(r8),
		[ZYDIS_REGISTER_R9 - ZYDIS_REGISTER_RAX] = GPR(r9),
		[ZYDIS_REGISTER_R10 - ZYDIS_REGISTER_RAX] = GPR(r10),
		[ZYDIS_REGISTER_R11 - ZYDIS_REGISTER_RAX] = GPR(r11),
		[ZYDIS_REGISTER_R12 - ZYDIS_REGISTER_RAX] = GPR(r12),
		[ZYDIS_REGISTER_R13 - ZYDIS_REGISTER_RAX] = GPR(r13),
		[ZYDIS_REGISTER_R14 - ZYDIS_REGISTER_RAX] = GPR(r14),
		[ZYDIS_REGISTER_R15 - ZYDIS_REGISTER_RAX] = GPR(r15),
	};
	ZydisRegister full;

	if (reg == ZYDIS_REGISTER_RIP || reg == ZYDIS_REGISTER_EIP)
		return (uint64_t *)&regs->rip;
	full = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
	if (full < ZYDIS_REGISTER_RAX || full > ZYDIS_REGISTER_R15)
		return NULL;
	return (uint64_t *)((char *)regs + off[full - ZYDIS_REGISTER_RAX]);
}

static bool fits_rel32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

/* Appends the jump from the slot's end back home to `to`. */
static int jump_back(const struct up_insn *insn, uint64_t slot, struct up_reloc *out, uint64_t to)
{
	uint64_t at = slot + out->len;
	int64_t rel = (int64_t)(to - (at + 5));

	if (insn->mode == UP_MODE_32 || fits_rel32(rel)) {
		int32_t r32 = (int32_t)(uint32_t)(to - (at + 5));

		if (out->len + 5 > UP_SLOT_MAX)
			return -ERANGE;
		out->code[out->len++] = 0xe9;
		memcpy(out->code + out->len, &r32, 4);
		out->len += 4;
		return 0;
	}
	if (out->len + 14 > UP_SLOT_MAX)
		return -ERANGE;
	/* jmp *0(%rip); .quad to */
	memcpy(out->code + out->len, "\xff\x25\x00\x00\x00\x00", 6);
	memcpy(out->code + out->len + 6, &to, 8);
	out->len += 14;
	return 0;
}

static int encode(ZydisEncoderRequest *req, uint8_t *buf, size_t *len)
{
	*len = UP_INSN_MAX;
	return ZYAN_SUCCESS(ZydisEncoderEncodeInstruction(req, buf, len)) ? 0 : -ERANGE;
}

/* An encoder request for the instruction, from its whole decode (into d). */
static int request_of(const struct up_insn *insn, struct up_insn_dec *d, ZydisEncoderRequest *req)
{
	if (up_insn_decode(insn, d) ||
	    !ZYAN_SUCCESS(ZydisEncoderDecodedInstructionToEncoderRequest(
		    &d->zi, d->zops, d->zi.operand_count_visible, req)))
		return -ERANGE;
	return 0;
}

/* A relative jmp/call/jcc as a rel32 to the same target from the slot. */
static int relocate_branch(const struct up_insn *insn, uint64_t slot, struct up_reloc *out)
{
	struct up_insn_dec d;
	ZydisEncoderRequest req;
	uint8_t buf[UP_INSN_MAX];
	size_t len;
	int64_t rel;
	int rc;

	switch (insn->emu) {
	case UP_EMU_LOOP:
	case UP_EMU_LOOPE:
	case UP_EMU_LOOPNE:
	case UP_EMU_JCXZ:
		return -ERANGE; /* rel8 only; the emulation cannot fault, so never needed */
	default:
		break;
	}
	rc = request_of(insn, &d, &req);
	if (rc)
		return rc;
	req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
	req.branch_width = ZYDIS_BRANCH_WIDTH_32;
	req.operands[0].imm.s = 0;
	rc = encode(&req, buf, &len); /* for the length */
	if (rc)
		return rc;
	rel = (int64_t)(insn->target - (slot + len));
	if (insn->mode == UP_MODE_32)
		rel = (int32_t)(uint32_t)rel;
	else if (!fits_rel32(rel))
		return -ERANGE;
	req.operands[0].imm.s = rel;
	rc = encode(&req, buf, &len);
	if (rc)
		return rc;
	memcpy(out->code, buf, len);
	out->insn_len = out->len = (uint8_t)len;
	return 0;
}

/* A register the instruction does not touch at all, for the scratch rewrite. */
static ZydisRegister pick_scratch(const struct up_insn_dec *d)
{
	static const ZydisRegister candidates[] = {
		ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RCX, ZYDIS_REGISTER_RDX,
		ZYDIS_REGISTER_RBX, ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDI,
	};

	for (size_t c = 0; c < sizeof(candidates) / sizeof(candidates[0]); c++) {
		bool used = false;

		for (unsigned i = 0; i < d->zi.operand_count && !used; i++) {
			const ZydisDecodedOperand *op = &d->zops[i];
			ZydisRegister r[2] = { ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE };

			if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
				r[0] = op->reg.value;
			} else if (op->type == ZYDIS_OPERAND_TYPE_MEMORY) {
				r[0] = op->mem.base;
				r[1] = op->mem.index;
			}
			for (int k = 0; k < 2; k++)
				if (r[k] != ZYDIS_REGISTER_NONE &&
				    ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64,
								     r[k]) == candidates[c])
					used = true;
		}
		if (!used)
			return candidates[c];
	}
	return ZYDIS_REGISTER_NONE;
}

/* The rip-relative operand as [scratch], to be stepped with scratch = its address. */
static int relocate_scratch(const struct up_insn *insn, struct up_reloc *out)
{
	struct up_insn_dec d;
	ZydisEncoderRequest req;
	ZydisRegister scratch;
	size_t len;
	int rc;

	rc = request_of(insn, &d, &req);
	if (rc)
		return rc;
	scratch = pick_scratch(&d);
	if (scratch == ZYDIS_REGISTER_NONE)
		return -ERANGE;
	for (unsigned i = 0; i < req.operand_count; i++) {
		if (req.operands[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    req.operands[i].mem.base == ZYDIS_REGISTER_RIP) {
			req.operands[i].mem.base = scratch;
			req.operands[i].mem.displacement = 0;
		}
	}
	rc = encode(&req, out->code, &len);
	if (rc)
		return rc;
	out->insn_len = out->len = (uint8_t)len;
	out->step = true;
	out->fixups |= UP_FIX_SCRATCH | UP_FIX_IP;
	out->scratch = scratch;
	out->scratch_value = insn->target;
	return 0;
}

int up_reloc_build(const struct up_insn *insn, uint64_t slot, struct up_reloc *out)
{
	bool call = insn->emu == UP_EMU_CALL || insn->emu == UP_EMU_CALL_IND ||
		    insn->reason == UP_WHY_STEP_CALL_SEG;
	bool transfers = insn->emu == UP_EMU_RET || insn->emu == UP_EMU_JMP_IND ||
			 insn->reason == UP_WHY_STEP_JMP_SEG;
	int rc;

	memset(out, 0, sizeof(*out));
	out->scratch = ZYDIS_REGISTER_NONE;
	if (insn->plan == UP_PLAN_REJECT || !insn->length)
		return -ENOTSUP;

	if (insn->is_branch_rel) {
		rc = relocate_branch(insn, slot, out);
	} else if (insn->rip_relative) {
		int64_t disp = (int64_t)(insn->target - (slot + insn->length));

		if (fits_rel32(disp)) {
			int32_t d32 = (int32_t)disp;

			memcpy(out->code, insn->bytes, insn->length);
			memcpy(out->code + insn->disp_offset, &d32, 4);
			out->insn_len = out->len = insn->length;
			rc = 0;
		} else {
			rc = relocate_scratch(insn, out);
		}
	} else {
		memcpy(out->code, insn->bytes, insn->length);
		out->insn_len = out->len = insn->length;
		rc = 0;
	}
	if (rc)
		return rc;

	if (call) {
		/* the pushed return address must be the home one */
		out->step = true;
		out->fixups |= UP_FIX_CALL | UP_FIX_IP;
	} else if (insn->reason == UP_WHY_STEP_SYSCALL) {
		out->step = true;
		out->fixups |= UP_FIX_SYSCALL_RCX | UP_FIX_IP;
	} else if (insn->plan == UP_PLAN_STEP) {
		out->step = true;
		out->fixups |= UP_FIX_IP;
	}
	(void)transfers;
	/* even a stepped instruction gets the jump back: a thread that is let go there
	 * (a signal during the step, say) still finds its way home */
	return jump_back(insn, slot, out, insn->vaddr + insn->length);
}

void up_reloc_step_begin(const struct up_insn *insn, const struct up_reloc *rel, uint64_t slot,
			 struct user_regs_struct *regs, struct up_reloc_step *st)
{
	(void)insn;
	st->saved_scratch = 0;
	if (rel->fixups & UP_FIX_SCRATCH) {
		uint64_t *r = up_regs_gpr(regs, rel->scratch);

		st->saved_scratch = *r;
		*r = rel->scratch_value;
	}
	regs->rip = slot;
}

uint64_t up_reloc_home_rip(const struct up_insn *insn, const struct up_reloc *rel, uint64_t slot,
			   uint64_t rip)
{
	if (rip < slot || rip >= slot + rel->len)
		return 0;
	if (rip < slot + rel->insn_len)
		return insn->vaddr;
	return (insn->vaddr + insn->length) & (insn->mode == UP_MODE_32 ? 0xffffffffULL : ~0ULL);
}

int up_reloc_step_finish(const struct up_insn *insn, const struct up_reloc *rel, uint64_t slot,
			 struct user_regs_struct *regs, const struct up_reloc_step *st,
			 up_insn_mem_fn mem, void *ctx)
{
	const uint64_t next = (insn->vaddr + insn->length) &
			      (insn->mode == UP_MODE_32 ? 0xffffffffULL : ~0ULL);

	if (rel->fixups & UP_FIX_SCRATCH)
		*up_regs_gpr(regs, rel->scratch) = st->saved_scratch;
	if (rel->fixups & UP_FIX_SYSCALL_RCX) {
		regs->rcx = next;
		/* r11 got rflags with the trap flag of the step in it */
		regs->r11 = (regs->r11 & ~0x100ULL) | (regs->eflags & 0x100ULL);
	}
	if (rel->fixups & UP_FIX_CALL) {
		unsigned size = insn->mode == UP_MODE_32 ? 4 : 8;
		uint64_t sp = regs->rsp & (size == 4 ? 0xffffffffULL : ~0ULL);
		uint64_t ret = 0, want = (slot + rel->insn_len) & (size == 4 ? 0xffffffffULL : ~0ULL);
		int rc = mem(ctx, sp, &ret, size, false);

		if (rc)
			return rc;
		if (ret == want) {
			ret = next;
			rc = mem(ctx, sp, &ret, size, true);
			if (rc)
				return rc;
		}
	}
	if (rel->fixups & UP_FIX_IP) {
		uint64_t home = up_reloc_home_rip(insn, rel, slot, regs->rip);

		if (home)
			regs->rip = home;
	}
	return 0;
}
