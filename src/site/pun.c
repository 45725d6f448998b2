// SPDX-License-Identifier: MIT
/*
 * Punned jmps and their neighbours.  A punned jmp writes e9 and the low bytes of its
 * rel32 over its own instruction; the rest of the rel32 is the bytes that follow,
 * which it leaves as they are -- the original code, or a neighbour's jmp or int3 when
 * every instruction is probed.  When those bytes change (a neighbour patched, moved or
 * put back, an int3 put in or taken out) the jmp now goes elsewhere: this file moves
 * its trampolines to where the bytes say, steering the neighbour's jmp where that has
 * no room (E9Patch's joint placement), or, failing both, takes the site off the fast
 * path for the arbiter to put on an int3 (up_site_evicted).  All with the process
 * quiesced.  It never writes a byte another site wrote.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "site/internal.h"

/*
 * A punned jmp with no room in its window (a 1- or 2-byte instruction's: one address,
 * or 256) ends in its follower's jmp: e9 and the low bytes of that one's rel32, which
 * are the follower's to choose where its own trampoline may go elsewhere (a plain jmp:
 * anywhere near; a punned one: as far as its own low bytes reach).  So this window
 * moves with them: a free place in an area we have is picked for a's trampoline, and
 * the follower's chain moved to where its rel32 sends a's jmp there.  a is left out of
 * the moves that follow (not patched meanwhile); the caller plans its window again.
 */
static int pun_steer(struct up_sites *mm, struct up_task *t, struct up_patched *a, bool chained)
{
	unsigned k = a->site.insn[0].length, tries = 0, mine, nvar, n;
	uint64_t av = a->site.vaddr, bv = av + k;
	struct up_patched *b = fast_writing(mm, bv, bv + 1), *v[CHAIN_MAX];
	size_t need = tramp_need(mm, a, chained);
	uint32_t cur, fixed, vmask, y0;
	char why[200];
	int rc;

	if (k > 2 || !b || b->site.vaddr != bv || !b->patched || !b->nslots)
		return -ENOTSUP;
	/* a's rel32: its own k - 1 low bytes, b's e9, then b's rel32's low 4 - k bytes,
	   which must be b's own (mine: how many of its rel32's bytes are) */
	mine = b->site.tactic == UP_TACTIC_PUN ? b->site.insn[0].length - 1 : 4;
	if (mine < 4 - k)
		return -ENOTSUP;
	nvar = mine - (4 - k); /* b's bytes a leaves free: where b may go (k at most) */
	cur = (uint32_t)(b->tramp - (bv + UP_PATCH_JMP));
	fixed = mine == 4 ? 0 : cur >> (8 * mine) << (8 * mine);
	vmask = nvar ? (1u << (8 * nvar)) - 1 : 0;
	y0 = (cur >> (8 * (4 - k))) & vmask; /* where b's free bytes have it now */
	for (const struct up_xol_area *ar = mm->xol.areas; ar; ar = ar->next) {
		for (uint64_t at = ar->base; at + need <= ar->base + UP_XOL_AREA_SIZE; at++) {
			int64_t off = (int64_t)(at - (av + UP_PATCH_JMP));
			uint32_t low;

			if (off != (int32_t)off || (((uint32_t)off >> (8 * (k - 1))) & 0xff) != 0xe9)
				continue;
			if (!up_xol_span_free(&mm->xol, at, need))
				continue;
			low = (uint32_t)off >> (8 * k);
			/* the places of b nearest to where it is */
			for (int i = 0; i < (nvar ? 16 : 1) && tries < 64; i++, tries++) {
				uint32_t y = (y0 + (uint32_t)(i & 1 ? -(i + 1) / 2 : i / 2)) & vmask;
				uint32_t brel = fixed | low | y << (8 * (4 - k));
				uint64_t tb = bv + UP_PATCH_JMP + (uint64_t)(int64_t)(int32_t)brel;

				if (tb < 0x10000 || tb >= 0x7fffffff0000ull)
					continue;
				/* a's chain sits out the moves b's brings about */
				n = chain_of(mm, av, v);
				for (unsigned j = 0; j < n; j++)
					v[j]->patched = false;
				rc = chain_build_in(mm, t, bv, NULL, tb, tb, why, sizeof(why));
				for (unsigned j = 0; j < n; j++)
					v[j]->patched = true;
				if (!rc)
					return 0;
			}
			if (tries >= 64)
				return -ENOMEM;
			at += k == 1 ? 255 : 0; /* the next address with e9 there */
		}
	}
	return -ENOMEM;
}

int pun_rebuild(struct up_sites *mm, struct up_task *t, uint64_t a, bool tried, char *why,
		size_t whylen)
{
	struct up_patched *v[CHAIN_MAX];
	unsigned n = chain_of(mm, a, v);
	int rc = -ENOMEM;

	for (int round = tried; round < 2 && n; round++) {
		struct up_patch_site site = v[0]->site;

		if (round && pun_steer(mm, t, v[0], n > 1))
			break;
		rc = up_patch_repun(mm->p, &site, why, whylen);
		if (rc)
			break;
		for (unsigned i = 0; i < n; i++) {
			v[i]->site.pun_lo = site.pun_lo;
			v[i]->site.pun_hi = site.pun_hi;
			memcpy(v[i]->site.orig, site.orig, sizeof(site.orig));
		}
		rc = chain_build(mm, t, a, NULL, why, whylen);
		if (!rc)
			break;
	}
	return rc;
}

void pun_follow(struct up_sites *mm, struct up_task *t, uint64_t lo, uint64_t hi)
{
	for (struct up_patched *p = mm->fast; p; p = p->next) {
		struct up_patch_site site;
		char why[200] = "";
		unsigned k;
		uint64_t a;

		if (!p->patched || p->site.tactic != UP_TACTIC_PUN)
			continue;
		k = up_patch_written(&p->site);
		a = p->site.vaddr;
		if (!(lo < a + p->site.len && a + k < hi))
			continue;
		site = p->site;
		if (up_patch_repun(mm->p, &site, why, sizeof(why)) == 0 &&
		    !memcmp(site.orig + k, p->site.orig + k, site.len - k))
			continue; /* the same bytes: it goes where it went */
		if (t && !pun_rebuild(mm, t, a, false, why, sizeof(why))) {
			if (mm->ctx->opts->verbose)
				site_log(mm->ctx, "process %d: 0x%" PRIx64 " moves its trampoline to "
					 "0x%" PRIx64 ": the bytes its punned jmp ends in changed",
					 (int)mm->pid, a, p->tramp);
			return pun_follow(mm, t, lo, hi); /* the list may have changed */
		}
		/* the bytes at a + k are not what its jmp ends in: the jmp goes (each probe
		   there), and the punned jmps that end in its bytes follow in turn */
		site_log(mm->ctx, "process %d: 0x%" PRIx64 " leaves the fast path: the bytes its "
			 "punned jmp ends in changed, %s", (int)mm->pid, a, why);
		for (struct up_patched *q; (q = fast_writing(mm, a, a + 1));)
			fast_drop(mm, q, t); /* the punned jmps that end in its bytes follow */
		return pun_follow(mm, t, lo, hi);
	}
}
