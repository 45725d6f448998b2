/* SPDX-License-Identifier: MIT */
/*
 * core_threads NTHREADS ITERS: every thread calls probed_work() ITERS times; the
 * process prints one checksum that depends only on NTHREADS and ITERS.  The probing
 * core's tests count the hits at probed_work's entry: exactly NTHREADS * ITERS.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int g_mult = 2654435;		/* loaded rip-relative */
volatile int g_store;		/* stored rip-relative (racy on purpose: not in the sum) */

__attribute__((noipa, used)) unsigned probed_helper(unsigned y)
{
	return (y << 7 | y >> 25) + 0x9e3779b9u;
}

__attribute__((noipa, used)) unsigned probed_work(int x)
{
	unsigned y = (unsigned)x * (unsigned)g_mult + 7;

	g_store = (int)y;
	return probed_helper(y) ^ (y >> 3);
}

struct worker {
	pthread_t th;
	int index;
	int iters;
	unsigned long long sum;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned long long sum = 0;

	for (int i = 0; i < w->iters; i++)
		sum += probed_work(w->index * w->iters + i);
	w->sum = sum;
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = argc > 1 ? atoi(argv[1]) : 2;
	int iters = argc > 2 ? atoi(argv[2]) : 1000;
	struct worker *w;
	unsigned long long total = 0;

	alarm(30);
	if (nthreads < 1 || iters < 0) {
		fprintf(stderr, "usage: core_threads NTHREADS ITERS\n");
		return 2;
	}
	w = calloc((size_t)nthreads, sizeof(*w));
	if (!w)
		return 1;
	for (int t = 0; t < nthreads; t++) {
		w[t].index = t;
		w[t].iters = iters;
		if (pthread_create(&w[t].th, NULL, worker_main, &w[t])) {
			perror("pthread_create");
			return 1;
		}
	}
	for (int t = 0; t < nthreads; t++) {
		pthread_join(w[t].th, NULL);
		total += w[t].sum * (unsigned)(t + 1);
	}
	printf("threads=%d iters=%d checksum=%llu\n", nthreads, iters, total);
	free(w);
	return 0;
}
