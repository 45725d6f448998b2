// SPDX-License-Identifier: MIT
/*
 * Relocation, decode -> relocate -> decode:
 *
 *  - over every instruction of libc's executable sections (linear sweep, libelf): each
 *    xol-planned one, relocated to a slot 1 GiB away, decodes back (Zydis, at the slot)
 *    to the same instruction -- mnemonic, prefixes that matter, every operand, the same
 *    absolute address for rip-relative operands -- followed by a jmp to the next
 *    instruction at home.  At 8 GiB a rip-relative one must turn into a single-step
 *    through a scratch register the instruction does not use, with the operand now
 *    [scratch]; the others stay xol with an absolute jump back.  Emulate-planned ones
 *    relocate too (the fallback), step-planned ones keep their fixups, rejected ones
 *    give -ENOTSUP.
 *  - hand-picked instructions run natively twice, at home and relocated (slot code on
 *    the CPU, then up_reloc_step_finish for a step), from the same registers: both
 *    runs must end in the same state.  That covers syscall (rcx), call (the return
 *    address), the scratch register, and jumps back.
 *  - up_reloc_home_rip, 32-bit slots (4-byte return addresses, wrapping distances).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "arch/x86/insn.h"
#include "insn_test_util.h"

#ifndef UPROBE_TEST_LIBC
#define UPROBE_TEST_LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#endif

#define GiB (1ULL << 30)

static ZydisDecoder zdec64, zdec32;

static const ZydisDecoder *decoder(unsigned mode)
{
	return mode == 32 ? &zdec32 : &zdec64;
}

static ZydisMachineMode zmode(unsigned mode)
{
	return mode == 32 ? ZYDIS_MACHINE_MODE_LONG_COMPAT_32 : ZYDIS_MACHINE_MODE_LONG_64;
}

static uint64_t mask(unsigned mode)
{
	return mode == 32 ? 0xffffffffULL : ~0ULL;
}

struct dec {
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t at;
};

static bool decode(struct dec *d, unsigned mode, const void *b, size_t n, uint64_t at)
{
	d->at = at;
	return ZYAN_SUCCESS(ZydisDecoderDecodeFull(decoder(mode), b, n, &d->zi, d->ops));
}

static uint64_t absolute(const struct dec *d, const ZydisDecodedOperand *op)
{
	ZyanU64 a = 0;

	if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d->zi, op, d->at, &a)))
		return ~0ULL;
	/* Zydis does not wrap a 32-bit process's eip at 4 GiB; the CPU does */
	return d->zi.machine_mode == ZYDIS_MACHINE_MODE_LONG_64 ? a : a & 0xffffffffULL;
}

static ZydisRegister full(unsigned mode, ZydisRegister r)
{
	if (r == ZYDIS_REGISTER_NONE)
		return r;
	return ZydisRegisterGetLargestEnclosing(zmode(mode), r);
}

/* ---- failure reporting ------------------------------------------------------------ */

static unsigned failures;
static char where[200];

#define MAX_REPORTS 40

static void rfail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void rfail(const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	failures++;
	if (failures > MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	print_error("FAIL %s: %s\n", where, msg);
}

static void set_where(const struct up_insn *insn, const char *what, uint64_t slot)
{
	char hex[64], text[96];

	up_insn_format(insn, text, sizeof(text));
	snprintf(where, sizeof(where), "%s 0x%" PRIx64 " [%s] '%s' -> slot 0x%" PRIx64, what,
		 insn->vaddr, itu_hex(insn->bytes, insn->length, hex, sizeof(hex)), text, slot);
}

static void dump_code(const struct up_reloc *rel)
{
	char hex[3 * UP_SLOT_MAX + 1];

	if (failures <= MAX_REPORTS)
		print_error("     slot code (len %u, insn_len %u, step %d, fixups 0x%x): %s\n",
			    rel->len, rel->insn_len, rel->step, rel->fixups,
			    itu_hex(rel->code, rel->len, hex, sizeof(hex)));
}

/* ---- comparing two decodings ------------------------------------------------------- */

#define KEPT_ATTRIBS                                                                       \
	(ZYDIS_ATTRIB_HAS_LOCK | ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE |               \
	 ZYDIS_ATTRIB_HAS_REPNE | ZYDIS_ATTRIB_HAS_BND | ZYDIS_ATTRIB_HAS_XACQUIRE |          \
	 ZYDIS_ATTRIB_HAS_XRELEASE | ZYDIS_ATTRIB_HAS_NOTRACK)

/*
 * a at home and b in the slot are the same instruction.  scratch: the operand that
 * was rip-relative in a is [scratch] in b (ZYDIS_REGISTER_NONE: still rip-relative,
 * same absolute address).
 */
static bool same_insn(unsigned mode, const struct dec *a, const struct dec *b,
		      ZydisRegister scratch)
{
	const ZydisDecodedInstruction *x = &a->zi, *y = &b->zi;
	unsigned i;

	if (x->mnemonic != y->mnemonic) {
		rfail("mnemonic %s became %s", ZydisMnemonicGetString(x->mnemonic),
		      ZydisMnemonicGetString(y->mnemonic));
		return false;
	}
	if (x->operand_count != y->operand_count ||
	    x->operand_count_visible != y->operand_count_visible) {
		rfail("%u operands (%u visible) became %u (%u)", x->operand_count,
		      x->operand_count_visible, y->operand_count, y->operand_count_visible);
		return false;
	}
	if ((x->attributes & KEPT_ATTRIBS) != (y->attributes & KEPT_ATTRIBS)) {
		rfail("prefix attributes 0x%" PRIx64 " became 0x%" PRIx64,
		      (uint64_t)(x->attributes & KEPT_ATTRIBS), (uint64_t)(y->attributes & KEPT_ATTRIBS));
		return false;
	}
	if (x->operand_width != y->operand_width || x->address_width != y->address_width) {
		rfail("operand/address width %u/%u became %u/%u", x->operand_width,
		      x->address_width, y->operand_width, y->address_width);
		return false;
	}
	if (x->avx.vector_length != y->avx.vector_length || x->avx.mask.mode != y->avx.mask.mode ||
	    x->avx.mask.reg != y->avx.mask.reg || x->avx.broadcast.mode != y->avx.broadcast.mode ||
	    x->avx.rounding.mode != y->avx.rounding.mode || x->avx.has_sae != y->avx.has_sae ||
	    x->avx.has_eviction_hint != y->avx.has_eviction_hint) {
		rfail("AVX attributes (vector length, mask, broadcast, rounding, sae) changed");
		return false;
	}
	for (i = 0; i < x->operand_count; i++) {
		const ZydisDecodedOperand *p = &a->ops[i], *q = &b->ops[i];
		/* an immediate may take a shorter or longer encoding: its value must stay */
		bool imm = p->type == ZYDIS_OPERAND_TYPE_IMMEDIATE;

		if (p->type != q->type || p->visibility != q->visibility ||
		    p->actions != q->actions || p->element_type != q->element_type ||
		    (!imm && (p->size != q->size || p->element_size != q->element_size ||
				  p->element_count != q->element_count))) {
			rfail("operand %u: type/visibility/actions/size %d/%d/%d/%u became "
			      "%d/%d/%d/%u",
			      i, p->type, p->visibility, p->actions, p->size, q->type, q->visibility,
			      q->actions, q->size);
			return false;
		}
		switch (p->type) {
		case ZYDIS_OPERAND_TYPE_REGISTER:
			if (p->reg.value != q->reg.value) {
				rfail("operand %u: register %s became %s", i,
				      ZydisRegisterGetString(p->reg.value),
				      ZydisRegisterGetString(q->reg.value));
				return false;
			}
			break;
		case ZYDIS_OPERAND_TYPE_MEMORY:
			if (p->mem.type != q->mem.type || p->mem.segment != q->mem.segment) {
				rfail("operand %u: memory type/segment changed", i);
				return false;
			}
			if (p->mem.base == ZYDIS_REGISTER_RIP || p->mem.base == ZYDIS_REGISTER_EIP) {
				if (scratch != ZYDIS_REGISTER_NONE) {
					if (q->mem.base != scratch || q->mem.index != ZYDIS_REGISTER_NONE ||
					    q->mem.disp.value != 0) {
						rfail("operand %u: rip-relative became base %s index %s "
						      "disp %" PRId64 ", expected (%s)",
						      i, ZydisRegisterGetString(q->mem.base),
						      ZydisRegisterGetString(q->mem.index),
						      q->mem.disp.value, ZydisRegisterGetString(scratch));
						return false;
					}
				} else if (q->mem.base != p->mem.base || absolute(a, p) != absolute(b, q)) {
					rfail("operand %u: rip-relative address 0x%" PRIx64
					      " became 0x%" PRIx64 " (base %s)",
					      i, absolute(a, p), absolute(b, q),
					      ZydisRegisterGetString(q->mem.base));
					return false;
				}
			} else if (p->mem.base != q->mem.base || p->mem.index != q->mem.index ||
				   p->mem.scale != q->mem.scale ||
				   p->mem.disp.value != q->mem.disp.value) {
				rfail("operand %u: memory operand changed", i);
				return false;
			}
			break;
		case ZYDIS_OPERAND_TYPE_IMMEDIATE:
			if (p->imm.is_relative != q->imm.is_relative ||
			    p->imm.is_signed != q->imm.is_signed) {
				rfail("operand %u: immediate kind changed", i);
				return false;
			}
			if (p->imm.is_relative) {
				if (absolute(a, p) != absolute(b, q)) {
					rfail("operand %u: branch target 0x%" PRIx64 " became 0x%" PRIx64,
					      i, absolute(a, p), absolute(b, q));
					return false;
				}
			} else if (p->imm.value.u != q->imm.value.u) {
				rfail("operand %u: immediate 0x%" PRIx64 " became 0x%" PRIx64, i,
				      (uint64_t)p->imm.value.u, (uint64_t)q->imm.value.u);
				return false;
			}
			break;
		case ZYDIS_OPERAND_TYPE_POINTER:
			if (p->ptr.segment != q->ptr.segment || p->ptr.offset != q->ptr.offset) {
				rfail("operand %u: far pointer changed", i);
				return false;
			}
			break;
		default:
			break;
		}
	}
	(void)mode;
	return true;
}

/*
 * code[from..len) of the slot is a jmp to `to`: a rel32 jmp, or jmp *disp(%rip) with
 * the 8-byte address inside the slot code.
 */
static bool jumps_back(unsigned mode, const struct up_reloc *rel, uint64_t slot, unsigned from,
		       uint64_t to, bool *absolute_form)
{
	struct dec j;
	uint64_t target;

	if (from >= rel->len) {
		rfail("no jump back: insn_len %u, len %u", from, rel->len);
		return false;
	}
	if (!decode(&j, mode, rel->code + from, rel->len - from, slot + from) ||
	    j.zi.mnemonic != ZYDIS_MNEMONIC_JMP) {
		rfail("code[%u..%u) is not a jmp", from, rel->len);
		return false;
	}
	if (absolute_form)
		*absolute_form = false;
	if (j.ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
		target = absolute(&j, &j.ops[0]);
	} else if (j.ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY &&
		   (j.ops[0].mem.base == ZYDIS_REGISTER_RIP ||
		    (mode == 32 && j.ops[0].mem.base == ZYDIS_REGISTER_NONE &&
		     j.ops[0].mem.index == ZYDIS_REGISTER_NONE))) {
		uint64_t p = absolute(&j, &j.ops[0]);
		unsigned w = mode == 32 ? 4 : 8;

		if (p < slot || p + w > slot + rel->len) {
			rfail("the jump back's pointer at 0x%" PRIx64 " is outside the slot code", p);
			return false;
		}
		target = 0;
		memcpy(&target, rel->code + (p - slot), w);
		if (absolute_form)
			*absolute_form = true;
	} else {
		rfail("the jump back is an unexpected jmp form");
		return false;
	}
	if (target != (to & mask(mode))) {
		rfail("the jump back goes to 0x%" PRIx64 ", not 0x%" PRIx64, target, to & mask(mode));
		return false;
	}
	return true;
}

/* the register the scratch rewrite took is not one the instruction touches */
static bool scratch_unused(unsigned mode, const struct dec *d, ZydisRegister scratch)
{
	unsigned i;

	if (ZydisRegisterGetClass(scratch) != ZYDIS_REGCLASS_GPR64 ||
	    scratch == ZYDIS_REGISTER_RSP) {
		rfail("scratch register %s is not a 64-bit GPR other than rsp",
		      ZydisRegisterGetString(scratch));
		return false;
	}
	for (i = 0; i < d->zi.operand_count; i++) {
		const ZydisDecodedOperand *op = &d->ops[i];

		if ((op->type == ZYDIS_OPERAND_TYPE_REGISTER && full(mode, op->reg.value) == scratch) ||
		    (op->type == ZYDIS_OPERAND_TYPE_MEMORY &&
		     (full(mode, op->mem.base) == scratch || full(mode, op->mem.index) == scratch))) {
			rfail("scratch register %s is operand %u of the instruction",
			      ZydisRegisterGetString(scratch), i);
			return false;
		}
	}
	return true;
}

/* ---- the libc sweep -------------------------------------------------------------------- */

struct sweep {
	unsigned long total, invalid, xol, riprel, emulate, emulate_range, step, reject;
	unsigned long far_scratch, far_plain;
};

static const struct itu_mem no_mem; /* every access fails */

static void check_far_scratch(const struct up_insn *insn, const struct dec *home,
			      const struct up_reloc *rel, uint64_t slot)
{
	struct user_regs_struct regs, before;
	struct itu_mem mem = no_mem;
	struct up_reloc_step st;
	unsigned long long *s;
	struct dec d;
	int rc;

	if (!rel->step || !(rel->fixups & UP_FIX_SCRATCH)) {
		rfail("at 8 GiB: step %d fixups 0x%x, expected a step with UP_FIX_SCRATCH",
		      rel->step, rel->fixups);
		return;
	}
	if (!scratch_unused(64, home, rel->scratch))
		return;
	if (rel->scratch_value != insn->target)
		rfail("scratch value 0x%" PRIx64 ", the operand's address is 0x%" PRIx64,
		      rel->scratch_value, insn->target);
	if (!decode(&d, 64, rel->code, rel->insn_len, slot) || d.zi.length != rel->insn_len) {
		rfail("the rewritten instruction does not decode to %u bytes", rel->insn_len);
		return;
	}
	if (!same_insn(64, home, &d, rel->scratch))
		return;

	/* begin: rip to the slot, scratch loaded; finish: rip home, scratch restored */
	memset(&regs, 0, sizeof(regs));
	regs.rax = 0x1001, regs.rbx = 0x1002, regs.rcx = 0x1003, regs.rdx = 0x1004;
	regs.rsi = 0x1005, regs.rdi = 0x1006, regs.rbp = 0x1007, regs.rsp = 0x7ffe0000;
	regs.r8 = 0x1008, regs.r9 = 0x1009, regs.r10 = 0x100a, regs.r11 = 0x100b;
	regs.r12 = 0x100c, regs.r13 = 0x100d, regs.r14 = 0x100e, regs.r15 = 0x100f;
	regs.rip = insn->vaddr;
	regs.eflags = 0x246;
	before = regs;
	s = (unsigned long long *)up_regs_gpr(&regs, rel->scratch);
	if (!s) {
		rfail("up_regs_gpr(%s) is NULL", ZydisRegisterGetString(rel->scratch));
		return;
	}
	up_reloc_step_begin(insn, rel, slot, &regs, &st);
	if (regs.rip != slot || *s != rel->scratch_value)
		rfail("after step_begin: rip 0x%llx scratch 0x%llx, expected 0x%" PRIx64
		      " and 0x%" PRIx64,
		      regs.rip, *s, slot, rel->scratch_value);
	regs.rip = slot + rel->insn_len; /* the step */
	rc = up_reloc_step_finish(insn, rel, slot, &regs, &st, itu_mem_fn, &mem);
	before.rip = insn->vaddr + insn->length;
	if (rc || memcmp(&regs, &before, sizeof(regs)))
		rfail("after step_finish (%d): rip 0x%llx (expected 0x%llx), scratch 0x%llx "
		      "(expected 0x%llx)",
		      rc, regs.rip, before.rip, *s,
		      *(unsigned long long *)up_regs_gpr(&before, rel->scratch));
}

static void sweep_one(struct sweep *sw, const struct up_insn *insn)
{
	const uint64_t va = insn->vaddr;
	const uint64_t near = (va + GiB) & ~63ULL, far = (va + 8 * GiB) & ~63ULL;
	struct up_reloc rel;
	struct dec home, d;
	unsigned before = failures;
	bool abs_form;
	int rc;

	if (!decode(&home, 64, insn->bytes, insn->length, va)) {
		set_where(insn, "libc", near);
		rfail("Zydis cannot decode what the analyzer accepted");
		return;
	}
	switch (insn->plan) {
	case UP_PLAN_REJECT:
		sw->reject++;
		rc = up_reloc_build(insn, near, &rel);
		if (rc != -ENOTSUP) {
			set_where(insn, "libc reject", near);
			rfail("up_reloc_build returned %d, expected -ENOTSUP", rc);
		}
		return;
	case UP_PLAN_STEP:
		sw->step++;
		set_where(insn, "libc step", near);
		rc = up_reloc_build(insn, near, &rel);
		if (rc || !rel.step) {
			rfail("up_reloc_build returned %d step %d", rc, rel.step);
			return;
		}
		if (insn->reason == UP_WHY_STEP_SYSCALL && !(rel.fixups & UP_FIX_SYSCALL_RCX))
			rfail("a syscall without UP_FIX_SYSCALL_RCX");
		if (!decode(&d, 64, rel.code, rel.insn_len, near) || !same_insn(64, &home, &d, 0))
			dump_code(&rel);
		return;
	case UP_PLAN_EMULATE:
		/* the fallback: must relocate too; rel8-only loops may not reach */
		sw->emulate++;
		set_where(insn, "libc emulate", near);
		rc = up_reloc_build(insn, near, &rel);
		if (rc == -ERANGE && (insn->emu == UP_EMU_LOOP || insn->emu == UP_EMU_LOOPE ||
				      insn->emu == UP_EMU_LOOPNE || insn->emu == UP_EMU_JCXZ)) {
			sw->emulate_range++;
			return;
		}
		if (rc) {
			rfail("up_reloc_build returned %d", rc);
			return;
		}
		if (!decode(&d, 64, rel.code, rel.insn_len, near) || d.zi.length != rel.insn_len) {
			rfail("the relocated code does not decode");
			dump_code(&rel);
			return;
		}
		if (!same_insn(64, &home, &d, 0))
			dump_code(&rel);
		if ((insn->emu == UP_EMU_CALL || insn->emu == UP_EMU_CALL_IND) &&
		    (!rel.step || !(rel.fixups & UP_FIX_CALL)))
			rfail("a relocated call must be stepped with UP_FIX_CALL (step %d fixups 0x%x)",
			      rel.step, rel.fixups);
		return;
	case UP_PLAN_XOL:
		break;
	}

	sw->xol++;
	if (insn->rip_relative)
		sw->riprel++;

	/* 1 GiB away: xol, same instruction, jmp back */
	set_where(insn, "libc xol", near);
	memset(&rel, 0xa5, sizeof(rel));
	rc = up_reloc_build(insn, near, &rel);
	if (rc) {
		rfail("up_reloc_build returned %d", rc);
		return;
	}
	if (rel.step || rel.len > UP_SLOT_MAX || rel.insn_len > UP_INSN_MAX || !rel.insn_len) {
		rfail("step %d len %u insn_len %u", rel.step, rel.len, rel.insn_len);
		dump_code(&rel);
		return;
	}
	if (!decode(&d, 64, rel.code, rel.insn_len, near) || d.zi.length != rel.insn_len) {
		rfail("code[0..%u) does not decode to one instruction", rel.insn_len);
		dump_code(&rel);
		return;
	}
	if (!same_insn(64, &home, &d, ZYDIS_REGISTER_NONE) ||
	    !jumps_back(64, &rel, near, rel.insn_len, va + insn->length, NULL))
		dump_code(&rel);
	if (up_reloc_home_rip(insn, &rel, near, near) != va ||
	    up_reloc_home_rip(insn, &rel, near, near + rel.insn_len) != va + insn->length ||
	    up_reloc_home_rip(insn, &rel, near, near - 1) != 0 ||
	    up_reloc_home_rip(insn, &rel, near, near + UP_SLOT_MAX) != 0)
		rfail("up_reloc_home_rip: slot -> 0x%" PRIx64 ", after the instruction -> 0x%" PRIx64
		      ", outside -> 0x%" PRIx64 "/0x%" PRIx64,
		      up_reloc_home_rip(insn, &rel, near, near),
		      up_reloc_home_rip(insn, &rel, near, near + rel.insn_len),
		      up_reloc_home_rip(insn, &rel, near, near - 1),
		      up_reloc_home_rip(insn, &rel, near, near + UP_SLOT_MAX));

	/* 8 GiB away */
	set_where(insn, "libc xol far", far);
	memset(&rel, 0xa5, sizeof(rel));
	rc = up_reloc_build(insn, far, &rel);
	if (rc) {
		rfail("up_reloc_build returned %d", rc);
		return;
	}
	if (insn->rip_relative) {
		sw->far_scratch++;
		check_far_scratch(insn, &home, &rel, far);
	} else {
		sw->far_plain++;
		if (rel.step) {
			rfail("not rip-relative, yet stepped at 8 GiB");
		} else if (decode(&d, 64, rel.code, rel.insn_len, far) &&
			   d.zi.length == rel.insn_len) {
			if (same_insn(64, &home, &d, ZYDIS_REGISTER_NONE) &&
			    jumps_back(64, &rel, far, rel.insn_len, va + insn->length, &abs_form) &&
			    !abs_form)
				rfail("a rel32 jump back cannot reach 8 GiB");
		} else {
			rfail("code[0..%u) does not decode", rel.insn_len);
		}
	}
	if (failures != before)
		dump_code(&rel);
}

static void test_libc_sweep(void **state)
{
	struct sweep sw = { 0 };
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	int fd;
	Elf *elf;

	fd = open(UPROBE_TEST_LIBC, O_RDONLY);
	if (fd < 0) {
		print_message("SKIP: cannot open %s: %s\n", UPROBE_TEST_LIBC, strerror(errno));
		skip();
	}
	assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	failures = 0;
	while ((scn = elf_nextscn(elf, scn))) {
		const uint8_t *p;
		Elf_Data *data;
		GElf_Shdr sh;
		uint64_t off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf)
			continue;
		p = data->d_buf;
		for (off = 0; off < data->d_size;) {
			struct up_insn insn;

			assert_int_equal(up_insn_analyze(&insn, p + off, data->d_size - off,
							 sh.sh_addr + off, UP_MODE_64),
					 0);
			sw.total++;
			if (!insn.length) {
				sw.invalid++;
				off++;
				continue;
			}
			sweep_one(&sw, &insn);
			off += insn.length;
		}
	}
	elf_end(elf);
	close(fd);
	print_message("%s: %lu instructions (%lu undecodable bytes): %lu xol (%lu rip-relative) "
		      "checked at 1 GiB and at 8 GiB (%lu scratch, %lu plain), %lu emulate "
		      "relocated (%lu rel8 loops out of reach), %lu step, %lu reject\n",
		      UPROBE_TEST_LIBC, sw.total, sw.invalid, sw.xol, sw.riprel, sw.far_scratch,
		      sw.far_plain, sw.emulate, sw.emulate_range, sw.step, sw.reject);
	if (failures > MAX_REPORTS)
		print_error("... %u failures in all\n", failures);
	assert_int_equal(failures, 0);
	/* a sweep that finds nothing proves nothing */
	assert_true(sw.xol > 50000);
	assert_true(sw.riprel > 1000);
	assert_true(sw.emulate > 10000);
	assert_true(sw.step > 10);
}

/* ---- native: home vs slot on the CPU ----------------------------------------------- */

#define CODE_BASE 0x30000000ULL
#define CODE_SIZE 0x100000ULL
#define HOME (CODE_BASE + 0x80000)
#define STACK_BASE 0x31000000ULL
#define STACK_SIZE 0x4000ULL
#define STACK_TOP (STACK_BASE + 0x2000)
#define DATA_BASE 0x31100000ULL
#define DATA_SIZE 0x1000ULL
#define NEAR_BASE (CODE_BASE + GiB)     /* rel32 reaches */
#if defined(__SANITIZE_ADDRESS__)
/*
 * ASan reserves 0x8fff7000..0x2008fff6fff (its shadow gap) and maps its shadow above
 * it: 8 GiB above CODE_BASE is taken.  Below the gap nothing is 2 GiB from CODE_BASE,
 * so the far slots go high, past the shadow and below ASan's heap (0x600000000000).
 */
#define FAR_BASE 0x200000000000ULL      /* rel32 does not reach */
#else
#define FAR_BASE (CODE_BASE + 8 * GiB)  /* rel32 does not */
#endif
#define SLOTS_SIZE 0x10000ULL

static uint8_t *code, *stack, *data, *near_slots, *far_slots;
static uint8_t stack_home[STACK_SIZE], data_home[DATA_SIZE];

static int setup(void **state)
{
	ZydisDecoderInit(&zdec64, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ZydisDecoderInit(&zdec32, ZYDIS_MACHINE_MODE_LONG_COMPAT_32, ZYDIS_STACK_WIDTH_32);
	code = itu_map_at(CODE_BASE, CODE_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC);
	stack = itu_map_at(STACK_BASE, STACK_SIZE, PROT_READ | PROT_WRITE);
	data = itu_map_at(DATA_BASE, DATA_SIZE, PROT_READ | PROT_WRITE);
	near_slots = itu_map_at(NEAR_BASE, SLOTS_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC);
	far_slots = itu_map_at(FAR_BASE, SLOTS_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC);
	if (!code || !stack || !data || !near_slots || !far_slots) {
		print_error("cannot map the test's code, stack, data and slots at fixed "
			    "addresses: %s\n",
			    strerror(errno));
		return -1;
	}
	memset(code, 0xcc, CODE_SIZE);
	memset(near_slots, 0xcc, SLOTS_SIZE);
	memset(far_slots, 0xcc, SLOTS_SIZE);
	return 0;
}

static int teardown(void **state)
{
	munmap(code, CODE_SIZE);
	munmap(stack, STACK_SIZE);
	munmap(data, DATA_SIZE);
	munmap(near_slots, SLOTS_SIZE);
	munmap(far_slots, SLOTS_SIZE);
	return 0;
}

static uint8_t *host(uint64_t addr)
{
	if (addr >= CODE_BASE && addr < CODE_BASE + CODE_SIZE)
		return code + (addr - CODE_BASE);
	if (addr >= NEAR_BASE && addr < NEAR_BASE + SLOTS_SIZE)
		return near_slots + (addr - NEAR_BASE);
	if (addr >= FAR_BASE && addr < FAR_BASE + SLOTS_SIZE)
		return far_slots + (addr - FAR_BASE);
	fail_msg("0x%" PRIx64 " is in none of the test's code mappings", addr);
	return NULL;
}

struct ncase {
	const char *name;
	const uint8_t *b;
	unsigned n;
	uint64_t pads[4]; /* besides the fall-through */
	unsigned npads;
	uint64_t data_words[4][2]; /* address, value */
	unsigned nwords;
	uint64_t eflags;
	uint64_t rax, rcx;
	uint64_t at_rsp; /* when nonzero: the word at the top of the stack */
};

static void state_reset(const struct ncase *c, struct user_regs_struct *r)
{
	size_t i;

	for (i = 0; i < STACK_SIZE / 8; i++) {
		uint64_t v = 0x5a5a000000000000ULL | (STACK_BASE + i * 8);

		memcpy(stack + i * 8, &v, 8);
	}
	for (i = 0; i < DATA_SIZE / 8; i++) {
		uint64_t v = 0xdada000000000000ULL | (DATA_BASE + i * 8);

		memcpy(data + i * 8, &v, 8);
	}
	for (i = 0; i < c->nwords; i++)
		memcpy(data + (c->data_words[i][0] - DATA_BASE), &c->data_words[i][1], 8);
	if (c->at_rsp)
		memcpy(stack + (STACK_TOP - STACK_BASE), &c->at_rsp, 8);
	memset(r, 0, sizeof(*r));
	r->rax = c->rax ? c->rax : 0x1111;
	r->rbx = 0x2222, r->rcx = c->rcx ? c->rcx : 0x3333, r->rdx = 0x4444;
	r->rsi = 0x5555, r->rdi = 0x6666, r->rbp = 0x7777, r->r8 = 0x8888;
	r->r9 = 0x9999, r->r10 = 0xaaaa, r->r11 = 0xbbbb, r->r12 = 0xcccc;
	r->r13 = 0xdddd, r->r14 = 0xeeee, r->r15 = 0xffff;
	r->rsp = STACK_TOP;
	r->eflags = ITU_FLAGS_FIXED | c->eflags;
	r->cs = 0x33, r->ss = 0x2b;
	r->rip = HOME;
}

static const char *const gpr_names[] = { "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp",
					 "r8",	"r9",  "r10", "r11", "r12", "r13", "r14", "r15" };

static unsigned long long *gpr_at(struct user_regs_struct *r, unsigned i)
{
	unsigned long long *p[] = { &r->rax, &r->rbx, &r->rcx, &r->rdx, &r->rsi, &r->rdi,
				    &r->rbp, &r->rsp, &r->r8,  &r->r9,  &r->r10, &r->r11,
				    &r->r12, &r->r13, &r->r14, &r->r15 };
	return p[i];
}

/*
 * Runs c at HOME and relocated to slot; both must end alike.  Returns the relocation's
 * up_reloc_build result (the case is not run when it fails).
 */
static int native_case(const struct ncase *c, uint64_t slot, bool allow_erange,
		       struct up_reloc *rel_out)
{
	struct user_regs_struct in, home_out, slot_in, slot_out;
	struct itu_native_fault f;
	struct itu_mem mem = { 0 };
	struct up_reloc_step st;
	struct up_reloc rel;
	struct up_insn insn;
	unsigned i;
	int rc, sig;

	memset(code + (HOME - CODE_BASE), 0xcc, 0x100);
	memcpy(host(HOME), c->b, c->n);
	itu_pad_write(host(HOME + c->n));
	for (i = 0; i < c->npads; i++)
		itu_pad_write(host(c->pads[i]));
	assert_int_equal(up_insn_analyze(&insn, c->b, c->n, HOME, UP_MODE_64), 0);
	set_where(&insn, c->name, slot);
	if (insn.length != c->n) {
		rfail("length %u, expected %u", insn.length, c->n);
		return -EINVAL;
	}
	rc = up_reloc_build(&insn, slot, &rel);
	if (rel_out)
		*rel_out = rel;
	if (rc) {
		if (!(allow_erange && rc == -ERANGE))
			rfail("up_reloc_build returned %d", rc);
		return rc;
	}

	/* at home */
	state_reset(c, &in);
	sig = itu_native_run(&in, &home_out, &f);
	if (sig) {
		rfail("the home run got signal %d at 0x%" PRIx64 ": the case is wrong", sig, f.rip);
		return rc;
	}
	memcpy(stack_home, stack, STACK_SIZE);
	memcpy(data_home, data, DATA_SIZE);

	/* in the slot */
	memset(host(slot), 0xcc, UP_SLOT_MAX + ITU_PAD_LEN);
	memcpy(host(slot), rel.code, rel.len);
	if (rel.step)
		itu_pad_write(host(slot + rel.insn_len)); /* the single-step trap */
	state_reset(c, &slot_in);
	if (rel.step)
		up_reloc_step_begin(&insn, &rel, slot, &slot_in, &st);
	else
		slot_in.rip = slot;
	if (slot_in.rip != slot)
		rfail("step_begin left rip at 0x%llx, not the slot", slot_in.rip);
	sig = itu_native_run(&slot_in, &slot_out, &f);
	memset(host(slot), 0xcc, UP_SLOT_MAX + ITU_PAD_LEN);
	if (sig) {
		rfail("the slot run got signal %d at 0x%" PRIx64 " (addr 0x%" PRIx64 ")", sig, f.rip,
		      f.addr);
		dump_code(&rel);
		return rc;
	}
	if (rel.step) {
		itu_mem_add(&mem, STACK_BASE, stack, STACK_SIZE);
		itu_mem_add(&mem, DATA_BASE, data, DATA_SIZE);
		rc = up_reloc_step_finish(&insn, &rel, slot, &slot_out, &st, itu_mem_fn, &mem);
		if (rc) {
			rfail("up_reloc_step_finish returned %d", rc);
			return 0;
		}
	}

	if (slot_out.rip != home_out.rip)
		rfail("rip 0x%llx after the slot, 0x%llx at home", slot_out.rip, home_out.rip);
	for (i = 0; i < 16; i++)
		if (*gpr_at(&slot_out, i) != *gpr_at(&home_out, i))
			rfail("%s: 0x%llx after the slot, 0x%llx at home", gpr_names[i],
			      *gpr_at(&slot_out, i), *gpr_at(&home_out, i));
	/* a syscall's r11 holds rflags: the same in both runs */
	if ((slot_out.eflags & ITU_FLAGS_MASK) != (home_out.eflags & ITU_FLAGS_MASK))
		rfail("eflags 0x%llx after the slot, 0x%llx at home", slot_out.eflags,
		      home_out.eflags);
	for (i = 0; i < STACK_SIZE; i += 8)
		if (memcmp(stack + i, stack_home + i, 8)) {
			uint64_t a, b;

			memcpy(&a, stack + i, 8);
			memcpy(&b, stack_home + i, 8);
			rfail("stack at rsp%+d: 0x%" PRIx64 " after the slot, 0x%" PRIx64 " at home",
			      (int)(STACK_BASE + i - STACK_TOP), a, b);
		}
	if (memcmp(data, data_home, DATA_SIZE))
		rfail("data memory differs");
	return 0;
}

/* rel32 from HOME + n to the data word at addr */
#define RIPD(addr, n) ((int32_t)((int64_t)(addr) - (int64_t)(HOME + (n))))

static void put_d32(uint8_t *b, unsigned at, int32_t v)
{
	memcpy(b + at, &v, 4);
}

static void test_native(void **state)
{
	const uint64_t D = DATA_BASE + 0x100, T = HOME + 0x4000;
	const uint64_t slots[2] = { NEAR_BASE + 0x40, FAR_BASE + 0x80 };
	uint8_t lea[7] = { 0x48, 0x8d, 0x05 }, mov[7] = { 0x48, 0x8b, 0x0d };
	uint8_t cmp[8] = { 0x48, 0x83, 0x3d, 0, 0, 0, 0, 0x05 };
	uint8_t add[7] = { 0x83, 0x05, 0, 0, 0, 0, 0x11 };
	uint8_t store[7] = { 0x48, 0x89, 0x05 };
	uint8_t xadd[8] = { 0xf0, 0x0f, 0xc1, 0x05 };
	uint8_t pushm[6] = { 0xff, 0x35 }, popm[6] = { 0x8f, 0x05 };
	uint8_t callm[6] = { 0xff, 0x15 }, jmpm[6] = { 0xff, 0x25 };
	uint8_t call[5] = { 0xe8 }, jmp[5] = { 0xe9 }, je8[2] = { 0x74, 0x40 };
	uint8_t jne32[6] = { 0x0f, 0x85 };
	static const uint8_t callr[2] = { 0xff, 0xd0 }, ret[1] = { 0xc3 };
	static const uint8_t push[1] = { 0x53 }, getpid[2] = { 0x0f, 0x05 };
	static const uint8_t movr[3] = { 0x48, 0x89, 0xe5 };
	unsigned s;

	put_d32(lea, 3, RIPD(D, 7));
	put_d32(mov, 3, RIPD(D, 7));
	put_d32(cmp, 3, RIPD(D, 8));
	put_d32(add, 2, RIPD(D, 7));
	put_d32(store, 3, RIPD(D, 7));
	put_d32(xadd, 4, RIPD(D, 8));
	put_d32(pushm, 2, RIPD(D, 6));
	put_d32(popm, 2, RIPD(D + 8, 6));
	put_d32(callm, 2, RIPD(D, 6));
	put_d32(jmpm, 2, RIPD(D, 6));
	put_d32(call, 1, (int32_t)(T - (HOME + 5)));
	put_d32(jmp, 1, (int32_t)(T - (HOME + 5)));
	put_d32(jne32, 2, (int32_t)(T - (HOME + 6)));

	failures = 0;
	for (s = 0; s < 2; s++) {
		const uint64_t slot = slots[s];
		const struct ncase cases[] = {
			{ .name = "lea disp(%rip),%rax", .b = lea, .n = 7 },
			{ .name = "mov disp(%rip),%rcx", .b = mov, .n = 7, .nwords = 1, .data_words = { { D, 0x123 } } },
			{ .name = "cmpq $5,disp(%rip) (equal)", .b = cmp, .n = 8, .nwords = 1,
			  .data_words = { { D, 5 } } },
			{ .name = "cmpq $5,disp(%rip) (below)", .b = cmp, .n = 8, .nwords = 1,
			  .data_words = { { D, 3 } } },
			{ .name = "addl $0x11,disp(%rip)", .b = add, .n = 7 },
			{ .name = "mov %rax,disp(%rip)", .b = store, .n = 7 },
			{ .name = "lock xadd %eax,disp(%rip)", .b = xadd, .n = 8 },
			{ .name = "push disp(%rip)", .b = pushm, .n = 6 },
			{ .name = "pop disp(%rip)", .b = popm, .n = 6 },
			{ .name = "call *disp(%rip)", .b = callm, .n = 6, .pads = { T }, .npads = 1, .nwords = 1,
			  .data_words = { { D, T } } },
			{ .name = "jmp *disp(%rip)", .b = jmpm, .n = 6, .pads = { T }, .npads = 1, .nwords = 1,
			  .data_words = { { D, T } } },
			{ .name = "call rel32", .b = call, .n = 5, .pads = { T }, .npads = 1 },
			{ .name = "jmp rel32", .b = jmp, .n = 5, .pads = { T }, .npads = 1 },
			{ .name = "je rel8 taken", .b = je8, .n = 2, .pads = { HOME + 2 + 0x40 }, .npads = 1,
			  .eflags = 0x40 },
			{ .name = "je rel8 not taken", .b = je8, .n = 2, .pads = { HOME + 2 + 0x40 }, .npads = 1 },
			{ .name = "jne rel32 taken", .b = jne32, .n = 6, .pads = { T }, .npads = 1 },
			{ .name = "jne rel32 not taken", .b = jne32, .n = 6, .pads = { T }, .npads = 1, .eflags = 0x40 },
			{ .name = "call *%rax", .b = callr, .n = 2, .pads = { T }, .npads = 1, .rax = T },
			{ .name = "ret", .b = ret, .n = 1, .pads = { T }, .npads = 1, .at_rsp = T },
			{ .name = "push %rbx", .b = push, .n = 1 },
			{ .name = "mov %rsp,%rbp", .b = movr, .n = 3 },
			{ .name = "syscall getpid", .b = getpid, .n = 2, .rax = SYS_getpid },
		};
		size_t i;

		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct ncase c = cases[i];
			struct up_reloc rel;
			bool branch = c.npads > 0;
			int rc;

			/* from 8 GiB a direct branch cannot be re-encoded rel32: -ERANGE is fine */
			rc = native_case(&c, slot, s == 1 && branch, &rel);
			if (rc == 0 && s == 1 && !branch && c.b != getpid) {
				struct up_insn insn;

				up_insn_analyze(&insn, c.b, c.n, HOME, UP_MODE_64);
				if (insn.rip_relative && insn.plan == UP_PLAN_XOL &&
				    !(rel.fixups & UP_FIX_SCRATCH))
					rfail("rip-relative from 8 GiB without UP_FIX_SCRATCH");
			}
			if (rc == 0 && c.b == call && !(rel.step && (rel.fixups & UP_FIX_CALL)))
				rfail("call rel32 relocated: step %d fixups 0x%x, expected a step with "
				      "UP_FIX_CALL",
				      rel.step, rel.fixups);
			if (rc == 0 && c.b == getpid &&
			    !(rel.step && (rel.fixups & UP_FIX_SYSCALL_RCX)))
				rfail("syscall relocated: step %d fixups 0x%x, expected a step with "
				      "UP_FIX_SYSCALL_RCX",
				      rel.step, rel.fixups);
		}
	}
	if (failures > MAX_REPORTS)
		print_error("... %u failures in all\n", failures);
	assert_int_equal(failures, 0);
}

/* ---- hand-picked, simulated ------------------------------------------------------------- */

/* syscall: the step leaves rcx = slot + 2; finish makes it the home address */
static void test_syscall_fixup(void **state)
{
	const uint64_t va = 0x7f0000401000ULL, slot = 0x7f0000500040ULL;
	struct user_regs_struct regs;
	struct itu_mem mem = { 0 };
	struct up_reloc_step st;
	struct up_reloc rel;
	struct up_insn insn;

	assert_int_equal(up_insn_analyze(&insn, "\x0f\x05", 2, va, UP_MODE_64), 0);
	assert_int_equal(insn.plan, UP_PLAN_STEP);
	assert_int_equal(up_reloc_build(&insn, slot, &rel), 0);
	assert_true(rel.step);
	assert_true(rel.fixups & UP_FIX_SYSCALL_RCX);
	assert_int_equal(rel.insn_len, 2);
	assert_memory_equal(rel.code, "\x0f\x05", 2);

	memset(&regs, 0, sizeof(regs));
	regs.rip = va;
	regs.rax = 39;
	regs.rcx = 0x1234;
	regs.r11 = 0x5678;
	regs.eflags = 0x246;
	up_reloc_step_begin(&insn, &rel, slot, &regs, &st);
	assert_int_equal(regs.rip, slot);
	/* home_rip: not yet run -> the instruction; done -> the next one */
	assert_int_equal(up_reloc_home_rip(&insn, &rel, slot, slot), va);
	assert_int_equal(up_reloc_home_rip(&insn, &rel, slot, slot + 2), va + 2);
	assert_int_equal(up_reloc_home_rip(&insn, &rel, slot, va), 0);
	/* the CPU: rcx = next rip, r11 = rflags, rax = result */
	regs.rcx = slot + 2;
	regs.r11 = regs.eflags;
	regs.rax = 4242;
	regs.rip = slot + 2;
	assert_int_equal(up_reloc_step_finish(&insn, &rel, slot, &regs, &st, itu_mem_fn, &mem), 0);
	assert_int_equal(regs.rip, va + 2);
	assert_int_equal(regs.rcx, va + 2);
	assert_int_equal(regs.r11, 0x246);
	assert_int_equal(regs.rax, 4242);
	assert_int_equal(mem.reads + mem.writes, 0);
}

/* call rel32 relocated: the return address the step pushed is fixed to vaddr + 5 */
static void test_call_fixup(void **state)
{
	const uint64_t va = 0x7f0000401000ULL, slot = 0x7f0000500040ULL;
	const uint64_t target = va + 5 + 0x100;
	uint8_t stk[64];
	struct user_regs_struct regs;
	struct itu_mem mem = { 0 };
	struct up_reloc_step st;
	struct up_reloc rel;
	struct up_insn insn;
	struct dec d;
	uint64_t ret;

	assert_int_equal(up_insn_analyze(&insn, "\xe8\x00\x01\x00\x00", 5, va, UP_MODE_64), 0);
	assert_int_equal(up_reloc_build(&insn, slot, &rel), 0);
	assert_true(rel.step);
	assert_true(rel.fixups & UP_FIX_CALL);
	assert_true(decode(&d, 64, rel.code, rel.insn_len, slot));
	assert_int_equal(d.zi.mnemonic, ZYDIS_MNEMONIC_CALL);
	assert_int_equal(absolute(&d, &d.ops[0]), target);

	memset(stk, 0x77, sizeof(stk));
	itu_mem_add(&mem, 0x7ffe0000 - 32, stk, sizeof(stk));
	memset(&regs, 0, sizeof(regs));
	regs.rip = va;
	regs.rsp = 0x7ffe0000;
	up_reloc_step_begin(&insn, &rel, slot, &regs, &st);
	assert_int_equal(regs.rip, slot);
	/* the CPU: push slot + insn_len, go to the target */
	regs.rsp -= 8;
	ret = slot + rel.insn_len;
	memcpy(stk + 24, &ret, 8);
	regs.rip = target;
	/* outside the slot now: home_rip has nothing to say */
	assert_int_equal(up_reloc_home_rip(&insn, &rel, slot, target), 0);
	assert_int_equal(up_reloc_step_finish(&insn, &rel, slot, &regs, &st, itu_mem_fn, &mem), 0);
	assert_int_equal(regs.rip, target);
	assert_int_equal(regs.rsp, 0x7ffe0000 - 8);
	memcpy(&ret, stk + 24, 8);
	assert_int_equal(ret, va + 5);
	assert_memory_equal(stk + 32, "\x77\x77\x77\x77\x77\x77\x77\x77", 8);
	assert_memory_equal(stk + 16, "\x77\x77\x77\x77\x77\x77\x77\x77", 8);

	/* the fix-up write fails: the error comes back */
	regs.rip = slot;
	regs.rsp = 0x7ffe0000;
	up_reloc_step_begin(&insn, &rel, slot, &regs, &st);
	regs.rsp -= 8;
	regs.rip = target;
	mem.fail_write = -EFAULT;
	mem.fail_read = -EFAULT;
	assert_int_equal(up_reloc_step_finish(&insn, &rel, slot, &regs, &st, itu_mem_fn, &mem),
			 -EFAULT);
}

static void test_rejected(void **state)
{
	static const char *const bytes[] = { "\xcc", "\xf4", "\x0f\x0b", "\xcd\x80" };
	struct up_reloc rel;
	struct up_insn insn;
	size_t i;

	for (i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++) {
		assert_int_equal(up_insn_analyze(&insn, bytes[i], strlen(bytes[i]), 0x401000,
						 UP_MODE_64), 0);
		assert_int_equal(insn.plan, UP_PLAN_REJECT);
		assert_int_equal(up_reloc_build(&insn, 0x500000, &rel), -ENOTSUP);
	}
}

static void test_regs_gpr(void **state)
{
	static const ZydisRegister regs64[] = {
		ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RBX, ZYDIS_REGISTER_RCX, ZYDIS_REGISTER_RDX,
		ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDI, ZYDIS_REGISTER_RBP, ZYDIS_REGISTER_RSP,
		ZYDIS_REGISTER_R8,  ZYDIS_REGISTER_R9,	ZYDIS_REGISTER_R10, ZYDIS_REGISTER_R11,
		ZYDIS_REGISTER_R12, ZYDIS_REGISTER_R13, ZYDIS_REGISTER_R14, ZYDIS_REGISTER_R15,
	};
	struct user_regs_struct r;
	unsigned i;

	for (i = 0; i < 16; i++)
		assert_ptr_equal(up_regs_gpr(&r, regs64[i]), (uint64_t *)gpr_at(&r, i));
	assert_ptr_equal(up_regs_gpr(&r, ZYDIS_REGISTER_RIP), (uint64_t *)&r.rip);
}

/* ---- 32-bit slots ---------------------------------------------------------------------- */

static void test_reloc32(void **state)
{
	struct user_regs_struct regs;
	struct itu_mem mem = { 0 };
	struct up_reloc_step st;
	struct up_reloc rel;
	struct up_insn insn;
	uint8_t stk[32];
	struct dec home, d;
	uint32_t ret32;

	failures = 0;

	/* call *%gs:0x10: step; the 4-byte return address is fixed to vaddr + 7 */
	{
		const uint64_t va = 0x08049000, slot = 0xf7f00040;

		assert_int_equal(up_insn_analyze(&insn, "\x65\xff\x15\x10\x00\x00\x00", 7, va,
						 UP_MODE_32), 0);
		assert_int_equal(insn.reason, UP_WHY_STEP_CALL_SEG);
		assert_int_equal(up_reloc_build(&insn, slot, &rel), 0);
		assert_true(rel.step);
		assert_true(rel.fixups & UP_FIX_CALL);
		assert_true(decode(&d, 32, rel.code, rel.insn_len, slot));
		assert_true(decode(&home, 32, insn.bytes, insn.length, va));
		set_where(&insn, "32-bit call *%gs:0x10", slot);
		same_insn(32, &home, &d, ZYDIS_REGISTER_NONE);
		memset(stk, 0x77, sizeof(stk));
		itu_mem_add(&mem, 0xffffd000 - 16, stk, sizeof(stk));
		memset(&regs, 0, sizeof(regs));
		regs.rip = va;
		regs.rsp = 0xffffd000;
		up_reloc_step_begin(&insn, &rel, slot, &regs, &st);
		assert_int_equal(regs.rip, slot);
		regs.rsp -= 4;
		ret32 = (uint32_t)(slot + rel.insn_len);
		memcpy(stk + 12, &ret32, 4);
		regs.rip = 0xf7fc1234; /* the vsyscall entry */
		assert_int_equal(up_reloc_step_finish(&insn, &rel, slot, &regs, &st, itu_mem_fn, &mem),
				 0);
		assert_int_equal(regs.rip, 0xf7fc1234);
		assert_int_equal(regs.rsp, 0xffffd000 - 4);
		memcpy(&ret32, stk + 12, 4);
		assert_int_equal(ret32, va + 7);
		assert_memory_equal(stk + 16, "\x77\x77\x77\x77", 4);
		assert_memory_equal(stk + 8, "\x77\x77\x77\x77", 4);
	}

	/* jmp *%gs:0x10: step; rip is the target, nothing to fix */
	{
		const uint64_t va = 0x08049000, slot = 0xf7f00080;

		assert_int_equal(up_insn_analyze(&insn, "\x65\xff\x25\x10\x00\x00\x00", 7, va,
						 UP_MODE_32), 0);
		assert_int_equal(insn.reason, UP_WHY_STEP_JMP_SEG);
		assert_int_equal(up_reloc_build(&insn, slot, &rel), 0);
		assert_true(rel.step);
		memset(&regs, 0, sizeof(regs));
		regs.rip = va;
		regs.rsp = 0xffffd000;
		up_reloc_step_begin(&insn, &rel, slot, &regs, &st);
		regs.rip = 0xf7fc1234;
		assert_int_equal(up_reloc_step_finish(&insn, &rel, slot, &regs, &st, itu_mem_fn, &mem),
				 0);
		assert_int_equal(regs.rip, 0xf7fc1234);
		assert_int_equal(regs.rsp, 0xffffd000);
	}

	/* a plain instruction whose jump back wraps around 2^32 */
	{
		const uint64_t va = 0x1000, slot = 0xfff00000;

		assert_int_equal(up_insn_analyze(&insn, "\x89\xe5", 2, va, UP_MODE_32), 0);
		set_where(&insn, "32-bit xol, wrapping", slot);
		assert_int_equal(up_reloc_build(&insn, slot, &rel), 0);
		assert_false(rel.step);
		assert_true(decode(&d, 32, rel.code, rel.insn_len, slot));
		assert_true(decode(&home, 32, insn.bytes, insn.length, va));
		same_insn(32, &home, &d, ZYDIS_REGISTER_NONE);
		jumps_back(32, &rel, slot, rel.insn_len, va + 2, NULL);
		assert_true(rel.len <= UP_SLOT_MAX);
		assert_int_equal(up_reloc_home_rip(&insn, &rel, slot, slot), va);
		assert_int_equal(up_reloc_home_rip(&insn, &rel, slot, slot + rel.insn_len), va + 2);
	}

	/* call rel32 to a slot far above: same absolute target modulo 2^32 */
	{
		const uint64_t va = 0x08049000, slot = 0xf7f00100;

		assert_int_equal(up_insn_analyze(&insn, "\xe8\x00\x01\x00\x00", 5, va, UP_MODE_32), 0);
		set_where(&insn, "32-bit call rel32", slot);
		assert_int_equal(up_reloc_build(&insn, slot, &rel), 0);
		assert_true(rel.step);
		assert_true(rel.fixups & UP_FIX_CALL);
		assert_true(decode(&d, 32, rel.code, rel.insn_len, slot));
		assert_true(decode(&home, 32, insn.bytes, insn.length, va));
		same_insn(32, &home, &d, ZYDIS_REGISTER_NONE);
	}
	assert_int_equal(failures, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regs_gpr),	cmocka_unit_test(test_rejected),
		cmocka_unit_test(test_syscall_fixup),	cmocka_unit_test(test_call_fixup),
		cmocka_unit_test(test_reloc32),		cmocka_unit_test(test_native),
		cmocka_unit_test(test_libc_sweep),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
