// SPDX-License-Identifier: MIT
/*
 * The trampolines a fast-path jmp goes to, and the jmp itself.  Where a jmp may go and
 * which bytes it covers is the planner's (plan.c); this file only writes code.
 */
#include <cpuid.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/patch.h"
#include "agent/abi.h"
#include "sym/unwind.h"
#include "ubp.h"

extern const uint8_t up_agent_blob[]; /* the agent (blob/agent.c): its header's words */

/* The hardware number of each frame word's register (-1: not a general register). */
static const int8_t hw_of[UPA_NREGS] = {
	[UPA_R15] = 15, [UPA_R14] = 14, [UPA_R13] = 13, [UPA_R12] = 12, [UPA_RBP] = 5,
	[UPA_RBX] = 3,	[UPA_R11] = 11, [UPA_R10] = 10, [UPA_R9] = 9,	[UPA_R8] = 8,
	[UPA_RAX] = 0,	[UPA_RCX] = 1,	[UPA_RDX] = 2,	[UPA_RSI] = 6,	[UPA_RDI] = 7,
	[UPA_ORIG_RAX] = -1, [UPA_RIP] = -1, [UPA_CS] = -1, [UPA_EFLAGS] = -1,
	[UPA_RSP] = -1, [UPA_SS] = -1, [UPA_FS_BASE] = -1, [UPA_GS_BASE] = -1,
	[UPA_DS] = -1, [UPA_ES] = -1, [UPA_FS] = -1, [UPA_GS] = -1,
};

#define FRAME (8 * UPA_NREGS) /* 216 */

/* mov %reg, disp(%rsp) (store) or mov disp(%rsp), %reg */
static size_t mov_rsp(uint8_t *c, bool store, int reg, int32_t disp)
{
	size_t n = 0;

	c[n++] = (uint8_t)(0x48 | (reg >= 8 ? 4 : 0));
	c[n++] = store ? 0x89 : 0x8b;
	if (disp >= -128 && disp <= 127) {
		c[n++] = (uint8_t)(0x44 | (reg & 7) << 3);
		c[n++] = 0x24;
		c[n++] = (uint8_t)(int8_t)disp;
	} else {
		c[n++] = (uint8_t)(0x84 | (reg & 7) << 3);
		c[n++] = 0x24;
		memcpy(c + n, &disp, 4);
		n += 4;
	}
	return n;
}

/* lea disp(%rsp),%reg */
static size_t lea_rsp(uint8_t *c, int reg, int32_t disp)
{
	c[0] = (uint8_t)(0x48 | (reg >= 8 ? 4 : 0));
	c[1] = 0x8d;
	c[2] = (uint8_t)(0x84 | (reg & 7) << 3);
	c[3] = 0x24;
	memcpy(c + 4, &disp, 4);
	return 8;
}

/* Saved around the call whatever the agent may clobber (the SysV caller-saved set). */
static bool caller_saved(int w)
{
	return w == UPA_RAX || w == UPA_RCX || w == UPA_RDX || w == UPA_RSI || w == UPA_RDI ||
	       w == UPA_R8 || w == UPA_R9 || w == UPA_R10 || w == UPA_R11;
}

/*
 * The count: lahf/seto keep the flags in rax (OF from seto, the rest from lahf; add
 * $0x7f to al puts OF back, sahf the rest), which is several times cheaper than
 * pushfq/popfq.  CPUs without lahf in 64-bit mode (the first x86-64s) get pushfq.
 */
static const uint8_t count_lahf[] = {
	0x48, 0x8d, 0x64, 0x24, 0x80,		/* lea -0x80(%rsp),%rsp: the red zone */
	0x50,					/* push %rax */
	0x9f,					/* lahf */
	0x0f, 0x90, 0xc0,			/* seto %al */
	0xf0, 0x48, 0xff, 0x05, 0, 0, 0, 0,	/* lock incq counter(%rip) */
	0x04, 0x7f,				/* add $0x7f,%al: OF again */
	0x9e,					/* sahf */
	0x58,					/* pop %rax */
	0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0,	/* lea 0x80(%rsp),%rsp */
};
#define LAHF_DISP 14
#define LAHF_END 18

static const uint8_t count_pushf[] = {
	0x48, 0x8d, 0x64, 0x24, 0x80,		   /* lea -0x80(%rsp),%rsp: the red zone */
	0x9c,					   /* pushfq */
	0xf0, 0x48, 0xff, 0x05, 0, 0, 0, 0,	   /* lock incq counter(%rip) */
	0x9d,					   /* popfq */
	0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0,	   /* lea 0x80(%rsp),%rsp */
};
#define PUSHF_DISP 10
#define PUSHF_END 14

bool up_patch_have_lahf(void)
{
	unsigned a, b, c = 0, d;

	return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & 1u);
}

static bool rel32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

bool up_patch_is_call(const struct up_insn *insn)
{
	return insn->emu == UP_EMU_CALL || insn->emu == UP_EMU_CALL_IND;
}

/*
 * A call, relocated as what it does: the home return address pushed (the instruction
 * after the call, in the original code: the callee returns there, and unwinders see
 * the address they would without the probe), then a jmp to its target.  No flag is
 * touched (lea, not sub).  An indirect call becomes the jmp with the same operand (its
 * ModRM's reg field 2 -> 4), a displacement from rsp 8 more (rsp moved), one from rip
 * re-aimed.  Bytes written at c (code placed at at), or -ERANGE.
 */
int up_patch_emulate_call(const struct up_insn *insn, uint64_t at, uint8_t *c, size_t room)
{
	uint64_t ret = insn->vaddr + insn->length;
	uint32_t lo = (uint32_t)ret, hi = (uint32_t)(ret >> 32);
	size_t n = 0, op;
	int64_t d;
	int32_t d32;

	if (room < 20 + UP_INSN_MAX + 14)
		return -ERANGE;
	c[n++] = 0x48, c[n++] = 0x8d, c[n++] = 0x64, c[n++] = 0x24, c[n++] = 0xf8; /* lea -8(%rsp),%rsp */
	c[n++] = 0xc7, c[n++] = 0x04, c[n++] = 0x24;		/* movl $lo,(%rsp) */
	memcpy(c + n, &lo, 4), n += 4;
	c[n++] = 0xc7, c[n++] = 0x44, c[n++] = 0x24, c[n++] = 0x04; /* movl $hi,4(%rsp) */
	memcpy(c + n, &hi, 4), n += 4;
	if (insn->emu == UP_EMU_CALL) {
		if (!insn->is_branch_rel)
			return -ERANGE;
		d = (int64_t)(insn->target - (at + n + 5));
		if (rel32(d)) {
			c[n++] = 0xe9; /* jmp rel32 */
			d32 = (int32_t)d;
			memcpy(c + n, &d32, 4);
			return (int)(n + 4);
		}
		c[n++] = 0xff, c[n++] = 0x25; /* jmp *0(%rip), then the address */
		memset(c + n, 0, 4), n += 4;
		memcpy(c + n, &insn->target, 8);
		return (int)(n + 8);
	}
	if (insn->emu != UP_EMU_CALL_IND)
		return -ERANGE;
	/* past the legacy prefixes and REX to the ff opcode, then its ModRM */
	for (op = 0; op < insn->length; op++) {
		uint8_t b = insn->bytes[op];

		if (b == 0x66 || b == 0x67 || b == 0xf2 || b == 0xf3 || b == 0x2e || b == 0x36 ||
		    b == 0x3e || b == 0x26 || b == 0x64 || b == 0x65 || (b >= 0x40 && b <= 0x4f))
			continue;
		break;
	}
	if (op + 1 >= insn->length || insn->bytes[op] != 0xff || (insn->bytes[op + 1] >> 3 & 7) != 2)
		return -ERANGE;
	memcpy(c + n, insn->bytes, insn->length);
	c[n + op + 1] = (uint8_t)((insn->bytes[op + 1] & ~0x38) | 4 << 3); /* /2 -> /4 */
	if (insn->rip_relative) {
		d = (int64_t)(insn->target - (at + n + insn->length));
		if (!rel32(d) || !insn->disp_offset)
			return -ERANGE;
		d32 = (int32_t)d;
		memcpy(c + n + insn->disp_offset, &d32, 4);
	} else if (insn->op0.type == ZYDIS_OPERAND_TYPE_MEMORY &&
		   (insn->op0.base == ZYDIS_REGISTER_RSP || insn->op0.index == ZYDIS_REGISTER_RSP)) {
		uint8_t mod = insn->bytes[op + 1] >> 6;

		if (mod == 1 && insn->op0.disp + 8 <= 127) {
			c[n + insn->disp_offset] = (uint8_t)(int8_t)(insn->op0.disp + 8);
		} else if (mod == 2 && insn->op0.disp + 8 <= INT32_MAX) {
			d32 = (int32_t)(insn->op0.disp + 8);
			memcpy(c + n + insn->disp_offset, &d32, 4);
		} else {
			return -ERANGE; /* (%rsp) with no displacement to change */
		}
	} else if (insn->op0.type == ZYDIS_OPERAND_TYPE_REGISTER &&
		   (insn->op0.reg == ZYDIS_REGISTER_RSP || insn->op0.reg == ZYDIS_REGISTER_ESP)) {
		return -ERANGE;
	}
	return (int)(n + insn->length);
}

/* The relocated instructions and the jmp back, at code + n; or the jmp on to the next
   trampoline of a chain.  A call is the last (plan.c): its return is home. */
static int tail(const struct up_patch_site *site, uint64_t tramp, uint8_t *code, size_t size,
		size_t n, size_t *len, unsigned home_of[UP_PATCH_MAX_INSN])
{
	int64_t back;
	int32_t d32;

	if (site->chain) {
		back = (int64_t)(site->chain - (tramp + n + 5));
		if (n + 5 > size || !rel32(back))
			return -ERANGE;
		for (unsigned i = 0; i < site->ninsn; i++)
			home_of[i] = (unsigned)n; /* nothing relocated here: nothing to fault */
		code[n] = 0xe9;
		d32 = (int32_t)back;
		memcpy(code + n + 1, &d32, 4);
		*len = n + 5;
		return 0;
	}
	for (unsigned i = 0; i < site->ninsn; i++) {
		struct up_reloc rel;

		home_of[i] = (unsigned)n;
		if (up_patch_is_call(&site->insn[i])) {
			int k = up_patch_emulate_call(&site->insn[i], tramp + n, code + n, size - n);

			if (k < 0 || i + 1 != site->ninsn)
				return -ERANGE;
			n += (size_t)k;
			*len = n; /* nothing after it: the callee returns home */
			return 0;
		}
		if (up_reloc_build(&site->insn[i], tramp + n, &rel) || rel.step ||
		    n + rel.insn_len > size)
			return -ERANGE;
		memcpy(code + n, rel.code, rel.insn_len);
		n += rel.insn_len;
	}
	/* back after the relocated instructions (a pad site's tail ends the flow first) */
	back = (int64_t)(site->insn[site->ninsn - 1].vaddr + site->insn[site->ninsn - 1].length -
			 (tramp + n + 5));
	if (n + 5 > size || !rel32(back))
		return -ERANGE;
	code[n] = 0xe9;
	d32 = (int32_t)back;
	memcpy(code + n + 1, &d32, 4);
	*len = n + 5;
	return 0;
}

/*
 * The same count with the counter anywhere (the shared region, which outlives an exec):
 * its address in rcx, saved around it.
 */
int up_patch_tramp_abs(const struct up_patch_site *site, uint64_t tramp, uint64_t counter,
		       uint8_t *code, size_t size, size_t *len, unsigned home_of[UP_PATCH_MAX_INSN])
{
	bool lahf = up_patch_have_lahf();
	uint8_t c[64];
	size_t n = 0;

	n += lea_rsp(c + n, 4, -128); /* the red zone */
	if (lahf) {
		c[n++] = 0x50;			      /* push %rax */
		c[n++] = 0x9f;			      /* lahf */
		c[n++] = 0x0f, c[n++] = 0x90, c[n++] = 0xc0; /* seto %al */
	} else {
		c[n++] = 0x9c; /* pushfq */
	}
	c[n++] = 0x51;		      /* push %rcx */
	c[n++] = 0x48, c[n++] = 0xb9; /* movabs $counter,%rcx */
	memcpy(c + n, &counter, 8), n += 8;
	c[n++] = 0xf0, c[n++] = 0x48, c[n++] = 0xff, c[n++] = 0x01; /* lock incq (%rcx) */
	c[n++] = 0x59;						  /* pop %rcx */
	if (lahf) {
		c[n++] = 0x04, c[n++] = 0x7f; /* add $0x7f,%al: OF again */
		c[n++] = 0x9e;		      /* sahf */
		c[n++] = 0x58;		      /* pop %rax */
	} else {
		c[n++] = 0x9d; /* popfq */
	}
	n += lea_rsp(c + n, 4, 128);
	if (n > size)
		return -ERANGE;
	memcpy(code, c, n);
	return tail(site, tramp, code, size, n, len, home_of);
}

int up_patch_tramp(const struct up_patch_site *site, uint64_t tramp, uint64_t counter,
		   uint8_t *code, size_t size, size_t *len, unsigned home_of[UP_PATCH_MAX_INSN])
{
	bool lahf = up_patch_have_lahf();
	const uint8_t *pro = lahf ? count_lahf : count_pushf;
	size_t n = lahf ? sizeof(count_lahf) : sizeof(count_pushf);
	unsigned disp = lahf ? LAHF_DISP : PUSHF_DISP, end = lahf ? LAHF_END : PUSHF_END;
	int64_t d = (int64_t)(counter - (tramp + end));
	int32_t d32;

	if (size < n || !rel32(d))
		return -ERANGE;
	memcpy(code, pro, n);
	d32 = (int32_t)d;
	memcpy(code + disp, &d32, 4);
	return tail(site, tramp, code, size, n, len, home_of);
}

/*
 * A return probe's entry on a CPU with lahf: no register frame, upa_hijack(desc, slot)
 * saves what it uses; then on through slot[-2] (abi.h, UPA_RT_STUB): a call site of the
 * return trampoline, which goes on into the function with a call, or the function
 * straight on (B, whose address the trampoline leaves at slot[-1]).  The flags are kept
 * with lahf and seto; DF is the program's (nothing runs a string instruction).  With
 * UPA_P_ENTRY_ARGS (all six argument registers in regs) they are pushed in frame order
 * for the hijack to keep (UPA_HIJACK_FRAME).  The agent's address is a literal after
 * the code: the trampoline may be farther than a rel32 from the agent.
 */
static int tramp_hijack(const struct up_patch_site *site, uint64_t tramp, uint64_t desc,
			uint64_t hijack, bool args, uint8_t *code, size_t size, size_t *len,
			unsigned home_of[UP_PATCH_MAX_INSN])
{
	uint8_t c[UP_PATCH_TRAMP_REC];
	unsigned np = args ? 7 : 3; /* words pushed below the red zone */
	size_t n = 0, b_at, lit_at;
	int32_t d32;
	int rc;

	n += lea_rsp(c + n, 4, -128); /* the red zone */
	if (args) {
		c[n++] = 0x57, c[n++] = 0x56;				    /* push rdi rsi */
		c[n++] = 0x52, c[n++] = 0x51;				    /* push rdx rcx */
		c[n++] = 0x50;						    /* push %rax */
		c[n++] = 0x0f, c[n++] = 0x90, c[n++] = 0xc0;		    /* seto %al */
		c[n++] = 0x9f;						    /* lahf */
		c[n++] = 0x41, c[n++] = 0x50, c[n++] = 0x41, c[n++] = 0x51; /* push r8 r9 */
	} else {
		c[n++] = 0x50;				     /* push %rax */
		c[n++] = 0x0f, c[n++] = 0x90, c[n++] = 0xc0; /* seto %al */
		c[n++] = 0x9f;				     /* lahf */
		c[n++] = 0x56, c[n++] = 0x57;		     /* push rsi rdi */
	}
	c[n++] = 0x48, c[n++] = 0x8d, c[n++] = 0x3d; /* lea B(%rip),%rdi */
	b_at = n;
	n += 4;
	n += mov_rsp(c + n, true, 7, (int32_t)(128 + 8 * np - 8)); /* slot[-1] */
	c[n++] = 0x48, c[n++] = 0xbf;				   /* movabs $desc,%rdi */
	memcpy(c + n, &desc, 8), n += 8;
	n += lea_rsp(c + n, 6, (int32_t)(128 + 8 * np)); /* the slot, in rsi */
	c[n++] = 0xff, c[n++] = 0x15;			 /* call *lit(%rip) */
	lit_at = n;
	n += 4;
	if (args) {
		c[n++] = 0x41, c[n++] = 0x59, c[n++] = 0x41, c[n++] = 0x58; /* pop r9 r8 */
	} else {
		c[n++] = 0x5f, c[n++] = 0x5e; /* pop rdi rsi */
	}
	c[n++] = 0x04, c[n++] = 0x7f; /* add $0x7f,%al: OF again */
	c[n++] = 0x9e;		      /* sahf */
	c[n++] = 0x58;		      /* pop %rax */
	if (args)
		c[n++] = 0x59, c[n++] = 0x5a, c[n++] = 0x5e, c[n++] = 0x5f; /* pop rcx..rdi */
	n += lea_rsp(c + n, 4, 128);
	c[n++] = 0xff, c[n++] = 0x64, c[n++] = 0x24, c[n++] = 0xf0; /* jmp *-16(%rsp) */
	d32 = (int32_t)(n - (b_at + 4));
	memcpy(c + b_at, &d32, 4);
	if (n > size)
		return -ERANGE;
	memcpy(code, c, n);
	rc = tail(site, tramp, code, size, n, len, home_of);
	if (rc)
		return rc;
	if (*len + 8 > size)
		return -ERANGE;
	d32 = (int32_t)(*len - (lit_at + 4));
	memcpy(code + lit_at, &d32, 4);
	memcpy(code + *len, &hijack, 8);
	*len += 8;
	return 0;
}

int up_patch_tramp_rec(const struct up_patch_site *site, uint64_t tramp, uint64_t desc,
		       uint64_t entry, uint64_t regs, bool is_ret, uint8_t *code, size_t size,
		       size_t *len, unsigned home_of[UP_PATCH_MAX_INSN])
{
	uint8_t c[UP_PATCH_TRAMP_REC];
	bool lahf = up_patch_have_lahf();
	size_t n = 0;

	if (is_ret && lahf) {
		const uint64_t args = 1ull << UPA_RDI | 1ull << UPA_RSI | 1ull << UPA_RDX |
				      1ull << UPA_RCX | 1ull << UPA_R8 | 1ull << UPA_R9;
		uint64_t off;

		memcpy(&off, up_agent_blob + UPA_HIJACK_AT, 8);
		return tramp_hijack(site, tramp, desc, entry - UPA_ENTRY_OFF + off,
				    (regs & args) == args, code, size, len, home_of);
	}

	n += lea_rsp(c + n, 4, -128); /* the red zone */
	c[n++] = 0x9c;		       /* pushfq */
	c[n++] = 0xfc;		       /* cld: the agent is C (popfq puts DF back) */
	n += lea_rsp(c + n, 4, -FRAME);
	for (int w = 0; w < UPA_NREGS; w++)
		if (hw_of[w] >= 0 && (caller_saved(w) || (regs >> w & 1)))
			n += mov_rsp(c + n, true, hw_of[w], 8 * w);
	if (regs >> UPA_RSP & 1) {
		n += lea_rsp(c + n, 0, FRAME + 8 + 128); /* the thread's own rsp */
		n += mov_rsp(c + n, true, 0, 8 * UPA_RSP);
	}
	if (regs >> UPA_EFLAGS & 1) {
		n += mov_rsp(c + n, false, 0, FRAME);
		n += mov_rsp(c + n, true, 0, 8 * UPA_EFLAGS);
	}
	c[n++] = 0x48, c[n++] = 0x89, c[n++] = 0xe7; /* mov %rsp,%rdi */
	c[n++] = 0x48, c[n++] = 0xbe;		      /* movabs $desc,%rsi */
	memcpy(c + n, &desc, 8), n += 8;
	c[n++] = 0x48, c[n++] = 0xb8; /* movabs $entry,%rax */
	memcpy(c + n, &entry, 8), n += 8;
	c[n++] = 0xff, c[n++] = 0xd0; /* call *%rax */
	for (int w = 0; w < UPA_NREGS; w++)
		if (hw_of[w] >= 0 && caller_saved(w) && !(lahf && w == UPA_RAX))
			n += mov_rsp(c + n, false, hw_of[w], 8 * w);
	if (lahf) {
		/*
		 * popfq costs ~5 ns, most of a histogram's hit: the flags the agent can
		 * change are put back by hand from pushfq's word, DF with std, OF with the
		 * add $0x7f trick, the others with sahf.  Nothing else in the word can have
		 * changed (the agent never touches AC or TF).
		 */
		int32_t fl = FRAME, fl1 = FRAME + 1;

		c[n++] = 0x66, c[n++] = 0xf7, c[n++] = 0x84, c[n++] = 0x24; /* testw $0x400,fl(%rsp) */
		memcpy(c + n, &fl, 4), n += 4;
		c[n++] = 0x00, c[n++] = 0x04;
		c[n++] = 0x74, c[n++] = 0x01; /* jz 1f */
		c[n++] = 0xfd;		      /* std; 1: */
		c[n++] = 0x0f, c[n++] = 0xb6, c[n++] = 0x84, c[n++] = 0x24; /* movzbl fl(%rsp),%eax */
		memcpy(c + n, &fl, 4), n += 4;
		c[n++] = 0xc1, c[n++] = 0xe0, c[n++] = 0x08; /* shl $8,%eax: ah, the flags */
		c[n++] = 0xf6, c[n++] = 0x84, c[n++] = 0x24; /* testb $0x8,fl+1(%rsp): OF */
		memcpy(c + n, &fl1, 4), n += 4;
		c[n++] = 0x08;
		c[n++] = 0x0f, c[n++] = 0x95, c[n++] = 0xc0; /* setnz %al */
		c[n++] = 0x04, c[n++] = 0x7f;		      /* add $0x7f,%al: OF */
		c[n++] = 0x9e;				      /* sahf: SF ZF AF PF CF */
		n += mov_rsp(c + n, false, 0, 8 * UPA_RAX);   /* rax, last */
		n += lea_rsp(c + n, 4, FRAME + 8);	      /* the frame and the word */
	} else {
		n += lea_rsp(c + n, 4, FRAME);
		c[n++] = 0x9d; /* popfq */
	}
	n += lea_rsp(c + n, 4, 128);
	if (n > size)
		return -ERANGE;
	memcpy(code, c, n);
	return tail(site, tramp, code, size, n, len, home_of);
}

int up_patch_hop(const struct up_patch_site *site, uint64_t tramp, uint8_t *code)
{
	int64_t d = (int64_t)(tramp - (site->hop + UP_PATCH_JMP));
	int32_t d32 = (int32_t)d;

	if (site->tactic != UP_TACTIC_HOP || !rel32(d))
		return -ERANGE;
	code[0] = 0xe9;
	memcpy(code + 1, &d32, 4);
	return 0;
}

int up_patch_jmp(const struct up_patch_site *site, uint64_t tramp, uint8_t *code)
{
	int64_t d = (int64_t)(tramp - (site->vaddr + UP_PATCH_JMP));
	int32_t d32;

	if (site->tactic == UP_TACTIC_HOP) {
		d = (int64_t)(site->hop - (site->vaddr + UP_PATCH_SHORT));
		if (d < -128 || d > 127)
			return -ERANGE;
		code[0] = 0xeb;
		code[1] = (uint8_t)(int8_t)d;
		return 0;
	}
	if (!rel32(d))
		return -ERANGE;
	code[0] = 0xe9;
	d32 = (int32_t)d;
	memcpy(code + 1, &d32, 4);
	/* a punned jmp's rel32 ends in the bytes after the instruction, unchanged */
	if (site->tactic == UP_TACTIC_PUN) {
		unsigned k = site->insn[0].length;

		if (memcmp(code + k, site->orig + k, UP_PATCH_JMP - k))
			return -ERANGE;
	}
	/* the rest of the covered bytes are never reached: int3, so a stray jump traps */
	memset(code + UP_PATCH_JMP, UP_BKPT_INSN, site->len - UP_PATCH_JMP);
	return 0;
}

/* How an instruction of ours moves rsp (push, pop, lea disp(%rsp),%rsp), in bytes
   pushed; *jmp: it jumps for good (jmp, not jcc). */
static int rsp_delta(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, bool *jmp)
{
	*jmp = in->mnemonic == ZYDIS_MNEMONIC_JMP;
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_PUSH:
	case ZYDIS_MNEMONIC_PUSHFQ:
		return 8;
	case ZYDIS_MNEMONIC_POP:
	case ZYDIS_MNEMONIC_POPFQ:
		return -8;
	case ZYDIS_MNEMONIC_LEA:
		if (op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    op[0].reg.value == ZYDIS_REGISTER_RSP && op[1].mem.base == ZYDIS_REGISTER_RSP &&
		    op[1].mem.index == ZYDIS_REGISTER_NONE)
			return (int)-op[1].mem.disp.value;
		return 0;
	default:
		return 0;
	}
}

unsigned up_patch_rows(const struct up_patch_site *site, uint64_t tramp, const uint8_t *code,
		       size_t len, const unsigned home_of[UP_PATCH_MAX_INSN],
		       struct up_unwind_row *rows, unsigned max)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t pc = site->vaddr, back = site->vaddr;
	unsigned n = 0, region = 0; /* 0: ours, before the relocated ones; i + 1: insn i */
	int sp = 0;

	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return 0;
	for (unsigned i = 0; i < site->ninsn; i++)
		back = site->insn[i].vaddr + site->insn[i].length;
	for (size_t off = 0; off < len;) {
		bool jmp, last;
		int64_t d;
		int k;

		/* the relocated instruction that starts here: the program is at its address,
		   its rsp the trampoline's (a chain's tail, a jmp on, is the site's) */
		while (!site->chain && region < site->ninsn && home_of[region] <= off) {
			pc = site->insn[region].vaddr;
			sp = 0;
			region++;
		}
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + off, len - off, &in, op)))
			break;
		last = site->chain ? off >= home_of[0] : region == site->ninsn;
		k = rsp_delta(&in, op, &jmp);
		/* the jmp back, after the last relocated instruction */
		if (last && jmp && !site->chain && in.length == 5 && code[off] == 0xe9 &&
		    off > home_of[site->ninsn - 1] &&
		    !up_patch_is_call(&site->insn[site->ninsn - 1])) {
			pc = back;
			sp = 0;
		}
		d = (int64_t)(pc - (tramp + off));
		if (d < INT32_MIN || d > INT32_MAX || sp < 0 || sp > INT16_MAX)
			return 0;
		if (!n || rows[n - 1].rbp_off != sp ||
		    (int64_t)rows[n - 1].cfa_off + (int64_t)rows[n - 1].pc != d + (int64_t)off) {
			if (n == max)
				return 0;
			rows[n++] = (struct up_unwind_row){ .pc = (uint32_t)off,
							    .cfa_off = (int32_t)d,
							    .rbp_off = (int16_t)sp,
							    .cfa = UP_UW_TRAMP };
		}
		off += in.length;
		sp += k;
		if (last && jmp)
			break; /* nothing of ours runs after it (a hijack's literal follows) */
	}
	return n;
}
