/* SPDX-License-Identifier: MIT */
/*
 * core_insns [N]: a handful of noinline functions whose code holds the instruction
 * kinds a probe must execute faithfully -- rip-relative loads and stores, direct and
 * indirect calls, jmp, jcc, loop/jrcxz, a jump table, push/pop, rep stos/movs, a
 * lock-prefixed atomic, SSE -- called N times (default 1000).  It prints what they
 * computed, so a run under probes can be compared byte for byte with a run without.
 * Built for x86-64 and, as core_insns32, for i386.
 *
 * never_called_int3() and never_called_ud2() are never called: the error tests probe
 * them (an int3 that is not the tracer's, an instruction that cannot be probed).
 */
#include <emmintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa, used))

int g_in[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
long g_out[16];
long g_total;
unsigned g_atomic;
unsigned char g_buf[256];
unsigned char g_buf2[256];
double g_dvec[8] = {0.5, 1.25, 2.0, 3.5, 4.75, 5.0, 6.125, 7.0};

NOIPA long leaf_add(long a, long b)
{
	return a + 3 * b;
}

NOIPA long leaf_mul(long a, long b)
{
	return a * b + 1;
}

long (*volatile g_fp)(long, long) = leaf_mul;

/* rip-relative (absolute on i386) loads and stores of globals */
NOIPA long f_riprel(int i)
{
	int k = i & 15;
	long v = g_in[k] * 7 + g_in[(k + 5) & 15];

	g_out[k] = v;
	g_total += v;
	return g_total ^ g_out[(k + 1) & 15];
}

/* direct calls, a call through a function pointer, a tail jump */
NOIPA long f_calls(int i)
{
	long a = leaf_add(i, 2);
	long b = g_fp(a, i & 7);

	return leaf_add(b, a);
}

/* jcc, jmp, a counted loop */
NOIPA long f_branches(int i)
{
	long acc = 0;

	for (int j = 0; j < (i & 7) + 1; j++) {
		if ((i + j) % 3 == 0)
			acc += j * 5;
		else if ((i ^ j) & 1)
			acc -= j;
		else
			acc ^= (long)j << 4;
	}
	return acc;
}

/* loop and jrcxz (jecxz on i386), which the compiler never emits by itself */
NOIPA long f_loopinsn(int i)
{
	unsigned long cnt = (unsigned long)(i & 3); /* 0 exercises the jrcxz skip */
	long acc = i;

	__asm__ volatile(
#ifdef __x86_64__
		"jrcxz 2f\n\t"
#else
		"jecxz 2f\n\t"
#endif
		"1:\n\t"
		"add $3, %0\n\t"
		"loop 1b\n\t"
		"2:\n\t"
		: "+r"(acc), "+c"(cnt)
		:
		: "cc");
	return acc;
}

/* a dense switch: an indirect jmp through a table */
NOIPA long f_switch(int i)
{
	switch (i % 11) {
	case 0:
		return i + 17;
	case 1:
		return i * 3;
	case 2:
		return i ^ 0x5a5a;
	case 3:
		return i >> 2;
	case 4:
		return (long)i << 3;
	case 5:
		return ~i;
	case 6:
		return i - 77;
	case 7:
		return i / 5;
	case 8:
		return i % 7;
	case 9:
		return -i;
	default:
		return 1;
	}
}

/* enough live values across calls to need the callee-saved registers: push/pop */
NOIPA long f_pushpop(int i)
{
	long a = leaf_add(i, 1);
	long b = leaf_add(a, 2);
	long c = leaf_mul(b, 3);
	long d = leaf_add(c, a);
	long e = leaf_mul(d, b);
	long f = leaf_add(e, c);

	return a + b * 2 + c * 3 + d * 5 + e * 7 + f * 11;
}

/* rep stosb and rep movsb */
NOIPA long f_string(int i)
{
	size_t n = (size_t)(i & 63) + 1;
	void *dst = g_buf;
	const void *src = g_buf;
	size_t cnt = n;

	__asm__ volatile("rep stosb" : "+D"(dst), "+c"(cnt) : "a"(i & 0xff) : "memory");
	dst = g_buf2;
	cnt = n;
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(cnt) : : "memory");
	return g_buf2[n - 1] + (long)n * 256;
}

/* lock xadd, lock add, lock cmpxchg */
NOIPA long f_atomic(int i)
{
	unsigned old = __atomic_fetch_add(&g_atomic, (unsigned)i, __ATOMIC_SEQ_CST);
	unsigned expect = old + (unsigned)i;

	__atomic_add_fetch(&g_atomic, 1u, __ATOMIC_RELAXED);
	expect += 1;
	__atomic_compare_exchange_n(&g_atomic, &expect, expect ^ 0x10u, 0, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
	return (long)(old & 0xffff);
}

/* SSE2: packed doubles and a scalar conversion */
NOIPA double f_sse(int i)
{
	__m128d acc = _mm_set1_pd((double)(i & 15));
	for (int j = 0; j < 8; j += 2) {
		__m128d v = _mm_loadu_pd(&g_dvec[j]);
		acc = _mm_add_pd(_mm_mul_pd(acc, _mm_set1_pd(0.5)), v);
	}
	double out[2];
	_mm_storeu_pd(out, acc);
	return out[0] * 3.0 + out[1] + (double)(i % 5) / 4.0;
}

NOIPA void never_called_int3(void)
{
	__asm__ volatile("nop\n\tint3\n\tnop");
}

NOIPA void never_called_ud2(void)
{
	__asm__ volatile("nop\n\tud2\n\tnop");
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	long r[8] = {0};
	double s = 0;

	alarm(60);
	for (int i = 0; i < n; i++) {
		r[0] += f_riprel(i);
		r[1] ^= f_calls(i) + i;
		r[2] += f_branches(i);
		r[3] += f_loopinsn(i);
		r[4] += f_switch(i);
		r[5] += f_pushpop(i) & 0xffffff;
		r[6] += f_string(i);
		r[7] += f_atomic(i);
		s += f_sse(i);
	}
	printf("n=%d\n", n);
	for (int k = 0; k < 8; k++)
		printf("r[%d]=%ld\n", k, r[k]);
	printf("sse=%.6f\natomic=%u\ntotal=%ld\n", s, g_atomic, g_total);
	return (int)(r[4] & 0x3f);
}
