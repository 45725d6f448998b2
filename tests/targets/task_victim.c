/* SPDX-License-Identifier: MIT */
/*
 * The ptrace engine's victim: one program, a behaviour per mode (argv[1]).  Each mode
 * checks its own outcome and says so in its exit status, so a test under the tracer
 * compares that status with what the program does untraced.  alarm() bounds every run.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int spin_forever = 1;
static volatile sig_atomic_t got_trap;
static const char *self;

__attribute__((noinline)) int bp_target(int x)
{
	return x * 3 + 1;
}

static void *worker(void *arg)
{
	volatile long n = 0;

	for (long i = 0; i < 100000; i++)
		n += i;
	return arg;
}

static void *spinner(void *arg)
{
	while (spin_forever)
		;
	return arg;
}

static void *execer(void *arg)
{
	char *argv[] = { (char *)self, "exit", "7", NULL };

	execv(self, argv);
	_exit(99);
	return arg;
}

static void *bp_worker(void *arg)
{
	long sum = 0;

	for (int i = 0; i < 200; i++)
		sum += bp_target(i);
	/* sum of 3i+1 for i < 200 */
	return (void *)(long)(sum == 3 * 199 * 200 / 2 + 200);
}

static void on_trap(int sig)
{
	(void)sig;
	got_trap++;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "exit";
	int n = argc > 2 ? atoi(argv[2]) : 0;

	self = argv[0];
	alarm(30);
	if (!strcmp(mode, "exit"))
		return n;
	if (!strcmp(mode, "segv")) {
		*(volatile int *)8 = 1;
		return 0;
	}
	if (!strcmp(mode, "loop")) {
		for (;;)
			spin_forever++;
	}
	if (!strcmp(mode, "threads") || !strcmp(mode, "spin")) {
		pthread_t th[64];

		if (n > 64)
			n = 64;
		for (int i = 0; i < n; i++)
			if (pthread_create(&th[i], NULL, mode[0] == 't' ? worker : spinner, NULL))
				return 2;
		for (int i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		return 0;
	}
	if (!strcmp(mode, "bp")) {
		int sum = 0;

		for (int i = 0; i < 5; i++)
			sum += bp_target(i);
		/* 1 + 4 + 7 + 10 + 13 */
		printf("bp sum %d\n", sum);
		return sum == 35 ? 0 : 1;
	}
	if (!strcmp(mode, "bpthreads")) {
		pthread_t th[16];
		void *ok;
		int good = 0;

		if (n > 16)
			n = 16;
		for (int i = 0; i < n; i++)
			if (pthread_create(&th[i], NULL, bp_worker, NULL))
				return 2;
		for (int i = 0; i < n; i++) {
			pthread_join(th[i], &ok);
			good += ok != NULL;
		}
		return good == n ? 0 : 1;
	}
	if (!strcmp(mode, "sigtrap")) {
		signal(SIGTRAP, on_trap);
		raise(SIGTRAP);
		return got_trap == 1 ? 0 : 1;
	}
	if (!strcmp(mode, "sigstop")) {
		raise(SIGSTOP);
		return 4;
	}
	if (!strcmp(mode, "fork")) {
		int st1, st2;
		pid_t c = fork();

		if (c == 0)
			_exit(5);
		if (waitpid(c, &st1, 0) != c)
			return 10;
		c = vfork();
		if (c == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(98);
		}
		if (waitpid(c, &st2, 0) != c)
			return 11;
		if (!WIFEXITED(st1) || WEXITSTATUS(st1) != 5)
			return 12;
		if (!WIFEXITED(st2) || WEXITSTATUS(st2) != 0)
			return 13;
		return 0;
	}
	if (!strcmp(mode, "execthread")) {
		pthread_t th;

		if (pthread_create(&th, NULL, execer, NULL))
			return 2;
		for (;;)
			pause();
	}
	return 100;
}
