// SPDX-License-Identifier: MIT
/*
 * The probe-site layer's front (site.h): the choice between a patched site and an
 * int3 for a probe, a patched site taken back to int3, removal, counts, and the life
 * of an address space's sites (fork, exit, exec, detach).  The arbiter calls it; it
 * never calls the arbiter (no uprobes_int.h here): what it needs of threads comes as
 * arguments or from the task layer, and it logs through the library's log callback.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/unwind.h"
#include "site/internal.h"

void site_log(struct up_site_ctx *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!c->opts->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->opts->log(c->opts->log_arg, msg);
}

/* ---- the context, an address space ---------------------------------------------- */

void up_site_ctx_init(struct up_site_ctx *c, const struct uprobe_ctx_opts *opts,
		      struct uprobe_stats *stats)
{
	memset(c, 0, sizeof(*c));
	c->opts = opts;
	c->stats = stats;
	c->spooling = !opts->raw_handler && !opts->no_spool;
	up_spool_init(&c->spool, !c->spooling ? 0
				 : opts->spool_bytes ? opts->spool_bytes : UPROBE_SPOOL_DEFAULT);
}

void up_site_ctx_fini(struct up_site_ctx *c)
{
	up_spool_fini(&c->spool);
	up_ubp_files_clear(&c->files);
}

void up_site_ctx_batch(struct up_site_ctx *c)
{
	c->files.gen++;
}

void up_sites_init(struct up_sites *s, struct up_site_ctx *c, struct up_proc *p)
{
	memset(s, 0, sizeof(*s));
	s->ctx = c;
	s->p = p;
	s->pid = up_proc_pid(p);
	s->spool_id = ++c->spool_ids;
	s->next = c->spaces;
	c->spaces = s;
}

void up_sites_fini(struct up_sites *s)
{
	struct up_sites **pp = &s->ctx->spaces;

	while (*pp && *pp != s)
		pp = &(*pp)->next;
	if (*pp)
		*pp = s->next;
	free(s->shared);
	free(s->notls_task);
	free(s->evicted);
	s->shared = NULL;
	s->notls_task = NULL;
	s->evicted = NULL;
	s->nevicted = s->capevicted = 0;
	int3_forget(s);
}

struct up_proc *sites_proc(const struct up_sites *mm, unsigned i)
{
	if (i < mm->nshared)
		return mm->shared[mm->nshared - 1 - i];
	return i == mm->nshared ? mm->p : NULL;
}

int up_sites_share(struct up_sites *s, struct up_proc *child)
{
	if (s->nshared == s->capshared) {
		unsigned cap = s->capshared ? s->capshared * 2 : 4;
		struct up_proc **v = realloc(s->shared, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->shared = v;
		s->capshared = cap;
	}
	s->shared[s->nshared++] = child;
	return 0;
}

void up_sites_unshare(struct up_sites *s, struct up_proc *child)
{
	for (unsigned i = 0; i < s->nshared; i++) {
		if (s->shared[i] == child) {
			memmove(s->shared + i, s->shared + i + 1,
				(s->nshared - i - 1) * sizeof(*s->shared));
			s->nshared--;
			return;
		}
	}
}

/* The process exits: the counts as they stand go into the uprobes. */
static void fast_forget(struct up_sites *mm)
{
	while (mm->fast) {
		struct up_patched *f = mm->fast;

		mm->fast = f->next;
		if (f->u->kimg == (struct uprobe_kimg *)f && !f->patched) {
			/* unpatched already (its counts are in the uprobe): let it go */
			f->u->kimg = NULL;
			f->u->kind = UP_KIND_PPT;
		}
		if (f->patched && f->u->pid == mm->pid) {
			if (f->rec) {
				rec_settle(mm, f);
			} else {
				uint64_t v = f->last;

				/* the region is still ours */
				if (f->shared)
					read_counter(mm, f, NULL, &v);
				f->u->nhits += v;
			}
			f->u->kimg = NULL;
			f->u->kind = UP_KIND_PPT;
		}
		if (f->rec && f->id < mm->nrecp)
			mm->recp[f->id] = NULL;
		free(f);
	}
	mm->counters = 0;
	mm->ncounters = 0;
	mm->fast_used = false;
}

void up_sites_forget(struct up_sites *s)
{
	up_site_drain(s);
	fast_forget(s);
	up_agent_free(s->agent);
	s->agent = NULL;
	s->tid_looked = false;
	up_uwarea_free(s->uw);
	s->uw = NULL;
	s->notls = 0;
	s->nnotls = 0;
	free(s->recp);
	s->recp = NULL;
	s->nrecp = 0;
	up_xol_drop(&s->xol);
	s->nsigs = 0;
	int3_forget(s);
}

void up_sites_detach(struct up_sites *s)
{
	for (struct up_patched *f = s->fast; f; f = f->next)
		fast_unpatch(s, f, NULL);
	up_site_unhijack(s, s->p);
}

int up_sites_sig_changed(struct up_sites *s, int sig, uint64_t ours, const uint64_t old[4])
{
	for (unsigned i = 0; i < s->nsigs; i++)
		if (s->sigs[i].sig == sig) {
			s->sigs[i].ours = ours; /* the first old one is the program's */
			return 0;
		}
	if (s->nsigs == UP_SITE_SIGS)
		return -ENOSPC;
	s->sigs[s->nsigs].sig = sig;
	s->sigs[s->nsigs].ours = ours;
	memcpy(s->sigs[s->nsigs].old, old, sizeof(s->sigs[s->nsigs].old));
	s->nsigs++;
	return 0;
}

/*
 * The dispositions we changed go back, through rt_sigaction run by t with its
 * struct below t's stack (under the red zone; the bytes put back after): only where
 * our handler is still the one (the program may have set its own since).
 */
static void sigs_put_back(struct up_sites *s, struct up_task *t)
{
	struct user_regs_struct r;
	uint64_t scratch, saved[4], cur[4];
	int64_t ret;

	if (!s->nsigs || up_task_get_regs(t, &r))
		return;
	scratch = (r.rsp - 1024) & ~15ull;
	if (up_task_read(t, scratch, saved, sizeof(saved)))
		return;
	for (unsigned i = 0; i < s->nsigs; i++) {
		const struct up_site_sig *g = &s->sigs[i];
		uint64_t get[6] = { (uint64_t)g->sig, 0, scratch, 8 };
		uint64_t set[6] = { (uint64_t)g->sig, scratch, 0, 8 };

		if (up_task_syscall(t, 13 /* rt_sigaction */, get, &ret) || ret ||
		    up_task_read(t, scratch, cur, sizeof(cur)) || cur[0] != g->ours)
			continue;
		if (!up_proc_write(s->p, scratch, g->old, sizeof(g->old)))
			up_task_syscall(t, 13, set, &ret);
	}
	up_proc_write(s->p, scratch, saved, sizeof(saved));
	s->nsigs = 0;
}

uint64_t up_sites_teardown(struct up_sites *s, struct up_task *t, bool last)
{
	char why[256] = "no thread stopped to unmap through";
	uint64_t left;

	if (!s->xol.nmaps && !s->nsigs && !s->net.installed)
		return 0;
	/* no thread waits for room any more: the tracer is going (--when-full=block) */
	if (s->agent)
		up_agent_set_block(s->agent, false);
	if (t)
		sigs_put_back(s, t);
	up_site_unhijack(s, s->p);
	if (net_put_back(s))
		snprintf(why, sizeof(why), "the program's SIGTRAP disposition is still the safety "
			 "net's: no thread could run the system call that puts it back");
	if (!t || s->net.installed || maps_in_use(s, why, sizeof(why))) {
		left = up_xol_mapped(&s->xol);
		if (last && left)
			site_log(s->ctx, "process %d: %" PRIu64 " bytes of the tracer's left mapped "
				 "in %u mapping%s: %s", (int)s->pid, left, s->xol.nmaps,
				 s->xol.nmaps == 1 ? "" : "s", why);
		return left;
	}
	up_site_drain(s); /* what the rings hold, while the tracer's mapping is there */
	up_xol_unmap(&s->xol, t);
	up_agent_free(s->agent);
	s->agent = NULL;
	s->tid_looked = false;
	up_uwarea_free(s->uw);
	s->uw = NULL;
	free(s->recp);
	s->recp = NULL;
	s->nrecp = 0;
	s->counters = 0;
	s->ncounters = 0;
	s->fast_used = false;
	s->notls = 0;
	s->nnotls = 0;
	return 0;
}

void up_sites_fork(struct up_sites *s, struct up_proc *child)
{
	for (struct up_patched *f = s->fast; f; f = f->next)
		if (f->patched) {
			up_proc_write_text(child, f->site.vaddr, f->site.orig,
					   up_patch_written(&f->site));
			if (f->site.tactic == UP_TACTIC_HOP)
				up_proc_write_text(child, f->site.hop, f->site.hop_orig,
						   UP_PATCH_JMP);
		}
}

void up_sites_exiting(struct up_sites *s, struct up_task *t, bool records_wait)
{
	uint64_t v;

	for (struct up_patched *f = s->fast; f; f = f->next)
		if (f->patched)
			read_counter(s, f, t, &v);
	/* its ring stays in the region, ours to read after it is gone: a thread that
	   takes its slot later (the same TLS block) writes after its records */
	if (!records_wait)
		up_site_drain(s);
}

/* ---- the choice ------------------------------------------------------------------ */

struct up_patched *fast_overlapping(struct up_sites *mm, uint64_t lo, uint64_t hi)
{
	for (struct up_patched *f = mm->fast; f; f = f->next)
		if (lo < f->site.vaddr + f->site.len && f->site.vaddr < hi)
			return f;
	return NULL;
}

struct up_patched *fast_writing(struct up_sites *mm, uint64_t lo, uint64_t hi)
{
	for (struct up_patched *f = mm->fast; f; f = f->next)
		if (up_patch_writes(&f->site, lo, hi))
			return f;
	return NULL;
}

uint64_t next_site(struct up_sites *mm, uint64_t vaddr)
{
	uint64_t limit = 0;

	for (struct up_patched *f = mm->fast; f; f = f->next) {
		uint64_t a = f->site.vaddr;

		for (int i = 0; i < 2; i++, a = f->site.tactic == UP_TACTIC_HOP ? f->site.hop : 0)
			if (a > vaddr && a < vaddr + 2 * UP_INSN_MAX && (!limit || a < limit))
				limit = a;
	}
	return limit;
}

void fast_unlink(struct up_sites *mm, struct up_patched *f)
{
	struct up_patched **pp = &mm->fast;

	while (*pp && *pp != f)
		pp = &(*pp)->next;
	if (*pp)
		*pp = f->next;
}

bool up_site_may_place(const struct uprobe *u)
{
	return (((u->flags & UPROBE_F_COUNT) && !u->handler && !u->ret_handler) ||
		wants_record(u)) &&
	       !(u->flags & UPROBE_F_NO_FAST);
}

int up_site_place(struct up_sites *s, struct uprobe *u, struct up_task *t)
{
	char why[160] = "";
	int rc;

	if (!up_site_may_place(u))
		return 1;
	rc = fast_arm(s, u, t, why, sizeof(why));
	if (!rc || rc == -EEXIST)
		return rc;
	s->ctx->stats->fast_refused++;
	if (s->ctx->opts->verbose && why[0])
		site_log(s->ctx, "process %d: 0x%" PRIx64 " stays on the trap path: %s",
			 (int)s->pid, u->vaddr, why);
	return 1;
}

/* f leaves the fast path: undone and freed; its uprobe, for an int3. */
static struct uprobe *fast_leave(struct up_sites *mm, struct up_patched *f, struct up_task *t)
{
	struct uprobe *u = f->u;

	fast_unlink(mm, f);
	fast_unpatch(mm, f, t);
	free(f);
	u->kimg = NULL;
	u->kind = UP_KIND_PPT;
	u->flags |= UPROBE_F_NO_FAST;
	return u;
}

struct uprobe *up_site_evict(struct up_sites *s, uint64_t vaddr, struct up_task *t)
{
	struct up_patched *f = fast_writing(s, vaddr, vaddr + 1);

	if (!f)
		return NULL;
	if (s->ctx->opts->verbose)
		site_log(s->ctx, "process %d: 0x%" PRIx64 " leaves the fast path: another probe "
				 "needs an int3 within its bytes", (int)s->pid, f->site.vaddr);
	return fast_leave(s, f, t);
}

void fast_drop(struct up_sites *mm, struct up_patched *f, struct up_task *t)
{
	struct uprobe *u;

	if (mm->nevicted == mm->capevicted) {
		unsigned cap = mm->capevicted ? mm->capevicted * 2 : 16;
		struct uprobe **v = realloc(mm->evicted, cap * sizeof(*v));

		if (v) {
			mm->evicted = v;
			mm->capevicted = cap;
		}
	}
	u = fast_leave(mm, f, t);
	if (mm->nevicted < mm->capevicted)
		mm->evicted[mm->nevicted++] = u;
	else
		site_log(mm->ctx, "process %d: 0x%" PRIx64 " is not probed any more: no memory "
			 "to arm it on an int3", (int)mm->pid, u->vaddr);
}

struct uprobe *up_site_evicted(struct up_sites *s)
{
	return s->nevicted ? s->evicted[--s->nevicted] : NULL;
}

/* f's site without f: the others keep it in a chain without f, or it goes back to
   int3s; 0, or the address whose other probes must leave the fast path. */
static uint64_t fast_remove(struct up_sites *mm, struct up_patched *f, struct up_task *t)
{
	struct up_patched *v[CHAIN_MAX];
	char why[160] = "";

	if (f->patched && t && chain_of(mm, f->site.vaddr, v) > 1) {
		/* the others keep the site, in a chain without f */
		f->patched = false;
		if (!chain_build(mm, t, f->site.vaddr, f, why, sizeof(why))) {
			settle(mm, f);
			fast_unlink(mm, f);
			return 0;
		}
		/* no room for the new chain: the site goes back to int3s (the old chain,
		   f's trampoline in it, is what the jmp still leads to) */
		f->patched = true;
		site_log(mm->ctx, "process %d: 0x%" PRIx64 " leaves the fast path: %s",
			 (int)mm->pid, f->site.vaddr, why);
		fast_unlink(mm, f);
		fast_unpatch(mm, f, NULL); /* the others' int3s move what ends in it */
		return f->site.vaddr;
	}
	fast_unlink(mm, f);
	fast_unpatch(mm, f, t);
	return 0;
}

uint64_t up_site_remove(struct up_sites *s, struct uprobe *u, struct up_task *t)
{
	struct up_patched *f = (struct up_patched *)u->kimg;
	uint64_t evict = s ? fast_remove(s, f, t) : 0;

	free(f);
	u->kimg = NULL;
	u->kind = UP_KIND_PPT;
	return evict;
}

/* ---- counts ---------------------------------------------------------------------- */

static struct up_patched *patched_of(const struct uprobe *u)
{
	return u->kimg && u->kind == UP_KIND_PATCHED ? (struct up_patched *)u->kimg : NULL;
}

uint64_t up_site_hits(struct up_sites *s, const struct uprobe *u)
{
	struct up_patched *f = patched_of(u);
	uint64_t v;

	if (!f)
		return 0;
	v = f->last;
	if (s)
		read_counter(s, f, NULL, &v);
	return v;
}

uint64_t up_site_lost(struct up_sites *s, const struct uprobe *u)
{
	struct up_patched *f = patched_of(u);
	uint64_t filtered = 0, l = 0;

	if (f && f->rec && s && s->agent)
		up_agent_probe_counts(s->agent, f->desc, &filtered, &l);
	return l;
}

void up_site_set_enabled(struct up_sites *s, const struct uprobe *u, bool on)
{
	struct up_patched *f = patched_of(u);

	if (!f || !f->rec || !s || !s->agent)
		return;
	up_site_drain(s); /* what was recorded while on is delivered as such */
	up_agent_probe_enable(s->agent, f->desc, on);
}

void up_site_agg_read(struct up_sites *s, const struct uprobe *u,
		      void (*fn)(void *arg, const struct uprobe_agg_entry *e), void *arg)
{
	struct up_patched *f = patched_of(u);

	if (f && f->agg && s && f->patched)
		agg_emit(s, f, fn, arg);
}

struct up_patched *up_site_next_patched(struct up_sites *s, struct up_patched *prev,
					uint64_t *vaddr, struct uprobe **u)
{
	struct up_patched *f = prev ? prev->next : s->fast;

	while (f && !f->patched)
		f = f->next;
	if (f) {
		*vaddr = f->site.vaddr;
		*u = f->u;
	}
	return f;
}

bool up_site_fault_home(struct up_sites *s, struct up_task *t, struct user_regs_struct *regs,
			const siginfo_t *in)
{
	for (struct up_patched *f = s->fast; f; f = f->next) {
		uint64_t at = f->tramp + f->home_of[0];

		if (regs->rip >= at && regs->rip < at + UP_INSN_MAX) {
			siginfo_t info = *in;
			uint64_t a = (uint64_t)(uintptr_t)info.si_addr;

			regs->rip = f->site.vaddr;
			up_task_set_regs(t, regs);
			if (a >= at && a < at + UP_INSN_MAX) {
				info.si_addr = (void *)(uintptr_t)f->site.vaddr;
				up_task_set_siginfo(t, &info);
			}
			return true;
		}
	}
	return false;
}
