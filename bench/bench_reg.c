// SPDX-License-Identifier: MIT
/*
 * Registration cost: attach to a running bench_target (idle in pause()), insert 1, 100
 * and 10,000 probes on real instructions of its big_fn with one register_uprobes()
 * batch (one quiesce), remove them with unregister_uprobes(); beside the kernel's
 * uprobe tracer for 1 and 100 probes (define + enable, disable + remove: its removal
 * is slow, so the 10,000 row says why it is not run).  Each insertion is checked in the process's memory: an int3
 * at the first and last site after it, the original byte after the removal.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uprobe/uprobe.h>

#include "bench.h"

#define MAX_SITES 10000

static void nop_handler(struct uprobe *u, uprobe_regs_t *regs)
{
	(void)u;
	(void)regs;
}

/* big_fn: 10,000 groups of lea(4) add(4) mov(3) xor(2) = 13 bytes */
static void make_sites(uint64_t big_fn, uint64_t *sites, long n)
{
	static const int at[4] = { 0, 4, 8, 11 };

	for (long i = 0; i < n; i++)
		sites[i] = big_fn + (uint64_t)(i / 4) * 13 + (uint64_t)at[i % 4];
}

static uint8_t peek(pid_t pid, uint64_t addr)
{
	char path[64];
	uint8_t byte = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0 || pread(fd, &byte, 1, (off_t)addr) != 1)
		bench_die("cannot read 0x%" PRIx64 " of %d", addr, (int)pid);
	close(fd);
	return byte;
}

/* an idle target, in pause() */
static pid_t start_idle(struct bench *b)
{
	char path[64], buf[512];
	int go;
	pid_t pid = bench_child_start(b, "idle", 0, &go);

	bench_child_go(go);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int tries = 0; tries < 2000; tries++) {
		int fd = open(path, O_RDONLY);
		ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		char *p;

		if (fd >= 0)
			close(fd);
		if (len > 0) {
			buf[len] = 0;
			p = strrchr(buf, ')');
			/* sleeping, and exec'd (the comm is bench_target's) */
			if (p && p[2] == 'S' && strstr(buf, "(bench_target)"))
				return pid;
		}
		usleep(1000);
	}
	bench_die("the idle target did not settle");
}

static void stop_idle(pid_t pid)
{
	kill(pid, SIGKILL);
	bench_child_wait(pid);
}

static void lib_log(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "bench: uprobe: %s\n", msg);
}

static void lib_reg(struct bench *b, struct bench_reg_row *row, int r, const uint64_t *sites)
{
	static struct uprobe u[MAX_SITES];
	static struct uprobe *up[MAX_SITES];
	struct uprobe_ctx_opts opts = { .log = lib_log };
	struct uprobe_ctx *ctx;
	long n = row->nprobes;
	uint8_t first = 0, last = 0;
	double t0, t1, t2, t3;
	pid_t pid = start_idle(b);
	int rc;

	for (long i = 0; i < n; i++) {
		u[i] = (struct uprobe){ .pid = pid, .vaddr = sites[i], .handler = nop_handler };
		up[i] = &u[i];
	}
	first = peek(pid, sites[0]);
	last = peek(pid, sites[n - 1]);
	rc = uprobe_ctx_new(&opts, &ctx);
	if (rc)
		bench_die("uprobe_ctx_new: %s", strerror(-rc));
	t0 = bench_now();
	rc = uprobe_attach(ctx, pid);
	if (rc)
		bench_die("uprobe_attach %d: %s", (int)pid, strerror(-rc));
	t1 = bench_now();
	rc = register_uprobes(ctx, up, (size_t)n);
	t2 = bench_now();
	if (rc)
		bench_die("register_uprobes (%ld probes): %s", n, strerror(-rc));
	if (peek(pid, sites[0]) != 0xcc || peek(pid, sites[n - 1]) != 0xcc)
		bench_die("register_uprobes (%ld probes): no int3 at the sites", n);
	t3 = bench_now();
	rc = unregister_uprobes(ctx, up, (size_t)n);
	row->remove[r] = bench_now() - t3;
	if (rc)
		bench_die("unregister_uprobes (%ld probes): %s", n, strerror(-rc));
	if (peek(pid, sites[0]) != first || peek(pid, sites[n - 1]) != last)
		bench_die("unregister_uprobes (%ld probes): bytes not restored", n);
	row->attach[r] = t1 - t0;
	row->insert[r] = t2 - t1;
	uprobe_ctx_free(ctx);
	stop_idle(pid);
}

static void kernel_reg(struct bench *b, struct bench_reg_row *row, int r, const uint64_t *sites)
{
	pid_t pid = start_idle(b);

	bench_kernel_reg(b, pid, sites, row->nprobes, &row->insert[r], &row->remove[r]);
	row->attach[r] = 0;
	stop_idle(pid);
}

void bench_reg_run(struct bench *b)
{
	static uint64_t sites[MAX_SITES];
	static const long lib_n[] = { 1, 100, MAX_SITES }, kern_n[] = { 1, 100 };

	const char *env = getenv("BENCH_REG_ROUNDS");

	/* 10,000 probes and the kernel's removal of 100 take seconds a round */
	b->reg_rounds = env ? atoi(env) : (b->rounds < 3 ? b->rounds : 3);
	if (b->reg_rounds < 1 || b->reg_rounds > BENCH_MAX_ROUNDS)
		bench_die("BENCH_REG_ROUNDS must be 1..%d", BENCH_MAX_ROUNDS);
	make_sites(b->big_fn, sites, MAX_SITES);
	b->nreg = 0;
	for (int i = 0; i < 3; i++)
		b->reg[b->nreg++] = (struct bench_reg_row){ .tool = "uprobe", .nprobes = lib_n[i] };
	for (int i = 0; i < 2; i++)
		b->reg[b->nreg++] = (struct bench_reg_row){ .tool = "kernel",
							    .nprobes = kern_n[i],
							    .skip = b->kernel_skip };
	b->reg[b->nreg++] = (struct bench_reg_row){
		.tool = "kernel",
		.nprobes = MAX_SITES,
		.skip = b->kernel_skip ? b->kernel_skip
				       : "not run: the kernel disables uprobes at ~26-46 ms each "
					 "(100: ~2.6 s; 8,543 took 395 s here), so removing "
					 "10,000 would take minutes a round",
	};
	for (int r = 0; r < b->reg_rounds; r++)
		for (int i = 0; i < b->nreg; i++) {
			struct bench_reg_row *row = &b->reg[i];

			if (row->skip)
				continue;
			if (!strcmp(row->tool, "uprobe"))
				lib_reg(b, row, r, sites);
			else
				kernel_reg(b, row, r, sites);
		}
	for (int i = 0; i < b->nreg; i++) {
		struct bench_reg_row *row = &b->reg[i];
		double lo, hi;

		if (row->skip)
			continue;
		bench_stats(row->attach, b->reg_rounds, &row->attach_med, &lo, &hi);
		bench_stats(row->insert, b->reg_rounds, &row->insert_med, &row->insert_lo,
			    &row->insert_hi);
		bench_stats(row->remove, b->reg_rounds, &row->remove_med, &row->remove_lo,
			    &row->remove_hi);
	}
}
