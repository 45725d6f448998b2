// SPDX-License-Identifier: MIT
/*
 * The fast path, the arbiter's half: a probe whose actions need no tracer-side handler
 * (a count, a record of registers and memory, a return) becomes a jmp over the probed
 * instructions to a trampoline in the XOL area, placed and removed with every thread
 * stopped; recording trampolines call the agent (src/agent/) in the process, whose
 * ring is drained here into each probe's record_handler.  It never patches a site a
 * thread, a branch or a saved context could enter in the middle (agent/patch.c, ubp.c
 * decide, the checks on live threads are here), and never unmaps what a thread may
 * still execute.
 */
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sym/sym.h"
#include "uprobes_int.h"

/* ---- the fast path ------------------------------------------------------------------ */

struct agg_sum {
	uint64_t hits;
};

static void agg_sum_one(void *arg, const uint64_t *key, unsigned nkey, const uint64_t *val,
			unsigned nval)
{
	(void)key, (void)nkey, (void)nval;
	((struct agg_sum *)arg)->hits += val[0];
}

/* An aggregating site's hits so far: its tables' counts and the hits they dropped. */
static uint64_t agg_hits(struct uproc *mm, struct fastp *f)
{
	struct agg_sum s = { 0 };
	uint64_t dropped = 0;

	if (mm->agent)
		up_agent_agg_read(mm->agent, f->desc, agg_sum_one, &s, &dropped);
	return s.hits + dropped;
}

int read_counter(struct uproc *mm, struct fastp *f, struct up_task *t, uint64_t *v)
{
	int rc;

	if (f->rec) {
		uint64_t filtered = 0, lost = 0;

		if (mm->agent)
			up_agent_probe_counts(mm->agent, f->desc, &filtered, &lost);
		*v = f->nrec + filtered + lost + (f->agg ? agg_hits(mm, f) : 0);
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

struct fastp *fast_overlapping(struct uproc *mm, uint64_t lo, uint64_t hi)
{
	for (struct fastp *f = mm->fast; f; f = f->next)
		if (lo < f->site.vaddr + f->site.len && f->site.vaddr < hi)
			return f;
	return NULL;
}

#define CHAIN_MAX 16

/* Where a thread's rip or a word of its stack may point: inside one of the ranges
   (lo, hi), or (out of line) anywhere it runs code of ours, from where it jumps back
   into the program (hull: every such place is within it). */
struct where {
	struct uproc *mm;
	unsigned n;
	uint64_t lo[CHAIN_MAX + 1], hi[CHAIN_MAX + 1];
	bool out_of_line;
	uint64_t hull_lo, hull_hi;
};

static void where_range(struct where *w, struct uproc *mm, uint64_t lo, uint64_t hi)
{
	w->mm = mm;
	w->lo[w->n] = lo;
	w->hi[w->n++] = hi;
}

static void where_out_of_line(struct where *w, struct uproc *mm)
{
	w->mm = mm;
	w->out_of_line = true;
	w->hull_lo = UINT64_MAX;
	w->hull_hi = 0;
	for (const struct up_xol_area *a = mm->xol.areas; a; a = a->next) {
		w->hull_lo = a->base < w->hull_lo ? a->base : w->hull_lo;
		w->hull_hi = a->base + UP_XOL_AREA_SIZE > w->hull_hi ? a->base + UP_XOL_AREA_SIZE
								    : w->hull_hi;
	}
	if (mm->agent) {
		uint64_t code = up_agent_entry(mm->agent) - UPA_ENTRY_OFF;

		w->hull_lo = code < w->hull_lo ? code : w->hull_lo;
		w->hull_hi = code + UPA_CODE_SIZE > w->hull_hi ? code + UPA_CODE_SIZE : w->hull_hi;
	}
}

static bool points(const struct where *w, uint64_t a)
{
	if (w->out_of_line)
		return a >= w->hull_lo && a < w->hull_hi &&
		       (up_xol_contains(&w->mm->xol, a) ||
			(w->mm->agent && up_agent_has_code(w->mm->agent, a)));
	for (unsigned i = 0; i < w->n; i++)
		if (a > w->lo[i] && a < w->hi[i])
			return true;
	return false;
}

/*
 * Where a stopped thread goes on from: its rip; but a thread stopped just past an int3
 * of ours (its trap not yet dispatched, or still pending behind our interrupt) is
 * really at the int3, and goes back there to run the original should the probe be gone
 * by then; and one in a system call goes back to its syscall instruction if the call
 * restarts.  Either may sit right after the bytes a jmp would cover and return inside.
 */
static bool resumes_in(struct uproc *mm, const struct where *w, const struct user_regs_struct *r)
{
	if (points(w, r->rip))
		return true;
	if (written_orig(mm, r->rip - 1) >= 0 && points(w, r->rip - 1))
		return true;
	return (int64_t)r->orig_rax >= 0 && points(w, r->rip - 2);
}

static bool any_rip(struct uproc *mm, const struct where *w)
{
	for (struct uproc *up = mm->ctx->procs; up; up = up->next) {
		if (mm_of(up) != mm)
			continue;
		for (struct up_task *t = up_proc_first_task(up->p); t; t = up_proc_next_task(t)) {
			struct user_regs_struct r;

			if (!up_task_stopped(t) || up_task_get_regs(t, &r))
				return true;
			if (resumes_in(mm, w, &r))
				return true;
		}
	}
	return false;
}

static bool any_rip_in(struct uproc *mm, uint64_t lo, uint64_t hi)
{
	struct where w = { .n = 0 };

	where_range(&w, mm, lo, hi);
	return any_rip(mm, &w);
}

#define STACK_SCAN (16u << 10)

/*
 * Does a word on any thread's stack point into (lo, hi)?  A thread interrupted there
 * by a signal would return into the middle of the jmp.  Calls are never covered, so no
 * return address can: any such word is a saved context, or a coincidence (then the
 * probe only stays on the trap path).  The top STACK_SCAN bytes above rsp are read.
 */
static bool any_stack_word(struct uproc *mm, const struct where *w)
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
				if (points(w, buf[i]))
					found = true;
		}
	}
	free(buf);
	return found;
}

static bool stack_points_in(struct uproc *mm, uint64_t lo, uint64_t hi)
{
	struct where w = { .n = 0 };

	where_range(&w, mm, lo, hi);
	return any_stack_word(mm, &w);
}

/* Is t counted among the threads without TLS? */
static void set_notls(struct uproc *mm, struct utask *ut, bool notls)
{
	if (!ut) {
		if (notls)
			mm->notls++; /* never taken back: lsl for good, which is safe */
		return;
	}
	if (ut->notls == notls)
		return;
	ut->notls = notls;
	if (notls)
		mm->notls++;
	else if (mm->notls)
		mm->notls--;
}

/* No thread without TLS left: records name threads by %fs:0 again. */
static void agent_all_tls(struct uproc *mm)
{
	if (mm->agent && !mm->notls && up_agent_fs0(mm->agent) && mm->ctx->opts.verbose)
		logf_(mm->ctx, "process %d: every thread has its TLS block: records name "
			       "threads by %%fs:0", (int)mm->pid);
}

/* Is key (a TLS block's first word) another live thread's of mm's than tid's? */
static bool shares_tls(struct uproc *mm, uint64_t key, pid_t tid)
{
	pid_t prev = up_agent_thread_tid(mm->agent, key);

	if (!prev || prev == tid)
		return false;
	for (struct uproc *up = mm->ctx->procs; up; up = up->next)
		if (mm_of(up) == mm && up_proc_find_task(up->p, prev))
			return true;
	return false;
}

/*
 * The agent's name for thread t: the word at its TLS block (%fs:0), or, while any
 * thread has none (a process caught at its exec, before its dynamic linker ran), its
 * stack pointer for every thread, and the cpu from lsl.  Named again once it has one.
 */
void agent_name_thread(struct uproc *mm, struct up_task *t)
{
	struct user_regs_struct r;
	struct up_map m;
	uint64_t key = 0, offset_at, size_at;
	int64_t offset = 0;
	uint32_t size = 0;
	int32_t cpu;
	bool tls;

	if (!mm->agent || up_task_get_regs(t, &r))
		return;
	if (!up_proc_find_map(up_task_proc(t), r.rsp, &m)) {
		/* the main thread's stack grows down as it goes */
		uint64_t lo = !strcmp(m.path, "[stack]") && m.start > (64u << 20) ? m.start - (64u << 20)
									      : m.start;

		up_agent_stack(mm->agent, lo, m.end, up_task_tid(t));
	}
	tls = r.fs_base && !up_task_read(t, r.fs_base, &key, sizeof(key)) && key;
	if (tls && shares_tls(mm, key, up_task_tid(t))) {
		/* two live threads on one TLS block (a clone without CLONE_SETTLS): %fs:0
		   and the fs base name neither, and a return table of its own would be
		   written by both; for good */
		set_notls(mm, NULL, true);
		tls = false;
	}
	set_notls(mm, utask_of(t), !tls);
	if (!tls) {
		up_agent_no_fs0(mm->agent);
		return;
	}
	/* once glibc has set its rseq area up, every thread must have one where it says */
	if (up_agent_rseq_at(mm->agent, &offset_at, &size_at) &&
	    !up_task_read(t, size_at, &size, sizeof(size)) && size >= 20 &&
	    (up_task_read(t, offset_at, &offset, sizeof(offset)) ||
	     up_task_read(t, r.fs_base + (uint64_t)offset + 4, &cpu, sizeof(cpu))))
		up_agent_no_rseq(mm->agent); /* lsl, then */
	up_agent_thread(mm->agent, key, up_task_tid(t));
	agent_all_tls(mm);
}

/* Thread ut is gone (exit, exec): it no longer counts. */
void agent_thread_gone(struct uproc *mm, struct utask *ut)
{
	if (ut && ut->notls) {
		set_notls(mm, ut, false);
		agent_all_tls(mm);
	}
}

/*
 * Where the program's thread has its TLS block at last, 0: unknown.  A dynamic program's
 * entry point (its dynamic linker set the block up); a static one's main, its start
 * code having done it -- relocated as _start is (a static PIE), from the auxiliary
 * vector's AT_ENTRY (AT_BASE, the interpreter's, is 0 there).
 */
static uint64_t tls_point(struct uproc *mm)
{
	char path[64], exe[PATH_MAX];
	uint64_t av[2], entry = 0, interp = 0;
	struct up_sym_elf *elf;
	struct up_sym start, main_;
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)mm->pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fread(av, sizeof(av), 1, f) == 1 && av[0] != AT_NULL) {
		if (av[0] == AT_ENTRY)
			entry = av[1];
		else if (av[0] == AT_BASE)
			interp = av[1];
	}
	fclose(f);
	if (interp || !entry)
		return entry;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)mm->pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = 0;
	if (!(elf = up_ubp_file(&mm->ctx->files, exe)) || up_sym_elf_lookup(elf, "main", &main_) ||
	    up_sym_elf_lookup(elf, "_start", &start))
		return 0;
	return main_.value + (entry - start.value);
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
void agent_watch_entry(struct uproc *mm)
{
	uint64_t entry;

	if (!mm->agent || !mm->notls || mm->tls_watched || mm->mm_owner)
		return;
	entry = tls_point(mm);
	/* a jmp over it would be broken by the int3 */
	if (!entry || fast_overlapping(mm, entry, entry + 1))
		return;
	mm->tls_watch = (struct uprobe){ .pid = mm->pid, .vaddr = entry, .handler = tls_hit,
					 .flags = UPROBE_F_OWN, .data = mm };
	if (!arm(mm->ctx, mm, &mm->tls_watch))
		mm->tls_watched = true;
}

struct rseq_find {
	struct uproc *mm;
	bool exe_seen;	  /* the first file mapped, the executable, was looked at */
	uint64_t addr[2]; /* __rseq_offset's and __rseq_size's in the process */
};

/* In glibc's dynamic linker (or a static executable: the first file mapped), where
   the two are. */
static int rseq_map_fn(void *arg, const struct up_map *m)
{
	static const char *const names[2] = { "__rseq_offset", "__rseq_size" };
	struct rseq_find *rf = arg;
	const char *base = strrchr(m->path, '/');
	struct up_sym_elf *elf;
	uint64_t off[2];
	struct up_sym s;
	bool glibc;

	if (!base || m->offset)
		return 0;
	glibc = !strncmp(base, "/ld-linux", 9) || !strncmp(base, "/libc.so", 8);
	if (!glibc && rf->exe_seen)
		return 0;
	rf->exe_seen = true;
	if (!(elf = up_ubp_file(&rf->mm->ctx->files, m->path)))
		return 0;
	for (int i = 0; i < 2; i++)
		if (up_sym_elf_lookup_object(elf, names[i], &s) ||
		    up_sym_elf_vaddr_to_offset(elf, s.value, &off[i]))
			return 0;
	/* each at the mapping of the file that holds its offset */
	for (int i = 0; i < 2; i++) {
		struct up_map n = *m;
		uint64_t at = m->start;

		for (; !rf->addr[i] && !up_proc_find_map(rf->mm->p, at, &n) && !strcmp(n.path, m->path);
		     at = n.end)
			if (off[i] >= n.offset && off[i] - n.offset < n.end - n.start)
				rf->addr[i] = n.start + (off[i] - n.offset);
	}
	return rf->addr[0] && rf->addr[1] ? 1 : -ENOENT;
}

/*
 * glibc (2.35 on) registers every thread it starts with rseq, and the kernel keeps the
 * thread's cpu in that area, at %fs:__rseq_offset + 4: the agent reads it there (two
 * loads) instead of with lsl (~12 ns a record).  The two variables are in ld.so (set
 * by the time main runs: a process caught at its exec has zeros there), so the agent
 * reads them itself; each thread named afterwards is checked to have the area.
 */
static void agent_find_rseq(struct uproc *mm)
{
	struct rseq_find rf = { .mm = mm };

	if (up_proc_for_each_map(mm->p, rseq_map_fn, &rf) != 1)
		return;
	up_agent_rseq(mm->agent, rf.addr[0], rf.addr[1]);
	if (mm->ctx->opts.verbose)
		logf_(mm->ctx, "process %d: records take the cpu from glibc's rseq area",
		      (int)mm->pid);
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
	agent_find_rseq(mm);
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

/* ... and at a return with UPA_P_ENTRY_ARGS the words it fills with the entry's
   arguments. */
static bool word_seen(unsigned w, bool entry_args)
{
	return word_in_process(w) || (entry_args && w >= UPA_ENTRY_ARG && w < UPA_ENTRY_ARG + 6);
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
	bool entry_args = cap->entry_args && u->ret_handler;

	memset(d, 0, sizeof(*d));
	d->flags = UPA_P_ENABLED | (entry_args ? UPA_P_ENTRY_ARGS : 0);
	d->vaddr = u->vaddr;
	d->regs = cap->regs | 1ull << UPA_RIP;
	d->nfetch = cap->nfetch;
	d->ncond = cap->ncond;
	*save = d->regs;
	if (entry_args) /* the entry's trampoline saves what the hijack keeps */
		*save |= 1ull << UPA_RDI | 1ull << UPA_RSI | 1ull << UPA_RDX | 1ull << UPA_RCX |
			 1ull << UPA_R8 | 1ull << UPA_R9;
	for (unsigned w = 0; w < UPA_NREGS; w++) {
		if ((d->regs >> w & 1) && !word_seen(w, entry_args)) {
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

			if (in->reg % 8 || w >= UPA_NREGS || !word_seen(w, entry_args)) {
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
			   : in->final == UPROBE_FETCH_STACK ? UPA_FINAL_STACK
							     : UPA_FINAL_NONE;
		o->at_entry = in->at_entry;
		if (o->final == UPA_FINAL_STACK) /* [sp] at an entry: the caller */
			*save |= 1ull << UPA_RSP;
		o->final_off = in->final_off;
		o->final_len = in->final_len;
		o->size = (uint8_t)(in->size ? in->size : 8);
		o->is_signed = in->is_signed;
		o->bf_width = (uint8_t)in->bf_width;
		o->bf_offset = (uint8_t)in->bf_offset;
	}
	for (unsigned i = 0; i < cap->ncond; i++) {
		if (cap->cond[i].fetch == UPROBE_COND_DURATION && u->ret_handler)
			c[i].fetch = UPA_COND_DURATION;
		else if (cap->cond[i].fetch >= cap->nfetch)
			return -EINVAL;
		else
			c[i].fetch = cap->cond[i].fetch;
		c[i].op = (uint32_t)cap->cond[i].op;
		c[i].value = cap->cond[i].value;
	}
	return 0;
}

/* An aggregating probe's struct upa_agg, from its capture's. */
static int build_agg(const struct uprobe *u, struct upa_agg *g, char *why, size_t whylen)
{
	const struct uprobe_capture *cap = u->capture;
	const struct uprobe_agg *in = cap->agg;
	unsigned size = in->size ? in->size : 2048, words = 0;

	memset(g, 0, sizeof(*g));
	if (in->nkeys > UPA_AGG_KEYS || in->nvals > UPA_AGG_VALS || size & (size - 1) ||
	    size > 1u << 20) {
		snprintf(why, whylen, "an aggregation the agent cannot hold");
		return -EINVAL;
	}
	g->order = (uint32_t)__builtin_ctz(size);
	g->nkeys = in->nkeys;
	g->nvals = in->nvals;
	g->at_entry = in->at_entry;
	for (unsigned i = 0; i < in->nkeys; i++) {
		const struct uprobe_agg_key *k = &in->key[i];
		struct upa_agg_key *o = &g->key[i];

		if ((k->src == UPROBE_AGG_FETCH && k->fetch >= cap->nfetch) ||
		    (k->src == UPROBE_AGG_DURATION && !u->ret_handler) || !k->words ||
		    k->words > 255) {
			snprintf(why, whylen, "key %u cannot be computed in-process", i + 1);
			return -EINVAL;
		}
		o->src = k->src == UPROBE_AGG_STACK	 ? UPA_AGG_STACK
			 : k->src == UPROBE_AGG_DURATION ? UPA_AGG_DURATION
							 : UPA_AGG_FETCH;
		o->xform = k->xform == UPROBE_AGG_LOG2	    ? UPA_AGG_LOG2
			   : k->xform == UPROBE_AGG_BUCKETS ? UPA_AGG_BUCKETS
							    : UPA_AGG_RAW;
		o->buckets = k->buckets;
		o->words = (uint8_t)k->words;
		o->fetch = k->fetch;
		words += k->words;
	}
	if (words > UPA_AGG_KEY_WORDS) {
		snprintf(why, whylen, "a key of %u words (the agent takes %u)", words,
			 (unsigned)UPA_AGG_KEY_WORDS);
		return -EINVAL;
	}
	for (unsigned i = 0; i < in->nvals; i++) {
		const struct uprobe_agg_val *v = &in->val[i];
		struct upa_agg_val *o = &g->val[i];

		if ((v->src == UPROBE_AGG_FETCH && v->fetch >= cap->nfetch) ||
		    (v->src == UPROBE_AGG_DURATION && !u->ret_handler) ||
		    v->src == UPROBE_AGG_STACK) {
			snprintf(why, whylen, "value %u cannot be computed in-process", i + 1);
			return -EINVAL;
		}
		o->src = v->src == UPROBE_AGG_DURATION ? UPA_AGG_DURATION : UPA_AGG_FETCH;
		o->op = v->op == UPROBE_AGG_MIN ? UPA_AGG_MIN
			: v->op == UPROBE_AGG_MAX ? UPA_AGG_MAX
						  : UPA_AGG_SUM;
		o->is_signed = v->is_signed;
		o->fetch = v->fetch;
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

/* A recording site's descriptor (in the shared region) and its record id. */
static int rec_desc(struct uproc *mm, struct up_task *t, struct fastp *f, char *why,
		    size_t whylen)
{
	struct uprobe *u = f->u;
	unsigned nf = u->capture->nfetch, nc = u->capture->ncond;
	struct upa_fetch *fe = calloc(nf ? nf : 1, sizeof(*fe));
	struct upa_cond *co = calloc(nc ? nc : 1, sizeof(*co));
	struct upa_probe d;
	struct upa_agg ag;
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
	if (u->capture->agg) {
		rc = build_agg(u, &ag, why, whylen);
		if (rc)
			goto out;
		save |= 1ull << UPA_RBP; /* a stack key walks from it */
	}
	rc = agent_ensure(mm, t, why, whylen);
	if (rc)
		goto out;
	rc = up_agent_probe_add(mm->agent, &d, fe, co, u->capture->agg ? &ag : NULL, &f->desc,
				&f->id);
	if (rc) {
		snprintf(why, whylen, rc == -E2BIG ? "a record would not fit the ring"
						   : "no room for its descriptor (%s)",
			 strerror(-rc));
		goto out;
	}
	f->rec = true;
	f->agg = u->capture->agg != NULL;
	f->regs = d.regs;
	f->save = save | 1ull << UPA_RSP; /* the agent names the thread by its stack */
	rc = rec_slot(mm, f);
out:
	free(fe);
	free(co);
	return rc;
}

/* f's trampoline code for site (its chain says where it goes on), at tramp. */
static int tramp_code(struct uproc *mm, const struct fastp *f, const struct up_patch_site *site,
		      uint64_t tramp, uint8_t *code, size_t size, size_t *len,
		      unsigned home_of[UP_PATCH_MAX_INSN])
{
	if (f->rec)
		return up_patch_tramp_rec(site, tramp, f->desc, up_agent_entry(mm->agent), f->save,
					  f->is_ret, code, size, len, home_of);
	if (f->shared)
		return up_patch_tramp_abs(site, tramp, f->counter, code, size, len, home_of);
	return up_patch_tramp(site, tramp, f->counter, code, size, len, home_of);
}

/* The probes sharing the jmp at vaddr, in the order their trampolines run. */
static unsigned chain_of(struct uproc *mm, uint64_t vaddr, struct fastp **v)
{
	unsigned n = 0;

	for (struct fastp *f = mm->fast; f; f = f->next) {
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
static void tramp_reclaim_set(struct uproc *mm, struct fastp **o, unsigned n, bool chained)
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

static void tramp_reclaim(struct uproc *mm, struct fastp *f)
{
	tramp_reclaim_set(mm, &f, 1, f->chained);
}

/*
 * Gives the probes sharing the jmp at vaddr fresh trampolines, chained in their order
 * (each jumps on to the next; the last runs the relocated instructions and jumps
 * back), then points the jmp at the first (process quiesced).  The old trampolines go
 * back to the allocator where no thread can be inside (else they stay, as after an
 * unpatch).  On failure nothing has changed.
 */
static int chain_build(struct uproc *mm, struct up_task *t, uint64_t vaddr,
		       struct fastp *extra, char *why, size_t whylen)
{
	struct fastp *v[CHAIN_MAX + 1];
	uint64_t tramp[CHAIN_MAX];
	unsigned nslots[CHAIN_MAX], home[CHAIN_MAX][UP_PATCH_MAX_INSN];
	uint8_t code[UP_PATCH_TRAMP_REC], jmp[UP_PATCH_MAX_INSN * UP_INSN_MAX];
	unsigned n = chain_of(mm, vaddr, v), made = 0;
	uint64_t near = vaddr;
	bool pun_held = false; /* tramp[0] placed for a punned jmp, not yet made or freed */
	int rc = 0;

	if (!n)
		return -ENOENT;
	/* a punned jmp goes where the bytes after the instruction say: the first
	   trampoline there, the rest of the chain near it */
	if (v[0]->site.tactic == UP_TACTIC_PUN) {
		nslots[0] = v[0]->rec ? FAST_SLOTS_REC : FAST_SLOTS;
		rc = up_xol_alloc_in(&mm->xol, t, v[0]->site.pun_lo, v[0]->site.pun_hi,
				     64ull * nslots[0], &tramp[0], &nslots[0]);
		if (rc) {
			snprintf(why, whylen, "no page where the punned jmp goes (0x%" PRIx64
				 "..0x%" PRIx64 "): %s", v[0]->site.pun_lo, v[0]->site.pun_hi,
				 strerror(-rc));
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
		if (i || v[0]->site.tactic != UP_TACTIC_PUN) {
			nslots[i] = v[i]->rec ? FAST_SLOTS_REC : FAST_SLOTS;
			rc = up_xol_alloc_n(&mm->xol, t, near, nslots[i], &tramp[i]);
		}
		if (rc) {
			snprintf(why, whylen, "no trampoline (%s)", strerror(-rc));
			break;
		}
		rc = tramp_code(mm, v[i], &site, tramp[i], code, sizeof(code), &len, home[i]);
		if (!rc)
			rc = up_xol_write(mm->p, tramp[i], code, len);
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
	if (!rc)
		rc = up_proc_write_text(mm->p, vaddr, jmp, v[0]->site.len);
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
	}
	return 0;
}

bool wants_record(const struct uprobe *u)
{
	return u->capture && u->record_handler;
}

/*
 * Tries the fast path for a counting or recording uprobe (process quiesced).  Where
 * another one's jmp already starts at its address, it joins that site's chain.
 */
int fast_arm(struct uproc *mm, struct uprobe *u, char *why, size_t whylen)
{
	struct uprobe_ctx *ctx = mm->ctx;
	struct fastp *f, *base, *v[CHAIN_MAX];
	struct up_task *t = ctx->cur_task ? ctx->cur_task : idle_task(mm);
	bool rec = wants_record(u);
	struct where ool = { .n = 0 };
	unsigned n;
	int rc;

	if (!t || ctx->opts.no_xol) {
		snprintf(why, whylen, "no XOL area");
		return -ENOTSUP;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->u = u;
	f->is_ret = u->ret_handler != NULL;
	rc = -ENOTSUP;
	base = fast_overlapping(mm, u->vaddr, u->vaddr + 1);
	if (base && (base->site.vaddr != u->vaddr || !base->patched)) {
		/* its bytes are a jmp now: the arbiter takes that site back to int3s */
		snprintf(why, whylen, "inside another fast-path site");
		goto fail;
	}
	if (base) {
		/* the site is checked and patched already: only the chain grows */
		n = chain_of(mm, u->vaddr, v);
		for (unsigned i = 0; i < n; i++) {
			if (f->is_ret && v[i]->is_ret) {
				snprintf(why, whylen, "another return probe shares the site");
				goto fail;
			}
		}
		if (n == CHAIN_MAX) {
			snprintf(why, whylen, "%u probes share the site already", n);
			goto fail;
		}
		f->site = base->site;
		f->site.chain = 0;
	} else {
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
			snprintf(why, whylen, "a thread is inside the bytes the jmp would cover "
					      "(or trapped on an int3 there)");
			goto fail;
		}
		if (f->site.ninsn > 1 &&
		    stack_points_in(mm, u->vaddr, u->vaddr + f->site.len)) {
			snprintf(why, whylen, "a thread's stack holds an address inside the bytes "
					      "the jmp would cover (a signal frame?)");
			goto fail;
		}
		if (f->site.ninsn > 1) {
			/* from a slot or a trampoline it jumps back to the instruction after
			   the one it ran there: perhaps inside these bytes (and in a signal
			   handler, its frame's rip would take it there) */
			where_out_of_line(&ool, mm);
			if (any_rip(mm, &ool) || any_stack_word(mm, &ool)) {
				snprintf(why, whylen, "a thread is running out of line and may "
						      "come back inside the bytes the jmp would cover");
				goto fail;
			}
		}
	}
	if (rec) {
		rc = rec_desc(mm, t, f, why, whylen);
		if (rc) {
			if (rc > -4096 && !why[0])
				snprintf(why, whylen, "no descriptor (%s)", strerror(-rc));
			rc = -ENOTSUP;
			goto fail;
		}
	} else {
		/* a counter in the shared region where the agent can be had: its count
		   survives an exec; else on a page of counters by the XOL area */
		char sub[160];

		f->shared = !agent_ensure(mm, t, sub, sizeof(sub)) &&
			    !up_agent_counter(mm->agent, &f->counter);
		if (!f->shared && (!mm->counters || mm->ncounters == 4096 / 8)) {
			rc = up_xol_map_data(t, u->vaddr, &mm->counters);
			if (rc) {
				snprintf(why, whylen, "no counter page (%s)", strerror(-rc));
				mm->counters = 0;
				goto fail;
			}
			mm->ncounters = 0;
		}
		if (!f->shared)
			f->counter = mm->counters + 8ull * mm->ncounters;
	}
	f->seq = mm->fast_seq++;
	f->patched = true;
	if (rec)
		ctx->rec_seen_ns = up_mono_ns(); /* records may come at once: look soon */
	f->next = mm->fast;
	mm->fast = f;
	rc = chain_build(mm, t, u->vaddr, NULL, why, whylen);
	if (rc) {
		fast_unlink(mm, f);
		if (f->rec) {
			if (f->id < mm->nrecp)
				mm->recp[f->id] = NULL;
			up_agent_probe_enable(mm->agent, f->desc, false);
		}
		rc = -ENOTSUP;
		goto fail;
	}
	if (!rec && !f->shared)
		mm->ncounters++;
	mm->fast_used = true;
	u->kimg = (struct uprobe_kimg *)f;
	u->kind = KIND_FAST;
	ctx->stats.fast_patched++;
	if (ctx->opts.verbose)
		logf_(ctx, "process %d: 0x%" PRIx64 " on the fast path (%s: a jmp to 0x%" PRIx64
			   ", %s%s)",
		      (int)mm->pid, u->vaddr, up_patch_tactic_name(f->site.tactic), f->tramp,
		      rec ? "recorded in-process" : "counted",
		      f->chained ? ", its trampoline chained with the site's other probes" : "");
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

_Static_assert(sizeof(struct user_regs_struct) == UPA_NREGS * 8, "the agent's frame is a user_regs_struct");

static void deliver(void *arg, const struct up_agent_rec *r)
{
	struct uproc *mm = ((struct deliver_arg *)arg)->mm;
	struct fastp *f = r->id < mm->nrecp ? mm->recp[r->id] : NULL;
	union {
		struct user_regs_struct ur;
		uint64_t w[UPA_NREGS];
	} u = { .w = { 0 } };
	struct uprobe_record rec;
	struct rec_priv rp;
	unsigned k = 0;

	if (!f || !f->u)
		return;
	/* the frame's words are user_regs_struct's, in its order */
	for (uint64_t regs = f->regs; regs && k < r->nregs; regs &= regs - 1)
		u.w[__builtin_ctzll(regs)] = r->regs[k++];
	if (!r->is_return)
		u.ur.rip = f->site.vaddr;
	rec.is_return = r->is_return;
	rec.pid = mm->pid;
	rec.tid = r->tid;
	rec.cpu = (int)r->cpu;
	rec.time_ns = r->time_ns;
	rec.regs = &u.ur;
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

	/* the trampoline's stubs: the shared table's, then one per thread's table */
	if (!up_proc_read(pb->p, slot, &cur, sizeof(cur)) && UPA_RT_IS_STUB(cur, pb->tramp))
		up_proc_write(pb->p, slot, &orig, sizeof(orig));
}

/*
 * The returns the agent hijacked go straight home again in p: mm's own process at
 * detach (take: forgotten), or a fork child, whose copy of the stack has them but
 * which has no agent (MADV_DONTFORK).
 */
void agent_unhijack(struct uproc *mm, struct up_proc *p, bool take)
{
	struct put_back pb = { p, 0 };

	if (!mm->agent)
		return;
	pb.tramp = up_agent_ret_tramp(mm->agent);
	up_agent_for_each_return(mm->agent, take, put_back_one, &pb);
}

/* A raw record's probe: the uprobe's raw_id, counted as delivered. */
static uint32_t raw_probe_of(void *arg, uint32_t id)
{
	struct uproc *mm = ((struct deliver_arg *)arg)->mm;
	struct fastp *f = id < mm->nrecp ? mm->recp[id] : NULL;

	if (!f || !f->u)
		return UPROBE_RAW_SKIP;
	f->nrec++;
	mm->ctx->stats.records++;
	return f->u->raw_id;
}

static void raw_span(void *arg, const void *recs, size_t len)
{
	struct uproc *mm = ((struct deliver_arg *)arg)->mm;

	mm->ctx->opts.raw_handler(mm->ctx->opts.arg, recs, len);
}

void agent_drain(struct uproc *mm)
{
	struct deliver_arg a = { mm };
	unsigned n;

	if (!mm->agent || mm->draining)
		return;
	mm->draining = true;
	if (mm->ctx->opts.raw_handler)
		n = up_agent_drain_raw(mm->agent, mm->pid, raw_probe_of, raw_span, &a);
	else
		n = up_agent_drain(mm->agent, deliver, &a);
	if (n && mm->ctx->opts.on_records)
		mm->ctx->opts.on_records(mm->ctx->opts.arg);
	mm->draining = false;
}

void drain_all(struct uprobe_ctx *ctx)
{
	unsigned fill = 0;

	for (struct uproc *up = ctx->procs; up; up = up->next) {
		if (up->mm_owner || !up->agent)
			continue;
		unsigned f = up_agent_fill(up->agent);

		fill = f > fill ? f : fill;
		agent_drain(up);
	}
	ctx->ring_fill = fill;
	if (fill)
		ctx->rec_seen_ns = up_mono_ns();
}

bool any_agent(struct uprobe_ctx *ctx)
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
void record_trap_hit(struct uproc *up, struct up_task *t, struct uprobe *u,
			    struct user_regs_struct *regs, bool is_return)
{
	struct rec_priv rp = { NULL, up->ctx, up->pid };
	struct uprobe_record rec = {
		.pid = up->pid,
		.tid = up_task_tid(t),
		.is_return = is_return,
		.cpu = -1,
		.regs = regs,
		.priv = &rp,
	};

	rec.time_ns = up_mono_ns();
	u->record_handler(u, &rec);
}

struct agg_out {
	struct uprobe *u;
	uint64_t hits;
	void (*fn)(void *arg, const struct uprobe_agg_entry *e);
	void *arg;
};

static void agg_one(void *arg, const uint64_t *key, unsigned nkey, const uint64_t *val,
		    unsigned nval)
{
	struct agg_out *o = arg;
	struct uprobe_agg_entry e = { key, nkey, val, nval };

	o->hits += val[0];
	o->fn(o->arg, &e);
}

static void agg_to_handler(void *arg, const struct uprobe_agg_entry *e)
{
	struct uprobe *u = arg;

	u->agg_handler(u, e);
}

/* Every entry of an aggregating site's tables to fn, then the dropped count; the hits. */
static uint64_t agg_emit(struct uproc *mm, struct fastp *f,
			 void (*fn)(void *arg, const struct uprobe_agg_entry *e), void *arg)
{
	struct agg_out o = { f->u, 0, fn, arg };
	struct uprobe_agg_entry e = { NULL, 0, NULL, 1 };
	uint64_t dropped = 0;

	if (!mm->agent)
		return 0;
	up_agent_agg_read(mm->agent, f->desc, agg_one, &o, &dropped);
	e.val = &dropped;
	fn(arg, &e);
	return o.hits + dropped;
}

/* A recording site's counts go into its uprobe (it is leaving the fast path); an
   aggregating one's tables go to its agg_handler. */
static void rec_settle(struct uproc *mm, struct fastp *f)
{
	uint64_t filtered = 0, lost = 0;

	if (mm->agent)
		up_agent_probe_counts(mm->agent, f->desc, &filtered, &lost);
	if (f->agg && f->u->agg_handler)
		f->u->nhits += agg_emit(mm, f, agg_to_handler, f->u);
	else if (f->agg)
		f->u->nhits += agg_hits(mm, f);
	f->u->nhits += f->nrec + filtered + lost;
	f->u->nlost += lost;
	mm->ctx->stats.records_lost += lost;
	mm->ctx->stats.records_filtered += filtered;
	f->nrec = 0;
}

/* f's hits so far go into its uprobe; a recording site stops recording. */
static void settle(struct uproc *mm, struct fastp *f)
{
	uint64_t v;

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

/* Puts the original instruction back (process quiesced); the trampoline stays mapped
   until no thread can be inside it.  The site's other probes, if any, are unpatched
   with it (each is then unpatched, or downgraded, on its own: a no-op for the bytes). */
void fast_unpatch(struct uproc *mm, struct fastp *f)
{
	if (!f->patched)
		return;
	up_proc_write_text(mm->p, f->site.vaddr, f->site.orig, f->site.len);
	f->patched = false;
	tramp_reclaim(mm, f);
	settle(mm, f);
}

void fast_remove(struct uproc *mm, struct fastp *f)
{
	struct uprobe_ctx *ctx = mm->ctx;
	struct up_task *t = ctx->cur_task ? ctx->cur_task : idle_task(mm);
	struct fastp *v[CHAIN_MAX];
	char why[160] = "";

	if (f->patched && t && chain_of(mm, f->site.vaddr, v) > 1) {
		/* the others keep the site, in a chain without f */
		f->patched = false;
		if (!chain_build(mm, t, f->site.vaddr, f, why, sizeof(why))) {
			settle(mm, f);
			fast_unlink(mm, f);
			return;
		}
		/* no room for the new chain: the site goes back to int3s (the old chain,
		   f's trampoline in it, is what the jmp still leads to) */
		f->patched = true;
		logf_(ctx, "process %d: 0x%" PRIx64 " leaves the fast path: %s", (int)mm->pid,
		      f->site.vaddr, why);
		fast_unpatch(mm, f);
		fast_unlink(mm, f);
		for (struct fastp *o; (o = fast_overlapping(mm, f->site.vaddr, f->site.vaddr + 1));)
			fast_downgrade(mm, o);
		return;
	}
	fast_unpatch(mm, f);
	fast_unlink(mm, f);
}

void fast_unlink(struct uproc *mm, struct fastp *f)
{
	struct fastp **pp = &mm->fast;

	while (*pp && *pp != f)
		pp = &(*pp)->next;
	if (*pp)
		*pp = f->next;
}

/* The process exits: the counts as they stand go into the uprobes. */
void fast_forget(struct uproc *mm)
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

void fast_downgrade(struct uproc *mm, struct fastp *f)
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


int uprobe_agg_read(struct uprobe_ctx *ctx, const struct uprobe *u,
		    void (*fn)(void *arg, const struct uprobe_agg_entry *e), void *arg)
{
	struct fastp *f = u->kimg && u->kind == KIND_FAST ? (struct fastp *)u->kimg : NULL;
	struct uproc *up = f && f->agg ? uproc_of_pid(ctx, u->pid) : NULL;

	if (up && f->patched)
		agg_emit(mm_of(up), f, fn, arg);
	return 0;
}
