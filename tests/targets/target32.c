/* SPDX-License-Identifier: MIT */
/*
 * A small 32-bit (-m32) program for the 32-bit decode tests: loops, a switch that
 * compiles to a jump table, direct and indirect calls, absolute (non-rip-relative) data
 * access, string instructions and a little x87/SSE.  It prints a checksum so that a run
 * under a probe can be compared with a run without.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned table[64];
volatile unsigned sink;
double scale = 1.5;

__attribute__((noinline)) unsigned step(unsigned x, int op)
{
	switch (op) {
	case 0:
		return x + 1;
	case 1:
		return x * 3;
	case 2:
		return x ^ 0x5a5a5a5a;
	case 3:
		return x >> 3;
	case 4:
		return x << 5 | x >> 27;
	case 5:
		return ~x;
	case 6:
		return x - 7;
	case 7:
		return x / 5;
	default:
		return x;
	}
}

__attribute__((noinline)) unsigned add(unsigned a, unsigned b)
{
	return a + b;
}

__attribute__((noinline)) unsigned mul(unsigned a, unsigned b)
{
	return a * b;
}

static unsigned (*const ops[])(unsigned, unsigned) = { add, mul };

__attribute__((noinline)) unsigned fill(unsigned seed)
{
	unsigned i, acc = seed;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		acc = step(acc, (int)(i % 9));
		table[i] = acc;
	}
	return acc;
}

__attribute__((noinline)) unsigned sum(void)
{
	unsigned i, s = 0;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		s = ops[i & 1](s, table[i] | 1);
	return s;
}

__attribute__((noinline)) long long wide(long long a, long long b)
{
	return a * b + (a >> 7) - b / 3;
}

int main(int argc, char **argv)
{
	char buf[64];
	unsigned s;
	int rounds = argc > 1 ? atoi(argv[1]) : 3;

	memset(buf, 'x', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = 0;
	s = (unsigned)strlen(buf);
	while (rounds-- > 0) {
		s = fill(s);
		s ^= sum();
		s += (unsigned)wide(s, rounds + 3);
		s += (unsigned)(scale * (s & 0xff));
		sink = s;
	}
	printf("target32 %08x\n", s);
	return 0;
}
