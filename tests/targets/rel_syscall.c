/* SPDX-License-Identifier: MIT */
/*
 * rel_syscall [NTHREADS]: NTHREADS threads (default 3) and the leader loop forever on
 * do_getppid(), whose `syscall` instruction (the global label rel_syscall_insn) the
 * reliability tests probe -- a probe that is single-stepped -- while they SIGKILL the
 * process at random moments.  It never ends by itself (alarm(60) as a safety net).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

volatile unsigned long g_calls;

__attribute__((noipa, used)) long do_getppid(void)
{
	long ret;

	__asm__ volatile(".globl rel_syscall_insn\n"
			 "rel_syscall_insn:\n\t"
			 "syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_getppid)
			 : "rcx", "r11", "memory");
	return ret;
}

static void *loop(void *arg)
{
	long ppid = (long)getppid();

	(void)arg;
	for (;;) {
		if (do_getppid() != ppid)
			abort();
		g_calls++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	pthread_t th;

	alarm(60);
	for (int i = 0; i < n; i++)
		if (pthread_create(&th, NULL, loop, NULL)) {
			perror("pthread_create");
			return 1;
		}
	loop(NULL);
	return 0;
}
