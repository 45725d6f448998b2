// SPDX-License-Identifier: MIT
/*
 * The histograms' target (tests/integration/trace_hist.py): calls whose arguments the
 * test knows in advance, so that a table can be checked against the sequence itself as
 * well as against the kernel's uprobe events.
 *
 *   hist_prog sizes T N      T threads, each calling sized(v) N times, v = (i * 37) % 5000
 *                            (thread t adds t): prints the sum of what sized returned
 *   hist_prog names N        named(s) N times over 5 names, name i % 5 ... ("b" 2 in 5)
 *   hist_prog sleep N US     slow(us) N times: a nanosleep of US microseconds each
 *   hist_prog stacks N       leaf() from via_a() N times and from via_b() 3 N times
 *
 * Built with frame pointers, so that stacks can be walked by them.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone))

static volatile uint64_t sink;

NOINLINE uint64_t sized(uint64_t n)
{
	__asm__ volatile("" ::: "memory");
	return n * 3 + 1;
}

NOINLINE size_t named(const char *s)
{
	__asm__ volatile("" ::: "memory");
	return strlen(s);
}

NOINLINE void slow(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	nanosleep(&ts, NULL);
}

NOINLINE uint64_t leaf(uint64_t x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

NOINLINE uint64_t via_a(uint64_t x)
{
	uint64_t r = leaf(x);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}

NOINLINE uint64_t via_b(uint64_t x)
{
	uint64_t r = leaf(x);

	__asm__ volatile("" ::: "memory");
	return r + 2;
}

struct job {
	unsigned t;
	long n;
	uint64_t sum;
};

static void *sizes_thread(void *arg)
{
	struct job *j = arg;

	for (long i = 0; i < j->n; i++)
		j->sum += sized((uint64_t)((i * 37) % 5000 + j->t));
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "sizes") && argc == 4) {
		unsigned nt = (unsigned)atoi(argv[2]);
		struct job jobs[16];
		pthread_t th[16];
		uint64_t sum = 0;

		if (nt < 1 || nt > 16)
			return 2;
		for (unsigned t = 0; t < nt; t++) {
			jobs[t] = (struct job){ t, atol(argv[3]), 0 };
			pthread_create(&th[t], NULL, sizes_thread, &jobs[t]);
		}
		for (unsigned t = 0; t < nt; t++) {
			pthread_join(th[t], NULL);
			sum += jobs[t].sum;
		}
		printf("sum %llu\n", (unsigned long long)sum);
		return 0;
	}
	if (!strcmp(mode, "names") && argc == 3) {
		static const char *const names[5] = { "alpha", "b", "gamma", "b", "epsilon" };
		long n = atol(argv[2]);
		size_t len = 0;

		for (long i = 0; i < n; i++)
			len += named(names[i % 5]);
		printf("len %zu\n", len);
		return 0;
	}
	if (!strcmp(mode, "sleep") && argc == 4) {
		long n = atol(argv[2]);

		for (long i = 0; i < n; i++)
			slow((unsigned)atoi(argv[3]));
		printf("slept %ld\n", n);
		return 0;
	}
	if (!strcmp(mode, "stacks") && argc == 3) {
		long n = atol(argv[2]);
		uint64_t s = 0;

		for (long i = 0; i < n; i++) {
			s += via_a((uint64_t)i);
			for (int k = 0; k < 3; k++)
				s += via_b((uint64_t)i);
		}
		sink = s;
		printf("stacks %ld\n", n);
		return 0;
	}
	fprintf(stderr, "usage: hist_prog sizes T N | names N | sleep N US | stacks N\n");
	return 2;
}
