// SPDX-License-Identifier: MIT
/*
 * A shared library with a USDT probe (testlib:hello, guarded by a semaphore), and,
 * built with -DUSDT_LIB_MAIN, a program that needs it: USDT probes of a program's
 * libraries are found through the program (tests/probes.cmake).
 */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>

#ifdef USDT_LIB_MAIN
int testlib_hello(int n);

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3, on = 0;

	for (int i = 1; i <= n; i++)
		on += testlib_hello(i);
	printf("probed %d of %d\n", on, n);
	return 0;
}
#else
unsigned short testlib_hello_semaphore __attribute__((section(".probes")))
__attribute__((visibility("hidden")));

int testlib_hello(int n)
{
	if (testlib_hello_semaphore) {
		STAP_PROBE1(testlib, hello, n * 10);
		return 1;
	}
	return 0;
}
#endif
