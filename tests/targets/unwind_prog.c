// SPDX-License-Identifier: MIT
/*
 * Stacks to unwind, built -O2 -fomit-frame-pointer (tests/integration/unwind_gdb.py):
 * each round calls leaf() through every shape of frame a walk must go through --
 * plain chains (c1 c2 c3, c1b c3), a 100 KB frame, a call through a pointer,
 * recursion, a tail call (tail jumps to leaf: tail is not on the stack), a call through
 * the PLT into a shared library that calls back, a stack realigned to 64 bytes (its
 * CFA is an expression on rbp), a signal handler (through __restore_rt), and twins
 * (twin_a, twin_b: leaf at the same pc, rsp and rbp from two callers, each twice in a
 * row: the agent's memo of the last stack key walked must see the return addresses
 * differ, and take the second of each).
 *
 *   unwind_prog N     N rounds
 */
#include <signal.h>
#include <stdlib.h>

#define NI __attribute__((noinline))

int lib_call(int (*f)(int), int x);

volatile int sink;

NI int leaf(int x)
{
	sink += x;
	return x * 2;
}

NI int c3(int x)
{
	int r = leaf(x);

	return r + 1;
}

NI int c2(int x)
{
	int r = c3(x);

	return r + 2;
}

NI int c1(int x)
{
	int r = c2(x);

	return r + 3;
}

NI int c1b(int x)
{
	int r = c3(x);

	return r + 4;
}

NI int big(int x)
{
	volatile char buf[100000];
	int r;

	buf[x % 1000] = (char)x;
	r = c3(buf[x % 1000]);
	return r + buf[x % 999];
}

static int (*volatile fptr)(int) = c2;

NI int via_ptr(int x)
{
	int r = fptr(x);

	return r + 5;
}

NI int rec(int n, int x)
{
	int r;

	if (n == 0)
		return leaf(x) + 1;
	r = rec(n - 1, x + 1);
	return (r + 1) / ((x & 3) + 1); /* not an accumulator: the calls stay calls */
}

NI int tail(int x)
{
	sink++;
	return leaf(x + 7);
}

NI int via_tail(int x)
{
	int r = tail(x);

	return r + 6;
}

NI int via_lib(int x)
{
	int r = lib_call(c3, x);

	return r + 7;
}

NI int realign(int x)
{
	volatile int a[16] __attribute__((aligned(64)));
	int r;

	a[x & 15] = x;
	r = c3(a[x & 15]);
	return r + a[3];
}

NI int twin_a(int x)
{
	int r = leaf(x);
	return r + 8;
}

NI int twin_b(int x)
{
	int r = leaf(x);
	return r + 9;
}

static void handler(int sig)
{
	leaf(sig);
	sink++; /* not a tail call: the handler is on the stack */
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;

	signal(SIGUSR1, handler);
	for (int i = 0; i < n; i++) {
		c1(i);
		c1b(i);
		big(i);
		via_ptr(i);
		rec(5, i);
		via_tail(i);
		via_lib(i);
		realign(i);
		raise(SIGUSR1);
		twin_a(i);
		twin_a(i);
		twin_b(i);
		twin_b(i);
	}
	return 0;
}
