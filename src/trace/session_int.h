/* SPDX-License-Identifier: MIT */
/*
 * The tracing session's insides, shared by its files (the public API is session.h).
 *
 * A session (struct up_trace) holds a table of specs (struct tspec, one per -e line or
 * events/ file, never moved: probes point at them), the processes it traces (struct
 * tproc) and in each the probes placed for the specs there (struct tprobe, one per spec
 * and process).  Its parts, one file each:
 *
 *   session.c   the object: made, freed, started, run, switched on and off, counted
 *   specs.c     the spec table: specs parsed, their files resolved, filters, lookups
 *   arm.c       probes placed in a process for the specs that resolve there, and removed
 *   maps.c      where a file is mapped in a process; the dynamic linker's hook that says
 *               when that changes
 *   procs.c     processes and their life (attach, spawn, fork, exec, exit, detach), and
 *               the cache of their threads' names
 *   capture.c   what the in-process agent captures (fast-path records) or aggregates
 *               (hist triggers) for a probe
 *   report.c    hits turned into lines: the trap path's (fetched while the thread is
 *               stopped, formatted once it runs) and the fast path's records
 *   rawrec.c    --format raw: hits written unformatted, as the agent's records
 *   triggers.c  hist triggers: tables fed from the trap path and the agents, printed
 *   hook.c      hits handed to a caller's function (up_trace_set_hit_fn: `uprobe run`)
 *
 * Internal names shared between these files take the prefix tr_; everything else in
 * them is static.  Nothing here is for callers outside src/trace/session*.c and the
 * files above.
 */
#ifndef UPROBE_TRACE_SESSION_INT_H
#define UPROBE_TRACE_SESSION_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>
#include <time.h>

#include <uprobe/uprobe.h>

#include "sym/sym.h"
#include "trace/fetch.h"
#include "trace/filter.h"
#include "trace/hist.h"
#include "trace/refctr.h"
#include "trace/session.h"
#include "trace/spec.h"
#include "trace/stack.h"

struct tspec {
	struct up_spec spec;
	char *text;
	char label[192]; /* for the counts: the event or the seed line */
	uint64_t hits;
	uint64_t lost; /* records its probes dropped, of those no longer counted live */
	/* file targets */
	bool is_file;
	dev_t dev;
	ino_t ino;
	uint64_t file_off; /* the probed instruction's offset in the file */
	bool fatal;	   /* cannot ever be armed: reported once */
	bool arm_failed;   /* placing it failed in some process (logged with the reason) */
	bool removed;	   /* up_trace_remove: gone, its index kept */
	bool enabled;	   /* events/GRP/EVENT/enable */
	unsigned index;	   /* in tr->specs */
	/* the filters, resolved on this event's arguments: the event's (--filter or
	   events/GRP/EVENT/filter) and its trigger's `if`; what of them the agent evaluates
	   (tr_filter_setup): conds, [event's][trigger's], each where it is a conjunction of
	   numeric comparisons; tracer_filter when some other is evaluated by the tracer */
	struct up_filter filt, hfilt;
	bool tracer_filter;
	struct uprobe_cond conds[2 * UP_FILTER_MAX];
	unsigned nconds;
	/* --trigger: the event's hits are aggregated into hist's table, not printed */
	struct up_hist *hist;
	char *hist_text;
	unsigned hist_conds; /* of conds, the trigger's (the last ones) */
	char *filter_text;   /* events/GRP/EVENT/filter: filt's text */
	/* up_trace_set_hit_fn: its hits go to a caller (hook.c) */
	up_trace_hit_fn hit_fn;
	void *hit_arg;
	/* the session's own (up_trace_watch_comm): no --filter, no counts, no raw event */
	bool internal;
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
	unsigned drops; /* times tr_drop_probes ran: an exec handled */
};

struct comm_entry {
	pid_t tid;
	int stat_fd;
	char comm[17];
	bool in_raw; /* --format raw: the file has this name of the thread */
};

#define COMM_CACHE 64
#define GONE_COMMS 1024

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
	/* the last spec's file, open for the next (specs.c) */
	struct up_sym_elf *spec_elf;
	dev_t spec_elf_dev;
	ino_t spec_elf_ino;
	time_t spec_elf_mtime;
	/* the dynamic linker last hooked: _dl_debug_state's file offset, by the mapped
	   file's identity (maps.c: not its ELF read again at every exec followed) */
	struct {
		dev_t dev;
		ino_t ino;
		off_t size;
		struct timespec mtime;
		uint64_t off;
		bool valid;
	} ldso;
	/* one process's /proc/PID/maps read once for an arming pass (maps.c
	   tr_maps_hold): its lookups agree with each other and cost one read */
	struct {
		pid_t pid;
		char *text;
		size_t len;
	} maps;
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
	/* the names of threads that exited, noted at their exit (tr_cb_thread_exit): their
	   records are formatted after /proc has forgotten them */
	struct {
		pid_t tid;
		char comm[17];
	} gone[GONE_COMMS];
	unsigned gone_next;
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

struct read_ctx {
	struct up_trace *tr;
	pid_t pid;
};

/* A hit as the handler gets it (rec NULL: the thread is stopped) or as a record. */
struct hit {
	pid_t pid, tid;
	int cpu; /* -1: ask /proc */
	uint64_t time_ns;
	const struct uprobe_record *rec;
};

/* A register's word in a frame (struct user_regs_struct), and its bit in a capture's
   regs mask. */
#define WORD(field) (offsetof(struct user_regs_struct, field) / 8)
#define BIT(field) (1ull << WORD(field))

/* session.c */
void tr_log(struct up_trace *tr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* up_trace_add, or (internal) a spec of the session's own: see tspec.internal. */
int tr_add_spec(struct up_trace *tr, const char *text, bool internal, char *err, size_t errlen);
void tr_probe_free(struct tprobe *p);
bool tr_probe_on(const struct up_trace *tr, const struct tprobe *p);

/* specs.c: none; its callers use the public API */

/* arm.c */
int tr_arm_proc(struct up_trace *tr, struct tproc *tp);
void tr_disarm_spec(struct up_trace *tr, unsigned i);
void tr_keep_count(struct up_trace *tr, struct tprobe *p);

/* maps.c */
/* pid's maps read now and used by the lookups below until tr_maps_release (false: the
   read failed, or another pass holds them: the lookups read /proc as they go) */
bool tr_maps_hold(struct up_trace *tr, pid_t pid);
void tr_maps_release(struct up_trace *tr);
uint64_t tr_vaddr_of(struct up_trace *tr, pid_t pid, dev_t dev, ino_t ino, uint64_t off);
void tr_hook_ldso(struct up_trace *tr, struct tproc *tp);
int tr_check_return_vaddr(struct up_trace *tr, pid_t pid, uint64_t vaddr, char *why,
			  size_t whylen);

/* procs.c */
struct tproc *tr_proc_of(struct up_trace *tr, pid_t pid);
struct comm_entry *tr_thread_info(struct up_trace *tr, pid_t pid, pid_t tid, int *cpu);
const char *tr_comm_cached(struct up_trace *tr, pid_t pid, pid_t tid);
void tr_forget_threads(struct up_trace *tr);
void tr_drop_probes(struct tproc *tp);
void tr_cb_exit(void *arg, pid_t pid, int status);
void tr_cb_exec(void *arg, pid_t pid);
void tr_cb_fork(void *arg, pid_t parent, pid_t child);
void tr_cb_thread_exit(void *arg, pid_t pid, pid_t tid);

/* capture.c */
const char *tr_filter_trap_reason(const struct up_trace *tr, const struct tspec *ts);
int tr_build_capture(struct up_trace *tr, struct tprobe *p);

/* report.c */
void tr_on_hit(struct uprobe *u, uprobe_regs_t *regs);
void tr_on_entry(struct uprobe *u, uprobe_regs_t *regs);
void tr_on_ret(struct uprobe *u, uprobe_regs_t *regs);
void tr_on_record(struct uprobe *u, const struct uprobe_record *rec);
void tr_flush_pending(struct up_trace *tr);
int tr_read_mem(void *arg, uint64_t addr, void *buf, size_t len);
/* Do ts's filters hold on a hit's values, duration and thread's name? */
bool tr_filter_holds(const struct tspec *ts, const struct up_fetch_value *vals, uint64_t dur,
		     const char *comm);
/* ts's conds, nconds, hist_conds and tracer_filter, from its filt and hfilt. */
void tr_filter_setup(struct tspec *ts);
struct up_stack_syms *tr_syms_of(struct tproc *tp);
const char *tr_stack_text(struct tproc *tp, const uint64_t *addr, unsigned n, char *buf,
			  size_t size);

/* rawrec.c */
void tr_cb_raw(void *arg, const void *recs, size_t len);
void tr_raw_check(struct up_trace *tr, int rc);
void tr_raw_site(struct up_trace *tr, const struct tprobe *p);
/* A process's executable maps into the raw file, where its stacks are walked (arm.c). */
void tr_raw_maps(struct up_trace *tr, struct tproc *tp);
void tr_raw_trap(struct tprobe *p, uprobe_regs_t *regs, bool is_return, const struct hit *h,
		 const struct up_fetch_env *env);

/* hook.c */
void tr_hook_hit(struct tprobe *p, uprobe_regs_t *regs, bool is_return, const struct hit *h,
		 struct up_fetch_env *env);

/* triggers.c */
void tr_hist_hit(struct tprobe *p, uprobe_regs_t *regs, bool is_return, const struct hit *h,
		 struct up_fetch_env *env);
void tr_on_agg(struct uprobe *u, const struct uprobe_agg_entry *e);
/* ts's hist table as it is now: the merged entries and what the agents hold (a copy,
   up_hist_table_free), NULL on -ENOMEM. */
struct up_hist_table *tr_hist_live(struct up_trace *tr, const struct tspec *ts);

#endif
