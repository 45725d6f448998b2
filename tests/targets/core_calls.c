/* SPDX-License-Identifier: MIT */
/*
 * core_calls [N]: prints "i answer(i) other(i)" for i < N, with answer(x) = x + 1 and
 * other(x) = 2x + 3, then "done".  Tests of handlers that change registers (rdi at
 * answer's entry, rax at its ret, rip to return from other() at once) predict the
 * changed output exactly; tests of handlers that (un)register probes count hits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noipa, used)) long answer(long x)
{
	return x + 1;
}

__attribute__((noipa, used)) long other(long x)
{
	return 2 * x + 3;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20;

	alarm(20);
	for (int i = 0; i < n; i++) {
		long a = answer(i);
		long o = other(i);

		printf("%d %ld %ld\n", i, a, o);
	}
	printf("done\n");
	return 0;
}
