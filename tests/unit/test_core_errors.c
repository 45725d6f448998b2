/* SPDX-License-Identifier: MIT */
/*
 * The API's errors: attaching to a pid that does not exist (-ESRCH) or to a process
 * another tracer holds (-EBUSY); registering at a mid-instruction address or in data
 * (-EINVAL), on an int3 that is not ours (-EEXIST), on an instruction that cannot be
 * probed (ud2: -ENOTSUP), in a process ctx does not trace (-ESRCH); unregistering a
 * probe never registered (a no-op).  Each refused registration leaves the program
 * running as without probes.  A child let go (uprobe_detach) and reaped by the
 * library's wait for any child: its status from uprobe_reaped_status, once.
 */
#include "test_core.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t fork_sleeper(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(20);
		for (;;)
			pause();
	}
	return pid;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void attach_nopid(void **state)
{
	struct core_session s;
	pid_t pid = fork();

	(void)state;
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid); /* pid is free now */
	core_session_new(&s, NULL);
	assert_int_equal(uprobe_attach(s.ctx, pid), -ESRCH);
	core_session_free(&s);
}

static void attach_busy(void **state)
{
	struct core_session s;
	pid_t victim, helper;
	int fds[2];
	char c;

	(void)state;
	victim = fork_sleeper();
	assert_int_equal(pipe(fds), 0);
	helper = fork();
	assert_true(helper >= 0);
	if (helper == 0) {
		alarm(20);
		if (ptrace(PTRACE_SEIZE, victim, NULL, NULL))
			_exit(1);
		if (write(fds[1], "s", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &c, 1), 1);
	close(fds[0]);
	core_session_new(&s, NULL);
	assert_int_equal(uprobe_attach(s.ctx, victim), -EBUSY);
	core_session_free(&s);
	reap(helper);
	reap(victim);
}

/* Spawns prog, checks that registering at vaddr fails with want, runs it to the end. */
static void refused(const char *prog, char *arg, uint64_t vaddr, int want)
{
	char *argv[] = {(char *)prog, arg, NULL};
	struct core_output plain, probed;
	struct core_session s;
	struct core_probe p;
	int rc;

	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);
	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &probed);
	core_probe_init(&p, &s, vaddr);
	rc = register_uprobe(s.ctx, &p.u);
	print_message("register_uprobe(%#" PRIx64 ") = %d (%s)\n", vaddr, rc, strerror(-rc));
	assert_int_equal(rc, want);
	/* a refused probe is not registered: unregistering it is a no-op */
	assert_int_equal(unregister_uprobe(s.ctx, &p.u), 0);
	core_session_wait(&s, &probed, 20, NULL, NULL);
	assert_int_equal(p.hits, 0);
	core_assert_same_run(&plain, &probed);
	core_session_free(&s);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

static void register_midinsn(void **state)
{
	const char *prog = CORE_TARGET("core_calls");
	struct core_insn *ins = NULL;
	size_t n = 0, i;

	(void)state;
	core_decode(prog, "answer", &ins, &n);
	for (i = 0; i < n && ins[i].len < 2; i++)
		;
	assert_true(i < n);
	refused(prog, (char *)"3", ins[i].vaddr + 1, -EINVAL);
	free(ins);
}

static uint64_t nm_symbol(const char *file, const char *symbol)
{
	char cmd[1024], line[256];
	unsigned long long va = 0;
	char type, name[128];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "nm '%s'", file);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %127s", &va, &type, name) == 3 && !strcmp(name, symbol))
			break;
		else
			va = 0;
	pclose(f);
	if (!va)
		fail_msg("nm %s: no %s", file, symbol);
	return va;
}

static void register_nonexec(void **state)
{
	const char *prog = CORE_TARGET("core_insns");

	(void)state;
	refused(prog, (char *)"3", nm_symbol(prog, "g_in"), -EINVAL);
}

static void register_int3(void **state)
{
	const char *prog = CORE_TARGET("core_insns");

	(void)state;
	refused(prog, (char *)"3", core_decode_find(prog, "never_called_int3", "int3"), -EEXIST);
}

static void register_ud2(void **state)
{
	const char *prog = CORE_TARGET("core_insns");

	(void)state;
	refused(prog, (char *)"3", core_decode_find(prog, "never_called_ud2", "undefined"),
		-ENOTSUP);
}

static void register_untraced(void **state)
{
	struct core_session s;
	struct core_probe p;
	pid_t pid;

	(void)state;
	pid = fork_sleeper();
	core_session_new(&s, NULL);
	core_probe_init(&p, &s, (uint64_t)(uintptr_t)&fork_sleeper);
	p.u.pid = pid; /* mapped there too (a fork of us), but not traced by ctx */
	assert_int_equal(register_uprobe(s.ctx, &p.u), -ESRCH);
	core_session_free(&s);
	reap(pid);
}

static void unregister_unregistered(void **state)
{
	const char *prog = CORE_TARGET("core_calls");
	char *argv[] = {(char *)prog, (char *)"3", NULL};
	struct core_output o;
	struct core_session s;
	struct core_probe p;

	(void)state;
	core_output_init(&o);
	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &o);
	core_probe_init(&p, &s, core_decode_entry(prog, "answer"));
	assert_int_equal(unregister_uprobe(s.ctx, &p.u), 0);
	assert_int_equal(register_uprobe(s.ctx, &p.u), 0);
	assert_int_equal(unregister_uprobe(s.ctx, &p.u), 0);
	assert_int_equal(unregister_uprobe(s.ctx, &p.u), 0);
	core_session_wait(&s, &o, 20, NULL, NULL);
	assert_int_equal(p.hits, 0);
	assert_true(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0);
	core_session_free(&s);
	core_output_cleanup(&o);
}

static void reaped_detached(void **state)
{
	struct core_session s;
	pid_t keep, gone;
	int go[2], st = 0;
	char c = 0;

	(void)state;
	keep = fork_sleeper(); /* traced: the library goes on waiting for any child */
	assert_int_equal(pipe(go), 0);
	gone = fork();
	assert_true(gone >= 0);
	if (gone == 0) {
		close(go[1]);
		if (read(go[0], &c, 1) < 0)
			_exit(1);
		_exit(7);
	}
	close(go[0]);
	core_session_new(&s, NULL);
	assert_int_equal(uprobe_attach(s.ctx, keep), 0);
	assert_int_equal(uprobe_attach(s.ctx, gone), 0);
	assert_int_equal(uprobe_detach(s.ctx, gone), 0);
	assert_int_equal(uprobe_reaped_status(gone, &st), -ECHILD); /* still running */
	close(go[1]); /* it exits now, untraced */
	for (int i = 0; i < 500 && kill(gone, 0) == 0; i++) { /* a zombie until reaped */
		uprobe_ctx_dispatch(s.ctx);
		usleep(10000);
	}
	assert_int_equal(waitpid(gone, &st, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	st = 0;
	assert_int_equal(uprobe_reaped_status(gone, &st), 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	assert_int_equal(uprobe_reaped_status(gone, &st), -ECHILD); /* taken once */
	core_session_free(&s);
	reap(keep);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(attach_nopid),	    cmocka_unit_test(attach_busy),
		cmocka_unit_test(register_midinsn), cmocka_unit_test(register_nonexec),
		cmocka_unit_test(register_int3),    cmocka_unit_test(register_ud2),
		cmocka_unit_test(register_untraced), cmocka_unit_test(unregister_unregistered),
		cmocka_unit_test(reaped_detached),
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
