// SPDX-License-Identifier: MIT
/*
 * The uprobes arbiter (seeds 005, 006, 007): probepoints per process, their consumers
 * in registration order, the handling of a hit on any thread, and the life of the
 * probes across clone, fork, vfork, exec and exit.
 *
 * A probepoint (struct ppt, the seed's uprobe_kimg) is one int3 at one address of one
 * address space; it owns the instruction's analysis and, when its plan needs one, a
 * slot in the XOL area.  Threads that execute a probepoint's instruction out of line
 * hold a reference on it, so that unregistering never pulls a slot from under a
 * thread: a probepoint that loses its last consumer becomes a zombie until no thread
 * uses its slot or has its rip inside it.
 *
 * How an address gets its control transfer -- the int3 and its slot, or a jmp into a
 * trampoline for a probe that needs no handler here -- is the probe-site layer's
 * (src/site/site.h), which this file calls and which never calls back.
 */
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uprobe/uprobe.h>

#include "agent/ring.h" /* up_mono_ns */
#include "uprobes_int.h"
static void free_utasks(struct up_proc *p);
static int arm(struct uprobe_ctx *ctx, struct uproc *mm, struct uprobe *u);

/* ---- small helpers ----------------------------------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void logf_(struct uprobe_ctx *ctx, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!ctx->opts.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctx->opts.log(ctx->opts.log_arg, msg);
}

static struct uproc *mm_of(struct uproc *up)
{
	return up->mm_owner ? up->mm_owner : up;
}

static unsigned hash_of(uint64_t vaddr)
{
	return (unsigned)((vaddr ^ (vaddr >> 8) ^ (vaddr >> 16)) % PPT_HASH);
}

static struct ppt *ppt_lookup(struct uproc *mm, uint64_t vaddr)
{
	for (struct ppt *q = mm->hash[hash_of(vaddr)]; q; q = q->next)
		if (q->vaddr == vaddr)
			return q;
	return NULL;
}

static void ppt_unhash(struct uproc *mm, struct ppt *q)
{
	struct ppt **pp = &mm->hash[hash_of(q->vaddr)];

	while (*pp && *pp != q)
		pp = &(*pp)->next;
	if (*pp)
		*pp = q->next;
	q->next = NULL;
}

/* The probepoint (live or zombie) whose slot holds addr. */
static struct ppt *ppt_by_slot(struct uproc *mm, uint64_t addr)
{
	if (!up_sites_in_xol(&mm->sites, addr))
		return NULL;
	for (unsigned i = 0; i < PPT_HASH; i++)
		for (struct ppt *q = mm->hash[i]; q; q = q->next)
			if (q->site.slot && addr >= q->site.slot &&
			    addr < q->site.slot + UP_SLOT_MAX)
				return q;
	for (struct ppt *q = mm->zombies; q; q = q->next)
		if (q->site.slot && addr >= q->site.slot && addr < q->site.slot + UP_SLOT_MAX)
			return q;
	return NULL;
}

static void ppt_free(struct ppt *q)
{
	free(q->cons);
	free(q);
}

static struct uproc *uproc_of_pid(struct uprobe_ctx *ctx, pid_t pid)
{
	for (struct uproc *up = ctx->procs; up; up = up->next)
		if (up->pid == pid)
			return up;
	return NULL;
}

/* Stacks through the library's own code (uprobe.h): the probe-site layer knows its
   trampolines' rows and the agent's. */
int uprobe_code_row(struct uprobe_ctx *ctx, pid_t pid, uint64_t pc, void *row)
{
	struct uproc *up = ctx ? uproc_of_pid(ctx, pid) : NULL;

	return up ? up_site_code_row(&mm_of(up)->sites, pc, row) : -1;
}

static struct utask *utask_of(struct up_task *t)
{
	struct utask *ut = up_task_data(t);

	if (!ut) {
		ut = calloc(1, sizeof(*ut));
		if (ut)
			up_task_set_data(t, ut);
	}
	return ut;
}

static int mem_fn(void *arg, uint64_t addr, void *buf, size_t len, bool write)
{
	struct up_proc *p = arg;

	return write ? up_proc_write(p, addr, buf, len) : up_proc_read(p, addr, buf, len);
}

/* A stopped thread of the process that is not in the middle of our own step. */
static struct up_task *idle_task(struct uproc *up)
{
	for (struct up_task *t = up_proc_first_task(up->p); t; t = up_proc_next_task(t)) {
		struct utask *ut = up_task_data(t);

		if (up_task_stopped(t) && (!ut || ut->state == UT_NONE))
			return t;
	}
	return NULL;
}

/* ---- probepoints ------------------------------------------------------------------- */

/* q's slot (the remote mmap of an area, if need be, through a stopped thread of mm's
   that is not stepping: t, the one at hand, or any). */
static int ensure_slot(struct uproc *mm, struct ppt *q, struct up_task *t)
{
	uint64_t slot;
	int rc;

	if (q->site.slot)
		return 0;
	if (mm->ctx->opts.no_xol)
		return -ENOTSUP;
	if (!t && mm->ctx->cur_task && up_proc_data(up_task_proc(mm->ctx->cur_task)) &&
	    mm_of(up_proc_data(up_task_proc(mm->ctx->cur_task))) == mm)
		t = mm->ctx->cur_task;
	rc = -EAGAIN;
	if (t)
		rc = up_site_slot_alloc(&mm->sites, t, q->vaddr, &slot);
	for (t = up_proc_first_task(mm->p); rc && rc != -ENOMEM && t; t = up_proc_next_task(t)) {
		struct utask *ut = up_task_data(t);

		if (up_task_stopped(t) && (!ut || ut->state == UT_NONE))
			rc = up_site_slot_alloc(&mm->sites, t, q->vaddr, &slot);
	}
	if (rc)
		return rc;
	return up_site_int3_fill(&mm->sites, &q->site, slot);
}

/*
 * The safety net in mm before its first int3 (site/safety.c), through a stopped thread
 * of mm's that is not stepping: t, the one at hand, or any, as for a slot.
 */
static void ensure_net(struct uproc *mm, struct up_task *t)
{
	int rc = -EAGAIN;

	if (mm->sites.net.installed || mm->sites.net.failed)
		return;
	if (!t && mm->ctx->cur_task && up_proc_data(up_task_proc(mm->ctx->cur_task)) &&
	    mm_of(up_proc_data(up_task_proc(mm->ctx->cur_task))) == mm)
		t = mm->ctx->cur_task;
	if (t)
		rc = up_site_net_ensure(&mm->sites, t);
	for (t = up_proc_first_task(mm->p); (rc == -EAGAIN || rc == -ESRCH) && t;
	     t = up_proc_next_task(t)) {
		struct utask *ut = up_task_data(t);

		if (up_task_stopped(t) && (!ut || ut->state == UT_NONE))
			rc = up_site_net_ensure(&mm->sites, t);
	}
	/* every thread held by a signal of its own the quiesce found (a timer's, at each
	   thread of a loaded host): one takes it now and runs the net's calls, or the
	   int3s would go in with no net under them */
	for (t = up_proc_first_task(mm->p); (rc == -EAGAIN || rc == -ESRCH) && t;
	     t = up_proc_next_task(t)) {
		struct utask *ut = up_task_data(t);

		if ((!ut || ut->state == UT_NONE) && !up_task_serve_signal(t))
			rc = up_site_net_ensure(&mm->sites, t);
	}
}

static int ppt_add_consumer(struct ppt *q, struct uprobe *u)
{
	if (q->ncons == q->cap) {
		unsigned cap = q->cap ? q->cap * 2 : 4;
		struct uprobe **c = realloc(q->cons, cap * sizeof(*c));

		if (!c)
			return -ENOMEM;
		q->cons = c;
		q->cap = cap;
	}
	q->cons[q->ncons++] = u;
	return 0;
}

static bool ppt_del_consumer(struct ppt *q, struct uprobe *u)
{
	for (unsigned i = 0; i < q->ncons; i++) {
		if (q->cons[i] == u) {
			memmove(q->cons + i, q->cons + i + 1, (q->ncons - i - 1) * sizeof(*q->cons));
			q->ncons--;
			return true;
		}
	}
	return false;
}

/*
 * push, pop, ret and jmp through memory are emulated exactly, but each costs the
 * tracer a read or write of the process's memory (one more system call per hit); in
 * a slot they run natively, position-independent as they are.  A call is not: the
 * slot's return address would be pushed.
 */
static bool faster_in_slot(const struct up_insn *insn)
{
	switch (insn->emu) {
	case UP_EMU_PUSH_REG:
	case UP_EMU_PUSH_IMM:
	case UP_EMU_POP_REG:
	case UP_EMU_RET:
		return true;
	case UP_EMU_JMP_IND:
		return insn->op0.type == ZYDIS_OPERAND_TYPE_MEMORY;
	default:
		return false;
	}
}

/*
 * An instruction faster_in_slot() moves to a slot at its probe's creation where the
 * process has an XOL area already, else at its SLOT_AFTER-th hit: a first area costs
 * the process two remote system calls (two stops, ~25 requests of the tracer), which
 * the memory access an emulated push or ret adds to a hit (~1-2 us) repays only after
 * tens of hits -- and a short process (/bin/true's five mallocs, the two rendezvous
 * hits at _dl_debug_state's ret) never gets there.
 */
#define SLOT_AFTER 32

static void to_slot(struct uproc *mm, struct ppt *q, struct up_task *t)
{
	if (!ensure_slot(mm, q, t) && !q->site.rel.step)
		q->plan = UPROBE_PLAN_XOL;
}

/* Creates and arms the probepoint at vaddr (process quiesced). */
static int ppt_create(struct uproc *mm, uint64_t vaddr, struct ppt **out)
{
	struct uprobe_ctx *ctx = mm->ctx;
	struct ppt *q = calloc(1, sizeof(*q));
	char msg[256] = "";
	int rc;

	if (!q)
		return -ENOMEM;
	q->vaddr = vaddr;
	rc = up_site_int3_prepare(&mm->sites, vaddr, &q->site, msg, sizeof(msg));
	if (rc) {
		logf_(ctx, "process %d: %s", (int)mm->pid, msg[0] ? msg : strerror(-rc));
		free(q);
		return rc;
	}
	switch (q->site.bp.insn.plan) {
	case UP_PLAN_EMULATE:
		q->plan = UPROBE_PLAN_EMULATE; /* a slot only if emulation ever faults */
		/* what would cost the tracer a memory access runs cheaper, and as exactly,
		   in a slot: at once where the process has slots (SLOT_AFTER) */
		if (faster_in_slot(&q->site.bp.insn) && up_site_slots_mapped(&mm->sites))
			to_slot(mm, q, NULL);
		break;
	case UP_PLAN_XOL:
	case UP_PLAN_STEP:
		rc = ensure_slot(mm, q, NULL);
		if (rc) {
			if (!ctx->opts.no_xol)
				logf_(ctx, "process %d: no slot for 0x%" PRIx64 " (%s): single-stepping it in place",
				      (int)mm->pid, vaddr, strerror(-rc));
			q->plan = UPROBE_PLAN_INLINE;
		} else {
			q->plan = q->site.rel.step ? UPROBE_PLAN_STEP : UPROBE_PLAN_XOL;
		}
		break;
	case UP_PLAN_REJECT:
		free(q);
		return -ENOTSUP;
	}
	ensure_net(mm, NULL);
	rc = up_site_int3_insert(&mm->sites, &q->site,
				 ctx->cur_task ? ctx->cur_task : idle_task(mm));
	if (rc) {
		logf_(ctx, "process %d: cannot write the breakpoint at 0x%" PRIx64 ": %s",
		      (int)mm->pid, vaddr, strerror(-rc));
		up_site_int3_free(&mm->sites, &q->site);
		free(q);
		return rc;
	}
	q->next = mm->hash[hash_of(vaddr)];
	mm->hash[hash_of(vaddr)] = q;
	*out = q;
	return 0;
}

/* Takes the int3 out; the probepoint waits as a zombie for its users and slot. */
static void ppt_retire(struct uproc *mm, struct ppt *q)
{
	up_site_int3_remove(&mm->sites, &q->site,
			    mm->ctx->cur_task ? mm->ctx->cur_task : idle_task(mm));
	ppt_unhash(mm, q);
	q->dead = true;
	q->next = mm->zombies;
	mm->zombies = q;
}

static bool rip_in_slot(struct uproc *mm, const struct ppt *q)
{
	/* every thread sharing the memory: the owner's and its vfork children's */
	for (struct uproc *up = mm->ctx->procs; up; up = up->next) {
		if (mm_of(up) != mm)
			continue;
		for (struct up_task *t = up_proc_first_task(up->p); t; t = up_proc_next_task(t)) {
			struct user_regs_struct r;

			if (!up_task_stopped(t) || up_task_get_regs(t, &r))
				return true; /* cannot tell: keep it */
			if (r.rip >= q->site.slot && r.rip < q->site.slot + UP_SLOT_MAX)
				return true;
		}
	}
	return false;
}

/* Frees the zombies nobody uses any more (process quiesced). */
static void reap_zombies(struct uproc *mm)
{
	struct ppt **pp = &mm->zombies;

	while (*pp) {
		struct ppt *q = *pp;

		if (q->users || (q->site.slot && rip_in_slot(mm, q))) {
			pp = &q->next;
			continue;
		}
		*pp = q->next;
		up_site_int3_free(&mm->sites, &q->site);
		ppt_free(q);
	}
}

/* The address space is gone (exec, exit): forget every probepoint. */
static void forget_all(struct uproc *mm)
{
	for (unsigned i = 0; i < PPT_HASH; i++) {
		while (mm->hash[i]) {
			struct ppt *q = mm->hash[i];

			mm->hash[i] = q->next;
			/* a followed child's probepoints share the parent's uprobes */
			for (unsigned c = 0; c < q->ncons; c++)
				if (q->cons[c]->pid == mm->pid)
					q->cons[c]->kimg = NULL;
			ppt_free(q);
		}
	}
	while (mm->zombies) {
		struct ppt *q = mm->zombies;

		mm->zombies = q->next;
		ppt_free(q);
	}
	up_sites_forget(&mm->sites);
	mm->tls_watched = false;
	mm->tramp = 0;
	/* a new image: its probes wait for hits of their own */
	mm->cold = mm->followed && mm->ctx->opts.fast_after >= 0;
	mm->promote_due = false;
	mm->cold_hits = 0;
	mm->promotions = 0;
}

/* ---- registration ------------------------------------------------------------------ */

/*
 * How u's address gets its control transfer: the probe-site layer's patched site
 * where u allows one (and no probepoint of the trap path is there), else an int3 of a
 * probepoint, shared by its consumers.  Patched sites whose bytes the int3 would break
 * leave the fast path first and are armed on int3s themselves (process quiesced).
 */
static int arm(struct uprobe_ctx *ctx, struct uproc *mm, struct uprobe *u)
{
	struct ppt *q = ppt_lookup(mm, u->vaddr);
	struct uprobe *v;
	int rc;

	if (!q && !mm->mm_owner && !mm->cold) {
		rc = up_site_place(&mm->sites, u, ctx->cur_task ? ctx->cur_task : idle_task(mm));
		if (rc <= 0)
			return rc;
	}
	/* an int3 inside a fast site's bytes would break its jmp */
	while ((v = up_site_evict(&mm->sites, u->vaddr,
				  ctx->cur_task ? ctx->cur_task : idle_task(mm))))
		arm(ctx, mm, v);
	q = ppt_lookup(mm, u->vaddr); /* the eviction may have made it */
	if (!q) {
		rc = ppt_create(mm, u->vaddr, &q);
		if (rc)
			return rc;
	}
	rc = ppt_add_consumer(q, u);
	if (rc) {
		if (!q->ncons)
			ppt_retire(mm, q);
		return rc;
	}
	u->kimg = (struct uprobe_kimg *)q;
	return 0;
}

/* Probes whose punned jmps lost their place (a neighbour changed the bytes they end
   in, and no trampoline could go where they now send it) go on int3s, at once: one
   may be unregistered next. */
static void arm_evicted(struct uprobe_ctx *ctx, struct uproc *mm)
{
	struct uprobe *v;

	while ((v = up_site_evicted(&mm->sites)))
		arm(ctx, mm, v);
}

#define PROMOTE_TRIES 8 /* a process whose probes stayed on int3s tries again, this often */

/*
 * mm, reached by following, has taken fast_after hits: its own probes (not a fork
 * parent's it counts for) leave their int3s for the fast path where the planner takes
 * them, under one quiesce (from a breakpoint stop, ctx->cur_task rewound onto its int3:
 * it runs the new jmp, and is counted there, once).  A hit pending on an int3 taken
 * out runs the original from there (on_breakpoint).  Probes the planner left on int3s
 * for a thread inside their bytes may go on the next tries.
 */
static void promote(struct uprobe_ctx *ctx, struct uproc *mm)
{
	struct uprobe *us[256];
	unsigned n = 0, moved = 0;

	mm->promote_due = false;
	mm->cold = false;
	for (unsigned i = 0; i < PPT_HASH; i++)
		for (struct ppt *q = mm->hash[i]; q; q = q->next)
			for (unsigned k = 0; k < q->ncons && n < 256; k++)
				if (q->cons[k]->pid == mm->pid && q->cons[k]->kimg == (void *)q &&
				    !(q->cons[k]->flags & UPROBE_F_OWN) &&
				    up_site_may_place(q->cons[k]))
					us[n++] = q->cons[k];
	if (!n || up_proc_quiesce(mm->p))
		return;
	for (unsigned i = 0; i < n; i++) {
		struct ppt *q = (struct ppt *)us[i]->kimg;

		if (!ppt_del_consumer(q, us[i]))
			continue;
		if (!q->ncons)
			ppt_retire(mm, q);
		us[i]->kimg = NULL;
		if (arm(ctx, mm, us[i]))
			logf_(ctx, "process %d: 0x%" PRIx64 " lost its probe leaving the trap path",
			      (int)mm->pid, us[i]->vaddr);
		else if (us[i]->kind == UP_KIND_PATCHED)
			moved++;
		arm_evicted(ctx, mm);
	}
	reap_zombies(mm);
	up_proc_unquiesce(mm->p);
	ctx->stats.promotions++;
	ctx->stats.promoted += moved;
	if (moved < n && ++mm->promotions < PROMOTE_TRIES) {
		mm->cold = true;
		mm->cold_hits = 0;
	}
	if (ctx->opts.verbose)
		logf_(ctx, "process %d: %u of its %u probes on int3s moved to the fast path", (int)mm->pid,
		      moved, n);
}

static void tls_hit(struct uprobe *u, uprobe_regs_t *regs)
{
	struct uproc *mm = u->data;

	(void)regs;
	unregister_uprobe(mm->ctx, u); /* queued: done once the hit is handled */
}

/*
 * A process with threads the agent names by their stack gets a one-shot trap probe
 * (the process quiesced) where its thread has a TLS block: the trap names it again
 * (on_breakpoint).  Other threads without one are named again at their next trap hit.
 */
static void watch_tls(struct uproc *mm)
{
	uint64_t entry;

	if (mm->tls_watched || mm->mm_owner || !(entry = up_site_tls_point(&mm->sites)))
		return;
	mm->tls_watch = (struct uprobe){ .pid = mm->pid, .vaddr = entry, .handler = tls_hit,
					 .flags = UPROBE_F_OWN, .data = mm };
	if (!arm(mm->ctx, mm, &mm->tls_watch))
		mm->tls_watched = true;
}

static void disarm(struct uprobe_ctx *ctx, struct uprobe *u)
{
	if (u->kimg && u->kind == UP_KIND_PATCHED) {
		struct uproc *up = uproc_of_pid(ctx, u->pid);
		struct uproc *mm = up ? mm_of(up) : NULL;
		struct up_task *t = mm ? (ctx->cur_task ? ctx->cur_task : idle_task(mm)) : NULL;
		uint64_t evict = up_site_remove(mm ? &mm->sites : NULL, u, t);
		struct uprobe *v;

		/* the site's other probes lost it with u: on int3s now */
		while (evict && (v = up_site_evict(&mm->sites, evict, t)))
			arm(ctx, mm, v);
		return;
	}
	/* the process itself and any followed child that inherited the probe */
	for (struct uproc *up = ctx->procs; up; up = up->next) {
		struct ppt *q;

		/* pending returns still return, without calling u any more */
		for (struct up_task *t = up_proc_first_task(up->p); t; t = up_proc_next_task(t)) {
			struct utask *ut = up_task_data(t);

			for (unsigned i = 0; ut && i < ut->nrs; i++)
				if (ut->rs[i].u == u)
					ut->rs[i].u = NULL;
		}

		if (up->mm_owner)
			continue;
		q = ppt_lookup(up, u->vaddr);
		if (q && ppt_del_consumer(q, u) && !q->ncons)
			ppt_retire(up, q);
	}
	u->kimg = NULL;
}

static int queue_op(struct uprobe_ctx *ctx, struct uprobe *u, int reg)
{
	if (ctx->nqueue == ctx->capqueue) {
		unsigned cap = ctx->capqueue ? ctx->capqueue * 2 : 8;
		struct pending_op *q = realloc(ctx->queue, cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		ctx->queue = q;
		ctx->capqueue = cap;
	}
	ctx->queue[ctx->nqueue].u = u;
	ctx->queue[ctx->nqueue].reg = reg;
	ctx->nqueue++;
	return -EINPROGRESS;
}

static unsigned word_size(struct uproc *up);
static void unhijack(struct up_proc *p, uint64_t tramp, unsigned w, struct utask *ut);

#define TEARDOWN_NS 1000000000ull /* how long a detach waits for threads to leave our code */
#define IDLE_RETRY_NS 50000000ull /* a process left without probes: tries 20 times a second */

/*
 * No probe is left in mm's memory (a process the mount keeps traced after its last
 * probe went): what we mapped there goes as at a detach, once no thread needs it
 * (process quiesced).  The trap path's hijacked returns go home first (their probes
 * are gone: nothing was to be called at them).  While a thread still needs it, the
 * next dispatches try again, for TEARDOWN_NS; then it stays, said so, until a probe
 * comes back or the process goes.
 */
static void idle_teardown(struct uproc *mm)
{
	uint64_t at;
	struct uprobe *u;
	bool last;

	mm->idle_due = false;
	if (mm->mm_owner || mm->zombies || mm->tls_watched ||
	    up_site_next_patched(&mm->sites, NULL, &at, &u))
		return;
	for (unsigned i = 0; i < PPT_HASH; i++)
		if (mm->hash[i])
			return;
	for (struct up_task *t = up_proc_first_task(mm->p); t; t = up_proc_next_task(t)) {
		struct utask *ut = up_task_data(t);

		if (ut && ut->state != UT_NONE)
			return;
		if (ut && ut->nrs && mm->tramp) {
			unhijack(mm->p, mm->tramp, word_size(mm), ut);
			ut->nrs = 0;
		}
	}
	if (!mm->idle_since)
		mm->idle_since = up_mono_ns();
	mm->idle_tried = up_mono_ns();
	last = mm->idle_tried - mm->idle_since >= TEARDOWN_NS;
	if (!up_sites_teardown(&mm->sites, idle_task(mm), last)) {
		mm->tramp = 0;
		mm->idle_since = 0;
	} else if (!last) {
		mm->idle_due = true;
	}
}

/* The processes left without probes whose mappings a thread still needed: again. */
static void idle_retry(struct uprobe_ctx *ctx)
{
	for (struct uproc *up = ctx->procs; up; up = up->next) {
		if (!up->idle_due || up_mono_ns() - up->idle_tried < IDLE_RETRY_NS)
			continue;
		if (up_proc_quiesce(up->p)) {
			up->idle_due = false;
			continue;
		}
		idle_teardown(up);
		up_proc_unquiesce(up->p);
	}
}

static int register_batch(struct uprobe_ctx *ctx, struct uprobe **us, size_t n, int reg)
{
	int first = 0, settled = 0;
	size_t i = 0;

	up_site_ctx_batch(&ctx->sites); /* mappings may have changed since the last batch */

	while (i < n) {
		struct uproc *up = uproc_of_pid(ctx, us[i]->pid);
		size_t j = i;
		int rc;

		if (!up) {
			if (reg) {
				logf_(ctx, "process %d is not traced", (int)us[i]->pid);
				first = first ? first : -ESRCH;
			} else {
				us[i]->kimg = NULL;
			}
			i++;
			continue;
		}
		rc = up_proc_quiesce(up->p);
		/* it exec'd before it stopped: the old image's probes are dropped first (as
		   the event loop would), then these go into the new one */
		if (rc == -EAGAIN && settled++ < 8 && up_proc_settle(up->p) == 0)
			continue;
		if (rc) {
			/* the process is on its way out: its probes go with it */
			if (!reg && us[i]->kimg)
				disarm(ctx, us[i]);
			else if (reg)
				first = first ? first : rc;
			i++;
			continue;
		}
		/* the safety net before anything else of ours goes in: the agent, a slot, an
		   int3 (the tracer's death meanwhile must not take the process with it) */
		if (reg)
			ensure_net(mm_of(up), NULL);
		/* every consecutive uprobe of this process under the one quiesce; once the
		   process is found dying (killed meanwhile), the rest of its batch is not tried */
		for (bool dying = false; j < n && us[j]->pid == up->pid; j++) {
			if (reg) {
				rc = us[j]->kimg ? -EBUSY : dying ? -ESRCH : arm(ctx, mm_of(up), us[j]);
				/* failed because it was killed meanwhile: say so */
				if (rc && rc != -ESRCH && rc != -EBUSY && up_proc_dying(up->p))
					rc = -ESRCH;
				dying = dying || rc == -ESRCH;
				if (rc && !first)
					first = rc;
			} else if (us[j]->kimg) {
				disarm(ctx, us[j]);
			}
			arm_evicted(ctx, mm_of(up));
		}
		if (reg)
			watch_tls(mm_of(up));
		arm_evicted(ctx, mm_of(up));
		reap_zombies(mm_of(up));
		if (reg) {
			mm_of(up)->idle_due = false;
			mm_of(up)->idle_since = 0;
		} else {
			idle_teardown(mm_of(up)); /* its last probe gone: our mappings too */
		}
		up_proc_unquiesce(up->p);
		i = j;
	}
	return first;
}

int register_uprobes(struct uprobe_ctx *ctx, struct uprobe **u, size_t n)
{
	if (ctx->in_handler) {
		int rc = 0;

		for (size_t i = 0; i < n; i++)
			rc = queue_op(ctx, u[i], 1);
		return rc;
	}
	return register_batch(ctx, u, n, 1);
}

int unregister_uprobes(struct uprobe_ctx *ctx, struct uprobe **u, size_t n)
{
	if (ctx->in_handler) {
		int rc = 0;

		for (size_t i = 0; i < n; i++)
			rc = queue_op(ctx, u[i], 0);
		return rc;
	}
	return register_batch(ctx, u, n, 0);
}

int register_uprobe(struct uprobe_ctx *ctx, struct uprobe *u)
{
	if (!u || (!u->handler && !u->ret_handler && !(u->flags & UPROBE_F_COUNT) &&
		   !(u->capture && u->record_handler)))
		return -EINVAL;
	return register_uprobes(ctx, &u, 1);
}

int unregister_uprobe(struct uprobe_ctx *ctx, struct uprobe *u)
{
	if (!u)
		return -EINVAL;
	if (!ctx->in_handler && !u->kimg)
		return 0;
	return unregister_uprobes(ctx, &u, 1);
}

/* (Un)registrations handlers asked for, now that no handler runs. */
static void apply_queue(struct uprobe_ctx *ctx)
{
	while (ctx->nqueue) {
		struct pending_op op = ctx->queue[0];
		int rc;

		memmove(ctx->queue, ctx->queue + 1, (--ctx->nqueue) * sizeof(*ctx->queue));
		if (op.reg)
			rc = register_batch(ctx, &op.u, 1, 1);
		else
			rc = op.u->kimg ? register_batch(ctx, &op.u, 1, 0) : 0;
		if (op.u->registration_callback)
			op.u->registration_callback(op.u, op.reg, rc);
	}
}

int uprobe_plan(struct uprobe_ctx *ctx, const struct uprobe *u, enum uprobe_plan *plan)
{
	(void)ctx;
	if (!u->kimg)
		return -ENOENT;
	*plan = u->kind == UP_KIND_PATCHED ? UPROBE_PLAN_FAST : ((struct ppt *)u->kimg)->plan;
	return 0;
}

/* ---- a hit ------------------------------------------------------------------------- */

/* Passes on the first delayed signal with its siginfo; re-raises the others. */
static void deliver_delayed(struct up_task *t, struct utask *ut)
{
	if (!ut->ndelayed)
		return;
	up_task_set_siginfo(t, &ut->delayed[0]);
	for (unsigned i = 1; i < ut->ndelayed; i++)
		syscall(SYS_tgkill, up_proc_pid(up_task_proc(t)), up_task_tid(t),
			ut->delayed[i].si_signo);
	ut->ndelayed = 0;
}

static void delay_signal(struct uprobe_ctx *ctx, struct up_task *t, struct utask *ut,
			 const struct up_stop *stop)
{
	if (ut->ndelayed < MAX_DELAYED)
		ut->delayed[ut->ndelayed++] = stop->info;
	ctx->stats.delayed_signals++;
	up_task_set_signal(t, 0);
}

static void put_ppt(struct uproc *mm, struct ppt *q)
{
	if (q->users)
		q->users--;
	(void)mm;
}

/* The thread becomes doomed: its state cannot be made right. */
static enum up_resume doom(struct uprobe_ctx *ctx, struct up_task *t, const char *why, int rc)
{
	logf_(ctx, "thread %d: %s (%s): killed rather than left corrupt", (int)up_task_tid(t), why,
	      strerror(-rc));
	ctx->stats.doomed++;
	up_task_set_signal(t, SIGKILL);
	return UP_RESUME_CONT;
}

/* The in-place step is over (done, faulted, or the thread gone): the int3 back, the others run. */
static void end_inline(struct uproc *up, struct ppt *q)
{
	if (!q->dead)
		up_proc_write_text(mm_of(up)->p, q->vaddr, (const uint8_t[]){ UP_BKPT_INSN }, 1);
	up_proc_unquiesce(up->p);
}

/*
 * A thread (or a fork child's copy of one) stopped with rip in q's slot: the registers
 * it must have at home -- the scratch register back, syscall's rcx, rip mapped.  ut is
 * the thread's state, NULL when unknown.  False when rip is not in the slot.
 */
static bool slot_home(const struct ppt *q, const struct utask *ut, struct user_regs_struct *r)
{
	if (!q || !q->site.slot || r->rip < q->site.slot || r->rip >= q->site.slot + UP_SLOT_MAX)
		return false;
	if (ut && ut->state == UT_STEP && (q->site.rel.fixups & UP_FIX_SCRATCH))
		*up_regs_gpr(r, q->site.rel.scratch) = ut->st.saved_scratch;
	if ((q->site.rel.fixups & UP_FIX_SYSCALL_RCX) &&
	    r->rip >= q->site.slot + q->site.rel.insn_len)
		r->rcx = q->site.bp.insn.vaddr + q->site.bp.insn.length;
	r->rip = up_reloc_home_rip(&q->site.bp.insn, &q->site.rel, q->site.slot, r->rip);
	return true;
}

static enum up_resume start_inline(struct uproc *up, struct up_task *t, struct utask *ut,
				   struct ppt *q, struct user_regs_struct *regs)
{
	struct uproc *mm = mm_of(up);
	int rc = up_proc_quiesce(up->p);

	if (rc)
		return doom(up->ctx, t, "cannot stop the other threads for an in-place step", rc);
	rc = up_proc_write_text(mm->p, q->vaddr, &q->site.bp.orig, 1);
	if (rc) {
		up_proc_unquiesce(up->p);
		return doom(up->ctx, t, "cannot restore the original instruction", rc);
	}
	regs->rip = q->vaddr;
	up_task_set_regs(t, regs);
	ut->state = UT_INLINE;
	ut->ppt = q;
	q->users++;
	up->ctx->stats.inlined++;
	return UP_RESUME_STEP;
}

static enum up_resume start_step(struct uproc *up, struct up_task *t, struct utask *ut,
				 struct ppt *q, struct user_regs_struct *regs)
{
	up_reloc_step_begin(&q->site.bp.insn, &q->site.rel, q->site.slot, regs, &ut->st);
	up_task_set_regs(t, regs);
	ut->state = UT_STEP;
	ut->ppt = q;
	q->users++;
	up->ctx->stats.stepped++;
	return UP_RESUME_STEP;
}

static enum up_resume execute(struct uproc *up, struct up_task *t, struct utask *ut, struct ppt *q,
			      struct user_regs_struct *regs)
{
	struct uprobe_ctx *ctx = up->ctx;
	struct uproc *mm = mm_of(up);

	if (q->plan == UPROBE_PLAN_EMULATE && ++q->emulated == SLOT_AFTER &&
	    faster_in_slot(&q->site.bp.insn))
		to_slot(mm, q, t); /* the thread on its int3 still: this hit runs there */
	switch (q->plan) {
	case UPROBE_PLAN_EMULATE:
		if (!up_insn_emulate(&q->site.bp.insn, regs, mem_fn, up->p)) {
			up_task_set_regs(t, regs);
			ctx->stats.emulated++;
			return UP_RESUME_CONT;
		}
		/* a memory access failed: run it for real, so the program takes the fault */
		if (!ensure_slot(mm, q, t))
			return start_step(up, t, ut, q, regs);
		return start_inline(up, t, ut, q, regs);
	case UPROBE_PLAN_XOL:
		regs->rip = q->site.slot;
		up_task_set_regs(t, regs);
		ctx->stats.xol++;
		return UP_RESUME_CONT;
	case UPROBE_PLAN_STEP:
		return start_step(up, t, ut, q, regs);
	case UPROBE_PLAN_INLINE:
		return start_inline(up, t, ut, q, regs);
	case UPROBE_PLAN_FAST:
		break; /* not a probepoint's plan */
	}
	return UP_RESUME_CONT;
}

/* ---- return probes ------------------------------------------------------------------- */

static unsigned word_size(struct uproc *up)
{
	return up_proc_mode(up->p) == 32 ? 4 : 8;
}

static int ensure_tramp(struct uproc *mm, struct up_task *t, uint64_t near)
{
	uint64_t slot;
	int rc;

	if (mm->tramp)
		return 0;
	ensure_net(mm, t);
	rc = up_site_ret_int3(&mm->sites, t, near, &slot);
	if (!rc)
		mm->tramp = slot;
	return rc;
}

static int push_rinst(struct utask *ut, uint64_t orig, uint64_t sp, struct uprobe *u)
{
	if (ut->nrs == ut->caprs) {
		unsigned cap = ut->caprs ? ut->caprs * 2 : 8;
		struct rinst *r;

		if (cap > MAX_RINST)
			return -E2BIG;
		r = realloc(ut->rs, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		ut->rs = r;
		ut->caprs = cap;
	}
	ut->rs[ut->nrs].orig = orig;
	ut->rs[ut->nrs].sp = sp;
	ut->rs[ut->nrs].u = u;
	ut->rs[ut->nrs].t0 = up_mono_ns();
	ut->nrs++;
	return 0;
}

/* At a function's entry: the return address becomes the trampoline. */
static void hijack_return(struct uproc *up, struct up_task *t, struct utask *ut, struct ppt *q,
			  const struct user_regs_struct *regs)
{
	struct uproc *mm = mm_of(up);
	const unsigned w = word_size(up);
	const uint64_t sp = regs->rsp & (w == 4 ? 0xffffffffULL : ~0ULL);
	uint64_t ret = 0, orig;
	unsigned want = 0;
	int rc;

	for (unsigned i = 0; i < q->ncons; i++)
		if (q->cons[i]->ret_handler && q->cons[i]->kimg)
			want++;
	if (!want)
		return;
	if (ensure_tramp(mm, t, q->vaddr) || up_proc_read(up->p, sp, &ret, w)) {
		up->ctx->stats.returns_dropped += want;
		return;
	}
	if (ret == mm->tramp) {
		/* a tail call into a probed function: the same return, already ours */
		if (!ut->nrs)
			return;
		orig = ut->rs[ut->nrs - 1].orig;
	} else {
		orig = ret;
		if (ut->nrs + want > MAX_RINST) {
			up->ctx->stats.returns_dropped += want;
			return;
		}
		/* the net knows the real address before the stack holds the trampoline's;
		   a return it cannot know (its table full there) is not hijacked: the
		   tracer's death would leave it returning into the trampoline */
		rc = up_site_net_ret_add(&mm->sites, sp, orig);
		if ((rc && rc != -ENOTSUP) || up_proc_write(up->p, sp, &mm->tramp, w)) {
			up->ctx->stats.returns_dropped += want;
			return;
		}
	}
	for (unsigned i = 0; i < q->ncons; i++)
		if (q->cons[i]->ret_handler && q->cons[i]->kimg &&
		    push_rinst(ut, orig, sp, q->cons[i]))
			up->ctx->stats.returns_dropped++;
}

/* The trampoline's int3: the function returned.  Returns false when it cannot know where to. */
static enum up_resume on_return(struct uproc *up, struct up_task *t, struct utask *ut,
				struct user_regs_struct *regs)
{
	struct uprobe_ctx *ctx = up->ctx;
	const unsigned w = word_size(up);
	const uint64_t slot = ((regs->rsp & (w == 4 ? 0xffffffffULL : ~0ULL)) - w) &
			      (w == 4 ? 0xffffffffULL : ~0ULL);
	uint64_t orig = 0, now;
	unsigned first;
	bool found = false;

	/* frames below this one are gone (longjmp, unwinding, a thread switch of stacks) */
	while (ut->nrs && ut->rs[ut->nrs - 1].sp < slot) {
		ut->nrs--;
		up_site_net_ret_done(&mm_of(up)->sites, ut->rs[ut->nrs].sp);
		ctx->stats.returns_dropped++;
	}
	first = ut->nrs;
	while (first && ut->rs[first - 1].sp == slot)
		first--;
	if (first == ut->nrs)
		return doom(ctx, t, "returned through the return-probe trampoline with no frame of ours",
			    -EFAULT);
	orig = ut->rs[ut->nrs - 1].orig;
	regs->rip = orig;
	now = up_mono_ns();
	up_site_drain(&mm_of(up)->sites);
	ctx->in_handler = true;
	ctx->cur_tid = up_task_tid(t);
	ctx->cur_pid = up->pid;
	for (unsigned i = ut->nrs; i-- > first;) {
		struct uprobe *u = ut->rs[i].u;

		if (u && u->kimg && u->ret_handler) {
			ctx->in_return = true;
			ctx->ret_ns = now - ut->rs[i].t0;
			u->ret_handler(u, regs);
			ctx->in_return = false;
			found = true;
		}
		ctx->stats.returns++;
	}
	ctx->in_handler = false;
	ctx->cur_tid = 0;
	ut->nrs = first;
	up_site_net_ret_done(&mm_of(up)->sites, slot);
	(void)found;
	up_task_set_regs(t, regs);
	if (ctx->nqueue)
		apply_queue(ctx);
	return UP_RESUME_CONT;
}

/* Puts the real return addresses back on a thread's stack (detach, a fork child). */
static void unhijack(struct up_proc *p, uint64_t tramp, unsigned w, struct utask *ut)
{
	for (unsigned i = 0; ut && i < ut->nrs; i++) {
		uint64_t cur = 0;

		if (!up_proc_read(p, ut->rs[i].sp, &cur, w) && cur == tramp)
			up_proc_write(p, ut->rs[i].sp, &ut->rs[i].orig, w);
	}
}

static unsigned fast_after(const struct uprobe_ctx *ctx)
{
	return ctx->opts.fast_after > 0 ? (unsigned)ctx->opts.fast_after : UPROBE_FAST_AFTER_DEFAULT;
}

static enum up_resume on_breakpoint(struct uproc *up, struct up_task *t, struct utask *ut)
{
	struct uprobe_ctx *ctx = up->ctx;
	struct uproc *mm = mm_of(up);
	struct user_regs_struct regs;
	struct ppt *q;
	uint64_t bp;
	uint8_t byte;

	if (up_task_get_regs(t, &regs))
		return UP_RESUME_CONT;
	bp = regs.rip - 1;
	if (mm->tramp && bp == mm->tramp)
		return on_return(up, t, ut, &regs);
	q = ppt_lookup(mm, bp);
	if (!q) {
		/* ours once, removed since the thread trapped: run the original */
		if (!up_proc_read(up->p, bp, &byte, 1) && byte != UP_BKPT_INSN) {
			regs.rip = bp;
			up_task_set_regs(t, &regs);
			return UP_RESUME_CONT;
		}
		int was = up_site_written_orig(&mm->sites, bp);

		if (was >= 0 && was != UP_BKPT_INSN) {
			/* an int3 of ours left behind: put the byte back, run the original */
			uint8_t orig = (uint8_t)was;

			logf_(ctx, "process %d: an int3 of ours was left at 0x%" PRIx64 " with no probe: "
				   "restored", (int)up->pid, bp);
			if (!up_proc_write_text(up->p, bp, &orig, 1)) {
				regs.rip = bp;
				up_task_set_regs(t, &regs);
				return UP_RESUME_CONT;
			}
		}
		/* the program's own int3: its handler, through the net, must be there */
		up_site_net_hit(&mm->sites, t, true);
		up_task_set_signal(t, SIGTRAP);
		return UP_RESUME_CONT;
	}
	if (mm->promote_due && !ctx->in_handler) {
		/* the thread goes back onto the int3 before its process is looked at: were
		   its probe moved, it runs the jmp there, its hit counted once; parked first,
		   so that a tracer dying while the int3 is out does not leave it one byte in */
		up_task_park(t);
		regs.rip = bp;
		up_task_set_regs(t, &regs);
		promote(ctx, mm);
		q = ppt_lookup(mm, bp);
		if (!q)
			return UP_RESUME_CONT;
	}
	if (mm->cold && ++mm->cold_hits >= fast_after(ctx))
		mm->promote_due = true;
	if (!(q->ncons == 1 && (q->cons[0]->flags & UPROBE_F_OWN)))
		ctx->stats.hits++;
	regs.rip = bp;
	/* a thread the agent names by its stack may have its TLS block by now */
	up_site_hit_name(&mm->sites, t, &regs);
	if (up->handlers) {
		/* a copy: a handler may ask to unregister, which edits the list */
		struct uprobe *cons[64];
		unsigned n = q->ncons < 64 ? q->ncons : 64;

		memcpy(cons, q->cons, n * sizeof(*cons));
		/* what the fast path recorded before this hit goes out before it */
		up_site_drain(&mm->sites);
		ctx->in_handler = true;
		ctx->cur_tid = up_task_tid(t);
		ctx->cur_pid = up->pid;
		for (unsigned i = 0; i < n; i++) {
			if (!cons[i]->kimg)
				continue;
			if (cons[i]->flags & UPROBE_F_COUNT)
				cons[i]->nhits++;
			if (cons[i]->handler)
				cons[i]->handler(cons[i], &regs);
			else if (cons[i]->record_handler && cons[i]->capture && !cons[i]->ret_handler)
				up_site_record_trap_hit(up->p, t, cons[i], &regs, false);
		}
		ctx->in_handler = false;
		ctx->cur_tid = 0;
		if (regs.rip == bp)
			hijack_return(up, t, ut, q, &regs);
		if (ctx->nqueue)
			apply_queue(ctx);
		q = ppt_lookup(mm, bp);
	}
	if (regs.rip != bp || !q) {
		/* sent elsewhere by a handler, or the probe is gone: the byte is back */
		up_task_set_regs(t, &regs);
		return UP_RESUME_CONT;
	}
	return execute(up, t, ut, q, &regs);
}

static enum up_resume finish(struct uproc *up, struct up_task *t, struct utask *ut)
{
	struct ppt *q = ut->ppt;

	ut->state = UT_NONE;
	ut->ppt = NULL;
	if (q)
		put_ppt(mm_of(up), q);
	deliver_delayed(t, ut);
	return UP_RESUME_CONT;
}

static enum up_resume on_step(struct uproc *up, struct up_task *t, struct utask *ut)
{
	struct ppt *q = ut->ppt;
	struct user_regs_struct regs;
	uint64_t home;
	int rc;

	if (ut->state == UT_NONE || !q)
		return UP_RESUME_CONT;
	if (up_task_get_regs(t, &regs))
		return finish(up, t, ut);
	switch (ut->state) {
	case UT_STEP:
		/* a rep-prefixed string instruction steps one iteration at a time */
		if (regs.rip == q->site.slot)
			return UP_RESUME_STEP;
		rc = up_reloc_step_finish(&q->site.bp.insn, &q->site.rel, q->site.slot, &regs, &ut->st, mem_fn,
					  up->p);
		if (rc) {
			finish(up, t, ut);
			return doom(up->ctx, t, "cannot fix up the stack after a step", rc);
		}
		up_task_set_regs(t, &regs);
		return finish(up, t, ut);
	case UT_DRAIN:
		home = up_reloc_home_rip(&q->site.bp.insn, &q->site.rel, q->site.slot, regs.rip);
		if (home == q->site.bp.insn.vaddr)
			return UP_RESUME_STEP; /* not out of the instruction yet */
		if (home) {
			regs.rip = home;
			up_task_set_regs(t, &regs);
		}
		return finish(up, t, ut);
	case UT_INLINE:
		if (regs.rip == q->vaddr)
			return UP_RESUME_STEP;
		end_inline(up, q);
		return finish(up, t, ut);
	case UT_NONE:
		break;
	}
	return UP_RESUME_CONT;
}

static bool is_fault(const struct up_stop *stop)
{
	switch (stop->sig) {
	case SIGSEGV:
	case SIGBUS:
	case SIGILL:
	case SIGFPE:
		return stop->info.si_code > 0; /* raised by the instruction, not sent */
	default:
		return false;
	}
}

/* A fault's siginfo names the slot (si_addr of SIGFPE, SIGILL...): name home instead. */
static void fault_info_home(struct up_task *t, const struct up_stop *stop, const struct ppt *q)
{
	uint64_t a = (uint64_t)(uintptr_t)stop->info.si_addr;
	siginfo_t info = stop->info;

	if (!q->site.slot || a < q->site.slot || a >= q->site.slot + UP_SLOT_MAX)
		return;
	info.si_addr = (void *)(uintptr_t)up_reloc_home_rip(&q->site.bp.insn, &q->site.rel, q->site.slot, a);
	up_task_set_siginfo(t, &info);
}

static enum up_resume on_signal(struct uproc *up, struct up_task *t, struct utask *ut,
				const struct up_stop *stop)
{
	struct uproc *mm = mm_of(up);
	struct user_regs_struct regs;
	struct ppt *q;
	uint64_t home;

	if (ut->state != UT_NONE && ut->ppt) {
		q = ut->ppt;
		if (!is_fault(stop)) {
			delay_signal(up->ctx, t, ut, stop);
			return UP_RESUME_STEP;
		}
		/* the instruction faulted out of line: the program sees it fault at home */
		if (up_task_get_regs(t, &regs))
			return UP_RESUME_CONT;
		if (ut->state == UT_STEP && (q->site.rel.fixups & UP_FIX_SCRATCH))
			*up_regs_gpr(&regs, q->site.rel.scratch) = ut->st.saved_scratch;
		if (ut->state == UT_INLINE)
			end_inline(up, q);
		regs.rip = q->vaddr;
		up_task_set_regs(t, &regs);
		fault_info_home(t, stop, q);
		ut->state = UT_NONE;
		ut->ppt = NULL;
		put_ppt(mm, q);
		return UP_RESUME_CONT;
	}
	if (up_task_get_regs(t, &regs))
		return UP_RESUME_CONT;
	q = ppt_by_slot(mm, regs.rip);
	if (!q) {
		/* the relocated instruction of a fast-path trampoline faulted: at home */
		if (is_fault(stop))
			up_site_fault_home(&mm->sites, t, &regs, &stop->info);
		return UP_RESUME_CONT; /* nothing of ours: as it is */
	}
	home = up_reloc_home_rip(&q->site.bp.insn, &q->site.rel, q->site.slot, regs.rip);
	if (is_fault(stop) || home != q->site.bp.insn.vaddr) {
		/* faulted in the slot, or done and on its way back: deliver it at home */
		if (home) {
			regs.rip = home;
			up_task_set_regs(t, &regs);
		}
		if (is_fault(stop))
			fault_info_home(t, stop, q);
		return UP_RESUME_CONT;
	}
	/* about to run the slot's instruction: run it first, then deliver */
	delay_signal(up->ctx, t, ut, stop);
	ut->state = UT_DRAIN;
	ut->ppt = q;
	q->users++;
	return UP_RESUME_STEP;
}

/* ---- engine callbacks ---------------------------------------------------------------- */

static enum up_resume cb_stop(void *arg, struct up_task *t, const struct up_stop *stop)
{
	struct uprobe_ctx *ctx = arg;
	struct uproc *up = up_proc_data(up_task_proc(t));
	struct utask *ut = up ? utask_of(t) : NULL;
	enum up_resume r = UP_RESUME_CONT;
	struct user_regs_struct regs;

	if (up && up->releasing) {
		uint8_t b;

		/* nothing of ours runs any more: a trap at an int3 taken out is sent back
		   to the original byte, anything else goes on as it is (its signal too) */
		if (stop->kind == UP_STOP_BREAKPOINT && !up_task_get_regs(t, &regs)) {
			if (!up_proc_read(up->p, regs.rip - 1, &b, 1) && b != UP_BKPT_INSN) {
				regs.rip--;
				up_task_set_regs(t, &regs);
			} else {
				up_task_set_signal(t, SIGTRAP);
			}
		}
		return UP_RESUME_CONT;
	}
	if (up && !ut && stop->kind == UP_STOP_BREAKPOINT && !up_task_get_regs(t, &regs) &&
	    (ppt_lookup(mm_of(up), regs.rip - 1) || regs.rip - 1 == mm_of(up)->tramp)) {
		/* no memory for the thread's state: it goes back to the int3, to trap
		   again (and be handled then), not on into the middle of an instruction */
		regs.rip--;
		up_task_set_regs(t, &regs);
		return UP_RESUME_CONT;
	}
	if (!up || !ut)
		return UP_RESUME_CONT;
	/* a trap that found SIGTRAP blocked took the safety net away: back first */
	if (stop->kind == UP_STOP_BREAKPOINT ||
	    (stop->kind == UP_STOP_SIGNAL && stop->sig == SIGTRAP))
		up_site_net_hit(&mm_of(up)->sites, t, stop->kind == UP_STOP_SIGNAL);
	ctx->cur_task = t;
	switch (stop->kind) {
	case UP_STOP_BREAKPOINT:
		r = on_breakpoint(up, t, ut);
		break;
	case UP_STOP_STEP:
		r = on_step(up, t, ut);
		break;
	case UP_STOP_SIGNAL:
		r = on_signal(up, t, ut, stop);
		break;
	}
	ctx->cur_task = NULL;
	return r;
}

static void cb_thread_exit(void *arg, struct up_task *t)
{
	struct utask *ut = up_task_data(t);
	struct uproc *up = up_proc_data(up_task_proc(t));

	(void)arg;
	if (ut) {
		if (up)
			up_site_thread_gone(&mm_of(up)->sites, t);
		if (ut->ppt && up) {
			if (ut->state == UT_INLINE)
				end_inline(up, ut->ppt);
			put_ppt(mm_of(up), ut->ppt);
		}
		free(ut->rs);
		free(ut);
		up_task_set_data(t, NULL);
	}
}

/* A new thread: the agent learns its name before it can run into a trampoline. */
static void cb_thread_new(void *arg, struct up_task *parent, struct up_task *t)
{
	struct uproc *up = up_proc_data(up_task_proc(t));

	(void)arg;
	(void)parent;
	if (up && !up->releasing) {
		up_site_name_thread(&mm_of(up)->sites, t);
		up_site_thread_new(&mm_of(up)->sites, t);
	}
}

static struct uproc *uproc_new(struct uprobe_ctx *ctx, struct up_proc *p)
{
	struct uproc *up = calloc(1, sizeof(*up));

	if (!up)
		return NULL;
	up->ctx = ctx;
	up->p = p;
	up->pid = up_proc_pid(p);
	up->handlers = true;
	up_sites_init(&up->sites, &ctx->sites, p);
	up->next = ctx->procs;
	ctx->procs = up;
	up_proc_set_data(p, up);
	return up;
}

static void uproc_unlink(struct uprobe_ctx *ctx, struct uproc *up)
{
	struct uproc **pp = &ctx->procs;

	while (*pp && *pp != up)
		pp = &(*pp)->next;
	if (*pp)
		*pp = up->next;
	up_proc_set_data(up->p, NULL);
	if (up->mm_owner)
		up_sites_unshare(&up->mm_owner->sites, up->p);
}

/* After uproc_unlink, and forget_all if it owned its memory. */
static void uproc_free(struct uproc *up)
{
	up_sites_fini(&up->sites);
	free(up);
}

/* The child of a fork, stopped before it runs: move a thread that forked from a slot home. */
static void child_home(struct uproc *parent_mm, struct up_task *parent_t, struct up_proc *child)
{
	struct utask *ut = up_task_data(parent_t);
	struct up_task *ct = up_proc_first_task(child);
	struct user_regs_struct r;
	struct ppt *q;

	if (!ct || up_task_get_regs(ct, &r))
		return;
	q = ut && ut->ppt ? ut->ppt : ppt_by_slot(parent_mm, r.rip);
	if (slot_home(q, ut, &r))
		up_task_set_regs(ct, &r);
}

/* Follows a fork child: its own probepoints, copies of the parent's, with new slots. */
static void follow_child(struct uproc *pm, struct uproc *cu)
{
	for (unsigned i = 0; i < PPT_HASH; i++) {
		for (struct ppt *q = pm->hash[i]; q; q = q->next) {
			struct ppt *c = calloc(1, sizeof(*c));

			if (!c)
				continue;
			c->vaddr = q->vaddr;
			up_site_int3_inherit(&cu->sites, &pm->sites, &q->site, &c->site);
			c->plan = q->plan;
			for (unsigned k = 0; k < q->ncons; k++)
				ppt_add_consumer(c, q->cons[k]);
			if (q->site.slot && ensure_slot(cu, c, NULL))
				c->plan = UPROBE_PLAN_INLINE;
			c->next = cu->hash[hash_of(c->vaddr)];
			cu->hash[hash_of(c->vaddr)] = c;
		}
	}
}

static void cb_fork(void *arg, struct up_task *parent_t, struct up_proc *child, bool vfork)
{
	struct uprobe_ctx *ctx = arg;
	struct uproc *pu = up_proc_data(up_task_proc(parent_t));
	struct uproc *pm, *cu;

	if (!pu) {
		up_proc_detach(child);
		return;
	}
	pm = mm_of(pu);
	/* clone(CLONE_VM) without CLONE_THREAD shares the memory as vfork does */
	if (!vfork && syscall(SYS_kcmp, pu->pid, up_proc_pid(child), 1 /* KCMP_VM */, 0, 0) == 0)
		vfork = true;
	if (!vfork) {
		/* the child has no trampolines (MADV_DONTFORK): the original bytes back */
		up_sites_fork(&pm->sites, child);
		child_home(pm, parent_t, child);
		up_site_unhijack(&pm->sites, child);
		/* its copy of the stack has our trampoline in it: the child has no XOL area */
		if (pm->tramp)
			unhijack(child, pm->tramp, word_size(pu), up_task_data(parent_t));
	}
	if (pu->releasing) {
		up_proc_detach(child); /* nothing of ours to follow it with */
		return;
	}
	if (vfork) {
		/* it shares the parent's memory, int3s and slots: keep it until exec/exit */
		cu = uproc_new(ctx, child);
		if (!cu) {
			up_proc_detach(child);
			return;
		}
		if (up_sites_share(&pm->sites, child)) {
			uproc_unlink(ctx, cu);
			uproc_free(cu);
			up_proc_detach(child);
			return;
		}
		cu->mm_owner = pm;
		cu->handlers = ctx->opts.follow_fork;
		cu->followed = true;
		cu->cold = ctx->opts.fast_after >= 0;
	} else if (ctx->opts.follow_fork) {
		cu = uproc_new(ctx, child);
		if (!cu) {
			up_proc_detach(child);
			return;
		}
		cu->followed = true;
		cu->cold = ctx->opts.fast_after >= 0;
		follow_child(pm, cu);
		/* a followed child counts the fast sites through int3s */
		uint64_t at;
		struct uprobe *fu;

		for (struct up_patched *f = up_site_next_patched(&pm->sites, NULL, &at, &fu); f;
		     f = up_site_next_patched(&pm->sites, f, &at, &fu)) {
			struct ppt *q;

			if (!ppt_create(cu, at, &q))
				ppt_add_consumer(q, fu);
		}
	} else {
		/* not ours to probe: take our int3s out of its copy of the text and let it go */
		for (unsigned i = 0; i < PPT_HASH; i++)
			for (struct ppt *q = pm->hash[i]; q; q = q->next)
				up_site_int3_unfork(child, &q->site);
		up_proc_detach(child);
		return;
	}
	if (ctx->opts.follow_fork && ctx->opts.on_fork)
		ctx->opts.on_fork(ctx->opts.arg, pu->pid, cu->pid);
}

/*
 * A traced exec of a set-uid/set-gid file runs without its privileges (unless the
 * tracer has CAP_SYS_PTRACE): say so, as the program may then fail where it would not.
 */
static void warn_setid(struct uprobe_ctx *ctx, pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (geteuid() != 0 && stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)))
		logf_(ctx, "process %d runs a set-%cid program: traced, the kernel runs it without "
			   "those privileges (trace as root to keep them)",
		      (int)pid, (st.st_mode & S_ISUID) ? 'u' : 'g');
}

/*
 * An exec that would gain privileges the tracer does not have (a set-uid file of another
 * user, a set-gid file of another group) is not followed: say so, and the path.
 */
static bool exec_gains_privilege(struct uprobe_ctx *ctx, pid_t pid)
{
	char path[64], exe[512];
	struct stat st;
	ssize_t n;
	bool uid, gid;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &st) < 0)
		return false;
	uid = (st.st_mode & S_ISUID) && st.st_uid != geteuid();
	/* set-gid without group execute is mandatory locking, not set-gid */
	gid = (st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP) && st.st_gid != getegid();
	if (!uid && !gid)
		return false;
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	logf_(ctx,
	      "process %d exec'd %s, set-%s %u: not followed (a tracer never goes beyond its "
	      "own rights); its probes are gone and it runs on untraced, but the kernel "
	      "started it without those privileges since it was traced at the exec: to run "
	      "it privileged, start it outside the tracer and attach (-p), as root",
	      (int)pid, exe[0] ? exe : "a program", uid ? "uid" : "gid",
	      uid ? (unsigned)st.st_uid : (unsigned)st.st_gid);
	return true;
}

static void cb_exec(void *arg, struct up_proc *p, struct up_task *t)
{
	struct uprobe_ctx *ctx = arg;
	struct uproc *up = up_proc_data(p);

	(void)t;
	if (!up)
		return;
	if (up->releasing) {
		/* what we mapped went with the old image: the wait is over */
		if (!up->mm_owner)
			forget_all(up);
		return;
	}
	if (exec_gains_privilege(ctx, up->pid)) {
		pid_t pid = up->pid;

		uproc_unlink(ctx, up);
		if (!up->mm_owner)
			forget_all(up);
		for (struct uproc *c = ctx->procs; c; c = c->next)
			if (c->mm_owner == up)
				c->mm_owner = NULL;
		uproc_free(up);
		free_utasks(p);
		up_proc_detach(p);
		if (ctx->opts.on_exit)
			ctx->opts.on_exit(ctx->opts.arg, pid, -1);
		return;
	}
	warn_setid(ctx, up->pid);
	for (struct up_task *x = up_proc_first_task(p); x; x = up_proc_next_task(x)) {
		struct utask *ut = up_task_data(x);

		if (ut) {
			up_site_thread_gone(&mm_of(up)->sites, x);
			ut->state = UT_NONE;
			ut->ppt = NULL;
			ut->nrs = 0;
		}
	}
	if (up->mm_owner) {
		/* a vfork child with a memory of its own now */
		up_sites_unshare(&up->mm_owner->sites, p);
		up->mm_owner = NULL;
		if (!ctx->opts.follow_fork) {
			uproc_unlink(ctx, up);
			uproc_free(up);
			up_proc_detach(p);
			return;
		}
	} else {
		forget_all(up);
	}
	if (ctx->opts.on_exec)
		ctx->opts.on_exec(ctx->opts.arg, up->pid);
}

static void cb_proc_exit(void *arg, struct up_proc *p, int status)
{
	struct uprobe_ctx *ctx = arg;
	struct uproc *up = up_proc_data(p);
	pid_t pid;

	if (!up)
		return;
	pid = up->pid;
	/* threads reaped with the process (no gone event of their own: one stopped while
	   its release waited, say) leave their state here (LeakSanitizer: trace.arming) */
	free_utasks(p);
	if (ctx->releasing == up)
		ctx->releasing = NULL; /* its release ends here; its detach is the exit */
	uproc_unlink(ctx, up);
	if (!up->mm_owner)
		forget_all(up);
	/* vfork children that shared this memory lose their owner */
	for (struct uproc *c = ctx->procs; c; c = c->next)
		if (c->mm_owner == up)
			c->mm_owner = NULL;
	if (up->releasing) {
		/* being detached: the caller does not hear of it twice */
		uproc_free(up);
		return;
	}
	uproc_free(up);
	if (ctx->opts.on_exit)
		ctx->opts.on_exit(ctx->opts.arg, pid, status);
}

static void cb_log(void *arg, const char *msg)
{
	struct uprobe_ctx *ctx = arg;

	if (ctx->opts.log)
		ctx->opts.log(ctx->opts.log_arg, msg);
}

/* A thread exits: the fast path's counters read, and its records delivered (or, the
   client having noted what they need, left in its ring for the next drain), while the
   memory and the thread (its /proc entry, its comm) are still there. */
static void cb_exiting(void *arg, struct up_task *t)
{
	struct uprobe_ctx *ctx = arg;
	struct uproc *up = up_proc_data(up_task_proc(t));

	bool last = true;

	if (!up || up->mm_owner)
		return;
	for (struct up_task *x = up_proc_first_task(up->p); x && last; x = up_proc_next_task(x))
		last = x == t;
	/* the process's last thread: what its records need of the process (its maps,
	   its ids) goes with it, so they are handed out first, as always */
	if (ctx->opts.on_thread_exit && !last)
		ctx->opts.on_thread_exit(ctx->opts.arg, up->pid, up_task_tid(t));
	up_sites_exiting(&up->sites, t, ctx->opts.on_thread_exit && !last);
}

static bool cb_is_breakpoint(void *arg, struct up_task *t, uint64_t addr)
{
	struct uproc *up = up_proc_data(up_task_proc(t));
	struct uproc *mm;

	(void)arg;
	if (!up)
		return false;
	mm = mm_of(up);
	return (mm->tramp && addr == mm->tramp) || ppt_lookup(mm, addr);
}

/*
 * t's signal goes as it is (what cb_stop does with a signal that is no fault, of a
 * thread with no step under way and rip in no slot of ours; on_breakpoint with a trap
 * at an int3 of the program's own, still there, in nothing of ours): the quiesce may
 * deliver it at once.
 */
static bool cb_may_deliver(void *arg, struct up_task *t, const siginfo_t *info)
{
	struct uproc *up = up_proc_data(up_task_proc(t));
	struct utask *ut = up_task_data(t);
	struct up_stop stop = { .kind = UP_STOP_SIGNAL, .sig = info->si_signo, .info = *info };
	bool trap = stop.sig == SIGTRAP && info->si_code > 0;
	struct user_regs_struct r;
	struct uproc *mm;
	uint8_t b;

	(void)arg;
	if (is_fault(&stop) || (trap && info->si_code != SI_KERNEL))
		return false;
	if (!up)
		return true; /* nothing of ours in the process yet */
	if ((ut && (ut->state != UT_NONE || ut->ndelayed)) || (up->releasing && trap) ||
	    up_task_get_regs(t, &r))
		return false;
	mm = mm_of(up);
	if (trap && ((mm->tramp && r.rip - 1 == mm->tramp) || ppt_lookup(mm, r.rip - 1) ||
		     up_site_written_orig(&mm->sites, r.rip - 1) >= 0 ||
		     up_xol_ours(&mm->sites.xol, r.rip - 1) || up_proc_read(up->p, r.rip - 1, &b, 1) ||
		     b != UP_BKPT_INSN))
		return false;
	return !ppt_by_slot(mm, r.rip);
}

/* A remote call on t: the safety net told how to put it back if we die meanwhile. */
static void cb_remote_note(void *arg, struct up_task *t, uint64_t lo, uint64_t hi,
			   const struct user_regs_struct *back, uint64_t mask)
{
	struct uproc *up = up_proc_data(up_task_proc(t));

	(void)arg;
	if (up)
		up_site_net_remote(&mm_of(up)->sites, up_task_tid(t), lo, hi, back, mask);
}

static const struct up_task_ops ops = {
	.is_breakpoint = cb_is_breakpoint,
	.remote_note = cb_remote_note,
	.may_deliver = cb_may_deliver,
	.on_exiting = cb_exiting,
	.on_stop = cb_stop,
	.on_fork = cb_fork,
	.on_exec = cb_exec,
	.on_thread_exit = cb_thread_exit,
	.on_thread_new = cb_thread_new,
	.on_proc_exit = cb_proc_exit,
	.log = cb_log,
};

/* ---- the context --------------------------------------------------------------------- */

int uprobe_ctx_new(const struct uprobe_ctx_opts *opts, struct uprobe_ctx **out)
{
	struct uprobe_ctx *ctx = calloc(1, sizeof(*ctx));
	int rc;

	if (!ctx)
		return -ENOMEM;
	if (opts)
		ctx->opts = *opts;
	up_site_ctx_init(&ctx->sites, &ctx->opts, &ctx->stats);
	rc = up_engine_new(&ops, ctx, &ctx->eng);
	if (rc) {
		free(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

#define TEARDOWN_RUN_MS 2	      /* how long they run between the first two looks */
#define TEARDOWN_RUN_MAX 64	      /* ... doubled each time up to this: on a loaded host a
					 thread let go may not get a cpu for a while */

/*
 * What we mapped in up's process goes (process quiesced, no int3 or jmp of ours
 * left): at once where no thread can be in it, else the threads run a little, stopped
 * again, and it is looked at again, for up to TEARDOWN_NS; then what is left stays,
 * with a line saying how much and why.  Meanwhile up is releasing: its stops are passed
 * on as they are (cb_stop), a fork child let go, an exec or exit ends the wait.
 * 0 (quiesced again), or -ESRCH: the process is gone (up freed if it exited).
 */
static int teardown(struct uprobe_ctx *ctx, struct uproc *up)
{
	uint64_t t0 = up_mono_ns();
	int rc = 0, run_ms = TEARDOWN_RUN_MS;

	for (;;) {
		bool last = up_mono_ns() - t0 >= TEARDOWN_NS;
		struct pollfd pfd = { .fd = up_engine_fd(ctx->eng), .events = POLLIN };

		if (!up_sites_teardown(&up->sites, idle_task(up), last)) {
			up->tramp = 0; /* it was in the XOL area */
			break;
		}
		if (last)
			break;
		up->releasing = true;
		ctx->releasing = up;
		up_proc_unquiesce(up->p);
		poll(&pfd, 1, run_ms);
		run_ms = run_ms < TEARDOWN_RUN_MAX ? 2 * run_ms : run_ms;
		up_engine_dispatch(ctx->eng);
		if (ctx->releasing != up)
			return -ESRCH; /* it exited: up is freed */
		rc = up_proc_quiesce(up->p);
		if (rc == -EAGAIN && !up_proc_settle(up->p) && ctx->releasing == up)
			rc = up_proc_quiesce(up->p); /* the exec took our mappings with it */
		if (ctx->releasing != up)
			return -ESRCH;
		if (rc)
			break;
	}
	up->releasing = false;
	ctx->releasing = NULL;
	return rc ? -ESRCH : 0;
}

/* Everything of ours out of the process, threads moved home, then let go (still
   quiesced).  -ENOENT: the process exited meanwhile, up and its up_proc are freed. */
static int release(struct uprobe_ctx *ctx, struct uproc *up)
{
	struct uproc *mm = mm_of(up);
	struct up_proc *p = up->p;
	struct up_task *t;
	int rc = up_proc_quiesce(p);

	if (rc)
		return rc;
	for (t = up_proc_first_task(up->p); t; t = up_proc_next_task(t)) {
		struct utask *ut = up_task_data(t);
		struct user_regs_struct r;
		struct ppt *q;

		if (up_task_get_regs(t, &r))
			continue;
		q = ut && ut->ppt ? ut->ppt : ppt_by_slot(mm, r.rip);
		if (q && ut && ut->state == UT_INLINE)
			end_inline(up, q);
		if (slot_home(q, ut, &r))
			up_task_set_regs(t, &r);
		if (ut) {
			if (ut->ndelayed)
				deliver_delayed(t, ut);
			if (mm->tramp)
				unhijack(p, mm->tramp, word_size(up), ut);
			if (mm->tramp && (r.rip == mm->tramp || r.rip == mm->tramp + 1) && ut->nrs) {
				/* about to return through the trampoline, or just did */
				r.rip = ut->rs[ut->nrs - 1].orig;
				up_task_set_regs(t, &r);
			}
			ut->nrs = 0;
			ut->state = UT_NONE;
			ut->ppt = NULL;
		}
	}
	if (!up->mm_owner) {
		for (unsigned i = 0; i < PPT_HASH; i++) {
			for (struct ppt *q = up->hash[i]; q; q = q->next) {
				for (unsigned c = 0; c < q->ncons; c++)
					if (q->cons[c]->pid == up->pid)
						q->cons[c]->kimg = NULL;
				up_site_int3_remove(&up->sites, &q->site, NULL);
			}
		}
		/* no int3 of ours is left: the teardown puts the program's own SIGTRAP
		   disposition back before it unmaps the net (up_sites_teardown) */
		up_sites_detach(&up->sites);
		rc = teardown(ctx, up);
		if (rc && ctx->releasing == up) {
			/* gone, not yet reaped: as below, and the caller's detach finds it so */
			up->releasing = false;
			ctx->releasing = NULL;
		} else if (rc) {
			return -ENOENT;
		}
		forget_all(up);
	}
	uproc_unlink(ctx, up);
	uproc_free(up);
	/*
	 * Still quiesced: the detach that follows lets the threads go from exactly the
	 * state set here.  Resuming them in between would let a thread trap on a byte
	 * about to be restored, or run from a rip moved home, before the detach sees it.
	 */
	return 0;
}

void uprobe_ctx_free(struct uprobe_ctx *ctx)
{
	if (!ctx)
		return;
	while (ctx->procs)
		if (uprobe_detach(ctx, ctx->procs->pid))
			break;
	up_engine_free(ctx->eng);
	up_site_ctx_fini(&ctx->sites);
	free(ctx->queue);
	free(ctx);
}

int uprobe_attach(struct uprobe_ctx *ctx, pid_t pid)
{
	struct up_proc *p;
	int rc;

	if (uproc_of_pid(ctx, pid))
		return -EALREADY;
	rc = up_engine_attach(ctx->eng, pid, &p);
	if (rc)
		return rc;
	if (!uproc_new(ctx, p)) {
		up_proc_detach(p);
		return -ENOMEM;
	}
	return 0;
}

int uprobe_spawn(struct uprobe_ctx *ctx, char *const argv[], pid_t *pid)
{
	struct up_proc *p;
	int rc = up_engine_spawn(ctx->eng, argv, &p);

	if (rc)
		return rc;
	if (!uproc_new(ctx, p)) {
		up_proc_detach(p);
		return -ENOMEM;
	}
	if (pid)
		*pid = up_proc_pid(p);
	warn_setid(ctx, up_proc_pid(p));
	return 0;
}

int uprobe_resume(struct uprobe_ctx *ctx, pid_t pid)
{
	struct uproc *up = uproc_of_pid(ctx, pid);

	return up ? up_proc_resume(up->p) : -ESRCH;
}

/* The per-thread state goes before the engine frees the threads. */
static void free_utasks(struct up_proc *p)
{
	for (struct up_task *t = up_proc_first_task(p); t; t = up_proc_next_task(t)) {
		struct utask *ut = up_task_data(t);

		if (ut) {
			free(ut->rs);
			free(ut);
			up_task_set_data(t, NULL);
		}
	}
}

int uprobe_reaped_status(pid_t pid, int *status)
{
	return status ? up_engine_reaped(pid, status) : -EINVAL;
}

int uprobe_detach(struct uprobe_ctx *ctx, pid_t pid)
{
	struct uproc *up = uproc_of_pid(ctx, pid);
	struct up_proc *p;
	int rc;

	if (!up)
		return -ESRCH;
	p = up->p;
	rc = release(ctx, up);
	if (rc == -ENOENT)
		return 0; /* it exited while its threads ran out of our code */
	if (rc) {
		/* it is gone already */
		uproc_unlink(ctx, up);
		if (!up->mm_owner)
			forget_all(up);
		uproc_free(up);
	}
	free_utasks(p);
	return up_proc_detach(p);
}

pid_t uprobe_current_tid(struct uprobe_ctx *ctx)
{
	return ctx->in_handler ? ctx->cur_tid : 0;
}

pid_t uprobe_current_pid(struct uprobe_ctx *ctx)
{
	return ctx->in_handler ? ctx->cur_pid : 0;
}

int uprobe_read(struct uprobe_ctx *ctx, pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct uproc *up = uproc_of_pid(ctx, pid);

	return up ? up_proc_read(up->p, addr, buf, len) : -ESRCH;
}

int uprobe_write(struct uprobe_ctx *ctx, pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct uproc *up = uproc_of_pid(ctx, pid);

	return up ? up_proc_write(up->p, addr, buf, len) : -ESRCH;
}

int uprobe_ctx_fd(struct uprobe_ctx *ctx)
{
	return up_engine_fd(ctx->eng);
}

int uprobe_ctx_set_wait_hook(struct uprobe_ctx *ctx, void (*hook)(void *arg, int fd), void *arg)
{
	return up_engine_set_wait_hook(ctx->eng, hook, arg);
}

int uprobe_ctx_dispatch(struct uprobe_ctx *ctx)
{
	int n = up_engine_dispatch(ctx->eng);

	up_site_drain_all(&ctx->sites);
	idle_retry(ctx);
	return n;
}

int uprobe_current_duration(struct uprobe_ctx *ctx, uint64_t *ns)
{
	if (!ctx->in_return)
		return -ENOENT;
	*ns = ctx->ret_ns;
	return 0;
}

int uprobe_stacks_sync(struct uprobe_ctx *ctx, pid_t pid)
{
	struct uproc *up = uproc_of_pid(ctx, pid);

	return up ? up_site_unwind_sync(&mm_of(up)->sites) : -ESRCH;
}

int uprobe_comm_changed(struct uprobe_ctx *ctx, pid_t pid)
{
	struct uproc *up = uproc_of_pid(ctx, pid);

	if (!up)
		return -ESRCH;
	up_site_comm_changed(&mm_of(up)->sites);
	return 0;
}

int uprobe_current_return(struct uprobe_ctx *ctx, uint64_t slot, uint64_t value, uint64_t *ret)
{
	struct uproc *up = ctx->in_handler ? uproc_of_pid(ctx, ctx->cur_pid) : NULL;
	struct utask *ut = ctx->cur_task ? utask_of(ctx->cur_task) : NULL;

	if (!up || !ut)
		return -ENOENT;
	/* a fast-path return probe's: the agent's tables say */
	if (!up_site_agent_return(&mm_of(up)->sites, slot, value, ret))
		return 0;
	if (!mm_of(up)->tramp || value != mm_of(up)->tramp)
		return -ENOENT;
	for (unsigned i = ut->nrs; i--;)
		if (ut->rs[i].sp == slot) {
			*ret = ut->rs[i].orig;
			return 0;
		}
	return -ENOENT;
}

int uprobe_ctx_timeout(struct uprobe_ctx *ctx)
{
	return up_site_any_agent(&ctx->sites) ? up_site_drain_ms(&ctx->sites) : -1;
}

int uprobe_ctx_run(struct uprobe_ctx *ctx, volatile int *stop)
{
	ctx->brk = false;
	if (!up_site_any_agent(&ctx->sites))
		return up_engine_run(ctx->eng, stop);
	/* records arrive without a stop: wake up to read them */
	for (;;) {
		struct pollfd pfd = { .fd = up_engine_fd(ctx->eng), .events = POLLIN };

		/* a handler's break first: what it left to do (say, format a trap-path hit)
		   comes before records made after it */
		if (ctx->brk || (stop && *stop))
			return -EINTR;
		up_site_drain_all(&ctx->sites);
		if (ctx->brk || (stop && *stop))
			return -EINTR;
		if (!up_engine_nprocs(ctx->eng))
			return 0;
		if (pfd.fd < 0)
			return pfd.fd;
		if (poll(&pfd, 1, up_site_drain_ms(&ctx->sites)) < 0 && errno != EINTR)
			return -errno;
		up_engine_dispatch(ctx->eng);
		if (!up_site_any_agent(&ctx->sites)) {
			up_site_drain_all(&ctx->sites);
			if (ctx->brk || (stop && *stop))
				return -EINTR;
			return up_engine_run(ctx->eng, stop);
		}
	}
}

void uprobe_ctx_finish(struct uprobe_ctx *ctx)
{
	up_site_finish(&ctx->sites);
}

void uprobe_ctx_break(struct uprobe_ctx *ctx)
{
	ctx->brk = true;
	up_engine_break(ctx->eng);
}

void uprobe_ctx_stats(struct uprobe_ctx *ctx, struct uprobe_stats *st)
{
	*st = ctx->stats;
}

/* ---- what the probe-site layer counts ------------------------------------------------ */

/* The sites of u's process (its memory's), NULL when it is gone. */
static struct up_sites *sites_of(struct uprobe_ctx *ctx, const struct uprobe *u)
{
	struct uproc *up = uproc_of_pid(ctx, u->pid);

	return up ? &mm_of(up)->sites : NULL;
}

int uprobe_count(struct uprobe_ctx *ctx, const struct uprobe *u, uint64_t *hits)
{
	*hits = u->nhits;
	if (u->kimg && u->kind == UP_KIND_PATCHED)
		*hits += up_site_hits(sites_of(ctx, u), u);
	return 0;
}

int uprobe_set_enabled(struct uprobe_ctx *ctx, struct uprobe *u, bool on)
{
	if (u->kimg && u->kind == UP_KIND_PATCHED)
		up_site_set_enabled(sites_of(ctx, u), u, on);
	return 0;
}

int uprobe_lost(struct uprobe_ctx *ctx, const struct uprobe *u, uint64_t *lost)
{
	*lost = u->nlost;
	if (u->kimg && u->kind == UP_KIND_PATCHED)
		*lost += up_site_lost(sites_of(ctx, u), u);
	return 0;
}

int uprobe_agg_read(struct uprobe_ctx *ctx, const struct uprobe *u,
		    void (*fn)(void *arg, const struct uprobe_agg_entry *e), void *arg)
{
	if (u->kimg && u->kind == UP_KIND_PATCHED)
		up_site_agg_read(sites_of(ctx, u), u, fn, arg);
	return 0;
}
