/* SPDX-License-Identifier: MIT */
/*
 * Target of the trace.event.* tests: work(int, unsigned long, const char *, struct rec *)
 * is called N times (argv[1], default 5) with values that vary per call, and getppid()
 * is called G times (argv[2], default 7).  Every call is also printed on stdout
 * ("call N MASK NAME ID VAL RET RETADDR"), so the test compares the trace with what the
 * program itself saw, not with numbers of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct rec {
	unsigned long id;  /* +0 */
	unsigned int val;  /* +8 */
	unsigned int pad;
};

static const char *const names[] = { "alpha", "bravo", "charlie", "delta", "echo", "foxtrot" };

__attribute__((noinline, noclone, used)) int work(int n, unsigned long mask, const char *name,
						  struct rec *r)
{
	void *ra = __builtin_return_address(0);

	__asm__ volatile("" : : "r"(name), "r"(r) : "memory");
	printf("call %d %lx %s %lx %u %d %p\n", n, mask, name, r->id, r->val, n * 3 + (int)r->val,
	       ra);
	return n * 3 + (int)r->val;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5;
	int g = argc > 2 ? atoi(argv[2]) : 7;
	long sum = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < n; i++) {
		struct rec r = { .id = 0x1000u + (unsigned)i, .val = 1000u + (unsigned)i * 7u };

		sum += work(i - 2, 0xdead0000beef0000ul + (unsigned long)i, names[i % 6], &r);
	}
	for (int i = 0; i < g; i++)
		sum += getppid() > 0;
	printf("done %ld\n", sum);
	return 0;
}
