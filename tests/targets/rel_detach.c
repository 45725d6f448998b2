/* SPDX-License-Identifier: MIT */
/*
 * rel_detach NTHREADS: NTHREADS threads call det_work() (and det_short(), a short
 * function for return probes) flat out, each checking every result against the same
 * computation done inline, until told to stop, while a tracer attaches and detaches
 * again and again (tests/integration/reliability_detach_maps.py).  Commands on stdin,
 * one a line; each answered with a line on stdout:
 *   stop      the threads end; "ok NTHREADS" (or "BAD ..." had a result been wrong), exit
 *   park      a thread of its own (calling det_work too) takes SIGUSR2 (again and again) until one interrupts
 *             it outside this program's text (in a trampoline or the agent: it calls
 *             nothing else), and its handler blocks there: "parked"
 *   unpark    that handler returns (into where it interrupted): "unparked"
 *   sleep     a thread of its own (waiting from the start) calls det_sleep(), which blocks until "wake":
 *             "sleeping" once it is in there
 *   wake      det_sleep() returns, its result checked: "woke"
 * No alarm: a cycle test runs as long as it needs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

extern char __executable_start[], etext[];

static volatile int stop;
static volatile int bad;
static int g_mult = 2654435;

static inline unsigned ref(int x)
{
	unsigned y = (unsigned)x * (unsigned)g_mult + 7;

	return (y << 7 | y >> 25) ^ (y >> 3);
}

__attribute__((noipa, used)) unsigned det_work(int x)
{
	unsigned y = (unsigned)x * (unsigned)g_mult + 7;

	return (y << 7 | y >> 25) ^ (y >> 3);
}

__attribute__((noipa, used)) int det_short(int x)
{
	return x + 1;
}

static void *worker(void *arg)
{
	int x = (int)(intptr_t)arg * 1000003;

	while (!stop) {
		x++;
		if (det_work(x) != ref(x) || det_short(x) != x + 1)
			bad = 1;
	}
	return NULL;
}

/* ---- park: a handler that blocks with its frame's rip in code of the tracer's ---- */

static int park_pipe[2];
static volatile uintptr_t parked_rip;
static volatile int park_wanted; /* a SIGUSR2 still pending after the unpark returns */
static volatile int parker_on = 1;

static void on_usr2(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	char c;

	(void)sig;
	(void)si;
	if (!park_wanted || (rip >= (uintptr_t)__executable_start && rip < (uintptr_t)etext))
		return; /* in the program: the next one */
	park_wanted = 0;
	parked_rip = rip;
	while (read(park_pipe[0], &c, 1) < 0)
		;
}

static void *parker(void *arg)
{
	int x = 7;

	(void)arg;
	while (parker_on) {
		x++;
		if (det_work(x) != ref(x))
			bad = 1;
	}
	return NULL;
}

/* ---- sleep: a probed function that blocks (its return hijacked meanwhile) ---- */

static int sleep_pipe[2], go_pipe[2];
static volatile int in_sleep;

__attribute__((noipa, used)) int det_sleep(int x)
{
	char c;

	in_sleep = 1;
	while (read(sleep_pipe[0], &c, 1) < 0)
		;
	return x * 3;
}

/* started with the others (its stack is there before any attach), it calls det_sleep()
   when told to */
static void *sleeper(void *arg)
{
	char c;

	(void)arg;
	if (read(go_pipe[0], &c, 1) != 1 || c != 'g')
		return NULL;
	if (det_sleep(14) != 42)
		bad = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	pthread_t *th = calloc((size_t)n, sizeof(*th)), pk = 0, sl = 0;
	struct sigaction sa;
	char line[64];

	if (!th || n < 1 || pipe(park_pipe) || pipe(sleep_pipe) || pipe(go_pipe))
		return 2;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_usr2;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)(i + 1)))
			return 2;
	if (pthread_create(&sl, NULL, sleeper, NULL) || pthread_create(&pk, NULL, parker, NULL))
		return 2;
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "stop", 4))
			break;
		if (!strncmp(line, "park", 4)) {
			park_wanted = 1;
			while (!parked_rip) {
				pthread_kill(pk, SIGUSR2);
				usleep(1000);
			}
			printf("parked\n");
		} else if (!strncmp(line, "unpark", 6)) {
			parked_rip = 0;
			parker_on = 0;
			if (write(park_pipe[1], "x", 1) != 1)
				return 2;
			pthread_join(pk, NULL);
			pk = 0;
			printf("unparked\n");
		} else if (!strncmp(line, "sleep", 5)) {
			if (write(go_pipe[1], "g", 1) != 1)
				return 2;
			while (!in_sleep)
				usleep(1000);
			usleep(20000); /* in its read */
			printf("sleeping\n");
		} else if (!strncmp(line, "wake", 4)) {
			if (write(sleep_pipe[1], "x", 1) != 1)
				return 2;
			pthread_join(sl, NULL);
			sl = 0;
			printf("woke\n");
		}
	}
	stop = 1;
	parker_on = 0;
	if (pk)
		pthread_join(pk, NULL);
	if (sl && write(go_pipe[1], "s", 1) == 1)
		pthread_join(sl, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (bad) {
		printf("BAD: a result was wrong\n");
		return 1;
	}
	printf("ok %d\n", n);
	return 0;
}
