/* SPDX-License-Identifier: MIT */
/*
 * A tracing session: probe specs (the seed's `up PID ADDR D|S|A ...` and the kernel's
 * `p:`/`r:` event form) turned into uprobes in the processes traced, and every hit
 * turned into output lines (text as the kernels print them, or JSON).
 *
 * File-based specs (PATH:OFFSET, PATH:SYMBOL[+OFFSET]) act on every executable
 * mapping of that file (matched by device and inode) in every traced process: those
 * mapped at start, those the dynamic linker maps later (a probe on its rendezvous
 * function, _dl_debug_state, as debuggers do), and those of later execs and of
 * children (followed).  Prefix: up_trace_.
 */
#ifndef UPROBE_TRACE_SESSION_H
#define UPROBE_TRACE_SESSION_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/user.h>

#include <uprobe/uprobe.h>

#include "trace/hist.h"

struct up_trace;

struct up_trace_opts {
	FILE *out;	/* trace lines */
	bool json;	/* one JSON object a line instead of text */
	bool follow;	/* trace children (fork, vfork, clone) too */
	bool header;	/* the trace file's comment header before the first line (text) */
	bool raw;	/* out is a raw trace file (trace/raw.h): records unformatted */
	bool flush;	/* out reaches a reader at once: flushed after each trap-path hit and
			   each batch of fast-path records */
	int verbose;	/* > 0: log where each spec was armed */
	bool no_fast;	/* every probe stays on the trap path (int3 stops) */
	int fast_after; /* uprobe_ctx_opts.fast_after: a followed process's hits on int3s
			   before its probes go on the fast path (0: 128; -1: at once) */
	bool strict;	/* up_trace_start fails when any probe cannot be armed */
	size_t ring_bytes; /* the fast path's record ring per process (0: 4 MiB) */
	size_t spool_bytes; /* records waiting to be formatted (0: 256 MiB; see no_spool) */
	bool no_spool;	    /* records formatted straight from the rings */
	bool when_full_drop; /* a full ring drops records (else the thread waits for room) */
	bool metrics;	/* served as metrics (up_trace_print_metrics): histograms keep the
			   sum of their field too, for _sum */
	void (*log)(void *arg, const char *msg);
	void *log_arg;
};

int up_trace_new(const struct up_trace_opts *opts, struct up_trace **out);
/* The library's counts (records, the spool's use). */
void up_trace_lib_stats(struct up_trace *tr, struct uprobe_stats *st);
void up_trace_free(struct up_trace *tr);

/*
 * Parses one spec.  On a malformed one returns -EINVAL and writes into err a message
 * that repeats the spec with a caret under the offending token.
 */
int up_trace_add(struct up_trace *tr, const char *text, char *err, size_t errlen);
unsigned up_trace_nspecs(const struct up_trace *tr);

/*
 * A filter for every event spec ("size > 4096 && flags & 2", see trace/filter.h),
 * set before the specs are added.  -EINVAL with err (the text, a caret, why).
 */
int up_trace_set_filter(struct up_trace *tr, const char *text, char *err, size_t errlen);

/*
 * A histogram trigger, "[GRP/]EVENT:hist:keys=...[:vals=...][:sort=...][:size=N]
 * [if FILTER]" (trace/hist.h), on an event spec added before: its hits are aggregated
 * (in-process on the fast path, by the tracer on the trap path) and not printed.
 * -EINVAL with err (the text, a caret, why), -ENOENT (no such event), -EEXIST (it
 * has one already).
 */
int up_trace_add_trigger(struct up_trace *tr, const char *text, char *err, size_t errlen);
unsigned up_trace_nhists(const struct up_trace *tr);
/*
 * The same on spec i by its trigger file's text ("hist:keys=...", no event in front),
 * while tracing: the event's probes are placed again, aggregating.  "!hist:..." with
 * the keys of the trigger there removes it (its table goes).  -EINVAL with err (the
 * text, a caret, why), -EEXIST (a trigger there already), -ENOENT (no such trigger).
 */
int up_trace_set_trigger(struct up_trace *tr, unsigned i, const char *text, char *err,
			 size_t errlen);
/* Spec i's trigger as its trigger file lists it ("hist:keys=... [active]"), -ENOENT. */
int up_trace_trigger_text(struct up_trace *tr, unsigned i, char *buf, size_t size);
/* Every trigger's table as it stands (the agents' live tables merged in), printed in
   style (enum up_hist_style: text as the kernel's hist file, JSON, bpftrace's bars). */
void up_trace_print_hists(struct up_trace *tr, enum up_hist_style style, FILE *out);
int up_trace_print_hist(struct up_trace *tr, unsigned i, enum up_hist_style style, FILE *out);
/* Spec i's table's stacks (its stacktrace key's frames, one a line, innermost first)
   and hits, as they are now, to fn.  -ENOENT: no table, or none with a stack key. */
int up_trace_hist_stacks(struct up_trace *tr, unsigned i,
			 int (*fn)(void *arg, const char *frames, uint64_t hits), void *arg);
/* A table keyed by the stack for every event that has none (--format folded,
   --flamegraph): 0, or up_trace_add_trigger's error. */
int up_trace_add_stack_hists(struct up_trace *tr, char *err, size_t errlen);
/* Spec i's trigger table's entries as they stand (the agents' live tables merged in),
   each to fn (trace/hist.h); *dropped (may be NULL): hits that found no room.
   -ENOENT: no trigger there. */
int up_trace_hist_for_each(struct up_trace *tr, unsigned i, up_hist_entry_fn fn, void *ctx,
			   uint64_t *dropped);

/* Fast-path records dropped because a ring was full, so far. */
uint64_t up_trace_lost(struct up_trace *tr);
/* Of them, spec i's. */
uint64_t up_trace_spec_lost(struct up_trace *tr, unsigned i);
/* Spec i's name in the counts and the lost lines: GRP/EVENT, or the seed line. */
const char *up_trace_spec_label(const struct up_trace *tr, unsigned i);
/* Nothing when none was lost; else the lost records, in all and per spec, as the
   output's last lines: '# records lost: N ...' lines, or with json one line
   {"type":"summary","records_lost":N,"lost":{"GRP/EVENT":N,...}}. */
int up_trace_print_lost(struct up_trace *tr, FILE *out, bool json);

/* Processes: a running one (every thread), or a command launched stopped. */
int up_trace_attach(struct up_trace *tr, pid_t pid);
int up_trace_spawn(struct up_trace *tr, char *const argv[], pid_t *pid);

/*
 * Arms every spec in every process where it resolves now (the rest wait for their
 * file to be mapped), then lets launched processes run.  One policy, launched or
 * attached: every probe that can be armed is, each that cannot is logged with its
 * reason, and tracing goes on -- unless none is armed or waiting and some failed, or
 * opts.strict and any failed: then -ECANCELED, nothing resumed (up_trace_free takes
 * everything out).  up_trace_arming says how many.  Other negative errnos: the
 * launched process could not be resumed.
 */
int up_trace_start(struct up_trace *tr);

/* The specs' arming so far: asked (live specs), armed (placed in some process),
   failed (could not be, for the reasons logged) and pending (their file not mapped in
   any traced process yet). */
struct up_trace_arming {
	unsigned asked, armed, failed, pending;
};
void up_trace_arming(const struct up_trace *tr, struct up_trace_arming *out);

/* Runs until every traced process has gone (0) or *stop became nonzero (-EINTR). */
int up_trace_run(struct up_trace *tr, volatile int *stop);
/* The tracing is over (a stop, the end): every record still in the processes' rings
   and the spool is formatted now, while they run on, before counts, tables and the
   detach. */
void up_trace_finish(struct up_trace *tr);

/* The launched command's wait status, -1 while unknown. */
int up_trace_status(const struct up_trace *tr);

/*
 * The session as Prometheus metrics (text exposition format 0.0.4, or OpenMetrics 1.0
 * when om): uprobe_probe_hits_total and uprobe_records_lost_total per probe
 * ({group, event, file}), every hist trigger's live table as up_hist_print_prom
 * writes it (max_series keys a table at most).  Reads the live tables without
 * stopping anything.  0, -ENOMEM, -EIO.
 */
int up_trace_print_metrics(struct up_trace *tr, FILE *out, bool om, unsigned max_series);

/* Hits per spec, like the kernel's uprobe_profile: "  FILE-OR-PID EVENT HITS". */
void up_trace_print_counts(struct up_trace *tr, FILE *out);

/*
 * A live session, as the control filesystem (src/fs/) drives it: specs added and
 * removed while processes run, events switched on and off.  Specs keep their index
 * for the session's life; a removed one stays as a hole.
 */
#include <stdint.h>

struct up_spec;

/* Arms every spec where it resolves; attach: first trace the PIDs seed specs name. */
int up_trace_arm_all(struct up_trace *tr, bool attach);
/* Disarms spec i everywhere. */
int up_trace_remove(struct up_trace *tr, unsigned i);
/* The index of the live event spec GRP/EVENT (group NULL: any), or -ENOENT. */
int up_trace_find(struct up_trace *tr, const char *group, const char *event);
bool up_trace_spec_live(const struct up_trace *tr, unsigned i);
const struct up_spec *up_trace_spec(const struct up_trace *tr, unsigned i);
uint64_t up_trace_hits(const struct up_trace *tr, unsigned i);
/* events/GRP/EVENT/enable: a disabled spec stays armed but records nothing. */
void up_trace_enable(struct up_trace *tr, unsigned i, bool on);
bool up_trace_enabled(const struct up_trace *tr, unsigned i);
/* tracing_on */
void up_trace_set_on(struct up_trace *tr, bool on);
/* set_event_pid: only this process's hits (0: every traced process's) */
void up_trace_set_pid_filter(struct up_trace *tr, pid_t pid);
/* The event loop, non-blocking: poll up_trace_fd for POLLIN (at most up_trace_timeout
   ms: -1 forever), then dispatch. */
int up_trace_timeout(struct up_trace *tr);
int up_trace_fd(struct up_trace *tr);
/* uprobe_ctx_set_wait_hook(): what to serve while waiting for a tracee to stop */
/*
 * events/GRP/EVENT/filter: event i's hits are kept only where text (the kernel's filter
 * expression on the event's named arguments, up_filter_parse) holds, on the fast path
 * and the trap path alike; "0" or "" removes it.  -EINVAL with err (a caret line when
 * the text is at fault), -ENOENT when i is no live event.  The filter's text, or NULL.
 */
int up_trace_set_event_filter(struct up_trace *tr, unsigned i, const char *text, char *err,
			      size_t errlen);
const char *up_trace_event_filter(const struct up_trace *tr, unsigned i);
int up_trace_set_wait_hook(struct up_trace *tr, void (*hook)(void *arg, int fd), void *arg);
int up_trace_dispatch(struct up_trace *tr);
/* Every process let go, its probes removed (unmount). */
void up_trace_detach_all(struct up_trace *tr);

/*
 * Hits handed to a caller instead of printed: a front end (src/bt/, `uprobe run`) that
 * runs its own code at each hit.  fn is called while the hit's thread is stopped (the
 * trap path: the session must be made with opts.no_fast and no opts.out), with the
 * thread's registers and a reader of its memory; what it does there the thread waits
 * for.  The hit's stack and names come from the up_trace_hit_* calls below, valid only
 * during fn.
 */
struct up_trace_hit {
	struct up_trace *tr;
	unsigned spec;		/* the spec's index */
	pid_t pid, tid;
	uint64_t time_ns;	/* CLOCK_MONOTONIC at the stop */
	bool is_return;
	uint64_t addr;		/* the probed address */
	const struct user_regs_struct *regs;
	const char *comm;	/* the thread's name (cached per thread) */
	/* the process's memory: 0 or a negative errno */
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *read_ctx;
	const void *priv;	/* the session's */
};
typedef void (*up_trace_hit_fn)(void *arg, const struct up_trace_hit *h);
/* Spec i's hits go to fn (NULL: printed again).  -ENOENT: no such spec. */
int up_trace_set_hit_fn(struct up_trace *tr, unsigned i, up_trace_hit_fn fn, void *arg);
/* The hit's user stack, innermost first, by the unwind tables (as $ustack): the
   number of addresses put into out. */
unsigned up_trace_hit_ustack(const struct up_trace_hit *h, uint64_t *out, unsigned max);
/* An address of the hit's process, named: the function holding it and the offset
   into it (*off), 0; or -ENOENT (no symbol: *off the offset into its file, name the
   file's base name or "" when no file). */
int up_trace_hit_sym(const struct up_trace_hit *h, uint64_t addr, char *name, size_t size,
		     uint64_t *off);
/* The spec's fetch arguments' values at the hit (a USDT probe's operands: arg1..argN),
   as integers, signed ones sign-extended: how many were put into out. */
unsigned up_trace_hit_args(const struct up_trace_hit *h, uint64_t *out, unsigned max);
/* The cpu the hit's thread last ran on (read from /proc), -1 when unknown. */
int up_trace_hit_cpu(const struct up_trace_hit *h);
/* A thread of the hit's process may have a new name (the hit is the return of a call
   that sets one): the session's names and the fast path's comm keys are read again. */
int up_trace_hit_comm_changed(const struct up_trace_hit *h);

/*
 * Renames watched (hook.c): the returns of libc's prctl and pthread_setname_np (libc as
 * process pid maps it, else the linker's; pid 0 for a command not yet started) tell
 * the session's names and the fast path's comm keys to be read again, so that $comm,
 * a comm filter, a `comm` hist key and `uprobe run`'s comm see a thread's new name from
 * its next hit on.  Specs of the session's own: not counted, not filtered, not in the
 * metrics or the arming counts.  A name set by a raw syscall or a hand-written
 * /proc/self/task/TID/comm is seen at the next watched call only.  Called for each
 * process, each libc they map is watched once.  0, -ENOENT (no libc, or neither
 * function: logged), -ENOMEM.
 */
int up_trace_watch_comm(struct up_trace *tr, pid_t pid);
/* Does a spec read the thread's name ($comm, a filter's comm)? */
bool up_trace_uses_comm(const struct up_trace *tr);

#endif
