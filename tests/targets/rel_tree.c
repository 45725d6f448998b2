/* SPDX-License-Identifier: MIT */
/*
 * rel_tree [K]: a tree of 100 processes: the root forks 9 children, each child forks
 * 10 grandchildren.  Every process calls probed_tree_work() K times (default 50).  A
 * grandchild exits 20 + its index when its sum is right; a child exits 10 + its index
 * when its own sum is right and every grandchild exited as expected.  The root waits
 * for its children in order and prints what each did, then its own sum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NCHILD 9
#define NGRAND 10

int g_seed = 7;
volatile unsigned g_sink;

__attribute__((noipa, used)) unsigned probed_tree_work(unsigned x)
{
	unsigned y = x * 2654435761u + (unsigned)g_seed;

	g_sink = y;
	return y ^ (y >> 11);
}

static unsigned run_k(unsigned base, int k)
{
	unsigned sum = 0;

	for (int i = 0; i < k; i++)
		sum += probed_tree_work(base + (unsigned)i);
	return sum;
}

/* the same sum, without the probed function */
static unsigned expect_k(unsigned base, int k)
{
	unsigned sum = 0;

	for (int i = 0; i < k; i++) {
		unsigned y = (base + (unsigned)i) * 2654435761u + (unsigned)g_seed;

		sum += y ^ (y >> 11);
	}
	return sum;
}

static int wait_status(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return status;
}

static void grandchild(int c, int g, int k)
{
	unsigned base = (unsigned)(1000 * c + 10 * g);

	_exit(run_k(base, k) == expect_k(base, k) ? 20 + g : 1);
}

static void child(int c, int k)
{
	pid_t pids[NGRAND];
	int ok = 1;

	for (int g = 0; g < NGRAND; g++) {
		fflush(stdout);
		pids[g] = fork();
		if (pids[g] < 0)
			_exit(2);
		if (pids[g] == 0)
			grandchild(c, g, k);
	}
	if (run_k((unsigned)(1000 * c), k) != expect_k((unsigned)(1000 * c), k))
		ok = 0;
	for (int g = 0; g < NGRAND; g++) {
		int st = wait_status(pids[g]);

		if (!WIFEXITED(st) || WEXITSTATUS(st) != 20 + g)
			ok = 0;
	}
	_exit(ok ? 10 + c : 3);
}

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 50;
	pid_t pids[NCHILD];
	unsigned sum;

	alarm(60);
	for (int c = 0; c < NCHILD; c++) {
		fflush(stdout);
		pids[c] = fork();
		if (pids[c] < 0) {
			perror("fork");
			return 1;
		}
		if (pids[c] == 0)
			child(c + 1, k);
	}
	sum = run_k(0, k);
	for (int c = 0; c < NCHILD; c++) {
		int st = wait_status(pids[c]);

		if (WIFEXITED(st))
			printf("child %d: exit %d\n", c + 1, WEXITSTATUS(st));
		else if (WIFSIGNALED(st))
			printf("child %d: signal %d\n", c + 1, WTERMSIG(st));
		else
			printf("child %d: status %#x\n", c + 1, st);
	}
	printf("root: k=%d sum %s\n", k, sum == expect_k(0, k) ? "ok" : "WRONG");
	return 6;
}
