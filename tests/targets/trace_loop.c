/* SPDX-License-Identifier: MIT */
/*
 * Target of trace.signals and trace.exit: "trace_loop N MS" calls step() N times, one
 * every MS milliseconds, printing "step I" and at the end "sum S", and exits 0.
 * "trace_loop segv" writes a line, then dies of SIGSEGV.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__attribute__((noinline, used)) long step(long i)
{
	__asm__ volatile("" : : "r"(i) : "memory");
	return i * i;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10, ms = argc > 2 ? atol(argv[2]) : 100, sum = 0;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "segv")) {
		volatile int *p = (volatile int *)(unsigned long)(argc - 2);

		printf("about to crash\n");
		step(1);
		return *p;
	}
	for (long i = 0; i < n; i++) {
		sum += step(i);
		printf("step %ld\n", i);
		nanosleep(&ts, NULL);
	}
	printf("sum %ld\n", sum);
	return 0;
}
