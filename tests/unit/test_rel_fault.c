/* SPDX-License-Identifier: MIT */
/*
 * Target faults (issue 8, part 2):
 *   kill_midstep         threads loop on a probed `syscall` (single-stepped) while the
 *                        test SIGKILLs the process at random moments, 30 times:
 *                        uprobe_ctx_run returns, on_exit says SIGKILL, no hang.
 *   kill_midinsert       the same process SIGKILLed while the test registers and
 *                        unregisters batches of probes as fast as it can.
 *   exit_during_quiesce  threads that exit all the time while the test registers and
 *                        unregisters probes between dispatch rounds: no error but
 *                        -ESRCH at the very end, exact hits, output as unprobed.
 *   exec_nonleader       a non-leader thread execs while the test keeps registering
 *                        probes: on_exec once, the new image's output and status as
 *                        unprobed.
 *   exec_unseen          the process execs after the attach and before a
 *                        registration, its exec stop not yet dispatched: the probe
 *                        goes into the new image (no SIGTRAP death), hit K times.
 *   trap_unseen_fast     a thread has trapped on the int3 of a 1-byte instruction, its
 *                        stop not yet dispatched (its rip one past the int3); that probe
 *                        goes and a counting probe on the instruction before asks for a
 *                        jmp over both: the thread, sent back to run the original, would
 *                        land inside the jmp.  Output as unprobed, exact count.
 * The random delays come from a seed printed at the start (REL_SEED=N repeats a run).
 */
#include "test_core.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned g_seed;

static void seed_init(void)
{
	const char *e = getenv("REL_SEED");

	g_seed = e ? (unsigned)strtoul(e, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
	print_message("seed %u (REL_SEED=%u repeats it)\n", g_seed, g_seed);
	srand(g_seed);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Gone for good: reaped (by the library), or a zombie. */
static int gone(pid_t pid)
{
	char st = core_proc_state(pid);

	return !st || st == 'Z' || st == 'X';
}

/* ---- the killer ----------------------------------------------------------------------- */

struct killer {
	pthread_t th;
	pid_t pid;
	long delay_us;
};

static void *killer_main(void *arg)
{
	struct killer *k = arg;
	struct timespec ts = {k->delay_us / 1000000, (k->delay_us % 1000000) * 1000};

	/* the library's SIGCHLD handler interrupts the sleep: sleep the rest */
	while (k->delay_us && nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
	kill(k->pid, SIGKILL);
	return NULL;
}

static void killer_start(struct killer *k, pid_t pid, long delay_us)
{
	sigset_t set, old;

	k->pid = pid;
	k->delay_us = delay_us;
	/* the watchdog's SIGALRM is for the thread that runs the loop */
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	assert_int_equal(pthread_create(&k->th, NULL, killer_main, k), 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static volatile int g_stop;

static void on_alarm(int sig)
{
	(void)sig;
	g_stop = 1;
}

static void watchdog_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
}

/* ---- kill_midstep / kill_midinsert ---------------------------------------------------- */

#define KILL_ITERS 30

static void assert_killed(struct core_session *s, int iter)
{
	if (!s->exited)
		fail_msg("iteration %d: no on_exit for pid %d", iter, (int)s->pid);
	if (!WIFSIGNALED(s->exit_status) || WTERMSIG(s->exit_status) != SIGKILL)
		fail_msg("iteration %d: on_exit status %#x, not SIGKILL", iter, s->exit_status);
	assert_true(gone(s->pid));
}

static void kill_midstep(void **state)
{
	const char *prog = CORE_TARGET("rel_syscall");
	char *argv[] = {(char *)prog, (char *)"3", NULL};
	uint64_t sys_va = core_decode_find(prog, "do_getppid", "syscall");
	uint64_t entry_va = core_decode_entry(prog, "do_getppid");
	uint64_t hits = 0, stepped = 0, exits_in_step = 0;

	(void)state;
	seed_init();
	watchdog_install();
	for (int it = 0; it < KILL_ITERS; it++) {
		struct core_output o;
		struct core_session s;
		struct core_probe sys, entry;
		struct killer k;
		struct uprobe_stats st;
		enum uprobe_plan plan;
		long delay = it % 6 == 0 ? 0 : rand() % 40000;
		int rc;

		core_output_init(&o);
		core_session_new(&s, NULL);
		core_session_spawn(&s, argv, &o);
		core_probe_init(&sys, &s, sys_va);
		core_probe_init(&entry, &s, entry_va);
		assert_int_equal(register_uprobe(s.ctx, &sys.u), 0);
		assert_int_equal(register_uprobe(s.ctx, &entry.u), 0);
		assert_int_equal(uprobe_plan(s.ctx, &sys.u, &plan), 0);
		assert_int_equal(plan, UPROBE_PLAN_STEP);
		assert_int_equal(uprobe_resume(s.ctx, s.pid), 0);

		killer_start(&k, s.pid, delay);
		g_stop = 0;
		alarm(10);
		rc = uprobe_ctx_run(s.ctx, &g_stop);
		alarm(0);
		pthread_join(k.th, NULL);
		if (rc == -EINTR)
			fail_msg("iteration %d (kill after %ld us): uprobe_ctx_run still runs after "
				 "10 s",
				 it, delay);
		assert_int_equal(rc, 0);
		assert_killed(&s, it);
		uprobe_ctx_stats(s.ctx, &st);
		hits += st.hits;
		stepped += st.stepped;
		/* the entry is hit once before each syscall: one more means death mid-step */
		if (entry.hits > sys.hits)
			exits_in_step++;
		assert_true(entry.hits >= sys.hits);
		assert_int_equal(sys.bad_rip + entry.bad_rip, 0);
		core_session_free(&s);
		core_output_cleanup(&o);
	}
	print_message("kill_midstep: %d kills, %" PRIu64 " hits (%" PRIu64 " single-steps); %" PRIu64
		      " processes died between the entry hit and the end of the syscall's step\n",
		      KILL_ITERS, hits, stepped, exits_in_step);
	assert_true(stepped > 0);
}

static void kill_midinsert(void **state)
{
	const char *prog = CORE_TARGET("rel_syscall");
	char *argv[] = {(char *)prog, (char *)"3", NULL};
	struct core_insn *ins = NULL;
	size_t nins = 0;
	uint64_t batches = 0, esrch = 0;

	(void)state;
	seed_init();
	core_decode(prog, "do_getppid", &ins, &nins);
	core_decode(prog, "loop", &ins, &nins);
	for (int it = 0; it < KILL_ITERS; it++) {
		struct core_output o;
		struct core_session s;
		struct core_probe *p = calloc(nins, sizeof(*p));
		struct uprobe **up = calloc(nins, sizeof(*up));
		struct killer k;
		struct pollfd pfd;
		size_t n = 0;
		long delay = rand() % 30000;
		double deadline = now_s() + 10;

		assert_non_null(p);
		assert_non_null(up);
		core_output_init(&o);
		core_session_new(&s, NULL);
		core_session_spawn(&s, argv, &o);
		for (size_t i = 0; i < nins; i++) {
			if (!strcmp(ins[i].plan, "reject"))
				continue;
			core_probe_init(&p[n], &s, ins[i].vaddr);
			up[n] = &p[n].u;
			n++;
		}
		assert_int_equal(uprobe_resume(s.ctx, s.pid), 0);
		killer_start(&k, s.pid, delay);
		pfd.fd = uprobe_ctx_fd(s.ctx);
		pfd.events = POLLIN;
		while (!s.exited) {
			int rc;

			if (now_s() > deadline)
				fail_msg("iteration %d (kill after %ld us): no on_exit for pid %d "
					 "after 10 s (on_exit calls %d; the process %s)",
					 it, delay, (int)s.pid, s.on_exit_calls,
					 gone(s.pid) ? "is gone" : "still exists");
			rc = register_uprobes(s.ctx, up, n);
			if (rc && rc != -ESRCH)
				fail_msg("iteration %d: register_uprobes: %s", it, strerror(-rc));
			esrch += rc == -ESRCH;
			rc = uprobe_ctx_dispatch(s.ctx);
			if (rc < 0 && rc != -ESRCH && rc != -ECHILD)
				fail_msg("iteration %d: uprobe_ctx_dispatch: %s", it, strerror(-rc));
			rc = unregister_uprobes(s.ctx, up, n);
			if (rc && rc != -ESRCH)
				fail_msg("iteration %d: unregister_uprobes: %s", it, strerror(-rc));
			batches++;
			poll(&pfd, 1, 0);
			rc = uprobe_ctx_dispatch(s.ctx);
			if (rc < 0 && rc != -ESRCH && rc != -ECHILD)
				fail_msg("iteration %d: uprobe_ctx_dispatch: %s", it, strerror(-rc));
		}
		pthread_join(k.th, NULL);
		/* nothing left to run */
		g_stop = 0;
		assert_int_equal(uprobe_ctx_run(s.ctx, &g_stop), 0);
		assert_killed(&s, it);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(p[i].bad_rip, 0);
		core_session_free(&s);
		core_output_cleanup(&o);
		free(up);
		free(p);
	}
	print_message("kill_midinsert: %d kills during %" PRIu64 " register+unregister batches of "
		      "%zu addresses (%" PRIu64 " refused with ESRCH)\n",
		      KILL_ITERS, batches, nins, esrch);
	free(ins);
}

/* ---- toggling probes between dispatch rounds ------------------------------------------ */

struct toggler {
	struct core_probe *p;
	struct uprobe **up, **batch;
	size_t n;
	uint64_t ok, esrch, rounds;
	uint64_t last_ok_round, first_esrch_round;
	int other_error;
};

static void toggler_init(struct toggler *t, struct core_session *s, const struct core_insn *ins,
			 size_t nins)
{
	memset(t, 0, sizeof(*t));
	t->p = calloc(nins, sizeof(*t->p));
	t->up = calloc(nins, sizeof(*t->up));
	t->batch = calloc(nins, sizeof(*t->batch));
	assert_non_null(t->p);
	assert_non_null(t->up);
	assert_non_null(t->batch);
	for (size_t i = 0; i < nins; i++) {
		if (!strcmp(ins[i].plan, "reject"))
			continue;
		core_probe_init(&t->p[t->n], s, ins[i].vaddr);
		t->up[t->n] = &t->p[t->n].u;
		t->n++;
	}
	assert_true(t->n > 2);
}

static void toggler_free(struct toggler *t)
{
	free(t->p);
	free(t->up);
	free(t->batch);
}

static void note(struct toggler *t, int rc, const char *what)
{
	if (rc == 0) {
		t->ok++;
		/* an unregistration still succeeds once the process is dying (its probes go
		   with it): only registrations must stop */
		if (!strncmp(what, "register", 8))
			t->last_ok_round = t->rounds;
	} else if (rc == -ESRCH) {
		if (!t->esrch++)
			t->first_esrch_round = t->rounds;
	} else {
		print_message("round %" PRIu64 ": %s: %s\n", t->rounds, what, strerror(-rc));
		t->other_error = rc;
	}
}

/* registered? (uprobe_plan answers only for a registered probe) */
static int armed(struct core_session *s, struct uprobe *u)
{
	enum uprobe_plan pl;

	return uprobe_plan(s->ctx, u, &pl) == 0;
}

/* one probe, or a batch, in or out */
static void toggle(struct core_session *s, void *arg)
{
	struct toggler *t = arg;
	size_t i = (size_t)rand() % t->n;

	t->rounds++;
	switch (rand() % 4) {
	case 0: /* a batch in: those of a random range not armed (an armed one is -EBUSY) */
	case 1: /* a batch out */
	{
		size_t from = (size_t)rand() % t->n, len = 1 + (size_t)rand() % (t->n - from);
		int in = !(rand() & 1);
		size_t m = 0;

		for (size_t j = from; j < from + len; j++)
			if (armed(s, t->up[j]) != in)
				t->batch[m++] = t->up[j];
		if (!m)
			break;
		if (in)
			note(t, register_uprobes(s->ctx, t->batch, m), "register_uprobes");
		else
			note(t, unregister_uprobes(s->ctx, t->batch, m), "unregister_uprobes");
		break;
	}
	default:
		if (armed(s, &t->p[i].u))
			note(t, unregister_uprobe(s->ctx, &t->p[i].u), "unregister_uprobe");
		else
			note(t, register_uprobe(s->ctx, &t->p[i].u), "register_uprobe");
	}
}

#define CHURN_ROUNDS 150
#define CHURN_NT 4
#define CHURN_CALLS 20

static void exit_during_quiesce(void **state)
{
	const char *prog = CORE_TARGET("rel_churn");
	char rbuf[16], nbuf[16], cbuf[16];
	char *argv[] = {(char *)prog, rbuf, nbuf, cbuf, NULL};
	struct core_output plain, probed;
	struct core_session s;
	struct core_probe entry;
	struct core_insn *ins = NULL;
	size_t nins = 0;
	struct toggler t;
	struct uprobe_stats st;
	uint64_t thits = 0;

	(void)state;
	seed_init();
	snprintf(rbuf, sizeof(rbuf), "%d", CHURN_ROUNDS);
	snprintf(nbuf, sizeof(nbuf), "%d", CHURN_NT);
	snprintf(cbuf, sizeof(cbuf), "%d", CHURN_CALLS);
	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);
	core_decode(prog, "probed_churn_work", &ins, &nins);
	core_decode(prog, "worker", &ins, &nins);

	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &probed);
	core_probe_init(&entry, &s, ins[0].vaddr);
	assert_int_equal(register_uprobe(s.ctx, &entry.u), 0);
	/* the toggled probes leave the entry alone */
	toggler_init(&t, &s, ins + 1, nins - 1);
	core_session_wait(&s, &probed, 25, toggle, &t);
	uprobe_ctx_stats(s.ctx, &st);
	for (size_t i = 0; i < t.n; i++) {
		thits += t.p[i].hits;
		assert_int_equal(t.p[i].bad_rip, 0);
	}
	print_message("exit_during_quiesce: %d threads came and went; %" PRIu64 " dispatch rounds, "
		      "%" PRIu64 " successful (un)registrations, %" PRIu64 " ESRCH (first in "
		      "round %" PRIu64 ", last registration in round %" PRIu64 "); entry %" PRIu64
		      " hits, toggled probes %" PRIu64 " hits\n",
		      CHURN_ROUNDS * CHURN_NT, t.rounds, t.ok, t.esrch, t.first_esrch_round,
		      t.last_ok_round, entry.hits, thits);
	core_assert_same_run(&plain, &probed);
	assert_int_equal(t.other_error, 0);
	if (t.esrch)
		assert_true(t.first_esrch_round > t.last_ok_round);
	assert_true(t.ok > 10);
	assert_int_equal(entry.hits, (uint64_t)CHURN_ROUNDS * CHURN_NT * CHURN_CALLS);
	assert_int_equal(entry.bad_rip, 0);
	assert_int_equal(st.hits, entry.hits + thits);

	toggler_free(&t);
	core_session_free(&s);
	free(ins);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

#define EXEC_RUNS 6

static void exec_nonleader(void **state)
{
	const char *prog = CORE_TARGET("rel_exec");
	char *argv[] = {(char *)prog, (char *)"3000", NULL};
	struct core_insn *ins = NULL;
	size_t nins = 0;
	struct core_output plain;

	(void)state;
	seed_init();
	core_output_init(&plain);
	core_run_plain(argv, &plain);
	core_decode(prog, "probed_exec_work", &ins, &nins);
	core_decode(prog, "spin", &ins, &nins);
	core_decode(prog, "execer", &ins, &nins);
	for (int run = 0; run < EXEC_RUNS; run++) {
		struct core_output probed;
		struct core_session s;
		struct toggler t;
		uint64_t hits = 0;

		core_output_init(&probed);
		core_session_new(&s, NULL);
		core_session_spawn(&s, argv, &probed);
		toggler_init(&t, &s, ins, nins);
		/* some armed from the start */
		assert_int_equal(register_uprobes(s.ctx, t.up, t.n / 2), 0);
		core_session_wait(&s, &probed, 20, toggle, &t);
		for (size_t i = 0; i < t.n; i++) {
			hits += t.p[i].hits;
			assert_int_equal(t.p[i].bad_rip, 0);
		}
		print_message("exec_nonleader run %d: %" PRIu64 " dispatch rounds, %" PRIu64
			      " successful (un)registrations, %" PRIu64 " ESRCH, %" PRIu64
			      " hits; on_exec %d, on_exit %d\n",
			      run, t.rounds, t.ok, t.esrch, hits, s.on_exec_calls, s.on_exit_calls);
		core_assert_same_run(&plain, &probed);
		assert_int_equal(t.other_error, 0);
		assert_int_equal(s.on_exec_calls, 1);
		assert_true(hits > 0);
		toggler_free(&t);
		core_session_free(&s);
		core_output_cleanup(&probed);
	}
	free(ins);
	core_output_cleanup(&plain);
}

/* /proc/PID/cmdline holds WORD, and the process is stopped (its exec stop) */
static int execd_and_stopped(pid_t pid, const char *word)
{
	char path[64], *buf;
	size_t n;
	int hit = 0;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	buf = core_slurp(path, &n);
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
		if (!strcmp(buf + i, word))
			hit = 1;
	free(buf);
	return hit && core_proc_state(pid) == 't';
}

static void exec_unseen(void **state)
{
	const char *prog = CORE_TARGET("rel_exec");
	char *plain_argv[] = {(char *)prog, (char *)"after", (char *)"200", NULL};
	char fdbuf[16];
	char *argv[] = {(char *)prog, (char *)"wait", fdbuf, (char *)"200", NULL};
	struct core_output plain, probed;
	struct core_session s;
	struct core_probe p;
	struct pollfd pfd;
	double deadline;
	int fds[2];

	(void)state;
	core_output_init(&plain);
	core_run_plain(plain_argv, &plain);
	for (int run = 0; run < 3; run++) {
		core_output_init(&probed);
		core_session_new(&s, NULL);
		assert_int_equal(pipe(fds), 0);
		fcntl(fds[1], F_SETFD, FD_CLOEXEC);
		snprintf(fdbuf, sizeof(fdbuf), "%d", fds[0]);
		core_session_spawn(&s, argv, &probed);
		close(fds[0]);
		assert_int_equal(uprobe_resume(s.ctx, s.pid), 0);
		/* it execs now, and waits at its exec stop: nothing is dispatched meanwhile */
		assert_int_equal(write(fds[1], "x", 1), 1);
		close(fds[1]);
		deadline = now_s() + 10;
		while (!execd_and_stopped(s.pid, "after")) {
			if (now_s() > deadline) {
				kill(s.pid, SIGKILL);
				fail_msg("pid %d did not exec", (int)s.pid);
			}
			usleep(1000);
		}
		core_probe_init(&p, &s, core_decode_entry(prog, "probed_exec_work"));
		assert_int_equal(register_uprobe(s.ctx, &p.u), 0);
		assert_int_equal(s.on_exec_calls, 1); /* the exec, handled before the insert */
		pfd = (struct pollfd){.fd = uprobe_ctx_fd(s.ctx), .events = POLLIN};
		while (!s.exited || !gone(s.pid)) {
			if (now_s() > deadline) {
				kill(s.pid, SIGKILL);
				fail_msg("pid %d still runs", (int)s.pid);
			}
			poll(&pfd, 1, 10);
			uprobe_ctx_dispatch(s.ctx);
		}
		probed.status = s.exit_status;
		print_message("exec_unseen run %d: %" PRIu64 " hits, on_exec %d\n", run, p.hits,
			      s.on_exec_calls);
		core_assert_same_run(&plain, &probed);
		assert_int_equal(p.hits, 200);
		assert_int_equal(p.bad_rip, 0);
		assert_int_equal(s.on_exec_calls, 1);
		core_session_free(&s);
		core_output_cleanup(&probed);
	}
	core_output_cleanup(&plain);
}

static void trap_unseen_fast(void **state)
{
	const char *prog = CORE_TARGET("core_fast");
	char *argv[] = {(char *)prog, (char *)"pair", (char *)"20000", NULL};
	const uint64_t entry = core_decode_entry(prog, "fast_pair");
	struct core_output plain, probed;
	struct core_session s;
	struct core_probe other, trap, count;
	struct uprobe_stats st;
	uint64_t hits = 0, before;

	(void)state;
	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);
	core_session_new(&s, &(struct uprobe_ctx_opts){ .verbose = 1 });
	core_session_spawn(&s, argv, &probed);
	/* the agent and the XOL area, made while a thread can run their system calls
	   (fast_nop5 is not called in this mode) */
	core_probe_init(&other, &s, core_decode_entry(prog, "fast_nop5"));
	other.u.handler = NULL;
	other.u.flags = UPROBE_F_COUNT;
	assert_int_equal(register_uprobe(s.ctx, &other.u), 0);
	/* fast_pair: lea 1(%rdi),%rax (4 bytes), push %rbx: the int3 on the push */
	core_probe_init(&trap, &s, entry + 4);
	assert_int_equal(register_uprobe(s.ctx, &trap.u), 0);
	assert_int_equal(uprobe_resume(s.ctx, s.pid), 0);
	/* the first call traps there; nothing is dispatched meanwhile but the stops
	   before it (the library's own one-shot probe at the entry point) -- and the traps
	   of the calls that a dispatch round took on after one of those (its WNOHANG loop
	   waits again at once: under load the thread may trap before it is done) */
	for (double deadline = now_s() + 10;;) {
		/* one look at the state a round: a stop seen is the one dispatched */
		if (core_proc_state(s.pid) == 't') {
			if (core_stopped_pc(s.pid) == entry + 4 + 1)
				break;
			uprobe_ctx_dispatch(s.ctx);
		} else {
			usleep(1000);
		}
		if (now_s() > deadline) {
			kill(s.pid, SIGKILL);
			fail_msg("pid %d did not reach the probe", (int)s.pid);
		}
	}
	before = trap.hits; /* calls handled on the trap path, all past the entry */
	unregister_uprobe(s.ctx, &trap.u);
	core_probe_init(&count, &s, entry);
	count.u.handler = NULL;
	count.u.flags = UPROBE_F_COUNT;
	assert_int_equal(register_uprobe(s.ctx, &count.u), 0);
	core_session_wait(&s, &probed, 30, NULL, NULL);
	uprobe_count(s.ctx, &count.u, &hits);
	uprobe_ctx_stats(s.ctx, &st);
	print_message("trap_unseen_fast: %" PRIu64 " hits, %" PRIu64 " trap hits before; fast sites %"
		      PRIu64 ", refused %" PRIu64 "\n", hits, before, st.fast_patched,
		      st.fast_refused);
	core_assert_same_run(&plain, &probed);
	/* every call but those handled before and the one stopped unseen, all of which had
	   passed the entry when the count came */
	assert_int_equal(hits, 20000 - before - 1);
	unregister_uprobe(s.ctx, &count.u);
	core_session_free(&s);
	core_output_cleanup(&probed);
	core_output_cleanup(&plain);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kill_midstep),
		cmocka_unit_test(kill_midinsert),
		cmocka_unit_test(exit_during_quiesce),
		cmocka_unit_test(exec_nonleader),
		cmocka_unit_test(exec_unseen),
		cmocka_unit_test(trap_unseen_fast),
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
