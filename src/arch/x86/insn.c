// SPDX-License-Identifier: MIT
/*
 * Instruction analysis: decode with Zydis, then plan.  The plan follows seed 003 and
 * today's kernel (arch/x86/kernel/uprobes.c), with the differences docs/insn-analysis.md
 * explains: branches, calls, returns, push/pop and nops are emulated; what does not
 * depend on where it runs is executed out of line as it is; rip-relative operands are
 * re-encoded for the slot; a few need a single step and a fixup; the rest is refused
 * with a reason.
 */
#include <errno.h>
#include <string.h>

#include "arch/x86/insn.h"

static bool decoder_for(ZydisDecoder *dec, enum up_insn_mode mode)
{
	if (mode == UP_MODE_64)
		return ZYAN_SUCCESS(ZydisDecoderInit(dec, ZYDIS_MACHINE_MODE_LONG_64,
						     ZYDIS_STACK_WIDTH_64));
	if (mode == UP_MODE_32)
		return ZYAN_SUCCESS(ZydisDecoderInit(dec, ZYDIS_MACHINE_MODE_LONG_COMPAT_32,
						     ZYDIS_STACK_WIDTH_32));
	return false;
}

unsigned up_insn_length(const void *buf, size_t len, enum up_insn_mode mode)
{
	ZydisDecodedInstruction zi;
	ZydisDecoder dec;

	if (!decoder_for(&dec, mode))
		return 0;
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, buf, len, &zi)))
		return 0;
	return zi.length;
}

static uint64_t mode_mask(const struct up_insn *insn)
{
	return insn->mode == UP_MODE_32 ? 0xffffffffULL : ~0ULL;
}

static bool is_seg(ZydisRegister r)
{
	return ZydisRegisterGetClass(r) == ZYDIS_REGCLASS_SEGMENT;
}

/* The memory operand among the visible ones, or NULL. */
static const ZydisDecodedOperand *mem_operand(const struct up_insn_dec *d)
{
	for (unsigned i = 0; i < d->zi.operand_count_visible; i++)
		if (d->zops[i].type == ZYDIS_OPERAND_TYPE_MEMORY)
			return &d->zops[i];
	return NULL;
}

static bool any_segment_register_written(const struct up_insn_dec *d)
{
	for (unsigned i = 0; i < d->zi.operand_count; i++) {
		const ZydisDecodedOperand *op = &d->zops[i];

		if (op->type == ZYDIS_OPERAND_TYPE_REGISTER && is_seg(op->reg.value) &&
		    (op->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			return true;
	}
	return false;
}

/* Refusals that depend only on what the instruction is. */
static enum up_insn_reason refusal(const struct up_insn *insn, const struct up_insn_dec *d)
{
	const ZydisDecodedInstruction *zi = &d->zi;

	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_INT3:
		return UP_WHY_REJECT_INT3;
	case ZYDIS_MNEMONIC_INT:
	case ZYDIS_MNEMONIC_INT1:
	case ZYDIS_MNEMONIC_INTO:
		return UP_WHY_REJECT_INT;
	case ZYDIS_MNEMONIC_IRET:
	case ZYDIS_MNEMONIC_IRETD:
	case ZYDIS_MNEMONIC_IRETQ:
	case ZYDIS_MNEMONIC_SYSRET:
	case ZYDIS_MNEMONIC_SYSEXIT:
		return UP_WHY_REJECT_IRET;
	case ZYDIS_MNEMONIC_SYSENTER:
	case ZYDIS_MNEMONIC_LSS:
	case ZYDIS_MNEMONIC_LDS:
	case ZYDIS_MNEMONIC_LES:
	case ZYDIS_MNEMONIC_LFS:
	case ZYDIS_MNEMONIC_LGS:
		return UP_WHY_REJECT_SYSTEM;
	case ZYDIS_MNEMONIC_HLT:
	case ZYDIS_MNEMONIC_CLI:
	case ZYDIS_MNEMONIC_STI:
	case ZYDIS_MNEMONIC_LGDT:
	case ZYDIS_MNEMONIC_LIDT:
	case ZYDIS_MNEMONIC_LLDT:
	case ZYDIS_MNEMONIC_LTR:
	case ZYDIS_MNEMONIC_LMSW:
	case ZYDIS_MNEMONIC_INVLPG:
	case ZYDIS_MNEMONIC_INVD:
	case ZYDIS_MNEMONIC_WBINVD:
		return UP_WHY_REJECT_PRIVILEGED;
	case ZYDIS_MNEMONIC_IN:
	case ZYDIS_MNEMONIC_OUT:
	case ZYDIS_MNEMONIC_INSB:
	case ZYDIS_MNEMONIC_INSW:
	case ZYDIS_MNEMONIC_INSD:
	case ZYDIS_MNEMONIC_OUTSB:
	case ZYDIS_MNEMONIC_OUTSW:
	case ZYDIS_MNEMONIC_OUTSD:
		return UP_WHY_REJECT_IO;
	/*
	 * An int3 aborts a transaction without a trap, so a probe only ever fires
	 * outside one: xtest and xabort (a no-op there) are then fine, but xend would
	 * #GP where the program committed, and xbegin's abort path is rel32 from the
	 * slot.
	 */
	case ZYDIS_MNEMONIC_XBEGIN:
	case ZYDIS_MNEMONIC_XEND:
		return UP_WHY_REJECT_TSX;
	case ZYDIS_MNEMONIC_UD0:
	case ZYDIS_MNEMONIC_UD1:
	case ZYDIS_MNEMONIC_UD2:
		return UP_WHY_REJECT_UNDEFINED;
	case ZYDIS_MNEMONIC_BOUND:
		return UP_WHY_REJECT_BOUND;
	case ZYDIS_MNEMONIC_ENCLU:
	case ZYDIS_MNEMONIC_ENCLS:
	case ZYDIS_MNEMONIC_ENCLV:
		return UP_WHY_REJECT_ENCLAVE;
	default:
		break;
	}
	if (zi->attributes & ZYDIS_ATTRIB_IS_PRIVILEGED)
		return UP_WHY_REJECT_PRIVILEGED;
	if (zi->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR)
		return UP_WHY_REJECT_FAR;
	/* a segment load (mov/pop to a segment register): mov/pop ss also masks traps */
	if (any_segment_register_written(d))
		return UP_WHY_REJECT_SYSTEM;
	/* 66 on a near branch: 16-bit rip on AMD, ignored on Intel -- not ours to pick */
	if (zi->meta.branch_type != ZYDIS_BRANCH_TYPE_NONE &&
	    (zi->attributes & ZYDIS_ATTRIB_HAS_OPERANDSIZE))
		return UP_WHY_REJECT_PREFIX;
	/* 67 on a rip-relative operand: the address is truncated to 32 bits */
	for (unsigned i = 0; i < zi->operand_count_visible; i++)
		if (d->zops[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		    d->zops[i].mem.base == ZYDIS_REGISTER_EIP)
			return UP_WHY_REJECT_PREFIX;
	/*
	 * A bnd prefix on a branch is kept: without MPX (gone from the kernel since 5.6
	 * and from CPUs since Ice Lake) it does nothing, and CET PLTs are full of
	 * `bnd jmp`.  bound itself can raise #BR and is refused above.
	 */
	return UP_WHY_NONE;
}

static bool is_cond_branch(ZydisMnemonic m, enum up_insn_emu *emu)
{
	switch (m) {
	case ZYDIS_MNEMONIC_LOOP:
		*emu = UP_EMU_LOOP;
		return true;
	case ZYDIS_MNEMONIC_LOOPE:
		*emu = UP_EMU_LOOPE;
		return true;
	case ZYDIS_MNEMONIC_LOOPNE:
		*emu = UP_EMU_LOOPNE;
		return true;
	case ZYDIS_MNEMONIC_JCXZ:
	case ZYDIS_MNEMONIC_JECXZ:
	case ZYDIS_MNEMONIC_JRCXZ:
		*emu = UP_EMU_JCXZ;
		return true;
	default:
		return false;
	}
}

static bool is_nop(const ZydisDecodedInstruction *zi)
{
	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_NOP:
	case ZYDIS_MNEMONIC_ENDBR32:
	case ZYDIS_MNEMONIC_ENDBR64:
	case ZYDIS_MNEMONIC_PAUSE:
		return true;
	default:
		return false;
	}
}

/* Decides emulation; false when the instruction is not one the emulator applies. */
static bool plan_emulation(struct up_insn *insn, const struct up_insn_dec *d)
{
	const ZydisDecodedInstruction *zi = &d->zi;
	const ZydisDecodedOperand *op0 = &d->zops[0];
	const bool branch = zi->meta.branch_type != ZYDIS_BRANCH_TYPE_NONE;
	const unsigned stack = insn->mode == UP_MODE_64 ? 8 : 4;
	enum up_insn_emu loop;

	if (is_nop(zi)) {
		insn->emu = UP_EMU_NOP;
		insn->reason = UP_WHY_EMU_NOP;
		return true;
	}
	/* a 16-bit near branch truncates rip: leave it alone */
	if (branch && zi->operand_width == 16) {
		insn->plan = UP_PLAN_REJECT;
		insn->reason = UP_WHY_REJECT_PREFIX;
		return true;
	}
	if (branch && zi->operand_count_visible >= 1 && op0->type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
	    op0->imm.is_relative) {
		insn->is_branch_rel = true;
		insn->target = (insn->vaddr + zi->length + (uint64_t)op0->imm.value.s) &
			       mode_mask(insn);
		if (zi->mnemonic == ZYDIS_MNEMONIC_JMP) {
			insn->emu = UP_EMU_JMP;
			insn->reason = UP_WHY_EMU_JMP;
		} else if (zi->mnemonic == ZYDIS_MNEMONIC_CALL) {
			insn->emu = UP_EMU_CALL;
			insn->reason = UP_WHY_EMU_CALL;
			insn->op_size = stack;
		} else if (is_cond_branch(zi->mnemonic, &loop)) {
			insn->emu = loop;
			insn->reason = UP_WHY_EMU_LOOP;
		} else {
			insn->emu = UP_EMU_JCC;
			insn->reason = UP_WHY_EMU_JCC;
			insn->cc = zi->opcode & 0xf;
		}
		return true;
	}
	if (zi->mnemonic == ZYDIS_MNEMONIC_RET) {
		insn->emu = UP_EMU_RET;
		insn->reason = UP_WHY_EMU_RET;
		insn->op_size = stack;
		if (zi->operand_count_visible >= 1 && op0->type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
			insn->imm = (int64_t)(op0->imm.value.u & 0xffff);
		return true;
	}
	if ((zi->mnemonic == ZYDIS_MNEMONIC_JMP || zi->mnemonic == ZYDIS_MNEMONIC_CALL) &&
	    (op0->type == ZYDIS_OPERAND_TYPE_REGISTER || op0->type == ZYDIS_OPERAND_TYPE_MEMORY)) {
		const bool call = zi->mnemonic == ZYDIS_MNEMONIC_CALL;

		/* a 32-bit process's fs:/gs: have bases ptrace does not show: step it */
		if (op0->type == ZYDIS_OPERAND_TYPE_MEMORY && insn->mode == UP_MODE_32 &&
		    (op0->mem.segment == ZYDIS_REGISTER_FS || op0->mem.segment == ZYDIS_REGISTER_GS)) {
			insn->plan = UP_PLAN_STEP;
			insn->reason = call ? UP_WHY_STEP_CALL_SEG : UP_WHY_STEP_JMP_SEG;
			insn->op_size = call ? stack : 0;
			return true;
		}
		insn->emu = call ? UP_EMU_CALL_IND : UP_EMU_JMP_IND;
		insn->reason = call ? UP_WHY_EMU_CALL_IND : UP_WHY_EMU_JMP_IND;
		if (call)
			insn->op_size = stack;
		return true;
	}
	/* push reg / push imm / pop reg; not segment registers, not memory */
	if (zi->mnemonic == ZYDIS_MNEMONIC_PUSH) {
		if (op0->type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    ZydisRegisterGetClass(op0->reg.value) != ZYDIS_REGCLASS_SEGMENT) {
			insn->emu = UP_EMU_PUSH_REG;
		} else if (op0->type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
			insn->emu = UP_EMU_PUSH_IMM;
			insn->imm = op0->imm.value.s;
			if (zi->operand_width == 16)
				insn->imm = (int16_t)insn->imm;
			else if (zi->operand_width == 32)
				insn->imm = (int32_t)insn->imm;
		} else {
			return false;
		}
		insn->reason = UP_WHY_EMU_PUSH;
		insn->op_size = zi->operand_width / 8;
		return true;
	}
	if (zi->mnemonic == ZYDIS_MNEMONIC_POP && op0->type == ZYDIS_OPERAND_TYPE_REGISTER &&
	    ZydisRegisterGetClass(op0->reg.value) != ZYDIS_REGCLASS_SEGMENT) {
		insn->emu = UP_EMU_POP_REG;
		insn->reason = UP_WHY_EMU_POP;
		insn->op_size = zi->operand_width / 8;
		return true;
	}
	return false;
}

/* What a probe keeps of operand 0 (see struct up_insn_op). */
static void keep_op0(struct up_insn *insn, const struct up_insn_dec *d)
{
	const ZydisDecodedOperand *op = &d->zops[0];

	if (!d->zi.operand_count)
		return;
	insn->op0.type = op->type;
	if (op->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		insn->op0.reg = op->reg.value;
	} else if (op->type == ZYDIS_OPERAND_TYPE_MEMORY) {
		insn->op0.base = op->mem.base;
		insn->op0.index = op->mem.index;
		insn->op0.segment = op->mem.segment;
		insn->op0.scale = op->mem.scale;
		insn->op0.has_disp = op->mem.disp.has_displacement;
		insn->op0.disp = op->mem.disp.value;
	}
}

int up_insn_decode(const struct up_insn *insn, struct up_insn_dec *d)
{
	ZydisDecoder dec;

	if (!insn->length || !decoder_for(&dec, (enum up_insn_mode)insn->mode))
		return -EINVAL;
	return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, insn->bytes, insn->length, &d->zi,
						   d->zops))
		       ? 0
		       : -EINVAL;
}

int up_insn_analyze(struct up_insn *insn, const void *buf, size_t len, uint64_t vaddr,
		    enum up_insn_mode mode)
{
	const ZydisDecodedOperand *mem;
	struct up_insn_dec dd, *d = &dd;
	enum up_insn_reason why;
	ZydisDecoder dec;
	ZyanStatus st;

	if (!decoder_for(&dec, mode))
		return -EINVAL;
	memset(insn, 0, sizeof(*insn));
	insn->vaddr = vaddr;
	insn->mode = mode;
	insn->plan = UP_PLAN_REJECT;

	st = ZydisDecoderDecodeFull(&dec, buf, len, &d->zi, d->zops);
	if (!ZYAN_SUCCESS(st)) {
		insn->reason = st == ZYDIS_STATUS_NO_MORE_DATA ? UP_WHY_REJECT_TRUNCATED
							       : UP_WHY_REJECT_INVALID;
		return 0;
	}
	insn->length = d->zi.length;
	memcpy(insn->bytes, buf, insn->length);
	insn->mnemonic = d->zi.mnemonic;
	insn->address_width = d->zi.address_width;
	insn->operand_width = d->zi.operand_width;
	insn->disp_offset = d->zi.raw.disp.offset;
	keep_op0(insn, d);

	mem = mem_operand(d);
	if (mem && mem->mem.base == ZYDIS_REGISTER_RIP) {
		insn->rip_relative = true;
		insn->target = (vaddr + insn->length + (uint64_t)mem->mem.disp.value) &
			       mode_mask(insn);
	}

	/* before the refusals: its hidden operands load cs and ss */
	if (d->zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL) {
		insn->plan = UP_PLAN_STEP;
		insn->reason = UP_WHY_STEP_SYSCALL;
		return 0;
	}
	why = refusal(insn, d);
	if (why != UP_WHY_NONE) {
		insn->reason = why;
		return 0;
	}
	insn->plan = UP_PLAN_EMULATE;
	if (plan_emulation(insn, d))
		return 0;
	insn->plan = UP_PLAN_XOL;
	insn->reason = insn->rip_relative ? UP_WHY_XOL_RIPREL : UP_WHY_XOL_PLAIN;
	return 0;
}

const char *up_insn_plan_str(enum up_insn_plan plan)
{
	switch (plan) {
	case UP_PLAN_EMULATE:
		return "emulate";
	case UP_PLAN_XOL:
		return "xol";
	case UP_PLAN_STEP:
		return "step";
	case UP_PLAN_REJECT:
		return "reject";
	}
	return "?";
}

static const struct {
	const char *name, *str;
} reasons[UP_WHY_COUNT] = {
	[UP_WHY_NONE] = { "none", "not analysed" },
	[UP_WHY_EMU_NOP] = { "nop", "a no-op: nothing to do but advance rip" },
	[UP_WHY_EMU_JMP] = { "jmp", "direct jump: rip set to the target" },
	[UP_WHY_EMU_CALL] = { "call", "direct call: return address pushed, rip set to the target" },
	[UP_WHY_EMU_JCC] = { "jcc", "conditional jump: the condition is evaluated on the flags" },
	[UP_WHY_EMU_LOOP] = { "loop", "loop/jcxz: the count register is tested and updated" },
	[UP_WHY_EMU_RET] = { "ret", "near return: rip popped from the stack" },
	[UP_WHY_EMU_JMP_IND] = { "jmp-indirect", "indirect jump: target read from a register or memory" },
	[UP_WHY_EMU_CALL_IND] = { "call-indirect",
				  "indirect call: target read, return address pushed" },
	[UP_WHY_EMU_PUSH] = { "push", "push of a register or immediate" },
	[UP_WHY_EMU_POP] = { "pop", "pop into a register" },
	[UP_WHY_XOL_PLAIN] = { "plain", "position-independent: runs unchanged in a slot" },
	[UP_WHY_XOL_RIPREL] = { "riprel", "rip-relative operand re-encoded for the slot" },
	[UP_WHY_STEP_SYSCALL] = { "syscall", "syscall: stepped, rcx set to the home return address" },
	[UP_WHY_STEP_CALL_SEG] = { "call-seg",
				   "call through fs:/gs: memory: stepped, return address fixed" },
	[UP_WHY_STEP_JMP_SEG] = { "jmp-seg", "jump through fs:/gs: memory: stepped" },
	[UP_WHY_STEP_RIPREL_FAR] = { "riprel-far",
				     "rip-relative, slot beyond 2 GiB: stepped through a scratch register" },
	[UP_WHY_REJECT_INT3] = { "int3", "an int3 is already there (another debugger or a trap)" },
	[UP_WHY_REJECT_INT] = { "int", "software interrupt (int n, int1, into): enters the kernel" },
	[UP_WHY_REJECT_IRET] = { "iret", "iret/sysret/sysexit: returns from the kernel" },
	[UP_WHY_REJECT_PRIVILEGED] = { "privileged", "privileged instruction: faults in user mode" },
	[UP_WHY_REJECT_SYSTEM] = { "system",
				   "segment load or sysenter: changes state a slot cannot keep" },
	[UP_WHY_REJECT_IO] = { "io", "port I/O (in/out/ins/outs)" },
	[UP_WHY_REJECT_FAR] = { "far", "far jump, call or return: changes the code segment" },
	[UP_WHY_REJECT_TSX] = { "tsx", "xbegin/xend: a probe fires only outside a transaction, "
				       "where these would change the program's path" },
	[UP_WHY_REJECT_UNDEFINED] = { "undefined", "ud0/ud1/ud2: meant to raise #UD" },
	[UP_WHY_REJECT_INVALID] = { "invalid", "the bytes do not decode to an instruction" },
	[UP_WHY_REJECT_TRUNCATED] = { "truncated", "the bytes end in the middle of an instruction" },
	[UP_WHY_REJECT_PREFIX] = { "prefix", "a 66 prefix on a branch or a 67 prefix on a rip-relative "
				       "operand truncates the address" },
	[UP_WHY_REJECT_BOUND] = { "bound", "bound: raises #BR when the index is out of bounds" },
	[UP_WHY_REJECT_ENCLAVE] = { "enclave", "SGX enclave instruction (enclu/encls/enclv)" },
	[UP_WHY_REJECT_UNRELOCATABLE] = { "unrelocatable",
					  "cannot be re-encoded to run from the slot" },
};

const char *up_insn_reason_str(enum up_insn_reason why)
{
	return (unsigned)why < UP_WHY_COUNT && reasons[why].str ? reasons[why].str : "?";
}

const char *up_insn_reason_name(enum up_insn_reason why)
{
	return (unsigned)why < UP_WHY_COUNT && reasons[why].name ? reasons[why].name : "?";
}

char *up_insn_format(const struct up_insn *insn, char *buf, size_t size)
{
	struct up_insn_dec d;
	ZydisFormatter fmt;

	if (!size)
		return buf;
	buf[0] = '\0';
	if (!insn->length)
		return buf;
	if (!ZYAN_SUCCESS(ZydisFormatterInit(&fmt, ZYDIS_FORMATTER_STYLE_ATT)) ||
	    up_insn_decode(insn, &d))
		return buf;
	if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&fmt, &d.zi, d.zops,
							  d.zi.operand_count_visible, buf,
							  size, insn->vaddr, NULL))) {
		/* the buffer was too small: keep what fits */
		buf[size - 1] = '\0';
	}
	return buf;
}
