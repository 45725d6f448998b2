// SPDX-License-Identifier: MIT
/*
 * Hits turned into lines (text as the kernels print them, or JSON).  On the trap path
 * a hit's values are fetched while its thread is stopped and formatted once it runs
 * again (struct pending); a fast-path record is formatted at once.  An r: event that
 * reads $argN keeps its entry's arguments until the return; $ustack frames are named
 * while the process's maps are the hit's.
 *
 * A trap-path hit's line is made once its thread runs again (up to PEND_MAX hits a
 * stop), never while the thread waits for it.  It never writes to a traced process.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sym/unwind_walk.h"
#include "trace/format.h"
#include "trace/session_int.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void emit(struct up_trace *tr, const char *buf, int len)
{
	if (len <= 0)
		return;
	if (!tr->header_done && tr->opts.header && !tr->opts.json) {
		char h[512];
		bool seed = tr->nspecs && tr->specs[0]->spec.kind == UP_SPEC_SEED;
		int hl = seed ? up_fmt_seed_header(h, sizeof(h)) : up_fmt_event_header(h, sizeof(h));

		if (hl > 0)
			fwrite(h, 1, (size_t)hl < sizeof(h) ? (size_t)hl : sizeof(h) - 1, tr->opts.out);
	}
	tr->header_done = true;
	if (fwrite(buf, 1, (size_t)len, tr->opts.out) != (size_t)len) {
		tr->out_failed = errno ? errno : EIO; /* a closed pipe, a full disk: stop */
		uprobe_ctx_break(tr->ctx);
	}
}

/* Formats with a growing buffer; fn is one of the up_fmt_* that take (buf, size, ...). */
#define FORMAT(tr, call_with_buf_size)                                                  \
	do {                                                                            \
		int len_;                                                               \
		for (;;) {                                                              \
			char *buf = (tr)->line;                                         \
			size_t size = (tr)->linecap;                                    \
			len_ = (call_with_buf_size);                                    \
			if (len_ < 0 || (size_t)len_ < (tr)->linecap)                   \
				break;                                                  \
			free((tr)->line);                                               \
			(tr)->linecap = (size_t)len_ + 256;                             \
			(tr)->line = malloc((tr)->linecap);                             \
			if (!(tr)->line) {                                              \
				(tr)->linecap = 0;                                      \
				len_ = -ENOMEM;                                         \
				break;                                                  \
			}                                                               \
		}                                                                       \
		if (len_ > 0)                                                           \
			emit((tr), (tr)->line, len_);                                   \
	} while (0)

/* The formatter's reads of a pending seed hit: from the bytes copied at the hit. */
static int read_snapshot(void *arg, uint64_t addr, void *buf, size_t len)
{
	const struct pending *pd = arg;

	if (pd->snap_err)
		return pd->snap_err;
	if (addr < pd->snap_addr || addr - pd->snap_addr > pd->snap_len ||
	    len > pd->snap_len - (addr - pd->snap_addr))
		return -EFAULT;
	memcpy(buf, pd->arena + (addr - pd->snap_addr), len);
	return 0;
}

/* Copies what the seed spec's formatter will read: D/S the dump, i386 A the stack. */
static void pend_seed(struct pending *pd, const struct up_spec *spec, const uprobe_regs_t *regs,
		      const struct up_fetch_env *env)
{
	uint64_t sp = pd->is32 ? regs->rsp & 0xffffffffu : regs->rsp;

	pd->regs = *regs;
	pd->snap_addr = pd->snap_len = 0;
	pd->snap_err = 0;
	if (spec->seed_type == UP_SEED_ARGS) {
		if (!pd->is32 || spec->size > UP_SPEC_SEED_NARGS_MAX)
			return; /* in registers */
		pd->snap_addr = (sp + 4) & 0xffffffffu;
		pd->snap_len = 4 * spec->size;
	} else {
		pd->snap_addr = spec->seed_type == UP_SEED_STACK ? sp : spec->daddr;
		pd->snap_len = spec->size <= sizeof(pd->arena) ? spec->size : 0;
	}
	if (pd->snap_len)
		pd->snap_err = env->read(env->ctx, pd->snap_addr, pd->arena, pd->snap_len);
}

/* Formats one pending hit: its thread runs again (or is gone) by now.  *cpu: its cpu, or
   -1 to read it (with the comm) from /proc. */
static void flush_one(struct up_trace *tr, struct pending *pd, int *cpu)
{
	struct up_fmt_event ev = { .addr = pd->addr, .ret_addr = pd->ret_addr, .vals = pd->vals };
	struct up_fetch_env env = { .regs = &pd->regs, .is32 = pd->is32, .read = read_snapshot,
				    .ctx = pd };
	struct comm_entry *c = &tr->comms[(unsigned)pd->tid % COMM_CACHE];
	struct up_fmt_ctx fc;

	if (*cpu < 0 || c->tid != pd->tid)
		c = tr_thread_info(tr, pd->pid, pd->tid, cpu);
	fc = (struct up_fmt_ctx){ .comm = c->comm[0] ? c->comm : NULL,
				  .pid = pd->pid,
				  .tid = pd->tid,
				  .cpu = *cpu,
				  .time_ns = pd->time_ns };
	env.comm = c->comm;
	if (pd->seed && tr->opts.json)
		FORMAT(tr, up_fmt_seed_hit_json(buf, size, &fc, &pd->ts->spec, &env));
	else if (pd->seed)
		FORMAT(tr, up_fmt_seed_hit(buf, size, &fc, &pd->ts->spec, &env));
	else if (tr->opts.json)
		FORMAT(tr, up_fmt_event_json(buf, size, &fc, &pd->ts->spec, &ev));
	else
		FORMAT(tr, up_fmt_event_text(buf, size, &fc, &pd->ts->spec, &ev));
}

void tr_flush_pending(struct up_trace *tr)
{
	int cpu = -1;

	/* one /proc read for the hits of one thread (several specs on one address) */
	for (unsigned i = 0; i < tr->npend; i++) {
		if (i && tr->pend[i].tid != tr->pend[i - 1].tid)
			cpu = -1;
		flush_one(tr, &tr->pend[i], &cpu);
	}
	if (tr->npend && tr->opts.flush && tr->opts.out)
		fflush(tr->opts.out); /* a reader sees each trap-path hit at once */
	tr->npend = 0;
}

int tr_read_mem(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct read_ctx *rc = arg;

	return uprobe_read(rc->tr->ctx, rc->pid, addr, buf, len);
}

static int read_record(void *arg, uint64_t addr, void *buf, size_t len)
{
	return uprobe_record_read(arg, addr, buf, len);
}

/* dur: a return's duration (the trap path: the library's measure of it) */
bool tr_filter_holds(const struct tspec *ts, const struct up_fetch_value *vals, uint64_t dur,
		     const char *comm)
{
	return up_filter_eval(&ts->filt, vals, dur, comm) &&
	       up_filter_eval(&ts->hfilt, vals, dur, comm);
}

void tr_filter_setup(struct tspec *ts)
{
	int a = up_filter_conds(&ts->filt, ts->conds, UP_FILTER_MAX);
	int b = up_filter_conds(&ts->hfilt, ts->conds + (a > 0 ? a : 0), UP_FILTER_MAX);

	/* a filter the agent cannot take is left out of conds, whole: the tracer
	   evaluates it (and the other with it) on every hit it sees */
	ts->tracer_filter = a < 0 || b < 0;
	ts->hist_conds = b > 0 ? (unsigned)b : 0;
	ts->nconds = (a > 0 ? (unsigned)a : 0) + ts->hist_conds;
}

/* A stack's return address that the library hijacked for a return probe: the real one. */
static uint64_t real_return(void *ctx, uint64_t slot, uint64_t value)
{
	struct tproc *tp = ctx;
	uint64_t ret;

	return uprobe_current_return(tp->tr->ctx, slot, value, &ret) ? value : ret;
}

/* A pc in the library's own code (a trampoline, the agent): its row. */
static int code_row(void *ctx, uint64_t pc, struct up_unwind_row *row)
{
	struct tproc *tp = ctx;

	return tp->tr->ctx ? uprobe_code_row(tp->tr->ctx, tp->pid, pc, row) : -1;
}

struct up_stack_syms *tr_syms_of(struct tproc *tp)
{
	if (!tp->syms) {
		tp->syms = up_stack_syms_new(tp->pid);
		if (tp->syms) {
			up_stack_syms_returns(tp->syms, real_return, tp);
			up_stack_syms_code(tp->syms, code_row, tp);
		}
	}
	return tp->syms;
}

/* Frame i of a walk, named (up_fetch_name_stack).  The walk ends before the first
   frame past the hit's own that is in no executable file mapping: it went through code
   built without frame pointers and read garbage (JIT code ends it too). */
static int frame_name(void *ctx, unsigned i, uint64_t addr, char *buf, size_t size)
{
	struct tproc *tp = ctx;

	if (!addr || (i && addr != UP_UNWIND_UNKNOWN && !up_stack_mapped(tr_syms_of(tp), addr)))
		return -1;
	return up_stack_name(tr_syms_of(tp), addr, buf, size);
}

/* A stack's addresses as the key's text: one named frame a line. */
const char *tr_stack_text(struct tproc *tp, const uint64_t *addr, unsigned n, char *buf,
			  size_t size)
{
	struct up_fetch_value v = { .frames = addr, .nframes = n };

	up_fetch_name_stack(&v, buf, size, frame_name, tp);
	return buf;
}

/* The $ustack values of a hit, named while the process's maps are the hit's. */
static void name_stacks(struct tproc *tp, const struct up_spec *sp, struct up_fetch_value *vals,
			char *buf, size_t size)
{
	size_t used = 0;

	if (!tp)
		return;
	for (int i = 0; i < sp->nargs && used < size; i++) {
		if (vals[i].type.kind != UP_TYPE_STACK)
			continue;
		up_fetch_name_stack(&vals[i], buf + used, size - used, frame_name, tp);
		used += vals[i].str_len + 1;
	}
}

/* A fast-path record: its thread ran on long ago, so it is formatted at once. */
static void report_record(struct tprobe *p, uprobe_regs_t *regs, bool is_return,
			  const struct hit *h, struct up_fetch_env *env)
{
	struct up_trace *tr = p->tr;
	struct tspec *ts = p->ts;
	pid_t pid = h->pid, tid = h->tid ? h->tid : h->pid;
	struct comm_entry *c = &tr->comms[(unsigned)tid % COMM_CACHE];
	struct up_fmt_ctx fc;
	int cpu = h->cpu;

	/* trap-path hits waiting to be formatted came first: the library drains the ring
	   before a trap hit's handlers run, so a record drained now is newer than they are
	   (whoever drains: the timer, a thread's exit, the next hit) */
	if (tr->npend)
		tr_flush_pending(tr);
	if (c->tid != tid || !c->comm[0])
		/* once per thread: the cpu is the record's */
		c = tr_thread_info(tr, pid, tid, &cpu);
	env->comm = c->comm;
	fc.comm = c->comm[0] ? c->comm : NULL;
	fc.pid = pid;
	fc.tid = tid;
	fc.cpu = h->cpu;
	fc.time_ns = h->time_ns;
	if (ts->spec.kind == UP_SPEC_SEED) {
		if (tr->opts.json)
			FORMAT(tr, up_fmt_seed_hit_json(buf, size, &fc, &ts->spec, env));
		else
			FORMAT(tr, up_fmt_seed_hit(buf, size, &fc, &ts->spec, env));
		return;
	}
	{
		struct up_fetch_value vals[ts->spec.nargs ? ts->spec.nargs : 1];
		static char arena[64 * 1024], stack_names[STACK_NAMES_MAX];
		struct up_fmt_event ev = {
			.addr = p->u.vaddr,
			.ret_addr = is_return ? regs->rip : 0,
			.vals = vals,
		};

		up_fetch_eval_all(&ts->spec, env, vals, arena, sizeof(arena));
		/* the agent kept it on the conditions it has; the rest of the filter (||, !,
		   strings, comm) is the tracer's, on the record's values ($duration is not
		   in a record: such a filter keeps its probe on the trap path) */
		if (ts->tracer_filter && !tr_filter_holds(ts, vals, 0, c->comm))
			return;
		name_stacks(p->tp, &ts->spec, vals, stack_names, sizeof(stack_names));
		if (tr->opts.json)
			FORMAT(tr, up_fmt_event_json(buf, size, &fc, &ts->spec, &ev));
		else
			FORMAT(tr, up_fmt_event_text(buf, size, &fc, &ts->spec, &ev));
	}
}

static void report_hit(struct tprobe *p, uprobe_regs_t *regs, bool is_return,
		       const struct hit *h)
{
	struct up_trace *tr = p->tr;
	struct tspec *ts = p->ts;
	pid_t pid = h->pid, tid = h->tid;
	struct read_ctx rc = { .tr = tr, .pid = pid };
	struct tproc *tp = tr_proc_of(tr, pid);
	struct pending *pd;
	struct up_fetch_env env = {
		.regs = regs,
		.is32 = tp ? tp->is32 : false,
		.read = h->rec ? read_record : tr_read_mem,
		.ctx = h->rec ? (void *)h->rec : (void *)&rc,
		.retval = regs->rax,
		.has_retval = is_return,
		.file_bias = p->file_bias,
		.at_entry = up_spec_at_function_entry(&ts->spec),
		.syms = tp ? tr_syms_of(tp) : NULL, /* unwind tables (a record: the agent walked them) */
	};

	if (tr->off || !ts->enabled || ts->removed)
		return;
	if (tr->pid_filter && pid != tr->pid_filter)
		return;
	if (!h->rec)
		ts->hits++; /* records are counted by the library, with what it dropped */
	if (ts->hist) {
		tr_hist_hit(p, regs, is_return, h, &env);
		return;
	}
	if (ts->hit_fn) {
		tr_hook_hit(p, regs, is_return, h, &env);
		return;
	}
	if (!tr->opts.out)
		return;
	if (h->rec) {
		report_record(p, regs, is_return, h, &env);
		return;
	}
	if (tr->opts.raw) {
		tr_raw_trap(p, regs, is_return, h, &env);
		return;
	}
	/* the trap path: the values now, the formatting once the thread runs again */
	if (tr->npend == PEND_MAX)
		tr_flush_pending(tr); /* hits of one dispatch stay in order */
	pd = &tr->pend[tr->npend++];
	/* field by field: the record is 130 KiB */
	pd->seed = ts->spec.kind == UP_SPEC_SEED;
	pd->is32 = env.is32;
	pd->ts = ts;
	pd->pid = pid;
	pd->tid = tid;
	pd->time_ns = h->time_ns;
	pd->addr = p->u.vaddr;
	pd->ret_addr = is_return ? regs->rip : 0;
	if (pd->seed) {
		pend_seed(pd, &ts->spec, regs, &env);
	} else {
		env.comm = tr_comm_cached(tr, pid, tid);
		up_fetch_eval_all(&ts->spec, &env, pd->vals, pd->arena, sizeof(pd->arena));
		/* now: the process may be gone when the line is made */
		name_stacks(tp, &ts->spec, pd->vals, pd->stack_names, sizeof(pd->stack_names));
		uint64_t dur = 0;

		if (is_return)
			uprobe_current_duration(tr->ctx, &dur);
		if (!tr_filter_holds(ts, pd->vals, dur, env.comm)) {
			tr->npend--; /* the filter says no */
			return;
		}
	}
	tr->pend_break = true;
	uprobe_ctx_break(tr->ctx);
}

static void report(struct tprobe *p, uprobe_regs_t *regs, bool is_return)
{
	struct hit h = {
		.pid = uprobe_current_pid(p->tr->ctx),
		.tid = uprobe_current_tid(p->tr->ctx),
		.cpu = -1,
		.time_ns = now_ns(),
	};

	report_hit(p, regs, is_return, &h);
}

void tr_on_hit(struct uprobe *u, uprobe_regs_t *regs)
{
	report(u->data, regs, false);
}

/* Drops tid's kept entries that sp shows are gone: at sp or below (deeper), and p's at
   sp itself (a function the thread left by longjmp or an exception). */
static void eargs_drop(struct up_trace *tr, pid_t tid, uint64_t sp)
{
	unsigned n = 0;

	for (unsigned i = 0; i < tr->neargs; i++) {
		const struct entry_args *e = &tr->eargs[i];

		if (e->tid == tid && e->sp <= sp)
			continue;
		tr->eargs[n++] = *e;
	}
	tr->neargs = n;
}

/* The trap path's entry of an r: event that reads $argN: its arguments are kept. */
void tr_on_entry(struct uprobe *u, uprobe_regs_t *regs)
{
	struct tprobe *p = u->data;
	struct up_trace *tr = p->tr;
	struct read_ctx rc = { .tr = tr, .pid = uprobe_current_pid(tr->ctx) };
	struct up_fetch_env env = {
		.regs = regs, .is32 = p->tp->is32, .read = tr_read_mem, .ctx = &rc,
	};
	pid_t tid = uprobe_current_tid(tr->ctx);
	struct entry_args *e;

	eargs_drop(tr, tid, regs->rsp);
	if (tr->neargs == tr->capeargs) {
		unsigned cap = tr->capeargs ? 2 * tr->capeargs : 64;
		struct entry_args *v = realloc(tr->eargs, cap * sizeof(*v));

		if (!v)
			return; /* its return then reads 0s */
		tr->eargs = v;
		tr->capeargs = cap;
	}
	e = &tr->eargs[tr->neargs++];
	e->p = p;
	e->tid = tid;
	e->sp = regs->rsp;
	for (unsigned i = 0; i < 6; i++)
		if (up_fetch_abi_arg(&env, i + 1, &e->v[i]))
			e->v[i] = 0;
}

void tr_on_ret(struct uprobe *u, uprobe_regs_t *regs)
{
	struct tprobe *p = u->data;
	struct up_trace *tr = p->tr;
	uprobe_regs_t r;
	uint64_t *w = (uint64_t *)&r, sp;
	pid_t tid;

	if (!p->eargs) {
		report(p, regs, true);
		return;
	}
	/* a copy: the frame words that carry the entry's arguments are the live fs_base
	   and segment registers */
	r = *regs;
	memset(&w[UPROBE_ENTRY_ARG_WORD], 0, 6 * sizeof(*w));
	tid = uprobe_current_tid(tr->ctx);
	sp = regs->rsp - (p->tp->is32 ? 4 : 8); /* where the return address was */
	for (unsigned i = tr->neargs; i-- > 0;) {
		const struct entry_args *e = &tr->eargs[i];

		if (e->tid == tid && e->sp == sp && e->p == p) {
			memcpy(&w[UPROBE_ENTRY_ARG_WORD], e->v, sizeof(e->v));
			break;
		}
	}
	eargs_drop(tr, tid, sp);
	report(p, &r, true);
}

/* A hit the fast path recorded in-process. */
void tr_on_record(struct uprobe *u, const struct uprobe_record *rec)
{
	struct hit h = {
		.pid = rec->pid,
		.tid = rec->tid,
		.cpu = rec->cpu,
		.time_ns = rec->time_ns,
		.rec = rec,
	};
	uprobe_regs_t regs = *rec->regs;

	report_hit(u->data, &regs, rec->is_return, &h);
}
