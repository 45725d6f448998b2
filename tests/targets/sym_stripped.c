// SPDX-License-Identifier: MIT
/*
 * The program tests/sym.cmake strips: static functions that only a .symtab (or a
 * separate debug file) names, and global ones that -rdynamic also puts in .dynsym.
 * Built a second time with -DSYM_ALT for a debug file that belongs to another build.
 */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static NOINLINE int sym_static_add(int a, int b)
{
	return a + b;
}

static NOINLINE int sym_static_mul(int a, int b)
{
	int r = 0;

	for (int i = 0; i < b; i++)
		r = sym_static_add(r, a);
	return r;
}

static NOINLINE long sym_static_leaf(long x)
{
#ifdef SYM_ALT
	return x * 3 + 1;
#else
	return x ^ 0x5a;
#endif
}

NOINLINE int sym_global_entry(int n)
{
	return sym_static_mul(n, n) + (int)sym_static_leaf(n);
}

NOINLINE int sym_global_twice(int n)
{
	return sym_global_entry(n) + sym_global_entry(n + 1);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;

	printf("%d\n", sym_global_twice(n));
	return 0;
}
