/* SPDX-License-Identifier: MIT */
/*
 * rel_exec [K]: the leader and two more threads call probed_exec_work() in a loop
 * forever; a fourth thread calls it K times (default 3000), then execs this program
 * again as `rel_exec after K` -- an exec from a non-leader thread, which ends every
 * other thread.  The new image calls probed_exec_work() K times, prints its checksum and
 * exits 7.  Nothing before the exec prints.
 *
 * rel_exec wait FD K: reads one byte from descriptor FD, then the leader (the only
 * thread) execs `rel_exec after K` -- an exec the tracer has not seen when it next
 * registers probes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int g_mul = 69069;
volatile unsigned g_sink;

__attribute__((noipa, used)) unsigned probed_exec_work(unsigned x)
{
	unsigned y = x * (unsigned)g_mul + 1;

	g_sink = y;
	return y ^ (y >> 7);
}

static int g_k;
static char *g_self;

static void *spin(void *arg)
{
	unsigned x = (unsigned)(unsigned long)arg;

	for (;;)
		x += probed_exec_work(x);
	return NULL;
}

static void *execer(void *arg)
{
	char kbuf[16];
	unsigned s = 0;

	(void)arg;
	for (int i = 0; i < g_k; i++)
		s += probed_exec_work((unsigned)i);
	g_sink = s;
	snprintf(kbuf, sizeof(kbuf), "%d", g_k);
	execl("/proc/self/exe", g_self, "after", kbuf, (char *)NULL);
	perror("execl");
	exit(1);
}

int main(int argc, char **argv)
{
	pthread_t th;

	alarm(60);
	g_self = argv[0];
	if (argc > 2 && !strcmp(argv[1], "after")) {
		int k = atoi(argv[2]);
		unsigned s = 0;

		for (int i = 0; i < k; i++)
			s += probed_exec_work((unsigned)i * 3);
		printf("after exec: k=%d checksum=%u\n", k, s);
		return 7;
	}
	if (argc > 3 && !strcmp(argv[1], "wait")) {
		char c;

		if (read(atoi(argv[2]), &c, 1) != 1)
			return 1;
		execl("/proc/self/exe", g_self, "after", argv[3], (char *)NULL);
		perror("execl");
		return 1;
	}
	g_k = argc > 1 ? atoi(argv[1]) : 3000;
	for (int i = 0; i < 2; i++)
		pthread_create(&th, NULL, spin, (void *)(unsigned long)(i + 1));
	pthread_create(&th, NULL, execer, NULL);
	spin(NULL);
	return 0;
}
