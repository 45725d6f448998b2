/* SPDX-License-Identifier: MIT */
/*
 * The sample program of the uprobes RFC's ftrace plugin documentation (seed 008), kept
 * as the seed has it: probe foo() and dump its five arguments, the top of the stack and
 * the two globals.  foo() is kept out of line and in the symbol table (noinline, used),
 * and the file is built -O0 -fno-pie -no-pie so that its addresses are static, as they
 * were in 2010.
 */
#include <stdio.h>
#include <stdlib.h>

char *global_str_p = "Global String pointer";
char global_str[] = "Global String";

__attribute__((noinline, used))
int foo(int a, unsigned int b, unsigned long c, long d, char e)
{
	return 0;
}

int main()
{
	char str[] = "This string is on the stack in main";
	int a = 4;
	unsigned int b = 200;
	unsigned long c = 0xff0000ed;
	long d = -1;
	char e = 'H';

	while (getchar() != EOF)
		foo(a, b,c,d,e );

	return 0;
}
