// SPDX-License-Identifier: MIT
/*
 * Where a jmp may replace instructions, and the trampoline it jumps to.
 *
 * A 5-byte jmp over instructions is only safe when nothing can arrive inside the
 * bytes it covers: no thread stopped there, no branch targeting them, and no signal
 * frame holding a return address into them.  One instruction of 5 bytes or more is
 * always safe: nothing starts inside an instruction, and a thread stopped at its start
 * (the arbiter checks every thread's rip, with all of them stopped) finds the jmp
 * there.  Shorter ones take the next instructions along (up to 5 of them), where
 * ubp.c finds that nothing branches into them (the enclosing function decoded whole,
 * jump tables and cold parts included) and the arbiter finds no thread's rip, and no
 * word on any thread's stack (a signal frame's saved rip), inside them.
 */
#include <cpuid.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/patch.h"
#include "agent/abi.h"
#include "ubp.h"

/* Can insn run free in a trampoline, relocated?  Not a call (its return address), not
   a loop (rel8 only), nothing needing a step. */
static bool relocatable(const struct up_insn *insn, uint64_t at)
{
	struct up_reloc rel;

	switch (insn->emu) {
	case UP_EMU_CALL:
	case UP_EMU_CALL_IND:
	case UP_EMU_LOOP:
	case UP_EMU_LOOPE:
	case UP_EMU_LOOPNE:
	case UP_EMU_JCXZ:
		return false;
	default:
		break;
	}
	if (insn->plan == UP_PLAN_REJECT || insn->plan == UP_PLAN_STEP)
		return false;
	return up_reloc_build(insn, at, &rel) == 0 && !rel.step;
}

int up_patch_site(struct up_proc *p, struct up_ubp_files *files, uint64_t vaddr,
		  struct up_patch_site *site, char *why, size_t whylen)
{
	char text[96];
	int rc;

	memset(site, 0, sizeof(*site));
	site->vaddr = vaddr;
	if (up_proc_mode(p) != 64) {
		snprintf(why, whylen, "a 32-bit process");
		return -ENOTSUP;
	}
	while (site->len < UP_PATCH_JMP) {
		uint64_t at = vaddr + site->len;
		struct up_ubp b;

		if (site->ninsn == UP_PATCH_MAX_INSN) {
			snprintf(why, whylen, "too many instructions under the jmp");
			return -ENOTSUP;
		}
		/* an instruction boundary in executable code, analysed */
		rc = up_ubp_prepare(p, files, at, &b, why, whylen);
		if (rc) {
			if (site->ninsn && rc == -EEXIST)
				snprintf(why, whylen, "an int3 at 0x%" PRIx64 " under the jmp", at);
			return rc == -EEXIST && !site->ninsn ? rc : -ENOTSUP;
		}
		if (!relocatable(&b.insn, at)) {
			snprintf(why, whylen, "'%s' at 0x%" PRIx64 " cannot run in a trampoline",
				 up_insn_format(&b.insn, text, sizeof(text)), at);
			return -ENOTSUP;
		}
		site->insn[site->ninsn++] = b.insn;
		memcpy(site->orig + site->len, b.insn.bytes, b.insn.length);
		site->len += b.insn.length;
	}
	/* several instructions: nothing may jump into the middle of them */
	if (site->ninsn > 1) {
		char sub[160];

		rc = up_ubp_region_free(p, files, vaddr, vaddr + site->len, sub, sizeof(sub));
		if (rc) {
			snprintf(why, whylen, "'%s' is %u bytes, the jmp needs %d, and the next "
				 "instructions cannot be covered: %s",
				 up_insn_format(&site->insn[0], text, sizeof(text)),
				 site->insn[0].length, UP_PATCH_JMP, sub);
			return -ENOTSUP;
		}
	}
	return 0;
}

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

/* The relocated instructions and the jmp back, at code + n; or the jmp on to the next
   trampoline of a chain. */
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

		if (up_reloc_build(&site->insn[i], tramp + n, &rel) || rel.step ||
		    n + rel.insn_len > size)
			return -ERANGE;
		memcpy(code + n, rel.code, rel.insn_len);
		home_of[i] = (unsigned)n;
		n += rel.insn_len;
	}
	back = (int64_t)(site->vaddr + site->len - (tramp + n + 5));
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

int up_patch_tramp_rec(const struct up_patch_site *site, uint64_t tramp, uint64_t desc,
		       uint64_t entry, uint64_t regs, uint8_t *code, size_t size, size_t *len,
		       unsigned home_of[UP_PATCH_MAX_INSN])
{
	uint8_t c[UP_PATCH_TRAMP_REC];
	bool lahf = up_patch_have_lahf();
	size_t n = 0;

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

int up_patch_jmp(const struct up_patch_site *site, uint64_t tramp, uint8_t *code)
{
	int64_t d = (int64_t)(tramp - (site->vaddr + UP_PATCH_JMP));
	int32_t d32;

	if (!rel32(d))
		return -ERANGE;
	code[0] = 0xe9;
	d32 = (int32_t)d;
	memcpy(code + 1, &d32, 4);
	/* the rest of the covered bytes are never reached: int3, so a stray jump traps */
	memset(code + UP_PATCH_JMP, UP_BKPT_INSN, site->len - UP_PATCH_JMP);
	return 0;
}
