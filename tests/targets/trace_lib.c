/* SPDX-License-Identifier: MIT */
/* A small shared object that trace_dlopen loads after it has started (trace.dlopen). */
__attribute__((noinline, used, visibility("default"))) int lib_func(int x)
{
	__asm__ volatile("" : : "r"(x) : "memory");
	return x * 2 + 1;
}
