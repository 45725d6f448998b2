// SPDX-License-Identifier: MIT
/*
 * The tracing session: specs -> uprobes per process -> lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <uprobe/uprobe.h>

#include "sym/sym.h"
#include "trace/fetch.h"
#include "trace/filter.h"
#include "trace/format.h"
#include "trace/hist.h"
#include "trace/raw.h"
#include "trace/refctr.h"
#include "trace/session.h"
#include "trace/spec.h"
#include "trace/stack.h"

struct tspec {
	struct up_spec spec;
	char *text;
	char label[192]; /* for the counts: the event or the seed line */
	uint64_t hits;
	/* file targets */
	bool is_file;
	dev_t dev;
	ino_t ino;
	uint64_t file_off; /* the probed instruction's offset in the file */
	bool fatal;	   /* cannot ever be armed: reported once */
	bool removed;	   /* up_trace_remove: gone, its index kept */
	bool enabled;	   /* events/GRP/EVENT/enable */
	unsigned index;	   /* in tr->specs */
	struct uprobe_cond conds[2 * UP_FILTER_MAX]; /* --filter and the trigger's, on this
							event's arguments */
	unsigned nconds;
	/* --trigger: the event's hits are aggregated into hist's table, not printed */
	struct up_hist *hist;
	char *hist_text;
	unsigned hist_conds; /* of conds, the trigger's (the last ones) */
	char *filter_text;   /* events/GRP/EVENT/filter: the conditions before the trigger's */
	struct up_filter comm; /* its comm term, if any: applied by the tracer */
};

struct tproc;

struct tprobe {
	struct uprobe u;
	struct uprobe_capture cap; /* the fast path's: what its records hold */
	struct uprobe_fetch *fetch;
	struct uprobe_cond *cond;
	bool recording, counted;
	struct uprobe_agg agg; /* a hist's probe: what the agent aggregates */
	const struct up_hist *hist; /* the trigger agg was made for */
	bool eargs; /* an r: event that reads $argN: the entry's arguments */
	int aval[UP_HIST_VALS_MAX]; /* hist val i is the agent's val aval[i] (-1: hitcount) */
	struct up_trace *tr;
	struct tspec *ts;
	struct tproc *tp;
	uint64_t file_bias;
	uint64_t ref_addr; /* its USDT semaphore, incremented (0: none) */
	struct tprobe *next;
};

struct tproc {
	struct tproc *next;
	pid_t pid;
	bool is32, gone, rescan;
	bool *armed; /* per spec */
	struct tprobe *probes;
	struct uprobe ldso; /* the dynamic linker's _dl_debug_state */
	struct up_stack_syms *syms; /* names of stack addresses, made on demand */
	struct up_refctr_set refs;  /* USDT semaphores we incremented here */
	struct up_trace *tr;
	unsigned drops; /* times drop_probes ran: an exec handled */
};

struct comm_entry {
	pid_t tid;
	int stat_fd;
	char comm[17];
	bool in_raw; /* --format raw: the file has this name of the thread */
};

#define COMM_CACHE 64

/*
 * A hit, fetched while its thread was stopped and formatted after the thread was
 * resumed: report() fills it and breaks the engine's loop, up_trace_run() formats it
 * before waiting again.  The thread's cpu and comm are read then too, so the stop itself
 * costs the wait and the three ptrace calls, no /proc read, no formatting.  An event
 * spec's values are fetched into vals; a seed spec's D, S or A bytes are copied into
 * arena (snap_*), which the formatter then reads instead of the process.
 */
#define PEND_MAX 4
#define STACK_NAMES_MAX (UP_SPEC_USTACK_MAX * 256) /* a $ustack's frames, named */

struct pending {
	bool seed, is32;
	struct tspec *ts;
	pid_t pid, tid;
	uint64_t time_ns, addr, ret_addr;
	struct user_regs_struct regs; /* seed specs */
	uint64_t snap_addr;
	size_t snap_len;
	int snap_err;
	struct up_fetch_value vals[UP_SPEC_MAX_ARGS];
	char arena[UP_SPEC_SEED_SIZE_MAX]; /* the strings of vals, or the seed's bytes */
	char stack_names[STACK_NAMES_MAX]; /* the frames of $ustack values, named */
};

struct up_trace {
	/* unregistrations under way (disarm_unmapped): probes are retired, not freed */
	unsigned disarming;
	struct up_trace_opts opts;
	struct uprobe_ctx *ctx;
	struct tspec **specs; /* pointers: tprobes keep theirs while the array grows */
	unsigned nspecs;
	bool off;		/* tracing_on = 0: hits are neither counted nor printed */
	struct tproc *procs;
	pid_t launched;
	int status;
	bool header_done, rescan;
	int out_failed; /* errno of a failed write of the trace */
	struct tprobe *retired; /* unregistered from a handler, freed at the end */
	uint64_t lost;		/* fast-path records dropped (the ring was full), of probes gone */
	pid_t pid_filter;	/* set_event_pid: only this process's hits (0: all) */
	struct comm_entry comms[COMM_CACHE];
	struct up_filter filter;
	bool has_filter;
	char *line;
	size_t linecap;
	bool pend_break; /* the engine's loop was broken to format tr->pend */
	unsigned npend;	 /* hits in pend, in order: several specs on one address */
	struct pending pend[PEND_MAX];
	/* r: events that read $argN, on the trap path: the entry's arguments, until the
	   return (innermost last) */
	struct entry_args {
		const struct tprobe *p;
		pid_t tid;
		uint64_t sp; /* at the entry: the return comes with sp + the address size */
		uint64_t v[6];
	} *eargs;
	unsigned neargs, capeargs;
	/* --format raw: probes numbered for the file */
	uint32_t raw_next;
	uint64_t raw_records;
	uint64_t *raw_buf;  /* a trap-path record being made */
	size_t raw_len, raw_cap;
};

static void tprobe_free(struct tprobe *p)
{
	if (!p)
		return;
	free(p->fetch);
	free(p->cond);
	free(p);
}

/* ---- small things --------------------------------------------------------------------- */

static void tlog(struct up_trace *tr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tlog(struct up_trace *tr, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	if (!tr->opts.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tr->opts.log(tr->opts.log_arg, msg);
}

static void lib_log(void *arg, const char *msg)
{
	struct up_trace *tr = arg;

	if (tr->opts.log)
		tr->opts.log(tr->opts.log_arg, msg);
}

static struct tproc *proc_of(struct up_trace *tr, pid_t pid)
{
	for (struct tproc *tp = tr->procs; tp; tp = tp->next)
		if (tp->pid == pid && !tp->gone)
			return tp;
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* comm and cpu of a thread, from /proc/PID/task/TID/stat (kept open: pread rereads it). */
static struct comm_entry *thread_info(struct up_trace *tr, pid_t pid, pid_t tid, int *cpu)
{
	struct comm_entry *c = &tr->comms[(unsigned)tid % COMM_CACHE];
	char buf[1024], *open_paren, *close_paren, *p;
	ssize_t n;
	int field;

	if (c->tid != tid) {
		char path[64];

		if (c->stat_fd > 0)
			close(c->stat_fd);
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
		c->tid = tid;
		c->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
		c->comm[0] = '\0';
		c->in_raw = false;
	}
	*cpu = 0;
	if (c->stat_fd <= 0)
		return c;
	n = pread(c->stat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return c;
	buf[n] = '\0';
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return c;
	snprintf(c->comm, sizeof(c->comm), "%.*s", (int)(close_paren - open_paren - 1),
		 open_paren + 1);
	/* field 39 is the cpu it last ran on; field 3 follows the ')' */
	p = close_paren + 2;
	for (field = 3; field < 39 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (p)
		*cpu = atoi(p);
	return c;
}

static void forget_threads(struct up_trace *tr)
{
	for (unsigned i = 0; i < COMM_CACHE; i++) {
		if (tr->comms[i].stat_fd > 0)
			close(tr->comms[i].stat_fd);
		memset(&tr->comms[i], 0, sizeof(tr->comms[i]));
	}
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

/* ---- hits ------------------------------------------------------------------------------ */

/* The comm for $comm while the thread is stopped: /proc is read once per thread only. */
static const char *comm_cached(struct up_trace *tr, pid_t pid, pid_t tid)
{
	struct comm_entry *c = &tr->comms[(unsigned)tid % COMM_CACHE];
	int cpu;

	if (c->tid != tid || !c->comm[0])
		c = thread_info(tr, pid, tid, &cpu);
	return c->comm;
}

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
		c = thread_info(tr, pd->pid, pd->tid, cpu);
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

static void flush_pending(struct up_trace *tr)
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

struct read_ctx {
	struct up_trace *tr;
	pid_t pid;
};

static int read_mem(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct read_ctx *rc = arg;

	return uprobe_read(rc->tr->ctx, rc->pid, addr, buf, len);
}

static int read_record(void *arg, uint64_t addr, void *buf, size_t len)
{
	return uprobe_record_read(arg, addr, buf, len);
}

/* A hit as the handler gets it (rec NULL: the thread is stopped) or as a record. */
struct hit {
	pid_t pid, tid;
	int cpu; /* -1: ask /proc */
	uint64_t time_ns;
	const struct uprobe_record *rec;
};

/* dur: a return's duration (the trap path: the library's measure of it) */
static bool filter_holds(const struct tspec *ts, const struct up_fetch_value *vals, uint64_t dur)
{
	return up_filter_holds(ts->conds, ts->nconds, vals, dur);
}

/* ---- stacks ------------------------------------------------------------------------- */

static struct up_stack_syms *syms_of(struct tproc *tp)
{
	if (!tp->syms)
		tp->syms = up_stack_syms_new(tp->pid);
	return tp->syms;
}

/* Frame i of a walk, named (up_fetch_name_stack).  The walk ends before the first
   frame past the hit's own that is in no executable file mapping: it went through code
   built without frame pointers and read garbage (JIT code ends it too). */
static int frame_name(void *ctx, unsigned i, uint64_t addr, char *buf, size_t size)
{
	struct tproc *tp = ctx;

	if (!addr || (i && !up_stack_mapped(syms_of(tp), addr)))
		return -1;
	return up_stack_name(syms_of(tp), addr, buf, size);
}

/* A stack's addresses as the key's text: one named frame a line. */
static const char *stack_text(struct tproc *tp, const uint64_t *addr, unsigned n, char *buf,
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
		flush_pending(tr);
	if (c->tid != tid || !c->comm[0])
		c = thread_info(tr, pid, tid, &cpu); /* once per thread: the cpu is the record's */
	if (!up_filter_comm_holds(&ts->comm, c->comm))
		return; /* the agent kept it on the numbers; the name says no */
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
		name_stacks(p->tp, &ts->spec, vals, stack_names, sizeof(stack_names));
		if (tr->opts.json)
			FORMAT(tr, up_fmt_event_json(buf, size, &fc, &ts->spec, &ev));
		else
			FORMAT(tr, up_fmt_event_text(buf, size, &fc, &ts->spec, &ev));
	}
}

/* ---- histograms (--trigger) ----------------------------------------------------------- */

#define HIST_TEXT_MAX 4096 /* a key field as text: a string, a symbol, a named stack */

/* A number as the agent sees it: s-types sign-extended from their size. */
static uint64_t hist_num(const struct up_fetch_value *v)
{
	uint64_t u = v->err ? 0 : v->u;

	if (!v->err && v->type.kind == UP_TYPE_S && v->type.size && v->type.size < 8 &&
	    (u >> (v->type.size * 8 - 1) & 1))
		u |= ~0ull << (v->type.size * 8);
	return u;
}

/* A .sym or .sym-offset key's text: the function that holds the address. */
static const char *sym_text(struct tproc *tp, const struct up_hist_field *f, uint64_t v,
			    char *buf, size_t size)
{
	if (f->mod != UP_HIST_MOD_SYM && f->mod != UP_HIST_MOD_SYM_OFFSET)
		return NULL;
	up_stack_name(syms_of(tp), v, buf, size);
	if (f->mod == UP_HIST_MOD_SYM) {
		char *plus = strchr(buf, '+');

		if (plus && buf[0] != '[')
			*plus = '\0'; /* the kernel's .sym: the name alone */
	}
	return buf;
}

/* A trap-path hit of a hist's event: its key and vals, added to the table. */
static void hist_hit(struct tprobe *p, uprobe_regs_t *regs, bool is_return, const struct hit *h,
		     struct up_fetch_env *env)
{
	static char arena[64 * 1024], text[UP_HIST_KEYS_MAX][HIST_TEXT_MAX];
	struct tspec *ts = p->ts;
	struct up_hist *hi = ts->hist;
	struct up_fetch_value vals[ts->spec.nargs ? ts->spec.nargs : 1];
	uint64_t v[UP_HIST_VALS_MAX] = { 0 }, dur = 0;
	struct up_hist_key k = { { 0 }, { NULL } };

	env->comm = comm_cached(p->tr, h->pid, h->tid);
	up_fetch_eval_all(&ts->spec, env, vals, arena, sizeof(arena));
	if (is_return)
		uprobe_current_duration(p->tr->ctx, &dur);
	if (ts->nconds && !filter_holds(ts, vals, dur))
		return;
	for (unsigned i = 0; i < hi->nkeys; i++) {
		const struct up_hist_field *f = &hi->key[i];
		uint64_t addr[UP_HIST_STACK_DEPTH];
		unsigned n;

		switch (f->src) {
		case UP_HIST_SRC_ARG:
			if (f->is_string) {
				const struct up_fetch_value *sv = &vals[f->arg];
				size_t len = sv->err ? 7 : sv->str_len;

				if (len > UP_HIST_STRING_KEY - 1)
					len = UP_HIST_STRING_KEY - 1; /* as the agent cuts it */
				memcpy(text[i], sv->err ? "(fault)" : sv->str, len);
				text[i][len] = '\0';
				k.str[i] = text[i];
				break;
			}
			k.num[i] = up_hist_key_value(f, hist_num(&vals[f->arg]));
			k.str[i] = sym_text(p->tp, f, k.num[i], text[i], sizeof(text[i]));
			break;
		case UP_HIST_SRC_PID:
			k.num[i] = (uint64_t)h->tid;
			break;
		case UP_HIST_SRC_DURATION:
			k.num[i] = up_hist_key_value(f, dur);
			break;
		case UP_HIST_SRC_STACK:
			n = up_stack_walk(regs, is_return ? regs->rip : p->u.vaddr,
					  up_spec_at_function_entry(&ts->spec),
					  env->read, env->ctx, addr, UP_HIST_STACK_DEPTH);
			k.str[i] = stack_text(p->tp, addr, n, text[i], sizeof(text[i]));
			break;
		default:
			break;
		}
	}
	for (unsigned i = 0; i < hi->nvals; i++) {
		const struct up_hist_field *f = &hi->val[i];

		if (f->src == UP_HIST_SRC_ARG)
			v[i] = hist_num(&vals[f->arg]);
		else if (f->src == UP_HIST_SRC_DURATION)
			v[i] = dur;
	}
	if (up_hist_table_add(hi->base, &k, 1, v) == -ENOMEM)
		tlog(p->tr, "'%s': out of memory for the histogram", ts->hist_text);
}

/* An entry of an agent's table (hits already combined), added to t. */
static void hist_merge(struct tprobe *p, const struct uprobe_agg_entry *e, struct up_hist_table *t)
{
	static char text[UP_HIST_KEYS_MAX][HIST_TEXT_MAX];
	const struct up_hist *hi = p->ts->hist;
	struct up_hist_key k = { { 0 }, { NULL } };
	uint64_t v[UP_HIST_VALS_MAX] = { 0 };
	unsigned w = 0;

	if (!e->key) {
		up_hist_table_drop(t, e->val[0]);
		return;
	}
	for (unsigned i = 0; i < hi->nkeys && i < p->agg.nkeys; i++) {
		const struct up_hist_field *f = &hi->key[i];
		unsigned words = p->agg.key[i].words, n = 0;

		if (w + words > e->nkey)
			return; /* not this probe's layout: cannot happen */
		if (f->src == UP_HIST_SRC_STACK) {
			while (n < words && e->key[w + n])
				n++;
			k.str[i] = stack_text(p->tp, e->key + w, n, text[i], sizeof(text[i]));
		} else if (f->src == UP_HIST_SRC_ARG && f->is_string) {
			memcpy(text[i], e->key + w, words * 8);
			text[i][words * 8 - 1] = '\0';
			k.str[i] = text[i];
		} else {
			k.num[i] = e->key[w];
			k.str[i] = sym_text(p->tp, f, k.num[i], text[i], sizeof(text[i]));
		}
		w += words;
	}
	for (unsigned i = 0; i < hi->nvals; i++)
		if (p->aval[i] >= 0 && (unsigned)p->aval[i] + 1 < e->nval)
			v[i] = e->val[1 + p->aval[i]];
	if (up_hist_table_add(t, &k, e->val[0], v) == -ENOMEM)
		tlog(p->tr, "'%s': out of memory for the histogram", p->ts->hist_text);
}

/* The agent's tables of a probe that leaves the fast path (exit, exec, removal). */
static void on_agg(struct uprobe *u, const struct uprobe_agg_entry *e)
{
	struct tprobe *p = u->data;

	/* a probe whose trigger was taken away (or replaced) while it went */
	if (!p->ts->hist || p->hist != p->ts->hist)
		return;
	hist_merge(p, e, p->ts->hist->base);
}

/* What the agent aggregates for a hist's probe; -ENOTSUP where it cannot (the trap
   path then feeds the same table). */
static int build_agg(struct tprobe *p)
{
	const struct up_hist *hi = p->ts->hist;
	const struct up_spec *sp = &p->ts->spec;
	struct uprobe_agg *g = &p->agg;
	unsigned nv = 0;

	memset(g, 0, sizeof(*g));
	g->size = hi->size;
	g->at_entry = up_spec_at_function_entry(sp);
	g->nkeys = hi->nkeys;
	for (unsigned i = 0; i < hi->nkeys; i++) {
		const struct up_hist_field *f = &hi->key[i];
		struct uprobe_agg_key *k = &g->key[i];

		k->words = 1;
		k->xform = f->mod == UP_HIST_MOD_LOG2	   ? UPROBE_AGG_LOG2
			   : f->mod == UP_HIST_MOD_BUCKETS ? UPROBE_AGG_BUCKETS
							   : UPROBE_AGG_RAW;
		k->buckets = f->buckets;
		switch (f->src) {
		case UP_HIST_SRC_ARG: {
			enum up_fetch_op op = sp->args[f->arg].ops[0].op;

			if (op == UP_FOP_COMM || op == UP_FOP_DATA)
				return -ENOTSUP; /* the tracer's own values */
			k->src = UPROBE_AGG_FETCH;
			k->fetch = (unsigned)f->arg;
			if (f->is_string)
				k->words = UP_HIST_STRING_KEY / 8;
			break;
		}
		case UP_HIST_SRC_DURATION:
			k->src = UPROBE_AGG_DURATION;
			break;
		case UP_HIST_SRC_STACK:
			k->src = UPROBE_AGG_STACK;
			k->words = UP_HIST_STACK_DEPTH;
			break;
		default:
			return -ENOTSUP; /* common_pid: the agent knows threads by their TLS */
		}
	}
	for (unsigned i = 0; i < hi->nvals; i++) {
		const struct up_hist_field *f = &hi->val[i];
		struct uprobe_agg_val *v = &g->val[nv];

		p->aval[i] = -1;
		if (f->src == UP_HIST_SRC_HITCOUNT)
			continue;
		if (f->src == UP_HIST_SRC_ARG) {
			enum up_fetch_op op = sp->args[f->arg].ops[0].op;

			if (op == UP_FOP_COMM || op == UP_FOP_DATA)
				return -ENOTSUP;
			v->src = UPROBE_AGG_FETCH;
			v->fetch = (unsigned)f->arg;
		} else if (f->src == UP_HIST_SRC_DURATION) {
			v->src = UPROBE_AGG_DURATION;
		} else {
			return -ENOTSUP;
		}
		v->op = f->op == UP_HIST_OP_MIN	  ? UPROBE_AGG_MIN
			: f->op == UP_HIST_OP_MAX ? UPROBE_AGG_MAX
						  : UPROBE_AGG_SUM;
		v->is_signed = f->is_signed;
		p->aval[i] = (int)nv++;
	}
	g->nvals = nv;
	return 0;
}

struct live_read {
	struct tprobe *p;
	struct up_hist_table *t;
};

static void live_one(void *arg, const struct uprobe_agg_entry *e)
{
	struct live_read *lr = arg;

	hist_merge(lr->p, e, lr->t);
}

/*
 * h (parsed from text) becomes ts's trigger: its fields bound to the event's arguments,
 * its filter added to the event's conditions.  0, or a negative errno with err; h is
 * the caller's to free on failure.
 */
static int attach_hist(struct tspec *ts, struct up_hist *h, const char *text, char *err,
		       size_t errlen)
{
	struct up_spec_err se = { .pos = -1, .len = 1 };
	unsigned base = ts->nconds;
	int rc;

	rc = up_hist_resolve(h, &ts->spec, &se);
	if (rc) {
		if (rc == -EINVAL)
			up_spec_err_format(text, &se, err, errlen);
		return rc;
	}
	if (ts->hist) {
		snprintf(err, errlen, "'%s': %s has a hist trigger already (one an event)\n", text,
			 ts->label);
		return -EEXIST;
	}
	if (ts->comm.has_comm) {
		snprintf(err, errlen, "'%s': a hist trigger and a comm filter on one event are not "
				      "supported\n", text);
		return -EINVAL;
	}
	if (h->filter) {
		struct up_filter flt;
		const char *at = strstr(text, h->filter);
		char msg[256];

		rc = up_filter_parse(h->filter, &flt, &se);
		if (!rc && (flt.has_comm || ts->comm.has_comm)) {
			/* the agent aggregates in the process, where there is no name to match */
			snprintf(err, errlen, "'%s': a hist trigger and a comm filter on one event "
					      "are not supported\n", text);
			return -EINVAL;
		}
		if (!rc && ts->nconds + flt.n > sizeof(ts->conds) / sizeof(ts->conds[0]))
			rc = -E2BIG;
		if (!rc && up_filter_resolve(&flt, &ts->spec, ts->conds + ts->nconds, msg,
					     sizeof(msg))) {
			snprintf(err, errlen, "'%s': %s\n", text, msg);
			return -EINVAL;
		}
		if (rc) {
			if (rc == -EINVAL && at && se.pos >= 0)
				se.pos += (int)(at - text);
			if (rc == -EINVAL)
				up_spec_err_format(text, &se, err, errlen);
			else
				snprintf(err, errlen, "'%s': too many conditions\n", text);
			return -EINVAL;
		}
		ts->nconds += flt.n;
	}
	ts->hist_text = strdup(text);
	if (!ts->hist_text) {
		ts->nconds = base;
		return -ENOMEM;
	}
	ts->hist_conds = ts->nconds - base;
	ts->hist = h;
	return 0;
}

/* ts's trigger goes: its table and its conditions. */
static void detach_hist(struct tspec *ts)
{
	ts->nconds -= ts->hist_conds;
	ts->hist_conds = 0;
	up_hist_free(ts->hist);
	free(ts->hist);
	ts->hist = NULL;
	free(ts->hist_text);
	ts->hist_text = NULL;
}

int up_trace_add_trigger(struct up_trace *tr, const char *text, char *err, size_t errlen)
{
	struct up_hist *h = calloc(1, sizeof(*h));
	struct up_spec_err se = { .pos = -1, .len = 1 };
	int rc, i;

	err[0] = '\0';
	if (!h)
		return -ENOMEM;
	rc = up_hist_parse(text, true, h, &se);
	if (rc) {
		free(h);
		if (rc == -EINVAL)
			up_spec_err_format(text, &se, err, errlen);
		return rc;
	}
	i = up_trace_find(tr, h->group[0] ? h->group : NULL, h->event);
	if (i < 0 || tr->specs[i]->spec.kind != UP_SPEC_EVENT) {
		snprintf(err, errlen, "'%s': no event %s%s%s: a trigger names an event given with "
				      "-e (p:GRP/EVENT ...)\n", text, h->group, h->group[0] ? "/" : "",
			 h->event);
		rc = -ENOENT;
	} else {
		rc = attach_hist(tr->specs[i], h, text, err, errlen);
	}
	if (rc) {
		up_hist_free(h);
		free(h);
	}
	return rc;
}

int up_trace_print_hist(struct up_trace *tr, unsigned i, enum up_hist_style style, FILE *out)
{
	struct tspec *ts = i < tr->nspecs ? tr->specs[i] : NULL;
	struct up_hist_table *t;
	int rc;

	if (!ts || !ts->hist)
		return -ENOENT;
	t = up_hist_table_clone(ts->hist->base);
	if (!t)
		return -ENOMEM;
	/* what the agents hold now, on top of what came from the trap path and from the
	   tables of probes gone */
	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		for (struct tprobe *p = tp->probes; p; p = p->next) {
			struct live_read lr = { p, t };

			if (p->ts == ts && p->u.agg_handler)
				uprobe_agg_read(tr->ctx, &p->u, live_one, &lr);
		}
	}
	rc = up_hist_print(ts->hist, t, style, out);
	up_hist_table_free(t);
	return rc;
}

void up_trace_print_hists(struct up_trace *tr, enum up_hist_style style, FILE *out)
{
	unsigned n = 0;

	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];

		if (!ts->hist || ts->removed)
			continue;
		if (n++ && style != UP_HIST_JSON)
			fputc('\n', out);
		if (style == UP_HIST_TEXT && up_trace_nhists(tr) > 1)
			fprintf(out, "# %s\n", ts->label); /* which event's hist file this is */
		up_trace_print_hist(tr, i, style, out);
	}
	fflush(out);
}

unsigned up_trace_nhists(const struct up_trace *tr)
{
	unsigned n = 0;

	for (unsigned i = 0; i < tr->nspecs; i++)
		n += tr->specs[i]->hist && !tr->specs[i]->removed;
	return n;
}

static void raw_trap(struct tprobe *p, uprobe_regs_t *regs, bool is_return, const struct hit *h,
		     const struct up_fetch_env *env);

static void report_hit(struct tprobe *p, uprobe_regs_t *regs, bool is_return,
		       const struct hit *h)
{
	struct up_trace *tr = p->tr;
	struct tspec *ts = p->ts;
	pid_t pid = h->pid, tid = h->tid;
	struct read_ctx rc = { .tr = tr, .pid = pid };
	struct tproc *tp = proc_of(tr, pid);
	struct pending *pd;
	struct up_fetch_env env = {
		.regs = regs,
		.is32 = tp ? tp->is32 : false,
		.read = h->rec ? read_record : read_mem,
		.ctx = h->rec ? (void *)h->rec : (void *)&rc,
		.retval = regs->rax,
		.has_retval = is_return,
		.file_bias = p->file_bias,
		.at_entry = up_spec_at_function_entry(&ts->spec),
	};

	if (tr->off || !ts->enabled || ts->removed)
		return;
	if (tr->pid_filter && pid != tr->pid_filter)
		return;
	if (!h->rec)
		ts->hits++; /* records are counted by the library, with what it dropped */
	if (ts->hist) {
		hist_hit(p, regs, is_return, h, &env);
		return;
	}
	if (!tr->opts.out)
		return;
	if (h->rec) {
		report_record(p, regs, is_return, h, &env);
		return;
	}
	if (tr->opts.raw) {
		raw_trap(p, regs, is_return, h, &env);
		return;
	}
	/* the trap path: the values now, the formatting once the thread runs again */
	if (tr->npend == PEND_MAX)
		flush_pending(tr); /* hits of one dispatch stay in order */
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
		env.comm = comm_cached(tr, pid, tid);
		up_fetch_eval_all(&ts->spec, &env, pd->vals, pd->arena, sizeof(pd->arena));
		/* now: the process may be gone when the line is made */
		name_stacks(tp, &ts->spec, pd->vals, pd->stack_names, sizeof(pd->stack_names));
		uint64_t dur = 0;

		if (is_return)
			uprobe_current_duration(tr->ctx, &dur);
		if ((ts->nconds && !filter_holds(ts, pd->vals, dur)) ||
		    !up_filter_comm_holds(&ts->comm, env.comm)) {
			tr->npend--; /* the filter says no */
			return;
		}
	}
	tr->pend_break = true;
	uprobe_ctx_break(tr->ctx);
}

static int arm_proc(struct up_trace *tr, struct tproc *tp);

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

static void on_hit(struct uprobe *u, uprobe_regs_t *regs)
{
	report(u->data, regs, false);
}

/* Does an r: event read $argN (the entry's arguments)? */
static bool uses_entry_args(const struct tspec *ts)
{
	if (ts->spec.kind != UP_SPEC_EVENT || !ts->spec.is_return)
		return false;
	for (int i = 0; i < ts->spec.nargs; i++)
		for (int k = 0; k < ts->spec.args[i].nops; k++)
			if (ts->spec.args[i].ops[k].op == UP_FOP_ARG)
				return true;
	return false;
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
static void on_entry(struct uprobe *u, uprobe_regs_t *regs)
{
	struct tprobe *p = u->data;
	struct up_trace *tr = p->tr;
	struct read_ctx rc = { .tr = tr, .pid = uprobe_current_pid(tr->ctx) };
	struct up_fetch_env env = {
		.regs = regs, .is32 = p->tp->is32, .read = read_mem, .ctx = &rc,
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

static void on_ret(struct uprobe *u, uprobe_regs_t *regs)
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
static void on_record(struct uprobe *u, const struct uprobe_record *rec)
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

static void on_ldso(struct uprobe *u, uprobe_regs_t *regs)
{
	struct tproc *tp = u->data;
	struct tproc *cur = proc_of(tp->tr, uprobe_current_pid(tp->tr->ctx));

	(void)regs;
	/*
	 * The link map changed: arm what is mapped now, before the thread goes on (the
	 * registrations are queued and done before it resumes).
	 */
	if (cur)
		arm_proc(tp->tr, cur);
}

static void on_registered(struct uprobe *u, int reg, int result)
{
	struct tprobe *p = u->data;

	if (reg && result)
		tlog(p->tr, "'%s': cannot probe 0x%" PRIx64 " in process %d: %s", p->ts->text,
		     u->vaddr, (int)u->pid, strerror(-result));
}

/* ---- arming ------------------------------------------------------------------------------ */

struct maps_line {
	uint64_t start, end, offset;
	bool x;
	dev_t dev;
	ino_t ino;
	char path[PATH_MAX];
};

/* Calls fn for each line of /proc/PID/maps until it returns nonzero. */
static int for_each_map(pid_t pid, int (*fn)(void *arg, const struct maps_line *m), void *arg)
{
	char path[64], line[PATH_MAX + 128];
	FILE *f;
	int rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (!rc && fgets(line, sizeof(line), f)) {
		struct maps_line m = { 0 };
		unsigned maj, min;
		unsigned long long ino;
		char perms[8];
		int pos = 0;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %llu %n", &m.start,
			   &m.end, perms, &m.offset, &maj, &min, &ino, &pos) < 7)
			continue;
		m.x = perms[2] == 'x';
		m.dev = makedev(maj, min);
		m.ino = (ino_t)ino;
		if (pos) {
			size_t l;

			snprintf(m.path, sizeof(m.path), "%s", line + pos);
			l = strlen(m.path);
			if (l && m.path[l - 1] == '\n')
				m.path[l - 1] = '\0';
		}
		rc = fn(arg, &m);
	}
	fclose(f);
	return rc;
}

struct file_find {
	dev_t dev;
	ino_t ino;
	uint64_t off;
	uint64_t vaddr;
	char path[PATH_MAX];
};

static int find_file_fn(void *arg, const struct maps_line *m)
{
	struct file_find *ff = arg;

	if (!m->x || m->dev != ff->dev || m->ino != ff->ino)
		return 0;
	if (ff->off < m->offset || ff->off - m->offset >= m->end - m->start)
		return 0;
	ff->vaddr = m->start + (ff->off - m->offset);
	return 1;
}

static int find_ldso_fn(void *arg, const struct maps_line *m)
{
	struct file_find *ff = arg;
	const char *base = strrchr(m->path, '/');

	if (!m->x || !base || strncmp(base + 1, "ld-", 3))
		return 0;
	snprintf(ff->path, sizeof(ff->path), "%s", m->path);
	ff->dev = m->dev;
	ff->ino = m->ino;
	return 1;
}

/* The address of file offset off of (dev, ino) in process pid, or 0 when not mapped. */
static uint64_t vaddr_of(pid_t pid, dev_t dev, ino_t ino, uint64_t off)
{
	struct file_find ff = { .dev = dev, .ino = ino, .off = off };

	return for_each_map(pid, find_file_fn, &ff) == 1 ? ff.vaddr : 0;
}

static bool proc_is32(pid_t pid)
{
	char path[64];
	int cls = 64;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (up_sym_elf_identify(path, &cls, NULL))
		return false;
	return cls == 32;
}

/* Probes the dynamic linker's rendezvous so files mapped later are found. */
static void hook_ldso(struct up_trace *tr, struct tproc *tp)
{
	struct file_find ff = { 0 };
	struct up_sym_elf *elf;
	struct up_sym sym;
	uint64_t off, vaddr;
	int rc;

	if (tp->ldso.kimg || for_each_map(tp->pid, find_ldso_fn, &ff) != 1)
		return;
	if (up_sym_elf_open(ff.path, &elf))
		return;
	rc = up_sym_elf_lookup(elf, "_dl_debug_state", &sym);
	if (!rc)
		rc = up_sym_elf_vaddr_to_offset(elf, sym.value, &off);
	up_sym_elf_close(elf);
	if (rc)
		return;
	vaddr = vaddr_of(tp->pid, ff.dev, ff.ino, off);
	if (!vaddr)
		return;
	memset(&tp->ldso, 0, sizeof(tp->ldso));
	tp->ldso.pid = tp->pid;
	tp->ldso.vaddr = vaddr;
	tp->ldso.handler = on_ldso;
	tp->ldso.data = tp;
	rc = register_uprobe(tr->ctx, &tp->ldso);
	if (rc && rc != -EINPROGRESS)
		tlog(tr, "process %d: cannot follow the dynamic linker (%s): libraries loaded later "
			 "are not probed", (int)tp->pid, strerror(-rc));
}

/* Is p's process and event on?  (The fast path's agent is told; the trap path asks.) */
static bool probe_on(const struct up_trace *tr, const struct tprobe *p)
{
	return !tr->off && p->ts->enabled && !p->ts->removed &&
	       (!tr->pid_filter || p->tp->pid == tr->pid_filter);
}

/* ---- the fast path's captures ----------------------------------------------------------- */

#define WORD(field) (offsetof(struct user_regs_struct, field) / 8)
#define BIT(field) (1ull << WORD(field))

static const unsigned abi_regs[6] = {
	offsetof(struct user_regs_struct, rdi), offsetof(struct user_regs_struct, rsi),
	offsetof(struct user_regs_struct, rdx), offsetof(struct user_regs_struct, rcx),
	offsetof(struct user_regs_struct, r8),	offsetof(struct user_regs_struct, r9),
};

static void base_reg(struct uprobe_fetch *f, uint64_t *regs, unsigned off, unsigned size,
		     unsigned shift)
{
	f->base = UPROBE_FETCH_REG;
	f->reg = off;
	f->reg_size = size;
	f->reg_shift = shift;
	*regs |= 1ull << (off / 8);
}

static void step(struct uprobe_fetch *f, int64_t off, unsigned len)
{
	f->step[f->nsteps].off = off;
	f->step[f->nsteps].len = len;
	f->nsteps++;
}

/* One FETCHARG as what the agent must capture for fetch.c to evaluate it afterwards:
   the same reads, in the same order. */
static int capture_arg(const struct up_spec *sp, const struct up_fetch_arg *a, uint64_t bias,
		       struct uprobe_fetch *f, uint64_t *regs)
{
	bool at_return = sp->is_return;
	const struct up_fetch_insn *op = &a->ops[0];
	bool is_string = a->type.kind == UP_TYPE_STRING;

	memset(f, 0, sizeof(*f));
	f->size = a->type.size ? a->type.size : 8;
	f->is_signed = a->type.kind == UP_TYPE_S;
	if (a->type.is_bitfield) {
		f->bf_width = a->type.bf_width;
		f->bf_offset = a->type.bf_offset;
	}
	switch (op->op) {
	case UP_FOP_REG:
		base_reg(f, regs, op->reg.offset, op->reg.size, op->reg.shift);
		break;
	case UP_FOP_STACK:
		base_reg(f, regs, offsetof(struct user_regs_struct, rsp), 8, 0);
		step(f, 8 * (int64_t)op->param, 8);
		break;
	case UP_FOP_STACKP:
		base_reg(f, regs, offsetof(struct user_regs_struct, rsp), 8, 0);
		break;
	case UP_FOP_ARG:
		if (at_return) { /* the entry's, kept by the agent (entry_args) */
			if (op->param < 1 || op->param > 6)
				return -ENOTSUP;
			base_reg(f, regs, offsetof(struct user_regs_struct, fs_base) +
						  8u * (op->param - 1), 8, 0);
		} else if (op->param >= 1 && op->param <= 6) {
			base_reg(f, regs, abi_regs[op->param - 1], 8, 0);
		} else {
			base_reg(f, regs, offsetof(struct user_regs_struct, rsp), 8, 0);
			step(f, 8 * ((int64_t)op->param - 6), 8);
		}
		break;
	case UP_FOP_IMM:
		f->base = UPROBE_FETCH_IMM;
		f->imm = (int64_t)op->imm;
		break;
	case UP_FOP_FOFFS:
		f->base = UPROBE_FETCH_IMM;
		f->imm = (int64_t)(bias + op->imm);
		break;
	case UP_FOP_RETVAL: /* a return's record has every register */
		base_reg(f, regs, offsetof(struct user_regs_struct, rax), 8, 0);
		break;
	case UP_FOP_COMM:
	case UP_FOP_DATA:
		f->base = UPROBE_FETCH_IMM; /* the tracer's own: nothing to read */
		return 0;
	case UP_FOP_USTACK: /* the walk from bp (and [sp] at an entry), up_stack_walk's reads */
		base_reg(f, regs, offsetof(struct user_regs_struct, rbp), 8, 0);
		*regs |= BIT(rsp) | BIT(rip);
		f->final = UPROBE_FETCH_STACK;
		f->final_len = op->param;
		f->at_entry = up_spec_at_function_entry(sp);
		return 0;
	default:
		return -ENOTSUP;
	}
	for (int i = 1; i < a->nops; i++) {
		bool last = i == a->nops - 1;

		if (last && is_string) {
			f->final = UPROBE_FETCH_STRING;
			f->final_off = a->ops[i].offset;
			f->final_len = UP_FETCH_STRING_MAX - 1;
			return 0;
		}
		if (f->nsteps == UPROBE_FETCH_STEPS)
			return -ENOTSUP;
		step(f, a->ops[i].offset, last ? f->size : 8);
	}
	if (is_string) { /* \IMM:string */
		f->final = UPROBE_FETCH_STRING;
		f->final_len = UP_FETCH_STRING_MAX - 1;
	}
	return 0;
}

/* What a printing probe captures on the fast path; 0 when p can have one. */
static int build_capture(struct up_trace *tr, struct tprobe *p)
{
	const struct up_spec *sp = &p->ts->spec;
	uint64_t regs = BIT(rsp);
	unsigned n = 0;

	if (tr->opts.no_fast || (!tr->opts.out && !p->ts->hist) || p->tp->is32)
		return -ENOTSUP;
	if (p->ts->hist) {
		int rc = build_agg(p);

		if (rc)
			return rc;
	}
	if (sp->kind == UP_SPEC_EVENT && sp->is_return)
		regs |= BIT(rax) | BIT(rip); /* $retval, and where it returned to */
	n = sp->kind == UP_SPEC_EVENT ? (unsigned)sp->nargs : 1;
	p->fetch = calloc(n ? n : 1, sizeof(*p->fetch));
	if (!p->fetch)
		return -ENOMEM;
	if (sp->kind == UP_SPEC_SEED) {
		switch (sp->seed_type) {
		case UP_SEED_ARGS:
			for (unsigned k = 0; k < sp->size && k < 6; k++)
				regs |= 1ull << (abi_regs[k] / 8);
			n = 0;
			break;
		case UP_SEED_STACK:
			base_reg(&p->fetch[0], &regs, offsetof(struct user_regs_struct, rsp), 8, 0);
			p->fetch[0].final = UPROBE_FETCH_BYTES;
			p->fetch[0].final_len = (unsigned)sp->size;
			break;
		case UP_SEED_DATA:
			p->fetch[0].base = UPROBE_FETCH_IMM;
			p->fetch[0].imm = (int64_t)sp->daddr;
			p->fetch[0].final = UPROBE_FETCH_BYTES;
			p->fetch[0].final_len = (unsigned)sp->size;
			break;
		}
	} else {
		for (unsigned k = 0; k < n; k++) {
			int rc = capture_arg(sp, &sp->args[k], p->file_bias, &p->fetch[k], &regs);

			if (rc)
				return rc;
		}
	}
	p->cap.regs = regs;
	p->cap.entry_args = p->eargs;
	p->cap.fetch = p->fetch;
	p->cap.nfetch = n;
	p->cap.cond = p->ts->conds;
	p->cap.ncond = p->ts->nconds;
	if (p->ts->hist) {
		p->hist = p->ts->hist;
		p->cap.agg = &p->agg;
		p->u.agg_handler = on_agg;
		for (unsigned i = 0; i < p->agg.nkeys; i++)
			if (p->agg.key[i].src == UPROBE_AGG_STACK)
				up_stack_syms_load(syms_of(p->tp)); /* while the maps are there */
	}
	p->u.capture = &p->cap;
	p->u.record_handler = on_record;
	p->recording = true;
	return 0;
}

/* ---- --format raw ------------------------------------------------------------------------ */

/* A failed write of the file stops the trace, as a failed write of lines does. */
static void raw_check(struct up_trace *tr, int rc)
{
	if (rc && !tr->out_failed) {
		tr->out_failed = -rc;
		if (tr->ctx)
			uprobe_ctx_break(tr->ctx);
	}
}

/* The thread's name goes into the file before its first record. */
static void raw_thread(struct up_trace *tr, pid_t pid, pid_t tid)
{
	struct comm_entry *c = &tr->comms[(unsigned)tid % COMM_CACHE];
	int cpu;

	/* the name cache says which threads the file has named, and since when */
	if (!tid || (c->tid == tid && c->in_raw))
		return;
	if (c->tid != tid || !c->comm[0])
		c = thread_info(tr, pid, tid, &cpu);
	c->in_raw = true;
	raw_check(tr, up_raw_write_thread(tr->opts.out, pid, tid, c->comm));
}

/* The fast path's records, as the ring held them: named threads, then the bytes. */
static void cb_raw(void *arg, const void *recs, size_t len)
{
	struct up_trace *tr = arg;
	const uint8_t *b = recs;

	if (tr->out_failed)
		return;
	for (size_t at = 0; at + sizeof(struct uprobe_raw_rec) <= len;) {
		const struct uprobe_raw_rec *r = (const void *)(b + at);

		if (r->probe != UPROBE_RAW_SKIP) {
			raw_thread(tr, r->pid, r->tid);
			tr->raw_records++;
		}
		if (!r->size)
			break;
		at += r->size;
	}
	raw_check(tr, up_raw_write_records(tr->opts.out, recs, len));
}

/* The frame words p's records hold: its capture's, or all of them. */
static uint64_t raw_regs(const struct tprobe *p)
{
	return p->recording ? p->cap.regs | BIT(rip)
			    : (1ull << (sizeof(struct user_regs_struct) / 8)) - 1;
}

static void raw_site(struct up_trace *tr, const struct tprobe *p)
{
	struct up_raw_site s = {
		.probe = p->u.raw_id,
		.event = p->ts->index,
		.pid = p->tp->pid,
		.is32 = p->tp->is32,
		.vaddr = p->u.vaddr,
		.bias = p->file_bias,
		.regs = raw_regs(p),
	};

	raw_check(tr, up_raw_write_site(tr->opts.out, &s));
}

static int raw_grow(struct up_trace *tr, size_t more)
{
	size_t words = (tr->raw_len + more + 7) / 8;

	if (words * 8 <= tr->raw_cap)
		return 0;
	words = words * 2 + 64;
	uint64_t *nb = realloc(tr->raw_buf, words * 8);

	if (!nb)
		return -ENOMEM;
	tr->raw_buf = nb;
	tr->raw_cap = words * 8;
	return 0;
}

/* A trap-path hit's reads: done on the process, kept in the record as the agent would. */
static int raw_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct read_ctx *rc = arg;
	struct up_trace *tr = rc->tr;
	int ret = read_mem(rc, addr, buf, len);
	struct uprobe_raw_mem m = { addr, (uint32_t)len, ret ? UPROBE_RAW_FAULT : 0 };
	size_t need = sizeof(m) + (ret ? 0 : (len + 7) / 8 * 8);

	if (len > UINT32_MAX || raw_grow(tr, need))
		return ret;
	memcpy((uint8_t *)tr->raw_buf + tr->raw_len, &m, sizeof(m));
	tr->raw_len += sizeof(m);
	if (!ret) {
		memset((uint8_t *)tr->raw_buf + tr->raw_len, 0, need - sizeof(m));
		memcpy((uint8_t *)tr->raw_buf + tr->raw_len, buf, len);
		tr->raw_len += need - sizeof(m);
	}
	return ret;
}

/* A trap-path hit, written as the agent writes a record (its filter applied first). */
static void raw_trap(struct tprobe *p, uprobe_regs_t *regs, bool is_return, const struct hit *h,
		     const struct up_fetch_env *env)
{
	struct up_trace *tr = p->tr;
	struct tspec *ts = p->ts;
	const uint64_t *w = (const uint64_t *)regs;
	uint64_t mask = raw_regs(p), dur = 0;
	struct read_ctx rc = { .tr = tr, .pid = h->pid };
	struct up_fetch_value vals[ts->spec.nargs ? ts->spec.nargs : 1];
	static char arena[64 * 1024];
	struct uprobe_raw_rec r = {
		.probe = p->u.raw_id,
		.flags = is_return ? UPROBE_RAW_RET : 0,
		.pid = h->pid,
		.tid = h->tid,
		.time_ns = h->time_ns,
	};

	tr->raw_len = 0;
	if (raw_grow(tr, sizeof(r) + 8u * (unsigned)__builtin_popcountll(mask)))
		return;
	tr->raw_len = sizeof(r);
	for (uint64_t m = mask; m; m &= m - 1) {
		tr->raw_buf[tr->raw_len / 8] = w[__builtin_ctzll(m)];
		tr->raw_len += 8;
	}
	{
		/* the caller's environment, its reads kept as the record's memory */
		struct up_fetch_env keep = *env;

		keep.read = raw_read;
		keep.ctx = &rc;
		keep.comm = comm_cached(tr, h->pid, h->tid);
		up_fetch_eval_all(&ts->spec, &keep, vals, arena, sizeof(arena));
	}
	if (is_return)
		uprobe_current_duration(tr->ctx, &dur);
	if (ts->nconds && !filter_holds(ts, vals, dur))
		return;
	r.len = r.size = (uint32_t)tr->raw_len;
	memcpy(tr->raw_buf, &r, sizeof(r));
	raw_thread(tr, h->pid, h->tid);
	tr->raw_records++;
	raw_check(tr, up_raw_write_records(tr->opts.out, tr->raw_buf, tr->raw_len));
	if (tr->opts.flush && fflush(tr->opts.out))
		raw_check(tr, errno ? -errno : -EIO);
}

/* A USDT probe's semaphore goes up where the probe is placed (trace/refctr.h). */
static void ref_get(struct up_trace *tr, struct tproc *tp, struct tprobe *p)
{
	uint64_t a = up_refctr_vaddr(tp->pid, p->ts->dev, p->ts->ino, p->ts->spec.ref_ctr_offset);
	int rc = a ? up_refctr_get(&tp->refs, tp->pid, a) : -ENOENT;

	if (rc)
		tlog(tr, "'%s': cannot set its semaphore in process %d: %s", p->ts->text,
		     (int)tp->pid, strerror(-rc));
	else
		p->ref_addr = a;
}

/* An event whose arguments a 32-bit process cannot give (r8-r15, the 8-byte frames
   of $ustack) is refused there, once, saying which. */
static int args_for_32bit(struct up_trace *tr, struct tspec *ts, pid_t pid)
{
	for (int k = 0; k < ts->spec.nargs; k++) {
		const struct up_fetch_arg *a = &ts->spec.args[k];

		if (!up_fetch_arg_check(a, true))
			continue;
		tlog(tr, "'%s': argument %s=%s cannot be fetched in process %d: it is 32-bit "
			 "(%s)", ts->text, a->name, a->comm, (int)pid,
		     a->type.kind == UP_TYPE_STACK ? "$ustack walks 8-byte frames"
						   : "no such register there");
		ts->fatal = true;
		return -EINVAL;
	}
	return 0;
}

static int arm_one(struct up_trace *tr, struct tproc *tp, unsigned i)
{
	struct tspec *ts = tr->specs[i];
	struct tprobe *p;
	uint64_t vaddr, bias = 0;
	int rc;

	if (tp->armed[i] || ts->fatal || ts->removed)
		return 0;
	if (ts->spec.kind == UP_SPEC_SEED) {
		pid_t want = ts->spec.pid ? ts->spec.pid : tr->launched;

		if (want != tp->pid)
			return 0;
		if (ts->spec.seed_type == UP_SEED_ARGS && tp->is32) {
			/* as the seed: A reads the x86_64 argument registers */
			tlog(tr, "'%s': A is for 64-bit processes only; process %d is 32-bit "
				 "(use S to dump the stack, where its arguments are)",
			     ts->text, (int)tp->pid);
			ts->fatal = true;
			return -EINVAL;
		}
		vaddr = ts->spec.addr;
	} else if (tp->is32 && (rc = args_for_32bit(tr, ts, tp->pid))) {
		return rc;
	} else if (!ts->is_file) {
		vaddr = ts->spec.vaddr;
	} else {
		vaddr = vaddr_of(tp->pid, ts->dev, ts->ino, ts->file_off);
		if (!vaddr)
			return 0; /* not mapped (yet) */
		bias = vaddr - ts->file_off;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->tr = tr;
	p->ts = ts;
	p->tp = tp;
	p->file_bias = bias;
	p->u.pid = tp->pid;
	p->u.vaddr = vaddr;
	p->u.raw_id = tr->raw_next++;
	p->u.data = p;
	p->u.registration_callback = on_registered;
	if (ts->spec.kind == UP_SPEC_EVENT && ts->spec.is_return) {
		p->u.ret_handler = on_ret;
		p->eargs = uses_entry_args(ts);
		if (p->eargs) /* on the trap path the entry keeps them (the agent does too) */
			p->u.handler = on_entry;
	}
	else if (!tr->opts.out && ts->spec.kind == UP_SPEC_EVENT && !tr->opts.no_fast &&
		 !ts->hist)
		/* only counted (-c): the library counts, on the fast path where it can */
		p->u.flags = UPROBE_F_COUNT;
	else
		p->u.handler = on_hit;
	if ((p->u.handler || p->u.ret_handler) && build_capture(tr, p) && tr->opts.verbose > 0 &&
	    !tr->opts.no_fast && (tr->opts.out || ts->hist))
		tlog(tr, "'%s': stays on the trap path in process %d: %s", ts->text, (int)tp->pid,
		     tp->is32	? "a 32-bit process"
		     : ts->hist ? "a key or value the agent cannot compute (common_pid, $comm)"
				: "an argument the agent cannot fetch");
	rc = register_uprobe(tr->ctx, &p->u);
	if (rc && rc != -EINPROGRESS) {
		tlog(tr, "'%s': cannot probe 0x%" PRIx64 " in process %d: %s", ts->text, vaddr,
		     (int)tp->pid, strerror(-rc));
		tprobe_free(p);
		tp->armed[i] = true; /* do not try again in this image */
		return rc;
	}
	p->next = tp->probes;
	tp->probes = p;
	tp->armed[i] = true;
	if (ts->is_file && ts->spec.ref_ctr_offset)
		ref_get(tr, tp, p);
	if (tr->opts.raw)
		raw_site(tr, p); /* before any of its records: they are drained later */
	if (p->recording && !probe_on(tr, p))
		uprobe_set_enabled(tr->ctx, &p->u, false);
	if (tr->opts.verbose > 0)
		tlog(tr, "'%s': armed at 0x%" PRIx64 " in process %d", ts->text, vaddr, (int)tp->pid);
	return 0;
}

/* A counting probe leaves: its count so far stays with its spec. */
/* Does the library keep this probe's hits (a counting probe, or the fast path's
   records with what was lost or filtered in-process)? */
static bool lib_counts(const struct tprobe *p)
{
	return (p->u.flags & UPROBE_F_COUNT) || (p->recording && !p->counted);
}

static void keep_count(struct up_trace *tr, struct tprobe *p)
{
	uint64_t n;

	if (lib_counts(p) && !uprobe_count(tr->ctx, &p->u, &n)) {
		p->ts->hits += n;
		if (!uprobe_lost(tr->ctx, &p->u, &n))
			tr->lost += n;
		p->u.flags &= ~UPROBE_F_COUNT; /* counted once */
		p->counted = true;
	}
}

/* Retired probes whose queued unregistration has been applied (a handler's queue runs
   when it returns) are freed now, not at the end: a loop of dlopen/dlclose grew them. */
static void free_retired(struct up_trace *tr)
{
	struct tprobe **pp = &tr->retired;

	if (tr->disarming)
		return; /* one of them is still being unregistered further up the stack */
	while (*pp) {
		struct tprobe *p = *pp;

		if (p->u.kimg) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		tprobe_free(p);
	}
}

/* Probes whose file is no longer mapped there (dlclose) go; they are armed again if it comes back. */
static void disarm_unmapped(struct up_trace *tr, struct tproc *tp)
{
	struct tprobe **pp = &tp->probes;
	unsigned drops;

	free_retired(tr);
	while (*pp) {
		struct tprobe *p = *pp;
		struct tspec *ts = p->ts;

		if (!ts->is_file || vaddr_of(tp->pid, ts->dev, ts->ino, ts->file_off) == p->u.vaddr) {
			pp = &p->next;
			continue;
		}
		/* the library may handle an exec in there, whose drop_probes would free p:
		   it retires them instead, and none is freed meanwhile */
		tr->disarming++;
		drops = tp->drops;
		unregister_uprobe(tr->ctx, &p->u); /* a recording probe's last records first */
		tr->disarming--;
		if (tp->drops != drops)
			return; /* an exec it handled dropped them all (retired, p among them) */
		keep_count(tr, p);
		if (p->ref_addr)
			up_refctr_forget(&tp->refs, p->ref_addr); /* unmapped with the file */
		tp->armed[ts->index] = false;
		*pp = p->next;
		if (p->u.kimg) {
			/* queued from a handler: the uprobe must outlive its unregistration */
			p->next = tr->retired;
			tr->retired = p;
		} else {
			tprobe_free(p);
		}
	}
}

/*
 * The order probes are armed in: by address, the highest first (a file's specs by
 * their offset in it), specs at one address in the order given.  A punned jmp's rel32
 * ends in the bytes after its instruction; armed after its neighbours it ends in their
 * jmps, as they stay, and does not have to move as each comes (E9Patch patches in
 * reverse order for the same reason).
 */
/* Where a spec's probe goes, as arm_order compares it: its offset in its file, or its
   address. */
static uint64_t spec_place(const struct tspec *ts)
{
	if (ts->is_file)
		return ts->file_off;
	return ts->spec.kind == UP_SPEC_SEED ? ts->spec.addr : ts->spec.vaddr;
}

static int arm_order(const void *a, const void *b, void *arg)
{
	const struct tspec *x = ((struct up_trace *)arg)->specs[*(const unsigned *)a];
	const struct tspec *y = ((struct up_trace *)arg)->specs[*(const unsigned *)b];
	uint64_t ox = spec_place(x), oy = spec_place(y);

	if (x->is_file != y->is_file)
		return x->is_file ? -1 : 1;
	if (x->is_file && (x->dev != y->dev || x->ino != y->ino))
		return x->dev != y->dev ? (x->dev < y->dev ? -1 : 1) : (x->ino < y->ino ? -1 : 1);
	if (ox != oy)
		return ox > oy ? -1 : 1;
	return x->index < y->index ? -1 : 1;
}

static int arm_proc(struct up_trace *tr, struct tproc *tp)
{
	unsigned *order = malloc((tr->nspecs ? tr->nspecs : 1) * sizeof(*order));
	bool pending = false;
	int first = 0;

	disarm_unmapped(tr, tp);
	up_stack_syms_stale(tp->syms);

	for (unsigned i = 0; i < tr->nspecs; i++)
		if (order)
			order[i] = i;
	if (order)
		qsort_r(order, tr->nspecs, sizeof(*order), arm_order, tr);
	for (unsigned n = 0; n < tr->nspecs; n++) {
		unsigned i = order ? order[n] : n;
		int rc = arm_one(tr, tp, i);

		if (rc && !first)
			first = rc;
		if (!tp->armed[i] && tr->specs[i]->is_file && !tr->specs[i]->removed)
			pending = true;
	}
	free(order);
	if (pending)
		hook_ldso(tr, tp);
	tp->rescan = false;
	return first;
}

static void drop_probes(struct tproc *tp)
{
	while (tp->probes) {
		struct tprobe *p = tp->probes;
		uint64_t n;

		tp->probes = p->next;
		/* a counting probe's hits are the library's */
		(void)n;
		keep_count(tp->tr, p);
		if (tp->tr->disarming) {
			/* one of them is being unregistered further up the stack */
			p->next = tp->tr->retired;
			tp->tr->retired = p;
		} else {
			tprobe_free(p);
		}
	}
	tp->drops++;
	up_refctr_forget(&tp->refs, 0); /* gone with the process's memory, or put back */
	memset(tp->armed, 0, tp->tr->nspecs * sizeof(*tp->armed));
	memset(&tp->ldso, 0, sizeof(tp->ldso));
}

/*
 * The main thread's name read now, while it is its: records are formatted later, and
 * a process that execs soon after (env, sh -c) would otherwise have its first records
 * named after the program it became.
 */
static void name_now(struct up_trace *tr, pid_t pid)
{
	int cpu;

	thread_info(tr, pid, pid, &cpu);
}

static struct tproc *proc_add(struct up_trace *tr, pid_t pid)
{
	struct tproc *tp = calloc(1, sizeof(*tp));

	if (!tp)
		return NULL;
	tp->armed = calloc(tr->nspecs ? tr->nspecs : 1, sizeof(*tp->armed));
	if (!tp->armed) {
		free(tp);
		return NULL;
	}
	tp->pid = pid;
	tp->tr = tr;
	tp->is32 = proc_is32(pid);
	tp->next = tr->procs;
	tr->procs = tp;
	name_now(tr, pid);
	return tp;
}

/* ---- library callbacks --------------------------------------------------------------------- */

static void cb_exit(void *arg, pid_t pid, int status)
{
	struct up_trace *tr = arg;
	struct tproc *tp = proc_of(tr, pid);

	if (pid == tr->launched)
		tr->status = status;
	if (tp) {
		tp->gone = true;
		drop_probes(tp);
	}
}

static void cb_exec(void *arg, pid_t pid)
{
	struct up_trace *tr = arg;
	struct tproc *tp = proc_of(tr, pid);

	/* every probe of the old image is gone (its records were formatted, under the old
	   name): arm the new one before it runs */
	forget_threads(tr);
	name_now(tr, pid);
	if (tp) {
		drop_probes(tp);
		tp->is32 = proc_is32(pid);
		arm_proc(tr, tp);
	}
}

static void cb_fork(void *arg, pid_t parent, pid_t child)
{
	struct up_trace *tr = arg;
	struct tproc *pp = proc_of(tr, parent), *cp = proc_add(tr, child);

	/* the child runs the parent's probes (the library copied them) */
	if (pp && cp) {
		memcpy(cp->armed, pp->armed, tr->nspecs * sizeof(*cp->armed));
		up_refctr_copy(&cp->refs, &pp->refs); /* and its memory the semaphores */
	}
}

/* ---- the session ---------------------------------------------------------------------------- */

/* A batch of fast-path records was formatted: out it goes, as a trap-path hit does. */
static void cb_records(void *arg)
{
	struct up_trace *tr = arg;

	if (tr->opts.out && tr->opts.flush && fflush(tr->opts.out) && !tr->out_failed) {
		tr->out_failed = errno ? errno : EIO;
		uprobe_ctx_break(tr->ctx);
	}
}

int up_trace_new(const struct up_trace_opts *opts, struct up_trace **out)
{
	struct up_trace *tr = calloc(1, sizeof(*tr));
	struct uprobe_ctx_opts co = { 0 };
	int rc;

	if (!tr)
		return -ENOMEM;
	tr->opts = *opts;
	tr->status = -1;
	co.follow_fork = opts->follow;
	co.verbose = opts->verbose > 0;
	co.ring_bytes = opts->ring_bytes;
	co.log = lib_log;
	co.log_arg = tr;
	co.on_exit = cb_exit;
	co.on_exec = cb_exec;
	co.on_fork = cb_fork;
	co.on_records = cb_records;
	if (opts->raw)
		co.raw_handler = cb_raw;
	co.arg = tr;
	if (opts->raw && (!opts->out || opts->json)) {
		free(tr);
		return -EINVAL;
	}
	rc = uprobe_ctx_new(&co, &tr->ctx);
	if (rc) {
		free(tr);
		return rc;
	}
	if (opts->raw) {
		rc = up_raw_write_magic(opts->out);
		if (rc) {
			uprobe_ctx_free(tr->ctx);
			free(tr);
			return rc;
		}
	}
	*out = tr;
	return 0;
}

void up_trace_free(struct up_trace *tr)
{
	uint64_t lost;

	if (!tr)
		return;
	lost = tr->opts.raw ? up_trace_lost(tr) : 0;
	for (struct tproc *tp = tr->procs; tp; tp = tp->next)
		if (!tp->gone)
			up_refctr_put_all(&tp->refs, tp->pid);
	/* detaches from everything: the processes run on unprobed (what their rings still
	   hold is delivered first) */
	uprobe_ctx_free(tr->ctx);
	tr->ctx = NULL;
	if (tr->opts.raw && !tr->out_failed)
		up_raw_write_end(tr->opts.out, tr->raw_records, lost);
	free(tr->raw_buf);
	free(tr->eargs);
	while (tr->procs) {
		struct tproc *tp = tr->procs;

		tr->procs = tp->next;
		drop_probes(tp);
		up_stack_syms_free(tp->syms);
		up_refctr_free(&tp->refs);
		free(tp->armed);
		free(tp);
	}
	while (tr->retired) {
		struct tprobe *p = tr->retired;

		tr->retired = p->next;
		tprobe_free(p);
	}
	for (unsigned i = 0; i < tr->nspecs; i++) {
		up_hist_free(tr->specs[i]->hist);
		free(tr->specs[i]->hist);
		free(tr->specs[i]->hist_text);
		free(tr->specs[i]->filter_text);
		up_spec_free(&tr->specs[i]->spec);
		free(tr->specs[i]->text);
		free(tr->specs[i]);
	}
	free(tr->specs);
	forget_threads(tr);
	free(tr->line);
	free(tr);
}

/* A file target: the file's identity and the probed instruction's file offset. */
static int resolve_file(struct tspec *ts, char *err, size_t errlen)
{
	struct up_sym_elf *elf;
	struct up_sym sym;
	struct stat st;
	uint64_t off;
	int rc;

	if (stat(ts->spec.path, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "'%s': %s: %s", ts->text, ts->spec.path, strerror(-rc));
		return rc;
	}
	ts->dev = st.st_dev;
	ts->ino = st.st_ino;
	ts->is_file = true;
	if (ts->spec.target == UP_TARGET_OFFSET) {
		ts->file_off = ts->spec.offset;
		return 0;
	}
	rc = up_sym_elf_open(ts->spec.path, &elf);
	if (rc) {
		snprintf(err, errlen, "'%s': %s: %s", ts->text, ts->spec.path,
			 rc == -ENOEXEC ? "not an x86 ELF file" : strerror(-rc));
		return rc;
	}
	rc = up_sym_elf_lookup(elf, ts->spec.symbol, &sym);
	if (rc) {
		snprintf(err, errlen, "'%s': no function '%s' in %s (try: uprobe list %s)",
			 ts->text, ts->spec.symbol, ts->spec.path, ts->spec.path);
	} else {
		if (sym.ifunc)
			snprintf(err, errlen,
				 "'%s': note: %s is an IFUNC: this probes its resolver, which runs "
				 "once; probe the implementation it picks (uprobe list %s '*%s*')",
				 ts->text, ts->spec.symbol, ts->spec.path, ts->spec.symbol);
		rc = up_sym_elf_vaddr_to_offset(elf, sym.value + ts->spec.offset, &off);
		if (rc)
			snprintf(err, errlen, "'%s': %s+0x%" PRIx64 " is not in the file's loaded code",
				 ts->text, ts->spec.symbol, ts->spec.offset);
		else
			ts->file_off = off;
	}
	up_sym_elf_close(elf);
	return rc;
}

int up_trace_add(struct up_trace *tr, const char *text, char *err, size_t errlen)
{
	struct tspec ts = { 0 };
	struct up_spec_err se;
	int rc;

	err[0] = '\0';
	rc = up_spec_parse(text, &ts.spec, &se);
	if (rc) {
		if (rc == -EINVAL)
			up_spec_err_format(text, &se, err, errlen);
		else
			snprintf(err, errlen, "'%s': %s", text, strerror(-rc));
		return rc;
	}
	ts.text = strdup(text);
	if (!ts.text) {
		up_spec_free(&ts.spec);
		return -ENOMEM;
	}
	if (ts.spec.kind == UP_SPEC_EVENT && ts.spec.target != UP_TARGET_VADDR) {
		rc = resolve_file(&ts, err, errlen);
		if (rc) {
			up_spec_free(&ts.spec);
			free(ts.text);
			return rc;
		}
		if (err[0])
			tlog(tr, "%s", err); /* a note, not an error */
		err[0] = '\0';
	}
	if (tr->has_filter) {
		rc = ts.spec.kind == UP_SPEC_EVENT
			     ? up_filter_resolve(&tr->filter, &ts.spec, ts.conds, err, errlen)
			     : -EINVAL;
		if (rc == -EINVAL)
			snprintf(err, errlen, "'%s': --filter needs named arguments: p:/r: events "
					      "only", text);
		if (rc) {
			up_spec_free(&ts.spec);
			free(ts.text);
			return -EINVAL;
		}
		ts.nconds = tr->filter.n;
	}
	if (tr->opts.raw && ts.spec.kind == UP_SPEC_SEED) {
		snprintf(err, errlen, "'%s': --format raw records p:/r: events; the seed's "
				      "specs print as text or JSON only", text);
		up_spec_free(&ts.spec);
		free(ts.text);
		return -EINVAL;
	}
	if (ts.spec.kind == UP_SPEC_SEED)
		up_spec_format(&ts.spec, ts.label, sizeof(ts.label));
	else
		snprintf(ts.label, sizeof(ts.label), "%s/%s", ts.spec.group, ts.spec.event);
	{
		struct tspec **nv = realloc(tr->specs, (tr->nspecs + 1) * sizeof(*nv));
		struct tspec *heap = nv ? malloc(sizeof(*heap)) : NULL;

		if (nv)
			tr->specs = nv;
		/* every process's armed[] gets the new spec's entry */
		for (struct tproc *tp = tr->procs; heap && tp; tp = tp->next) {
			bool *a = realloc(tp->armed, (tr->nspecs + 1) * sizeof(*a));

			if (!a) {
				free(heap);
				heap = NULL;
				break;
			}
			a[tr->nspecs] = false;
			tp->armed = a;
		}
		if (!heap) {
			up_spec_free(&ts.spec);
			free(ts.text);
			return -ENOMEM;
		}
		ts.index = tr->nspecs;
		ts.enabled = true;
		*heap = ts;
		tr->specs[tr->nspecs++] = heap;
	}
	if (tr->opts.raw)
		raw_check(tr, up_raw_write_event(tr->opts.out, ts.index, text));
	return 0;
}

int up_trace_set_filter(struct up_trace *tr, const char *text, char *err, size_t errlen)
{
	struct up_spec_err se;
	int rc = up_filter_parse(text, &tr->filter, &se);

	if (rc) {
		int n = snprintf(err, errlen, "--filter:\n");

		if (n > 0 && (size_t)n < errlen)
			up_spec_err_format(text, &se, err + n, errlen - (size_t)n);
		return rc;
	}
	if (tr->filter.has_comm) {
		snprintf(err, errlen, "--filter: a comm term is taken by the mount's filter files "
				      "only (events/GRP/EVENT/filter)");
		return -EINVAL;
	}
	tr->has_filter = tr->filter.n > 0;
	return 0;
}

uint64_t up_trace_lost(struct up_trace *tr)
{
	uint64_t n = tr->lost;

	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		for (struct tprobe *p = tp->probes; p; p = p->next) {
			uint64_t l;

			if (p->recording && !p->counted && !uprobe_lost(tr->ctx, &p->u, &l))
				n += l;
		}
	}
	return n;
}

unsigned up_trace_nspecs(const struct up_trace *tr)
{
	return tr->nspecs;
}

int up_trace_attach(struct up_trace *tr, pid_t pid)
{
	int rc = uprobe_attach(tr->ctx, pid);

	if (rc)
		return rc;
	return proc_add(tr, pid) ? 0 : -ENOMEM;
}

int up_trace_spawn(struct up_trace *tr, char *const argv[], pid_t *pid)
{
	pid_t p;
	int rc = uprobe_spawn(tr->ctx, argv, &p);

	if (rc)
		return rc;
	if (!proc_add(tr, p))
		return -ENOMEM;
	tr->launched = p;
	if (pid)
		*pid = p;
	return 0;
}

int up_trace_start(struct up_trace *tr)
{
	int first = 0;

	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		int rc = arm_proc(tr, tp);

		if (rc && !first)
			first = rc;
	}
	/* a seed spec for a pid that is not traced can never fire */
	for (unsigned i = 0; i < tr->nspecs; i++) {
		struct tspec *ts = tr->specs[i];
		pid_t want;

		if (ts->spec.kind != UP_SPEC_SEED)
			continue;
		want = ts->spec.pid ? ts->spec.pid : tr->launched;
		if (!proc_of(tr, want)) {
			tlog(tr, "'%s': process %d is not traced (%s)", ts->text, (int)want,
			     ts->spec.pid ? "add -p PID" : "PID 0 needs a command after --");
			ts->fatal = true;
			if (!first)
				first = -ESRCH;
		}
	}
	if (first)
		return first;
	if (tr->launched)
		return uprobe_resume(tr->ctx, tr->launched);
	return 0;
}

int up_trace_run(struct up_trace *tr, volatile int *stop)
{
	int rc;

	/*
	 * Blocking: no SIGCHLD handler and self-pipe, so a hit costs the wait and the
	 * three ptrace calls, nothing more.  Arming for new images and libraries happens
	 * in the callbacks, while the thread concerned is stopped.
	 */
	for (;;) {
		tr->pend_break = false;
		rc = uprobe_ctx_run(tr->ctx, stop);
		flush_pending(tr);
		if (rc != -EINTR || !tr->pend_break || (stop && *stop) || tr->out_failed)
			break;
	}
	if (tr->opts.out && fflush(tr->opts.out) && !tr->out_failed)
		tr->out_failed = errno ? errno : EIO;
	if (tr->out_failed)
		return -tr->out_failed;
	return rc;
}

int up_trace_status(const struct up_trace *tr)
{
	return tr->status;
}

void up_trace_print_counts(struct up_trace *tr, FILE *out)
{
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];
		uint64_t hits = up_trace_hits(tr, i);
		char where[64], line[512];

		if (ts->removed)
			continue;
		if (ts->spec.kind == UP_SPEC_SEED)
			snprintf(where, sizeof(where), "%d", (int)(ts->spec.pid ? ts->spec.pid : tr->launched));
		up_fmt_count_row(line, sizeof(line),
				 ts->spec.kind == UP_SPEC_SEED ? where
				 : ts->is_file		       ? ts->spec.path
							       : "(any)",
				 ts->label, hits);
		fputs(line, out);
	}
}

/* ---- a live session (the control filesystem) --------------------------------------------- */

int up_trace_arm_all(struct up_trace *tr, bool attach)
{
	int first = 0;

	/* a seed spec names its process: trace it first when asked to */
	for (unsigned i = 0; attach && i < tr->nspecs; i++) {
		struct tspec *ts = tr->specs[i];

		if (ts->removed || ts->spec.kind != UP_SPEC_SEED || !ts->spec.pid ||
		    proc_of(tr, ts->spec.pid))
			continue;
		if (up_trace_attach(tr, ts->spec.pid)) {
			tlog(tr, "'%s': cannot trace process %d", ts->text, (int)ts->spec.pid);
			if (!first)
				first = -ESRCH;
		}
	}
	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		int rc;

		if (tp->gone)
			continue;
		rc = arm_proc(tr, tp);
		if (rc && !first)
			first = rc;
	}
	return first;
}

/* Every probe of spec i goes (counts kept); it is armed again by the next arm_proc. */
static void disarm_spec(struct up_trace *tr, unsigned i)
{
	struct tspec *ts = tr->specs[i];

	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		struct tprobe **pp = &tp->probes;

		while (*pp) {
			struct tprobe *p = *pp;

			if (p->ts != ts) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			unregister_uprobe(tr->ctx, &p->u);
			keep_count(tr, p);
			if (p->ref_addr)
				up_refctr_put(&tp->refs, tp->pid, p->ref_addr);
			if (p->u.kimg) {
				p->next = tr->retired;
				tr->retired = p;
			} else {
				tprobe_free(p);
			}
		}
		tp->armed[i] = false;
	}
}

int up_trace_remove(struct up_trace *tr, unsigned i)
{
	if (i >= tr->nspecs || tr->specs[i]->removed)
		return -ENOENT;
	tr->specs[i]->removed = true;
	disarm_spec(tr, i);
	return 0;
}

int up_trace_set_trigger(struct up_trace *tr, unsigned i, const char *text, char *err,
			 size_t errlen)
{
	struct up_spec_err se = { .pos = -1, .len = 1 };
	struct tspec *ts;
	struct up_hist *h;
	const char *t = text;
	bool remove;
	int rc;

	err[0] = '\0';
	if (i >= tr->nspecs || tr->specs[i]->removed)
		return -ENOENT;
	ts = tr->specs[i];
	while (*t == ' ' || *t == '\t')
		t++;
	remove = *t == '!';
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	rc = up_hist_parse(t + remove, false, h, &se);
	if (rc) {
		free(h);
		if (rc == -EINVAL) {
			if (se.pos >= 0)
				se.pos += (int)(t + remove - text);
			up_spec_err_format(text, &se, err, errlen);
		}
		return rc;
	}
	if (remove) {
		/* as the kernel: the trigger that was added with the same keys goes */
		char want[512], have[512];

		up_hist_trigger_info(h, want, sizeof(want));
		if (ts->hist)
			up_hist_trigger_info(ts->hist, have, sizeof(have));
		up_hist_free(h);
		free(h);
		if (!ts->hist || strcmp(want, have)) {
			snprintf(err, errlen, "'%s': no such trigger on %s\n", text, ts->label);
			return -ENOENT;
		}
		disarm_spec(tr, i); /* the agents' tables merge into the table, which goes */
		detach_hist(ts);
	} else {
		if (ts->spec.kind != UP_SPEC_EVENT) {
			snprintf(err, errlen, "'%s': hist triggers are for p:/r: events\n", text);
			up_hist_free(h);
			free(h);
			return -EINVAL;
		}
		rc = attach_hist(ts, h, text, err, errlen);
		if (rc) {
			up_hist_free(h);
			free(h);
			return rc;
		}
		disarm_spec(tr, i); /* armed again below, aggregating */
	}
	up_trace_arm_all(tr, false);
	return 0;
}

int up_trace_set_event_filter(struct up_trace *tr, unsigned i, const char *text, char *err,
			      size_t errlen)
{
	struct uprobe_cond c[UP_FILTER_MAX];
	struct up_filter f = { .n = 0 };
	struct up_spec_err se;
	struct tspec *ts;
	unsigned base;
	char *keep = NULL;
	int rc;

	err[0] = '\0';
	if (i >= tr->nspecs || tr->specs[i]->removed)
		return -ENOENT;
	ts = tr->specs[i];
	if (ts->spec.kind != UP_SPEC_EVENT)
		return -EINVAL;
	if (text && *text && strcmp(text, "0")) {
		rc = up_filter_parse(text, &f, &se);
		if (rc) {
			if (rc == -EINVAL)
				up_spec_err_format(text, &se, err, errlen);
			return rc;
		}
		if (up_filter_resolve(&f, &ts->spec, c, err, errlen))
			return -EINVAL;
		if (f.has_comm && ts->hist) {
			snprintf(err, errlen, "a comm filter and a hist trigger on one event are not "
					      "supported (the process aggregates, with no name to match)");
			return -EINVAL;
		}
		keep = strdup(text);
		if (!keep)
			return -ENOMEM;
	}
	if (f.n + ts->hist_conds > sizeof(ts->conds) / sizeof(ts->conds[0])) {
		free(keep);
		return -E2BIG;
	}
	/* [filter's conditions][trigger's], the filter's replaced */
	base = ts->nconds - ts->hist_conds;
	memmove(ts->conds + f.n, ts->conds + base, ts->hist_conds * sizeof(*ts->conds));
	memcpy(ts->conds, c, f.n * sizeof(*c));
	ts->nconds = f.n + ts->hist_conds;
	free(ts->filter_text);
	ts->filter_text = keep;
	ts->comm = f;
	disarm_spec(tr, i); /* the fast path's agents take conditions when armed */
	up_trace_arm_all(tr, false);
	return 0;
}

const char *up_trace_event_filter(const struct up_trace *tr, unsigned i)
{
	return i < tr->nspecs ? tr->specs[i]->filter_text : NULL;
}

int up_trace_trigger_text(struct up_trace *tr, unsigned i, char *buf, size_t size)
{
	if (size)
		buf[0] = '\0';
	if (i >= tr->nspecs || !tr->specs[i]->hist)
		return -ENOENT;
	return up_hist_trigger_info(tr->specs[i]->hist, buf, size);
}

int up_trace_find(struct up_trace *tr, const char *group, const char *event)
{
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];

		if (ts->removed || ts->spec.kind != UP_SPEC_EVENT)
			continue;
		if ((!group || !strcmp(group, ts->spec.group)) && !strcmp(event, ts->spec.event))
			return (int)i;
	}
	return -ENOENT;
}

bool up_trace_spec_live(const struct up_trace *tr, unsigned i)
{
	return i < tr->nspecs && !tr->specs[i]->removed;
}

const struct up_spec *up_trace_spec(const struct up_trace *tr, unsigned i)
{
	return i < tr->nspecs ? &tr->specs[i]->spec : NULL;
}

uint64_t up_trace_hits(const struct up_trace *tr, unsigned i)
{
	uint64_t hits;

	if (i >= tr->nspecs)
		return 0;
	hits = tr->specs[i]->hits;
	/* and the counts of probes still armed, which the library keeps */
	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		for (struct tprobe *p = tp->probes; p; p = p->next) {
			uint64_t n;

			if (p->ts == tr->specs[i] && lib_counts(p) && !uprobe_count(tr->ctx, &p->u, &n))
				hits += n;
		}
	}
	return hits;
}

static void sync_enabled(struct up_trace *tr)
{
	for (struct tproc *tp = tr->procs; tp; tp = tp->next)
		for (struct tprobe *p = tp->probes; p; p = p->next)
			if (p->recording)
				uprobe_set_enabled(tr->ctx, &p->u, probe_on(tr, p));
}

void up_trace_enable(struct up_trace *tr, unsigned i, bool on)
{
	if (i < tr->nspecs)
		tr->specs[i]->enabled = on;
	sync_enabled(tr);
}

bool up_trace_enabled(const struct up_trace *tr, unsigned i)
{
	return i < tr->nspecs && tr->specs[i]->enabled;
}

void up_trace_set_on(struct up_trace *tr, bool on)
{
	tr->off = !on;
	sync_enabled(tr);
}

int up_trace_timeout(struct up_trace *tr)
{
	return uprobe_ctx_timeout(tr->ctx);
}

void up_trace_set_pid_filter(struct up_trace *tr, pid_t pid)
{
	tr->pid_filter = pid;
	sync_enabled(tr);
}

int up_trace_set_wait_hook(struct up_trace *tr, void (*hook)(void *arg, int fd), void *arg)
{
	return uprobe_ctx_set_wait_hook(tr->ctx, hook, arg);
}

int up_trace_fd(struct up_trace *tr)
{
	return uprobe_ctx_fd(tr->ctx);
}

int up_trace_dispatch(struct up_trace *tr)
{
	int rc = uprobe_ctx_dispatch(tr->ctx);

	flush_pending(tr);
	if (tr->opts.out)
		fflush(tr->opts.out);
	return rc;
}

void up_trace_detach_all(struct up_trace *tr)
{
	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		if (tp->gone)
			continue;
		up_refctr_put_all(&tp->refs, tp->pid);
		uprobe_detach(tr->ctx, tp->pid);
		tp->gone = true;
		drop_probes(tp);
	}
}
