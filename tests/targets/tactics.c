// SPDX-License-Identifier: MIT
/*
 * Code shapes for the fast path's tactics (src/agent/plan.c), each site a global
 * label the test probes:
 *
 *   tiny3        xor %eax,%eax; ret: a 3-byte function, int3 padding after it (pad)
 *   loop_push    push %rbx at a loop's head, the back-edge landing right after it: no
 *                successor may be covered (pun, 1 byte: the trampoline's address is
 *                the bytes that follow)
 *   loop_xor     xor %ecx,%ecx (2 bytes), a branch landing right after it (pun, a
 *                256-byte window)
 *   table_mov    add $1,%eax (3 bytes), a jump table's case beginning right after it
 *                (pun, a 64 KiB window)
 *   call_ind     call *%rax (2 bytes): a call relocated as a push and a jmp (pun)
 *   call_rel     call tiny3 (5 bytes: jmp, the call relocated)
 *   succ_pair    mov %rdi,%rax; add $3,%rax: nothing branches in (succ)
 *   wide_lea     a 7-byte lea (jmp)
 *   hop_xor      xor %ecx,%ecx (2 bytes), a branch landing right after it on an
 *                add $0,%eax with a 4-byte immediate: the punned rel32 would be
 *                05 00 00, 1.3 KiB on, in the program's own text (int3s filled after
 *                the function), where no page can be mapped; a jmp rel8 to a jmp in the
 *                padding after the function (hop)
 *
 * `tactics N THREADS [quiet]` runs N rounds in each of THREADS threads while a timer's
 * signal handler calls them too (every 200 us; not when quiet), and prints a checksum
 * of what they returned, the handler's rounds apart on stderr (their number varies).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

long tiny3(void);
long loop_push(long n);
long loop_xor(long n);
long table_mov(long k);
long call_ind(long (*f)(void));
long call_rel(void);
long succ_pair(long x);
long wide_lea(long x);
long hop_xor(long n);

__asm__(".text\n"
	".p2align 4\n"
	".globl tiny3\n.type tiny3,@function\ntiny3:\n"
	"	xor %eax,%eax\n	ret\n.size tiny3,.-tiny3\n"
	"	.byte 0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc\n"
	".p2align 4\n"
	/* rax = n, counting down; the back-edge from 4: lands after the push (its own push
	   first, so the stack stays balanced) */
	".globl loop_push\n.type loop_push,@function\nloop_push:\n"
	"	mov %rdi,%rax\n"
	"	.globl loop_push_site\nloop_push_site:\n"
	"1:	push %rbx\n"
	/* pop; lea: the punned rel32 is 5b 48 8d 40, +1 GiB or so */
	"2:	pop %rbx\n	lea -1(%rax),%rax\n	test %rax,%rax\n	jz 3f\n"
	"	test $1,%rax\n	jnz 4f\n	jmp 1b\n"
	"4:	push %rbx\n	jmp 2b\n"
	"3:	ret\n.size loop_push,.-loop_push\n"
	".p2align 4\n"
	".globl loop_xor\n.type loop_xor,@function\nloop_xor:\n"
	"	mov %rdi,%rax\n"
	"	.globl loop_xor_site\nloop_xor_site:\n"
	"	xor %ecx,%ecx\n"
	"1:	lea 1(%rcx),%rcx\n	cmp $3,%rcx\n	jb 1b\n	sub $1,%rax\n	jnz loop_xor_site\n"
	"	ret\n.size loop_xor,.-loop_xor\n"
	".p2align 4\n"
	/* a switch through a table of 4-byte offsets from a rip-relative base: case 0 is
	   the site, case 1 the instruction right after it */
	".globl table_mov\n.type table_mov,@function\ntable_mov:\n"
	"	and $3,%rdi\n"
	"	lea 5f(%rip),%rdx\n"
	"	movslq (%rdx,%rdi,4),%rcx\n"
	"	add %rdx,%rcx\n"
	"	mov %edi,%eax\n"
	"	jmp *%rcx\n"
	"	.globl table_mov_site\ntable_mov_site:\n"
	"	add $1,%eax\n"
	/* push; pop: the punned rel32's high bytes 50 58, +1.4 GiB or so */
	"13:	push %rax\n	pop %rax\n	add $10,%rax\n	ret\n"
	"11:	add $20,%rax\n	ret\n"
	"12:	add $30,%rax\n	ret\n"
	".size table_mov,.-table_mov\n"
	"	.section .rodata\n	.p2align 2\n"
	"5:	.long table_mov_site-5b, 13b-5b, 11b-5b, 12b-5b\n"
	"	.text\n"
	".p2align 4\n"
	".globl call_ind\n.type call_ind,@function\ncall_ind:\n"
	"	push %rbx\n	mov %rdi,%rax\n"
	"	.globl call_ind_site\ncall_ind_site:\n"
	"	call *%rax\n	lea 7(%rax),%rax\n	pop %rbx\n	ret\n.size call_ind,.-call_ind\n"
	".p2align 4\n"
	".globl call_rel\n.type call_rel,@function\ncall_rel:\n"
	"	push %rbx\n"
	"	.globl call_rel_site\ncall_rel_site:\n"
	"	call tiny3\n	add $5,%rax\n	pop %rbx\n	ret\n.size call_rel,.-call_rel\n"
	".p2align 4\n"
	".globl succ_pair\n.type succ_pair,@function\nsucc_pair:\n"
	"	mov %rdi,%rax\n	add $3,%rax\n	ret\n.size succ_pair,.-succ_pair\n"
	".p2align 4\n"
	".globl wide_lea\n.type wide_lea,@function\nwide_lea:\n"
	"	lea 0x12345(%rdi),%rax\n	ret\n.size wide_lea,.-wide_lea\n"
	".p2align 4\n"
	/* returns 3n; the loop's head is the add, right after the site */
	".globl hop_xor\n.type hop_xor,@function\nhop_xor:\n"
	"	mov %rdi,%rax\n"
	"	.globl hop_site\nhop_site:\n"
	"	xor %ecx,%ecx\n"
	"1:	.byte 0x05,0,0,0,0\n" /* add $0,%eax */
	"	lea 1(%rcx),%rcx\n	sub $1,%rax\n	jnz 1b\n"
	"	lea (%rcx,%rcx,2),%rax\n	ret\n.size hop_xor,.-hop_xor\n"
	"	.fill 2048,1,0xcc\n");

static long rounds;
static long handler_runs;

static long one_round(long i)
{
	long s = 0;

	s += tiny3();
	s += loop_push(4 + (i & 3));
	s += loop_xor(2 + (i & 1));
	s += table_mov(i);
	s += call_ind(tiny3);
	s += call_rel();
	s += succ_pair(i);
	s += wide_lea(i);
	s += hop_xor(2 + (i & 1));
	return s;
}

static void on_alarm(int sig)
{
	/* any thread may take it, even while another is in here: a number each */
	long i = __atomic_fetch_add(&handler_runs, 1, __ATOMIC_RELAXED);

	(void)sig;
	one_round(i);
}

static void *worker(void *arg)
{
	long *sum = arg;

	for (long i = 0; i < rounds; i++)
		*sum += one_round(i);
	return NULL;
}

int main(int argc, char **argv)
{
	long nthreads = argc > 2 ? atol(argv[2]) : 1, total = 0;
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	struct sigaction sa;
	pthread_t th[8];
	long sums[8] = { 0 };

	if (argc < 2 || nthreads < 1 || nthreads > 8) {
		fprintf(stderr, "usage: tactics N [THREADS [quiet]]\n");
		return 2;
	}
	if (argc > 3) /* quiet: no timer (a tracer attaching meanwhile gets no signal storm) */
		it = (struct itimerval){ { 0, 0 }, { 0, 0 } };
	rounds = atol(argv[1]);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (long t = 0; t < nthreads; t++)
		pthread_create(&th[t], NULL, worker, &sums[t]);
	for (long t = 0; t < nthreads; t++) {
		pthread_join(th[t], NULL);
		total += sums[t];
	}
	signal(SIGALRM, SIG_IGN);
	printf("rounds %ld threads %ld sum %ld\n", rounds, nthreads, total);
	fprintf(stderr, "handler rounds %ld\n", __atomic_load_n(&handler_runs, __ATOMIC_RELAXED));
	return 0;
}
