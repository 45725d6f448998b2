/* SPDX-License-Identifier: MIT */
/*
 * fast_rec MODE N [THREADS]: a target for the fast path's recording probes.
 *   regs     each chk_* function (a different class of first instructions: a 5-byte
 *            mov, push+mov+add, a rip-relative lea, adc/sbb on the caller's CF, a jcc
 *            over a mov, a loop back into its first bytes, rsp arithmetic) called with
 *            every general register and the flags (CF PF AF ZF SF OF DF) set to known
 *            patterns; every register and those flags after the call are printed.  The
 *            output must not change by one byte when the functions are probed.
 *   args     rec_args(i, 2i, ..., 6i) N times in each of THREADS threads
 *   bad      rec_ptr() with good and bad pointers (0, 0x10, the end of the address
 *            space) N times
 *   signals  rec_nop5() in a loop while SIGALRM arrives 50 us after the last, the handler calling
 *            it too; prints how many calls were made
 *   fork     N calls, fork, N more in parent and child
 *   forkin   rec_forker() forks inside itself: both return from it (a return probe's
 *            hijacked return address must not reach the child)
 *   spin     THREADS threads call rec_args() until standard input ends
 *   waves    WAVES (argv[4]) rounds of THREADS threads calling rec_args() N times each,
 *            a round made and joined before the next
 *   born     THREADS threads made at once call rec_args() N times each, together; each
 *            prints the minor page faults it took in its calls (its record ring's pages
 *            are made present before it is born, or faulted in by its records)
 *   sleeper  N calls of rec_sleep(), 100 ms each (a tracer stopped meanwhile must
 *            leave the hijacked return to go home)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

long rec_nop5(long x);
void chk_mov5(void), chk_push(void), chk_lea(void), chk_adc(void), chk_jcc(void),
	chk_loop(void), chk_rsp(void);

long g_data = 0x1111;

__asm__(".text\n"
	".globl rec_nop5\n.type rec_nop5,@function\nrec_nop5:\n"
	"	.byte 0x0f,0x1f,0x44,0x00,0x00\n	lea 1(%rdi),%rax\n	ret\n.size rec_nop5,.-rec_nop5\n"
	".globl chk_mov5\n.type chk_mov5,@function\nchk_mov5:\n"
	"	mov $0x12345678,%eax\n	ret\n.size chk_mov5,.-chk_mov5\n"
	".globl chk_push\n.type chk_push,@function\nchk_push:\n"
	"	push %rbp\n	mov %rsp,%rbp\n	add %rdi,%rax\n	pop %rbp\n	ret\n.size chk_push,.-chk_push\n"
	".globl chk_lea\n.type chk_lea,@function\nchk_lea:\n"
	"	lea g_data(%rip),%rax\n	add (%rax),%rbx\n	ret\n.size chk_lea,.-chk_lea\n"
	".globl chk_adc\n.type chk_adc,@function\nchk_adc:\n"
	"	adc %rcx,%rdx\n	sbb %r8,%r9\n	ret\n.size chk_adc,.-chk_adc\n"
	".globl chk_jcc\n.type chk_jcc,@function\nchk_jcc:\n"
	"	jc 1f\n	mov $1,%eax\n	ret\n1:	mov $2,%ebx\n	ret\n.size chk_jcc,.-chk_jcc\n"
	".globl chk_loop\n.type chk_loop,@function\nchk_loop:\n"
	"	xor %eax,%eax\n1:	inc %eax\n	cmp $3,%eax\n	jl 1b\n	ret\n.size chk_loop,.-chk_loop\n"
	".globl chk_rsp\n.type chk_rsp,@function\nchk_rsp:\n"
	"	mov %rsp,%rax\n	sub %rdi,%rax\n	mov %rax,%r10\n	ret\n.size chk_rsp,.-chk_rsp\n");

/* Registers after a call: rax rbx rcx rdx rsi rdi rbp r8-r15, rsp, flags. */
struct after {
	uint64_t r[16];
	uint64_t flags;
};

static void (*volatile g_fn)(void);
static struct after *volatile g_out;
static volatile uint64_t g_flags_in;

/* Loads patterns, calls g_fn, stores what the registers became (callee-saved kept). */
void call_checked(void);
__asm__(".text\n.globl call_checked\n.type call_checked,@function\ncall_checked:\n"
	"	push %rbx\n	push %rbp\n	push %r12\n	push %r13\n	push %r14\n	push %r15\n"
	"	mov $0x1010101010101010,%rax\n	mov $0x2020202020202020,%rbx\n"
	"	mov $0x3030303030303030,%rcx\n	mov $0x4040404040404040,%rdx\n"
	"	mov $0x5050505050505050,%rsi\n	mov $0x0000000000000006,%rdi\n"
	"	mov $0x7070707070707070,%rbp\n	mov $0x0808080808080808,%r8\n"
	"	mov $0x0909090909090909,%r9\n	mov $0x0a0a0a0a0a0a0a0a,%r10\n"
	"	mov $0x0b0b0b0b0b0b0b0b,%r11\n	mov $0x0c0c0c0c0c0c0c0c,%r12\n"
	"	mov $0x0d0d0d0d0d0d0d0d,%r13\n	mov $0x0e0e0e0e0e0e0e0e,%r14\n"
	"	mov $0x0f0f0f0f0f0f0f0f,%r15\n"
	"	push g_flags_in(%rip)\n	popfq\n"
	"	call *g_fn(%rip)\n"
	"	pushfq\n"
	"	push %rax\n	mov g_out(%rip),%rax\n"
	"	mov %rbx,8(%rax)\n	mov %rcx,16(%rax)\n	mov %rdx,24(%rax)\n"
	"	mov %rsi,32(%rax)\n	mov %rdi,40(%rax)\n	mov %rbp,48(%rax)\n"
	"	mov %r8,56(%rax)\n	mov %r9,64(%rax)\n	mov %r10,72(%rax)\n	mov %r11,80(%rax)\n"
	"	mov %r12,88(%rax)\n	mov %r13,96(%rax)\n	mov %r14,104(%rax)\n	mov %r15,112(%rax)\n"
	"	lea 16(%rsp),%rbx\n	mov %rbx,120(%rax)\n"
	"	pop %rbx\n	mov %rbx,0(%rax)\n"
	"	pop %rbx\n	mov %rbx,128(%rax)\n"
	"	cld\n"
	"	pop %r15\n	pop %r14\n	pop %r13\n	pop %r12\n	pop %rbp\n	pop %rbx\n	ret\n"
	".size call_checked,.-call_checked\n");

__attribute__((noipa)) long rec_args(long a, long b, long c, long d, long e, long f)
{
	return a + b + c + d + e + f;
}

__attribute__((noipa)) long rec_ptr(const long *p, const char *s)
{
	return (long)(uintptr_t)p ^ (long)(uintptr_t)s;
}

__attribute__((noipa)) long rec_forker(long x)
{
	pid_t p = fork();

	if (p == 0)
		return -x;
	return p > 0 ? x : 0;
}

__attribute__((noipa)) long rec_sleep(long x)
{
	usleep(100000);
	return 2 * x;
}

static long n;
static volatile long hcalls; /* written by the handler only */

static void *work(void *arg)
{
	long s = 0;

	(void)arg;
	for (long i = 0; i < n; i++)
		s += rec_args(i, 2 * i, 3 * i, 4 * i, 5 * i, 6 * i);
	return (void *)s;
}

static pthread_barrier_t born_go;

/* work(), from a start shared with the other threads; returns its minor faults */
static void *born(void *arg)
{
	struct rusage r0, r1;

	(void)arg;
	pthread_barrier_wait(&born_go);
	getrusage(RUSAGE_THREAD, &r0);
	work(NULL);
	getrusage(RUSAGE_THREAD, &r1);
	return (void *)(r1.ru_minflt - r0.ru_minflt);
}

static volatile int spin_stop;

static void *spin(void *arg)
{
	long s = 0;

	(void)arg;
	for (long i = 0; !spin_stop; i++)
		s += rec_args(i, 2 * i, 3 * i, 4 * i, 5 * i, 6 * i);
	return (void *)s;
}

/* The timer is one-shot, armed again here: under ptrace every signal is a stop of the
   tracer's (50-100 us on a loaded machine), and a periodic 50 us timer then had the
   next signal pending before the handler returned, so main() never ran again. */
static volatile sig_atomic_t alarm_on;

static void on_alarm(int sig)
{
	struct itimerval it = { { 0, 0 }, { 0, 50 } };

	(void)sig;
	rec_nop5(1);
	hcalls++;
	if (alarm_on)
		setitimer(ITIMER_REAL, &it, NULL);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "regs";
	int nt = argc > 3 ? atoi(argv[3]) : 1;
	pthread_t th[32];

	n = argc > 2 ? atol(argv[2]) : 10;
	alarm(60);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "regs")) {
		static const struct {
			const char *name;
			void (*fn)(void);
		} fns[] = {
			{ "mov5", chk_mov5 }, { "push", chk_push }, { "lea", chk_lea },
			{ "adc", chk_adc },   { "jcc", chk_jcc },   { "loop", chk_loop },
			{ "rsp", chk_rsp },
		};
		static const uint64_t flags[] = { 0x202, 0x2d7, 0xad7, 0x8d6, 0x603 };
		struct after a;

		for (long k = 0; k < n; k++) {
			for (unsigned i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
				for (unsigned j = 0; j < sizeof(flags) / sizeof(flags[0]); j++) {
					memset(&a, 0, sizeof(a));
					g_fn = fns[i].fn;
					g_out = &a;
					g_flags_in = flags[j];
					call_checked();
					if (k)
						continue;
					printf("%-4s flags %03llx:", fns[i].name, (unsigned long long)flags[j]);
					for (int r = 0; r < 16; r++)
						printf(" %llx", (unsigned long long)a.r[r]);
					printf(" flags %03llx\n", (unsigned long long)(a.flags & 0xcd5));
				}
			}
		}
	} else if (!strcmp(mode, "args")) {
		long total = 0;
		void *r;

		for (int i = 0; i < nt && i < 32; i++)
			pthread_create(&th[i], NULL, work, NULL);
		for (int i = 0; i < nt && i < 32; i++) {
			pthread_join(th[i], &r);
			total += (long)r;
		}
		printf("total %ld\n", total);
	} else if (!strcmp(mode, "waves")) {
		int waves = argc > 4 ? atoi(argv[4]) : 1;
		void *r;

		/* WAVES rounds of THREADS threads, each round made and joined before the next:
		   more threads in one process than the tracer keeps names of */
		if (nt < 1 || nt > 32)
			nt = nt < 1 ? 1 : 32;
		for (int w = 0; w < waves; w++) {
			for (int i = 0; i < nt; i++)
				pthread_create(&th[i], NULL, work, NULL);
			for (int i = 0; i < nt; i++)
				pthread_join(th[i], &r);
		}
		printf("waves %d\n", waves);
	} else if (!strcmp(mode, "born")) {
		void *r;

		if (nt < 1 || nt > 32)
			nt = nt < 1 ? 1 : 32;
		pthread_barrier_init(&born_go, NULL, (unsigned)nt);
		for (int i = 0; i < nt; i++)
			pthread_create(&th[i], NULL, born, NULL);
		for (int i = 0; i < nt; i++) {
			pthread_join(th[i], &r);
			printf("thread %d faults %ld\n", i, (long)r);
		}
	} else if (!strcmp(mode, "bad")) {
		static const long good = 42;
		static const char str[] = "a string";
		const long *ptrs[] = { &good, NULL, (const long *)0x10, (const long *)-8l };
		const char *strs[] = { str, NULL, (const char *)0x10, (const char *)-8l };
		long s = 0;

		for (long i = 0; i < n; i++)
			for (int k = 0; k < 4; k++)
				s += rec_ptr(ptrs[k], strs[k]) & 1;
		printf("bad done %ld\n", s);
	} else if (!strcmp(mode, "signals")) {
		struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
		struct itimerval it = { { 0, 0 }, { 0, 50 } };
		long s = 0;

		sigaction(SIGALRM, &sa, NULL);
		alarm_on = 1;
		setitimer(ITIMER_REAL, &it, NULL);
		for (long i = 0; i < n; i++)
			s += rec_nop5(i);
		alarm_on = 0;
		memset(&it, 0, sizeof(it));
		setitimer(ITIMER_REAL, &it, NULL);
		printf("calls %ld\n", n + (long)hcalls);
		(void)s;
	} else if (!strcmp(mode, "spin")) {
		char c;

		for (int i = 0; i < nt && i < 16; i++)
			pthread_create(&th[i], NULL, spin, NULL);
		while (read(0, &c, 1) > 0)
			;
		spin_stop = 1;
		for (int i = 0; i < nt && i < 16; i++)
			pthread_join(th[i], NULL);
		printf("spun\n");
	} else if (!strcmp(mode, "forkin")) {
		long r = rec_forker(5);
		int st;

		if (r < 0) {
			printf("child %ld\n", r);
			_exit(4);
		}
		wait(&st);
		printf("parent %ld child exit %d\n", r, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	} else if (!strcmp(mode, "sleeper")) {
		long s = 0;

		for (long i = 0; i < n; i++)
			s += rec_sleep(i);
		printf("slept %ld\n", s);
	} else if (!strcmp(mode, "fork")) {
		long s = (long)work(NULL);
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			printf("child %ld\n", (long)work(NULL));
			_exit(3);
		}
		s += (long)work(NULL);
		waitpid(pid, &st, 0);
		printf("parent %ld child exit %d\n", s, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	return 0;
}
