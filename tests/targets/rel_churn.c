/* SPDX-License-Identifier: MIT */
/*
 * rel_churn [ROUNDS] [NT] [CALLS]: ROUNDS times (default 200) create NT threads
 * (default 4), each calling probed_churn_work() CALLS times (default 20) and exiting;
 * join them.  Threads come and go all the time: probed_churn_work is hit exactly
 * ROUNDS * NT * CALLS times.  Prints one checksum.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int g_mul = 40503;
volatile unsigned g_sink;

__attribute__((noipa, used)) unsigned probed_churn_work(unsigned x)
{
	unsigned y = x * (unsigned)g_mul + 17;

	g_sink = y;
	return (y << 5 | y >> 27) ^ 0x5bd1e995u;
}

struct job {
	pthread_t th;
	unsigned base;
	int calls;
	unsigned sum;
};

static void *worker(void *arg)
{
	struct job *j = arg;
	unsigned s = 0;

	for (int i = 0; i < j->calls; i++)
		s += probed_churn_work(j->base + (unsigned)i);
	j->sum = s;
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 200;
	int nt = argc > 2 ? atoi(argv[2]) : 4;
	int calls = argc > 3 ? atoi(argv[3]) : 20;
	unsigned long long total = 0;
	struct job *jobs = calloc((size_t)nt, sizeof(*jobs));

	alarm(60);
	if (!jobs || nt < 1)
		return 1;
	for (int r = 0; r < rounds; r++) {
		for (int t = 0; t < nt; t++) {
			jobs[t].base = (unsigned)(r * 1000 + t * 100);
			jobs[t].calls = calls;
			if (pthread_create(&jobs[t].th, NULL, worker, &jobs[t])) {
				perror("pthread_create");
				return 1;
			}
		}
		for (int t = 0; t < nt; t++) {
			pthread_join(jobs[t].th, NULL);
			total = total * 31 + jobs[t].sum;
		}
	}
	printf("rounds=%d threads=%d calls=%d checksum=%llu\n", rounds, nt, calls, total);
	free(jobs);
	return 0;
}
