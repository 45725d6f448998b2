// SPDX-License-Identifier: MIT
/*
 * `make bench`: the per-hit cost of a probe, for each workload of bench_target.c and
 * each tool, measured side by side in one run:
 *
 *   bench_core BUILD_DIR        (env: BENCH_ROUNDS, BENCH_RUN_SECONDS, BENCH_GDB_N)
 *
 * Every round runs every (workload, tool) once, round-robin, so that a noisy moment of
 * the machine falls on all of them alike.  A run's time is the target's own loop time
 * (BENCH_OUT), so start-up and attach are not counted; ns per hit is that time per
 * iteration minus the unprobed loop's time per iteration from the same round.  Every
 * run's hit count is checked against the iterations; a wrong one ends the benchmark.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uprobe/uprobe.h>

#include "bench.h"
#include "arch/x86/insn.h"
#include "sym/sym.h"
#include "sym/unwind.h"

#include <libelf.h>

const char *const bench_tool_names[T_NTOOLS] = {
	"unprobed loop",    "uprobe (library)", "uprobe, pinned",   "uprobe trace -c",
	"uprobe fast path", "fast path, records", "records, burst", "trace --format raw",
	"trace, text",	    "trace, json",
	"raw, drop",	    "text, no spool",	"json, no spool",
	"kernel, to a file", "kernel, 64M buf", "bpftrace printf",
	"kernel (tracefs)", "bpftrace",
	"uprobe log2 hist", "uprobe keyed count", "uprobe latency", "bpftrace hist()",
	"bpftrace @[k]=count", "bpftrace latency", "uprobe run @[k]=count",
	"uprobe run latency", "uprobe run @[comm]", "uprobe run @[tid]", "uprobe run hist()",
	"bpftrace @[comm]",
	"gdb dprintf",
	"ptrace floor",	    "floor, following", "floor-samecpu",    "floor-diffcpu",
	"uprobe stack key", "stack key, fp walk", "bpftrace @[ustack]",
};
const char *const bench_tool_keys[T_NTOOLS] = {
	"baseline", "uprobe",	     "uprobe_pinned",   "uprobe_cli",	 "uprobe_fast", "uprobe_fast_rec",
	"uprobe_fast_burst", "uprobe_cli_raw", "uprobe_cli_text", "uprobe_cli_json",
	"uprobe_cli_raw_drop", "uprobe_cli_text_drop", "uprobe_cli_json_drop",
	"kernel_file", "kernel_file64", "bpftrace_printf",
	"kernel",   "bpftrace",	     "uprobe_hist_log2", "uprobe_hist_keyed", "uprobe_hist_latency",
	"bpftrace_hist_log2", "bpftrace_hist_keyed", "bpftrace_hist_latency", "uprobe_run_keyed", "uprobe_run_latency",
	"uprobe_run_comm", "uprobe_run_tid", "uprobe_run_hist", "bpftrace_comm", "gdb",		"floor",	 "floor_following",
	"floor_samecpu", "floor_diffcpu",
	"uprobe_hist_stack", "uprobe_hist_stack_fp", "bpftrace_hist_stack",
};

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void bench_die(const char *fmt, ...)
{
	va_list ap;

	fputs("bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	bench_kernel_cleanup();
	bench_fork_cleanup();
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void bench_stats(const double *v, int n, double *med, double *lo, double *hi)
{
	double s[BENCH_MAX_ROUNDS];

	memcpy(s, v, sizeof(*v) * (size_t)n);
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	*med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	*lo = s[0];
	*hi = s[n - 1];
}

double bench_births_ns;

double bench_read_loop_ns(struct bench *b)
{
	char buf[64] = "", *end;
	double ns;
	int fd = open(b->out_path, O_RDONLY);
	ssize_t len;

	if (fd < 0)
		bench_die("the target wrote no loop time (%s): %s", b->out_path, strerror(errno));
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	unlink(b->out_path);
	if (len <= 0)
		bench_die("empty loop time in %s", b->out_path);
	ns = strtod(buf, &end);
	bench_births_ns = strtod(end, NULL);
	return ns;
}

static void to_devnull(int fd)
{
	int nul = open("/dev/null", O_WRONLY);

	if (nul >= 0) {
		dup2(nul, fd);
		close(nul);
	}
}

pid_t bench_child_start(struct bench *b, const char *mode, long n, int *go_fd)
{
	char nbuf[32];
	int p[2];
	pid_t pid;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	if (pipe(p))
		bench_die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		char c;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(126);
		close(p[0]);
		to_devnull(1);
		execl(b->target, b->target, mode, nbuf, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	*go_fd = p[1];
	return pid;
}

void bench_child_go(int go_fd)
{
	if (write(go_fd, "g", 1) != 1)
		bench_die("cannot start the target");
	close(go_fd);
}

int bench_child_wait(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			bench_die("waitpid: %s", strerror(errno));
	return status;
}

static void check_exit(const char *what, int status)
{
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		bench_die("%s: the target ended with status 0x%x", what, status);
}

/* ---- unprobed ---- */

static double run_base(struct bench *b, struct bench_workload *w, long n)
{
	int go;
	pid_t pid = bench_child_start(b, w->mode, n, &go);

	bench_child_go(go);
	check_exit("unprobed run", bench_child_wait(pid));
	return bench_read_loop_ns(b);
}

/* ---- the library ---- */

static unsigned long lib_hits, lib_bad;

static void count_hit(struct uprobe *u, uprobe_regs_t *regs)
{
	(void)u;
	(void)regs;
	lib_hits++;
}

/* hot_args(i, 2, 3, 4, 5, 6): the six argument registers, read and checked */
static void read_args(struct uprobe *u, uprobe_regs_t *regs)
{
	uint64_t a[6] = { regs->rdi, regs->rsi, regs->rdx, regs->rcx, regs->r8, regs->r9 };

	(void)u;
	for (int i = 1; i < 6; i++)
		if (a[i] != (uint64_t)i + 1)
			lib_bad++;
	lib_hits++;
}

static void lib_log(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "bench: uprobe: %s\n", msg);
}

static double run_lib(struct bench *b, struct bench_workload *w, long n, bool pin)
{
	char nbuf[32];
	char *argv[] = { (char *)b->target, (char *)w->mode, nbuf, NULL };
	struct uprobe_ctx_opts opts = { .log = lib_log };
	struct uprobe u = { .vaddr = w->vaddr };
	struct uprobe_ctx *ctx;
	int rc;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	if (w->kind == BK_RET)
		u.ret_handler = count_hit;
	else if (w->kind == BK_ARGS)
		u.handler = read_args;
	else
		u.handler = count_hit;
	/* the engine reads UPROBE_PIN when it is made */
	if (pin)
		setenv("UPROBE_PIN", "1", 1);
	rc = uprobe_ctx_new(&opts, &ctx);
	if (pin)
		unsetenv("UPROBE_PIN");
	if (rc)
		bench_die("uprobe_ctx_new: %s", strerror(-rc));
	rc = uprobe_spawn(ctx, argv, &u.pid);
	if (rc)
		bench_die("uprobe_spawn %s: %s", b->target, strerror(-rc));
	rc = register_uprobe(ctx, &u);
	if (rc)
		bench_die("register_uprobe %s at 0x%" PRIx64 ": %s", w->sym, w->vaddr,
			  strerror(-rc));
	lib_hits = lib_bad = 0;
	uprobe_resume(ctx, u.pid);
	rc = uprobe_ctx_run(ctx, NULL);
	if (rc)
		bench_die("uprobe_ctx_run: %s", strerror(-rc));
	uprobe_ctx_free(ctx);
	if (lib_hits != (unsigned long)n || lib_bad)
		bench_die("uprobe (library) on (%s) %s: %lu hits (%lu with wrong arguments), "
			  "expected %ld",
			  w->key, w->label, lib_hits, lib_bad, n);
	return bench_read_loop_ns(b);
}

/* The fast path: a counting probe (UPROBE_F_COUNT, no handler), a jmp to a trampoline. */
/* The workload spawned with u registered, on the fast path (else the benchmark ends),
   run to its end: the caller reads what it counted, then frees the context. */
static struct uprobe_ctx *run_on_fast_path(struct bench *b, struct bench_workload *w, long n,
					    const struct uprobe_ctx_opts *opts, struct uprobe *u)
{
	char nbuf[32];
	char *argv[] = { (char *)b->target, (char *)w->mode, nbuf, NULL };
	struct uprobe_ctx *ctx;
	enum uprobe_plan plan;
	int rc;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	rc = uprobe_ctx_new(opts, &ctx);
	if (rc)
		bench_die("uprobe_ctx_new: %s", strerror(-rc));
	rc = uprobe_spawn(ctx, argv, &u->pid);
	if (rc)
		bench_die("uprobe_spawn %s: %s", b->target, strerror(-rc));
	rc = register_uprobe(ctx, u);
	if (rc)
		bench_die("register_uprobe %s: %s", w->sym, strerror(-rc));
	if (uprobe_plan(ctx, u, &plan) || plan != UPROBE_PLAN_FAST)
		bench_die("(%s) %s: not on the fast path", w->key, w->label);
	uprobe_resume(ctx, u->pid);
	rc = uprobe_ctx_run(ctx, NULL);
	if (rc)
		bench_die("uprobe_ctx_run: %s", strerror(-rc));
	return ctx;
}

static uint64_t nrecords;
/* hits whose records a 4 MiB ring holds: six registers and rip each (96-byte slots;
   128 counted) */
#define REC_FIT ((4l << 20) / 128)
uint64_t bench_rec_lost;

/* A return probe's trap-path handler (a followed child, an unsafe site): nothing. */
static void bench_ret_nop(struct uprobe *u, uprobe_regs_t *regs)
{
	(void)u;
	(void)regs;
}

static void count_record(struct uprobe *u, const struct uprobe_record *rec)
{
	(void)u;
	(void)rec;
	nrecords++;
}

/*
 * A recording probe on the fast path, the way `uprobe trace` makes one for (e): the six
 * argument registers (rax at a return) captured in-process into the ring.  The handler
 * only counts: this is the cost in the traced thread, not the cost of formatting lines.
 * The default ring (4 MiB).  T_FAST_REC's runs are as long as it holds (REC_FIT
 * hits; each of (g)'s two threads has a ring of its own): a record lost then is a bug.  T_FAST_BURST's are the calibrated ones, far
 * longer: records the tracer has not read in time are dropped and counted.  Either
 * way records + lost must equal the calls.
 */
/* as uprobe trace does: a thread's exit leaves its records to be read behind it */
static void thread_exit_nop(void *arg, pid_t pid, pid_t tid)
{
	(void)arg, (void)pid, (void)tid;
}

static double run_fast_rec(struct bench *b, struct bench_workload *w, long n, bool room)
{
	/* the default ring, 4 MiB */
	struct uprobe_ctx_opts opts = { .log = lib_log, .on_thread_exit = thread_exit_nop };
	struct uprobe_capture cap = { 0 };
	struct uprobe u = { .vaddr = w->vaddr, .capture = &cap, .record_handler = count_record };
	struct uprobe_ctx *ctx;
	uint64_t lost = 0;

	/* the six argument registers, on every entry workload: the 6-argument fetch */
	cap.regs = 1ull << 14 | 1ull << 13 | 1ull << 12 | 1ull << 11 | 1ull << 9 | 1ull << 8;
	if (w->kind == BK_RET) {
		cap.regs = 1ull << 10; /* rax */
		u.ret_handler = bench_ret_nop;
	}
	nrecords = 0;
	ctx = run_on_fast_path(b, w, n, &opts, &u);
	uprobe_lost(ctx, &u, &lost);
	uprobe_ctx_free(ctx);
	bench_rec_lost = lost;
	if (nrecords + lost != (uint64_t)n)
		bench_die("fast path records on (%s) %s: %" PRIu64 " records + %" PRIu64
			  " lost, expected %ld", w->key, w->label, nrecords, lost, n);
	if (room && lost)
		bench_die("fast path records on (%s) %s: %" PRIu64 " of %ld lost while the ring "
			  "had room for all", w->key, w->label, lost, n);
	return bench_read_loop_ns(b);
}

static double run_fast(struct bench *b, struct bench_workload *w, long n)
{
	struct uprobe_ctx_opts opts = { .log = lib_log };
	struct uprobe u = { .vaddr = w->vaddr, .flags = UPROBE_F_COUNT };
	struct uprobe_ctx *ctx;
	uint64_t hits = 0;

	ctx = run_on_fast_path(b, w, n, &opts, &u);
	uprobe_count(ctx, &u, &hits);
	uprobe_ctx_free(ctx);
	if (hits != (uint64_t)n)
		bench_die("uprobe fast path on (%s) %s: %" PRIu64 " hits, expected %ld", w->key,
			  w->label, hits, n);
	return bench_read_loop_ns(b);
}

/* ---- a command whose stdout we read (the CLI, gdb) ---- */

static char *run_capture(char *const argv[], int *status)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	int p[2];
	pid_t pid;
	ssize_t r;

	if (!buf || pipe(p))
		bench_die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 1);
		close(p[1]);
		if (!getenv("BENCH_VERBOSE"))
			to_devnull(2);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		if (len + 4096 > cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				bench_die("out of memory");
		}
		r = read(p[0], buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = 0;
	close(p[0]);
	*status = bench_child_wait(pid);
	return buf;
}

static double run_cli(struct bench *b, struct bench_workload *w, long n)
{
	char spec[PATH_MAX + 256], nbuf[32];
	/* -o /dev/stdout: with a command, -c's counts go to stderr unless asked */
	char *argv[] = {
		(char *)b->cli,	   "trace",	    "-c", "-o", "/dev/stdout", "-e", spec, "--",
		(char *)b->target, (char *)w->mode, nbuf, NULL
	};
	char *out, *line;
	long hits = -1;
	int status;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	switch (w->kind) {
	case BK_RET:
		snprintf(spec, sizeof(spec), "r:ubench/%s %s:%s", w->key, b->target, w->sym);
		break;
	case BK_ARGS:
		snprintf(spec, sizeof(spec),
			 "p:ubench/%s %s:%s di=%%di si=%%si dx=%%dx cx=%%cx r8=%%r8 r9=%%r9",
			 w->key, b->target, w->sym);
		break;
	case BK_MALLOC:
		snprintf(spec, sizeof(spec), "p:ubench/%s %s:malloc", w->key, b->libc);
		break;
	default:
		snprintf(spec, sizeof(spec), "p:ubench/%s %s:%s", w->key, b->target, w->sym);
		break;
	}
	out = run_capture(argv, &status);
	check_exit("uprobe trace -c", status);
	for (line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		char name[64];

		snprintf(name, sizeof(name), " ubench/%s ", w->key);
		if (strstr(line, name)) {
			char *end = line + strlen(line);

			while (end > line && end[-1] == ' ')
				end--;
			while (end > line && end[-1] >= '0' && end[-1] <= '9')
				end--;
			hits = atol(end);
		}
	}
	free(out);
	if (hits != n)
		bench_die("uprobe trace -c on (%s) %s: %ld hits, expected %ld", w->key, w->label,
			  hits, n);
	return bench_read_loop_ns(b);
}

/*
 * `uprobe trace --format raw -o FILE` at its defaults on the six-argument workload (e):
 * every record to a file.  The file's END block (its last 24 bytes: a block header, the
 * records written, the records lost) must account for every call; the lost ones are
 * reported.
 */
static double run_cli_raw(struct bench *b, struct bench_workload *w, long n, bool drop)
{
	char spec[PATH_MAX + 256], nbuf[32], path[64];
	char *argv[] = { (char *)b->cli, "trace", "--format", "raw", "-o", path, "-e", spec,
			 "--when-full", drop ? "drop" : "block", "--",
			 (char *)b->target, (char *)w->mode, nbuf, NULL };
	uint64_t end[3] = { 0, 0, 0 };
	char *out;
	int status, fd;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	snprintf(path, sizeof(path), "/tmp/uprobe-bench-raw.%d", (int)getpid());
	snprintf(spec, sizeof(spec), "p:ubench/%s %s:%s di=%%di si=%%si dx=%%dx cx=%%cx r8=%%r8 "
		 "r9=%%r9", w->key, b->target, w->sym);
	out = run_capture(argv, &status);
	free(out);
	check_exit("uprobe trace --format raw", status);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || lseek(fd, -(off_t)sizeof(end), SEEK_END) < 0 ||
	    read(fd, end, sizeof(end)) != (ssize_t)sizeof(end))
		bench_die("uprobe trace --format raw: %s has no END block", path);
	close(fd);
	unlink(path);
	/* end[0]: type 5 (END), len 16 */
	if (end[0] != (5ull | 16ull << 32) || end[1] + end[2] != (uint64_t)n)
		bench_die("uprobe trace --format raw on (%s) %s: %llu records + %llu lost, "
			  "expected %ld", w->key, w->label, (unsigned long long)end[1],
			  (unsigned long long)end[2], n);
	bench_rec_lost = end[2];
	return bench_read_loop_ns(b);
}

/*
 * `uprobe trace [--format json] -o FILE` at its defaults on the six-argument workload
 * (e): a line a record, formatted behind the program from the spool.  The lines in the
 * file (comments and a JSON summary left out) and the records lost must make every call.
 */
static double run_cli_fmt(struct bench *b, struct bench_workload *w, long n, bool json,
			  bool before)
{
	char spec[PATH_MAX + 256], nbuf[32], path[64], *line = NULL;
	char *argv[] = { (char *)b->cli, "trace", "--format", json ? "json" : "text", "-o", path,
			 "-e", spec, "--when-full", before ? "drop" : "block", "--spool-size",
			 before ? "0" : "256M", "--", (char *)b->target, (char *)w->mode, nbuf,
			 NULL };
	size_t cap = 0;
	long lines = 0;
	char *out;
	FILE *f;
	int status;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	snprintf(path, sizeof(path), "/tmp/uprobe-bench-fmt.%d", (int)getpid());
	snprintf(spec, sizeof(spec), "p:ubench/%s %s:%s di=%%di si=%%si dx=%%dx cx=%%cx r8=%%r8 "
		 "r9=%%r9", w->key, b->target, w->sym);
	out = run_capture(argv, &status);
	free(out);
	check_exit(json ? "uprobe trace --format json" : "uprobe trace", status);
	f = fopen(path, "r");
	if (!f)
		bench_die("uprobe trace: no %s", path);
	while (getline(&line, &cap, f) > 0)
		if (line[0] != '#' && !strstr(line, "\"type\":"))
			lines++;
	free(line);
	fclose(f);
	unlink(path);
	if (lines > n)
		bench_die("uprobe trace --format %s on (%s) %s: %ld lines of %ld calls",
			  json ? "json" : "text", w->key, w->label, lines, n);
	bench_rec_lost = (uint64_t)(n - lines);
	return bench_read_loop_ns(b);
}

/* ---- aggregation: uprobe trace -t, and the same questions of bpftrace ---- */

/* The probed function's location as a spec target, and its first argument. */
static const char *agg_target(struct bench *b, struct bench_workload *w, char *buf, size_t len)
{
	if (w->kind == BK_MALLOC)
		snprintf(buf, len, "%s:malloc", b->libc);
	else
		snprintf(buf, len, "%s:%s", b->target, w->sym);
	return buf;
}

/*
 * uprobe trace with a hist trigger: (T_AGG_LOG2) keys=a.log2 over the first argument,
 * (T_AGG_KEY) keys=a over its low byte (256 keys: the loop counter of (a)-(c), malloc's
 * 16 + (i & 255) * 8 of (f)), (T_AGG_LAT) keys=$duration.log2 of a return probe.  The
 * table's Totals must say n hits and none dropped.
 */
static double run_agg(struct bench *b, struct bench_workload *w, long n, int tool)
{
	char spec[PATH_MAX + 256], trig[128], where[PATH_MAX + 64], nbuf[32];
	char *argv[] = { (char *)b->cli, "trace", "-e", spec, "-t", trig, "--", (char *)b->target,
			 (char *)w->mode, nbuf, NULL };
	const char *hits_at, *drop_at;
	char *out;
	int status;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	agg_target(b, w, where, sizeof(where));
	if (tool == T_AGG_STACK || tool == T_AGG_STACK_FP) {
		snprintf(spec, sizeof(spec), "p:ubench/%s %s", w->key, where);
		snprintf(trig, sizeof(trig), "ubench/%s:hist:keys=stacktrace", w->key);
		if (tool == T_AGG_STACK_FP)
			setenv("UPROBE_STACKS", "fp", 1);
	} else if (tool == T_AGG_LAT) {
		snprintf(spec, sizeof(spec), "r:ubench/%s %s", w->key, where);
		snprintf(trig, sizeof(trig), "ubench/%s:hist:keys=$duration.log2", w->key);
	} else {
		snprintf(spec, sizeof(spec), "p:ubench/%s %s a=%%di:%s", w->key, where,
			 tool == T_AGG_KEY && w->kind != BK_MALLOC ? "b8@0/64" : "u64");
		snprintf(trig, sizeof(trig), "ubench/%s:hist:keys=a%s", w->key,
			 tool == T_AGG_LOG2 ? ".log2" : "");
	}
	out = run_capture(argv, &status);
	unsetenv("UPROBE_STACKS");
	check_exit("uprobe trace -t", status);
	hits_at = strstr(out, "    Hits: ");
	drop_at = strstr(out, "    Dropped: ");
	if (!hits_at || !drop_at || atol(hits_at + 10) != n || atol(drop_at + 13) != 0)
		bench_die("uprobe trace -t '%s' on (%s) %s: %ld hits, %ld dropped, expected %ld",
			  trig, w->key, w->label, hits_at ? atol(hits_at + 10) : -1,
			  drop_at ? atol(drop_at + 13) : -1, n);
	free(out);
	return bench_read_loop_ns(b);
}

/* The same questions of bpftrace; its maps are printed at the end: their counts summed. */
static double run_bpf_agg(struct bench *b, struct bench_workload *w, long n, int tool)
{
	char script[PATH_MAX * 2 + 512], cmd[PATH_MAX + 64], where[PATH_MAX + 64], filt[32];
	char *argv[] = { "bpftrace", "-e", script, "-c", cmd, NULL };
	char *out, *p;
	long sum = 0;
	int status;

	agg_target(b, w, where, sizeof(where));
	snprintf(filt, sizeof(filt), "%s", w->kind == BK_MALLOC ? "/pid == cpid/ " : "");
	if (tool == T_BPF_LAT)
		snprintf(script, sizeof(script),
			 "uprobe:%s %s{ @s[tid] = nsecs; } uretprobe:%s /%s@s[tid]/ "
			 "{ @h = hist(nsecs - @s[tid]); delete(@s[tid]); } END { clear(@s); }",
			 where, filt, where, w->kind == BK_MALLOC ? "pid == cpid && " : "");
	else if (tool == T_BPF_KEY)
		snprintf(script, sizeof(script), "uprobe:%s %s{ @h[arg0 & 255] = count(); }", where,
			 filt);
	else if (tool == T_BPF_STACK)
		snprintf(script, sizeof(script), "uprobe:%s %s{ @h[ustack] = count(); }", where,
			 filt);
	else if (tool == T_BPF_COMM)
		snprintf(script, sizeof(script), "uprobe:%s %s{ @h[comm] = count(); }", where,
			 filt);
	else
		snprintf(script, sizeof(script), "uprobe:%s %s{ @h = hist(arg0); }", where, filt);
	snprintf(cmd, sizeof(cmd), "%s %s %ld", b->target, w->mode, n);
	out = run_capture(argv, &status);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		bench_die("bpftrace on (%s) %s failed (status 0x%x)", w->key, w->label, status);
	/* hist rows "[lo, hi)  count |@@@|", keyed rows "@h[k]: count" */
	for (p = out; (p = strchr(p, '\n')); p++) {
		const char *l = p + 1, *bar = strchr(l, '|');

		const char *kv = strstr(l, "]: "), *eol = strchr(l, '\n');

		if (!strncmp(l, "@h[", 3) && kv && (!eol || kv < eol))
			sum += atol(kv + 3);
		else if (!strncmp(l, "]: ", 3)) /* a stack key's last line */
			sum += atol(l + 3);
		else if (*l == '[' && bar) {
			const char *q = bar;

			while (q > l && q[-1] == ' ')
				q--;
			while (q > l && q[-1] >= '0' && q[-1] <= '9')
				q--;
			sum += atol(q);
		}
	}
	free(out);
	if (sum != n)
		bench_die("bpftrace on (%s) %s: %ld in its map, expected %ld", w->key, w->label,
			  sum, n);
	return bench_read_loop_ns(b);
}

/*
 * bpftrace's keyed count of (T_BPF_KEY) and its latency pair (T_BPF_LAT), unchanged
 * under `uprobe run`: each body runs in the process (a hist trigger, the pair as the
 * return's $duration; tools/uprobe/run.c).  No pid filter: uprobe run traces the
 * command only.  Its map's counts must add up to n.
 */
static double run_run_key(struct bench *b, struct bench_workload *w, long n, int tool)
{
	char script[PATH_MAX * 2 + 512], cmd[PATH_MAX + 64], where[PATH_MAX + 64];
	char *argv[] = { (char *)b->cli, "run", "-e", script, "-c", cmd, NULL };
	char *out, *p;
	long sum = 0;
	int status;

	agg_target(b, w, where, sizeof(where));
	if (tool == T_RUN_LAT)
		snprintf(script, sizeof(script),
			 "uprobe:%s { @s[tid] = nsecs; } uretprobe:%s /@s[tid]/ "
			 "{ @h = hist(nsecs - @s[tid]); delete(@s[tid]); } END { clear(@s); }",
			 where, where);
	else if (tool == T_RUN_COMM)
		snprintf(script, sizeof(script), "uprobe:%s { @h[comm] = count(); }", where);
	else if (tool == T_RUN_TID)
		snprintf(script, sizeof(script), "uprobe:%s { @h[tid] = count(); }", where);
	else if (tool == T_RUN_HIST)
		snprintf(script, sizeof(script), "uprobe:%s { @h = hist(arg0); }", where);
	else
		snprintf(script, sizeof(script), "uprobe:%s { @h[arg0 & 255] = count(); }", where);
	snprintf(cmd, sizeof(cmd), "%s %s %ld", b->target, w->mode, n);
	out = run_capture(argv, &status);
	check_exit("uprobe run", status);
	/* keyed rows "@h[k]: count", hist rows "[lo, hi)  count |@@@|" */
	for (p = out; (p = strchr(p, '\n')); p++) {
		const char *l = p + 1, *bar = strchr(l, '|'), *eol = strchr(l, '\n');

		if (!strncmp(l, "@h[", 3) && strstr(l, "]: "))
			sum += atol(strstr(l, "]: ") + 3);
		else if (*l == '[' && bar && (!eol || bar < eol)) {
			const char *q = bar;

			while (q > l && q[-1] == ' ')
				q--;
			while (q > l && q[-1] >= '0' && q[-1] <= '9')
				q--;
			sum += atol(q);
		}
	}
	free(out);
	if (sum != n)
		bench_die("uprobe run on (%s) %s: %ld in its map, expected %ld", w->key, w->label,
			  sum, n);
	return bench_read_loop_ns(b);
}

/* ---- bpftrace ---- */

/*
 * bpftrace -c runs the target with the probe attached and prints its maps at the end:
 * @n the hits (a per-CPU count), @bad the hits whose arguments were not (., 2..6).  A
 * probe on libc's malloc is system-wide: filtered to the target (cpid).
 */
static void bpftrace_script(struct bench *b, struct bench_workload *w, char *buf, size_t len)
{
	switch (w->kind) {
	case BK_RET:
		snprintf(buf, len, "uretprobe:%s:%s { @n = count(); }", b->target, w->sym);
		break;
	case BK_ARGS:
		snprintf(buf, len,
			 "uprobe:%s:%s { @n = count(); if (arg1 != 2 || arg2 != 3 || arg3 != 4 "
			 "|| arg4 != 5 || arg5 != 6) { @bad = count(); } }",
			 b->target, w->sym);
		break;
	case BK_MALLOC:
		snprintf(buf, len, "uprobe:%s:malloc /pid == cpid/ { @n = count(); }", b->libc);
		break;
	default:
		snprintf(buf, len, "uprobe:%s:%s { @n = count(); }", b->target, w->sym);
		break;
	}
}

static long map_value(const char *out, const char *name)
{
	char key[32];
	const char *p;

	snprintf(key, sizeof(key), "%s: ", name);
	p = strstr(out, key);
	return p ? atol(p + strlen(key)) : 0;
}

/* One run; NULL, or why it failed (with hits and bad filled either way). */
static const char *bpftrace_once(struct bench *b, struct bench_workload *w, long n, long *hits,
				 long *bad)
{
	static char why[160];
	char script[PATH_MAX + 256], cmd[PATH_MAX + 64];
	char *argv[] = { "bpftrace", "-e", script, "-c", cmd, NULL };
	char *out;
	int status;

	bpftrace_script(b, w, script, sizeof(script));
	snprintf(cmd, sizeof(cmd), "%s %s %ld", b->target, w->mode, n);
	out = run_capture(argv, &status);
	*hits = map_value(out, "@n");
	*bad = map_value(out, "@bad");
	free(out);
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		snprintf(why, sizeof(why), "bpftrace failed (status 0x%x; BENCH_VERBOSE=1 shows why)",
			 status);
		return why;
	}
	return NULL;
}

static double run_bpftrace(struct bench *b, struct bench_workload *w, long n)
{
	long hits, bad;
	const char *err = bpftrace_once(b, w, n, &hits, &bad);

	if (err)
		bench_die("(%s) %s: %s", w->key, w->label, err);
	if (hits != n || bad)
		bench_die("bpftrace on (%s) %s: %ld hits (%ld with wrong arguments), expected %ld",
			  w->key, w->label, hits, bad, n);
	return bench_read_loop_ns(b);
}

/*
 * bpftrace printing the six arguments of every call, -o FILE (its output as a user
 * keeps it): the lines in the file are what it kept; bpftrace says how many events its
 * perf buffer lost ("Lost N events"), and lines + lost must make every call.
 */
static double run_bpf_printf(struct bench *b, struct bench_workload *w, long n)
{
	char script[PATH_MAX + 256], cmd[PATH_MAX + 64], path[64], *line = NULL, *out;
	char *argv[] = { "bpftrace", "-o", path, "-e", script, "-c", cmd, NULL };
	size_t cap = 0;
	long lines = 0, said = 0;
	const char *p;
	FILE *f;
	int status;

	snprintf(path, sizeof(path), "/tmp/uprobe-bench-bpf.%d", (int)getpid());
	snprintf(script, sizeof(script),
		 "uprobe:%s:%s { printf(\"%%d %%d %%d %%d %%d %%d\\n\", arg0, arg1, arg2, arg3, "
		 "arg4, arg5); }", b->target, w->sym);
	snprintf(cmd, sizeof(cmd), "%s %s %ld", b->target, w->mode, n);
	out = run_capture(argv, &status);
	for (p = out; (p = strstr(p, "Lost ")); p += 5)
		said += atol(p + 5);
	free(out);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		bench_die("bpftrace printf on (%s): status 0x%x (BENCH_VERBOSE=1 shows why)",
			  w->key, status);
	f = fopen(path, "r");
	if (!f)
		bench_die("bpftrace printf: no %s", path);
	while (getline(&line, &cap, f) > 0)
		lines += strspn(line, "-0123456789") > 0 && strchr(line, ' ');
	free(line);
	fclose(f);
	unlink(path);
	if (lines > n)
		bench_die("bpftrace printf on (%s) %s: %ld lines of %ld calls", w->key, w->label,
			  lines, n);
	if (said && lines + said != n)
		fprintf(stderr, "bench: bpftrace printf on (%s): %ld lines + %ld it says it lost "
			"!= %ld calls\n", w->key, lines, said, n);
	bench_rec_lost = (uint64_t)(n - lines);
	return bench_read_loop_ns(b);
}

/* ---- gdb ---- */

static double run_gdb(struct bench *b, struct bench_workload *w, long n)
{
	char dp[256], nbuf[32];
	char *argv[] = { "gdb", "-nx", "-batch", "-ex", "set startup-with-shell off",
			 "-ex", "set pagination off", "-ex", "set confirm off",
			 "-ex", "break main", "-ex", "run", "-ex", "delete",
			 "-ex", dp, "-ex", "continue", "--args", (char *)b->target,
			 (char *)w->mode, nbuf, NULL };
	char *out, *line;
	long hits = 0;
	int status;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	if (w->kind == BK_MALLOC)
		snprintf(dp, sizeof(dp), "dprintf *malloc,\"HIT\\n\"");
	else if (w->kind == BK_ARGS)
		snprintf(dp, sizeof(dp),
			 "dprintf *0x%" PRIx64 ",\"HIT %%lx %%lx %%lx %%lx %%lx %%lx\\n\","
			 "$rdi,$rsi,$rdx,$rcx,$r8,$r9",
			 w->vaddr);
	else
		snprintf(dp, sizeof(dp), "dprintf *0x%" PRIx64 ",\"HIT\\n\"", w->vaddr);
	out = run_capture(argv, &status);
	for (line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
		if (!strncmp(line, "HIT", 3))
			hits++;
	free(out);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		bench_die("gdb on (%s): status 0x%x", w->key, status);
	if (hits != n)
		bench_die("gdb dprintf on (%s) %s: %ld hits, expected %ld", w->key, w->label, hits,
			  n);
	return bench_read_loop_ns(b);
}

/* ---- the ptrace floor: the target's own int3, waitpid + PTRACE_CONT ---- */

static cpu_set_t all_cpus;

static void pin(pid_t pid, int cpu)
{
	cpu_set_t set;

	if (cpu < 0) {
		set = all_cpus;
	} else {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
	}
	if (sched_setaffinity(pid, sizeof(set), &set))
		bench_die("sched_setaffinity: %s", strerror(errno));
}

/* the two CPUs we may run on, for the pinned variants */
static int cpu_nth(int k)
{
	for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all_cpus) && seen++ == k)
			return c;
	return -1;
}

/* the CPU tid last ran on (field 39 of its stat), or -1 */
static int cpu_of(pid_t tid)
{
	char path[64], buf[1024], *p;
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = 0;
	p = strrchr(buf, ')');
	for (int field = 3; p && field <= 39; field++)
		p = strchr(p + 1, ' ');
	return p ? atoi(p + 1) : -1;
}

/*
 * tracer_cpu FOLLOW: the tracer moves to the CPU its tracee last ran on, looked up every
 * 100 ms, as the engine does with UPROBE_PIN=1 (src/task/engine.c); the tracee is never
 * pinned.
 */
#define FOLLOW (-2)

static double run_floor(struct bench *b, long n, int tracer_cpu, int tracee_cpu)
{
	char nbuf[32];
	long stops = 0;
	double next = 0;
	int status, at = -1;
	pid_t pid;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	pin(0, tracer_cpu == FOLLOW ? -1 : tracer_cpu);
	pid = fork();
	if (pid < 0)
		bench_die("fork: %s", strerror(errno));
	if (pid == 0) {
		pin(0, tracee_cpu);
		to_devnull(1);
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execl(b->target, b->target, "int3", nbuf, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) == pid && WIFSTOPPED(status)) {
		stops++;
		if (tracer_cpu == FOLLOW && stops > 1 && bench_now() >= next) {
			int cpu = cpu_of(pid);

			next = bench_now() + 0.1;
			if (cpu >= 0 && cpu != at && CPU_ISSET(cpu, &all_cpus)) {
				pin(0, cpu);
				at = cpu;
			}
		}
		ptrace(PTRACE_CONT, pid, 0, 0);
	}
	pin(0, -1);
	check_exit("ptrace floor", status);
	if (stops != n + 1) /* + the exec stop */
		bench_die("ptrace floor: %ld stops, expected %ld", stops, n + 1);
	return bench_read_loop_ns(b);
}

/* ---- one run of a cell ---- */

static double run_one(struct bench *b, int wi, int tool, long n)
{
	struct bench_workload *w = &b->w[wi];
	int c0 = cpu_nth(0), c1 = cpu_nth(1);

	switch (tool) {
	case T_BASE:
		return run_base(b, w, n);
	case T_UPROBE:
		return run_lib(b, w, n, false);
	case T_UPROBE_PIN:
		return run_lib(b, w, n, true);
	case T_UPROBE_CLI:
		return run_cli(b, w, n);
	case T_FAST:
		return run_fast(b, w, n);
	case T_FAST_REC:
	case T_FAST_BURST:
		return run_fast_rec(b, w, n, tool == T_FAST_REC);
	case T_CLI_RAW:
	case T_CLI_RAW0:
		return run_cli_raw(b, w, n, tool == T_CLI_RAW0);
	case T_CLI_TEXT:
	case T_CLI_JSON:
	case T_CLI_TEXT0:
	case T_CLI_JSON0:
		return run_cli_fmt(b, w, n, tool == T_CLI_JSON || tool == T_CLI_JSON0,
				   tool == T_CLI_TEXT0 || tool == T_CLI_JSON0);
	case T_KERNEL:
		return bench_kernel_run(b, wi, n);
	case T_KERNEL_FILE:
	case T_KERNEL_FILE64:
		return bench_kernel_pipe_run(b, wi, n, tool == T_KERNEL_FILE64 ? 65536 : 0,
					     &bench_rec_lost);
	case T_BPF_PRINTF:
		return run_bpf_printf(b, w, n);
	case T_BPFTRACE:
		return run_bpftrace(b, w, n);
	case T_AGG_LOG2:
	case T_AGG_KEY:
	case T_AGG_LAT:
		return run_agg(b, w, n, tool);
	case T_BPF_LOG2:
	case T_BPF_KEY:
	case T_BPF_LAT:
	case T_BPF_STACK:
	case T_BPF_COMM:
		return run_bpf_agg(b, w, n, tool);
	case T_AGG_STACK:
	case T_AGG_STACK_FP:
		return run_agg(b, w, n, tool);
	case T_RUN_KEY:
	case T_RUN_LAT:
	case T_RUN_COMM:
	case T_RUN_TID:
	case T_RUN_HIST:
		return run_run_key(b, w, n, tool);
	case T_GDB:
		return run_gdb(b, w, n);
	case T_FLOOR:
		return run_floor(b, n, -1, -1);
	case T_FLOOR_FOLLOW:
		return run_floor(b, n, FOLLOW, -1);
	case T_FLOOR_SAME:
		return run_floor(b, n, c0, c0);
	case T_FLOOR_DIFF:
		return run_floor(b, n, c0, c1);
	}
	bench_die("no tool %d", tool);
}

/* ---- setup ---- */

/* BENCH_TOOLS=key,key...: only those tools (and the unprobed loop each is measured
   against), for a quick look at one of them; the registration part is skipped too. */
static void only_tools(struct bench *b)
{
	const char *env = getenv("BENCH_TOOLS");

	if (!env || !*env)
		return;
	for (int t = 0; t < T_NTOOLS; t++) {
		const char *p = env;
		size_t len = strlen(bench_tool_keys[t]);
		bool want = t == T_BASE;

		for (; p && *p && !want; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
			want = !strncmp(p, bench_tool_keys[t], len) && (p[len] == ',' || !p[len]);
		for (int i = 0; i < b->nw && !want; i++)
			b->cell[i][t].used = false;
	}
	b->only = true;
}

static uint64_t sym_value(struct up_sym_elf *elf, const char *path, const char *name)
{
	struct up_sym s;

	if (up_sym_elf_lookup(elf, name, &s))
		bench_die("no symbol %s in %s", name, path);
	return s.value;
}

static char *find_libc(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[PATH_MAX + 128];
	char *path = NULL;

	while (f && !path && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');

		if (p && strstr(p, "/libc.so")) {
			p[strcspn(p, "\n")] = 0;
			path = strdup(p);
		}
	}
	if (f)
		fclose(f);
	if (!path)
		bench_die("libc not found in /proc/self/maps");
	return path;
}

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	while (path && *path) {
		size_t len = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, prog);
		if (access(buf, X_OK) == 0)
			return true;
		path += len + (path[len] == ':');
	}
	return false;
}

/* NULL when bpftrace runs here (one short run of (a)), or why not. */
static const char *bpftrace_check(struct bench *b)
{
	long hits, bad;
	const char *err;

	if (!in_path("bpftrace"))
		return geteuid() ? "not installed (make bench installs it as root)"
				 : "not installed (apt-get install bpftrace failed or was not run)";
	if (geteuid())
		return "not root (bpftrace needs root)";
	err = bpftrace_once(b, &b->w[0], 10, &hits, &bad);
	if (!err && hits != 10)
		err = "bpftrace counted a wrong number of hits in a trial run";
	unlink(b->out_path);
	return err;
}

static void add_workload(struct bench *b, const char *key, const char *label, const char *mode,
			 const char *sym, enum bench_kind kind)
{
	struct bench_workload *w;

	if (b->nw == BENCH_MAX_W)
		bench_die("more than %d workloads", BENCH_MAX_W);
	w = &b->w[b->nw++];

	*w = (struct bench_workload){ .key = key, .label = label, .mode = mode, .sym = sym, .kind = kind };
}

static void setup(struct bench *b, const char *build)
{
	static char target[PATH_MAX], cli[PATH_MAX];
	struct up_sym_elf *elf;
	struct utsname un;
	char path[PATH_MAX];
	const char *env;
	uint64_t off;

	b->build = build;
	snprintf(path, sizeof(path), "%s/bench/bench_target", build);
	if (!realpath(path, target))
		bench_die("%s: %s (run make first)", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/uprobe", build);
	if (!realpath(path, cli))
		bench_die("%s: %s", path, strerror(errno));
	b->target = target;
	b->cli = cli;
	b->libc = find_libc();
	env = getenv("BENCH_ROUNDS");
	b->rounds = env ? atoi(env) : 5;
	if (b->rounds < 1 || b->rounds > BENCH_MAX_ROUNDS)
		bench_die("BENCH_ROUNDS must be 1..%d", BENCH_MAX_ROUNDS);
	env = getenv("BENCH_RUN_SECONDS");
	b->run_seconds = env ? atof(env) : 0.2;
	snprintf(b->out_path, sizeof(b->out_path), "/tmp/ubench.%d.ns", (int)getpid());
	setenv("BENCH_OUT", b->out_path, 1);
	uname(&un);
	snprintf(b->kernel_release, sizeof(b->kernel_release), "%s", un.release);
	sched_getaffinity(0, sizeof(all_cpus), &all_cpus);
	b->ncpus = CPU_COUNT(&all_cpus);

	add_workload(b, "a", "lea 1(%rdi),%rax", "lea", "hot_lea", BK_ENTRY);
	add_workload(b, "b", "push %rbp", "push", "hot_push", BK_ENTRY);
	add_workload(b, "c", "5-byte nop", "nop5", "hot_nop5", BK_ENTRY);
	add_workload(b, "d", "return probe", "ret", "hot_ret", BK_RET);
	add_workload(b, "e", "6 arguments fetched", "args", "hot_args", BK_ARGS);
	add_workload(b, "f", "libc malloc+free loop", "malloc", NULL, BK_MALLOC);
	add_workload(b, "g", "2 threads, one probe", "mt", "hot_mt", BK_MT);
	add_workload(b, "h", "3-byte function (pad)", "tiny", "hot_tiny", BK_ENTRY);
	add_workload(b, "i", "push, branch after (pun)", "pushpun", "hot_pushpun", BK_ENTRY);
	add_workload(b, "j", "10-frame stack key", "stack", "hot_stack", BK_STACK);
	add_workload(b, "floor", "int3 + PTRACE_CONT", "nop5", NULL, BK_FLOOR);

	if (up_sym_elf_open(target, &elf))
		bench_die("cannot open %s", target);
	for (int i = 0; i < b->nw; i++) {
		struct bench_workload *w = &b->w[i];

		if (!w->sym)
			continue;
		w->vaddr = sym_value(elf, target, w->sym);
		if (up_sym_elf_vaddr_to_offset(elf, w->vaddr, &w->offset))
			bench_die("%s: no file offset for %s", target, w->sym);
		{
			const uint8_t *code;

			if (!up_sym_elf_code(elf, w->vaddr, 16, &code))
				w->first_len = up_insn_length(code, 16, UP_MODE_64);
		}
	}
	b->big_fn = sym_value(elf, target, "big_fn");
	if (up_sym_elf_vaddr_to_offset(elf, b->big_fn, &off))
		bench_die("%s: no file offset for big_fn", target);
	b->text_delta = b->big_fn - off;
	up_sym_elf_close(elf);
	if (up_sym_elf_open(b->libc, &elf))
		bench_die("cannot open %s", b->libc);
	b->w[5].vaddr = sym_value(elf, b->libc, "malloc");
	if (up_sym_elf_vaddr_to_offset(elf, b->w[5].vaddr, &b->w[5].offset))
		bench_die("%s: no file offset for malloc", b->libc);
	up_sym_elf_close(elf);

	b->kernel_skip = bench_kernel_setup(b);
	b->bpftrace_skip = bpftrace_check(b);

	for (int i = 0; i < b->nw; i++) {
		struct bench_workload *w = &b->w[i];
		struct bench_cell *c = b->cell[i];

		c[T_BASE].used = true;
		if (w->kind == BK_STACK) { /* stack keys only: the walk's cost beside the peers' */
			c[T_FAST].used = true;
			c[T_AGG_STACK].used = c[T_AGG_STACK_FP].used = c[T_BPF_STACK].used = true;
			c[T_BPF_STACK].skip = b->bpftrace_skip;
			continue;
		}
		if (w->kind == BK_FLOOR) {
			c[T_FLOOR].used = c[T_FLOOR_SAME].used = true;
			c[T_FLOOR_DIFF].used = c[T_FLOOR_FOLLOW].used = true;
			if (b->ncpus < 2)
				c[T_FLOOR_DIFF].skip = c[T_FLOOR_FOLLOW].skip = "fewer than 2 CPUs";
			continue;
		}
		c[T_UPROBE].used = c[T_UPROBE_PIN].used = w->kind != BK_MALLOC;
		c[T_UPROBE_CLI].used = w->kind == BK_RET || w->kind == BK_ARGS ||
				       w->kind == BK_MALLOC;
		c[T_FAST].used = w->kind == BK_ENTRY || w->kind == BK_MT || w->kind == BK_ARGS;
		c[T_FAST_REC].used = c[T_FAST_BURST].used = w->kind != BK_MALLOC;
		for (int t = T_CLI_RAW; t <= T_BPF_PRINTF; t++)
			c[t].used = w->kind == BK_ARGS;
		c[T_KERNEL_FILE].skip = c[T_KERNEL_FILE64].skip = b->kernel_skip;
		c[T_BPF_PRINTF].skip = b->bpftrace_skip;
		c[T_KERNEL].used = true;
		c[T_KERNEL].skip = b->kernel_skip;
		c[T_BPFTRACE].used = true;
		c[T_BPFTRACE].skip = b->bpftrace_skip;
		/* the aggregation questions: on (a)-(c) and (f) */
		if (w->kind == BK_ENTRY || w->kind == BK_MALLOC) {
			for (int t = T_AGG_LOG2; t <= T_BPF_LAT; t++)
				c[t].used = true;
			for (int t = T_BPF_LOG2; t <= T_BPF_LAT; t++)
				c[t].skip = b->bpftrace_skip;
			c[T_RUN_KEY].used = c[T_RUN_LAT].used = true;
			for (int t = T_RUN_COMM; t <= T_BPF_COMM; t++)
				c[t].used = true;
			c[T_BPF_COMM].skip = b->bpftrace_skip;
		}
		c[T_GDB].used = true;
		if (w->kind == BK_RET)
			c[T_GDB].skip = "gdb's dprintf has no return probe";
		else if (!in_path("gdb"))
			c[T_GDB].skip = "gdb not installed";
	}
	only_tools(b);
}

/* Picks n so that a run takes about b->run_seconds, from one short run. */
static void calibrate(struct bench *b)
{
	long gdb_n = getenv("BENCH_GDB_N") ? atol(getenv("BENCH_GDB_N")) : 200;

	for (int i = 0; i < b->nw; i++)
		for (int t = 0; t < T_NTOOLS; t++) {
			struct bench_cell *c = &b->cell[i][t];
			long probe_n = t == T_BASE ? 200000 : 2000;
			double per;

			if (!c->used || c->skip)
				continue;
			if (t == T_GDB) {
				c->n = gdb_n;
				continue;
			}
			if (t == T_KERNEL_FILE || t == T_KERNEL_FILE64 || t == T_BPF_PRINTF) {
				/* the peers to a file: a burst at full speed, as long as the
				   kernel's default buffer is short (what they keep of it is
				   the row's point), at most seconds at their cost a hit */
				c->n = getenv("BENCH_FILE_N") ? atol(getenv("BENCH_FILE_N")) : 200000;
				continue;
			}
			per = run_one(b, i, t, probe_n) / (double)probe_n;
			c->n = (long)(b->run_seconds * 1e9 / (per > 0.1 ? per : 0.1));
			if (c->n < 2000)
				c->n = 2000;
			if (c->n > (t == T_BASE ? 50000000 : 2000000))
				c->n = t == T_BASE ? 50000000 : 2000000;
			/* as many records as the rings hold, from the first (issue 30 item 3:
			   first ones included), whatever a short run's fixed costs made the
			   calibration think; two threads have a ring each */
			if (t == T_FAST_REC)
				c->n = REC_FIT * (b->w[i].kind == BK_MT ? 2 : 1);
			c->n &= ~1L; /* two threads: an even split */
		}
}

static void measure(struct bench *b)
{
	for (int r = 0; r < b->rounds; r++) {
		fprintf(stderr, "bench: round %d/%d\n", r + 1, b->rounds);
		for (int i = 0; i < b->nw; i++)
			for (int t = 0; t < T_NTOOLS; t++) {
				struct bench_cell *c = &b->cell[i][t];

				if (!c->used || c->skip)
					continue;
				bench_births_ns = 0;
				c->ns[r] = run_one(b, i, t, c->n);
				c->births[r] = bench_births_ns;
				if (t == T_FAST_REC || t == T_FAST_BURST ||
				    (t >= T_CLI_RAW && t <= T_BPF_PRINTF)) {
					c->lost += bench_rec_lost;
					c->hits += (uint64_t)c->n;
				}
			}
	}
	for (int i = 0; i < b->nw; i++) {
		struct bench_cell *base = &b->cell[i][T_BASE];

		for (int t = 0; t < T_NTOOLS; t++) {
			struct bench_cell *c = &b->cell[i][t];

			if (!c->used || c->skip)
				continue;
			for (int r = 0; r < b->rounds; r++)
				c->per_hit[r] = c->ns[r] / (double)c->n -
						(t == T_BASE ? 0 : base->ns[r] / (double)base->n);
			bench_stats(c->per_hit, b->rounds, &c->med, &c->lo, &c->hi);
		}
	}
}

static void on_signal(int sig)
{
	bench_kernel_cleanup();
	bench_fork_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Building libc's unwind table (sym/unwind.c up_unwind_build, as a file first mapped
   into a traced process has its built): rows, bytes, ms (median of the rounds). */
static void bench_unwind_table(struct bench *b)
{
	double ms[BENCH_MAX_ROUNDS], med, lo, hi;
	struct up_unwind_table *t = NULL;
	int fd = open(b->libc, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		printf("libc's unwind table: cannot open %s\n", b->libc);
		return;
	}
	elf_version(EV_CURRENT);
	for (int r = 0; r < b->rounds; r++) {
		Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		double t0 = bench_now();

		free(t);
		t = NULL;
		if (!elf || up_unwind_build(elf, &t)) {
			printf("libc's unwind table: cannot be built\n");
			elf_end(elf);
			close(fd);
			return;
		}
		ms[r] = (bench_now() - t0) * 1e3;
		elf_end(elf);
	}
	close(fd);
	bench_stats(ms, b->rounds, &med, &lo, &hi);
	printf("libc's unwind table (%s): %u rows, %" PRIu64 " bytes, built in %.1f ms "
	       "(%.1f-%.1f, %d rounds)\n", b->libc, t->nrows, t->size, med, lo, hi, b->rounds);
	free(t);
}

int main(int argc, char **argv)
{
	static struct bench b;
	double t0 = bench_now();

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	setup(&b, argc > 1 ? argv[1] : "build");
	fprintf(stderr, "bench: calibrating (about %.2f s per run)\n", b.run_seconds);
	calibrate(&b);
	measure(&b);
	if (!b.only) {
		fprintf(stderr, "bench: registration\n");
		bench_reg_run(&b);
	}
	bench_kernel_cleanup();
	bench_report(&b);
	bench_unwind_table(&b);
	if (!b.only || getenv("BENCH_FORK_N"))
		bench_fork_table(&b);
	fprintf(stderr, "bench: done in %.0f s\n", bench_now() - t0);
	return 0;
}
