/* SPDX-License-Identifier: MIT */
/*
 * core_fast MODE N [THREADS]: functions whose first instruction is 5 bytes or more,
 * so that a counting probe there takes the fast path (a jmp to a trampoline).
 *   count    fast_nop5(), fast_mov() and fast_lea() N times in each of THREADS threads
 *   fork     N calls, fork, N calls in parent and child (the child has no trampolines)
 *   segv     fast_store(NULL) N times, caught by the program's own SIGSEGV handler: it
 *            must see the fault at fast_store with si_addr 0, as without the probe
 *   flags    fast_flags(): a cmp right before, a jcc right after the probed instruction
 *            -- the trampoline must keep the flags
 *   pair     fast_pair() N times: a 4-byte lea, then a 1-byte push, so that a counting
 *            probe at its entry needs a jmp over both (a site of two instructions)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

long fast_nop5(long x);
long fast_mov(long x);
long fast_lea(long x);
void fast_store(int *p);
long fast_flags(long a, long b);
long fast_pair(long x);

__asm__(".text\n"
	".globl fast_nop5\n.type fast_nop5,@function\nfast_nop5:\n"
	"	.byte 0x0f,0x1f,0x44,0x00,0x00\n	lea 1(%rdi),%rax\n	ret\n.size fast_nop5,.-fast_nop5\n"
	".globl fast_mov\n.type fast_mov,@function\nfast_mov:\n"
	"	mov $7,%eax\n	add %rdi,%rax\n	ret\n.size fast_mov,.-fast_mov\n"
	".globl fast_lea\n.type fast_lea,@function\nfast_lea:\n"
	"	lea g_table(%rip),%rax\n	mov (%rax,%rdi,8),%rax\n	ret\n.size fast_lea,.-fast_lea\n"
	".globl fast_store\n.type fast_store,@function\nfast_store:\n"
	"	movl $42,(%rdi)\n	ret\n.size fast_store,.-fast_store\n"
	".globl fast_flags\n.type fast_flags,@function\nfast_flags:\n"
	"	cmp %rsi,%rdi\n	mov $1,%eax\n	jl 1f\n	mov $2,%eax\n1:	ret\n.size fast_flags,.-fast_flags\n"
	".globl fast_pair\n.type fast_pair,@function\nfast_pair:\n"
	"	lea 1(%rdi),%rax\n	push %rbx\n	lea (%rax,%rax,2),%rbx\n	add %rbx,%rax\n"
	"	pop %rbx\n	ret\n.size fast_pair,.-fast_pair\n");

long g_table[16] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3 };
static long n;
static sigjmp_buf env;
static volatile void *fault_addr;
static volatile uintptr_t fault_ip;

static void *work(void *arg)
{
	long s = 0;

	(void)arg;
	for (long i = 0; i < n; i++)
		s += fast_nop5(i) + fast_mov(i) + fast_lea(i & 15) + fast_flags(i & 3, 2);
	return (void *)s;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	fault_addr = si->si_addr;
	fault_ip = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
	siglongjmp(env, 1);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "count";
	int nt = argc > 3 ? atoi(argv[3]) : 1;
	pthread_t th[16];

	n = argc > 2 ? atol(argv[2]) : 1000;
	alarm(30);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "count")) {
		long total = 0;
		void *r;

		for (int i = 0; i < nt && i < 16; i++)
			pthread_create(&th[i], NULL, work, NULL);
		for (int i = 0; i < nt && i < 16; i++) {
			pthread_join(th[i], &r);
			total += (long)r;
		}
		printf("total %ld\n", total);
	} else if (!strcmp(mode, "fork")) {
		long s = (long)work(NULL);
		pid_t pid;
		int st;

		pid = fork();
		if (pid == 0) {
			printf("child %ld\n", (long)work(NULL));
			_exit(3);
		}
		s += (long)work(NULL);
		waitpid(pid, &st, 0);
		printf("parent %ld child exit %d\n", s, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	} else if (!strcmp(mode, "segv")) {
		struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };
		int ok = 0;

		sigaction(SIGSEGV, &sa, NULL);
		for (long i = 0; i < n; i++) {
			if (sigsetjmp(env, 1) == 0)
				fast_store(NULL);
			else if (fault_addr == NULL && fault_ip == (uintptr_t)fast_store)
				ok++;
		}
		printf("segv %d of %ld at fast_store with si_addr 0\n", ok, n);
	} else if (!strcmp(mode, "pair")) {
		long s = 0;

		for (long i = 0; i < n; i++)
			s += fast_pair(i);
		printf("pair %ld\n", s);
	}
	return 0;
}
