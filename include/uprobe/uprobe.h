/* SPDX-License-Identifier: MIT */
/*
 * uprobe: dynamic probes on user-space instructions, from user space (ptrace).
 *
 * The API of the 2010 uprobes RFC (seed 007), adapted: a struct uprobe names a process
 * and a virtual address and carries a handler; register_uprobe() arms it,
 * unregister_uprobe() disarms it.  What a kernel module got from the kernel -- a
 * context to run in -- a program gets from a struct uprobe_ctx: it owns the traced
 * processes and calls the handlers from uprobe_ctx_run() or uprobe_ctx_dispatch(),
 * in the thread that calls them.
 *
 * Every function returns 0 or a negative errno.  Nothing here prints; see
 * uprobe_ctx_set_log() for the details behind an error.
 */
#ifndef UPROBE_UPROBE_H
#define UPROBE_UPROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UPROBE_API __attribute__((visibility("default")))

struct uprobe_ctx;
struct uprobe_capture;
struct uprobe_record;
struct uprobe_agg_entry;
struct uprobe_kimg; /* private: the probepoint a uprobe is armed on */

/*
 * The registers of the thread that hit the probe (the layout PTRACE_GETREGS gives, for
 * 64- and 32-bit processes alike; rip is the probed address).  A handler may change
 * them; the change is applied when the thread resumes.  Changing rip resumes the
 * thread there instead of executing the probed instruction.
 */
typedef struct user_regs_struct uprobe_regs_t;

struct uprobe {
	pid_t pid;	/* the process (thread group id) */
	uint64_t vaddr; /* the probed instruction's virtual address in pid */
	/* called, in registration order with the address's other uprobes, on each hit */
	void (*handler)(struct uprobe *u, uprobe_regs_t *regs);
	/*
	 * Called when a registration (reg = 1) or unregistration (reg = 0) asked for from
	 * inside a handler -- which returned -EINPROGRESS -- has completed; result is
	 * what the call would have returned.  May be NULL.
	 */
	void (*registration_callback)(struct uprobe *u, int reg, int result);
	/*
	 * A return probe: when set (vaddr must then be a function's entry), each hit
	 * hijacks the return address, and ret_handler is called when the function
	 * returns, with the registers at the return (rax the return value, rip where it
	 * returns to).  handler may be NULL then.  Frames skipped by longjmp or unwinding
	 * are dropped without a call.
	 */
	void (*ret_handler)(struct uprobe *u, uprobe_regs_t *regs);
	unsigned flags; /* UPROBE_F_* */
	void *data;	/* the caller's */
	/*
	 * The fast path's recording probes: what to capture on each hit, and the handler
	 * that gets each record, later, from uprobe_ctx_run/dispatch.  Where the fast path
	 * is safe the thread never stops: an in-process agent writes the record into a
	 * ring shared with the tracer.  Elsewhere (and in followed children) the probe
	 * takes the trap path and handler is called instead, so a recording probe sets
	 * both.  capture must stay valid while u is registered.
	 */
	const struct uprobe_capture *capture;
	void (*record_handler)(struct uprobe *u, const struct uprobe_record *rec);
	/*
	 * An aggregating probe (capture->agg): called with every entry of its in-process
	 * tables, and then the dropped count, when they go (unregistration, exit, exec,
	 * the site leaving the fast path), so that uprobe_agg_read never sees them again.
	 * Hits on the trap path are not aggregated by the library: handler/ret_handler
	 * get them, as for a recording probe.
	 */
	void (*agg_handler)(struct uprobe *u, const struct uprobe_agg_entry *e);
	/* raw records (uprobe_ctx_opts.raw_handler): what their header's probe field says */
	uint32_t raw_id;

	/* private to the library */
	struct uprobe_kimg *kimg; /* non-NULL while registered */
	int kind;		  /* what kimg is: a probepoint or a fast-path patch */
	uint64_t nhits;		  /* UPROBE_F_COUNT: hits counted so far (uprobe_count) */
	uint64_t nlost;		  /* recording probes: records lost so far (uprobe_lost) */
};

/*
 * u->flags.  A counting probe (UPROBE_F_COUNT) may have no handler; then, where it is
 * safe, it takes the fast path: the instruction is replaced by a jmp into a trampoline
 * that counts in the process's own memory and never stops the thread
 * (UPROBE_PLAN_FAST; uprobe_count reads the count).
 */
#define UPROBE_F_COUNT (1u << 0)
#define UPROBE_F_NO_FAST (1u << 1) /* a counting probe that stays on the trap path */

/*
 * What a recording probe captures.  A fetch starts from a register (a slice of it) or
 * a constant, then reads through it: each step reads len (1..8) bytes at value + off
 * into the value.  It may end in a string (at value + final_off, until its NUL, at most
 * final_len bytes) or a block of final_len bytes.  Memory is read fault-safe: a bad
 * pointer makes the read fail in the record, never a fault in the program.  The
 * record holds the registers asked for and every byte read, so the tracer can
 * evaluate its fetch arguments on it afterwards (uprobe_record_read).
 */
#define UPROBE_FETCH_STEPS 16

enum uprobe_fetch_base { UPROBE_FETCH_REG, UPROBE_FETCH_IMM };
enum uprobe_fetch_final {
	UPROBE_FETCH_VALUE,
	UPROBE_FETCH_STRING,
	UPROBE_FETCH_BYTES,
	/* the user stack: the frame-pointer walk from the value (the frame pointer), at most
	   final_len frames; the record holds every read it made ([sp] when at_entry, 16
	   bytes at each frame), so the tracer can walk it again on the record */
	UPROBE_FETCH_STACK,
};

struct uprobe_fetch {
	enum uprobe_fetch_base base;
	unsigned reg;		 /* UPROBE_FETCH_REG: offsetof(struct user_regs_struct, X) */
	unsigned reg_size;	 /* bytes of it: 1, 2, 4, 8 */
	unsigned reg_shift;	 /* 8 for ah, bh, ch, dh */
	int64_t imm;		 /* UPROBE_FETCH_IMM */
	unsigned nsteps;
	struct {
		int64_t off;
		unsigned len;
	} step[UPROBE_FETCH_STEPS];
	enum uprobe_fetch_final final;
	int64_t final_off;
	unsigned final_len;
	/* the value's type, for conditions: size in bytes, sign, a bitfield */
	unsigned size;
	bool is_signed;
	unsigned bf_width, bf_offset;
	bool at_entry; /* STACK: a function's first instruction: [sp] is its caller */
};

enum uprobe_cmp { UPROBE_EQ, UPROBE_NE, UPROBE_LT, UPROBE_LE, UPROBE_GT, UPROBE_GE, UPROBE_AND };

/* A record is made only when every condition holds: fetch[fetch] OP value. */
#define UPROBE_COND_DURATION 0xffffffffu /* cond.fetch: a return probe's entry-to-return ns */

struct uprobe_cond {
	unsigned fetch;
	enum uprobe_cmp op;
	int64_t value;
};

/*
 * Aggregation: instead of a record per hit, the hit updates a table in the process's
 * memory (one per CPU, merged by whoever reads them): the entry of its key -- up to
 * UPROBE_AGG_KEYS fields, each a fetch's value (a number, optionally bucketed by log2
 * or linearly, or a string's first len bytes), the entry-to-return duration of a return
 * probe, or the user stack -- counts the hit and keeps a sum, min or max of each val.
 * Nothing goes through the ring; a table that is full counts the hit as dropped.
 */
#define UPROBE_AGG_KEYS 3
#define UPROBE_AGG_VALS 6
#define UPROBE_AGG_STACK_MAX 32  /* frames of a stack key */
#define UPROBE_AGG_STRING_MAX 256 /* bytes of a string key */

enum uprobe_agg_src {
	UPROBE_AGG_FETCH,    /* capture->fetch[fetch]'s value (a string: its bytes) */
	UPROBE_AGG_DURATION, /* a return probe: ns from the function's entry to its return */
	UPROBE_AGG_STACK,    /* keys only: the return addresses, innermost first */
	UPROBE_AGG_TID,	     /* keys only: the thread's id (words 1) */
	UPROBE_AGG_COMM,     /* keys only: the thread's comm, 16 bytes NUL-padded (words 2) */
};
enum uprobe_agg_xform { UPROBE_AGG_RAW, UPROBE_AGG_LOG2, UPROBE_AGG_BUCKETS };
#define UPROBE_AGG_LOG2_FLOOR 1 /* uprobe_agg_key.buckets of a LOG2 key: floor, not ceil */
enum uprobe_agg_op { UPROBE_AGG_SUM, UPROBE_AGG_MIN, UPROBE_AGG_MAX };

struct uprobe_agg_key {
	enum uprobe_agg_src src;
	unsigned fetch;
	enum uprobe_agg_xform xform; /* numbers: LOG2 keeps ceil(log2(v)) (with buckets ==
					UPROBE_AGG_LOG2_FLOOR: v's bit length, bpftrace's
					[2^k, 2^(k+1)) buckets), BUCKETS v - v % buckets */
	uint64_t buckets;
	/* key words it takes: 1 for a number; a string's bytes / 8 (NUL-padded, up to
	   UPROBE_AGG_STRING_MAX bytes); a stack's depth (0 after the last frame) */
	unsigned words;
};

struct uprobe_agg_val {
	enum uprobe_agg_src src; /* FETCH (a number) or DURATION */
	unsigned fetch;
	enum uprobe_agg_op op;
	bool is_signed; /* MIN, MAX: compare as signed */
};

struct uprobe_agg {
	unsigned nkeys;
	struct uprobe_agg_key key[UPROBE_AGG_KEYS];
	unsigned nvals;
	struct uprobe_agg_val val[UPROBE_AGG_VALS];
	unsigned size;	/* entries per table, a power of two; 0: 2048 */
	bool at_entry;	/* stacks: the probe is a function's first instruction, so [rsp] is
			   its caller's return address (rbp is still the caller's frame) */
};

/* A table entry: key words as the keys lay them out, val[0] the hits, then one word per
   val.  key == NULL: val[0] is the number of hits dropped because a table was full. */
struct uprobe_agg_entry {
	const uint64_t *key;
	unsigned nkey;
	const uint64_t *val;
	unsigned nval;
};

struct uprobe_capture {
	uint64_t regs; /* bit i: word i of struct user_regs_struct (rip is always there) */
	const struct uprobe_fetch *fetch;
	unsigned nfetch;
	const struct uprobe_cond *cond;
	unsigned ncond;
	const struct uprobe_agg *agg; /* non-NULL: aggregate, no records (agg_handler) */
	/* a return probe: the first six argument registers as they were at the entry
	   (rdi rsi rdx rcx r8 r9) are, at the return, the frame words from
	   UPROBE_ENTRY_ARG_WORD on (fs_base ... gs, which a return has no use for): regs
	   and fetches may name them */
	bool entry_args;
};

#define UPROBE_ENTRY_ARG_WORD 21 /* offsetof(struct user_regs_struct, fs_base) / 8 */

/* One hit, as the fast path recorded it. */
struct uprobe_record {
	pid_t pid, tid;		    /* tid 0: the thread could not be named */
	bool is_return;		    /* a return probe's: regs->rip is where it returned to */
	int cpu;
	uint64_t time_ns;	    /* CLOCK_MONOTONIC */
	const uprobe_regs_t *regs; /* the registers captured; the others read 0 */
	const void *priv;
};

/*
 * Raw records (uprobe_ctx_opts.raw_handler): the fast path's records as the ring holds
 * them, a span of whole records at a time, with no call per record -- the way to keep
 * every record of a hot probe (uprobe trace --format raw, uprobe report).  A record is
 * a struct uprobe_raw_rec; then the frame words of the probe's capture (capture->regs,
 * rip always included: a return's return address, an entry probe's word is not
 * meaningful), in struct user_regs_struct's order; then, to len, one struct
 * uprobe_raw_mem per read its fetches made, each followed by its bytes (unless it
 * faulted) padded to 8.  Records of probes gone, and the ring's end, have probe
 * UPROBE_RAW_SKIP.  record_handler is not called for such records.
 */
#define UPROBE_RAW_SKIP 0xffffffffu
#define UPROBE_RAW_RET 0x40000000u /* flags: a return probe's record */
#define UPROBE_RAW_CPU 0x0fffffffu /* flags: the cpu */
#define UPROBE_RAW_FAULT 1u	   /* uprobe_raw_mem.flags: the read faulted, no bytes */
#define UPROBE_RAW_STRING 2u	   /* a string, read up to its NUL (included) */

struct uprobe_raw_rec {
	uint32_t size;	/* bytes from this record to the next, a multiple of 8 */
	uint32_t probe; /* the uprobe's raw_id, or UPROBE_RAW_SKIP */
	uint32_t len;	/* bytes of it written, this header included */
	uint32_t flags; /* the cpu | UPROBE_RAW_RET */
	int32_t pid, tid; /* tid 0: the thread could not be named */
	uint64_t time_ns; /* CLOCK_MONOTONIC */
};

struct uprobe_raw_mem {
	uint64_t addr;
	uint32_t len;
	uint32_t flags; /* UPROBE_RAW_FAULT, UPROBE_RAW_STRING */
};

/* Memory as the agent read it for this record: 0, or -EFAULT (a fault, or not read). */
UPROBE_API int uprobe_record_read(const struct uprobe_record *rec, uint64_t addr, void *buf,
				  size_t len);

/* How a probed instruction is executed, as uprobe_plan() reports it. */
enum uprobe_plan {
	UPROBE_PLAN_EMULATE,
	UPROBE_PLAN_XOL,
	UPROBE_PLAN_STEP,
	UPROBE_PLAN_INLINE,
	UPROBE_PLAN_FAST, /* in-process: a jmp to a trampoline that counts or records, no stop */
};

struct uprobe_ctx_opts {
	bool follow_fork; /* keep probing children (fork/vfork/clone); default: clean them */
	bool no_xol;	  /* never inject a slot area: every hit uses the inline step */
	bool verbose;	  /* log informational messages too (fast-path fallbacks...) */
	size_t ring_bytes; /* each of the fast path's record rings (one a thread for up to
			      16 threads of a process, then a shared one); 0: 4 MiB */
	void (*log)(void *arg, const char *msg); /* error details; default: dropped */
	void *log_arg;
	/* called when a traced process exits or execs (its probes are unregistered);
	   on_exit's wait_status is -1 for a process let go untraced (an exec of a set-uid
	   or set-gid program that would gain rights the tracer does not have) */
	void (*on_exit)(void *arg, pid_t pid, int wait_status);
	void (*on_exec)(void *arg, pid_t pid);
	/* called for a new child when follow_fork is set */
	void (*on_fork)(void *arg, pid_t parent, pid_t child);
	/* called at a thread's exit while its /proc entries are still there (its comm,
	   say): note what its records need.  Set, the thread is let go at once, its
	   records read from its ring later; unset, they are handed to record_handler
	   before it goes (the exit waits for them), as they always are at the exit of a
	   process's last thread */
	void (*on_thread_exit)(void *arg, pid_t pid, pid_t tid);
	/* called after a batch of fast-path records went to record_handler (flush here) */
	void (*on_records)(void *arg);
	/* set: the fast path's records go here raw, spans of struct uprobe_raw_rec
	   (valid during the call only), instead of to record_handler */
	void (*raw_handler)(void *arg, const void *recs, size_t len);
	void *arg;
	/* The spool (record_handler, not raw_handler): the fast path's records are copied
	   out of the rings as they come and handed to record_handler from here, behind,
	   so a slow handler loses none while it has room.  spool_bytes bounds it: the
	   first 64 MiB in memory, the rest in a temporary file ($TMPDIR or /tmp); 0: 256
	   MiB.  no_spool: records go to record_handler straight from the rings. */
	size_t spool_bytes;
	bool no_spool;
	/* When a ring is full (the spool is, or a hot thread outruns the tracer's copy):
	   UPROBE_WHEN_FULL_BLOCK (the default) the thread waits for room -- a signal still
	   reaches it, and it waits no more once its tracer shows no life for 1 s or
	   detaches; UPROBE_WHEN_FULL_DROP the record is dropped and counted (uprobe_lost) */
	int when_full;
	/* A process reached by following a fork or an exec (not one attached or spawned)
	   takes its probes' first hits through int3s; at its fast_after-th hit they move
	   to the fast path where it allows them, in one quiesce.  A new process's agent
	   costs what ~130 trap hits do: a short-lived one (a shell's /bin/true) never pays
	   for one, a busy one pays at most about twice what knowing ahead would have cost.
	   0: UPROBE_FAST_AFTER_DEFAULT; -1: at once, as for the first process */
	int fast_after;
};

#define UPROBE_FAST_AFTER_DEFAULT 128

#define UPROBE_WHEN_FULL_BLOCK 0
#define UPROBE_WHEN_FULL_DROP 1
#define UPROBE_SPOOL_DEFAULT ((size_t)256 << 20)

UPROBE_API int uprobe_ctx_new(const struct uprobe_ctx_opts *opts, struct uprobe_ctx **out);
/* Unregisters every probe, detaches from every process (they run on unharmed). */
UPROBE_API void uprobe_ctx_free(struct uprobe_ctx *ctx);

/*
 * Traces a running process: every thread, and every thread it creates later.
 * -ESRCH: no such process; -EPERM: not allowed (the log says what to change);
 * -EBUSY: another tracer (a debugger) is attached.
 */
UPROBE_API int uprobe_attach(struct uprobe_ctx *ctx, pid_t pid);
/*
 * Starts argv (PATH searched) traced and stopped before its first instruction, so that
 * probes can be registered before it runs; uprobe_resume() lets it go.
 */
UPROBE_API int uprobe_spawn(struct uprobe_ctx *ctx, char *const argv[], pid_t *pid);
UPROBE_API int uprobe_resume(struct uprobe_ctx *ctx, pid_t pid);
/* Unregisters the process's probes and stops tracing it. */
UPROBE_API int uprobe_detach(struct uprobe_ctx *ctx, pid_t pid);
/*
 * The exit status (as waitpid's) of pid, a child of the caller that the library had
 * stopped tracing (a spawned program that exec'd a set-uid file, say) and reaped in
 * one of its waits for any child, so that the caller's waitpid(pid) said ECHILD.  0;
 * -ECHILD where the library did not reap it.  Any time, also after uprobe_ctx_free().
 */
UPROBE_API int uprobe_reaped_status(pid_t pid, int *status);

/*
 * Arms u (pid, vaddr, handler set by the caller; u must stay valid until it is
 * unregistered).  The process must be attached or spawned through ctx.  -EINVAL:
 * vaddr is not an instruction boundary or not in executable memory; -ENOTSUP: the
 * instruction there cannot be probed (the log says which and why); -EEXIST: an int3
 * that is not ours is there; -ESRCH: the process is not traced by ctx or has gone.
 * From inside a handler: queued, returns -EINPROGRESS, registration_callback tells.
 */
UPROBE_API int register_uprobe(struct uprobe_ctx *ctx, struct uprobe *u);
/* Disarms u; a no-op for a uprobe not registered (or whose process has exited). */
UPROBE_API int unregister_uprobe(struct uprobe_ctx *ctx, struct uprobe *u);

/* Arms or disarms several probes of one process with one quiesce.  Returns the
   first error; the others are still attempted. */
UPROBE_API int register_uprobes(struct uprobe_ctx *ctx, struct uprobe **u, size_t n);
UPROBE_API int unregister_uprobes(struct uprobe_ctx *ctx, struct uprobe **u, size_t n);

/*
 * Hits of a UPROBE_F_COUNT uprobe, also after its process has gone.  For a recording
 * probe on the fast path: records delivered + records lost + hits its conditions
 * dropped.
 */
UPROBE_API int uprobe_count(struct uprobe_ctx *ctx, const struct uprobe *u, uint64_t *hits);

/*
 * A recording probe on the fast path stops (on = false) or resumes recording and
 * counting, without a stop of the process.  For any other probe a no-op: its handler
 * decides.
 */
UPROBE_API int uprobe_set_enabled(struct uprobe_ctx *ctx, struct uprobe *u, bool on);

/*
 * How long (ms) an event loop may sleep before it calls uprobe_ctx_dispatch even if
 * the descriptor stayed quiet: records of the fast path arrive without a stop (10
 * while the rings stay empty, down to 0 while they fill fast).  -1: as long as it
 * likes.
 */
UPROBE_API int uprobe_ctx_timeout(struct uprobe_ctx *ctx);

/* Records of u dropped because the ring was full (fast path), so far. */
UPROBE_API int uprobe_lost(struct uprobe_ctx *ctx, const struct uprobe *u, uint64_t *lost);

/*
 * An aggregating probe's in-process tables as they are now: fn gets every entry of
 * every table (a key may come once per table: the reader merges), then the dropped
 * count (an entry with key NULL).  0 (also when u has no tables: nothing is called).
 */
UPROBE_API int uprobe_agg_read(struct uprobe_ctx *ctx, const struct uprobe *u,
			       void (*fn)(void *arg, const struct uprobe_agg_entry *e), void *arg);

/*
 * From inside a ret_handler on the trap path: ns since the function's entry hit
 * (its entry stop), in *ns.  -ENOENT outside a return.
 */
UPROBE_API int uprobe_current_duration(struct uprobe_ctx *ctx, uint64_t *ns);
/*
 * The process's mappings changed (a library mapped or unmapped: the dynamic linker's
 * rendezvous): the fast path's stack walks learn of the new files' unwind tables.
 * 0; nothing to do where no probe of the process walks stacks on the fast path.
 */
UPROBE_API int uprobe_stacks_sync(struct uprobe_ctx *ctx, pid_t pid);
/*
 * A thread of pid may have a new comm (a prctl(PR_SET_NAME) or pthread_setname_np
 * returned): the fast path's comm keys ask the kernel again at each thread's next hit.
 * 0, or -ESRCH.
 */
UPROBE_API int uprobe_comm_changed(struct uprobe_ctx *ctx, pid_t pid);
/*
 * Inside a handler: value, read from the current thread's stack at slot, is the
 * trampoline a return probe put in place of a return address (the trap path's, or a
 * stub of the fast path's):
 * 0 and the return address it hides in *ret, else -ENOENT.  A stack walk shows the
 * caller the program sees, as it would be without uprobe.
 */
UPROBE_API int uprobe_current_return(struct uprobe_ctx *ctx, uint64_t slot, uint64_t value,
				     uint64_t *ret);
/*
 * A stack walk's row (the library's sym/unwind.h struct up_unwind_row, into row) for a
 * pc of pid's in code of the library's own (a fast-path trampoline, the agent's code),
 * so that a signal that interrupted it shows the program's frames: 1 a row; 0 code of
 * ours without one; -1 not ours.
 */
UPROBE_API int uprobe_code_row(struct uprobe_ctx *ctx, pid_t pid, uint64_t pc, void *row);

/* How the probed instruction of a registered u is executed. */
UPROBE_API int uprobe_plan(struct uprobe_ctx *ctx, const struct uprobe *u,
			   enum uprobe_plan *plan);

/*
 * From inside a handler: the thread that hit, and the traced process's memory.
 * Outside a handler uprobe_current_tid() is 0; the memory calls take the pid.
 */
UPROBE_API pid_t uprobe_current_tid(struct uprobe_ctx *ctx);
/* The process of that thread (for a followed child, not u->pid). */
UPROBE_API pid_t uprobe_current_pid(struct uprobe_ctx *ctx);
UPROBE_API int uprobe_read(struct uprobe_ctx *ctx, pid_t pid, uint64_t addr, void *buf,
			   size_t len);
UPROBE_API int uprobe_write(struct uprobe_ctx *ctx, pid_t pid, uint64_t addr, const void *buf,
			    size_t len);

/* The event loop: a pollable descriptor + a non-blocking dispatch, or a blocking run. */
UPROBE_API int uprobe_ctx_fd(struct uprobe_ctx *ctx);
/*
 * While the library waits for a thread to stop (attaching, quiescing a process to place
 * or remove a probe), hook(arg, fd) is called instead of blocking: fd becomes readable
 * when a tracee changes state.  For a tracer that also serves what its tracees may be
 * blocked on (a FUSE filesystem they write to): serve it there, or the wait never ends.
 * The hook must not call the library.  NULL restores the blocking wait.
 */
UPROBE_API int uprobe_ctx_set_wait_hook(struct uprobe_ctx *ctx, void (*hook)(void *arg, int fd),
					void *arg);
/* Handles what is ready, a bounded batch of it: the fd stays readable while more is. */
UPROBE_API int uprobe_ctx_dispatch(struct uprobe_ctx *ctx);
/* Runs until no process is traced (0), or *stop became nonzero (-EINTR). */
UPROBE_API int uprobe_ctx_run(struct uprobe_ctx *ctx, volatile int *stop);
/* The end of a trace, before the detach: the fast path writes no more records, and
   the handlers get every record still waiting, now, while the processes run on (a
   detach would deliver them with every thread stopped).  Probes stay in place. */
UPROBE_API void uprobe_ctx_finish(struct uprobe_ctx *ctx);
/* From a handler or callback: makes uprobe_ctx_run return -EINTR after this event. */
UPROBE_API void uprobe_ctx_break(struct uprobe_ctx *ctx);

/* Counters, for tools and benchmarks. */
struct uprobe_stats {
	uint64_t hits, emulated, xol, stepped, inlined, delayed_signals, doomed;
	uint64_t returns, returns_dropped; /* return probes: handled, frames gone */
	uint64_t fast_patched, fast_refused;  /* fast-path sites patched, kept on int3 */
	uint64_t records, records_lost, records_filtered; /* the fast path's records */
	/* the spool: the most it held in memory and in its file (bytes), the bytes that
	   went to the file, and those lost to a failed write of it */
	uint64_t spool_peak_mem, spool_peak_file, spool_spilled, spool_dropped;
	/* followed processes whose probes moved from int3s to the fast path at their
	   fast_after-th hit, and the probes moved */
	uint64_t promotions, promoted;
};
UPROBE_API void uprobe_ctx_stats(struct uprobe_ctx *ctx, struct uprobe_stats *st);

#ifdef __cplusplus
}
#endif
#endif
