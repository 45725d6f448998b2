// SPDX-License-Identifier: MIT
/*
 * The metrics' target (tests/integration/metrics.py): calls the test knows in advance,
 * in rounds it starts, so that a scrape between rounds can be checked exactly.
 *
 *   metrics_prog N    for each line read on stdin: sized(v) N times, v = (i * 37) % 5000,
 *                     and named(s) N times over 3 names ("alpha", "q\"uote", "back\\slash"),
 *                     then "done R\n" (R the round); at EOF "bye\n", status 0
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv)
{
	static const char *const names[] = { "alpha", "q\"uote", "back\\slash" };
	long n = argc > 1 ? atol(argv[1]) : 1000;
	char line[64];
	unsigned round = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		for (long i = 0; i < n; i++) {
			sink += sized((uint64_t)(i * 37) % 5000);
			sink += named(names[i % 3]);
		}
		printf("done %u\n", ++round);
	}
	printf("bye\n");
	return 0;
}
