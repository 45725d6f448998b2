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
 *   own    the program's own SIGTRAP handler (installed first thing): every thread
 *          raises SIGTRAP and runs an int3 of its own 4 times each; the handler's count
 *          is printed (exactly 8 a thread, as unprobed)
 *   die    plain, then an int3 of its own with SIGTRAP at its default: killed by
 *          SIGTRAP, as unprobed
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static long n_iter;
static int mode_own;
static volatile long own_traps;
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

static void on_trap(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	__atomic_add_fetch(&own_traps, 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg)
{
	long id = (long)arg, s = 0;

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

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } };
	pthread_t th[64];
	long nth;

	if (argc < 4) {
		fprintf(stderr, "usage: rel_survive N THREADS plain|own|die\n");
		return 2;
	}
	n_iter = atol(argv[1]);
	nth = atol(argv[2]);
	if (nth < 1 || nth > 64 || n_iter < 4)
		return 2;
	mode_own = !strcmp(argv[3], "own");
	if (mode_own) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_trap;
		sa.sa_flags = SA_SIGINFO;
		sigaction(SIGTRAP, &sa, NULL);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
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
	fflush(stdout);
	if (!strcmp(argv[3], "die"))
		__asm__ volatile("int3");
	return 3;
}
