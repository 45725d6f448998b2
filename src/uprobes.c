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

#include "agent/patch.h"
#include "arch/x86/insn.h"
#include "task/task.h"
#include "agent/ring.h"
#include "ubp.h"
#include "xol.h"

#define PPT_HASH 4096
#define KIND_PPT 0
#define KIND_FAST 1
#define FAST_SLOTS 2 /* 128 bytes of trampoline */
#define FAST_SLOTS_REC 6 /* 384 bytes of a recording trampoline */
#define MAX_DELAYED 8

struct ppt {
	struct ppt *next; /* hash chain, or the zombie list */
	uint64_t vaddr;
	struct uprobe **cons;
	unsigned ncons, cap;
	struct up_ubp bp;
	struct up_reloc rel;
	uint64_t slot; /* 0: none */
	enum uprobe_plan plan;
	unsigned users; /* threads executing it out of line */
	bool dead;	/* unregistered, kept for its users */
};

struct uproc {
	struct uproc *next;
	struct uprobe_ctx *ctx;
	struct up_proc *p;
	pid_t pid;
	struct uproc *mm_owner; /* a vfork child: the parent whose memory it shares */
	bool handlers;		/* hits here run the consumers' handlers */
	struct ppt *hash[PPT_HASH];
	struct ppt *zombies;
	struct up_xol xol;
	uint64_t tramp; /* return probes: an int3 in the XOL area, 0: none yet */
	struct fastp *fast;    /* fast-path patches */
	uint64_t counters;     /* their counters' page in the process, 0: none yet */
	unsigned ncounters;
	bool fast_used;	       /* trampolines were live: the XOL area outlives a detach */
	struct up_agent *agent; /* the recording probes' shared ring, NULL: none yet */
	struct fastp **recp;	/* by record id: the site, NULL once gone */
	uint32_t nrecp;
	bool draining;
	/* every address we ever wrote an int3 at, with the byte it replaced: a last line
	   of defence should one be left behind (a hit with no probepoint and an int3 that
	   the program never had there is ours) */
	struct { uint64_t vaddr; uint8_t orig; } *written;
	unsigned nwritten, capwritten;
};

/* A fast-path site: the jmp over the instruction, its trampoline, its counter. */
struct fastp {
	struct fastp *next;
	struct up_patch_site site;
	struct uprobe *u;
	uint64_t tramp, counter;
	unsigned nslots; /* of the trampoline, 0 once given back */
	unsigned home_of[UP_PATCH_MAX_INSN];
	uint64_t last; /* the counter as last read */
	bool patched;
	bool shared; /* the counter is in the agent's region: readable after exec and exit */
	/* a recording site: its descriptor in the shared region, its record id */
	bool rec;
	uint64_t desc;
	uint32_t id;
	uint64_t regs;	 /* the frame words its records carry */
	uint64_t nrec;	 /* records delivered */
};

enum ut_state {
	UT_NONE,
	UT_STEP,   /* single-stepping a probepoint's instruction in its slot */
	UT_DRAIN,  /* stepping out of a slot to deliver a signal that arrived there */
	UT_INLINE, /* single-stepping the original in place, the process quiesced */
};

/* A hijacked return: where it really goes, and where that address sits on the stack. */
struct rinst {
	uint64_t orig, sp;
	struct uprobe *u; /* NULL once unregistered */
};

#define MAX_RINST 256 /* return instances per thread: deeper recursion is not followed */

struct utask {
	enum ut_state state;
	struct ppt *ppt;
	struct up_reloc_step st;
	siginfo_t delayed[MAX_DELAYED];
	unsigned ndelayed;
	struct rinst *rs; /* the return stack, innermost last */
	unsigned nrs, caprs;
};

struct pending_op {
	struct uprobe *u;
	int reg;
};

struct uprobe_ctx {
	struct uprobe_ctx_opts opts;
	struct up_engine *eng;
	struct uproc *procs;
	struct up_ubp_files files;
	struct uprobe_stats stats;
	bool in_handler;
	bool brk; /* uprobe_ctx_break */
	pid_t cur_tid, cur_pid;
	struct up_task *cur_task; /* the thread whose stop is being handled */
	struct pending_op *queue;
	unsigned nqueue, capqueue;
};

static void fast_forget(struct uproc *mm);
static void agent_drain(struct uproc *mm);
static void free_utasks(struct up_proc *p);

/* ---- small helpers ----------------------------------------------------------------- */

static void logf_(struct uprobe_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

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
	if (!up_xol_contains(&mm->xol, addr))
		return NULL;
	for (unsigned i = 0; i < PPT_HASH; i++)
		for (struct ppt *q = mm->hash[i]; q; q = q->next)
			if (q->slot && addr >= q->slot && addr < q->slot + UP_SLOT_MAX)
				return q;
	for (struct ppt *q = mm->zombies; q; q = q->next)
		if (q->slot && addr >= q->slot && addr < q->slot + UP_SLOT_MAX)
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

static int ensure_slot(struct uproc *mm, struct ppt *q, struct up_task *t)
{
	struct up_reloc rel;
	uint64_t slot;
	int rc;

	if (q->slot)
		return 0;
	if (mm->ctx->opts.no_xol)
		return -ENOTSUP;
	/* the remote mmap runs in a stopped thread: the one at hand, or any that can */
	if (!t && mm->ctx->cur_task && up_proc_data(up_task_proc(mm->ctx->cur_task)) &&
	    mm_of(up_proc_data(up_task_proc(mm->ctx->cur_task))) == mm)
		t = mm->ctx->cur_task;
	rc = -EAGAIN;
	if (t)
		rc = up_xol_alloc(&mm->xol, t, q->vaddr, &slot);
	for (t = up_proc_first_task(mm->p); rc && rc != -ENOMEM && t; t = up_proc_next_task(t)) {
		struct utask *ut = up_task_data(t);

		if (up_task_stopped(t) && (!ut || ut->state == UT_NONE))
			rc = up_xol_alloc(&mm->xol, t, q->vaddr, &slot);
	}
	if (rc)
		return rc;
	rc = up_reloc_build(&q->bp.insn, slot, &rel);
	if (!rc)
		rc = up_xol_write(mm->p, slot, rel.code, rel.len);
	if (rc) {
		up_xol_free(&mm->xol, slot);
		return rc;
	}
	q->rel = rel;
	q->slot = slot;
	return 0;
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
		return insn->zops[0].type == ZYDIS_OPERAND_TYPE_MEMORY;
	default:
		return false;
	}
}

/* mm->written is kept sorted by vaddr: the first index whose vaddr is >= vaddr */
static unsigned written_pos(const struct uproc *mm, uint64_t vaddr)
{
	unsigned lo = 0, hi = mm->nwritten;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (mm->written[mid].vaddr < vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void remember_written(struct uproc *mm, uint64_t vaddr, uint8_t orig)
{
	unsigned i = written_pos(mm, vaddr);

	if (i < mm->nwritten && mm->written[i].vaddr == vaddr)
		return;
	if (mm->nwritten == mm->capwritten) {
		unsigned cap = mm->capwritten ? mm->capwritten * 2 : 64;
		void *w = realloc(mm->written, cap * sizeof(*mm->written));

		if (!w)
			return;
		mm->written = w;
		mm->capwritten = cap;
	}
	memmove(&mm->written[i + 1], &mm->written[i], (mm->nwritten - i) * sizeof(*mm->written));
	mm->written[i].vaddr = vaddr;
	mm->written[i].orig = orig;
	mm->nwritten++;
}

static int written_orig(const struct uproc *mm, uint64_t vaddr)
{
	unsigned i = written_pos(mm, vaddr);

	return i < mm->nwritten && mm->written[i].vaddr == vaddr ? mm->written[i].orig : -1;
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
	rc = up_ubp_prepare(mm->p, &ctx->files, vaddr, &q->bp, msg, sizeof(msg));
	if (rc) {
		logf_(ctx, "process %d: %s", (int)mm->pid, msg[0] ? msg : strerror(-rc));
		free(q);
		return rc;
	}
	switch (q->bp.insn.plan) {
	case UP_PLAN_EMULATE:
		q->plan = UPROBE_PLAN_EMULATE; /* a slot only if emulation ever faults */
		/* what would cost the tracer a memory access runs cheaper, and as exactly,
		   in a slot */
		if (faster_in_slot(&q->bp.insn) && !ensure_slot(mm, q, NULL) && !q->rel.step)
			q->plan = UPROBE_PLAN_XOL;
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
			q->plan = q->rel.step ? UPROBE_PLAN_STEP : UPROBE_PLAN_XOL;
		}
		break;
	case UP_PLAN_REJECT:
		free(q);
		return -ENOTSUP;
	}
	rc = up_ubp_insert(mm->p, &q->bp);
	if (rc) {
		logf_(ctx, "process %d: cannot write the breakpoint at 0x%" PRIx64 ": %s",
		      (int)mm->pid, vaddr, strerror(-rc));
		if (q->slot)
			up_xol_free(&mm->xol, q->slot);
		free(q);
		return rc;
	}
	remember_written(mm, vaddr, q->bp.orig);
	q->next = mm->hash[hash_of(vaddr)];
	mm->hash[hash_of(vaddr)] = q;
	*out = q;
	return 0;
}

/* Takes the int3 out; the probepoint waits as a zombie for its users and slot. */
static void ppt_retire(struct uproc *mm, struct ppt *q)
{
	if (q->bp.inserted)
		up_ubp_remove(mm->p, &q->bp);
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
			if (r.rip >= q->slot && r.rip < q->slot + UP_SLOT_MAX)
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

		if (q->users || (q->slot && rip_in_slot(mm, q))) {
			pp = &q->next;
			continue;
		}
		*pp = q->next;
		if (q->slot)
			up_xol_free(&mm->xol, q->slot);
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
	agent_drain(mm);
	fast_forget(mm);
	up_agent_free(mm->agent);
	mm->agent = NULL;
	free(mm->recp);
	mm->recp = NULL;
	mm->nrecp = 0;
	up_xol_drop(&mm->xol);
	mm->tramp = 0;
	free(mm->written);
	mm->written = NULL;
	mm->nwritten = mm->capwritten = 0;
}

/* ---- the fast path ------------------------------------------------------------------ */

static int read_counter(struct uproc *mm, struct fastp *f, struct up_task *t, uint64_t *v)
{
	int rc;

	if (f->rec) {
		uint64_t filtered = 0, lost = 0;

		if (mm->agent)
			up_agent_probe_counts(mm->agent, f->desc, &filtered, &lost);
		*v = f->nrec + filtered + lost;
		f->last = *v;
		return 0;
	}
	if (f->shared) {
		*v = mm->agent ? up_agent_read(mm->agent, f->counter) : f->last;
		f->last = *v;
		return 0;
	}
	rc = t ? up_task_read(t, f->counter, v, sizeof(*v))
	       : up_proc_read(mm->p, f->counter, v, sizeof(*v));
	if (!rc)
		f->last = *v;
	return rc;
}

static struct fastp *fast_overlapping(struct uproc *mm, uint64_t lo, uint64_t hi)
{
	for (struct fastp *f = mm->fast; f; f = f->next)
		if (lo < f->site.vaddr + f->site.len && f->site.vaddr < hi)
			return f;
	return NULL;
}

static bool any_rip_in(struct uproc *mm, uint64_t lo, uint64_t hi)
{
	for (struct uproc *up = mm->ctx->procs; up; up = up->next) {
		if (mm_of(up) != mm)
			continue;
		for (struct up_task *t = up_proc_first_task(up->p); t; t = up_proc_next_task(t)) {
			struct user_regs_struct r;

			if (!up_task_stopped(t) || up_task_get_regs(t, &r))
				return true;
			if (r.rip > lo && r.rip < hi)
				return true;
		}
	}
	return false;
}

#define STACK_SCAN (16u << 10)

/*
 * Does a word on any thread's stack point into (lo, hi)?  A thread interrupted there
 * by a signal would return into the middle of the jmp.  Calls are never covered, so no
 * return address can: any such word is a saved context, or a coincidence (then the
 * probe only stays on the trap path).  The top STACK_SCAN bytes above rsp are read.
 */
static bool stack_points_in(struct uproc *mm, uint64_t lo, uint64_t hi)
{
	uint64_t *buf = malloc(STACK_SCAN);
	bool found = false;

	if (!buf)
		return true;
	for (struct uproc *up = mm->ctx->procs; up && !found; up = up->next) {
		if (mm_of(up) != mm)
			continue;
		for (struct up_task *t = up_proc_first_task(up->p); t && !found;
		     t = up_proc_next_task(t)) {
			struct user_regs_struct r;
			size_t n = 0;

			if (up_task_get_regs(t, &r)) {
				found = true;
				break;
			}
			/* page by page: the stack ends somewhere above */
			for (uint64_t a = r.rsp & ~7ull; n < STACK_SCAN;) {
				size_t chunk = 4096 - (size_t)(a & 4095);

				if (chunk > STACK_SCAN - n)
					chunk = STACK_SCAN - n;
				if (up_task_read(t, a, (uint8_t *)buf + n, chunk))
					break;
				n += chunk;
				a += chunk;
			}
			for (size_t i = 0; i < n / 8; i++)
				if (buf[i] > lo && buf[i] < hi)
					found = true;
		}
	}
	free(buf);
	return found;
}

/* The agent's name for thread t: the word at its TLS block (%fs:0), or its tid when
   it has none (then every thread is named by gettid, a syscall per record). */
static void agent_name_thread(struct uproc *mm, struct up_task *t)
{
	struct user_regs_struct r;
	struct up_map m;
	uint64_t key = 0;

	if (!mm->agent || up_task_get_regs(t, &r))
		return;
	if (!up_proc_find_map(up_task_proc(t), r.rsp, &m)) {
		/* the main thread's stack grows down as it goes */
		uint64_t lo = !strcmp(m.path, "[stack]") && m.start > (64u << 20) ? m.start - (64u << 20)
									      : m.start;

		up_agent_stack(mm->agent, lo, m.end, up_task_tid(t));
	}
	if (!r.fs_base || up_task_read(t, r.fs_base, &key, sizeof(key)) || !key) {
		up_agent_no_fs0(mm->agent);
		return;
	}
	up_agent_thread(mm->agent, key, up_task_tid(t));
}

/* A seccomp filter may forbid the agent's syscalls (or kill the program for them). */
static bool under_seccomp(pid_t pid)
{
	char path[64], line[128];
	bool on = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Seccomp:", 8))
			on = atoi(line + 8) != 0;
	fclose(f);
	return on;
}

static int agent_ensure(struct uproc *mm, struct up_task *t, char *why, size_t whylen)
{
	uint64_t scratch;
	int rc;

	if (mm->agent)
		return 0;
	if (under_seccomp(mm->pid)) {
		snprintf(why, whylen, "the process runs under seccomp: the agent's reads "
				      "are syscalls it may forbid");
		return -ENOTSUP;
	}
	rc = up_xol_alloc(&mm->xol, t, 0x10000, &scratch);
	if (rc) {
		snprintf(why, whylen, "no XOL slot (%s)", strerror(-rc));
		return rc;
	}
	rc = up_agent_new(t, scratch, mm->ctx->opts.ring_bytes, &mm->agent, why, whylen);
	up_xol_free(&mm->xol, scratch);
	if (rc)
		return rc;
	for (struct uproc *up = mm->ctx->procs; up; up = up->next)
		if (mm_of(up) == mm)
			for (struct up_task *x = up_proc_first_task(up->p); x;
			     x = up_proc_next_task(x))
				agent_name_thread(mm, x);
	return 0;
}

/* The frame words the agent can see: the general registers, rip, rsp and flags. */
static bool word_in_process(unsigned w)
{
	return w <= UPA_RDI || w == UPA_RIP || w == UPA_RSP || w == UPA_EFLAGS;
}

static const char *word_name(unsigned w)
{
	static const char *const n[UPA_NREGS] = {
		"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax", "cx",
		"dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss", "fs_base",
		"gs_base", "ds", "es", "fs", "gs",
	};
	return w < UPA_NREGS ? n[w] : "?";
}

/* u's capture as the agent's descriptor; *save: the frame words the trampoline fills. */
static int build_desc(struct uprobe *u, struct upa_probe *d, struct upa_fetch *f,
		      struct upa_cond *c, uint64_t *save, char *why, size_t whylen)
{
	const struct uprobe_capture *cap = u->capture;

	memset(d, 0, sizeof(*d));
	d->flags = UPA_P_ENABLED;
	d->vaddr = u->vaddr;
	d->regs = cap->regs | 1ull << UPA_RIP;
	d->nfetch = cap->nfetch;
	d->ncond = cap->ncond;
	*save = d->regs;
	for (unsigned w = 0; w < UPA_NREGS; w++) {
		if ((d->regs >> w & 1) && !word_in_process(w)) {
			snprintf(why, whylen, "register %%%s is not available in-process",
				 word_name(w));
			return -ENOTSUP;
		}
	}
	for (unsigned i = 0; i < cap->nfetch; i++) {
		const struct uprobe_fetch *in = &cap->fetch[i];
		struct upa_fetch *o = &f[i];

		memset(o, 0, sizeof(*o));
		o->base = in->base == UPROBE_FETCH_REG ? UPA_BASE_REG : UPA_BASE_IMM;
		o->imm = in->imm;
		if (in->base == UPROBE_FETCH_REG) {
			unsigned w = in->reg / 8;

			if (in->reg % 8 || w >= UPA_NREGS || !word_in_process(w)) {
				snprintf(why, whylen, "register %%%s is not available in-process",
					 word_name(w));
				return -ENOTSUP;
			}
			if (w == UPA_RIP) { /* the probed address itself */
				o->base = UPA_BASE_IMM;
				o->imm = (int64_t)u->vaddr;
			}
			o->reg = (uint8_t)w;
			o->reg_size = (uint8_t)(in->reg_size ? in->reg_size : 8);
			o->reg_shift = (uint8_t)in->reg_shift;
			*save |= 1ull << w;
		}
		if (in->nsteps > UPA_STEPS) {
			snprintf(why, whylen, "too many dereferences");
			return -ENOTSUP;
		}
		o->nsteps = (uint8_t)in->nsteps;
		for (unsigned k = 0; k < in->nsteps; k++) {
			o->step[k].off = in->step[k].off;
			o->step[k].len = in->step[k].len ? in->step[k].len : 8;
		}
		o->final = in->final == UPROBE_FETCH_STRING  ? UPA_FINAL_STRING
			   : in->final == UPROBE_FETCH_BYTES ? UPA_FINAL_BYTES
							     : UPA_FINAL_NONE;
		o->final_off = in->final_off;
		o->final_len = in->final_len;
		o->size = (uint8_t)(in->size ? in->size : 8);
		o->is_signed = in->is_signed;
		o->bf_width = (uint8_t)in->bf_width;
		o->bf_offset = (uint8_t)in->bf_offset;
	}
	for (unsigned i = 0; i < cap->ncond; i++) {
		if (cap->cond[i].fetch >= cap->nfetch)
			return -EINVAL;
		c[i].fetch = cap->cond[i].fetch;
		c[i].op = (uint32_t)cap->cond[i].op;
		c[i].value = cap->cond[i].value;
	}
	return 0;
}

static int rec_slot(struct uproc *mm, struct fastp *f)
{
	if (f->id >= mm->nrecp) {
		uint32_t n = mm->nrecp ? mm->nrecp : 64;
		struct fastp **r;

		while (n <= f->id)
			n *= 2;
		r = realloc(mm->recp, n * sizeof(*r));
		if (!r)
			return -ENOMEM;
		memset(r + mm->nrecp, 0, (n - mm->nrecp) * sizeof(*r));
		mm->recp = r;
		mm->nrecp = n;
	}
	mm->recp[f->id] = f;
	return 0;
}

/* A recording site's descriptor and trampoline code. */
static int fast_rec_code(struct uproc *mm, struct up_task *t, struct fastp *f, uint8_t *code,
			 size_t size, size_t *len, char *why, size_t whylen)
{
	struct uprobe *u = f->u;
	unsigned nf = u->capture->nfetch, nc = u->capture->ncond;
	struct upa_fetch *fe = calloc(nf ? nf : 1, sizeof(*fe));
	struct upa_cond *co = calloc(nc ? nc : 1, sizeof(*co));
	struct upa_probe d;
	uint64_t save = 0;
	int rc = -ENOMEM;

	if (!fe || !co)
		goto out;
	rc = build_desc(u, &d, fe, co, &save, why, whylen);
	if (rc)
		goto out;
	if (u->ret_handler) {
		/* the entry hijacks the return; the trampoline the agent returns through
		   saves every register, so the record can take any */
		d.flags |= UPA_P_RETURN;
	}
	rc = agent_ensure(mm, t, why, whylen);
	if (rc)
		goto out;
	rc = up_agent_probe_add(mm->agent, &d, fe, co, &f->desc, &f->id);
	if (rc) {
		snprintf(why, whylen, rc == -E2BIG ? "a record would not fit the ring"
						   : "no room for its descriptor (%s)",
			 strerror(-rc));
		goto out;
	}
	f->rec = true;
	f->regs = d.regs;
	save |= 1ull << UPA_RSP; /* the agent names the thread by its stack */
	rc = up_patch_tramp_rec(&f->site, f->tramp, f->desc, up_agent_entry(mm->agent), save, code,
				size, len, f->home_of);
	if (!rc)
		rc = rec_slot(mm, f);
out:
	free(fe);
	free(co);
	return rc;
}

static bool wants_record(const struct uprobe *u)
{
	return u->capture && u->record_handler;
}

/* Tries the fast path for a counting or recording uprobe (process quiesced). */
static int fast_arm(struct uproc *mm, struct uprobe *u, char *why, size_t whylen)
{
	struct uprobe_ctx *ctx = mm->ctx;
	struct fastp *f;
	struct up_task *t = ctx->cur_task ? ctx->cur_task : idle_task(mm);
	uint8_t code[UP_PATCH_TRAMP_REC], jmp[UP_PATCH_MAX_INSN * UP_INSN_MAX];
	bool rec = wants_record(u);
	unsigned nslots = rec ? FAST_SLOTS_REC : FAST_SLOTS;
	size_t len;
	int rc;

	if (!t || ctx->opts.no_xol) {
		snprintf(why, whylen, "no XOL area");
		return -ENOTSUP;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->u = u;
	rc = -ENOTSUP;
	if (fast_overlapping(mm, u->vaddr, u->vaddr + 1)) {
		/* its bytes are a jmp now: the arbiter takes that site back to int3s */
		snprintf(why, whylen, "inside another fast-path site");
		goto fail;
	}
	rc = up_patch_site(mm->p, &ctx->files, u->vaddr, &f->site, why, whylen);
	if (rc)
		goto fail;
	rc = -ENOTSUP;
	for (unsigned i = 0; i < f->site.len; i++) {
		if (ppt_lookup(mm, u->vaddr + i)) {
			snprintf(why, whylen, "another probe at 0x%" PRIx64, u->vaddr + i);
			goto fail;
		}
	}
	if (fast_overlapping(mm, u->vaddr, u->vaddr + f->site.len)) {
		snprintf(why, whylen, "overlaps another fast-path site");
		goto fail;
	}
	if (any_rip_in(mm, u->vaddr, u->vaddr + f->site.len)) {
		snprintf(why, whylen, "a thread is inside the instruction");
		goto fail;
	}
	if (f->site.ninsn > 1 && stack_points_in(mm, u->vaddr, u->vaddr + f->site.len)) {
		snprintf(why, whylen, "a thread's stack holds an address inside the bytes the "
				      "jmp would cover (a signal frame?)");
		goto fail;
	}
	if (!rec) {
		/* a counter in the shared region where the agent can be had: its count
		   survives an exec; else on a page of counters by the XOL area */
		char sub[160];

		f->shared = !agent_ensure(mm, t, sub, sizeof(sub)) &&
			    !up_agent_counter(mm->agent, &f->counter);
	}
	if (!rec && !f->shared && (!mm->counters || mm->ncounters == 4096 / 8)) {
		rc = up_xol_map_data(t, u->vaddr, &mm->counters);
		if (rc) {
			snprintf(why, whylen, "no counter page (%s)", strerror(-rc));
			mm->counters = 0;
			goto fail;
		}
		mm->ncounters = 0;
	}
	rc = up_xol_alloc_n(&mm->xol, t, u->vaddr, nslots, &f->tramp);
	if (rc) {
		snprintf(why, whylen, "no trampoline (%s)", strerror(-rc));
		goto fail;
	}
	if (rec) {
		rc = fast_rec_code(mm, t, f, code, sizeof(code), &len, why, whylen);
		if (rc) {
			up_xol_free_n(&mm->xol, f->tramp, nslots);
			if (rc > -4096 && !why[0])
				snprintf(why, whylen, "cannot build the trampoline (%s)", strerror(-rc));
			rc = -ENOTSUP;
			goto fail;
		}
	} else if (f->shared) {
		rc = up_patch_tramp_abs(&f->site, f->tramp, f->counter, code, sizeof(code), &len,
					f->home_of);
	} else {
		f->counter = mm->counters + 8ull * mm->ncounters;
		rc = up_patch_tramp(&f->site, f->tramp, f->counter, code, sizeof(code), &len,
				    f->home_of);
	}
	if (!rc)
		rc = up_xol_write(mm->p, f->tramp, code, len);
	if (!rc)
		rc = up_patch_jmp(&f->site, f->tramp, jmp);
	if (!rc)
		rc = up_proc_write_text(mm->p, u->vaddr, jmp, f->site.len);
	if (rc) {
		snprintf(why, whylen, "cannot place the trampoline (%s)", strerror(-rc));
		if (f->rec)
			mm->recp[f->id] = NULL;
		up_xol_free_n(&mm->xol, f->tramp, nslots);
		goto fail;
	}
	if (!rec && !f->shared)
		mm->ncounters++;
	f->nslots = nslots;
	mm->fast_used = true;
	f->patched = true;
	f->next = mm->fast;
	mm->fast = f;
	u->kimg = (struct uprobe_kimg *)f;
	u->kind = KIND_FAST;
	ctx->stats.fast_patched++;
	if (ctx->opts.verbose)
		logf_(ctx, "process %d: 0x%" PRIx64 " on the fast path (a jmp to 0x%" PRIx64 ", %s)",
		      (int)mm->pid, u->vaddr, f->tramp, rec ? "recorded in-process" : "counted");
	return 0;
fail:
	free(f);
	return rc < 0 ? rc : -ENOTSUP;
}

/* ---- records ---------------------------------------------------------------------- */

/* What a struct uprobe_record's priv points to: a record of the ring, or a trap-path
   hit, whose memory is the live process's. */
struct rec_priv {
	const struct up_agent_rec *ar; /* NULL: a trap-path hit */
	struct uprobe_ctx *ctx;
	pid_t pid;
};

struct deliver_arg {
	struct uproc *mm;
};

static void deliver(void *arg, const struct up_agent_rec *r)
{
	struct uproc *mm = ((struct deliver_arg *)arg)->mm;
	struct fastp *f = r->id < mm->nrecp ? mm->recp[r->id] : NULL;
	uint64_t words[UPA_NREGS] = { 0 }, regs;
	struct user_regs_struct ur;
	struct uprobe_record rec;
	struct rec_priv rp;
	unsigned k = 0;

	if (!f || !f->u)
		return;
	regs = f->regs;
	for (unsigned w = 0; w < UPA_NREGS && k < r->nregs; w++)
		if (regs >> w & 1)
			words[w] = r->regs[k++];
	memcpy(&ur, words, sizeof(ur));
	if (!r->is_return)
		ur.rip = f->site.vaddr;
	rec.is_return = r->is_return;
	rec.pid = mm->pid;
	rec.tid = r->tid;
	rec.cpu = (int)r->cpu;
	rec.time_ns = r->time_ns;
	rec.regs = &ur;
	rp.ar = r;
	rp.ctx = mm->ctx;
	rp.pid = mm->pid;
	rec.priv = &rp;
	f->nrec++;
	mm->ctx->stats.records++;
	f->u->record_handler(f->u, &rec);
}

struct put_back {
	struct up_proc *p;
	uint64_t tramp;
};

static void put_back_one(void *arg, uint64_t slot, uint64_t orig)
{
	struct put_back *pb = arg;
	uint64_t cur = 0;

	if (!up_proc_read(pb->p, slot, &cur, sizeof(cur)) && cur == pb->tramp)
		up_proc_write(pb->p, slot, &orig, sizeof(orig));
}

/*
 * The returns the agent hijacked go straight home again in p: mm's own process at
 * detach (take: forgotten), or a fork child, whose copy of the stack has them but
 * which has no agent (MADV_DONTFORK).
 */
static void agent_unhijack(struct uproc *mm, struct up_proc *p, bool take)
{
	struct put_back pb = { p, 0 };

	if (!mm->agent)
		return;
	pb.tramp = up_agent_ret_tramp(mm->agent);
	up_agent_for_each_return(mm->agent, take, put_back_one, &pb);
}

static void agent_drain(struct uproc *mm)
{
	struct deliver_arg a = { mm };

	if (!mm->agent || mm->draining)
		return;
	mm->draining = true;
	if (up_agent_drain(mm->agent, deliver, &a) && mm->ctx->opts.on_records)
		mm->ctx->opts.on_records(mm->ctx->opts.arg);
	mm->draining = false;
}

static void drain_all(struct uprobe_ctx *ctx)
{
	for (struct uproc *up = ctx->procs; up; up = up->next)
		if (!up->mm_owner)
			agent_drain(up);
}

static bool any_agent(struct uprobe_ctx *ctx)
{
	for (struct uproc *up = ctx->procs; up; up = up->next)
		if (up->agent)
			return true;
	return false;
}


int uprobe_record_read(const struct uprobe_record *rec, uint64_t addr, void *buf, size_t len)
{
	const struct rec_priv *rp = rec ? rec->priv : NULL;

	if (!rp)
		return -EINVAL;
	if (!rp->ar)
		return uprobe_read(rp->ctx, rp->pid, addr, buf, len);
	return up_agent_rec_read(rp->ar, addr, buf, len);
}

/* A recording probe without a handler hit on the trap path: a record of the live
   registers, its memory read from the process (the thread is stopped meanwhile). */
static void record_trap_hit(struct uproc *up, struct up_task *t, struct uprobe *u,
			    struct user_regs_struct *regs, bool is_return)
{
	struct rec_priv rp = { NULL, up->ctx, up->pid };
	struct timespec ts;
	struct uprobe_record rec = {
		.pid = up->pid,
		.tid = up_task_tid(t),
		.is_return = is_return,
		.cpu = -1,
		.regs = regs,
		.priv = &rp,
	};

	clock_gettime(CLOCK_MONOTONIC, &ts);
	rec.time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	u->record_handler(u, &rec);
}

/* A recording site's counts go into its uprobe (it is leaving the fast path). */
static void rec_settle(struct uproc *mm, struct fastp *f)
{
	uint64_t filtered = 0, lost = 0;

	if (mm->agent)
		up_agent_probe_counts(mm->agent, f->desc, &filtered, &lost);
	f->u->nhits += f->nrec + filtered + lost;
	f->u->nlost += lost;
	mm->ctx->stats.records_lost += lost;
	mm->ctx->stats.records_filtered += filtered;
	f->nrec = 0;
}

/*
 * The trampoline of an unpatched site goes back to the slot allocator when nothing can
 * come back into it: no thread's rip in it, no word on any thread's stack pointing
 * into it (a thread inside the agent has its return address there; a signal handler
 * that interrupted the trampoline has it in its frame).  Else it stays, a few slots.
 */
static void tramp_reclaim(struct uproc *mm, struct fastp *f)
{
	uint64_t lo = f->tramp, hi = f->tramp + 64ull * f->nslots;

	if (!f->nslots || any_rip_in(mm, lo - 1, hi) || stack_points_in(mm, lo - 1, hi))
		return;
	up_xol_free_n(&mm->xol, f->tramp, f->nslots);
	f->nslots = 0;
}

/* Puts the original instruction back (process quiesced); the trampoline stays mapped
   until no thread can be inside it. */
static void fast_unpatch(struct uproc *mm, struct fastp *f)
{
	uint64_t v;

	if (!f->patched)
		return;
	up_proc_write_text(mm->p, f->site.vaddr, f->site.orig, f->site.len);
	f->patched = false;
	tramp_reclaim(mm, f);
	if (f->rec) {
		/* records already written are delivered; a thread still inside the
		   trampoline finishes its record, which nobody reads */
		agent_drain(mm);
		rec_settle(mm, f);
		if (f->id < mm->nrecp)
			mm->recp[f->id] = NULL;
		/* returns still hijacked go home through the agent, unrecorded */
		if (mm->agent)
			up_agent_probe_enable(mm->agent, f->desc, false);
		return;
	}
	if (!read_counter(mm, f, NULL, &v))
		f->u->nhits += v;
	else
		f->u->nhits += f->last;
	f->last = 0;
}

static void fast_unlink(struct uproc *mm, struct fastp *f)
{
	struct fastp **pp = &mm->fast;

	while (*pp && *pp != f)
		pp = &(*pp)->next;
	if (*pp)
		*pp = f->next;
}

/* The process exits: the counts as they stand go into the uprobes. */
static void fast_forget(struct uproc *mm)
{
	while (mm->fast) {
		struct fastp *f = mm->fast;

		mm->fast = f->next;
		if (f->u->kimg == (struct uprobe_kimg *)f && !f->patched) {
			/* unpatched already (its counts are in the uprobe): let it go */
			f->u->kimg = NULL;
			f->u->kind = KIND_PPT;
		}
		if (f->patched && f->u->pid == mm->pid) {
			if (f->rec) {
				rec_settle(mm, f);
			} else {
				uint64_t v = f->last;

				if (f->shared)
					read_counter(mm, f, NULL, &v); /* the region is still ours */
				f->u->nhits += v;
			}
			f->u->kimg = NULL;
			f->u->kind = KIND_PPT;
		}
		if (f->rec && f->id < mm->nrecp)
			mm->recp[f->id] = NULL;
		free(f);
	}
	mm->counters = 0;
	mm->ncounters = 0;
	mm->fast_used = false;
}

/* An int3 probe is wanted inside a fast site: the site goes back to the trap path. */
static int arm(struct uprobe_ctx *ctx, struct uproc *mm, struct uprobe *u);

static void fast_downgrade(struct uproc *mm, struct fastp *f)
{
	struct uprobe *u = f->u;

	if (mm->ctx->opts.verbose)
		logf_(mm->ctx, "process %d: 0x%" PRIx64 " leaves the fast path: another probe "
			       "needs an int3 within its bytes", (int)mm->pid, f->site.vaddr);

	fast_unpatch(mm, f);
	fast_unlink(mm, f);
	free(f);
	u->kimg = NULL;
	u->kind = KIND_PPT;
	u->flags |= UPROBE_F_NO_FAST;
	arm(mm->ctx, mm, u);
}

int uprobe_count(struct uprobe_ctx *ctx, const struct uprobe *u, uint64_t *hits)
{
	uint64_t n = u->nhits;

	if (u->kimg && u->kind == KIND_FAST) {
		struct fastp *f = (struct fastp *)u->kimg;
		struct uproc *up = uproc_of_pid(ctx, u->pid);
		uint64_t v = f->last;

		if (up)
			read_counter(mm_of(up), f, NULL, &v);
		n += v;
	}
	*hits = n;
	return 0;
}

int uprobe_set_enabled(struct uprobe_ctx *ctx, struct uprobe *u, bool on)
{
	struct fastp *f = u->kimg && u->kind == KIND_FAST ? (struct fastp *)u->kimg : NULL;
	struct uproc *up = f && f->rec ? uproc_of_pid(ctx, u->pid) : NULL;

	if (!up || !mm_of(up)->agent)
		return 0;
	agent_drain(mm_of(up)); /* what was recorded while on is delivered as such */
	up_agent_probe_enable(mm_of(up)->agent, f->desc, on);
	return 0;
}

int uprobe_lost(struct uprobe_ctx *ctx, const struct uprobe *u, uint64_t *lost)
{
	uint64_t n = u->nlost;

	if (u->kimg && u->kind == KIND_FAST) {
		struct fastp *f = (struct fastp *)u->kimg;
		struct uproc *up = uproc_of_pid(ctx, u->pid);
		uint64_t filtered = 0, l = 0;

		if (f->rec && up && mm_of(up)->agent)
			up_agent_probe_counts(mm_of(up)->agent, f->desc, &filtered, &l);
		n += l;
	}
	*lost = n;
	return 0;
}

/* ---- registration ------------------------------------------------------------------ */

static int arm(struct uprobe_ctx *ctx, struct uproc *mm, struct uprobe *u)
{
	struct ppt *q = ppt_lookup(mm, u->vaddr);
	struct fastp *f;
	int rc;

	if ((((u->flags & UPROBE_F_COUNT) && !u->handler && !u->ret_handler) ||
	     wants_record(u)) &&
	    !(u->flags & UPROBE_F_NO_FAST) && !q && !mm->mm_owner) {
		char why[160] = "";

		rc = fast_arm(mm, u, why, sizeof(why));
		if (!rc)
			return 0;
		if (rc == -EEXIST)
			return rc;
		ctx->stats.fast_refused++;
		if (ctx->opts.verbose && why[0])
			logf_(ctx, "process %d: 0x%" PRIx64 " stays on the trap path: %s",
			      (int)mm->pid, u->vaddr, why);
	}
	/* an int3 inside a fast site's bytes would break its jmp */
	while ((f = fast_overlapping(mm, u->vaddr, u->vaddr + 1)))
		fast_downgrade(mm, f);
	q = ppt_lookup(mm, u->vaddr); /* the downgrade may have made it */
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
	(void)ctx;
	return 0;
}

static void disarm(struct uprobe_ctx *ctx, struct uprobe *u)
{
	if (u->kimg && u->kind == KIND_FAST) {
		struct uproc *up = uproc_of_pid(ctx, u->pid);
		struct fastp *f = (struct fastp *)u->kimg;

		if (up) {
			fast_unpatch(mm_of(up), f);
			fast_unlink(mm_of(up), f);
		}
		free(f);
		u->kimg = NULL;
		u->kind = KIND_PPT;
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

static int register_batch(struct uprobe_ctx *ctx, struct uprobe **us, size_t n, int reg)
{
	int first = 0;
	size_t i = 0;

	ctx->files.gen++; /* mappings may have changed since the last batch */

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
		if (rc) {
			/* the process is on its way out: its probes go with it */
			if (!reg && us[i]->kimg)
				disarm(ctx, us[i]);
			else if (reg)
				first = first ? first : rc;
			i++;
			continue;
		}
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
		}
		reap_zombies(mm_of(up));
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
	*plan = u->kind == KIND_FAST ? UPROBE_PLAN_FAST : ((struct ppt *)u->kimg)->plan;
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
	if (!q || !q->slot || r->rip < q->slot || r->rip >= q->slot + UP_SLOT_MAX)
		return false;
	if (ut && ut->state == UT_STEP && (q->rel.fixups & UP_FIX_SCRATCH))
		*up_regs_gpr(r, q->rel.scratch) = ut->st.saved_scratch;
	if ((q->rel.fixups & UP_FIX_SYSCALL_RCX) && r->rip >= q->slot + q->rel.insn_len)
		r->rcx = q->bp.insn.vaddr + q->bp.insn.length;
	r->rip = up_reloc_home_rip(&q->bp.insn, &q->rel, q->slot, r->rip);
	return true;
}

static enum up_resume start_inline(struct uproc *up, struct up_task *t, struct utask *ut,
				   struct ppt *q, struct user_regs_struct *regs)
{
	struct uproc *mm = mm_of(up);
	int rc = up_proc_quiesce(up->p);

	if (rc)
		return doom(up->ctx, t, "cannot stop the other threads for an in-place step", rc);
	rc = up_proc_write_text(mm->p, q->vaddr, &q->bp.orig, 1);
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
	up_reloc_step_begin(&q->bp.insn, &q->rel, q->slot, regs, &ut->st);
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

	switch (q->plan) {
	case UPROBE_PLAN_EMULATE:
		if (!up_insn_emulate(&q->bp.insn, regs, mem_fn, up->p)) {
			up_task_set_regs(t, regs);
			ctx->stats.emulated++;
			return UP_RESUME_CONT;
		}
		/* a memory access failed: run it for real, so the program takes the fault */
		if (!ensure_slot(mm, q, t))
			return start_step(up, t, ut, q, regs);
		return start_inline(up, t, ut, q, regs);
	case UPROBE_PLAN_XOL:
		regs->rip = q->slot;
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
	if (mm->ctx->opts.no_xol)
		return -ENOTSUP;
	rc = up_xol_alloc(&mm->xol, t, near, &slot);
	if (rc)
		return rc;
	rc = up_xol_write(mm->p, slot, (const uint8_t[]){ UP_BKPT_INSN }, 1);
	if (rc) {
		up_xol_free(&mm->xol, slot);
		return rc;
	}
	mm->tramp = slot;
	return 0;
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
		if (ut->nrs + want > MAX_RINST ||
		    up_proc_write(up->p, sp, &mm->tramp, w)) {
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
	uint64_t orig = 0;
	unsigned first;
	bool found = false;

	/* frames below this one are gone (longjmp, unwinding, a thread switch of stacks) */
	while (ut->nrs && ut->rs[ut->nrs - 1].sp < slot) {
		ut->nrs--;
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
	agent_drain(mm_of(up));
	ctx->in_handler = true;
	ctx->cur_tid = up_task_tid(t);
	ctx->cur_pid = up->pid;
	for (unsigned i = ut->nrs; i-- > first;) {
		struct uprobe *u = ut->rs[i].u;

		if (u && u->kimg && u->ret_handler) {
			u->ret_handler(u, regs);
			found = true;
		}
		ctx->stats.returns++;
	}
	ctx->in_handler = false;
	ctx->cur_tid = 0;
	ut->nrs = first;
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
		int was = written_orig(mm, bp);

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
		up_task_set_signal(t, SIGTRAP); /* the program's own int3 */
		return UP_RESUME_CONT;
	}
	ctx->stats.hits++;
	regs.rip = bp;
	if (up->handlers) {
		/* a copy: a handler may ask to unregister, which edits the list */
		struct uprobe *cons[64];
		unsigned n = q->ncons < 64 ? q->ncons : 64;

		memcpy(cons, q->cons, n * sizeof(*cons));
		/* what the fast path recorded before this hit goes out before it */
		agent_drain(mm);
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
				record_trap_hit(up, t, cons[i], &regs, false);
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
		if (regs.rip == q->slot)
			return UP_RESUME_STEP;
		rc = up_reloc_step_finish(&q->bp.insn, &q->rel, q->slot, &regs, &ut->st, mem_fn,
					  up->p);
		if (rc) {
			finish(up, t, ut);
			return doom(up->ctx, t, "cannot fix up the stack after a step", rc);
		}
		up_task_set_regs(t, &regs);
		return finish(up, t, ut);
	case UT_DRAIN:
		home = up_reloc_home_rip(&q->bp.insn, &q->rel, q->slot, regs.rip);
		if (home == q->bp.insn.vaddr)
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

	if (!q->slot || a < q->slot || a >= q->slot + UP_SLOT_MAX)
		return;
	info.si_addr = (void *)(uintptr_t)up_reloc_home_rip(&q->bp.insn, &q->rel, q->slot, a);
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
		if (ut->state == UT_STEP && (q->rel.fixups & UP_FIX_SCRATCH))
			*up_regs_gpr(&regs, q->rel.scratch) = ut->st.saved_scratch;
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
		for (struct fastp *f = mm->fast; f && is_fault(stop); f = f->next) {
			uint64_t at = f->tramp + f->home_of[0];

			if (regs.rip >= at && regs.rip < at + UP_INSN_MAX) {
				siginfo_t info = stop->info;
				uint64_t a = (uint64_t)(uintptr_t)info.si_addr;

				regs.rip = f->site.vaddr;
				up_task_set_regs(t, &regs);
				if (a >= at && a < at + UP_INSN_MAX) {
					info.si_addr = (void *)(uintptr_t)f->site.vaddr;
					up_task_set_siginfo(t, &info);
				}
				break;
			}
		}
		return UP_RESUME_CONT; /* nothing of ours: as it is */
	}
	home = up_reloc_home_rip(&q->bp.insn, &q->rel, q->slot, regs.rip);
	if (is_fault(stop) || home != q->bp.insn.vaddr) {
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

	if (!up || !ut)
		return UP_RESUME_CONT;
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
	if (up && mm_of(up)->agent)
		agent_name_thread(mm_of(up), t);
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
			c->bp = q->bp; /* the int3 came along in the copied memory */
			c->plan = q->plan;
			for (unsigned k = 0; k < q->ncons; k++)
				ppt_add_consumer(c, q->cons[k]);
			if (q->slot && ensure_slot(cu, c, NULL))
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
		for (struct fastp *f = pm->fast; f; f = f->next)
			if (f->patched)
				up_proc_write_text(child, f->site.vaddr, f->site.orig, f->site.len);
		child_home(pm, parent_t, child);
		agent_unhijack(pm, child, false);
		/* its copy of the stack has our trampoline in it: the child has no XOL area */
		if (pm->tramp)
			unhijack(child, pm->tramp, word_size(pu), up_task_data(parent_t));
	}
	if (vfork) {
		/* it shares the parent's memory, int3s and slots: keep it until exec/exit */
		cu = uproc_new(ctx, child);
		if (!cu) {
			up_proc_detach(child);
			return;
		}
		cu->mm_owner = pm;
		cu->handlers = ctx->opts.follow_fork;
	} else if (ctx->opts.follow_fork) {
		cu = uproc_new(ctx, child);
		if (!cu) {
			up_proc_detach(child);
			return;
		}
		follow_child(pm, cu);
		/* a followed child counts the fast sites through int3s */
		for (struct fastp *f = pm->fast; f; f = f->next) {
			struct ppt *q;

			if (f->patched && !ppt_create(cu, f->site.vaddr, &q))
				ppt_add_consumer(q, f->u);
		}
	} else {
		/* not ours to probe: take our int3s out of its copy of the text and let it go */
		for (unsigned i = 0; i < PPT_HASH; i++)
			for (struct ppt *q = pm->hash[i]; q; q = q->next)
				if (q->bp.inserted)
					up_proc_write_text(child, q->vaddr, &q->bp.orig, 1);
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
	if (exec_gains_privilege(ctx, up->pid)) {
		pid_t pid = up->pid;

		uproc_unlink(ctx, up);
		if (!up->mm_owner)
			forget_all(up);
		for (struct uproc *c = ctx->procs; c; c = c->next)
			if (c->mm_owner == up)
				c->mm_owner = NULL;
		free(up);
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
			ut->state = UT_NONE;
			ut->ppt = NULL;
			ut->nrs = 0;
		}
	}
	if (up->mm_owner) {
		/* a vfork child with a memory of its own now */
		up->mm_owner = NULL;
		if (!ctx->opts.follow_fork) {
			uproc_unlink(ctx, up);
			free(up);
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
	uproc_unlink(ctx, up);
	if (!up->mm_owner)
		forget_all(up);
	/* vfork children that shared this memory lose their owner */
	for (struct uproc *c = ctx->procs; c; c = c->next)
		if (c->mm_owner == up)
			c->mm_owner = NULL;
	free(up);
	if (ctx->opts.on_exit)
		ctx->opts.on_exit(ctx->opts.arg, pid, status);
}

static void cb_log(void *arg, const char *msg)
{
	struct uprobe_ctx *ctx = arg;

	if (ctx->opts.log)
		ctx->opts.log(ctx->opts.log_arg, msg);
}

/* A thread exits: the fast path's counters read while the memory is still there. */
static void cb_exiting(void *arg, struct up_task *t)
{
	struct uproc *up = up_proc_data(up_task_proc(t));
	uint64_t v;

	(void)arg;
	if (!up || up->mm_owner)
		return;
	for (struct fastp *f = up->fast; f; f = f->next)
		if (f->patched)
			read_counter(up, f, t, &v);
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

static const struct up_task_ops ops = {
	.is_breakpoint = cb_is_breakpoint,
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
	rc = up_engine_new(&ops, ctx, &ctx->eng);
	if (rc) {
		free(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

/* Everything of ours out of the process, threads moved home, then let go. */
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
				if (q->bp.inserted)
					up_ubp_remove(up->p, &q->bp);
			}
		}
		for (struct fastp *f = up->fast; f; f = f->next)
			fast_unpatch(up, f);
		agent_unhijack(up, up->p, true);
		t = idle_task(up);
		/* a thread may be inside a trampoline: those stay mapped (a page or two) */
		if (t && !up->fast_used)
			up_xol_unmap(&up->xol, t);
		forget_all(up);
	}
	uproc_unlink(ctx, up);
	free(up);
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
	up_ubp_files_clear(&ctx->files);
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

int uprobe_detach(struct uprobe_ctx *ctx, pid_t pid)
{
	struct uproc *up = uproc_of_pid(ctx, pid);
	struct up_proc *p;
	int rc;

	if (!up)
		return -ESRCH;
	p = up->p;
	rc = release(ctx, up);
	if (rc) {
		/* it is gone already */
		uproc_unlink(ctx, up);
		if (!up->mm_owner)
			forget_all(up);
		free(up);
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

int uprobe_ctx_dispatch(struct uprobe_ctx *ctx)
{
	int n = up_engine_dispatch(ctx->eng);

	drain_all(ctx);
	return n;
}

#define DRAIN_MS 10 /* how often the fast path's rings are read while nothing stops */

int uprobe_ctx_timeout(struct uprobe_ctx *ctx)
{
	return any_agent(ctx) ? DRAIN_MS : -1;
}

int uprobe_ctx_run(struct uprobe_ctx *ctx, volatile int *stop)
{
	ctx->brk = false;
	if (!any_agent(ctx))
		return up_engine_run(ctx->eng, stop);
	/* records arrive without a stop: wake up to read them */
	for (;;) {
		struct pollfd pfd = { .fd = up_engine_fd(ctx->eng), .events = POLLIN };

		/* a handler's break first: what it left to do (say, format a trap-path hit)
		   comes before records made after it */
		if (ctx->brk || (stop && *stop))
			return -EINTR;
		drain_all(ctx);
		if (ctx->brk || (stop && *stop))
			return -EINTR;
		if (!up_engine_nprocs(ctx->eng))
			return 0;
		if (pfd.fd < 0)
			return pfd.fd;
		if (poll(&pfd, 1, DRAIN_MS) < 0 && errno != EINTR)
			return -errno;
		up_engine_dispatch(ctx->eng);
		if (!any_agent(ctx)) {
			drain_all(ctx);
			if (ctx->brk || (stop && *stop))
				return -EINTR;
			return up_engine_run(ctx->eng, stop);
		}
	}
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
