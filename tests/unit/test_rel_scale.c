/* SPDX-License-Identifier: MIT */
/*
 * Reliability at scale (issue 8, part 3):
 *   probes10k  10,000 int3 probes on the instructions of one big function (rel_big),
 *              registered in one register_uprobes() batch: each hit exactly CALLS
 *              times; the time to register, the tracer's peak RSS and the XOL areas
 *              added to the process are printed.
 *   threads64  64 threads calling a probed function K times each (core_threads).
 *   tree100    a tree of 100 processes (rel_tree) each calling a probed function K
 *              times: with follow_fork every process's hits (by uprobe_current_pid)
 *              and exit status; without, only the root's hits, the children unharmed.
 * Always: the output and exit status as without probes.
 */
#include "test_core.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long maxrss_kb(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_maxrss;
}

/* Anonymous r-x mappings of pid (no path, inode 0): how many, and their bytes. */
static void count_rx_anon(pid_t pid, unsigned *n, uint64_t *bytes)
{
	char path[64], line[512];
	FILE *f;

	*n = 0;
	*bytes = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi, off, inode;
		char perms[8], dev[16];
		int name = 0;

		if (sscanf(line, "%llx-%llx %7s %llx %15s %llu %n", &lo, &hi, perms, &off, dev,
			   &inode, &name) < 6)
			continue;
		if (strcmp(perms, "r-xp") || inode != 0)
			continue;
		if (name && line[name] && line[name] != '\n')
			continue; /* [vdso] and the like */
		(*n)++;
		*bytes += hi - lo;
	}
	fclose(f);
}

/* ---- probes10k ------------------------------------------------------------------------ */

#define NPROBES 10000
#define CALLS 3

static unsigned g_maps_last_n;
static uint64_t g_maps_last_bytes;

/* on the last probe's last hit: the process's mappings while it still runs */
static void last_hit(struct core_probe *p, uprobe_regs_t *regs)
{
	(void)regs;
	if (p->hits == CALLS)
		count_rx_anon(uprobe_current_pid(p->s->ctx), &g_maps_last_n, &g_maps_last_bytes);
}

static void probes10k(void **state)
{
	const char *prog = CORE_TARGET("rel_big");
	char cbuf[16];
	char *argv[] = {(char *)prog, cbuf, NULL};
	struct core_output plain, probed;
	struct core_session s;
	struct core_insn *ins = NULL;
	size_t nins = 0, n = 0;
	struct core_probe *probes;
	struct uprobe **up;
	struct uprobe_stats st;
	unsigned maps0, maps1;
	uint64_t bytes0, bytes1, wrong = 0;
	unsigned nplan[5] = {0};
	long rss0, rss1, rss2;
	double t0, t1, t2;

	(void)state;
	snprintf(cbuf, sizeof(cbuf), "%d", CALLS);
	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);
	core_decode(prog, "big_func", &ins, &nins);
	assert_true(nins >= NPROBES);

	probes = calloc(NPROBES, sizeof(*probes));
	up = calloc(NPROBES, sizeof(*up));
	assert_non_null(probes);
	assert_non_null(up);
	rss0 = maxrss_kb();

	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &probed);
	count_rx_anon(s.pid, &maps0, &bytes0);
	for (size_t i = 0; i < nins && n < NPROBES; i++) {
		if (!strcmp(ins[i].plan, "reject"))
			continue;
		core_probe_init(&probes[n], &s, ins[i].vaddr);
		up[n] = &probes[n].u;
		n++;
	}
	assert_int_equal(n, NPROBES);
	probes[n - 1].action = last_hit;

	t0 = now_ms();
	assert_int_equal(register_uprobes(s.ctx, up, n), 0);
	t1 = now_ms();
	rss1 = maxrss_kb();
	count_rx_anon(s.pid, &maps1, &bytes1);
	for (size_t i = 0; i < n; i++) {
		enum uprobe_plan pl;

		assert_int_equal(uprobe_plan(s.ctx, up[i], &pl), 0);
		assert_true((unsigned)pl < 5);
		nplan[pl]++;
	}

	core_session_wait(&s, &probed, 25, NULL, NULL);
	t2 = now_ms();
	rss2 = maxrss_kb();
	uprobe_ctx_stats(s.ctx, &st);

	for (size_t i = 0; i < n; i++) {
		if (probes[i].hits != CALLS || probes[i].bad_rip || probes[i].bad_tid) {
			if (wrong++ < 10)
				print_message("probe %zu at %#" PRIx64 ": %" PRIu64
					      " hits (bad rip %" PRIu64 ")\n",
					      i, probes[i].u.vaddr, probes[i].hits,
					      probes[i].bad_rip);
		}
	}
	print_message("probes10k: %zu probes registered in one batch in %.1f ms; run with "
		      "%d calls took %.1f ms (%" PRIu64 " hits: emulated %" PRIu64 ", xol %" PRIu64
		      ", stepped %" PRIu64 ", inlined %" PRIu64 ")\n",
		      n, t1 - t0, CALLS, t2 - t1, st.hits, st.emulated, st.xol, st.stepped,
		      st.inlined);
	print_message("probes10k: plans emulate %u, xol %u, step %u, inline %u, fast %u\n",
		      nplan[UPROBE_PLAN_EMULATE], nplan[UPROBE_PLAN_XOL], nplan[UPROBE_PLAN_STEP],
		      nplan[UPROBE_PLAN_INLINE], nplan[UPROBE_PLAN_FAST]);
	print_message("probes10k: tracer peak RSS (ru_maxrss) %ld KiB before, %ld KiB after "
		      "registering, %ld KiB at the end\n",
		      rss0, rss1, rss2);
	print_message("probes10k: anonymous r-x mappings in the target: %u (%" PRIu64
		      " KiB) at spawn, %u (%" PRIu64 " KiB) after registering, %u (%" PRIu64
		      " KiB) at the last hit: %" PRIu64 " XOL pages added\n",
		      maps0, bytes0 / 1024, maps1, bytes1 / 1024, g_maps_last_n,
		      g_maps_last_bytes / 1024, (bytes1 - bytes0) / 4096);
	core_assert_same_run(&plain, &probed);
	assert_int_equal(wrong, 0);
	assert_int_equal(st.hits, (uint64_t)NPROBES * CALLS);
	/* every probe that runs out of line has a 64-byte slot: the area grew */
	if (nplan[UPROBE_PLAN_XOL] + nplan[UPROBE_PLAN_STEP])
		assert_true(bytes1 - bytes0 >=
			    (uint64_t)(nplan[UPROBE_PLAN_XOL] + nplan[UPROBE_PLAN_STEP]) * 64);
	assert_true(g_maps_last_bytes >= bytes1);

	core_session_free(&s);
	free(up);
	free(probes);
	free(ins);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

/* ---- threads64 ------------------------------------------------------------------------ */

#define NTHREADS 64
#define TK 300

static void threads64(void **state)
{
	const char *prog = CORE_TARGET("core_threads");
	char nbuf[16], kbuf[16];
	char *argv[] = {(char *)prog, nbuf, kbuf, NULL};
	struct core_output plain, probed;
	struct core_session s;
	struct core_probe entry, helper;
	struct uprobe_stats st;
	double t0;

	(void)state;
	snprintf(nbuf, sizeof(nbuf), "%d", NTHREADS);
	snprintf(kbuf, sizeof(kbuf), "%d", TK);
	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);

	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &probed);
	core_probe_init(&entry, &s, core_decode_entry(prog, "probed_work"));
	core_probe_init(&helper, &s, core_decode_entry(prog, "probed_helper"));
	assert_int_equal(register_uprobe(s.ctx, &entry.u), 0);
	assert_int_equal(register_uprobe(s.ctx, &helper.u), 0);
	t0 = now_ms();
	core_session_wait(&s, &probed, 25, NULL, NULL);
	uprobe_ctx_stats(s.ctx, &st);
	print_message("threads64: %d threads x %d calls: entry %" PRIu64 " hits (leader %" PRIu64
		      "), helper %" PRIu64 " hits, in %.1f ms; tracer peak RSS %ld KiB\n",
		      NTHREADS, TK, entry.hits, entry.hits_leader, helper.hits, now_ms() - t0,
		      maxrss_kb());
	core_assert_same_run(&plain, &probed);
	assert_int_equal(entry.hits, (uint64_t)NTHREADS * TK);
	assert_int_equal(helper.hits, (uint64_t)NTHREADS * TK);
	assert_int_equal(entry.hits_leader, 0);
	assert_int_equal(entry.bad_rip + helper.bad_rip, 0);
	assert_int_equal(entry.bad_tid + helper.bad_tid, 0);
	assert_int_equal(st.hits, 2ull * NTHREADS * TK);

	core_session_free(&s);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

/* ---- tree100 -------------------------------------------------------------------------- */

#define TREE_K 50
#define TREE_PROCS 100
#define TREE_MAX 256

struct tree {
	struct core_session s; /* ctx, pid, exited, exit_status as core_session_wait wants */
	pid_t pid[TREE_MAX];
	uint64_t hits[TREE_MAX];
	unsigned npids, overflow;
	int exit_status[TREE_MAX];
	pid_t exit_pid[TREE_MAX];
	unsigned nexit;
	unsigned forks;
};

static void tree_on_exit(void *arg, pid_t pid, int status)
{
	struct tree *t = arg;

	t->s.on_exit_calls++;
	if (t->nexit < TREE_MAX) {
		t->exit_pid[t->nexit] = pid;
		t->exit_status[t->nexit++] = status;
	}
	if (pid == t->s.pid && (WIFEXITED(status) || WIFSIGNALED(status))) {
		t->s.exited = 1;
		t->s.exit_status = status;
	}
}

static void tree_on_exec(void *arg, pid_t pid)
{
	struct tree *t = arg;

	(void)pid;
	t->s.on_exec_calls++;
}

static void tree_on_fork(void *arg, pid_t parent, pid_t child)
{
	struct tree *t = arg;

	(void)parent;
	(void)child;
	t->forks++;
}

static void tree_log(void *arg, const char *msg)
{
	(void)arg;
	print_message("uprobe: %s\n", msg);
}

static void tree_handler(struct uprobe *u, uprobe_regs_t *regs)
{
	struct tree *t = u->data;
	pid_t pid = uprobe_current_pid(t->s.ctx);
	unsigned i;

	(void)regs;
	for (i = 0; i < t->npids; i++)
		if (t->pid[i] == pid)
			break;
	if (i == t->npids) {
		if (t->npids == TREE_MAX) {
			t->overflow++;
			return;
		}
		t->pid[t->npids++] = pid;
	}
	t->hits[i]++;
}

static void run_tree(bool follow)
{
	const char *prog = CORE_TARGET("rel_tree");
	char kbuf[16];
	char *argv[] = {(char *)prog, kbuf, NULL};
	struct core_output plain, probed;
	struct tree *t = calloc(1, sizeof(*t));
	struct uprobe_ctx_opts opts = {
		.follow_fork = follow,
		.log = tree_log,
		.on_exit = tree_on_exit,
		.on_exec = tree_on_exec,
		.on_fork = tree_on_fork,
	};
	struct uprobe u = {0};
	uint64_t total = 0;
	double t0;

	assert_non_null(t);
	opts.arg = t;
	snprintf(kbuf, sizeof(kbuf), "%d", TREE_K);
	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);

	t->s.opts = opts;
	assert_int_equal(uprobe_ctx_new(&opts, &t->s.ctx), 0);
	core_session_spawn(&t->s, argv, &probed);
	u.pid = t->s.pid;
	u.vaddr = core_decode_entry(prog, "probed_tree_work");
	u.handler = tree_handler;
	u.data = t;
	assert_int_equal(register_uprobe(t->s.ctx, &u), 0);
	t0 = now_ms();
	core_session_wait(&t->s, &probed, 25, NULL, NULL);

	for (unsigned i = 0; i < t->npids; i++)
		total += t->hits[i];
	print_message("tree100%s: %u processes hit the probe, %" PRIu64 " hits in all (%.1f ms);"
		      " on_fork %u, on_exit %u; tracer peak RSS %ld KiB\n",
		      follow ? " (follow_fork)" : "", t->npids, total, now_ms() - t0, t->forks,
		      t->nexit, maxrss_kb());
	core_assert_same_run(&plain, &probed);
	assert_int_equal(t->overflow, 0);
	assert_int_equal(t->s.on_exec_calls, 0);
	if (follow) {
		unsigned hist[256] = {0};

		assert_int_equal(t->npids, TREE_PROCS);
		for (unsigned i = 0; i < t->npids; i++) {
			if (t->hits[i] != TREE_K)
				print_message("pid %d: %" PRIu64 " hits\n", (int)t->pid[i],
					      t->hits[i]);
			assert_int_equal(t->hits[i], TREE_K);
		}
		assert_int_equal(total, (uint64_t)TREE_PROCS * TREE_K);
		assert_int_equal(t->forks, TREE_PROCS - 1);
		/* every process's exit, each with the status it exits with unprobed */
		assert_int_equal(t->nexit, TREE_PROCS);
		for (unsigned i = 0; i < t->nexit; i++) {
			if (!WIFEXITED(t->exit_status[i])) {
				print_message("pid %d: wait status %#x\n", (int)t->exit_pid[i],
					      t->exit_status[i]);
				fail_msg("a process of the tree did not exit normally");
			}
			hist[WEXITSTATUS(t->exit_status[i])]++;
		}
		assert_int_equal(hist[6], 1); /* the root */
		for (int c = 1; c <= 9; c++)
			assert_int_equal(hist[10 + c], 1);
		for (int g = 0; g < 10; g++)
			assert_int_equal(hist[20 + g], 9);
	} else {
		assert_int_equal(t->npids, 1);
		assert_int_equal(t->pid[0], t->s.pid);
		assert_int_equal(total, TREE_K);
		assert_int_equal(t->forks, 0);
	}
	assert_true(WIFEXITED(probed.status) && WEXITSTATUS(probed.status) == 6);

	uprobe_ctx_free(t->s.ctx);
	free(t);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

static void tree100_follow(void **state)
{
	(void)state;
	run_tree(true);
}

static void tree100_nofollow(void **state)
{
	(void)state;
	run_tree(false);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(probes10k),
		cmocka_unit_test(threads64),
		cmocka_unit_test(tree100_follow),
		cmocka_unit_test(tree100_nofollow),
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
