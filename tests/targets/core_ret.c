/* SPDX-License-Identifier: MIT */
/*
 * core_ret MODE [N]: functions for return probes.
 *   calls     answer(i) = i + 1 for i < N, printed
 *   recurse   depth(N) recurses N deep and returns N*(N+1)/2
 *   longjmp   jumper(i) calls deep_jump(5), which longjmps out from 5 frames down,
 *             N times: every frame below jumper is gone without returning
 *   tail      tail_outer(i) tail-calls tail_inner(i) (a jmp at -O2): one return for two
 *             probed entries
 *   wait      blocks in waiter(), reading a byte from stdin, then returns 7: a test
 *             detaches while the return is hijacked
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa, used))

NOIPA long answer(long x)
{
	return x + 1;
}

NOIPA long depth(long n)
{
	long r;

	if (n <= 0)
		return 0;
	r = depth(n - 1);
	__asm__ volatile("" : "+r"(r)); /* a real call per level, not a loop */
	return n + r;
}

static jmp_buf env;

/* gcc cannot see that longjmp ends it */
#pragma GCC diagnostic ignored "-Winfinite-recursion"

NOIPA void deep_jump(int n)
{
	volatile int guard = n;

	if (n <= 0)
		longjmp(env, 1);
	deep_jump(n - 1);
	(void)guard; /* not a tail call */
}

NOIPA int jumper(int i)
{
	if (setjmp(env))
		return i;
	deep_jump(5);
	return -1;
}

NOIPA long tail_inner(long x)
{
	return x * 3;
}

NOIPA long tail_outer(long x)
{
	return tail_inner(x + 1); /* -O2: jmp tail_inner */
}

NOIPA int waiter(void)
{
	char c;

	if (read(0, &c, 1) != 1)
		return -1;
	return 7;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "calls";
	long n = argc > 2 ? atol(argv[2]) : 10, sum = 0;

	alarm(20);
	if (!strcmp(mode, "calls")) {
		for (long i = 0; i < n; i++)
			printf("answer(%ld) = %ld\n", i, answer(i));
	} else if (!strcmp(mode, "recurse")) {
		printf("depth(%ld) = %ld\n", n, depth(n));
	} else if (!strcmp(mode, "longjmp")) {
		for (int i = 0; i < n; i++)
			sum += jumper(i);
		printf("jumper sum %ld\n", sum);
		printf("answer(41) = %ld\n", answer(41));
	} else if (!strcmp(mode, "tail")) {
		for (long i = 0; i < n; i++)
			sum += tail_outer(i);
		printf("tail sum %ld\n", sum);
	} else if (!strcmp(mode, "wait")) {
		printf("waiter %d\n", waiter());
	}
	return 0;
}
