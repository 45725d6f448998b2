// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the x86 instruction analyzer, relocator and emulator (src/arch/x86/).
 *
 * Input: one control byte, then the instruction bytes.
 *   bit 0     mode: 0 = 64-bit, 1 = 32-bit
 *   bit 1     slot distance: 0 = near (+1 GiB), 1 = far (+8 GiB; 32-bit: near the top)
 *   bit 2     the instruction's address: low (0x401000 / 0x8049000) or high
 *   bits 3-4  where the stack pointer sits in the fake stack window (middle, bottom
 *             edge, top edge, outside)
 *   bits 5-7  a flags pattern for conditional branches
 *
 * Checks: up_insn_length agrees with up_insn_analyze; a relocated instruction decodes
 * at the slot to exactly insn_len bytes with the same mnemonic and the same absolute
 * target, followed by a jump back to the next instruction; emulation either succeeds
 * with a rip the instruction can produce or fails with the registers untouched; the
 * step fixups bring rip home.  The bytes are in an exactly-sized heap buffer, so ASan
 * catches a read past their end.  FUZZ_VERBOSE=1 in the environment prints each
 * instruction's plan and relocation (for looking at a corpus with the replay build).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>

#include <Zydis/Zydis.h>

#include "arch/x86/insn.h"

#define STACK_BASE 0x7fff0000ULL
#define STACK_SIZE 512

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "fuzz_insn: check failed: %s (%s:%d)\n", #cond, \
				__FILE__, __LINE__);                                   \
			abort();                                                       \
		}                                                                      \
	} while (0)

struct fake_stack {
	uint8_t bytes[STACK_SIZE];
	unsigned accesses;
};

static int fake_mem(void *ctx, uint64_t addr, void *buf, size_t len, bool write)
{
	struct fake_stack *s = ctx;

	CHECK(len >= 1 && len <= 8);
	s->accesses++;
	if (addr < STACK_BASE || addr - STACK_BASE > STACK_SIZE ||
	    len > STACK_SIZE - (addr - STACK_BASE))
		return -EFAULT;
	if (write)
		memcpy(s->bytes + (addr - STACK_BASE), buf, len);
	else
		memcpy(buf, s->bytes + (addr - STACK_BASE), len);
	return 0;
}

static ZydisMachineMode machine(const struct up_insn *insn)
{
	return insn->mode == UP_MODE_64 ? ZYDIS_MACHINE_MODE_LONG_64
					: ZYDIS_MACHINE_MODE_LONG_COMPAT_32;
}

static uint64_t mask_of(const struct up_insn *insn)
{
	return insn->mode == UP_MODE_32 ? 0xffffffffULL : ~0ULL;
}

static void decode_at(const struct up_insn *insn, const uint8_t *code, size_t len,
		      ZydisDecodedInstruction *zi, ZydisDecodedOperand *zops)
{
	ZydisDecoder dec;

	CHECK(ZYAN_SUCCESS(ZydisDecoderInit(&dec, machine(insn),
					    insn->mode == UP_MODE_64 ? ZYDIS_STACK_WIDTH_64
								     : ZYDIS_STACK_WIDTH_32)));
	CHECK(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code, len, zi, zops)));
}

static void check_reloc(const struct up_insn *insn, uint64_t slot)
{
	const uint64_t mask = mask_of(insn), next = (insn->vaddr + insn->length) & mask;
	ZydisDecodedOperand zops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction zi;
	struct up_reloc rel;
	int rc;

	rc = up_reloc_build(insn, slot, &rel);
	if (getenv("FUZZ_VERBOSE")) {
		char text[160];

		fprintf(stderr, "fuzz_insn: %-30s %2u bytes %-7s %-14s slot %#llx reloc %d%s%s\n",
			up_insn_format(insn, text, sizeof(text)), insn->length,
			up_insn_plan_str(insn->plan), up_insn_reason_name(insn->reason),
			(unsigned long long)slot, rc, !rc && rel.step ? " step" : "",
			!rc && (rel.fixups & UP_FIX_SCRATCH) ? " scratch" : "");
	}
	CHECK(rc == 0 || rc == -ENOTSUP || rc == -ERANGE);
	if (insn->plan == UP_PLAN_REJECT)
		CHECK(rc == -ENOTSUP);
	if (rc)
		return;
	CHECK(rel.insn_len >= 1 && rel.insn_len <= UP_INSN_MAX);
	CHECK(rel.len > rel.insn_len && rel.len <= UP_SLOT_MAX);

	/* the instruction at the slot */
	decode_at(insn, rel.code, rel.insn_len, &zi, zops);
	CHECK(zi.length == rel.insn_len);
	CHECK(zi.mnemonic == insn->mnemonic);
	if (insn->is_branch_rel) {
		ZyanU64 abs = 0;

		CHECK(zops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && zops[0].imm.is_relative);
		CHECK(ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, &zops[0], slot, &abs)));
		CHECK((abs & mask) == insn->target);
	} else if (insn->rip_relative) {
		for (unsigned i = 0; i < zi.operand_count_visible; i++) {
			ZyanU64 abs = 0;

			if (zops[i].type != ZYDIS_OPERAND_TYPE_MEMORY)
				continue;
			if (rel.fixups & UP_FIX_SCRATCH) {
				CHECK(zops[i].mem.base != ZYDIS_REGISTER_RIP);
				continue;
			}
			CHECK(zops[i].mem.base == ZYDIS_REGISTER_RIP);
			CHECK(ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, &zops[i], slot, &abs)));
			CHECK((abs & mask) == insn->target);
		}
		if (rel.fixups & UP_FIX_SCRATCH) {
			CHECK(rel.step);
			CHECK(rel.scratch_value == insn->target);
			CHECK(rel.scratch != ZYDIS_REGISTER_NONE);
		}
	} else {
		CHECK(!memcmp(rel.code, insn->bytes, insn->length));
	}
	if (insn->plan == UP_PLAN_STEP)
		CHECK(rel.step);

	/* the jump back home */
	decode_at(insn, rel.code + rel.insn_len, rel.len - rel.insn_len, &zi, zops);
	CHECK(zi.mnemonic == ZYDIS_MNEMONIC_JMP);
	if (zops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
		ZyanU64 abs = 0;

		CHECK(rel.len == rel.insn_len + zi.length);
		CHECK(ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, &zops[0], slot + rel.insn_len,
							    &abs)));
		CHECK((abs & mask) == next);
	} else {
		uint64_t to;

		CHECK(insn->mode == UP_MODE_64);
		CHECK(zops[0].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		      zops[0].mem.base == ZYDIS_REGISTER_RIP && zops[0].mem.disp.value == 0);
		CHECK(rel.len == rel.insn_len + zi.length + 8);
		memcpy(&to, rel.code + rel.insn_len + zi.length, 8);
		CHECK(to == next);
	}

	/* where a thread stopped in the slot belongs at home */
	CHECK(up_reloc_home_rip(insn, &rel, slot, slot) == insn->vaddr);
	CHECK(up_reloc_home_rip(insn, &rel, slot, slot + rel.insn_len) == next);
	CHECK(up_reloc_home_rip(insn, &rel, slot, slot + rel.len) == 0);
	CHECK(slot == 0 || up_reloc_home_rip(insn, &rel, slot, slot - 1) == 0);

	/* a step that ran to its end: the fixups bring rip home */
	if (rel.step) {
		struct user_regs_struct regs = { 0 }, before;
		struct up_reloc_step st;
		struct fake_stack stack = { { 0 }, 0 };
		uint64_t ret = (slot + rel.insn_len) & mask;

		regs.rsp = STACK_BASE + 128;
		regs.rcx = 0x1234;
		before = regs;
		up_reloc_step_begin(insn, &rel, slot, &regs, &st);
		CHECK(regs.rip == slot);
		if (rel.fixups & UP_FIX_SCRATCH) {
			uint64_t *r = up_regs_gpr(&regs, rel.scratch);

			CHECK(r && *r == rel.scratch_value);
		}
		/* as if the instruction had pushed its slot return address (a call) */
		memcpy(stack.bytes + 128, &ret, insn->mode == UP_MODE_64 ? 8 : 4);
		regs.rip = (slot + rel.insn_len) & mask;
		rc = up_reloc_step_finish(insn, &rel, slot, &regs, &st, fake_mem, &stack);
		CHECK(rc == 0);
		CHECK(regs.rip == next);
		if (rel.fixups & UP_FIX_SCRATCH)
			CHECK(*up_regs_gpr(&regs, rel.scratch) == *up_regs_gpr(&before, rel.scratch));
		if (rel.fixups & UP_FIX_CALL) {
			uint64_t got = 0;

			memcpy(&got, stack.bytes + 128, insn->mode == UP_MODE_64 ? 8 : 4);
			CHECK(got == next);
		}
		if (rel.fixups & UP_FIX_SYSCALL_RCX)
			CHECK(regs.rcx == next);
	}
}

static void fake_regs(struct user_regs_struct *r, uint8_t ctl)
{
	static const uint64_t flags[8] = { 0x202, 0x246, 0xa83, 0x287, 0x893, 0x2c7, 0x203, 0xfd7 };
	static const uint64_t sp_at[4] = { STACK_BASE + 256, STACK_BASE + 4, STACK_BASE + STACK_SIZE,
					   0x1000 };
	uint64_t *w = (uint64_t *)r;

	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < sizeof(*r) / sizeof(uint64_t); i++)
		w[i] = STACK_BASE + (i * 40) % STACK_SIZE;
	r->rcx = ctl & 0x80 ? 1 : 0x100000001ULL;
	r->rsp = sp_at[(ctl >> 3) & 3];
	r->eflags = flags[ctl >> 5];
	r->fs_base = 0;
	r->gs_base = 0;
	if (!(ctl & 1))
		return;
	for (size_t i = 0; i < sizeof(*r) / sizeof(uint64_t); i++)
		w[i] &= 0xffffffffULL;
}

static void check_emulate(const struct up_insn *insn, uint8_t ctl)
{
	const uint64_t mask = mask_of(insn), next = (insn->vaddr + insn->length) & mask;
	static struct fake_stack stack;
	struct user_regs_struct regs, before;
	int rc;

	for (size_t i = 0; i < STACK_SIZE; i++)
		stack.bytes[i] = (uint8_t)(i * 13 + ctl);
	stack.accesses = 0;
	fake_regs(&regs, ctl);
	regs.rip = insn->vaddr;
	before = regs;
	rc = up_insn_emulate(insn, &regs, fake_mem, &stack);
	if (insn->plan != UP_PLAN_EMULATE)
		CHECK(rc == -ENOTSUP);
	if (rc) {
		CHECK(rc < 0);
		CHECK(!memcmp(&regs, &before, sizeof(regs)));
		return;
	}
	CHECK(insn->plan == UP_PLAN_EMULATE);
	if (insn->mode == UP_MODE_32) {
		CHECK(regs.rip <= 0xffffffffULL);
		CHECK(regs.rsp <= 0xffffffffULL);
	}
	switch (insn->emu) {
	case UP_EMU_NOP:
		CHECK(regs.rip == next);
		CHECK(!memcmp(&regs.r15, &before.r15, offsetof(struct user_regs_struct, rip)));
		CHECK(stack.accesses == 0);
		break;
	case UP_EMU_JMP:
		CHECK(regs.rip == insn->target);
		break;
	case UP_EMU_CALL:
		CHECK(regs.rip == insn->target);
		CHECK(regs.rsp == ((before.rsp - insn->op_size) & mask));
		break;
	case UP_EMU_JCC:
	case UP_EMU_LOOP:
	case UP_EMU_LOOPE:
	case UP_EMU_LOOPNE:
	case UP_EMU_JCXZ:
		CHECK(regs.rip == insn->target || regs.rip == next);
		break;
	case UP_EMU_PUSH_REG:
	case UP_EMU_PUSH_IMM:
		CHECK(regs.rip == next);
		CHECK(regs.rsp == ((before.rsp - insn->op_size) & mask));
		break;
	case UP_EMU_CALL_IND:
		CHECK(regs.rsp == ((before.rsp - insn->op_size) & mask));
		break;
	case UP_EMU_POP_REG:
		CHECK(regs.rip == next);
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct up_insn insn;
	uint8_t ctl, *buf;
	size_t len;
	uint64_t vaddr, slot;
	enum up_insn_mode mode;
	char text[160], tiny[6];
	unsigned n;

	if (size < 1 || size > 64)
		return 0;
	ctl = data[0];
	len = size - 1;
	buf = malloc(len ? len : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, len);

	mode = ctl & 1 ? UP_MODE_32 : UP_MODE_64;
	if (mode == UP_MODE_64) {
		vaddr = ctl & 4 ? 0x7f1234561000ULL : 0x401000ULL;
		slot = vaddr + (ctl & 2 ? 8ULL << 30 : 1ULL << 30);
	} else {
		vaddr = ctl & 4 ? 0xf7f01000ULL : 0x8049000ULL;
		slot = ctl & 2 ? 0xffffff00ULL : (vaddr + (1ULL << 30)) & 0xffffffffULL;
	}

	CHECK(up_insn_analyze(&insn, buf, len, vaddr, mode) == 0);
	n = up_insn_length(buf, len, mode);
	CHECK(n == insn.length);
	CHECK(insn.length <= len && insn.length <= UP_INSN_MAX);
	CHECK(insn.vaddr == vaddr && insn.mode == mode);
	CHECK((unsigned)insn.reason < UP_WHY_COUNT);
	CHECK((insn.plan == UP_PLAN_REJECT) == (insn.reason >= UP_WHY_REJECT_FIRST));
	CHECK(insn.length || insn.plan == UP_PLAN_REJECT);
	CHECK(!insn.length || !memcmp(insn.bytes, buf, insn.length));
	CHECK(strcmp(up_insn_reason_name(insn.reason), "?"));
	CHECK(strcmp(up_insn_plan_str(insn.plan), "?"));
	(void)up_insn_reason_str(insn.reason);
	up_insn_format(&insn, text, sizeof(text));
	CHECK(memchr(text, '\0', sizeof(text)));
	up_insn_format(&insn, tiny, sizeof(tiny));
	CHECK(memchr(tiny, '\0', sizeof(tiny)));

	check_reloc(&insn, slot);
	if (insn.plan == UP_PLAN_REJECT && insn.reason == UP_WHY_REJECT_INVALID)
		CHECK(insn.length == 0);
	check_emulate(&insn, ctl);
	free(buf);
	return 0;
}
