// SPDX-License-Identifier: MIT
/*
 * LD_PRELOAD fault injection for the tracer (issue 8: a failed allocation, a lost ptrace
 * relationship).  UPROBE_FAULT selects one call to fail:
 *   malloc:N   the Nth malloc/calloc/realloc returns NULL (ENOMEM)
 *   ptrace:N   the Nth ptrace request (after the first SEIZE) fails with ESRCH
 *   kill:N     the tracer SIGKILLs itself just before its Nth ptrace request
 *   killafter:N  the same just after the Nth request returned (a thread resumed by it
 *              is running: a death inside a remote system call, say)
 * The first SEIZE is request 1 for kill and killafter.  UPROBE_FAULT_LOG=FILE lists
 * every request counted ("N REQUEST TID ADDR RESULT").
 * Only that one call fails; the counting starts at load.  UPROBE_FAULT_REPORT=FILE
 * writes the number of calls seen at exit ("malloc M ptrace P").  LD_PRELOAD and both
 * variables are removed from the environment at load, so programs the tracer starts do
 * not inherit them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);

static long (*real_ptrace)(int, ...);
static unsigned long n_malloc, n_ptrace, fail_malloc, fail_ptrace, kill_before, kill_after;
static int armed_ptrace; /* counting starts once the target is seized */
static char report[256];
static FILE *trail;

static void on_exit_report(void)
{
	FILE *f;

	if (!report[0] || !(f = fopen(report, "w")))
		return;
	fprintf(f, "malloc %lu ptrace %lu\n", n_malloc, n_ptrace);
	fclose(f);
}

__attribute__((constructor)) static void fault_init(void)
{
	const char *s = getenv("UPROBE_FAULT"), *r = getenv("UPROBE_FAULT_REPORT");
	const char *l = getenv("UPROBE_FAULT_LOG");

	real_ptrace = (long (*)(int, ...))dlsym(RTLD_NEXT, "ptrace");
	if (r)
		snprintf(report, sizeof(report), "%s", r);
	if (s && !strncmp(s, "malloc:", 7))
		fail_malloc = strtoul(s + 7, NULL, 10);
	else if (s && !strncmp(s, "ptrace:", 7))
		fail_ptrace = strtoul(s + 7, NULL, 10);
	else if (s && !strncmp(s, "kill:", 5))
		kill_before = strtoul(s + 5, NULL, 10);
	else if (s && !strncmp(s, "killafter:", 10))
		kill_after = strtoul(s + 10, NULL, 10);
	unsetenv("LD_PRELOAD");
	unsetenv("UPROBE_FAULT");
	unsetenv("UPROBE_FAULT_REPORT");
	unsetenv("UPROBE_FAULT_LOG");
	if (l && (trail = fopen(l, "w")))
		setvbuf(trail, NULL, _IOLBF, 0);
	atexit(on_exit_report);
	n_malloc = 0;
}

static int malloc_fails(void)
{
	if (++n_malloc == fail_malloc) {
		errno = ENOMEM;
		return 1;
	}
	return 0;
}

void *malloc(size_t n)
{
	return malloc_fails() ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	return malloc_fails() ? NULL : __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	return malloc_fails() ? NULL : __libc_realloc(p, n);
}

/* the trail's waits: which thread stopped how (UPROBE_FAULT_LOG) */
pid_t waitpid(pid_t pid, int *status, int options)
{
	static pid_t (*real)(pid_t, int *, int);
	pid_t r;

	if (!real)
		real = (pid_t(*)(pid_t, int *, int))dlsym(RTLD_NEXT, "waitpid");
	r = real(pid, status, options);
	if (armed_ptrace && trail && r > 0 && status)
		fprintf(trail, "- wait %d 0x%x\n", (int)r, *status);
	return r;
}

long ptrace(enum __ptrace_request req, ...)
{
	va_list ap;
	pid_t pid;
	void *addr, *data;

	va_start(ap, req);
	pid = va_arg(ap, pid_t);
	addr = va_arg(ap, void *);
	data = va_arg(ap, void *);
	va_end(ap);
	long rc;

	if (req == PTRACE_SEIZE)
		armed_ptrace = 1;
	if (armed_ptrace && ++n_ptrace == fail_ptrace) {
		errno = ESRCH;
		return -1;
	}
	if (armed_ptrace && n_ptrace == kill_before)
		raise(SIGKILL);
	rc = real_ptrace(req, pid, addr, data);
	if (armed_ptrace && trail)
		fprintf(trail, "%lu 0x%x %d %p %p %ld\n", n_ptrace, (unsigned)req, (int)pid, addr, data, rc);
	if (armed_ptrace && n_ptrace == kill_after)
		raise(SIGKILL);
	return rc;
}
