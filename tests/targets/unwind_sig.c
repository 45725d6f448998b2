// SPDX-License-Identifier: MIT
/*
 * Signals at a high rate at a thread running a hot probed function (issue 31): a second
 * thread tgkills the main thread with SIGUSR1 in a loop while main -> outer -> middle
 * calls hot() in a loop; the handler calls on_signal(), which the test probes with a
 * stack key.  With hot() probed on the fast path the signals land in its trampoline
 * (the saves, the agent's C code, the relocated instructions) as often as in the
 * program's own code: every stack at on_signal must still read on_signal <- handler <-
 * __restore_rt <- [hot <-] middle <- outer <- main.  Built -O2 -fomit-frame-pointer.
 *
 * usage: unwind_sig [SIGNALS [ITERATIONS]]: main calls outer(ITERATIONS) until SIGNALS
 * were delivered in the loop (or for 20 s at most).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NI __attribute__((noinline))

volatile int sink;
static volatile int in_loop, done;
static pid_t main_tid;
volatile unsigned long delivered, in_loop_delivered;

NI void on_signal(int sig)
{
	sink += sig;
	__asm__ volatile("" ::: "memory");
}

static void handler(int sig)
{
	delivered++;
	if (in_loop) {
		in_loop_delivered++;
		on_signal(sig);
	}
	sink++; /* not a tail call: the handler is on the stack */
}

NI int hot(int x)
{
	int r = x * 3 + sink;

	__asm__ volatile("" ::: "memory");
	return r ^ (x >> 2);
}

NI int middle(int n)
{
	int acc = 0;

	in_loop = 1;
	for (int i = 0; i < n; i++)
		acc += hot(i);
	in_loop = 0;
	return acc + 1;
}

NI int outer(int n)
{
	int r = middle(n);

	return r + sink;
}

static void *sender(void *arg)
{
	(void)arg;
	while (!done) {
		syscall(SYS_tgkill, getpid(), main_tid, SIGUSR1);
		for (volatile int i = 0; i < 2000; i++)
			;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long want = argc > 1 ? strtoul(argv[1], NULL, 0) : 20000;
	int n = argc > 2 ? atoi(argv[2]) : 200000;
	struct sigaction sa = { .sa_handler = handler, .sa_flags = SA_RESTART };
	struct timespec t0, t;
	pthread_t th;
	int r = 0;

	main_tid = (pid_t)syscall(SYS_gettid);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_create(&th, NULL, sender, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		r += outer(n);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (in_loop_delivered < want && t.tv_sec - t0.tv_sec < 20);
	done = 1;
	pthread_join(th, NULL);
	return r == 42 ? 1 : 0;
}
