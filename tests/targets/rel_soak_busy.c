/* SPDX-License-Identifier: MIT */
/*
 * rel_soak_busy [NTHREADS] [ITERS]: a busy multithreaded program for the soak
 * (scripts/soak.sh): NTHREADS threads (default 6) run ITERS (default 20000) rounds of
 * assorted code -- calls, recursion, a jump table, loops over memory, string and
 * floating-point work, malloc/free, a system call now and then -- and the process
 * prints a checksum that depends only on NTHREADS and ITERS (alarm(300) as a safety net).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int g_k1 = 2654435, g_k2 = 40503;
volatile int g_racy;

__attribute__((noipa)) unsigned mix(unsigned a, unsigned b)
{
	a ^= b * (unsigned)g_k1;
	a = (a << 13) | (a >> 19);
	return a * 5 + 0xe6546b64u;
}

__attribute__((noipa)) unsigned fib(unsigned n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noipa)) unsigned dispatch(unsigned op, unsigned x)
{
	switch (op % 8) {
	case 0: return x + 1;
	case 1: return x * 3;
	case 2: return x ^ 0xdeadbeefu;
	case 3: return x >> 3 | x << 29;
	case 4: return ~x;
	case 5: return x - 7;
	case 6: return x * x;
	default: return mix(x, op);
	}
}

__attribute__((noipa)) unsigned buf_work(unsigned seed)
{
	unsigned char buf[256], out[256];
	unsigned s = 0;

	for (int i = 0; i < 256; i++)
		buf[i] = (unsigned char)(seed + (unsigned)i * 7);
	memcpy(out, buf, sizeof(buf));
	for (int i = 0; i < 256; i += 4)
		s += out[i] * (unsigned)(i + 1);
	/* within the array: strlen ran past it (no NUL guaranteed) into stack bytes that
	   ASLR varies, and 1 run in 100 printed another checksum, probes or not */
	return s + (unsigned)strnlen((char *)out + (seed & 63), sizeof(out) - (seed & 63));
}

__attribute__((noipa)) unsigned fp_work(unsigned x)
{
	double d = (double)(x & 0xffff) / 7.0;

	for (int i = 0; i < 4; i++)
		d = d * 1.5 + sqrt(d + 1.0);
	return (unsigned)(long long)d;
}

__attribute__((noipa)) unsigned heap_work(unsigned x)
{
	size_t n = 16 + (x & 255);
	unsigned *p = malloc(n * sizeof(*p));
	unsigned s = 0;

	if (!p)
		abort();
	for (size_t i = 0; i < n; i++)
		p[i] = x + (unsigned)i;
	for (size_t i = 0; i < n; i++)
		s += p[i] ^ (unsigned)g_k2;
	free(p);
	return s;
}

struct worker {
	pthread_t th;
	int index, iters;
	unsigned long long sum;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned x = (unsigned)w->index * 0x9e3779b9u;
	unsigned long long sum = 0;

	for (int i = 0; i < w->iters; i++) {
		x = mix(x, (unsigned)i);
		x = dispatch(x >> 5, x);
		if (i % 16 == 0)
			x += fib(12 + (x & 3));
		if (i % 4 == 0)
			x += buf_work(x);
		if (i % 8 == 1)
			x += fp_work(x);
		if (i % 8 == 3)
			x += heap_work(x);
		if (i % 256 == 0)
			x += (unsigned)(getpid() > 0);
		g_racy = (int)x;
		sum += x;
	}
	w->sum = sum;
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 6;
	int iters = argc > 2 ? atoi(argv[2]) : 20000;
	struct worker *w = calloc((size_t)(n > 0 ? n : 1), sizeof(*w));
	unsigned long long total = 0;

	alarm(300); /* a safety net: a run under the soak takes seconds */
	if (!w || n < 1)
		return 1;
	for (int t = 0; t < n; t++) {
		w[t].index = t;
		w[t].iters = iters;
		if (pthread_create(&w[t].th, NULL, worker_main, &w[t]))
			return 1;
	}
	for (int t = 0; t < n; t++) {
		pthread_join(w[t].th, NULL);
		printf("thread %d: %llu\n", t, w[t].sum);
		total = total * 1000003u + w[t].sum;
	}
	printf("threads=%d iters=%d checksum=%llu\n", n, iters, total);
	free(w);
	return 0;
}
