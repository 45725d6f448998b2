/* SPDX-License-Identifier: MIT */
/*
 * The benchmark harness (`make bench`): per-hit cost of a probe for each workload and
 * tool, measured side by side (rounds interleaved round-robin), and the cost of
 * inserting and removing probes.  bench_core.c runs the tools, bench_kernel.c drives
 * the kernel's uprobe tracer through tracefs, bench_reg.c times registration,
 * bench_report.c prints the table and writes the JSON and the SVG.
 */
#ifndef BENCH_BENCH_H
#define BENCH_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_MAX_ROUNDS 64
#define BENCH_MAX_W 12 /* workloads */

enum bench_kind { BK_ENTRY, BK_RET, BK_ARGS, BK_MALLOC, BK_MT, BK_FLOOR, BK_STACK };

struct bench_workload {
	const char *key;   /* "a".."g", "floor" */
	const char *label; /* for the table */
	const char *mode;  /* bench_target's argv[1] */
	const char *sym;   /* the hot function (NULL: malloc in libc, or none) */
	enum bench_kind kind;
	uint64_t vaddr;	   /* in bench_target (or libc's st_value for malloc) */
	uint64_t offset;   /* file offset, for the kernel */
	unsigned first_len; /* length of the hot function's first instruction */
};

enum bench_tool {
	T_BASE,
	T_UPROBE,     /* the library, a handler per hit */
	T_UPROBE_PIN, /* the same with UPROBE_PIN=1: the engine thread on the tracee's CPU */
	T_UPROBE_CLI, /* uprobe trace -c */
	T_FAST,	      /* the library, a counting probe on the fast path (no stop) */
	T_FAST_REC,   /* the library, a recording probe on the fast path: the agent, the ring
			 (as many hits as the ring holds: none may be lost) */
	T_FAST_BURST, /* the same for the calibrated run: the tracer's reading falls behind */
	T_CLI_RAW,    /* uprobe trace --format raw -o FILE: every record kept, to a file */
	T_CLI_TEXT,   /* uprobe trace -o FILE: a line a record, formatted behind (the spool) */
	T_CLI_JSON,   /* uprobe trace --format json -o FILE: the same, JSON */
	T_CLI_RAW0,   /* the three as they were before the spool: --when-full=drop, and */
	T_CLI_TEXT0,  /* (text, json) --spool-size 0: formatted straight from the rings */
	T_CLI_JSON0,
	T_KERNEL_FILE,	 /* the kernel's uprobe tracer, trace_pipe copied to a file, at its
			    default buffer size (1.4 MiB a CPU here) */
	T_KERNEL_FILE64, /* the same with a 64 MiB buffer a CPU */
	T_BPF_PRINTF,	 /* bpftrace printf() of the six arguments, -o FILE */
	T_KERNEL,
	T_BPFTRACE,
	T_AGG_LOG2,   /* uprobe trace -t: a log2 histogram of the first argument, in-process */
	T_AGG_KEY,    /* uprobe trace -t: a count keyed by the first argument's low byte */
	T_AGG_LAT,    /* uprobe trace -t: a log2 histogram of entry-to-return latency */
	T_BPF_LOG2,   /* the same three questions asked of bpftrace */
	T_BPF_KEY,
	T_BPF_LAT,
	T_RUN_KEY,    /* uprobe run: bpftrace's keyed count, unchanged, as it runs in-process */
	T_RUN_LAT,    /* uprobe run: bpftrace's latency pair, unchanged (a $duration in-process) */
	T_RUN_COMM,   /* uprobe run: @h[comm] = count(), the agent's per-thread comm */
	T_RUN_TID,    /* uprobe run: @h[tid] = count(), the thread's id from its TLS block */
	T_RUN_HIST,   /* uprobe run: @h = hist(arg0), in-process */
	T_BPF_COMM,   /* bpftrace @h[comm] = count() (bpftrace @h = hist(arg0) is T_BPF_LOG2) */
	T_GDB,
	T_FLOOR,
	T_FLOOR_FOLLOW, /* the tracer placed as the engine does: on the tracee's last CPU */
	T_FLOOR_SAME,
	T_FLOOR_DIFF,
	T_AGG_STACK,	/* uprobe trace -t keys=stacktrace: the agent walks the unwind tables */
	T_AGG_STACK_FP, /* the same by the frame-pointer walk (UPROBE_STACKS=fp) */
	T_BPF_STACK,	/* bpftrace @h[ustack] = count() */
	T_NTOOLS
};

struct bench_cell {
	bool used;		/* this tool runs on this workload */
	const char *skip;	/* why not (printed), or NULL */
	long n;			/* iterations (= hits) per run */
	double ns[BENCH_MAX_ROUNDS];	/* loop time of each round, ns */
	double per_hit[BENCH_MAX_ROUNDS]; /* ns per hit, baseline subtracted */
	double med, lo, hi;	/* over the rounds */
	uint64_t lost, hits;	/* records: dropped (ring full) of all the hits, over the rounds */
	double births[BENCH_MAX_ROUNDS]; /* (g): the threads' births before the loop, ns */
};

struct bench_reg_row {
	const char *tool; /* "uprobe" or "kernel" */
	long nprobes;
	const char *skip;
	double attach[BENCH_MAX_ROUNDS], insert[BENCH_MAX_ROUNDS], remove[BENCH_MAX_ROUNDS];
	double attach_med, insert_med, insert_lo, insert_hi, remove_med, remove_lo, remove_hi;
};

struct bench {
	const char *build, *target, *cli, *libc;
	char out_path[64];
	int rounds;
	double run_seconds;
	int nw;
	struct bench_workload w[BENCH_MAX_W];
	struct bench_cell cell[BENCH_MAX_W][T_NTOOLS];
	int nreg, reg_rounds;
	struct bench_reg_row reg[8];
	uint64_t big_fn;       /* registration sites */
	uint64_t text_delta;   /* bench_target's vaddr - file offset, in its text */
	const char *kernel_skip; /* why the kernel tracer is not measured, or NULL */
	const char *bpftrace_skip;
	char kernel_release[128];
	int ncpus;
	bool only; /* BENCH_TOOLS: some tools only, no registration part */
};

extern const char *const bench_tool_names[T_NTOOLS];
extern const char *const bench_tool_keys[T_NTOOLS];

/* bench_core.c */
double bench_now(void);
_Noreturn void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bench_stats(const double *v, int n, double *med, double *lo, double *hi);
/* Forks BENCH_TARGET MODE N held until bench_child_go(); stdout to /dev/null. */
pid_t bench_child_start(struct bench *b, const char *mode, long n, int *go_fd);
void bench_child_go(int go_fd);
int bench_child_wait(pid_t pid);
double bench_read_loop_ns(struct bench *b);
extern double bench_births_ns; /* the last run's threads' births (mt), ns, or 0 */
extern uint64_t bench_rec_lost; /* records the last fast-path records run dropped */

/* bench_kernel.c: NULL when usable, or the reason it is not */
const char *bench_kernel_setup(struct bench *b);
double bench_kernel_run(struct bench *b, int wi, long n);
/* The kernel's tracer to a file through trace_pipe, its buffer kb KiB a CPU (0: the
   kernel's default); the lines it did not get in *lost. */
double bench_kernel_pipe_run(struct bench *b, int wi, long n, long kb, uint64_t *lost);
/* inserts n probes at sites into pid, then removes them; seconds in *ins and *rem */
void bench_kernel_reg(struct bench *b, pid_t pid, const uint64_t *sites, long n,
		      double *ins, double *rem);
void bench_kernel_cleanup(void);

/* bench_fork.c: following processes (a shell running /bin/true BENCH_FORK_N times) */
void bench_fork_table(struct bench *b);
void bench_fork_cleanup(void);

/* bench_reg.c */
void bench_reg_run(struct bench *b);

/* bench_report.c */
void bench_report(struct bench *b);

#endif
