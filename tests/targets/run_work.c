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
 */
#include <stdio.h>
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
	return sum == 42; /* 0: the sum is not 42 */
}
