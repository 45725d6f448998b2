// SPDX-License-Identifier: MIT
/*
 * A deterministic workload for `uprobe run` against bpftrace (tests/run.cmake): the
 * same calls with the same arguments each run, counts chosen so that no two keys of a
 * map tie (bpftrace's order among equal values is its hash table's).  Prints nothing.
 *
 *   work_size(n)        1000 calls, n spread over 0 .. 70000 (hist, lhist, stats)
 *   work_key(k, name)   key k (0..6) called 3 * (k + 1) times, name "key<k>"
 *   work_ret(x)         returns 3 * x - 40 for x in 0..29 (retval, casts, negatives)
 *   work_wait(us)       sleeps us microseconds: 4 calls of 1100 us, 2 of 5000 us (the
 *                       latency pair: durations mid-way in bpftrace's [1M, 2M) and
 *                       [4M, 8M) ns buckets, whatever path measures them)
 *   named_call(k)       by threads of known names, one after another (@[comm], @[tid]):
 *                       the main thread 2 times as "run_work", threads "worker0..2"
 *                       (prctl) 5, 10 and 15 times, the main thread 7 times after
 *                       renaming itself "renamed" (prctl), and a thread it names
 *                       "other" (pthread_setname_np from the main thread) 11 times:
 *                       by comm 2 5 10 15 7 11, by thread 9 5 10 15 11
 *   neg_call(x)         x from -5000 to 39000 by 1000 (hist() of values negative as
 *                       bpftrace's int64: its "(..., 0)" bucket)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

__attribute__((noinline)) long work_size(unsigned long n)
{
	__asm__ volatile("" ::: "memory");
	return (long)n;
}

__attribute__((noinline)) int work_key(int k, const char *name)
{
	__asm__ volatile("" : : "r"(name) : "memory");
	return k;
}

__attribute__((noinline)) int work_ret(int x)
{
	__asm__ volatile("" ::: "memory");
	return 3 * x - 40;
}

__attribute__((noinline)) int work_wait(long us)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = us * 1000 };

	while (nanosleep(&ts, &ts))
		;
	return 0;
}

__attribute__((noinline)) int named_call(int k)
{
	__asm__ volatile("" ::: "memory");
	return k;
}

__attribute__((noinline)) long neg_call(long x)
{
	__asm__ volatile("" ::: "memory");
	return x;
}

static void *named_worker(void *arg)
{
	long i = (long)arg;
	char name[16];

	snprintf(name, sizeof(name), "worker%ld", i);
	prctl(PR_SET_NAME, name);
	for (long j = 0; j < 5 * (i + 1); j++)
		named_call((int)i);
	return NULL;
}

static pthread_barrier_t named_bar;

static void *named_other(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&named_bar); /* named by the main thread meanwhile */
	for (int j = 0; j < 11; j++)
		named_call(9);
	return NULL;
}

static void named_threads(void)
{
	pthread_t t;

	for (int j = 0; j < 2; j++)
		named_call(-1);
	for (long i = 0; i < 3; i++)
		if (!pthread_create(&t, NULL, named_worker, (void *)i))
			pthread_join(t, NULL);
	prctl(PR_SET_NAME, "renamed");
	for (int j = 0; j < 7; j++)
		named_call(-2);
	pthread_barrier_init(&named_bar, NULL, 2);
	if (!pthread_create(&t, NULL, named_other, NULL)) {
		pthread_setname_np(t, "other");
		pthread_barrier_wait(&named_bar);
		pthread_join(t, NULL);
	}
}

int main(void)
{
	static char names[7][8];
	unsigned long v = 1;
	long sum = 0;

	for (int i = 0; i < 1000; i++) {
		v = (v * 1103515245u + 12345u) & 0x7fffffff;
		sum += work_size(i < 10 ? (unsigned long)i : v % (unsigned long)(70 * i + 1));
	}
	for (int k = 0; k < 7; k++) {
		snprintf(names[k], sizeof(names[k]), "key%d", k);
		for (int j = 0; j < 3 * (k + 1); j++)
			sum += work_key(k, names[k]);
	}
	for (int x = 0; x < 30; x++)
		sum += work_ret(x);
	for (int i = 0; i < 6; i++)
		sum += work_wait(i < 4 ? 1100 : 5000);
	named_threads();
	for (long i = -5; i < 40; i++)
		sum += neg_call(i * 1000);
	return sum == 42; /* 0: the sum is not 42 */
}
