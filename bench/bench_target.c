// SPDX-License-Identifier: MIT
/*
 * The program the benchmarks probe: `bench_target MODE N` runs one tight loop of N
 * iterations and, when BENCH_OUT names a file, writes the loop's own time (ns) there,
 * so that a tool's start-up and attach are not counted.  Each hot function's first
 * instruction is the one a workload is about:
 *
 *   lea:    hot_lea    lea 1(%rdi),%rax      (kernel: single-stepped out of line)
 *   push:   hot_push   push %rbp             (kernel: emulated; a frame-pointer prologue,
 *                      5 bytes before the ret: room for the fast path's jmp)
 *   nop5:   hot_nop5   nopl 0x0(%rax,%rax,1) (kernel >= 6.18: optimized to a call;
 *                      written as bytes: gas would shorten it to a 4-byte nop)
 *   ret:    hot_ret    push %rbp             (the target of a return probe)
 *   args:   hot_args   push %rbp             (six arguments in di si dx cx r8 r9)
 *   malloc: malloc(size) + free, N times     (libc's malloc, a real allocation loop)
 *   mt:     hot_mt     lea 1(%rdi),%rax      (two threads, N/2 calls each; the loop is
 *                      timed from when both are born, their births written after it)
 *   tiny:   hot_tiny   xor %eax,%eax; ret    (a 3-byte function: the fast path's pad)
 *   pushpun: hot_pushpun push %rbx           (a branch lands after it: a punned jmp)
 *   int3:   hot_int3   int3                  (a bare ptrace stop: the floor)
 *   idle:   sleeps until killed              (registration benchmark; big_fn is there)
 *
 * Nothing here uses stdio or allocates outside the malloc loop: a probe on malloc
 * must see exactly N calls.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

long hot_lea(long);
void hot_push(void);
void hot_nop5(void);
long hot_ret(long);
long hot_args(long, long, long, long, long, long);
long hot_mt(long);
long hot_tiny(void);
long hot_pushpun(long);
void hot_int3(void);
void big_fn(void);

__asm__(".text\n"
	".globl hot_lea\n.type hot_lea,@function\nhot_lea:\n"
	"	lea 1(%rdi),%rax\n	ret\n.size hot_lea,.-hot_lea\n"
	".globl hot_push\n.type hot_push,@function\nhot_push:\n"
	"	push %rbp\n	mov %rsp,%rbp\n	pop %rbp\n	ret\n.size hot_push,.-hot_push\n"
	".globl hot_nop5\n.type hot_nop5,@function\nhot_nop5:\n"
	"	.byte 0x0f,0x1f,0x44,0x00,0x00\n	ret\n.size hot_nop5,.-hot_nop5\n"
	".globl hot_ret\n.type hot_ret,@function\nhot_ret:\n"
	"	push %rbp\n	lea 1(%rdi),%rax\n	pop %rbp\n	ret\n.size hot_ret,.-hot_ret\n"
	".globl hot_args\n.type hot_args,@function\nhot_args:\n"
	"	push %rbp\n	lea (%rdi,%rsi),%rax\n	add %rdx,%rax\n	add %rcx,%rax\n"
	"	add %r8,%rax\n	add %r9,%rax\n	pop %rbp\n	ret\n.size hot_args,.-hot_args\n"
	/* 3 bytes, then padding: the fast path's jmp takes the padding too (pad) */
	".p2align 4\n"
	".globl hot_tiny\n.type hot_tiny,@function\nhot_tiny:\n"
	"	xor %eax,%eax\n	ret\n.size hot_tiny,.-hot_tiny\n"
	"	.byte 0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc,0xcc\n"
	/* a 1-byte push with a branch landing right after it: nothing after it may be
	   covered, so the jmp is punned, its rel32 ending in 5b 48 8d 47 (pun) */
	".p2align 4\n"
	".globl hot_pushpun\n.type hot_pushpun,@function\nhot_pushpun:\n"
	"	push %rbx\n"
	"1:	pop %rbx\n	lea 1(%rdi),%rax\n	test %rdi,%rdi\n	js 2f\n	ret\n"
	"2:	push %rbx\n	jmp 1b\n.size hot_pushpun,.-hot_pushpun\n"
	".globl hot_mt\n.type hot_mt,@function\nhot_mt:\n"
	"	lea 1(%rdi),%rax\n	ret\n.size hot_mt,.-hot_mt\n"
	".globl hot_int3\n.type hot_int3,@function\nhot_int3:\n"
	"	int3\n	ret\n.size hot_int3,.-hot_int3\n"
	/* 40,000 instructions, 13 bytes per group of 4: the registration benchmark's
	   probe sites (bench_core.c knows the layout) */
	".globl big_fn\n.type big_fn,@function\nbig_fn:\n"
	".rept 10000\n"
	"	lea 1(%rdi),%rax\n	add $1,%rax\n	mov %rax,%rdx\n	xor %ecx,%ecx\n"
	".endr\n	ret\n.size big_fn,.-big_fn\n");

static volatile long sink;
static void *volatile psink;
static pthread_barrier_t mt_born; /* the two threads: the loop starts */
static uint64_t mt_t[2][2];	   /* each thread's loop: start, end (ns) */
static uint64_t now_ns(void);

static void *mt_loop(void *arg)
{
	long k = (long)(intptr_t)arg, n = k >> 1, acc = 0;

	pthread_barrier_wait(&mt_born);
	mt_t[k & 1][0] = now_ns();
	for (long i = 0; i < n; i++)
		acc += hot_mt(i);
	mt_t[k & 1][1] = now_ns();
	sink += acc;
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The loop's time, and for mt the threads' births before it (0 else), in ns. */
static void report(uint64_t ns, uint64_t births)
{
	const char *out = getenv("BENCH_OUT");
	char buf[64];
	int fd, len;

	if (!out)
		return;
	len = snprintf(buf, sizeof(buf), "%llu %llu\n", (unsigned long long)ns,
		       (unsigned long long)births);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, (size_t)len) != len)
		_exit(3);
	close(fd);
}

/* stack: hot_stack at the end of a chain, a 10-frame stack (hot_stack, stk5..stk1,
   main, libc's two, _start); C with CFI, frame pointers kept, so that the unwind
   tables and the frame-pointer walk both find the chain */
#define STK __attribute__((noinline, optimize("no-omit-frame-pointer")))
STK long hot_stack(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}
STK static long stk5(long x) { return hot_stack(x) + 1; }
STK static long stk4(long x) { return stk5(x) + 1; }
STK static long stk3(long x) { return stk4(x) + 1; }
STK static long stk2(long x) { return stk3(x) + 1; }
STK static long stk1(long x) { return stk2(x) + 1; }

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "lea";
	long n = argc > 2 ? atol(argv[2]) : 1000, acc = 0;
	uint64_t t0, births = 0;

	if (!strcmp(mode, "idle")) {
		if (argc > 3) /* never taken: keeps big_fn referenced */
			big_fn();
		for (;;)
			pause();
	}
	t0 = now_ns();
	if (!strcmp(mode, "lea")) {
		for (long i = 0; i < n; i++)
			acc += hot_lea(i);
	} else if (!strcmp(mode, "push")) {
		for (long i = 0; i < n; i++)
			hot_push();
	} else if (!strcmp(mode, "nop5")) {
		for (long i = 0; i < n; i++)
			hot_nop5();
	} else if (!strcmp(mode, "ret")) {
		for (long i = 0; i < n; i++)
			acc += hot_ret(i);
	} else if (!strcmp(mode, "args")) {
		for (long i = 0; i < n; i++)
			acc += hot_args(i, 2, 3, 4, 5, 6);
	} else if (!strcmp(mode, "malloc")) {
		for (long i = 0; i < n; i++) {
			char *p = malloc(16 + (size_t)(i & 255) * 8);

			p[0] = (char)i;
			psink = p;
			free(p);
		}
	} else if (!strcmp(mode, "tiny")) {
		for (long i = 0; i < n; i++)
			acc += hot_tiny();
	} else if (!strcmp(mode, "pushpun")) {
		for (long i = 0; i < n; i++)
			acc += hot_pushpun(i);
	} else if (!strcmp(mode, "mt")) {
		pthread_t th[2];

		/* a thread's birth under a tracer is its stops (the clone event, the new
		   thread's first stop) and where the scheduler puts the threads it wakes:
		   not a hit's cost, reported beside it (bench_births_ns) */
		if (pthread_barrier_init(&mt_born, NULL, 2))
			return 2;
		for (long k = 0; k < 2; k++)
			if (pthread_create(&th[k], NULL, mt_loop, (void *)(intptr_t)((n / 2) << 1 | k)))
				return 2;
		for (int k = 0; k < 2; k++)
			pthread_join(th[k], NULL);
		/* from the first thread's start to both joined: their exits are in */
		births = (mt_t[0][0] < mt_t[1][0] ? mt_t[0][0] : mt_t[1][0]) - t0;
		t0 += births;
	} else if (!strcmp(mode, "stack")) {
		for (long i = 0; i < n; i++)
			acc += stk1(i);
	} else if (!strcmp(mode, "int3")) {
		for (long i = 0; i < n; i++)
			hot_int3();
	} else {
		return 2;
	}
	report(now_ns() - t0, births);
	sink += acc;
	return 0;
}
