// SPDX-License-Identifier: MIT
/*
 * A traced program that attacks its tracer through the fast path's shared region
 * (tests/integration/hostile.py; docs/design.md, "The trust boundary").
 *
 *   hostile MODE N    calls work(i) N times, then attacks (MODE), then calls it N more
 *                     times -- or, where the attack leaves the agent itself nothing it
 *                     can run on, computes the same values without the probe -- and
 *                     prints the sum.  Traced or not, attacked or not, the output and
 *                     the status are the same: the attack is on the tracer only.
 *
 * It finds the region by its /proc/self/maps entry (/memfd:uprobe-agent, the writable
 * mapping: ctl, return tables, descriptors, rings) and writes it like any other memory
 * of its own.  MODEs:
 *
 *   random  every word random, then a thread re-randomizes words for 300 ms (no more
 *           hits: the agent reads the same region)
 *   ones    every word all-ones, then a thread flips words 0 <-> ~0 for 300 ms (no hits)
 *   flip    a thread flips bits of the rings' words and of their heads and tails while
 *           the probe runs on
 *   heads   every ring's head set to 1 << 40 while the probe runs on, then 1 s
 *           idle (a tracer that believes the head polls without rest meanwhile)
 *   slots   a thread rewrites records' slot words, at the tracer's tail and anywhere,
 *           while the probe runs on (the record being read changes under the reader)
 *   forge   records written by hand into the thread's own ring: well-formed ones
 *           (a spoofed event), then ones whose length, id or slot are impossible
 *   desc    the probe's descriptor and aggregation geometry rewritten (register mask,
 *           fetch and condition counts, record size, tables, order, entry and key
 *           words, nvals), a thread toggling them for 300 ms (no more hits)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/abi.h"

#define NOINLINE __attribute__((noinline, noclone))

static const char *const names[] = { "alpha", "beta", "gamma", "delta" };

NOINLINE uint64_t work(uint64_t n, const char *s)
{
	__asm__ volatile("" ::: "memory");
	return n * 7 + (uint64_t)s[0];
}

/* work's value, without the probe */
NOINLINE uint64_t work_quiet(uint64_t n, const char *s)
{
	__asm__ volatile("" ::: "memory");
	return n * 7 + (uint64_t)s[0];
}

static uint64_t *region;
static size_t region_words;
static struct upa_ctl ctl0; /* the ctl as the tracer wrote it, before any attack */
static volatile int stop;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int find_region(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (!strstr(line, "/memfd:uprobe-agent") ||
		    sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[1] != 'w')
			continue;
		region = (uint64_t *)lo;
		region_words = (hi - lo) / 8;
		break;
	}
	fclose(f);
	if (!region)
		return -1;
	memcpy(&ctl0, region, sizeof(ctl0));
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static uint64_t *ring_of(unsigned k)
{
	return (uint64_t *)ctl0.ring[k].base;
}

static size_t ring_bytes(unsigned k)
{
	return (size_t)1 << ctl0.ring[k].order;
}

/* the rings written before the attack */
static int ring_used(unsigned k)
{
	return ctl0.ring[k].head != 0;
}

static void *random_thread(void *arg)
{
	uint64_t s = 88172645463325252ull;

	(void)arg;
	while (!stop)
		for (int i = 0; i < 4096; i++)
			region[rnd(&s) % region_words] = rnd(&s);
	return NULL;
}

static void *ones_thread(void *arg)
{
	uint64_t s = 1234567;

	(void)arg;
	while (!stop)
		for (int i = 0; i < 4096; i++) {
			uint64_t *w = &region[rnd(&s) % region_words];

			*w = *w ? 0 : ~0ull;
		}
	return NULL;
}

/* bits of the written rings' words, and now and then of their heads and tails */
static void *flip_thread(void *arg)
{
	struct upa_ctl *ctl = (struct upa_ctl *)region;
	uint64_t s = 42;

	(void)arg;
	while (!stop) {
		for (unsigned k = 0; k < UPA_RINGS; k++) {
			size_t n = ring_bytes(k) / 8;

			if (!ring_used(k))
				continue;
			for (int i = 0; i < 256; i++)
				ring_of(k)[rnd(&s) % n] ^= 1ull << (rnd(&s) % 64);
			if (rnd(&s) % 64 == 0)
				__atomic_xor_fetch(&ctl->ring[k].head, 1ull << (rnd(&s) % 64),
						   __ATOMIC_RELAXED);
			if (rnd(&s) % 64 == 0)
				ctl->ring[k].tail ^= 1ull << (rnd(&s) % 64);
		}
	}
	return NULL;
}

/* slot words: the one at the tracer's tail (the record it reads next), and anywhere */
static void *slots_thread(void *arg)
{
	static const uint32_t evil[] = { 0xffffffe0u, 0x7fffffe0u, 1u << 20,   8,
					 33,	      0x100000,	   0xfffffff0u };
	struct upa_ctl *ctl = (struct upa_ctl *)region;
	uint64_t s = 7;

	(void)arg;
	while (!stop) {
		for (unsigned k = 0; k < UPA_RINGS; k++) {
			size_t cap = ring_bytes(k);
			uint8_t *ring = (uint8_t *)ring_of(k);
			uint64_t tail = __atomic_load_n(&ctl->ring[k].tail, __ATOMIC_RELAXED);

			if (!ring_used(k))
				continue;
			for (int i = 0; i < 64; i++) {
				uint64_t off = (i & 1) ? (tail + (rnd(&s) % 64) * UPA_REC_ALIGN) :
							 rnd(&s) % cap;
				uint32_t *slot = (uint32_t *)(ring + (off & (cap - 1) & ~31ull));

				__atomic_store_n(slot, evil[rnd(&s) % 7], __ATOMIC_RELAXED);
			}
		}
	}
	return NULL;
}

/* the probe's descriptor: in the heap after the return tables, naming work */
static struct upa_probe *find_desc(void)
{
	uint64_t heap =
		ctl0.rt_own + ((uint64_t)sizeof(struct upa_rt) * UPA_RT_OWNERS << UPA_RT_OWN_ORDER);
	uint64_t *w = (uint64_t *)heap, *end = region + region_words;

	for (size_t i = 0; i + 4 < (1u << 16) && w + i + 4 < end; i++) {
		struct upa_probe *d = (struct upa_probe *)(w + i);

		if (d->ctl == (uint64_t)region && d->vaddr == (uint64_t)work)
			return d;
	}
	return NULL;
}

static struct upa_probe *desc;

static void desc_rewrite(int evil)
{
	static struct upa_probe d0;
	static struct upa_agg g0;
	static int saved;
	struct upa_agg *g = NULL;

	if (!desc)
		return;
	if (!saved) {
		d0 = *desc;
		if (d0.flags & UPA_P_AGG) {
			g = (struct upa_agg *)((uint8_t *)(desc + 1) +
					       d0.nfetch * sizeof(struct upa_fetch) +
					       d0.ncond * sizeof(struct upa_cond));
			g0 = *g;
		}
		saved = 1;
	}
	if (d0.flags & UPA_P_AGG)
		g = (struct upa_agg *)((uint8_t *)(desc + 1) +
				       d0.nfetch * sizeof(struct upa_fetch) +
				       d0.ncond * sizeof(struct upa_cond));
	if (!evil) {
		*desc = d0;
		if (g)
			*g = g0;
		return;
	}
	desc->regs = ~0ull;
	desc->nfetch = 0x7fffffff;
	desc->ncond = 0x7fffffff;
	desc->max_record = 0xffffffe0u;
	desc->id = 0xfffffffeu;
	if (g) {
		g->tables = 0x4141414141414141ull;
		g->ntables = 0xffffffffu;
		g->order = 40;
		g->nvals = 1000;
		g->nkeys = 77;
		g->key_words = 5000;
		g->entry_words = 0;
	}
}

static void *desc_thread(void *arg)
{
	(void)arg;
	for (int i = 0; !stop; i++)
		desc_rewrite(i & 1);
	desc_rewrite(1);
	return NULL;
}

/* Records written by hand into ring k (this thread's own: the agent writes it only on
   this thread, between our writes). */
static void forge(unsigned k)
{
	struct upa_ctl *ctl = (struct upa_ctl *)region;
	struct upa_ring *rg = &ctl->ring[k];
	uint8_t *ring = (uint8_t *)ring_of(k);
	uint64_t cap = ring_bytes(k);
	unsigned nregs = desc ? (unsigned)__builtin_popcountll(desc->regs) : 0;
	uint32_t id = desc ? desc->id : 0;

	for (int i = 0; i < 64; i++) {
		uint64_t h = __atomic_load_n(&rg->head, __ATOMIC_RELAXED), off = h & (cap - 1);
		uint32_t slot = 128;
		struct upa_rec *r = (struct upa_rec *)(ring + off);

		if (off + slot > cap || h + slot - rg->tail > cap)
			return;
		memset(r, 0, slot);
		r->id = id;
		r->len = (uint32_t)(sizeof(*r) + 8 * nregs);
		r->tsc = (uint64_t)i;
		r->thread = 0xdeadbeef;
		switch (i % 8) { /* 4 in 8 well-formed (spoofed), the rest impossible */
		case 1:
			r->len = slot + 64;
			break; /* longer than its slot */
		case 3:
			r->id = 0x12345;
			break; /* no such probe */
		case 5:
			r->len = 8;
			break; /* shorter than its header */
		case 7:
			slot = 64;
			r->len = 0xffffff;
			break; /* way past it */
		}
		__atomic_store_n(&rg->head, h + slot, __ATOMIC_RELEASE);
		__atomic_store_n(&r->slot, slot, __ATOMIC_RELEASE);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "none";
	long n = argc > 2 ? atol(argv[2]) : 20000;
	int keep_calling = 1, idle_ms = 100;
	void *(*racer)(void *) = NULL;
	pthread_t th;
	uint64_t sum = 0;

	for (long i = 0; i < n; i++)
		sum += work((uint64_t)i, names[i & 3]);
	sleep_ms(20); /* the tracer drains what came so far: the attack meets a live ring */

	if (!find_region()) {
		desc = find_desc();
		if (!strcmp(mode, "random")) {
			uint64_t s = 99;

			for (size_t i = 0; i < region_words; i++)
				region[i] = rnd(&s);
			keep_calling = 0;
			racer = random_thread;
		} else if (!strcmp(mode, "ones")) {
			memset(region, 0xff, region_words * 8);
			keep_calling = 0;
			racer = ones_thread;
		} else if (!strcmp(mode, "flip")) {
			racer = flip_thread;
		} else if (!strcmp(mode, "heads")) {
			struct upa_ctl *ctl = (struct upa_ctl *)region;

			for (unsigned k = 0; k < UPA_RINGS; k++)
				__atomic_store_n(&ctl->ring[k].head, 1ull << 40, __ATOMIC_RELEASE);
			idle_ms = 1000;
		} else if (!strcmp(mode, "slots")) {
			racer = slots_thread;
		} else if (!strcmp(mode, "forge")) {
			for (unsigned k = 0; k < UPA_RINGS; k++)
				if (ring_used(k))
					forge(k);
		} else if (!strcmp(mode, "desc")) {
			desc_rewrite(1);
			keep_calling = 0;
			racer = desc_thread;
		}
	}
	(void)rng;
	if (racer && pthread_create(&th, NULL, racer, NULL))
		racer = NULL;
	if (keep_calling) {
		for (long i = n; i < 2 * n; i++)
			sum += work((uint64_t)i, names[i & 3]);
		sleep_ms(idle_ms);
	} else {
		for (long i = n; i < 2 * n; i++)
			sum += work_quiet((uint64_t)i, names[i & 3]);
		sleep_ms(300); /* the tracer's drains (and -i reads) race the racer */
	}
	if (racer) {
		stop = 1;
		pthread_join(th, NULL);
	}
	printf("hostile: %ld calls, sum %llu\n", 2 * n, (unsigned long long)sum);
	return 0;
}
