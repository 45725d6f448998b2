// SPDX-License-Identifier: MIT
/*
 * Trampolines and their chains: the code each probe of a site runs, several probes
 * at one address in a chain of trampolines, and when a trampoline no jmp leads to any
 * more goes back to the slot allocator.  It never frees a trampoline a thread may be
 * in or come back to.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "site/internal.h"

/* f's trampoline code for site (its chain says where it goes on), at tramp. */
static int tramp_code(struct up_sites *mm, const struct up_patched *f,
		      const struct up_patch_site *site, uint64_t tramp, uint8_t *code,
		      size_t size, size_t *len, unsigned home_of[UP_PATCH_MAX_INSN])
{
	if (f->rec)
		return up_patch_tramp_rec(site, tramp, f->desc, up_agent_entry(mm->agent), f->save,
					  f->is_ret, code, size, len, home_of);
	if (f->shared)
		return up_patch_tramp_abs(site, tramp, f->counter, code, size, len, home_of);
	return up_patch_tramp(site, tramp, f->counter, code, size, len, home_of);
}

size_t tramp_need(struct up_sites *mm, const struct up_patched *f, bool chained)
{
	struct up_patch_site site = f->site;
	uint8_t code[UP_PATCH_TRAMP_REC];
	unsigned home[UP_PATCH_MAX_INSN];
	size_t need = 64ull * (f->rec ? FAST_SLOTS_REC : FAST_SLOTS);
	uint64_t at = site.pun_lo ? site.pun_lo : site.vaddr;

	site.chain = chained ? at : 0;
	if (!tramp_code(mm, f, &site, at, code, sizeof(code), &need, home))
		need = need < 64 ? 64 : need;
	return need;
}

/* The probes sharing the jmp at vaddr, in the order their trampolines run. */
unsigned chain_of(struct up_sites *mm, uint64_t vaddr, struct up_patched **v)
{
	unsigned n = 0;

	for (struct up_patched *f = mm->fast; f; f = f->next) {
		unsigned i;

		if (!f->patched || f->site.vaddr != vaddr || n == CHAIN_MAX)
			continue;
		/* insertion by (is_ret, seq) */
		for (i = n; i > 0 && (v[i - 1]->is_ret > f->is_ret ||
				      (v[i - 1]->is_ret == f->is_ret && v[i - 1]->seq > f->seq));
		     i--)
			v[i] = v[i - 1];
		v[i] = f;
		n++;
	}
	return n;
}

/*
 * Trampolines no longer reachable from a jmp go back to the slot allocator when
 * nothing can come back into them: no thread's rip in one, no word on any thread's
 * stack pointing into one (a thread inside the agent has its return address there; a
 * signal handler that interrupted a trampoline has it in its frame).  They go
 * together, or all stay (a few slots): a thread in one goes on to the next of its
 * chain.  A lone member of a chain (chained) cannot tell who comes to it: it goes only
 * while no thread runs out of line at all.
 */
static void tramp_reclaim_set(struct up_sites *mm, struct up_patched **o, unsigned n,
			      bool chained)
{
	struct where w = { .n = 0 };

	for (unsigned i = 0; i < n; i++)
		if (o[i] && o[i]->nslots)
			where_range(&w, mm, o[i]->tramp - 1, o[i]->tramp + 64ull * o[i]->nslots);
	if (!w.n || any_rip(mm, &w) || any_stack_word(mm, &w))
		return;
	if (chained) {
		struct where ool = { .n = 0 };

		where_out_of_line(&ool, mm);
		if (any_rip(mm, &ool) || any_stack_word(mm, &ool))
			return;
	}
	for (unsigned i = 0; i < n; i++) {
		if (o[i] && o[i]->nslots)
			up_xol_free_n(&mm->xol, o[i]->tramp, o[i]->nslots);
		if (o[i])
			o[i]->nslots = 0;
	}
}

void tramp_reclaim(struct up_sites *mm, struct up_patched *f)
{
	tramp_reclaim_set(mm, &f, 1, f->chained);
}

/*
 * Gives the probes sharing the jmp at vaddr fresh trampolines, chained in their order
 * (each jumps on to the next; the last runs the relocated instructions and jumps
 * back), then points the jmp at the first (process quiesced).  The old trampolines go
 * back to the allocator where no thread can be inside (else they stay, as after an
 * unpatch).  The jmp's new rel32 moves the punned jmps that end in it (pun.c).  On
 * failure nothing has changed.
 */
int chain_build(struct up_sites *mm, struct up_task *t, uint64_t vaddr,
		struct up_patched *extra, char *why, size_t whylen)
{
	return chain_build_in(mm, t, vaddr, extra, 0, 0, why, whylen);
}

int chain_build_in(struct up_sites *mm, struct up_task *t, uint64_t vaddr,
		   struct up_patched *extra, uint64_t lo, uint64_t hi, char *why, size_t whylen)
{
	struct up_patched *v[CHAIN_MAX + 1];
	uint64_t tramp[CHAIN_MAX];
	unsigned nslots[CHAIN_MAX], home[CHAIN_MAX][UP_PATCH_MAX_INSN];
	struct up_unwind_row rows[CHAIN_MAX][UP_PATCH_ROWS];
	unsigned nrows[CHAIN_MAX], code_len[CHAIN_MAX];
	uint8_t code[UP_PATCH_TRAMP_REC], jmp[UP_PATCH_MAX_INSN * UP_INSN_MAX];
	unsigned n = chain_of(mm, vaddr, v), made = 0;
	uint64_t near = vaddr, back;
	bool pun_held = false; /* tramp[0] placed for a punned jmp, not yet made or freed */
	int rc = 0;

	if (!n)
		return -ENOENT;
	if (!lo && v[0]->site.tactic == UP_TACTIC_PUN) {
		lo = v[0]->site.pun_lo;
		hi = v[0]->site.pun_hi;
		if (!lo) {
			snprintf(why, whylen, "a punned jmp would go outside user space");
			return -ENOMEM;
		}
	}
	/* a punned jmp goes where the bytes after the instruction say: the first
	   trampoline there (only the bytes it takes), the rest of the chain near it */
	if (lo) {
		rc = up_xol_alloc_in(&mm->xol, t, lo, hi, tramp_need(mm, v[0], n > 1), &tramp[0],
				     &nslots[0]);
		if (rc) {
			snprintf(why, whylen, "no page where the punned jmp goes (0x%" PRIx64
				 "..0x%" PRIx64 "): %s", lo, hi, strerror(-rc));
			return rc;
		}
		near = tramp[0];
		pun_held = true;
	}
	/* from the last, which each one before jumps to */
	for (unsigned i = n; i-- > 0 && !rc; made++) {
		struct up_patch_site site = v[i]->site;
		size_t len;

		site.chain = i + 1 < n ? tramp[i + 1] : 0;
		if (i || !lo) {
			nslots[i] = v[i]->rec ? FAST_SLOTS_REC : FAST_SLOTS;
			rc = up_xol_alloc_n(&mm->xol, t, near, nslots[i], &tramp[i]);
		}
		if (rc) {
			snprintf(why, whylen, "no trampoline (%s)", strerror(-rc));
			break;
		}
		rc = tramp_code(mm, v[i], &site, tramp[i], code, sizeof(code), &len, home[i]);
		if (!rc) {
			nrows[i] = up_patch_rows(&site, tramp[i], code, len, home[i], rows[i],
						 UP_PATCH_ROWS);
			code_len[i] = (unsigned)len;
			rc = up_xol_write(mm->p, tramp[i], code, len);
		}
		if (!i)
			pun_held = false; /* made, or freed just below */
		if (rc) {
			snprintf(why, whylen, "cannot place the trampoline (%s)", strerror(-rc));
			up_xol_free_n(&mm->xol, tramp[i], nslots[i]);
			break;
		}
	}
	if (pun_held)
		up_xol_free_n(&mm->xol, tramp[0], nslots[0]);
	if (!rc)
		rc = up_patch_jmp(&v[0]->site, tramp[0], jmp);
	if (!rc && v[0]->site.tactic == UP_TACTIC_HOP) {
		uint8_t hop[UP_PATCH_JMP];

		/* the jmp in the padding first: nothing reaches it before the jmp rel8 */
		rc = up_patch_hop(&v[0]->site, tramp[0], hop);
		if (!rc)
			rc = up_proc_write_text(mm->p, v[0]->site.hop, hop, sizeof(hop));
	}
	if (!rc) {
		/* an int3 the jmp's rel32 ends in must stay, should the tracer die */
		up_site_net_pin(mm, vaddr, vaddr + UP_PATCH_JMP);
		rc = up_proc_write_text(mm->p, vaddr, jmp, up_patch_written(&v[0]->site));
	}
	if (rc) {
		if (!why[0])
			snprintf(why, whylen, "cannot write the jmp (%s)", strerror(-rc));
		for (unsigned i = n - made; i < n; i++) /* those made */
			up_xol_free_n(&mm->xol, tramp[i], nslots[i]);
		return rc;
	}
	/* the old chain, whole (extra's trampoline in it): nothing leads to it any more */
	v[n] = extra;
	tramp_reclaim_set(mm, v, n + 1, false);
	for (unsigned i = 0; i < n; i++) {
		v[i]->tramp = tramp[i];
		v[i]->nslots = nslots[i];
		v[i]->chained = n > 1;
		memcpy(v[i]->home_of, home[i], sizeof(home[i]));
		memcpy(v[i]->rows, rows[i], sizeof(rows[i]));
		v[i]->nrows = nrows[i];
		v[i]->code_len = code_len[i];
	}
	/* the agent's tables of the pages the new trampolines are in */
	for (unsigned i = 0; i < n; i++)
		code_rows_sync(mm, tramp[i]);
	/* where the last one jumps back to, after its relocated instructions */
	back = vaddr;
	for (unsigned i = 0; i < v[n - 1]->site.ninsn; i++)
		back += v[n - 1]->site.insn[i].length;
	back_add(mm, back);
	pun_follow(mm, t, vaddr, vaddr + up_patch_written(&v[0]->site));
	if (v[0]->site.tactic == UP_TACTIC_HOP)
		pun_follow(mm, t, v[0]->site.hop, v[0]->site.hop + UP_PATCH_JMP);
	return 0;
}
