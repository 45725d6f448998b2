// SPDX-License-Identifier: MIT
/*
 * Following processes (issue 30 item 6): a shell that runs /bin/true N times, one
 * counting probe on libc's malloc followed into every child, timed whole beside the same
 * shell unprobed, uprobe with a new process's probes on the fast path at once
 * (--fast-after 0) and on the trap path alone (--no-fast), the kernel's uprobe tracer (a private tracefs
 * instance, pid-filtered with event-fork) and bpftrace (the children tracked through
 * sched_process_fork; its start-up is in its time), rounds interleaved.  Printed: the
 * median wall time, the ratio to the unprobed run and the cost of each new process over
 * it.  The kernel's count must equal uprobe's, all three ways, in every round, or the
 * bench stops; bpftrace's is printed (its -c child runs bpftrace's code before the exec).
 * Env: BENCH_FORK_N (default 300; 0 skips it), BENCH_FORK_ROUNDS (default min(rounds, 3)).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define TRACEFS "/sys/kernel/tracing"

enum { F_BASE, F_FAST, F_AT_ONCE, F_NOFAST, F_KERNEL, F_BPF, F_N };

static const char *const fork_names[F_N] = {
	"unprobed",	    "uprobe (fast path)",     "uprobe --fast-after 0", "uprobe --no-fast",
	"kernel (tracefs)", "bpftrace (start-up in)",
};

struct fork_run {
	char script[64], out[64];
	char inst[128], group[32];
	bool inst_made, event_made;
	uint64_t malloc_off;
	long n;
};

static struct fork_run fr;

static int write_str(const char *path, const char *s, int flags)
{
	int fd = open(path, O_WRONLY | flags);
	ssize_t len = (ssize_t)strlen(s);
	int err = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, (size_t)len) != len)
		err = -errno;
	close(fd);
	return err;
}

static int inst_write(const char *rel, const char *s)
{
	char path[sizeof(fr.inst) + 640];

	snprintf(path, sizeof(path), "%s/%s", fr.inst, rel);
	return write_str(path, s, O_TRUNC);
}

/* events that reached the instance's ring buffers (entries + overrun) */
static long inst_events(void)
{
	char path[256], line[128];
	long total = 0, v;

	for (int cpu = 0;; cpu++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/per_cpu/cpu%d/stats", fr.inst, cpu);
		f = fopen(path, "r");
		if (!f)
			break;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "entries: %ld", &v) == 1 ||
			    sscanf(line, "overrun: %ld", &v) == 1)
				total += v;
		fclose(f);
	}
	return total;
}

/* What it defined and wrote goes (also from bench_die and on a signal). */
void bench_fork_cleanup(void)
{
	char line[128];

	if (fr.inst_made) {
		inst_write("events/enable", "0");
		if (!rmdir(fr.inst))
			fr.inst_made = false;
	}
	if (fr.event_made) {
		snprintf(line, sizeof(line), "-:%s/malloc\n", fr.group);
		if (!write_str(TRACEFS "/uprobe_events", line, O_APPEND))
			fr.event_made = false;
	}
	if (fr.script[0])
		unlink(fr.script);
	if (fr.out[0])
		unlink(fr.out);
}

/* NULL when the kernel's tracer can count the workload, or why not */
static const char *kernel_setup(struct bench *b)
{
	static char reason[256];
	char line[512];
	int err;

	if (b->kernel_skip)
		return b->kernel_skip;
	for (int i = 0; i < b->nw; i++)
		if (b->w[i].kind == BK_MALLOC)
			fr.malloc_off = b->w[i].offset;
	if (!fr.malloc_off)
		return "malloc's offset in libc is not known";
	snprintf(fr.group, sizeof(fr.group), "ubf%d", (int)getpid());
	snprintf(fr.inst, sizeof(fr.inst), TRACEFS "/instances/%s", fr.group);
	snprintf(line, sizeof(line), "p:%s/malloc %s:0x%" PRIx64 "\n", fr.group, b->libc,
		 fr.malloc_off);
	err = write_str(TRACEFS "/uprobe_events", line, O_APPEND);
	if (err) {
		snprintf(reason, sizeof(reason), "uprobe_events refused '%.*s': %s",
			 (int)strcspn(line, "\n"), line, strerror(-err));
		return reason;
	}
	fr.event_made = true;
	if (mkdir(fr.inst, 0755)) {
		snprintf(reason, sizeof(reason), "cannot make a trace instance: %s",
			 strerror(errno));
		return reason;
	}
	fr.inst_made = true;
	inst_write("buffer_size_kb", "8192");
	inst_write("options/event-fork", "1");
	return NULL;
}

/* Runs argv (its stdout to out, or /dev/null), a held start when go; wall seconds. */
static double run(char *const argv[], const char *out, pid_t *held, int *go_fd)
{
	int p[2] = { -1, -1 }, status;
	double t0;
	pid_t pid;

	if (held && pipe(p))
		bench_die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int nul = open("/dev/null", O_WRONLY);
		char c;

		if (held) {
			close(p[1]);
			if (read(p[0], &c, 1) != 1)
				_exit(126);
			close(p[0]);
		}
		dup2(fd, 1);
		if (!getenv("BENCH_VERBOSE"))
			dup2(nul, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (held) {
		close(p[0]);
		*held = pid;
		*go_fd = p[1];
		return 0;
	}
	t0 = bench_now();
	status = bench_child_wait(pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		bench_die("fork workload: %s ended with status 0x%x", argv[0], status);
	return bench_now() - t0;
}

/* uprobe trace -c's count for l/malloc in file out (summed over its lines) */
static long uprobe_count(void)
{
	char line[1024];
	long total = -1;
	FILE *f = fopen(fr.out, "r");

	while (f && fgets(line, sizeof(line), f)) {
		char *end = line + strcspn(line, "\n"), *num = end;

		if (!strstr(line, "l/malloc"))
			continue;
		while (num > line && num[-1] >= '0' && num[-1] <= '9')
			num--;
		if (num < end)
			total = (total < 0 ? 0 : total) + atol(num);
	}
	if (f)
		fclose(f);
	return total;
}

static long bpftrace_count(void)
{
	char buf[4096];
	int fd = open(fr.out, O_RDONLY);
	ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	const char *p;

	if (fd >= 0)
		close(fd);
	if (len <= 0)
		return -1;
	buf[len] = 0;
	p = strstr(buf, "@n: ");
	return p ? atol(p + 4) : 0;
}

static double run_tool(struct bench *b, int tool, long *hits)
{
	char spec[600], cmd[128], prog[1400], pidbuf[32];
	char *base[] = { "/bin/sh", fr.script, NULL };
	char *fast[] = { (char *)b->cli, "trace", "-c",	     "-e",	spec, "-o",
			 fr.out,	 "--",	  "/bin/sh", fr.script, NULL };
	char *nofast[] = { (char *)b->cli, "trace", "--no-fast", "-c",	    "-e",      spec,
			   "-o",	   fr.out,  "--",	 "/bin/sh", fr.script, NULL };
	char *at_once[] = { (char *)b->cli, "trace", "--fast-after", "0", "-c", "-e", spec,
			    "-o", fr.out, "--", "/bin/sh", fr.script, NULL };
	char *bpf[] = { "bpftrace", "-e", prog, "-c", cmd, NULL };
	long ev0;
	double t0, s;
	pid_t pid;
	int go, status;

	snprintf(spec, sizeof(spec), "p:l/malloc %s:malloc", b->libc);
	snprintf(cmd, sizeof(cmd), "/bin/sh %s", fr.script);
	snprintf(prog, sizeof(prog),
		 "tracepoint:sched:sched_process_fork /args->parent_pid == cpid || "
		 "@t[args->parent_pid]/ { @t[args->child_pid] = 1; } "
		 "uprobe:%s:malloc /pid == cpid || @t[pid]/ { @n = count(); } "
		 "END { clear(@t); }",
		 b->libc);
	*hits = -1;
	switch (tool) {
	case F_BASE:
		return run(base, NULL, NULL, NULL);
	case F_FAST:
	case F_AT_ONCE:
	case F_NOFAST:
		s = run(tool == F_FAST ? fast : tool == F_AT_ONCE ? at_once : nofast, NULL, NULL, NULL);
		*hits = uprobe_count();
		return s;
	case F_BPF:
		s = run(bpf, fr.out, NULL, NULL);
		*hits = bpftrace_count();
		return s;
	default: /* the kernel: enabled for the held shell and its children */
		if (inst_write("trace", ""))
			bench_die("cannot clear %s/trace", fr.inst);
		run(base, NULL, &pid, &go);
		snprintf(pidbuf, sizeof(pidbuf), "%d\n", (int)pid);
		if (inst_write("set_event_pid", pidbuf))
			bench_die("cannot write %s/set_event_pid", fr.inst);
		ev0 = inst_events();
		snprintf(spec, sizeof(spec), "events/%s/malloc/enable", fr.group);
		if (inst_write(spec, "1"))
			bench_die("cannot enable %s/malloc", fr.group);
		t0 = bench_now();
		bench_child_go(go);
		status = bench_child_wait(pid);
		s = bench_now() - t0;
		inst_write(spec, "0");
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			bench_die("fork workload under the kernel's tracer: status 0x%x", status);
		*hits = inst_events() - ev0;
		return s;
	}
}

void bench_fork_table(struct bench *b)
{
	const char *env = getenv("BENCH_FORK_N"), *skip[F_N] = { 0 };
	double t[F_N][BENCH_MAX_ROUNDS], med[F_N], lo[F_N], hi[F_N];
	long hits[F_N] = { 0 }, n = env ? atol(env) : 300;
	int rounds = getenv("BENCH_FORK_ROUNDS") ? atoi(getenv("BENCH_FORK_ROUNDS")) :
		     b->rounds < 3		 ? b->rounds :
						   3;
	FILE *f;

	if (n <= 0)
		return;
	if (rounds < 1)
		rounds = 1;
	if (rounds > BENCH_MAX_ROUNDS)
		rounds = BENCH_MAX_ROUNDS;
	fr.n = n;
	snprintf(fr.script, sizeof(fr.script), "/tmp/uprobe-bench-fork-%d.sh", (int)getpid());
	snprintf(fr.out, sizeof(fr.out), "/tmp/uprobe-bench-fork-%d.out", (int)getpid());
	f = fopen(fr.script, "w");
	if (!f || fprintf(f, "for i in $(seq %ld); do /bin/true; done\n", n) < 0 || fclose(f))
		bench_die("cannot write %s", fr.script);
	skip[F_KERNEL] = kernel_setup(b);
	skip[F_BPF] = b->bpftrace_skip;
	fprintf(stderr, "bench: following processes (sh running /bin/true %ld times), %d rounds\n",
		n, rounds);
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < F_N; k++) {
			long h;

			if (skip[k])
				continue;
			t[k][r] = run_tool(b, k, &h);
			hits[k] = h;
		}
		if (!skip[F_KERNEL] &&
		    (hits[F_FAST] != hits[F_KERNEL] || hits[F_AT_ONCE] != hits[F_KERNEL] ||
		     hits[F_NOFAST] != hits[F_KERNEL])) {
			bench_fork_cleanup();
			bench_die("following processes: malloc counted %ld (uprobe), %ld "
				  "(--fast-after 0), %ld (--no-fast), %ld (kernel): they differ",
				  hits[F_FAST], hits[F_AT_ONCE], hits[F_NOFAST], hits[F_KERNEL]);
		}
	}
	bench_fork_cleanup();
	for (int k = 0; k < F_N; k++)
		if (!skip[k])
			bench_stats(t[k], rounds, &med[k], &lo[k], &hi[k]);
	printf("\nFollowing processes: sh running /bin/true %ld times, a counting probe on libc's "
	       "malloc followed into every child (%d rounds, median wall time)\n",
	       n, rounds);
	printf("  %-24s %-20s %-12s %-28s %s\n", "tool", "wall s (lo-hi)", "x unprobed",
	       "ms a new process, over", "malloc hits");
	for (int k = 0; k < F_N; k++) {
		char wall[32], ratio[16], per[32], h[32];

		if (skip[k]) {
			printf("  %-24s skipped: %s\n", fork_names[k], skip[k]);
			continue;
		}
		snprintf(wall, sizeof(wall), "%.2f (%.2f-%.2f)", med[k], lo[k], hi[k]);
		snprintf(ratio, sizeof(ratio), "%.2f", med[k] / med[F_BASE]);
		/* the processes made: n of /bin/true and seq's */
		if (k == F_BASE)
			snprintf(per, sizeof(per), "-");
		else
			snprintf(per, sizeof(per), "%.2f", (med[k] - med[F_BASE]) * 1e3 / (n + 1));
		if (hits[k] >= 0 && k != F_BASE)
			snprintf(h, sizeof(h), "%ld", hits[k]);
		else
			snprintf(h, sizeof(h), "-");
		printf("  %-24s %-20s %-12s %-28s %s\n", fork_names[k], wall, ratio, per, h);
	}
	if (!skip[F_KERNEL])
		printf("  (the kernel's count equals uprobe's, all three ways, in every round)\n");
}
