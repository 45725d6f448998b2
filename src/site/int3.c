// SPDX-License-Identifier: MIT
/*
 * The int3 site: the breakpoint byte at a probed address (ubp.c), the slot in the XOL
 * area that the displaced instruction runs in, relocated (arch/x86/), and the record
 * of every int3 we ever wrote.  How a hit on it is handled -- emulated, run out of
 * line, stepped -- is the arbiter's; this file only puts the bytes in place and takes
 * them out (a punned jmp that ends in the byte then moves: pun.c), and writes nothing
 * but the int3, its slot and the return probes' int3.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "site/internal.h"

int up_site_int3_prepare(struct up_sites *s, uint64_t vaddr, struct up_int3_site *i, char *msg,
			 size_t msglen)
{
	memset(i, 0, sizeof(*i));
	return up_ubp_prepare(s->p, &s->ctx->files, vaddr, &i->bp, msg, msglen);
}

bool up_site_slots_mapped(const struct up_sites *s)
{
	return s->xol.areas != NULL;
}

int up_site_slot_alloc(struct up_sites *s, struct up_task *t, uint64_t near, uint64_t *slot)
{
	return up_xol_alloc(&s->xol, t, near, slot);
}

int up_site_int3_fill(struct up_sites *s, struct up_int3_site *i, uint64_t slot)
{
	struct up_reloc rel;
	int rc = up_reloc_build(&i->bp.insn, slot, &rel);

	if (!rc)
		rc = up_xol_write(s->p, slot, rel.code, rel.len);
	if (rc) {
		up_xol_free(&s->xol, slot);
		return rc;
	}
	i->rel = rel;
	i->slot = slot;
	back_add(s, i->bp.vaddr + i->bp.insn.length);
	if (i->bp.inserted)
		net_site_put(s, i); /* a followed fork child's new slot */
	return 0;
}

/* The first index of m at or above vaddr. */
static unsigned marks_pos(const struct up_site_marks *m, uint64_t vaddr)
{
	unsigned lo = 0, hi = m->n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (m->v[mid].vaddr < vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* vaddr into m with orig, unless there already. */
static int marks_add(struct up_site_marks *m, uint64_t vaddr, uint8_t orig)
{
	unsigned i = marks_pos(m, vaddr);

	if (i < m->n && m->v[i].vaddr == vaddr)
		return 0;
	if (m->n == m->cap) {
		unsigned cap = m->cap ? m->cap * 2 : 64;
		struct up_site_mark *v = realloc(m->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->v = v;
		m->cap = cap;
	}
	memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
	m->v[i].vaddr = vaddr;
	m->v[i].orig = orig;
	m->n++;
	return 0;
}

static void marks_del(struct up_site_marks *m, uint64_t vaddr)
{
	unsigned i = marks_pos(m, vaddr);

	if (i < m->n && m->v[i].vaddr == vaddr) {
		memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof(*m->v));
		m->n--;
	}
}

static void marks_free(struct up_site_marks *m)
{
	free(m->v);
	m->v = NULL;
	m->n = m->cap = 0;
}

int up_site_written_orig(const struct up_sites *s, uint64_t vaddr)
{
	unsigned i = marks_pos(&s->written, vaddr);

	return i < s->written.n && s->written.v[i].vaddr == vaddr ? s->written.v[i].orig : -1;
}

/* Is an int3 site of ours in [lo, hi)? */
bool int3_live_in(const struct up_sites *s, uint64_t lo, uint64_t hi)
{
	unsigned i = marks_pos(&s->live, lo);

	return i < s->live.n && s->live.v[i].vaddr < hi;
}

void back_add(struct up_sites *s, uint64_t vaddr)
{
	if (marks_add(&s->backs, vaddr, 0))
		s->backs_lost = true; /* then any address may be one */
}

bool back_in(const struct up_sites *s, uint64_t lo, uint64_t hi)
{
	unsigned i = marks_pos(&s->backs, lo);

	return s->backs_lost || (i < s->backs.n && s->backs.v[i].vaddr < hi);
}

int up_site_int3_insert(struct up_sites *s, struct up_int3_site *i, struct up_task *t)
{
	int rc;

	/* the net first: from the moment the byte is in, the tracer's death must not
	   take the process with it */
	up_site_net_ensure(s, t);
	net_site_put(s, i);
	rc = marks_add(&s->live, i->bp.vaddr, 0);
	if (rc)
		return rc;
	rc = up_ubp_insert(s->p, &i->bp);
	if (rc) {
		marks_del(&s->live, i->bp.vaddr);
		return rc;
	}
	marks_add(&s->written, i->bp.vaddr, i->bp.orig); /* best effort, as ever */
	if (t)
		pun_follow(s, t, i->bp.vaddr, i->bp.vaddr + 1);
	return 0;
}

void up_site_int3_remove(struct up_sites *s, struct up_int3_site *i, struct up_task *t)
{
	bool was = i->bp.inserted;

	if (was)
		up_ubp_remove(s->p, &i->bp);
	marks_del(&s->live, i->bp.vaddr);
	if (!i->bp.inserted) {
		/* the byte out of the process's memory before the net forgets the int3: a
		   quiesce's cache holds it back until a resume, and a tracer dying before
		   that left an int3 the net took for the program's (a promotion's deaths:
		   SIGTRAP's default, or the program's own handler, at the probe) */
		if (was)
			up_proc_flush(s->p);
		net_site_del(s, i->bp.vaddr);
	}
	if (was && !i->bp.inserted && t)
		pun_follow(s, t, i->bp.vaddr, i->bp.vaddr + 1);
}

void up_site_int3_free(struct up_sites *s, struct up_int3_site *i)
{
	if (i->slot)
		up_xol_free(&s->xol, i->slot);
	i->slot = 0;
}

void up_site_int3_unfork(struct up_proc *child, const struct up_int3_site *i)
{
	if (i->bp.inserted)
		up_proc_write_text(child, i->bp.vaddr, &i->bp.orig, 1);
}

void up_site_int3_inherit(struct up_sites *child, const struct up_sites *parent,
			  const struct up_int3_site *i, struct up_int3_site *c)
{
	memset(c, 0, sizeof(*c));
	c->bp = i->bp; /* the int3 came along in the copied memory, and the net with it */
	marks_add(&child->live, i->bp.vaddr, 0);
	net_inherit(child, parent);
}

int up_site_ret_int3(struct up_sites *s, struct up_task *t, uint64_t near, uint64_t *at)
{
	uint64_t slot;
	int rc;

	if (s->ctx->opts->no_xol)
		return -ENOTSUP;
	up_site_net_ensure(s, t);
	rc = up_xol_alloc(&s->xol, t, near, &slot);
	if (rc)
		return rc;
	rc = up_xol_write(s->p, slot, (const uint8_t[]){ UP_BKPT_INSN }, 1);
	if (rc) {
		up_xol_free(&s->xol, slot);
		return rc;
	}
	net_ret_int3(s, slot);
	*at = slot;
	return 0;
}

bool up_sites_in_xol(const struct up_sites *s, uint64_t addr)
{
	return up_xol_contains(&s->xol, addr);
}

void int3_forget(struct up_sites *s)
{
	marks_free(&s->written);
	marks_free(&s->live);
	marks_free(&s->backs);
	s->backs_lost = false;
	net_forget(s);
}
