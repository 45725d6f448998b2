// SPDX-License-Identifier: MIT
/*
 * Per-hit cost of a probe for each plan, beside one bare ptrace stop and resume, all
 * measured in one run, interleaved round by round (the machine is shared and noisy):
 *
 *   bench_core BENCH_TARGET [N] [ROUNDS]
 *
 * Each measurement runs BENCH_TARGET (bench_target.c) for N calls of its hot function
 * and subtracts the same program's unprobed time; the medians over ROUNDS are printed.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#include <uprobe/uprobe.h>

#include "sym/sym.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned long hits;

static void count(struct uprobe *u, uprobe_regs_t *regs)
{
	(void)u;
	(void)regs;
	hits++;
}

static void quiet_stdout(void)
{
	int fd = open("/dev/null", O_WRONLY);

	dup2(fd, 1);
	close(fd);
}

/* One run through the library: probe at vaddr (0: none). Seconds. */
static double run_probed(const char *target, const char *mode, long n, uint64_t vaddr,
			 bool no_xol, enum uprobe_plan *plan)
{
	char nbuf[32];
	char *argv[] = { (char *)target, (char *)mode, nbuf, NULL };
	struct uprobe_ctx_opts opts = { .no_xol = no_xol };
	struct uprobe u = { .vaddr = vaddr, .handler = count };
	struct uprobe_ctx *ctx;
	double t0, t;
	int rc;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	if (uprobe_ctx_new(&opts, &ctx))
		exit(1);
	t0 = now();
	rc = uprobe_spawn(ctx, argv, &u.pid);
	if (rc) {
		fprintf(stderr, "bench_core: spawn %s: %s\n", target, strerror(-rc));
		exit(1);
	}
	if (vaddr) {
		rc = register_uprobe(ctx, &u);
		if (rc) {
			fprintf(stderr, "bench_core: probe 0x%" PRIx64 ": %s\n", vaddr, strerror(-rc));
			exit(1);
		}
		if (plan)
			uprobe_plan(ctx, &u, plan);
	}
	hits = 0;
	uprobe_resume(ctx, u.pid);
	uprobe_ctx_run(ctx, NULL);
	t = now() - t0;
	if (vaddr && hits != (unsigned long)n) {
		fprintf(stderr, "bench_core: %lu hits, expected %ld\n", hits, n);
		exit(1);
	}
	uprobe_ctx_free(ctx);
	return t;
}

/* One run under a minimal tracer that only continues from the program's own int3s. */
static double run_bare(const char *target, long n)
{
	char nbuf[32];
	double t0 = now();
	long stops = 0;
	int status;
	pid_t pid;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execl(target, target, "int3", nbuf, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) == pid && WIFSTOPPED(status)) {
		stops++;
		ptrace(PTRACE_CONT, pid, 0, 0);
	}
	if (stops != n + 1) /* + the exec stop */
		fprintf(stderr, "bench_core: bare run stopped %ld times\n", stops);
	return now() - t0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static uint64_t sym(struct up_sym_elf *elf, const char *name)
{
	struct up_sym s;

	if (up_sym_elf_lookup(elf, name, &s)) {
		fprintf(stderr, "bench_core: no symbol %s\n", name);
		exit(1);
	}
	return s.value;
}

enum { NONE, NONE_SYS, BARE, NOP, EMU, XOL, STEP, INLINE, NCASES };

int main(int argc, char **argv)
{
	static const char *names[NCASES] = { "unprobed loop", "unprobed syscall loop",
					      "bare ptrace stop+resume", "probe on nop5",
					      "probe on push %rbp",
					      "probe on lea", "probe on syscall",
					      "probe on lea, no_xol" };
	const char *target = argc > 1 ? argv[1] : "build/bench/bench_target";
	long n = argc > 2 ? atol(argv[2]) : 20000;
	int rounds = argc > 3 ? atoi(argv[3]) : 5;
	double *t[NCASES];
	enum uprobe_plan plans[NCASES] = { 0 };
	struct up_sym_elf *elf;
	uint64_t a_emu, a_xol, a_step, a_nop;

	if (up_sym_elf_open(target, &elf)) {
		fprintf(stderr, "bench_core: cannot open %s\n", target);
		return 1;
	}
	a_emu = sym(elf, "hot_emulate");
	a_nop = sym(elf, "hot_nop");
	a_xol = sym(elf, "hot_xol");
	a_step = sym(elf, "hot_step") + 5; /* past mov $110,%eax: the syscall */
	up_sym_elf_close(elf);
	quiet_stdout();
	for (int c = 0; c < NCASES; c++)
		t[c] = calloc((size_t)rounds, sizeof(double));
	for (int r = 0; r < rounds; r++) {
		t[NONE][r] = run_probed(target, "none", n, 0, false, NULL);
		t[NONE_SYS][r] = run_probed(target, "syscall", n, 0, false, NULL);
		t[BARE][r] = run_bare(target, n);
		t[NOP][r] = run_probed(target, "nop", n, a_nop, false, &plans[NOP]);
		t[EMU][r] = run_probed(target, "none", n, a_emu, false, &plans[EMU]);
		t[XOL][r] = run_probed(target, "xol", n, a_xol, false, &plans[XOL]);
		t[STEP][r] = run_probed(target, "syscall", n, a_step, false, &plans[STEP]);
		t[INLINE][r] = run_probed(target, "xol", n, a_xol, true, &plans[INLINE]);
	}
	for (int c = 0; c < NCASES; c++)
		qsort(t[c], (size_t)rounds, sizeof(double), cmp);
	{
		double base = t[NONE][rounds / 2], base_sys = t[NONE_SYS][rounds / 2];
		double bare = (t[BARE][rounds / 2] - base) / n * 1e6;
		static const char *plan_names[] = { "emulate", "xol", "step", "inline" };

		fprintf(stderr, "bench_core: %ld hits per run, median of %d rounds\n", n, rounds);
		fprintf(stderr, "%-26s %10s %8s  %s\n", "case", "us/hit", "x bare", "plan");
		for (int c = BARE; c < NCASES; c++) {
			double b = c == STEP ? base_sys : base;
			double us = (t[c][rounds / 2] - b) / n * 1e6;

			fprintf(stderr, "%-26s %10.2f %8.2f  %s\n", names[c], us, us / bare,
				c == BARE ? "-" : plan_names[plans[c]]);
		}
	}
	return 0;
}
