// SPDX-License-Identifier: MIT
/*
 * Target of the kernel backend tests (tests/kernel.cmake): kbackend_target N K
 * calls kb_work(i) for i = 0..N-1, kb_name("kb-<i>") for i = 0..N-1 and getpid() K times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile int kb_sink;

__attribute__((noinline)) int kb_work(int n)
{
	__asm__ volatile("" ::: "memory");
	return 2 * n + 1;
}

__attribute__((noinline)) int kb_name(const char *s)
{
	__asm__ volatile("" ::: "memory");
	return s[0];
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	int k = argc > 2 ? atoi(argv[2]) : 3;
	char buf[32];

	for (int i = 0; i < n; i++)
		kb_sink += kb_work(i);
	for (int i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "kb-%d \"q\"", i);
		kb_sink += kb_name(buf);
	}
	for (int i = 0; i < k; i++)
		kb_sink += (int)getpid();
	return 0;
}
