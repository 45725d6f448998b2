// SPDX-License-Identifier: MIT
/*
 * Where a jmp may replace instructions, and the trampoline it jumps to.
 *
 * A 5-byte jmp over instructions is only safe when nothing can arrive inside the
 * bytes it covers: no thread stopped there, no branch targeting them, and no signal
 * frame holding a return address into them -- the last cannot be checked.  So a site
 * is one instruction of 5 bytes or more: nothing ever starts inside an instruction,
 * and a thread stopped at its start (the arbiter checks every thread's rip, with all
 * of them stopped) finds the jmp there.  Smaller instructions keep the int3 path.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/patch.h"
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
	struct up_ubp b;
	char text[96];
	int rc;

	memset(site, 0, sizeof(*site));
	site->vaddr = vaddr;
	if (up_proc_mode(p) != 64) {
		snprintf(why, whylen, "a 32-bit process");
		return -ENOTSUP;
	}
	/* an instruction boundary in executable code, the bytes as the file has them */
	rc = up_ubp_prepare(p, files, vaddr, &b, why, whylen);
	if (rc)
		return rc == -EEXIST ? rc : -ENOTSUP;
	if (b.insn.length < UP_PATCH_JMP) {
		snprintf(why, whylen, "'%s' is %u bytes, the jmp needs %d",
			 up_insn_format(&b.insn, text, sizeof(text)), b.insn.length, UP_PATCH_JMP);
		return -ENOTSUP;
	}
	if (!relocatable(&b.insn, vaddr)) {
		snprintf(why, whylen, "'%s' cannot run in a trampoline",
			 up_insn_format(&b.insn, text, sizeof(text)));
		return -ENOTSUP;
	}
	site->insn[0] = b.insn;
	site->ninsn = 1;
	site->len = b.insn.length;
	memcpy(site->orig, b.insn.bytes, b.insn.length);
	return 0;
}

static const uint8_t prologue[] = {
	0x48, 0x8d, 0x64, 0x24, 0x80,		   /* lea -0x80(%rsp),%rsp: the red zone */
	0x9c,					   /* pushfq */
	0xf0, 0x48, 0xff, 0x05, 0, 0, 0, 0,	   /* lock incq counter(%rip) */
	0x9d,					   /* popfq */
	0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0,	   /* lea 0x80(%rsp),%rsp */
};
#define COUNTER_DISP 10 /* offset of the incq's disp32 */
#define COUNTER_END 14	/* the incq's end */

static bool rel32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

int up_patch_tramp(const struct up_patch_site *site, uint64_t tramp, uint64_t counter,
		   uint8_t *code, size_t size, size_t *len, unsigned home_of[UP_PATCH_MAX_INSN])
{
	int64_t d = (int64_t)(counter - (tramp + COUNTER_END));
	int64_t back;
	size_t n = sizeof(prologue);
	int32_t d32;

	if (size < n || !rel32(d))
		return -ERANGE;
	memcpy(code, prologue, n);
	d32 = (int32_t)d;
	memcpy(code + COUNTER_DISP, &d32, 4);
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
