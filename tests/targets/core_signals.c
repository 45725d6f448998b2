/* SPDX-License-Identifier: MIT */
/*
 * core_signals MODE [N]: signals arriving at, or raised by, probed code.  stdout holds
 * only what does not depend on timing (a run under probes must match a run without
 * byte for byte); what does (how many alarms came) goes to stderr as "key=value".
 *   alarm-restart N, alarm-norestart N
 *       an ITIMER_REAL of 5 ms, SIGALRM handled with / without SA_RESTART, while
 *       probed_sig_work() runs N times, a helper process feeds a pipe slowly that we
 *       read byte by byte, and we pause() until 5 alarms came.  The handler calls
 *       probed_sig_handler() once per signal.  stderr: handled=H eintr=E.  With
 *       SA_RESTART no read may fail with EINTR (stdout says eintr=0).
 *   segv N    probed_segv_load(NULL), probed_segv_store(NULL) and probed_fpe(x, 0)
 *             fault N times each; our own handler reports the signal, si_code,
 *             si_addr and the faulting instruction as symbol+offset, and siglongjmps.
 *   stop N    N calls, raise(SIGSTOP), a helper sends SIGCONT every 50 ms until we
 *             say we run again, N calls, "continued".
 *   trap N    our own SIGTRAPs: raise(SIGTRAP) and an int3 in probed_own_int3(),
 *             N times each, handled by our handler.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa, used))

int g_seed = 99;
volatile int g_store;
int *volatile g_null;
volatile int g_zero;

static volatile sig_atomic_t g_handled;

NOIPA unsigned probed_sig_work(unsigned x)
{
	unsigned y = x * 40503u + (unsigned)g_seed;

	g_store = (int)y;
	return y ^ (y >> 7);
}

NOIPA void probed_sig_handler(int sig)
{
	g_store += sig;
}

NOIPA int probed_segv_load(int *p)
{
	return *p + 1;
}

NOIPA void probed_segv_store(int *p)
{
	*p = 42;
}

NOIPA int probed_fpe(int a, int b)
{
	return a / b;
}

NOIPA void probed_own_int3(void)
{
	__asm__ volatile("int3");
}

static void on_alarm(int sig)
{
	int saved = errno;

	probed_sig_handler(sig);
	g_handled++;
	errno = saved;
}

static int mode_alarm(int n, int restart)
{
	struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = restart ? SA_RESTART : 0};
	/* 5 ms: on the trap path every probed instruction of the handler costs a ptrace
	   round trip (~40 us; ~20 of them per alarm here), so at 1 ms a loaded machine
	   spent nearly all its time handling alarms and main() crawled (8-37 s, 40 s
	   limit).  A signal still lands in probed code and in out-of-line steps hundreds
	   of times. */
	struct itimerval it = {.it_interval = {0, 5000}, .it_value = {0, 5000}};
	struct itimerval off = {0};
	unsigned sum = 0;
	int fds[2], bytes = 0, eintr = 0;
	pid_t feeder;

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) || pipe(fds))
		return 1;
	feeder = fork();
	if (feeder < 0)
		return 1;
	if (feeder == 0) {
		close(fds[0]);
		for (int i = 0; i < 20; i++) {
			usleep(1000);
			if (write(fds[1], "x", 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	close(fds[1]);
	if (setitimer(ITIMER_REAL, &it, NULL))
		return 1;
	for (int i = 0; i < n; i++)
		sum += probed_sig_work((unsigned)i);
	for (;;) {
		char c;
		ssize_t r = read(fds[0], &c, 1);

		if (r == 1)
			bytes++;
		else if (r == 0)
			break;
		else if (errno == EINTR)
			eintr++;
		else
			return 1;
	}
	while (g_handled < 5)
		pause();
	setitimer(ITIMER_REAL, &off, NULL);
	waitpid(feeder, NULL, 0);
	printf("mode=%s n=%d checksum=%u handled>0=%d bytes=%d\n",
	       restart ? "restart" : "norestart", n, sum, g_handled > 0, bytes);
	if (restart)
		printf("eintr=%d\n", eintr);
	fprintf(stderr, "handled=%d eintr=%d\n", (int)g_handled, eintr);
	return 0;
}

/* ---- faults ------------------------------------------------------------------------ */

static sigjmp_buf g_jmp;
static volatile int g_signo, g_code;
static volatile uintptr_t g_addr, g_ip;

static void on_fault(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	g_signo = sig;
	g_code = si->si_code;
	g_addr = (uintptr_t)si->si_addr;
#ifdef __x86_64__
	g_ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#else
	g_ip = (uintptr_t)uc->uc_mcontext.gregs[REG_EIP];
#endif
	siglongjmp(g_jmp, 1);
}

static void report(const char *what, uintptr_t fn)
{
	printf("%s: sig=%d code=%d addr=", what, g_signo, g_code);
	if (g_addr == 0)
		printf("0");
	else if (g_addr >= fn && g_addr < fn + 64)
		printf("%s+0x%lx", what, (unsigned long)(g_addr - fn));
	else
		printf("elsewhere");
	if (g_ip >= fn && g_ip < fn + 64)
		printf(" ip=%s+0x%lx recovered\n", what, (unsigned long)(g_ip - fn));
	else
		printf(" ip=elsewhere(%#lx) recovered\n", (unsigned long)g_ip);
}

static int mode_segv(int n)
{
	struct sigaction sa = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO | SA_NODEFER};
	volatile int r = 0;

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) || sigaction(SIGFPE, &sa, NULL))
		return 1;
	for (volatile int i = 0; i < n; i++) {
		if (!sigsetjmp(g_jmp, 1))
			r += probed_segv_load(g_null);
		report("probed_segv_load", (uintptr_t)probed_segv_load);
		if (!sigsetjmp(g_jmp, 1))
			probed_segv_store(g_null);
		report("probed_segv_store", (uintptr_t)probed_segv_store);
		if (!sigsetjmp(g_jmp, 1))
			r += probed_fpe(i + 7, g_zero);
		report("probed_fpe", (uintptr_t)probed_fpe);
	}
	printf("segv done r=%d\n", r);
	return 0;
}

/* ---- job control ------------------------------------------------------------------- */

static volatile sig_atomic_t g_conts;

static void on_cont(int sig)
{
	(void)sig;
	g_conts++;
}

static int mode_stop(int n)
{
	struct sigaction sa = {.sa_handler = on_cont};
	unsigned sum = 0;
	int fds[2];
	pid_t helper, parent = getpid();

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGCONT, &sa, NULL) || pipe(fds))
		return 1;
	fflush(stdout);
	helper = fork();
	if (helper < 0)
		return 1;
	if (helper == 0) {
		char c;

		close(fds[1]);
		fcntl(fds[0], F_SETFL, O_NONBLOCK);
		for (int i = 0; i < 200; i++) {
			usleep(50000);
			kill(parent, SIGCONT);
			if (read(fds[0], &c, 1) == 1)
				_exit(0);
		}
		_exit(1);
	}
	close(fds[0]);
	for (int i = 0; i < n; i++)
		sum += probed_sig_work((unsigned)i);
	raise(SIGSTOP);
	printf("continued\n");
	for (int i = 0; i < n; i++)
		sum += probed_sig_work((unsigned)i + 1000u);
	if (write(fds[1], "d", 1) != 1)
		return 1;
	int status;

	waitpid(helper, &status, 0);
	printf("stop checksum=%u sigcont>0=%d helper=%d\n", sum, g_conts > 0,
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}

/* ---- our own traps ----------------------------------------------------------------- */

static volatile sig_atomic_t g_traps;

static void on_trap(int sig)
{
	(void)sig;
	g_traps++;
}

static int mode_trap(int n)
{
	struct sigaction sa = {.sa_handler = on_trap};

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTRAP, &sa, NULL))
		return 1;
	for (int i = 0; i < n; i++) {
		raise(SIGTRAP);
		probed_own_int3();
		probed_sig_work((unsigned)i);
	}
	printf("traps=%d of %d\n", (int)g_traps, 2 * n);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "alarm-restart";
	int n = argc > 2 ? atoi(argv[2]) : 1000;

	alarm(20); /* ITIMER_REAL is alarm()'s timer: the alarm modes rely on the pause loop */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "alarm-restart"))
		return mode_alarm(n, 1);
	if (!strcmp(mode, "alarm-norestart"))
		return mode_alarm(n, 0);
	if (!strcmp(mode, "segv"))
		return mode_segv(n);
	if (!strcmp(mode, "stop"))
		return mode_stop(n);
	if (!strcmp(mode, "trap"))
		return mode_trap(n);
	fprintf(stderr, "core_signals: unknown mode '%s'\n", mode);
	return 2;
}
