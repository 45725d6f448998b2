/* SPDX-License-Identifier: MIT */
/*
 * uprobe_attach() by an unprivileged user on a root process: a child of the test drops
 * to uid/gid 65534 and tries to attach to a sleeping root-owned process the test
 * started.  It must get -EPERM, and the log must say what to change (the uids, or
 * ptrace_scope).  The victim must be unharmed: not traced (TracerPid 0), still
 * sleeping, and it still answers and exits normally afterwards.
 */
#include "test_core.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534

static char g_log[4096];
static size_t g_loglen;

static void child_log(void *arg, const char *msg)
{
	(void)arg;
	g_loglen += (size_t)snprintf(g_log + g_loglen, sizeof(g_log) - g_loglen, "%s\n", msg);
	if (g_loglen >= sizeof(g_log))
		g_loglen = sizeof(g_log) - 1;
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w <= 0)
			_exit(120);
		buf += w;
		len -= (size_t)w;
	}
}

/* The unprivileged child: reports "uid euid rc\nlog..." on fd; exits 0 when it could try. */
static void unprivileged_attach(pid_t victim, int fd)
{
	struct uprobe_ctx_opts opts = {.log = child_log};
	struct uprobe_ctx *ctx = NULL;
	char head[128];
	int rc;

	if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		_exit(121);
	/*
	 * Changing the uids made us non-dumpable (suid_dumpable); being dumpable again
	 * does not grant anything over other users' processes, it only keeps our own
	 * /proc entries ours -- so a refusal below can only come from the victim being
	 * another user's.
	 */
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	if (getuid() != NOBODY || geteuid() != NOBODY)
		_exit(122);
	rc = uprobe_ctx_new(&opts, &ctx);
	if (rc == 0) {
		rc = uprobe_attach(ctx, victim);
		uprobe_ctx_free(ctx);
	} else {
		rc = 1000 + rc; /* ctx_new itself failed: tell apart */
	}
	snprintf(head, sizeof(head), "%d %d %d\n", (int)getuid(), (int)geteuid(), rc);
	write_all(fd, head, strlen(head));
	write_all(fd, g_log, g_loglen);
	_exit(0);
}

static long status_field(pid_t pid, const char *name, char *state, size_t statelen)
{
	char path[64], line[256];
	size_t n = strlen(name);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, name, n) && line[n] == ':') {
			if (state)
				snprintf(state, statelen, "%s", line + n + 1);
			v = strtol(line + n + 1, NULL, 10);
		}
	}
	fclose(f);
	return v;
}

static void attach_eperm(void **state)
{
	int vin[2], vout[2], res[2], status;
	char c, buf[8192], st[64];
	size_t len = 0;
	pid_t victim, child;
	int uid = -1, euid = -1, rc = 0, off = 0;
	ssize_t r;

	(void)state;
	assert_int_equal(pipe(vin), 0);
	assert_int_equal(pipe(vout), 0);
	assert_int_equal(pipe(res), 0);
	fflush(stdout);
	fflush(stderr);

	/* the victim: root, asleep in read(); answers 'k' and exits 0 when poked */
	victim = fork();
	assert_true(victim >= 0);
	if (victim == 0) {
		close(vin[1]);
		close(vout[0]);
		close(res[0]);
		close(res[1]);
		alarm(30);
		if (write(vout[1], "r", 1) != 1)
			_exit(1);
		if (read(vin[0], &c, 1) != 1)
			_exit(2);
		if (write(vout[1], "k", 1) != 1)
			_exit(3);
		_exit(0);
	}
	close(vin[0]);
	close(vout[1]);
	assert_int_equal(read(vout[0], &c, 1), 1);
	assert_int_equal(c, 'r');
	assert_int_equal(status_field(victim, "Uid", NULL, 0), 0);

	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(res[0]);
		close(vin[1]);
		close(vout[0]);
		alarm(20);
		unprivileged_attach(victim, res[1]);
	}
	close(res[1]);
	while ((r = read(res[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)r;
	buf[len] = 0;
	close(res[0]);
	assert_int_equal(waitpid(child, &status, 0), child);
	print_message("unprivileged child: wait status %#x; report:\n%s", status, buf);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(sscanf(buf, "%d %d %d\n%n", &uid, &euid, &rc, &off), 3);
	assert_int_equal(uid, NOBODY);
	assert_int_equal(euid, NOBODY);
	assert_int_equal(rc, -EPERM);
	/* the log says what stands in the way: the uids (ours and the process's) */
	if (!strstr(buf + off, "ptrace_scope") && !strstr(buf + off, "uid"))
		fail_msg("the log does not say what to change: '%s'", buf + off);
	if (!strstr(buf + off, "65534"))
		fail_msg("the log does not name our uid 65534: '%s'", buf + off);

	/* the victim is unharmed: not traced, still asleep, and it still answers */
	assert_int_equal(status_field(victim, "TracerPid", NULL, 0), 0);
	status_field(victim, "State", st, sizeof(st));
	print_message("victim %d: TracerPid 0, State:%s", (int)victim, st);
	if (!strstr(st, "S (sleeping)"))
		fail_msg("victim state is%s", st);
	assert_int_equal(write(vin[1], "x", 1), 1);
	assert_int_equal(read(vout[0], &c, 1), 1);
	assert_int_equal(c, 'k');
	assert_int_equal(waitpid(victim, &status, 0), victim);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(vin[1]);
	close(vout[0]);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(attach_eperm),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "attach_eperm needs root (to start a root victim and drop to 65534)\n");
		return 77;
	}
	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
