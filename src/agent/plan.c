// SPDX-License-Identifier: MIT
/*
 * The planner: how an address gets its fast-path control transfer, from the analyzer's
 * facts.  It never writes to a process; the arbiter patches, with every thread stopped.
 *
 * A 5-byte jmp over instructions is only safe when nothing can arrive inside the bytes
 * it changes: no thread stopped there, no branch targeting them, and no signal frame
 * holding a return address into them.  The tactics, tried in this order (each safe
 * with its checks; among safe ones the cheapest to place comes first):
 *
 *   jmp   one instruction of 5 bytes or more: nothing starts inside an instruction,
 *         and a thread stopped at its start finds the jmp there.
 *
 * A call is relocated as what it does (a push of its home return address, a jmp), so
 * the callee returns to the original code: it can only be a site's last instruction,
 * its return address the end of what the jmp changes.
 *   succ  a shorter one with its successors (up to 5 instructions), relocated into the
 *         trampoline too, where ubp.c finds that nothing branches into them (the
 *         enclosing function decoded whole, jump tables and cold parts included) and
 *         the arbiter finds no thread's rip, and no word on any thread's stack (a
 *         signal frame's saved rip), inside them.
 *   pad   a function shorter than 5 bytes from the probe to its end: its instructions
 *         (the last an unconditional ret or jmp, so the bytes after it never run) and
 *         the padding after it (nops, int3s, up to the next symbol), which nothing
 *         executes and nothing branches to.
 *   pun   the instruction alone: e9 and the low bytes of the rel32 over its own bytes,
 *         the rel32's high bytes the bytes that follow, unchanged (E9Patch's punned
 *         jump).  Nothing but the probed instruction changes, so branches into what
 *         follows are harmless; the price is the trampoline's place, which those bytes
 *         dictate: a window of 256^(k-1) addresses for a k-byte instruction, one exact
 *         address for a 1-byte one, where a page must be free to map.  The bytes that
 *         follow may be a neighbour's jmp or int3 (every instruction probed): the
 *         arbiter moves the trampoline whenever they change (fast.c repun_under), and
 *         arms a file's probes from the highest address down, so that they seldom do.
 *
 *   hop   the instruction alone (2 bytes or more), when the pun's window has no room:
 *         a jmp rel8 over its first 2 bytes to a jmp rel32 planted in the padding after
 *         its function or the one before (as pad finds padding: after an instruction
 *         that ends the flow, nops and int3s up to the next function), within reach
 *         (E9Patch's neighbour eviction, into padding).
 *
 * Where none applies the probe stays on int3, and the reason of the tactic that came
 * closest is given.  Prefix: up_patch_ (the site), up_plan_ (the static report).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/patch.h"
#include "sym/sym.h"
#include "ubp.h"

/* Can insn run free in a trampoline, relocated?  A call as its emulation (patch.c), so
   only as a site's last instruction; not a loop (rel8 only), nothing needing a step. */
static bool relocatable(const struct up_insn *insn, uint64_t at)
{
	struct up_reloc rel;
	uint8_t buf[64];

	if (up_patch_is_call(insn)) /* placed near the code: as a trampoline would be */
		return up_patch_emulate_call(insn, at, buf, sizeof(buf)) > 0;
	switch (insn->emu) {
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

/* Does control never fall through insn (so the bytes after it run only if a branch
   goes there)? */
static bool ends_flow(const struct up_insn *insn)
{
	return insn->emu == UP_EMU_RET || insn->emu == UP_EMU_JMP ||
	       insn->emu == UP_EMU_JMP_IND || insn->mnemonic == ZYDIS_MNEMONIC_UD2 ||
	       insn->mnemonic == ZYDIS_MNEMONIC_HLT;
}

const char *up_patch_tactic_name(enum up_tactic t)
{
	switch (t) {
	case UP_TACTIC_JMP: return "jmp";
	case UP_TACTIC_SUCC: return "succ";
	case UP_TACTIC_PAD: return "pad";
	case UP_TACTIC_PUN: return "pun";
	case UP_TACTIC_HOP: return "hop";
	case UP_TACTIC_INT3: break;
	}
	return "int3";
}

/*
 * The punned jmp's window: the rel32's low k - 1 bytes are free, the rest are the
 * 5 - k bytes that follow the k-byte instruction at vaddr.  The trampoline may start
 * anywhere in [*lo, *hi] (the sign is in a fixed byte, so the window is contiguous).
 */
static void pun_window(uint64_t vaddr, unsigned k, const uint8_t *follow, uint64_t *lo,
		       uint64_t *hi)
{
	uint32_t fixed = 0;

	for (unsigned i = k - 1; i < 4; i++)
		fixed |= (uint32_t)follow[i - (k - 1)] << (8 * i);
	*lo = vaddr + UP_PATCH_JMP + (uint64_t)(int64_t)(int32_t)fixed;
	*hi = *lo + ((1ull << (8 * (k - 1))) - 1);
}

/* A user address a trampoline can be mapped at (4-level paging, above mmap_min_addr). */
static bool user_window(uint64_t lo, uint64_t hi)
{
	return lo >= 0x10000 && hi < 0x7fffffff0000ull && lo <= hi;
}

/* Are the file's bytes [lo, hi) padding: nops and int3s, in no function? */
static bool padding(struct up_sym_elf *elf, uint64_t lo, uint64_t hi, enum up_insn_mode mode)
{
	uint8_t buf[UP_INSN_MAX + 8];
	struct up_sym sym;
	struct up_insn insn;

	for (uint64_t at = lo; at < hi;) {
		size_t n = sizeof(buf);

		if (up_sym_elf_enclosing_code(elf, at, &sym) == 0)
			return false;
		while (n && up_sym_elf_read(elf, at, buf, n))
			n--;
		if (!n)
			return false;
		up_insn_analyze(&insn, buf, n, at, mode);
		if (!insn.length || (insn.mnemonic != ZYDIS_MNEMONIC_NOP &&
				     insn.mnemonic != ZYDIS_MNEMONIC_INT3))
			return false;
		at += insn.length;
	}
	return true;
}

/*
 * The pad tactic over the file: from fv to the end of its function, whole relocatable
 * instructions (at most UP_PATCH_MAX_INSN) the last of which ends the flow, nothing
 * branching into them, then padding up to fv + 5.  Fills insn[] (file addresses) and
 * *n; 0 or -ENOTSUP with why.
 */
static int pad_fits(struct up_sym_elf *elf, uint64_t fv, enum up_insn_mode mode,
		    struct up_insn *insn, unsigned *n, char *why, size_t whylen)
{
	struct up_sym sym;
	const uint8_t *code;
	uint64_t at, end;
	char sub[160];

	*n = 0;
	if (up_sym_elf_enclosing_code(elf, fv, &sym) || !sym.size ||
	    up_sym_elf_code(elf, sym.value, sym.size, &code)) {
		snprintf(why, whylen, "no symbol for the enclosing function");
		return -ENOTSUP;
	}
	end = sym.value + sym.size;
	if (end - fv >= UP_PATCH_JMP) {
		snprintf(why, whylen, "the function goes on past the jmp's bytes");
		return -ENOTSUP;
	}
	for (at = fv; at < end; at += insn[*n - 1].length) {
		if (*n == UP_PATCH_MAX_INSN) {
			snprintf(why, whylen, "too many instructions before the padding");
			return -ENOTSUP;
		}
		up_insn_analyze(&insn[*n], code + (at - sym.value), end - at, at, mode);
		if (!insn[*n].length || up_patch_is_call(&insn[*n]) || !relocatable(&insn[*n], at)) {
			snprintf(why, whylen, "an instruction of the function's tail cannot run "
					      "in a trampoline");
			return -ENOTSUP;
		}
		(*n)++;
	}
	if (at != end || !ends_flow(&insn[*n - 1])) {
		snprintf(why, whylen, "%s does not end in a ret or jmp", sym.name);
		return -ENOTSUP;
	}
	if (*n > 1 && up_ubp_region_free_file(elf, fv, end, sub, sizeof(sub))) {
		snprintf(why, whylen, "%s", sub);
		return -ENOTSUP;
	}
	if (!padding(elf, end, fv + UP_PATCH_JMP, mode)) {
		snprintf(why, whylen, "the bytes after %s are not padding", sym.name);
		return -ENOTSUP;
	}
	return 0;
}

/* Does the function sym end in an instruction after which control never falls (so the
   bytes after it run only if something branches there)? */
static bool func_ends_flow(struct up_sym_elf *elf, const struct up_sym *sym, enum up_insn_mode mode)
{
	const uint8_t *code;
	struct up_insn insn = { .length = 0 };
	uint64_t at;

	if (!sym->size || up_sym_elf_code(elf, sym->value, sym->size, &code))
		return false;
	for (at = sym->value; at < sym->value + sym->size; at += insn.length) {
		up_insn_analyze(&insn, code + (at - sym->value), sym->value + sym->size - at, at,
				mode);
		if (!insn.length)
			return false;
	}
	return at == sym->value + sym->size && ends_flow(&insn);
}

/* Candidates for a hop in the padding [lo, hi) after a function that ends the flow,
   nearest to the jmp rel8 at fv first; 0 and *pf, else -ENOTSUP. */
static int hop_in_gap(struct up_sym_elf *elf, uint64_t fv, uint64_t lo, uint64_t hi,
		      enum up_insn_mode mode, bool (*taken)(void *arg, uint64_t pf), void *arg,
		      uint64_t *pf)
{
	uint64_t from = fv + UP_PATCH_SHORT;

	for (unsigned i = 0; lo + UP_PATCH_JMP <= hi && i < 2 * 128; i++) {
		/* alternately from the end nearer to the jmp */
		uint64_t c = from <= lo ? lo + i : hi - UP_PATCH_JMP - i;
		int64_t d = (int64_t)(c - from);

		if (c < lo || c + UP_PATCH_JMP > hi || d < -128 || d > 127)
			break;
		if (padding(elf, lo, c + UP_PATCH_JMP, mode) && !(taken && taken(arg, c))) {
			*pf = c;
			return 0;
		}
	}
	return -ENOTSUP;
}

/*
 * The hop tactic over the file: the instruction at fv (2 bytes or more) becomes a jmp
 * rel8 to a 5-byte jmp planted in the padding after its function, or after the one
 * before, within reach: bytes no code runs, as the pad tactic uses them -- after an
 * instruction that ends its function's flow, up to the next function, nops and int3s
 * only.  taken: a place another site has already (NULL: none).  0 and *pf, else
 * -ENOTSUP with why.
 */
static int hop_find(struct up_sym_elf *elf, uint64_t fv, unsigned len, enum up_insn_mode mode,
		    bool (*taken)(void *arg, uint64_t pf), void *arg, uint64_t *pf, char *why,
		    size_t whylen)
{
	struct up_sym f, e, g;

	if (len < UP_PATCH_SHORT) {
		snprintf(why, whylen, "a 1-byte instruction has no room for a 2-byte jmp");
		return -ENOTSUP;
	}
	if (up_sym_elf_enclosing_code(elf, fv, &f) || !f.size) {
		snprintf(why, whylen, "no symbol for the enclosing function");
		return -ENOTSUP;
	}
	/* after its own function: the padding up to the next one */
	if (fv + UP_PATCH_SHORT + 127 >= f.value + f.size && func_ends_flow(elf, &f, mode)) {
		uint64_t end = f.value + f.size, hi = end;

		while (hi < end + 64 && up_sym_elf_enclosing_code(elf, hi, &g))
			hi++;
		if (!hop_in_gap(elf, fv, end, hi, mode, taken, arg, pf))
			return 0;
	}
	/* before it: the padding after the function before */
	if (fv + UP_PATCH_SHORT - 128 <= f.value) {
		uint64_t lo = f.value;

		while (lo > f.value - 64 && up_sym_elf_enclosing_code(elf, lo - 1, &e))
			lo--;
		if (lo < f.value && up_sym_elf_enclosing_code(elf, lo - 1, &e) == 0 &&
		    e.value + e.size == lo && func_ends_flow(elf, &e, mode) &&
		    !hop_in_gap(elf, fv, lo, f.value, mode, taken, arg, pf))
			return 0;
	}
	snprintf(why, whylen, "no padding within a jmp rel8's reach");
	return -ENOTSUP;
}

/* ---- the live site ----------------------------------------------------------------- */

/* The first instruction alone: jmp, when it is 5 bytes or more. */
static int first_insn(struct up_proc *p, struct up_ubp_files *files, struct up_patch_site *site,
		      char *why, size_t whylen)
{
	struct up_ubp b;
	char text[96];
	int rc = up_ubp_prepare(p, files, site->vaddr, &b, why, whylen);

	if (rc)
		return rc == -EEXIST ? rc : -ENOTSUP;
	if (!relocatable(&b.insn, site->vaddr)) {
		snprintf(why, whylen, "'%s' at 0x%" PRIx64 " cannot run in a trampoline",
			 up_insn_format(&b.insn, text, sizeof(text)), site->vaddr);
		return -ENOTSUP;
	}
	site->insn[0] = b.insn;
	site->ninsn = 1;
	memcpy(site->orig, b.insn.bytes, b.insn.length);
	site->len = b.insn.length;
	return 0;
}

/* succ: the successors too, whole instructions until 5 bytes are covered. */
static int try_succ(struct up_proc *p, struct up_ubp_files *files, uint64_t limit,
		    struct up_patch_site *site, char *why, size_t whylen)
{
	char text[96], sub[160];

	while (site->len < UP_PATCH_JMP) {
		uint64_t at = site->vaddr + site->len;
		struct up_ubp b;
		int rc;

		if (limit && at >= limit) {
			snprintf(why, whylen, "the next instruction, at 0x%" PRIx64 ", is another "
				 "fast-path site's", at);
			return -ENOTSUP;
		}
		if (site->ninsn == UP_PATCH_MAX_INSN) {
			snprintf(why, whylen, "too many instructions under the jmp");
			return -ENOTSUP;
		}
		rc = up_ubp_prepare(p, files, at, &b, why, whylen);
		if (rc) {
			if (rc == -EEXIST)
				snprintf(why, whylen, "an int3 at 0x%" PRIx64 " under the jmp", at);
			return -ENOTSUP;
		}
		if (!relocatable(&b.insn, at)) {
			snprintf(why, whylen, "'%s' at 0x%" PRIx64 " cannot run in a trampoline",
				 up_insn_format(&b.insn, text, sizeof(text)), at);
			return -ENOTSUP;
		}
		site->insn[site->ninsn++] = b.insn;
		memcpy(site->orig + site->len, b.insn.bytes, b.insn.length);
		site->len += b.insn.length;
		if (up_patch_is_call(&b.insn) && site->len < UP_PATCH_JMP) {
			snprintf(why, whylen, "a call at 0x%" PRIx64 " would return inside the jmp's "
				 "bytes", at);
			return -ENOTSUP;
		}
	}
	if (up_ubp_region_free(p, files, site->vaddr, site->vaddr + site->len, sub, sizeof(sub))) {
		snprintf(why, whylen, "'%s' is %u bytes, the jmp needs %d, and the next "
			 "instructions cannot be covered: %s",
			 up_insn_format(&site->insn[0], text, sizeof(text)), site->insn[0].length,
			 UP_PATCH_JMP, sub);
		return -ENOTSUP;
	}
	return 0;
}

/* The file mapped at vaddr, and vaddr's address in it. */
static struct up_sym_elf *file_of(struct up_proc *p, struct up_ubp_files *files, uint64_t vaddr,
				  uint64_t *fv)
{
	struct up_sym_elf *elf;
	struct up_map m;

	if (up_proc_find_map(p, vaddr, &m) || m.path[0] != '/' ||
	    !(elf = up_ubp_file(files, p, &m)) ||
	    up_sym_elf_offset_to_vaddr(elf, vaddr - m.start + m.offset, fv))
		return NULL;
	return elf;
}

/* pad: the function's tail and its padding, as the file has them (and the process). */
static int try_pad(struct up_proc *p, struct up_ubp_files *files, uint64_t limit,
		   struct up_patch_site *site, char *why, size_t whylen)
{
	struct up_insn insn[UP_PATCH_MAX_INSN];
	uint8_t now[UP_PATCH_JMP], file[UP_PATCH_JMP];
	struct up_sym_elf *elf;
	uint64_t fv, bias;
	unsigned n;
	int rc;

	if (limit && limit < site->vaddr + UP_PATCH_JMP) {
		snprintf(why, whylen, "another fast-path site's bytes at 0x%" PRIx64, limit);
		return -ENOTSUP;
	}
	elf = file_of(p, files, site->vaddr, &fv);
	if (!elf) {
		snprintf(why, whylen, "not in a mapped file");
		return -ENOTSUP;
	}
	rc = pad_fits(elf, fv, up_sym_elf_class(elf) == 32 ? UP_MODE_32 : UP_MODE_64, insn, &n,
		      why, whylen);
	if (rc)
		return rc;
	/* the process has the file's bytes there (no int3 of anyone's, nothing patched) */
	if (up_proc_read(p, site->vaddr, now, sizeof(now)) ||
	    up_sym_elf_read(elf, fv, file, sizeof(file)) || memcmp(now, file, sizeof(now))) {
		snprintf(why, whylen, "the process's bytes there are not the file's");
		return -ENOTSUP;
	}
	bias = site->vaddr - fv;
	site->ninsn = n;
	for (unsigned i = 0; i < n; i++) {
		/* analysed again at their process addresses: relocation reads vaddr */
		up_insn_analyze(&site->insn[i], insn[i].bytes, insn[i].length, insn[i].vaddr + bias,
				(enum up_insn_mode)insn[i].mode);
	}
	memcpy(site->orig, now, sizeof(now));
	site->len = UP_PATCH_JMP;
	return 0;
}

/* pun: the first instruction alone, the rel32 ending in the bytes after it (whatever
   they are now: a neighbour's jmp too, which must then stay while this one does).
   steerable: the bytes after it are not the file's (a neighbour's jmp, which can be
   moved so as to send this one elsewhere: site/pun.c), so a window outside user space
   is kept as none (0, 0) rather than refused. */
static int try_pun(struct up_proc *p, struct up_patch_site *site, bool steerable, char *why,
		   size_t whylen)
{
	unsigned k = site->insn[0].length;
	uint8_t follow[UP_PATCH_JMP];
	struct up_map m, m2;

	if (up_proc_find_map(p, site->vaddr, &m) || up_proc_find_map(p, site->vaddr + 4, &m2) ||
	    m.start != m2.start || up_proc_read(p, site->vaddr + k, follow, UP_PATCH_JMP - k)) {
		snprintf(why, whylen, "the bytes after it are not in the same mapping");
		return -ENOTSUP;
	}
	pun_window(site->vaddr, k, follow, &site->pun_lo, &site->pun_hi);
	if (!user_window(site->pun_lo, site->pun_hi)) {
		if (!steerable) {
			snprintf(why, whylen, "a punned jmp would go to 0x%" PRIx64 ", outside "
				 "user space", site->pun_lo);
			return -ENOTSUP;
		}
		site->pun_lo = site->pun_hi = 0;
	}
	memcpy(site->orig + k, follow, UP_PATCH_JMP - k);
	site->len = UP_PATCH_JMP;
	return 0;
}

int up_patch_repun(struct up_proc *p, struct up_patch_site *site, char *why, size_t whylen)
{
	return site->tactic == UP_TACTIC_PUN ? try_pun(p, site, true, why, whylen) : 0;
}

struct hop_live {
	struct up_proc *p;
	struct up_sym_elf *elf;
	uint64_t bias;
};

/* Are the process's bytes at the file's pf not the file's (another site's hop, an int3)? */
static bool hop_taken_live(void *arg, uint64_t pf)
{
	struct hop_live *h = arg;
	uint8_t now[UP_PATCH_JMP], file[UP_PATCH_JMP];

	return up_proc_read(h->p, pf + h->bias, now, sizeof(now)) ||
	       up_sym_elf_read(h->elf, pf, file, sizeof(file)) || memcmp(now, file, sizeof(now));
}

int up_patch_try_hop(struct up_proc *p, struct up_ubp_files *files, struct up_patch_site *site,
		     char *why, size_t whylen)
{
	struct hop_live h = { .p = p };
	uint64_t fv, pf;
	int rc;

	h.elf = file_of(p, files, site->vaddr, &fv);
	if (!h.elf) {
		snprintf(why, whylen, "not in a mapped file");
		return -ENOTSUP;
	}
	h.bias = site->vaddr - fv;
	rc = hop_find(h.elf, fv, site->insn[0].length,
		      up_sym_elf_class(h.elf) == 32 ? UP_MODE_32 : UP_MODE_64, hop_taken_live, &h,
		      &pf, why, whylen);
	if (rc)
		return rc;
	site->hop = pf + h.bias;
	if (up_proc_read(p, site->hop, site->hop_orig, sizeof(site->hop_orig))) {
		snprintf(why, whylen, "cannot read the padding");
		return -ENOTSUP;
	}
	site->tactic = UP_TACTIC_HOP;
	site->ninsn = 1;
	site->len = UP_PATCH_SHORT;
	return 0;
}

int up_patch_site(struct up_proc *p, struct up_ubp_files *files, uint64_t vaddr,
		  uint64_t limit, struct up_patch_site *site, char *why, size_t whylen)
{
	struct up_patch_site first;
	char w2[200], w3[200], w4[200];
	int rc;

	memset(site, 0, sizeof(*site));
	site->vaddr = vaddr;
	if (up_proc_mode(p) != 64) {
		snprintf(why, whylen, "a 32-bit process");
		return -ENOTSUP;
	}
	rc = first_insn(p, files, site, why, whylen);
	if (rc)
		return rc;
	if (site->len >= UP_PATCH_JMP) {
		site->tactic = UP_TACTIC_JMP;
		return 0;
	}
	first = *site;
	if (up_patch_is_call(&site->insn[0])) {
		snprintf(why, whylen, "a call of %u bytes returns inside the jmp's bytes",
			 site->len);
	} else if (!try_succ(p, files, limit, site, why, whylen)) {
		site->tactic = UP_TACTIC_SUCC;
		return 0;
	}
	*site = first;
	if (!try_pad(p, files, limit, site, w2, sizeof(w2))) {
		site->tactic = UP_TACTIC_PAD;
		return 0;
	}
	*site = first;
	if (!try_pun(p, site, limit && limit <= vaddr + UP_PATCH_JMP, w3, sizeof(w3))) {
		site->tactic = UP_TACTIC_PUN;
		return 0;
	}
	*site = first;
	if (!up_patch_try_hop(p, files, site, w4, sizeof(w4)))
		return 0;
	*site = first;
	site->tactic = UP_TACTIC_INT3;
	snprintf(why + strlen(why), whylen - strlen(why),
		 "; no padding (%s); no punned jmp (%s); no hop (%s)", w2, w3, w4);
	return -ENOTSUP;
}

/* ---- the static report ------------------------------------------------------------- */

enum up_tactic up_plan_file(struct up_sym_elf *elf, const struct up_insn *insn, uint64_t img_lo,
			    uint64_t img_hi, char *why, size_t whylen)
{
	enum up_insn_mode mode = (enum up_insn_mode)insn->mode;
	struct up_insn succ[UP_PATCH_MAX_INSN];
	uint8_t buf[UP_INSN_MAX + UP_PATCH_JMP];
	uint64_t at = insn->vaddr, lo, hi;
	unsigned n = 1, len = insn->length;
	char sub[160];

	why[0] = '\0';
	if (mode != UP_MODE_64) {
		snprintf(why, whylen, "32-bit code");
		return UP_TACTIC_INT3;
	}
	if (!insn->length || !relocatable(insn, at)) {
		snprintf(why, whylen, "cannot run in a trampoline");
		return UP_TACTIC_INT3;
	}
	if (len >= UP_PATCH_JMP)
		return UP_TACTIC_JMP;
	/* succ: whole instructions to 5 bytes, a call only as the last */
	succ[0] = *insn;
	while (len < UP_PATCH_JMP && n < UP_PATCH_MAX_INSN && !up_patch_is_call(&succ[n - 1])) {
		size_t got = sizeof(buf);

		while (got && up_sym_elf_read(elf, at + len, buf, got))
			got--;
		up_insn_analyze(&succ[n], buf, got, at + len, mode);
		if (!succ[n].length || !relocatable(&succ[n], at + len))
			break;
		len += succ[n++].length;
	}
	if (len >= UP_PATCH_JMP && !up_ubp_region_free_file(elf, at, at + len, sub, sizeof(sub)))
		return UP_TACTIC_SUCC;
	if (!pad_fits(elf, at, mode, succ, &n, sub, sizeof(sub)))
		return UP_TACTIC_PAD;
	/* pun: the window must leave the file's own image (a PIE's base is not known
	   here, so only that is certain to be taken) and, for a fixed-address file,
	   user space */
	if (up_sym_elf_read(elf, at + insn->length, buf, UP_PATCH_JMP - insn->length)) {
		snprintf(sub, sizeof(sub), "nothing after it to pun with");
	} else {
		pun_window(at, insn->length, buf, &lo, &hi);
		if (lo >= img_lo && hi < img_hi)
			snprintf(sub, sizeof(sub), "a punned jmp would land in the file's own image");
		else if (up_sym_elf_type(elf) == 2 /* ET_EXEC */ && !user_window(lo, hi))
			snprintf(sub, sizeof(sub), "a punned jmp would leave user space");
		else
			return UP_TACTIC_PUN;
	}
	/* hop: a jmp rel8 to a jmp in the padding nearby */
	if (!hop_find(elf, at, insn->length, mode, NULL, NULL, &lo, why, whylen))
		return UP_TACTIC_HOP;
	snprintf(why + strlen(why), whylen - strlen(why), "; %s", sub);
	return UP_TACTIC_INT3;
}
