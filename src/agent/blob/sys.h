/* SPDX-License-Identifier: MIT */
/*
 * A system call from the freestanding code that runs in the traced process (the agent,
 * the safety net's handler): no libc there, and nothing here may touch memory but the
 * arguments.
 */
#ifndef UPROBE_AGENT_BLOB_SYS_H
#define UPROBE_AGENT_BLOB_SYS_H

#include <stdint.h>

struct iov {
	void *base;
	uint64_t len;
};

static inline long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#endif
