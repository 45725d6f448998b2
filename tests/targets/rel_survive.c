/* SPDX-License-Identifier: MIT */
/*
 * rel_survive N THREADS MODE: a target whose tracer is killed under it (issue 29 item 2,
 * tests/integration/reliability_survive.py).  THREADS threads each run sv_mix() N times
 * and sv_rec() (8 deep, so that return probes are in flight) every 64th time; a timer's
 * SIGALRM handler, meanwhile, runs sv_sig() and sv_leaf() and checks what they return.
 * What it prints and its exit status (3) depend on N and THREADS only.
 *
 * MODE:
 *   plain  as above
 *   own    the program's own SIGTRAP handler (installed first thing, SA_ONSTACK and
 *          SA_RESTART, each thread with a signal stack): every thread raises SIGTRAP
 *          and runs an int3 of its own 4 times each; the handler's count is printed
 *          (exactly 8 a thread, as unprobed), and how many of them ran off the signal
 *          stack if any did (the safety net's handler, which passes them on, must
 *          take the program's SA_ONSTACK)
 *   die    plain, then an int3 of its own with SIGTRAP at its default: killed by
 *          SIGTRAP, as unprobed
 *   blocked no threads, no timer: its own SIGTRAP handler, then sv_leaf() in batches
 *          of 1,000 with SIGTRAP (and SIGUSR1) blocked -- a probe hit there is a forced
 *          SIGTRAP that finds it blocked, which resets the disposition to SIG_DFL --
 *          until a tracer has come ("traced") and a SIGUSR2 has, then unblocked
 *          ("unblocked") until the tracer is gone (or N seconds); then it raises
 *          SIGTRAP and runs an int3 of its own: "own traps: 2" 
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/ucontext.h>
#include <time.h>
#include <unistd.h>

static long n_iter;
static int mode_own;
static volatile long own_traps;
static volatile long own_off_stack; /* own: traps handled off the thread's signal stack */
static volatile long sig_runs;

__attribute__((noinline)) long sv_leaf(long x)
{
	return x * 3 + 1;
}

/* a few kinds of instruction: a call, a rip-relative load, a branch, a push/pop */
static long sv_table[4] = { 5, 7, 11, 13 };

__attribute__((noinline)) long sv_mix(long x)
{
	long v = sv_table[x & 3];

	if (x & 1)
		v += sv_leaf(x);
	else
		v -= x >> 2;
	return v ^ (x << 1);
}

__attribute__((noinline)) long sv_rec(int depth, long x)
{
	if (!depth)
		return sv_leaf(x);
	return sv_rec(depth - 1, x + depth) + 1;
}

__attribute__((noinline)) long sv_sig(long k)
{
	return sv_leaf(k) + sv_table[k & 3];
}

static void on_alarm(int sig)
{
	long k = sig_runs++;

	(void)sig;
	if (sv_sig(k) != k * 3 + 1 + sv_table[k & 3] || sv_leaf(k + 1) != (k + 1) * 3 + 1) {
		static const char bad[] =
			"BAD: a probed function gave a wrong answer in a handler\n";

		write(2, bad, sizeof(bad) - 1);
		_exit(9);
	}
}

static int trap_log; /* REL_SURVIVE_TRAPLOG: each trap the handler sees, on stderr */

static void put_hex(char *b, size_t *n, const char *tag, unsigned long v)
{
	while (*tag)
		b[(*n)++] = *tag++;
	for (int i = 60; i >= 0; i -= 4)
		b[(*n)++] = "0123456789abcdef"[(v >> i) & 15];
}

static void on_trap(int sig, siginfo_t *si, void *uc)
{
	stack_t ss;

	(void)sig;
	__atomic_add_fetch(&own_traps, 1, __ATOMIC_RELAXED);
	if (mode_own && !sigaltstack(NULL, &ss) && !(ss.ss_flags & SS_ONSTACK))
		__atomic_add_fetch(&own_off_stack, 1, __ATOMIC_RELAXED);
	if (trap_log) { /* async-signal-safe: formatted by hand, one write */
		const ucontext_t *u = uc;
		char b[128];
		size_t n = 0;

		put_hex(b, &n, "trap code ", (unsigned long)(unsigned)si->si_code);
		put_hex(b, &n, " addr ", (unsigned long)si->si_addr);
		put_hex(b, &n, " rip ", (unsigned long)u->uc_mcontext.gregs[REG_RIP]);
		put_hex(b, &n, " efl ", (unsigned long)u->uc_mcontext.gregs[REG_EFL]);
		b[n++] = '\n';
		if (write(2, b, n) < 0)
			trap_log = 0;
	}
}

static void *worker(void *arg)
{
	long id = (long)arg, s = 0;

	if (mode_own) {
		stack_t ss = { .ss_size = 64 << 10 };

		ss.ss_sp = malloc(ss.ss_size);
		if (!ss.ss_sp || sigaltstack(&ss, NULL))
			abort();
	}
	for (long i = 0; i < n_iter; i++) {
		s += sv_mix(i + id);
		if (!(i & 63))
			s += sv_rec(8, i);
		if (mode_own && i % (n_iter / 4) == 0) {
			raise(SIGTRAP);
			__asm__ volatile("int3");
		}
	}
	return (void *)s;
}

static int traced(void)
{
	char line[256];
	int pid = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "TracerPid: %d", &pid) == 1)
			break;
	if (f)
		fclose(f);
	return pid;
}

static volatile sig_atomic_t go;

static void on_go(int sig)
{
	(void)sig;
	go = 1;
}

static int blocked(long seconds)
{
	struct sigaction sa;
	sigset_t set;
	time_t end = time(NULL) + seconds;
	int seen = 0;
	long s = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGTRAP);
	sigaddset(&set, SIGUSR1);
	/* blocked until a batch after the tracer came (its probe hit), then unblocked:
	   after the tracer's death a hit with SIGTRAP blocked would be reset to SIG_DFL
	   before any handler could run, the net's too -- that no one can help */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_go;
	sigaction(SIGUSR2, &sa, NULL);
	while (time(NULL) < end) {
		if (seen < 2)
			sigprocmask(SIG_BLOCK, &set, NULL);
		for (long i = 0; i < 1000; i++)
			s += sv_leaf(i);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		if (seen == 1 && go) {
			seen = 2;
			printf("unblocked\n"); /* the test kills the tracer after this */
			fflush(stdout);
		}
		if (traced() && !seen) {
			seen = 1;
			printf("traced\n");
			fflush(stdout);
		} else if (seen && !traced()) {
			break;
		}
		usleep(1000);
	}
	if (s % 1499500)
		return 9; /* a batch's sum: sv_leaf gave a wrong answer */
	raise(SIGTRAP);
	__asm__ volatile("int3");
	printf("own traps: %ld\n", own_traps);
	return 3;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } };
	pthread_t th[64];
	long nth;

	if (argc < 4) {
		fprintf(stderr, "usage: rel_survive N THREADS plain|own|die|blocked\n");
		return 2;
	}
	n_iter = atol(argv[1]);
	nth = atol(argv[2]);
	if (!strcmp(argv[3], "blocked"))
		return blocked(n_iter);
	if (nth < 1 || nth > 64 || n_iter < 4)
		return 2;
	mode_own = !strcmp(argv[3], "own");
	trap_log = getenv("REL_SURVIVE_TRAPLOG") != NULL;
	if (mode_own) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_trap;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
		sigaction(SIGTRAP, &sa, NULL);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	/* REL_SURVIVE_NOTIMER: no SIGALRM (reliability_survive.py sweep: see there) */
	if (!getenv("REL_SURVIVE_NOTIMER"))
		setitimer(ITIMER_REAL, &it, NULL);
	for (long i = 0; i < nth; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (long i = 0; i < nth; i++) {
		void *r;

		pthread_join(th[i], &r);
		printf("thread %ld: %ld\n", i, (long)r);
	}
	it.it_value.tv_usec = it.it_interval.tv_usec = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	if (mode_own)
		printf("own traps: %ld\n", own_traps);
	if (own_off_stack)
		printf("own traps off the signal stack: %ld\n", own_off_stack);
	fflush(stdout);
	if (!strcmp(argv[3], "die"))
		__asm__ volatile("int3");
	return 3;
}
