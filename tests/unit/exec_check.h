/* SPDX-License-Identifier: MIT */
/*
 * Can this kernel run a given binary at all?  A kernel without IA32 emulation (or with
 * it turned off at boot) refuses 32-bit ELF files with ENOEXEC; tests of 32-bit
 * processes then skip and say why instead of timing out.  The binary is stopped at its
 * exec under PTRACE_TRACEME and killed: nothing of it runs.
 */
#ifndef UPROBE_TEST_EXEC_CHECK_H
#define UPROBE_TEST_EXEC_CHECK_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

static inline bool test_can_exec(const char *path)
{
	int st = 0;
	pid_t pid = fork();

	if (pid < 0)
		return false;
	if (pid == 0) {
		char *argv[] = { (char *)path, NULL };

		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		execv(path, argv);
		_exit(errno == ENOEXEC ? 126 : 127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return false;
	if (WIFSTOPPED(st)) {
		kill(pid, SIGKILL);
		ptrace(PTRACE_CONT, pid, NULL, NULL);
		waitpid(pid, &st, 0);
		return true;
	}
	fprintf(stderr, "SKIP: this kernel cannot run %s (%s): no IA32 emulation?\n", path,
		WIFEXITED(st) && WEXITSTATUS(st) == 126 ? "exec format error" : "exec failed");
	return false;
}

#endif
