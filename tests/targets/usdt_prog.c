// SPDX-License-Identifier: MIT
/*
 * A USDT target (<sys/sdt.h>): "usdt_prog N" runs N rounds; each round fires
 * test:tick (guarded by a semaphore) with an int, a long, a string and a negative
 * short, and test:plain (no semaphore) with a value read from memory, then prints
 * whether the semaphore was set in that round ("round 3 sema 1").  A second argument
 * makes each round sleep that many milliseconds (a process to attach to).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SDT_USE_VARIADIC
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short test_tick_semaphore __attribute__((section(".probes")));
unsigned short test_plain_semaphore __attribute__((section(".probes")));
#define TEST_TICK_ENABLED() __builtin_expect(test_tick_semaphore, 0)

struct item {
	long id;
	const char *label;
};

static volatile int counter = 100;

__attribute__((noinline)) static void round_of(int i, struct item *it)
{
	short neg = (short)-i;

	if (TEST_TICK_ENABLED())
		STAP_PROBEV(test, tick, i, it->id, it->label, neg);
	counter++;
	STAP_PROBEV(test, plain, counter);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	int ms = argc > 2 ? atoi(argv[2]) : 0;
	static const char *labels[] = { "alpha", "beta", "gamma" };

	for (int i = 1; i <= n; i++) {
		struct item it = { 1000L * i, labels[i % 3] };

		round_of(i, &it);
		printf("round %d sema %u\n", i, (unsigned)test_tick_semaphore);
		fflush(stdout);
		if (ms) {
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
