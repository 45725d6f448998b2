/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers of the probing core's tests (test_core_*.c): running a target plainly
 * and under the library with its stdout/stderr in files, reading `uprobe decode`,
 * running the sstep_count oracle, counting hits per probe and per thread.
 */
#ifndef TEST_CORE_H
#define TEST_CORE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sys/types.h>

#include <uprobe/uprobe.h>

#define CORE_TARGET(name) CORE_TARGETS "/" name

/* An instruction as `uprobe decode FILE SYMBOL` lists it. */
struct core_insn {
	uint64_t vaddr;
	unsigned len;
	char plan[16];
	char reason[48];
	char symbol[64];
};

/* Appends FILE SYMBOL's instructions to *v (*n of them); returns how many it added. */
size_t core_decode(const char *file, const char *symbol, struct core_insn **v, size_t *n);
/* The first instruction of SYMBOL, or the first whose reason is REASON. */
uint64_t core_decode_entry(const char *file, const char *symbol);
uint64_t core_decode_find(const char *file, const char *symbol, const char *reason);

/* A run's captured output. */
struct core_output {
	char out_path[64];
	char err_path[64];
	int status; /* wait status; -1 until known */
};

void core_output_init(struct core_output *o);
void core_output_cleanup(struct core_output *o);
/* Reads a whole file; the caller frees. */
char *core_slurp(const char *path, size_t *len);
/* Asserts that two runs wrote the same stdout and ended alike. */
void core_assert_same_run(const struct core_output *plain, const struct core_output *probed);

/* The process's state letter in /proc/PID/stat ('R', 'S', 't', 'Z', ...), 0 when gone. */
char core_proc_state(pid_t pid);
/* A stopped thread's rip, from /proc/PID/syscall; 0 when it is in a system call. */
uint64_t core_stopped_pc(pid_t pid);

/* Runs argv without probes (fork + exec + wait). */
void core_run_plain(char *const argv[], struct core_output *o);

/* Runs the oracle on argv counting arrivals at addrs; counts[i] for addrs[i]. */
void core_run_oracle(char *const argv[], const uint64_t *addrs, size_t n, uint64_t *counts,
		     struct core_output *o);

/* A probe that counts its hits, split by thread. */
struct core_probe {
	struct uprobe u;
	struct core_session *s;
	uint64_t hits;
	uint64_t hits_leader; /* uprobe_current_tid() == u.pid */
	uint64_t hits_other;
	uint64_t bad_rip;     /* regs->rip != u.vaddr */
	uint64_t bad_tid;     /* uprobe_current_tid() <= 0 */
	/* optional: called after counting */
	void (*action)(struct core_probe *p, uprobe_regs_t *regs);
	void *arg;
	int armed; /* the test's own bookkeeping */
	/* registration_callback's calls */
	int cb_calls, cb_reg, cb_result;
	uint64_t hits_at_cb;
};

struct core_session {
	struct uprobe_ctx *ctx;
	struct uprobe_ctx_opts opts;
	pid_t pid;		/* the spawned process */
	int exited;		/* on_exit(pid, exited or killed) seen */
	int exit_status;
	int on_exit_calls, on_exec_calls, on_fork_calls;
	pid_t fork_children[16];
	uint64_t rounds;	/* dispatch rounds in core_session_wait */
};

/* Has the library logged a line holding needle since the last core_session_new? */
bool core_logged(const char *needle);
/* ctx with opts (follow_fork, no_xol taken from *opts if not NULL). */
void core_session_new(struct core_session *s, const struct uprobe_ctx_opts *opts);
void core_session_free(struct core_session *s);
/* Spawns argv with stdout/stderr going to o's files; stopped before its first insn. */
void core_session_spawn(struct core_session *s, char *const argv[], struct core_output *o);
/* Initializes p as a counting probe at vaddr of the spawned process (not registered). */
void core_probe_init(struct core_probe *p, struct core_session *s, uint64_t vaddr);
/*
 * Resumes the process and runs poll + uprobe_ctx_dispatch until it exits, calling
 * between(arg) after each round; then records the status in o.  Fails (killing the
 * process) after timeout_s seconds.
 */
void core_session_wait(struct core_session *s, struct core_output *o, int timeout_s,
		       void (*between)(struct core_session *s, void *arg), void *arg);

/* Set by a test that skips (no 32-bit target): core_main then exits 77. */
extern int core_skipped;

/* Runs the cmocka test named argv[1] out of tests[] (all of them without argument). */
int core_main(int argc, char **argv, const struct CMUnitTest *tests, size_t n);

#endif
