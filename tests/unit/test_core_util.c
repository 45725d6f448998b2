/* SPDX-License-Identifier: MIT */
/* Helpers shared by the probing core's tests; see test_core.h. */
#include "test_core.h"

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

int core_skipped;

/* ---- decode ------------------------------------------------------------------------ */

size_t core_decode(const char *file, const char *symbol, struct core_insn **v, size_t *n)
{
	char cmd[1024], line[512];
	size_t added = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "'%s' decode '%s' '%s'", CORE_UPROBE_CLI, file, symbol);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		struct core_insn ins = {0};
		unsigned long long va;
		int k = sscanf(line, "0x%llx %u %15s %47[^\n]", &va, &ins.len, ins.plan,
			       ins.reason);

		if (k < 3)
			continue;
		ins.vaddr = va;
		snprintf(ins.symbol, sizeof(ins.symbol), "%s", symbol);
		/* capacity: 16, then doubling at each power of two (one realloc a line made
		   decoding a 10,000-instruction function take a minute under ASan) */
		if (*n == 0 || (*n >= 16 && !(*n & (*n - 1)))) {
			*v = realloc(*v, (*n ? 2 * *n : 16) * sizeof(**v));
			assert_non_null(*v);
		}
		(*v)[(*n)++] = ins;
		added++;
	}
	if (pclose(f) != 0)
		fail_msg("'%s' failed", cmd);
	if (!added)
		fail_msg("'%s' listed no instruction", cmd);
	return added;
}

uint64_t core_decode_find(const char *file, const char *symbol, const char *reason)
{
	struct core_insn *v = NULL;
	size_t n = 0;
	uint64_t va = 0;

	core_decode(file, symbol, &v, &n);
	for (size_t i = 0; i < n && !va; i++)
		if (!reason || !strcmp(v[i].reason, reason) || !strcmp(v[i].plan, reason))
			va = v[i].vaddr;
	free(v);
	if (!va)
		fail_msg("%s: no '%s' instruction in %s", file, reason ? reason : "?", symbol);
	return va;
}

uint64_t core_decode_entry(const char *file, const char *symbol)
{
	return core_decode_find(file, symbol, NULL);
}

/* ---- output files ------------------------------------------------------------------ */

void core_output_init(struct core_output *o)
{
	int fd;

	snprintf(o->out_path, sizeof(o->out_path), "/tmp/core-out-XXXXXX");
	snprintf(o->err_path, sizeof(o->err_path), "/tmp/core-err-XXXXXX");
	fd = mkstemp(o->out_path);
	assert_true(fd >= 0);
	close(fd);
	fd = mkstemp(o->err_path);
	assert_true(fd >= 0);
	close(fd);
	o->status = -1;
}

void core_output_cleanup(struct core_output *o)
{
	if (!getenv("CORE_KEEP")) {
		unlink(o->out_path);
		unlink(o->err_path);
	}
}

char *core_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	assert_non_null(f);
	for (;;) {
		if (n + 4096 + 1 > cap) {
			cap = (n + 4096 + 1) * 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);

		if (!r)
			break;
		n += r;
	}
	fclose(f);
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

static void print_status(const char *what, int status)
{
	if (WIFEXITED(status))
		print_message("%s: exit %d\n", what, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		print_message("%s: killed by signal %d\n", what, WTERMSIG(status));
	else
		print_message("%s: wait status %#x\n", what, status);
}

void core_assert_same_run(const struct core_output *plain, const struct core_output *probed)
{
	size_t la, lb;
	char *a = core_slurp(plain->out_path, &la);
	char *b = core_slurp(probed->out_path, &lb);

	int same = la == lb && !memcmp(a, b, la);

	if (!same) {
		print_message("---- stdout without probes (%zu bytes):\n%s", la, a);
		print_message("---- stdout with probes (%zu bytes):\n%s", lb, b);
	}
	free(a);
	free(b);
	if (!same)
		fail_msg("the probed run's stdout differs from the plain run's");
	print_status("plain run", plain->status);
	print_status("probed run", probed->status);
	assert_int_equal(plain->status, probed->status);
}

/* ---- plain and oracle runs --------------------------------------------------------- */

static void redirect_to(const char *path, int fd)
{
	int f = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);

	if (f < 0 || dup2(f, fd) < 0)
		_exit(125);
	close(f);
}

void core_run_plain(char *const argv[], struct core_output *o)
{
	pid_t pid;
	int status;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		redirect_to(o->out_path, 1);
		redirect_to(o->err_path, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	o->status = status;
}

void core_run_oracle(char *const argv[], const uint64_t *addrs, size_t n, uint64_t *counts,
		     struct core_output *o)
{
	size_t argc = 0, cap = n * 20 + 1;
	char *list = malloc(cap), *counts_path, line[128];
	char *av[64];
	FILE *f;
	size_t off = 0, got = 0;

	assert_non_null(list);
	list[0] = 0;
	for (size_t i = 0; i < n; i++)
		off += (size_t)snprintf(list + off, cap - off, "%s0x%" PRIx64, i ? "," : "",
					addrs[i]);
	assert_true(asprintf(&counts_path, "%s.counts", o->out_path) > 0);
	av[argc++] = (char *)CORE_SSTEP_COUNT;
	av[argc++] = (char *)"-o";
	av[argc++] = counts_path;
	av[argc++] = list;
	av[argc++] = (char *)"--";
	for (size_t i = 0; argv[i] && argc < 63; i++)
		av[argc++] = argv[i];
	av[argc] = NULL;
#if defined(__SANITIZE_ADDRESS__)
	/*
	 * The oracle is built with the sanitizers too, and leaks its site table at exit
	 * (tests/tools/sstep_count.c): LeakSanitizer would turn the program's exit status
	 * into 1.  Its leaks are not what is tested here; other ASan errors still count.
	 */
	char *lsan_saved = getenv("LSAN_OPTIONS") ? strdup(getenv("LSAN_OPTIONS")) : NULL;

	setenv("LSAN_OPTIONS", "detect_leaks=0", 1);
	core_run_plain(av, o);
	if (lsan_saved)
		setenv("LSAN_OPTIONS", lsan_saved, 1);
	else
		unsetenv("LSAN_OPTIONS");
	free(lsan_saved);
#else
	core_run_plain(av, o);
#endif
	f = fopen(counts_path, "r");
	if (!f)
		fail_msg("the oracle wrote no counts (%s)", counts_path);
	while (fgets(line, sizeof(line), f) && got < n) {
		unsigned long long a, c;

		assert_int_equal(sscanf(line, "0x%llx %llu", &a, &c), 2);
		assert_int_equal(a, addrs[got]);
		counts[got++] = c;
	}
	fclose(f);
	assert_int_equal(got, n);
	unlink(counts_path);
	free(counts_path);
	free(list);
}

/* ---- sessions ---------------------------------------------------------------------- */

static void session_on_exit(void *arg, pid_t pid, int status)
{
	struct core_session *s = arg;

	s->on_exit_calls++;
	if (pid == s->pid && (WIFEXITED(status) || WIFSIGNALED(status))) {
		s->exited = 1;
		s->exit_status = status;
	}
}

static void session_on_exec(void *arg, pid_t pid)
{
	struct core_session *s = arg;

	(void)pid;
	s->on_exec_calls++;
}

static void session_on_fork(void *arg, pid_t parent, pid_t child)
{
	struct core_session *s = arg;

	(void)parent;
	if (s->on_fork_calls < 16)
		s->fork_children[s->on_fork_calls] = child;
	s->on_fork_calls++;
}

static char logged[1 << 16];
static size_t nlogged;

static void session_log(void *arg, const char *msg)
{
	size_t len = strlen(msg);

	(void)arg;
	print_message("uprobe: %s\n", msg);
	if (nlogged + len + 2 <= sizeof(logged)) {
		memcpy(logged + nlogged, msg, len);
		nlogged += len;
		logged[nlogged++] = '\n';
		logged[nlogged] = 0;
	}
}

bool core_logged(const char *needle)
{
	return strstr(logged, needle) != NULL;
}

void core_session_new(struct core_session *s, const struct uprobe_ctx_opts *opts)
{
	memset(s, 0, sizeof(*s));
	nlogged = 0;
	logged[0] = 0;
	if (opts)
		s->opts = *opts;
	s->opts.log = session_log;
	s->opts.on_exit = session_on_exit;
	s->opts.on_exec = session_on_exec;
	s->opts.on_fork = session_on_fork;
	s->opts.arg = s;
	assert_int_equal(uprobe_ctx_new(&s->opts, &s->ctx), 0);
	assert_non_null(s->ctx);
	assert_true(uprobe_ctx_fd(s->ctx) >= 0);
}

void core_session_free(struct core_session *s)
{
	uprobe_ctx_free(s->ctx);
	s->ctx = NULL;
}

void core_session_spawn(struct core_session *s, char *const argv[], struct core_output *o)
{
	int save1, save2, f1, f2, rc;

	fflush(stdout);
	fflush(stderr);
	save1 = fcntl(1, F_DUPFD_CLOEXEC, 3);
	save2 = fcntl(2, F_DUPFD_CLOEXEC, 3);
	f1 = open(o->out_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	f2 = open(o->err_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(save1 >= 0 && save2 >= 0 && f1 >= 0 && f2 >= 0);
	dup2(f1, 1);
	dup2(f2, 2);
	rc = uprobe_spawn(s->ctx, argv, &s->pid);
	dup2(save1, 1);
	dup2(save2, 2);
	close(save1);
	close(save2);
	close(f1);
	close(f2);
	assert_int_equal(rc, 0);
	assert_true(s->pid > 0);
}

static void core_probe_handler(struct uprobe *u, uprobe_regs_t *regs)
{
	struct core_probe *p = u->data;
	pid_t tid = uprobe_current_tid(p->s->ctx);

	p->hits++;
	if (tid <= 0)
		p->bad_tid++;
	else if (tid == u->pid)
		p->hits_leader++;
	else
		p->hits_other++;
	if (regs->rip != u->vaddr)
		p->bad_rip++;
	if (p->action)
		p->action(p, regs);
}

static void core_probe_callback(struct uprobe *u, int reg, int result)
{
	struct core_probe *p = u->data;

	p->cb_calls++;
	p->cb_reg = reg;
	p->cb_result = result;
	p->hits_at_cb = p->hits;
}

void core_probe_init(struct core_probe *p, struct core_session *s, uint64_t vaddr)
{
	memset(p, 0, sizeof(*p));
	p->s = s;
	p->u.pid = s->pid;
	p->u.vaddr = vaddr;
	p->u.handler = core_probe_handler;
	p->u.registration_callback = core_probe_callback;
	p->u.data = p;
	p->cb_reg = -1;
	p->cb_result = 1;
}

char core_proc_state(pid_t pid)
{
	char path[64], buf[256], *rp;
	FILE *f;
	size_t n;

	if (kill(pid, 0) == -1 && errno == ESRCH)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' ? rp[2] : '?';
}

uint64_t core_stopped_pc(pid_t pid)
{
	char path[64], buf[256];
	unsigned long long pc = 0;
	long nr = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	/* "-1 SP PC" when the thread is not in a system call */
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld %*s %llx", &nr, &pc) != 2 || nr != -1)
		pc = 0;
	fclose(f);
	return (uint64_t)pc;
}

/* Gone, or a zombie nobody reaps (a process the library let go of is ours to reap). */
static int pid_gone(pid_t pid)
{
	char st = core_proc_state(pid);

	return !st || st == 'Z' || st == 'X';
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void core_session_wait(struct core_session *s, struct core_output *o, int timeout_s,
		       void (*between)(struct core_session *s, void *arg), void *arg)
{
	double deadline = now() + timeout_s;
	struct pollfd pfd = {.fd = uprobe_ctx_fd(s->ctx), .events = POLLIN};

	assert_int_equal(uprobe_resume(s->ctx, s->pid), 0);
	/* on_exit comes at exec too: wait until the process is really gone */
	while (!s->exited || !pid_gone(s->pid)) {
		int rc;

		if (now() > deadline) {
			kill(s->pid, SIGKILL);
			fail_msg("pid %d still runs after %d s (%" PRIu64 " rounds)", (int)s->pid,
				 timeout_s, s->rounds);
		}
		poll(&pfd, 1, 10);
		rc = uprobe_ctx_dispatch(s->ctx);
		if (rc < 0 && !s->exited && !pid_gone(s->pid))
			fail_msg("uprobe_ctx_dispatch: %s", strerror(-rc));
		s->rounds++;
		if (between && !s->exited)
			between(s, arg);
	}
	o->status = s->exit_status;
}

int core_main(int argc, char **argv, const struct CMUnitTest *tests, size_t n)
{
	int failed;

	if (argc < 2)
		return _cmocka_run_group_tests(argv[0], tests, n, NULL, NULL);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(tests[i].name, argv[1]))
			continue;
		failed = _cmocka_run_group_tests(argv[1], &tests[i], 1, NULL, NULL);
		if (!failed && core_skipped)
			return 77;
		return failed ? 1 : 0;
	}
	fprintf(stderr, "%s: no test named '%s'; tests:", argv[0], argv[1]);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %s", tests[i].name);
	fprintf(stderr, "\n");
	return 2;
}
