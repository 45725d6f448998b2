// SPDX-License-Identifier: MIT
/* unwind_prog's shared library: a call into it through the PLT that calls back. */
int lib_call(int (*f)(int), int x);

__attribute__((noinline)) int lib_call(int (*f)(int), int x)
{
	int r = f(x + 1);

	__asm__ volatile("" : "+r"(r)::"memory");
	return r * 3;
}
