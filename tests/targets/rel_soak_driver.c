/* SPDX-License-Identifier: MIT */
/*
 * rel_soak_driver [-t SECONDS] [-s SEED] -u UPROBE_CLI -- PROGRAM [ARGS...]
 *
 * The soak (issue 8, part 7; scripts/soak.sh): runs PROGRAM once without probes as the
 * reference, then again and again under the library for SECONDS (default 600), each
 * time registering and unregistering probes at random instruction addresses of
 * PROGRAM (every one `uprobe decode PROGRAM` does not reject) -- one at a time or in
 * batches, int3 probes with a handler or counting probes (UPROBE_F_COUNT, the fast path
 * where it can) -- between dispatch rounds while the program runs.  Each run's stdout
 * and exit status must equal the reference's.  Prints a line per run and the totals:
 * registrations, unregistrations, hits, runs, and the result.
 * -m 1: int3 probes with a handler only; -m 2: counting probes only; -m 3: counting
 * probes on int3 stops only (to tell the fast path's faults from the trap path's);
 * -v: the library's log;
 * -f SYMBOL: only the instructions of that function (to narrow a difference down).
 * Exit status: 0 all runs as the reference, 1 a difference or an unexpected error,
 * 2 bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uprobe/uprobe.h>

#define NSLOTS 512
#define MAX_BATCH 48
/* a run is hung when neither a hit nor the program's CPU time moved for this long (a
   run of millions of trap-path hits on a loaded machine may take minutes) */
#define HANG_TIMEOUT 60.0

struct slot {
	struct uprobe u;
	uint64_t hits;
	int live; /* registered in this run, hits not collected yet */
};

struct run_state {
	struct uprobe_ctx *ctx;
	pid_t pid;
	int exited, status;
	unsigned long execs;
};

static uint64_t *g_addrs;
static size_t g_naddrs;
static struct slot g_slots[NSLOTS];
static struct run_state g_run;

static uint64_t g_regs, g_unregs, g_hits, g_runs, g_bad_runs, g_notsup, g_esrch, g_errors;
static uint64_t g_fast_hits, g_eexist_fast;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The process's CPU time so far (utime + stime, in ticks), or 0. */
static unsigned long long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	/* fields 14 and 15; the ')' ends field 2 */
	for (int field = 2; p && field < 14; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

static void handler(struct uprobe *u, uprobe_regs_t *regs)
{
	struct slot *s = u->data;

	(void)regs;
	s->hits++;
}

static void on_exit_cb(void *arg, pid_t pid, int status)
{
	(void)arg;
	if (pid == g_run.pid && (WIFEXITED(status) || WIFSIGNALED(status))) {
		g_run.exited = 1;
		g_run.status = status;
	}
}

static void on_exec_cb(void *arg, pid_t pid)
{
	(void)arg;
	(void)pid;
	g_run.execs++;
}

static int g_verbose;
/* -m: 0 mixed, 1 int3 probes with handlers only, 2 counting probes only, 3 counting
   probes kept on int3 stops (UPROBE_F_NO_FAST) */
static int g_mode;

static void log_cb(void *arg, const char *msg)
{
	(void)arg;
	if (g_verbose)
		fprintf(stderr, "uprobe: %s\n", msg);
}

static const char *g_symbol; /* -f: only this function's instructions */

static int load_addrs(const char *cli, const char *prog)
{
	char cmd[2048], line[512];
	size_t cap = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "'%s' decode '%s' %s", cli, prog, g_symbol ? g_symbol : "");
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long va;
		unsigned len;
		char plan[16];

		if (sscanf(line, "0x%llx %u %15s", &va, &len, plan) != 3 || !len ||
		    !strcmp(plan, "reject"))
			continue;
		if (g_naddrs == cap) {
			cap = cap ? cap * 2 : 1024;
			g_addrs = realloc(g_addrs, cap * sizeof(*g_addrs));
			if (!g_addrs)
				return -1;
		}
		g_addrs[g_naddrs++] = va;
	}
	if (pclose(f) != 0 || !g_naddrs) {
		fprintf(stderr, "soak: '%s' failed or listed nothing\n", cmd);
		return -1;
	}
	return 0;
}

static int redirect(const char *path, int *saved)
{
	int f = open(path, O_WRONLY | O_TRUNC | O_CREAT | O_CLOEXEC, 0600);

	fflush(stdout);
	*saved = fcntl(1, F_DUPFD_CLOEXEC, 3);
	if (f < 0 || *saved < 0 || dup2(f, 1) < 0)
		return -1;
	close(f);
	return 0;
}

static void restore(int saved)
{
	dup2(saved, 1);
	close(saved);
}

static int run_plain(char **argv, const char *out)
{
	int saved, status;
	pid_t pid;

	if (redirect(out, &saved))
		return -1;
	pid = fork();
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	restore(saved);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

static int same_file(const char *a, const char *b)
{
	FILE *fa = fopen(a, "r"), *fb = fopen(b, "r");
	int same = fa && fb;

	while (same) {
		int ca = fgetc(fa), cb = fgetc(fb);

		if (ca != cb)
			same = 0;
		if (ca == EOF || cb == EOF)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

/* a live counting probe without handler (it may have taken the fast path) at vaddr */
static int fast_live_at(uint64_t vaddr)
{
	for (int i = 0; i < NSLOTS; i++)
		if (g_slots[i].live && g_slots[i].u.vaddr == vaddr && !g_slots[i].u.handler)
			return 1;
	return 0;
}

static void note(int rc, const struct uprobe *u, const char *what)
{
	if (rc == 0 || rc == -EINPROGRESS)
		return;
	if (rc == -ENOTSUP) {
		g_notsup++;
	} else if (rc == -EEXIST && fast_live_at(u->vaddr)) {
		/* known: an int3 probe where a fast-path probe lives is refused (EEXIST) */
		g_eexist_fast++;
	} else if (rc == -ESRCH) {
		g_esrch++;
	} else {
		g_errors++;
		fprintf(stderr, "soak: %s(pid %d, %#" PRIx64 "): %s\n", what, (int)u->pid, u->vaddr,
			strerror(-rc));
	}
}

/* a free slot armed at a random address */
static void prepare(struct slot *s)
{
	memset(s, 0, sizeof(*s));
	s->u.pid = g_run.pid;
	s->u.vaddr = g_addrs[(size_t)rand() % g_naddrs];
	s->u.data = s;
	if (g_mode == 2 || g_mode == 3 || (g_mode == 0 && rand() % 5 == 0)) {
		/* the fast path, where it can; -m 3: int3 stops only */
		s->u.flags = UPROBE_F_COUNT | (g_mode == 3 ? UPROBE_F_NO_FAST : 0);
	} else {
		s->u.handler = handler;
		if (rand() % 8 == 0)
			s->u.flags = UPROBE_F_COUNT | UPROBE_F_NO_FAST;
	}
}

/* registered (uprobe_plan answers only for a registered probe) */
static int armed(struct slot *s)
{
	enum uprobe_plan pl;

	return s->u.pid && uprobe_plan(g_run.ctx, &s->u, &pl) == 0;
}

/* the hits of a probe about to go (or whose process has gone) */
static void collect(struct slot *s)
{
	uint64_t n = 0;

	if (!s->live)
		return;
	s->live = 0;

	if (s->u.flags & UPROBE_F_COUNT && !s->u.handler && !uprobe_count(g_run.ctx, &s->u, &n)) {
		g_hits += n;
		g_fast_hits += n;
	} else {
		g_hits += s->hits;
	}
}

static struct slot *pick(int want_armed)
{
	for (int tries = 0; tries < 16; tries++) {
		struct slot *s = &g_slots[rand() % NSLOTS];

		if (want_armed ? armed(s) : !s->live)
			return s;
	}
	return NULL;
}

static void op_register(size_t n)
{
	struct uprobe *batch[MAX_BATCH];
	size_t m = 0;
	int rc;

	while (m < n) {
		struct slot *s = pick(0);

		if (!s)
			break;
		prepare(s);
		batch[m++] = &s->u;
	}
	/* a slot picked twice would be -EBUSY: drop duplicates */
	for (size_t i = 0; i < m; i++)
		for (size_t j = i + 1; j < m; j++)
			if (batch[j] == batch[i])
				batch[j--] = batch[--m];
	if (!m)
		return;
	rc = m == 1 ? register_uprobe(g_run.ctx, batch[0]) : register_uprobes(g_run.ctx, batch, m);
	for (size_t i = 0; i < m; i++) {
		struct slot *s = batch[i]->data;

		s->live = armed(s);
		g_regs += (uint64_t)s->live;
	}
	if (!rc)
		return;
	/* a batch returns its first error: each refused one alone tells its own */
	for (size_t i = 0; i < m; i++) {
		struct slot *s = batch[i]->data;

		if (s->live)
			continue;
		rc = m == 1 ? rc : register_uprobe(g_run.ctx, batch[i]);
		s->live = armed(s);
		g_regs += (uint64_t)s->live;
		note(rc, batch[i], m == 1 ? "register_uprobe" : "register_uprobe (after a batch)");
	}
}

static void op_unregister(size_t n)
{
	struct uprobe *batch[MAX_BATCH];
	size_t m = 0;

	while (m < n) {
		struct slot *s = pick(1);

		if (!s)
			break;
		for (size_t i = 0; i < m; i++)
			if (batch[i] == &s->u)
				s = NULL;
		if (!s)
			continue;
		collect(s);
		batch[m++] = &s->u;
	}
	if (!m)
		return;
	if (m == 1)
		note(unregister_uprobe(g_run.ctx, batch[0]), batch[0], "unregister_uprobe");
	else
		note(unregister_uprobes(g_run.ctx, batch, m), batch[0], "unregister_uprobes");
	g_unregs += m;
	for (size_t i = 0; i < m; i++)
		if (armed(batch[i]->data))
			note(-EALREADY, batch[i], "still registered after unregister");
}

static int soak_run(char **argv, const char *out, int ref_status, const char *ref_out)
{
	struct uprobe_ctx_opts opts = {
		.log = log_cb, .on_exit = on_exit_cb, .on_exec = on_exec_cb,
	};
	uint64_t regs0 = g_regs, unregs0 = g_unregs, hits0 = g_hits;
	struct uprobe_stats st;
	struct pollfd pfd;
	double t0 = now_s(), moved = t0, sampled = t0;
	unsigned long long ticks = 0;
	uint64_t trap_hits = 0;
	int saved, rc, ok;

	memset(&g_run, 0, sizeof(g_run));
	memset(g_slots, 0, sizeof(g_slots));
	rc = uprobe_ctx_new(&opts, &g_run.ctx);
	if (rc) {
		fprintf(stderr, "soak: uprobe_ctx_new: %s\n", strerror(-rc));
		return -1;
	}
	if (redirect(out, &saved))
		return -1;
	rc = uprobe_spawn(g_run.ctx, argv, &g_run.pid);
	restore(saved);
	if (rc) {
		fprintf(stderr, "soak: uprobe_spawn: %s\n", strerror(-rc));
		return -1;
	}
	op_register(MAX_BATCH);
	rc = uprobe_resume(g_run.ctx, g_run.pid);
	if (rc) {
		fprintf(stderr, "soak: uprobe_resume: %s\n", strerror(-rc));
		return -1;
	}
	pfd.fd = uprobe_ctx_fd(g_run.ctx);
	pfd.events = POLLIN;
	while (!g_run.exited) {
		int r = rand() % 20;

		if (now_s() - sampled > 1.0) {
			unsigned long long tk = cpu_ticks(g_run.pid);

			sampled = now_s();
			uprobe_ctx_stats(g_run.ctx, &st);
			if (tk != ticks || st.hits != trap_hits)
				moved = now_s();
			ticks = tk;
			trap_hits = st.hits;
		}
		if (now_s() - moved > HANG_TIMEOUT) {
			fprintf(stderr, "soak: run %" PRIu64 ": pid %d made no progress (no hit, no "
				"CPU time) for %.0f s: killed\n", g_runs, (int)g_run.pid, HANG_TIMEOUT);
			kill(g_run.pid, SIGKILL);
			g_errors++;
			moved = now_s();
		}
		poll(&pfd, 1, rand() % 3);
		rc = uprobe_ctx_dispatch(g_run.ctx);
		if (rc < 0 && rc != -ECHILD && rc != -ESRCH) {
			fprintf(stderr, "soak: uprobe_ctx_dispatch: %s\n", strerror(-rc));
			g_errors++;
		}
		if (g_run.exited)
			break;
		if (r < 8)
			op_register(1);
		else if (r < 16)
			op_unregister(1);
		else if (r < 18)
			op_register(1 + (size_t)rand() % MAX_BATCH);
		else
			op_unregister(1 + (size_t)rand() % MAX_BATCH);
	}
	for (int i = 0; i < NSLOTS; i++)
		collect(&g_slots[i]);
	uprobe_ctx_stats(g_run.ctx, &st);
	uprobe_ctx_free(g_run.ctx);
	g_runs++;
	ok = g_run.status == ref_status && same_file(ref_out, out);
	printf("run %" PRIu64 ": %" PRIu64 " registrations, %" PRIu64 " unregistrations, %" PRIu64
	       " hits (trap path %" PRIu64 ": emulated %" PRIu64 ", xol %" PRIu64 ", stepped %" PRIu64
	       ", inlined %" PRIu64 "; fast sites %" PRIu64 "), %.1f s: %s\n",
	       g_runs, g_regs - regs0, g_unregs - unregs0, g_hits - hits0, st.hits, st.emulated,
	       st.xol, st.stepped, st.inlined, st.fast_patched, now_s() - t0,
	       ok ? "as the reference" : "DIFFERS");
	fflush(stdout);
	if (!ok) {
		char keep[128];

		g_bad_runs++;
		snprintf(keep, sizeof(keep), "%s.run%" PRIu64, out, g_runs);
		rename(out, keep);
		fprintf(stderr, "soak: run %" PRIu64 ": wait status %#x (reference %#x); output kept in "
			"%s (reference %s)\n", g_runs, g_run.status, ref_status, keep, ref_out);
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: rel_soak_driver [-t SECONDS] [-s SEED] [-m 0|1|2] [-f SYMBOL] [-v] -u UPROBE_CLI -- "
			"PROGRAM [ARGS...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	double seconds = 600, deadline;
	const char *cli = NULL;
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	char ref_out[64] = "/tmp/soak-ref-XXXXXX", out[64] = "/tmp/soak-run-XXXXXX";
	int c, ref_status, fd;

	while ((c = getopt(argc, argv, "+t:s:u:vm:f:")) != -1) {
		switch (c) {
		case 't': seconds = atof(optarg); break;
		case 's': seed = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'u': cli = optarg; break;
		case 'v': g_verbose = 1; break;
		case 'm': g_mode = atoi(optarg); break;
		case 'f': g_symbol = optarg; break;
		default: usage();
		}
	}
	if (!cli || optind >= argc)
		usage();
	argv += optind;
	srand(seed);
	if ((fd = mkstemp(ref_out)) < 0)
		return 1;
	close(fd);
	if ((fd = mkstemp(out)) < 0)
		return 1;
	close(fd);
	if (load_addrs(cli, argv[0]))
		return 1;
	ref_status = run_plain(argv, ref_out);
	if (ref_status < 0) {
		fprintf(stderr, "soak: the reference run of %s failed\n", argv[0]);
		return 1;
	}
	printf("soak: %s for %.0f s, seed %u, %zu instruction addresses; reference status %#x\n",
	       argv[0], seconds, seed, g_naddrs, ref_status);
	fflush(stdout);
	deadline = now_s() + seconds;
	do {
		if (soak_run(argv, out, ref_status, ref_out))
			return 1;
	} while (now_s() < deadline);
	printf("soak: %" PRIu64 " runs, %" PRIu64 " registrations, %" PRIu64 " unregistrations, "
	       "%" PRIu64 " hits (%" PRIu64 " counted in-process), %" PRIu64 " refused (ENOTSUP), "
	       "%" PRIu64 " refused over a fast-path probe (EEXIST), %" PRIu64 " ESRCH, %" PRIu64
	       " other errors, %" PRIu64 " runs differing: %s\n",
	       g_runs, g_regs, g_unregs, g_hits, g_fast_hits, g_notsup, g_eexist_fast, g_esrch,
	       g_errors,
	       g_bad_runs, g_bad_runs || g_errors ? "FAIL" : "OK");
	unlink(out);
	unlink(ref_out);
	return g_bad_runs || g_errors ? 1 : 0;
}
