// SPDX-License-Identifier: MIT
/*
 * The fast path's agent run natively, in this process: the blob the library embeds,
 * copied into executable memory and called as a trampoline calls it, on a ring and a
 * descriptor set up here.  Checks the record layout, fault-safe reads (a bad pointer,
 * a string running into an unmapped page), conditions, a full ring, the pad at the
 * ring's end, up_agent_rec_read's view of the memory entries, and the cpu taken from
 * glibc's rseq area or, without one, from lsl; and aggregation: keys (numbers with
 * log2 and buckets, strings, stacks, durations), sums and extremes, a full table, and
 * two threads hitting one table with no hit lost or counted twice; a return probe's
 * entry and lean return as the lahf trampolines call them.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/abi.h"
#include "agent/agg.h"
#include "agent/ring.h"

extern const uint8_t up_agent_blob[];
extern const size_t up_agent_blob_size;

#define RING_ORDER 12 /* 4 KiB: wraps soon */

static uint8_t *code, *mem;
static struct upa_ctl *ctl;
static uint8_t *ring;
static void (*entry)(uint64_t *frame, struct upa_probe *d);

struct probe {
	struct upa_probe d;
	struct upa_fetch f[4];
	struct upa_cond c[2];
};

static int setup(void **state)
{
	(void)state;
	code = mmap(NULL, UPA_CODE_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	mem = mmap(NULL, 4096 + (1u << RING_ORDER), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED || mem == MAP_FAILED || up_agent_blob_size > UPA_CODE_SIZE)
		return -1;
	memcpy(code, up_agent_blob, up_agent_blob_size);
	ctl = (struct upa_ctl *)mem;
	ring = mem + 4096;
	memcpy(code, &ctl, 8); /* the blob's first word */
	ctl->magic = UPA_MAGIC;
	ctl->pid = getpid();
	ctl->ring[0].order = RING_ORDER;
	ctl->ring[0].base = (uint64_t)(uintptr_t)ring;
	ctl->flags = UPA_F_FS0;
	entry = (void (*)(uint64_t *, struct upa_probe *))(void *)(code + UPA_ENTRY_OFF);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	munmap(code, UPA_CODE_SIZE);
	munmap(mem, 4096 + (1u << RING_ORDER));
	return 0;
}

static void reset(void)
{
	memset(ring, 0, 1u << RING_ORDER);
	ctl->ring[0].head = ctl->ring[0].tail = ctl->ring[0].lost = 0;
}

static void probe_init(struct probe *p, uint64_t regs, unsigned nfetch, unsigned ncond)
{
	memset(p, 0, sizeof(*p));
	p->d.ctl = (uint64_t)(uintptr_t)ctl;
	p->d.id = 7;
	p->d.flags = UPA_P_ENABLED;
	p->d.vaddr = 0x401000;
	p->d.regs = regs;
	p->d.nfetch = nfetch;
	p->d.ncond = ncond; /* conditions follow the fetches: conds_of() */
}

/* fetches and conditions must follow the descriptor without a gap */
static struct upa_cond *conds_of(struct probe *p)
{
	return (struct upa_cond *)(p->f + p->d.nfetch);
}

static void finish(struct probe *p)
{
	p->d.max_record = up_agent_record_size(p->d.regs, p->f, p->d.nfetch);
}

/* The record at the tail, as the tracer's drain sees it (then consumed). */
static struct upa_rec *next_record(struct up_agent_rec *v)
{
	uint64_t cap = 1u << RING_ORDER;

	for (;;) {
		struct upa_rec *r = (struct upa_rec *)(ring + (ctl->ring[0].tail & (cap - 1)));

		if (!r->slot)
			return NULL;
		if (r->id == UPA_REC_PAD) {
			uint32_t slot = r->slot;

			memset(r, 0, slot);
			ctl->ring[0].tail += slot;
			continue;
		}
		v->id = r->id;
		v->regs = (const uint64_t *)(r + 1);
		return r;
	}
}

static void consume(struct upa_rec *r)
{
	uint32_t slot = r->slot;

	memset(r, 0, slot);
	ctl->ring[0].tail += slot;
}

static void mem_view(struct upa_rec *r, unsigned nregs, struct up_agent_rec *v)
{
	size_t head = sizeof(*r) + 8u * nregs;

	v->nregs = nregs;
	v->mem = (const uint8_t *)r + head;
	v->memlen = r->len - head;
}

static void test_registers(void **state)
{
	uint64_t frame[UPA_NREGS] = { 0 };
	struct up_agent_rec v;
	struct upa_rec *r;
	struct probe p;

	(void)state;
	reset();
	for (unsigned i = 0; i < UPA_NREGS; i++)
		frame[i] = 0x1000 + i;
	probe_init(&p, 1ull << UPA_RDI | 1ull << UPA_RSI | 1ull << UPA_RIP | 1ull << UPA_RSP, 0, 0);
	finish(&p);
	entry(frame, &p.d);
	r = next_record(&v);
	assert_non_null(r);
	assert_int_equal(r->id, 7);
	assert_int_equal(r->slot % 32, 0);
	assert_int_equal(r->len, sizeof(*r) + 4 * 8);
	/* in frame order: rsi (13), rdi (14), rip (16), rsp (19) */
	assert_int_equal(v.regs[0], 0x1000 + UPA_RSI);
	assert_int_equal(v.regs[1], 0x1000 + UPA_RDI);
	assert_int_equal(v.regs[2], 0x401000); /* rip: the probed address */
	assert_int_equal(v.regs[3], 0x1000 + UPA_RSP);
	assert_true(r->tsc != 0);
	consume(r);
	assert_null(next_record(&v));
}

static void test_memory_and_faults(void **state)
{
	static const uint64_t target = 0x1122334455667788ull;
	static const uint64_t *ptr = &target;
	uint64_t frame[UPA_NREGS] = { 0 }, got = 0;
	struct up_agent_rec v;
	struct upa_rec *r;
	struct probe p;

	(void)state;
	reset();
	frame[UPA_RDI] = (uint64_t)(uintptr_t)&ptr;
	frame[UPA_RSI] = 0x10; /* a bad pointer */
	probe_init(&p, 0, 2, 0);
	/* +0(+0(%di)):u64 */
	p.f[0].base = UPA_BASE_REG, p.f[0].reg = UPA_RDI, p.f[0].reg_size = 8, p.f[0].size = 8;
	p.f[0].nsteps = 2;
	p.f[0].step[0].len = 8, p.f[0].step[1].len = 8;
	/* +8(%si):u32 */
	p.f[1].base = UPA_BASE_REG, p.f[1].reg = UPA_RSI, p.f[1].reg_size = 8, p.f[1].size = 4;
	p.f[1].nsteps = 1, p.f[1].step[0].off = 8, p.f[1].step[0].len = 4;
	finish(&p);
	entry(frame, &p.d);
	r = next_record(&v);
	assert_non_null(r);
	mem_view(r, 0, &v);
	assert_int_equal(up_agent_rec_read(&v, (uint64_t)(uintptr_t)&ptr, &got, 8), 0);
	assert_int_equal(got, (uint64_t)(uintptr_t)&target);
	assert_int_equal(up_agent_rec_read(&v, (uint64_t)(uintptr_t)&target, &got, 8), 0);
	assert_int_equal(got, target);
	assert_int_equal(up_agent_rec_read(&v, 0x18, &got, 4), -EFAULT);
	/* never read: not in the record either */
	assert_int_equal(up_agent_rec_read(&v, (uint64_t)(uintptr_t)&frame, &got, 8), -EFAULT);
	consume(r);
}

static void test_string_into_unmapped(void **state)
{
	uint8_t *two = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t frame[UPA_NREGS] = { 0 };
	char buf[64];
	struct up_agent_rec v;
	struct upa_rec *r;
	struct probe p;

	(void)state;
	assert_true(two != MAP_FAILED);
	munmap(two + 4096, 4096);
	memset(two + 4096 - 10, 'x', 10); /* no NUL before the hole */
	strcpy((char *)two, "short");
	reset();
	frame[UPA_RDI] = (uint64_t)(uintptr_t)(two + 4096 - 10);
	frame[UPA_RSI] = (uint64_t)(uintptr_t)two;
	probe_init(&p, 0, 2, 0);
	for (int i = 0; i < 2; i++) {
		p.f[i].base = UPA_BASE_REG, p.f[i].reg = i ? UPA_RSI : UPA_RDI;
		p.f[i].reg_size = 8, p.f[i].size = 8;
		p.f[i].final = UPA_FINAL_STRING, p.f[i].final_len = 100; /* fits the small ring */
	}
	finish(&p);
	entry(frame, &p.d);
	r = next_record(&v);
	assert_non_null(r);
	mem_view(r, 0, &v);
	/* the first chunk was read, the next page faults */
	assert_int_equal(up_agent_rec_read(&v, frame[UPA_RDI], buf, 10), 0);
	assert_memory_equal(buf, "xxxxxxxxxx", 10);
	assert_int_equal(up_agent_rec_read(&v, frame[UPA_RDI] + 10, buf, 1), -EFAULT);
	/* a whole chunk asked for a short string: its bytes, then zeroes */
	memset(buf, 0x55, sizeof(buf));
	assert_int_equal(up_agent_rec_read(&v, frame[UPA_RSI], buf, sizeof(buf)), 0);
	assert_string_equal(buf, "short");
	assert_int_equal(buf[20], 0);
	consume(r);
	munmap(two, 4096);
}

static void test_conditions(void **state)
{
	uint64_t frame[UPA_NREGS] = { 0 };
	struct up_agent_rec v;
	struct upa_rec *r;
	struct upa_cond *c;
	struct probe p;
	unsigned made = 0;

	(void)state;
	reset();
	probe_init(&p, 1ull << UPA_RDI, 1, 1);
	/* %di:s32 > -5 */
	p.f[0].base = UPA_BASE_REG, p.f[0].reg = UPA_RDI, p.f[0].reg_size = 4;
	p.f[0].size = 4, p.f[0].is_signed = 1;
	c = conds_of(&p);
	c->fetch = 0, c->op = UPA_GT, c->value = -5;
	finish(&p);
	for (int64_t x = -10; x < 10; x++) {
		frame[UPA_RDI] = (uint64_t)x & 0xffffffffu; /* 32-bit: sign from bit 31 */
		entry(frame, &p.d);
		while ((r = next_record(&v))) {
			assert_true((int32_t)v.regs[0] > -5);
			made++;
			consume(r);
		}
	}
	assert_int_equal(made, 14);
	assert_int_equal(p.d.filtered, 6);
	/* & tests bits */
	c->op = UPA_AND, c->value = 0x4;
	p.d.filtered = 0;
	made = 0;
	for (uint64_t x = 0; x < 16; x++) {
		frame[UPA_RDI] = x;
		entry(frame, &p.d);
		while ((r = next_record(&v)))
			made++, consume(r);
	}
	assert_int_equal(made, 8);
	assert_int_equal(p.d.filtered, 8);
}

static void test_full_ring_and_pad(void **state)
{
	uint64_t frame[UPA_NREGS] = { 0 };
	struct up_agent_rec v;
	struct upa_rec *r;
	struct probe p;
	unsigned fit;

	(void)state;
	reset();
	probe_init(&p, 1ull << UPA_RDI | 1ull << UPA_RSI | 1ull << UPA_RDX, 0, 0); /* 64 B */
	finish(&p);
	fit = (1u << RING_ORDER) / p.d.max_record;
	for (unsigned i = 0; i < fit + 5; i++) {
		frame[UPA_RDI] = i;
		entry(frame, &p.d);
	}
	assert_int_equal(ctl->ring[0].lost, 5); /* full: dropped and counted, never waited for */
	assert_int_equal(p.d.lost, 5);
	/* the rest in order */
	for (unsigned i = 0; i < fit; i++) {
		r = next_record(&v);
		assert_non_null(r);
		assert_int_equal(v.regs[2], i); /* rdx, rsi, rdi: frame order */
		consume(r);
	}
	assert_null(next_record(&v));
	/* records of a size that does not divide the ring (8 registers: 96 bytes): each
	   wrap leaves a pad */
	reset();
	probe_init(&p, 1ull << UPA_RDI | 1ull << UPA_RSI | 1ull << UPA_RDX | 1ull << UPA_RCX |
			       1ull << UPA_R8 | 1ull << UPA_R9 | 1ull << UPA_R10 | 1ull << UPA_R11,
		   0, 0);
	finish(&p);
	assert_int_equal(p.d.max_record, 96);
	for (unsigned i = 0; i < 100; i++) {
		frame[UPA_RDI] = 1000 + i;
		entry(frame, &p.d);
		r = next_record(&v);
		assert_non_null(r);
		assert_int_equal(v.regs[7], 1000 + i); /* r11 r10 r9 r8 rcx rdx rsi rdi */
		consume(r);
	}
	assert_int_equal(ctl->ring[0].lost, 0);
	assert_true(ctl->ring[0].head > 100 * 96); /* pads were written, and skipped */
	assert_int_equal(ctl->ring[0].tail, ctl->ring[0].head);
	/* a record that reserved more than it wrote (a string's maximum) gives the rest
	   back: 64-byte records of a 512-byte reservation fill the ring 64 at a time */
	reset();
	probe_init(&p, 1ull << UPA_RDI | 1ull << UPA_RSI | 1ull << UPA_RDX, 0, 0);
	finish(&p);
	p.d.max_record = 512;
	for (unsigned i = 0; i < 20; i++) {
		frame[UPA_RDI] = i;
		entry(frame, &p.d);
	}
	assert_int_equal(ctl->ring[0].lost, 0);
	assert_int_equal(ctl->ring[0].head, 20 * 64);
	for (unsigned i = 0; i < 20; i++) {
		r = next_record(&v);
		assert_non_null(r);
		assert_int_equal(r->slot, 64);
		assert_int_equal(v.regs[2], i);
		consume(r);
	}
}

/* ---- two writers, one of them the reader, at once ---- */

#define TW_N 300000

static struct probe tw_probe;
static volatile int tw_go;

/* Has the ring room for two records: this writer's and the other's? */
static bool tw_room(void)
{
	uint64_t cap = 1u << RING_ORDER;

	return __atomic_load_n(&ctl->ring[0].head, __ATOMIC_ACQUIRE) -
		       __atomic_load_n(&ctl->ring[0].tail, __ATOMIC_ACQUIRE) <=
	       cap - 2 * tw_probe.d.max_record;
}

static void tw_write(uint64_t *frame, uint64_t i)
{
	frame[UPA_RDI] = i;
	entry(frame, &tw_probe.d);
}

static void *tw_writer(void *arg)
{
	uint64_t frame[UPA_NREGS] = { 0 };

	(void)arg;
	frame[UPA_RSI] = 1;
	while (!tw_go)
		;
	for (uint64_t i = 0; i < TW_N;)
		if (tw_room())
			tw_write(frame, i++);
	return NULL;
}

/* Reads every complete record at the tail, as the tracer does; checks each writer's
   come in order.  How many it read. */
static uint64_t tw_read(uint64_t *next)
{
	uint64_t cap = 1u << RING_ORDER, n = 0;

	for (;;) {
		uint64_t tail = ctl->ring[0].tail;
		struct upa_rec *r = (struct upa_rec *)(ring + (tail & (cap - 1)));
		uint32_t slot = __atomic_load_n(&r->slot, __ATOMIC_ACQUIRE);

		if (!slot)
			return n;
		if (r->id != UPA_REC_PAD) {
			const uint64_t *regs = (const uint64_t *)(r + 1); /* rsi, rdi */

			assert_true(regs[0] < 2);
			assert_int_equal(regs[1], next[regs[0]]);
			next[regs[0]]++;
			n++;
		}
		memset(r, 0, slot);
		__atomic_store_n(&ctl->ring[0].tail, tail + slot, __ATOMIC_RELEASE);
	}
}

/*
 * Two threads write records into one small ring, one of them also reading them as
 * the tracer does, right behind: no record may be lost while the ring has room (each
 * writes only when there is room for both), and each writer's arrive in order.  (A
 * writer holding a head read before the other wrote, the reader then past it, once
 * took the ring for full.)
 */
static void test_two_writers(void **state)
{
	uint64_t frame[UPA_NREGS] = { 0 }, next[2] = { 0, 0 }, got = 0;
	cpu_set_t all;
	pthread_t th;

	(void)state;
	/* every cpu again (test_cpu kept this thread on one) */
	CPU_ZERO(&all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &all);
	sched_setaffinity(0, sizeof(all), &all);
	reset();
	probe_init(&tw_probe, 1ull << UPA_RDI | 1ull << UPA_RSI, 0, 0);
	finish(&tw_probe);
	tw_go = 0;
	assert_int_equal(pthread_create(&th, NULL, tw_writer, NULL), 0);
	tw_go = 1;
	for (uint64_t i = 0; i < TW_N || next[1] < TW_N;) {
		if (i < TW_N && tw_room())
			tw_write(frame, i++);
		got += tw_read(next);
		assert_int_equal(ctl->ring[0].lost, 0);
	}
	pthread_join(th, NULL);
	got += tw_read(next);
	print_message("two writers: %" PRIu64 " records, %" PRIu64 " lost\n", got,
		      (uint64_t)ctl->ring[0].lost);
	assert_int_equal(ctl->ring[0].lost, 0);
	assert_int_equal(got, 2 * TW_N);
}

/* The cpu of one record made now (UPA_REC_* bits off). */
static unsigned record_cpu(void)
{
	uint64_t frame[UPA_NREGS] = { 0 };
	struct up_agent_rec v;
	struct upa_rec *r;
	struct probe p;
	unsigned cpu;

	reset();
	probe_init(&p, 1ull << UPA_RDI, 0, 0);
	finish(&p);
	entry(frame, &p.d);
	r = next_record(&v);
	assert_non_null(r);
	cpu = r->cpu & 0xfff;
	consume(r);
	return cpu;
}

static __thread int32_t fake_area[2]; /* cpu_id_start, cpu_id: struct rseq's start */

static void test_cpu(void **state)
{
	static int64_t fake_offset;
	static uint32_t fake_size;
	uint64_t tp;
	cpu_set_t one;
	int cpu;

	(void)state;
	/* on one cpu, so that the answer is known */
	cpu = sched_getcpu();
	assert_true(cpu >= 0);
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);

	/* lsl */
	ctl->flags = UPA_F_FS0;
	assert_int_equal(record_cpu(), cpu);

	/* an area of the test's own: the agent reads it, and falls back to lsl where
	   the kernel would say "not registered" (-1) or glibc says "no area" (size 0) */
	__asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
	fake_offset = (int64_t)((uintptr_t)fake_area - tp);
	fake_size = 32;
	ctl->rseq_offset_at = (uint64_t)(uintptr_t)&fake_offset;
	ctl->rseq_size_at = (uint64_t)(uintptr_t)&fake_size;
	ctl->flags = UPA_F_FS0 | UPA_F_RSEQ;
	fake_area[1] = 77;
	assert_int_equal(record_cpu(), 77);
	fake_area[1] = -1;
	assert_int_equal(record_cpu(), cpu);
	fake_area[1] = 77;
	fake_size = 0;
	assert_int_equal(record_cpu(), cpu);

	/* glibc's own, as the tracer finds it in a process (2.35 on) */
	if (__rseq_size >= 20) {
		ctl->rseq_offset_at = (uint64_t)(uintptr_t)&__rseq_offset;
		ctl->rseq_size_at = (uint64_t)(uintptr_t)&__rseq_size;
		assert_int_equal(record_cpu(), cpu);
	} else {
		print_message("glibc's rseq area is off here (size %u): lsl only\n", __rseq_size);
	}
	ctl->flags = UPA_F_FS0;
}


/* ---- aggregation ----------------------------------------------------------------------- */

/* An aggregating descriptor: d, nfetch fetches, no conditions, the agg, its tables. */
struct aprobe {
	struct upa_probe d;
	struct upa_fetch f[2];
	struct upa_agg g;
};

#define AGG_ORDER 6

static uint64_t agg_tables[(UPA_AGG_OWNERS + 1) << AGG_ORDER][1 + UPA_AGG_KEY_WORDS + 1 + UPA_AGG_VALS];

/* nfetch is 2, always: the agg's place depends on it */
static void aprobe_init(struct aprobe *p, unsigned nkeys, unsigned nvals, unsigned words)
{
	memset(p, 0, sizeof(*p));
	memset(agg_tables, 0, sizeof(agg_tables));
	p->d.ctl = (uint64_t)(uintptr_t)ctl;
	p->d.flags = UPA_P_ENABLED | UPA_P_AGG;
	p->d.vaddr = 0x401000;
	p->d.nfetch = 2;
	p->f[0].base = UPA_BASE_REG, p->f[0].reg = UPA_RDI, p->f[0].reg_size = 8, p->f[0].size = 8;
	p->f[1].base = UPA_BASE_REG, p->f[1].reg = UPA_RSI, p->f[1].reg_size = 8, p->f[1].size = 8;
	p->g.tables = (uint64_t)(uintptr_t)agg_tables;
	p->g.ntables = 2;
	p->g.order = AGG_ORDER;
	p->g.nkeys = nkeys;
	p->g.nvals = nvals;
	p->g.key_words = words;
	/* the entries are entry_words apart: agg_tables' rows are wider, so use a flat view */
	p->g.entry_words = 1 + words + 1 + nvals;
}

/* The merged count and vals of key (words words), over both tables; false if absent. */
static bool agg_find(const struct aprobe *p, const uint64_t *key, uint64_t *hits, uint64_t *val)
{
	const uint64_t *t = (const uint64_t *)agg_tables;
	bool found = false;

	*hits = 0;
	for (size_t i = 0; i < ((size_t)p->g.ntables << p->g.order); i++, t += p->g.entry_words) {
		if (t[0] <= 1 || memcmp(t + 1, key, p->g.key_words * 8))
			continue;
		assert_int_equal(t[0], upa_agg_hash(key, p->g.key_words));
		*hits += t[1 + p->g.key_words];
		for (unsigned j = 0; j < p->g.nvals && val; j++)
			val[j] = t[2 + p->g.key_words + j]; /* one thread: one entry */
		found = true;
	}
	return found;
}

static uint64_t agg_total(const struct aprobe *p)
{
	const uint64_t *t = (const uint64_t *)agg_tables;
	uint64_t n = 0;

	for (size_t i = 0; i < ((size_t)p->g.ntables << p->g.order); i++, t += p->g.entry_words)
		if (t[0] > 1)
			n += t[1 + p->g.key_words];
	return n;
}

static void test_agg_log2_and_vals(void **state)
{
	static const uint64_t sizes[] = { 0, 1, 2, 3, 4, 5, 8, 9, 1000, 1024, 1025 };
	uint64_t frame[UPA_NREGS] = { 0 }, k, hits, val[3];
	struct aprobe p;

	(void)state;
	reset();
	aprobe_init(&p, 1, 3, 1);
	p.g.key[0] = (struct upa_agg_key){ .src = UPA_AGG_FETCH, .xform = UPA_AGG_LOG2, .words = 1 };
	p.g.val[0] = (struct upa_agg_val){ .src = UPA_AGG_FETCH, .fetch = 1, .op = UPA_AGG_SUM };
	p.g.val[1] = (struct upa_agg_val){ .fetch = 1, .op = UPA_AGG_MIN, .is_signed = 1 };
	p.g.val[2] = (struct upa_agg_val){ .fetch = 1, .op = UPA_AGG_MAX, .is_signed = 1 };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		frame[UPA_RDI] = sizes[i];
		frame[UPA_RSI] = (uint64_t)(int64_t)(i % 2 ? -(int64_t)i : (int64_t)i);
		entry(frame, &p.d);
	}
	assert_int_equal(ctl->ring[0].head, 0); /* no record */
	assert_int_equal(agg_total(&p), 11);
	/* 0 and 1: 2^0; 2: 2^1; 3, 4: 2^2; 5, 8: 2^3; 9: 2^4; 1000, 1024: 2^10; 1025: 2^11 */
	k = 0, assert_true(agg_find(&p, &k, &hits, val)), assert_int_equal(hits, 2);
	assert_int_equal((int64_t)val[0], 0 - 1), assert_int_equal((int64_t)val[1], -1);
	assert_int_equal((int64_t)val[2], 0);
	k = 2, assert_true(agg_find(&p, &k, &hits, val)), assert_int_equal(hits, 2);
	assert_int_equal((int64_t)val[0], -3 + 4);
	assert_int_equal((int64_t)val[1], -3), assert_int_equal((int64_t)val[2], 4);
	k = 10, assert_true(agg_find(&p, &k, &hits, val)), assert_int_equal(hits, 2);
	k = 11, assert_true(agg_find(&p, &k, &hits, val)), assert_int_equal(hits, 1);
	k = 5, assert_false(agg_find(&p, &k, &hits, val));
	/* disabled: nothing counted */
	p.d.flags &= ~UPA_P_ENABLED;
	entry(frame, &p.d);
	assert_int_equal(agg_total(&p), 11);
}

/* bpftrace's hist buckets: a log2 key with buckets UPA_AGG_LOG2_FLOOR keeps v's bit
   length (0 for 0, 1 for 1, k + 1 for [2^k, 2^(k+1))), on the general path and on the
   one-register path (UPA_P_AGG1); the kernel's ceil stays as it was beside it */
static void test_agg_log2_floor(void **state)
{
	static const uint64_t sizes[] = { 0, 1, 2, 3, 4, 7, 8, 1023, 1024, 1025, UINT64_MAX };
	static const uint64_t bits[] = { 0, 1, 2, 2, 3, 3, 4, 10, 11, 11, 64 };
	uint64_t frame[UPA_NREGS] = { 0 }, k, hits;
	struct aprobe p;

	(void)state;
	for (unsigned agg1 = 0; agg1 < 2; agg1++) {
		reset();
		aprobe_init(&p, 1, 0, 1);
		p.g.key[0] = (struct upa_agg_key){ .src = UPA_AGG_FETCH, .xform = UPA_AGG_LOG2,
						   .buckets = UPA_AGG_LOG2_FLOOR, .words = 1 };
		if (agg1)
			p.d.flags |= UPA_P_AGG1;
		for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			frame[UPA_RDI] = sizes[i];
			entry(frame, &p.d);
			assert_int_equal(upa_agg_log2_floor(sizes[i]), bits[i]);
		}
		assert_int_equal(agg_total(&p), 11);
		k = 0, assert_true(agg_find(&p, &k, &hits, NULL)), assert_int_equal(hits, 1);
		k = 1, assert_true(agg_find(&p, &k, &hits, NULL)), assert_int_equal(hits, 1);
		k = 2, assert_true(agg_find(&p, &k, &hits, NULL)), assert_int_equal(hits, 2);
		k = 3, assert_true(agg_find(&p, &k, &hits, NULL)), assert_int_equal(hits, 2);
		k = 11, assert_true(agg_find(&p, &k, &hits, NULL)), assert_int_equal(hits, 2);
		k = 64, assert_true(agg_find(&p, &k, &hits, NULL)), assert_int_equal(hits, 1);
		k = 5, assert_false(agg_find(&p, &k, &hits, NULL));
	}
	assert_int_equal(upa_agg_log2_key(5, 0), 3);
	assert_int_equal(upa_agg_log2_key(5, UPA_AGG_LOG2_FLOOR), 3);
	assert_int_equal(upa_agg_log2_key(4, 0), 2);
	assert_int_equal(upa_agg_log2_key(4, UPA_AGG_LOG2_FLOOR), 3);
}

static void test_agg_buckets_and_full(void **state)
{
	uint64_t frame[UPA_NREGS] = { 0 }, k, hits;
	struct aprobe p;

	(void)state;
	aprobe_init(&p, 1, 0, 1);
	p.g.ntables = 1; /* one table of 64 */
	p.g.key[0] = (struct upa_agg_key){ .xform = UPA_AGG_BUCKETS, .buckets = 10, .words = 1 };
	for (uint64_t v = 0; v < 1000; v++) {
		frame[UPA_RDI] = v;
		entry(frame, &p.d);
	}
	k = 0, assert_true(agg_find(&p, &k, &hits, NULL)), assert_int_equal(hits, 10);
	k = 630, assert_true(agg_find(&p, &k, &hits, NULL)), assert_int_equal(hits, 10);
	/* 100 keys in tables of 64: what found no room is dropped, and counted */
	assert_int_equal(agg_total(&p) + p.g.dropped, 1000);
	assert_true(p.g.dropped > 0);
}

static void test_agg_string_key(void **state)
{
	static const char name[] = "LANG_SOMEWHAT_LONGER_THAN_THE_KEY";
	uint64_t frame[UPA_NREGS] = { 0 }, key[2] = { 0, 0 }, hits;
	struct aprobe p;

	(void)state;
	aprobe_init(&p, 1, 0, 2);
	p.f[0].final = UPA_FINAL_STRING, p.f[0].final_len = 4095;
	p.g.key[0] = (struct upa_agg_key){ .words = 2 };
	frame[UPA_RDI] = (uint64_t)(uintptr_t)name;
	entry(frame, &p.d);
	entry(frame, &p.d);
	memcpy(key, name, 15); /* cut at 2 words less the NUL */
	assert_true(agg_find(&p, key, &hits, NULL)), assert_int_equal(hits, 2);
	frame[UPA_RDI] = (uint64_t)(uintptr_t)"ab";
	entry(frame, &p.d);
	memset(key, 0, sizeof(key)), memcpy(key, "ab", 2);
	assert_true(agg_find(&p, key, &hits, NULL)), assert_int_equal(hits, 1);
	frame[UPA_RDI] = 0x10; /* unreadable */
	entry(frame, &p.d);
	memset(key, 0, sizeof(key)), memcpy(key, "(fault)", 7);
	assert_true(agg_find(&p, key, &hits, NULL)), assert_int_equal(hits, 1);
}

static void test_agg_stack_key(void **state)
{
	/* frames: fp0 = {fp1, 0x1111}, fp1 = {fp2, 0x2222}, fp2 = {0, 0x3333}; [rsp] 0x4444 */
	uint64_t stack[16] = { 0 }, frame[UPA_NREGS] = { 0 }, key[5], hits;
	struct aprobe p;

	(void)state;
	stack[0] = 0x4444;
	stack[4] = (uint64_t)(uintptr_t)&stack[8], stack[5] = 0x1111;
	stack[8] = (uint64_t)(uintptr_t)&stack[12], stack[9] = 0x2222;
	stack[12] = 0, stack[13] = 0x3333;
	frame[UPA_RSP] = (uint64_t)(uintptr_t)&stack[0];
	frame[UPA_RBP] = (uint64_t)(uintptr_t)&stack[4];
	aprobe_init(&p, 1, 0, 5);
	p.g.key[0] = (struct upa_agg_key){ .src = UPA_AGG_STACK, .words = 5 };
	p.g.at_entry = 1;
	entry(frame, &p.d);
	key[0] = 0x401000, key[1] = 0x4444, key[2] = 0x1111, key[3] = 0x2222, key[4] = 0x3333;
	assert_true(agg_find(&p, key, &hits, NULL)), assert_int_equal(hits, 1);
	/* not at entry, and a chain that points down and at unmapped memory: cut there */
	p.g.at_entry = 0;
	stack[8] = (uint64_t)(uintptr_t)&stack[2];
	entry(frame, &p.d);
	key[1] = 0x1111, key[2] = 0x2222, key[3] = 0, key[4] = 0;
	assert_true(agg_find(&p, key, &hits, NULL)), assert_int_equal(hits, 1);
	frame[UPA_RBP] = 0x1000;
	entry(frame, &p.d);
	key[1] = 0, key[2] = 0;
	assert_true(agg_find(&p, key, &hits, NULL)), assert_int_equal(hits, 1);
}

#define AGG_N 1000000
static struct aprobe agg_mt;
static volatile int agg_go;

static void *agg_thread(void *arg)
{
	uint64_t frame[UPA_NREGS] = { 0 };

	while (!agg_go)
		;
	for (uint64_t i = 0; i < AGG_N; i++) {
		frame[UPA_RDI] = i % 16;
		frame[UPA_RSI] = (uintptr_t)arg + i;
		entry(frame, &agg_mt.d);
	}
	return NULL;
}

/* nthreads threads on tables: every hit counted once, whichever table took it */
static void agg_threads(unsigned nthreads, unsigned ntables)
{
	static uint64_t slots[UPA_RT_OWNERS];
	pthread_t th[4];
	uint64_t total = 0;
	cpu_set_t all;

	/* the threads' slots (ctl->rt_owner): slot i writes private table i, if any */
	memset(slots, 0, sizeof(slots));
	ctl->rt_owner = (uint64_t)(uintptr_t)slots;

	CPU_ZERO(&all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &all);
	sched_setaffinity(0, sizeof(all), &all);
	aprobe_init(&agg_mt, 1, 1, 1);
	agg_mt.g.ntables = ntables;
	agg_mt.g.val[0] = (struct upa_agg_val){ .fetch = 1, .op = UPA_AGG_SUM };
	agg_go = 0;
	for (uintptr_t t = 0; t < nthreads; t++)
		assert_int_equal(pthread_create(&th[t], NULL, agg_thread, (void *)(t * 7)), 0);
	agg_go = 1;
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	for (uint64_t k = 0; k < 16; k++) {
		const uint64_t *t = (const uint64_t *)agg_tables;
		uint64_t hits = 0, sum = 0, want = 0;

		for (size_t i = 0; i < ((size_t)ntables << AGG_ORDER); i++, t += agg_mt.g.entry_words) {
			if (t[0] > 1 && t[1] == k) {
				hits += t[2];
				sum += t[3];
			}
		}
		for (uintptr_t th_i = 0; th_i < nthreads; th_i++)
			for (uint64_t i = k; i < AGG_N; i += 16)
				want += th_i * 7 + i;
		assert_int_equal(hits, nthreads * AGG_N / 16);
		assert_int_equal(sum, want);
		total += hits;
	}
	assert_int_equal(total, nthreads * AGG_N);
	assert_int_equal(agg_mt.g.dropped, 0);
	/* a slot a thread, the first ones first: as many private tables used as there are */
	for (unsigned i = 0; i < nthreads; i++)
		assert_true(slots[i] != 0);
	for (unsigned i = nthreads; i < UPA_RT_OWNERS; i++)
		assert_true(slots[i] == 0);
	ctl->rt_owner = 0;
}

static void test_agg_two_threads(void **state)
{
	(void)state;
	agg_threads(2, 1); /* the shared table only: the atomics keep it exact */
	agg_threads(2, 3); /* each its own table */
	agg_threads(3, 3); /* two private tables, the third thread shares */
}

static void test_agg_duration(void **state)
{
	uint64_t stack[4] = { 0x5555, 0, 0, 0 }, frame[UPA_NREGS] = { 0 }, key = 0, val = 0;
	uint64_t (*ret)(uint64_t *, struct upa_ctl *, int64_t);
	struct upa_rt rt[1u << 4];
	static struct upa_rt own[UPA_RT_OWNERS << UPA_RT_OWN_ORDER];
	uint64_t owner[UPA_RT_OWNERS] = { 0 }, me;
	struct aprobe p;

	(void)state;
	memset(rt, 0, sizeof(rt));
	ctl->rtab = (uint64_t)(uintptr_t)rt;
	ctl->rtab_order = 4;
	ctl->ret_tramp = (uint64_t)(uintptr_t)(code + UPA_RET_OFF);
	ctl->ns_mult = 1ull << 32; /* a tick a ns */
	aprobe_init(&p, 1, 1, 1);
	p.d.flags |= UPA_P_RETURN;
	p.g.key[0] = (struct upa_agg_key){ .src = UPA_AGG_DURATION, .xform = UPA_AGG_LOG2,
					   .words = 1 };
	p.g.val[0] = (struct upa_agg_val){ .src = UPA_AGG_DURATION, .op = UPA_AGG_MAX };
	frame[UPA_RSP] = (uint64_t)(uintptr_t)&stack[0];
	entry(frame, &p.d);
	assert_int_equal(stack[0], ctl->ret_tramp); /* hijacked */
	/* upa_return is not exported: the trampoline calls it, after "mov %rsp,%rdi;
	   mov upa_ctl_word(%rip),%rsi; mov $-1,%rdx" (48 89 e7 48 8b 35 disp32
	   48 c7 c2 ff ff ff ff), with a call rel32 */
	ret = NULL;
	for (unsigned i = UPA_RET_OFF; i + 24 < UPA_TOUCH_OFF; i++) {
		static const uint8_t pat[] = { 0x48, 0x89, 0xe7, 0x48, 0x8b, 0x35 };
		static const uint8_t rdx[] = { 0x48, 0xc7, 0xc2, 0xff, 0xff, 0xff, 0xff, 0xe8 };
		int32_t rel;

		if (memcmp(code + i, pat, sizeof(pat)) || memcmp(code + i + 10, rdx, sizeof(rdx)))
			continue;
		memcpy(&rel, code + i + 18, 4);
		ret = (uint64_t (*)(uint64_t *, struct upa_ctl *, int64_t))(void *)(code + i + 22 + rel);
		break;
	}
	assert_non_null(ret);
	frame[UPA_RSP] += 8; /* as after the ret */
	assert_int_equal(ret(frame, ctl, -1), 0x5555);
	assert_int_equal(agg_total(&p), 1);

	/* a thread's own table (UPA_F_RTOWN, every thread with TLS): claimed by its %fs:0,
	   the return address replaced by its table's stub, found there at the return */
	ctl->flags |= UPA_F_RTOWN | UPA_F_FS0;
	ctl->rt_owner = (uint64_t)(uintptr_t)owner;
	ctl->rt_own = (uint64_t)(uintptr_t)own;
	__asm__ volatile("mov %%fs:0, %0" : "=r"(me));
	stack[0] = 0x6666;
	frame[UPA_RSP] = (uint64_t)(uintptr_t)&stack[0];
	entry(frame, &p.d);
	{
		unsigned j = UPA_RT_OWNERS;

		for (unsigned k = 0; k < UPA_RT_OWNERS; k++)
			if (owner[k] == me)
				j = k;
		assert_true(j < UPA_RT_OWNERS);		   /* claimed, once */
		assert_int_equal(stack[0], ctl->ret_tramp + UPA_RT_STUB * (j + 1));
		entry(frame, &p.d); /* a tail call: the first hijack stands */
		assert_int_equal(stack[0], ctl->ret_tramp + UPA_RT_STUB * (j + 1));
		frame[UPA_RSP] += 8;
		assert_int_equal(ret(frame, ctl, j), 0x6666);
		assert_int_equal(agg_total(&p), 2);
		/* taken: a second return of it is not found */
		assert_int_equal(ret(frame, ctl, j), 0);
	}
	ctl->flags &= ~(UPA_F_RTOWN | UPA_F_FS0);
	{
		const uint64_t *t = (const uint64_t *)agg_tables;

		for (size_t i = 0; i < (2u << AGG_ORDER); i++, t += p.g.entry_words)
			if (t[0] > 1)
				key = t[1], val = t[3];
	}
	/* some ticks passed: the key is the log2 of the duration kept as the val */
	assert_true(val > 0);
	assert_int_equal(key, upa_agg_log2(val));
	ctl->rtab = 0;
}

/*
 * A return probe's entry on a CPU with lahf (upa_hijack, called as its trampoline calls
 * it) and the lean return (upa_return_lean, called as the second row's code calls it,
 * with the slot): the entry leaves the return address in place and names below the
 * slot the call site of the thread's lean stub; the return puts the real address back
 * and counts the duration in the thread's table.  A tail call goes straight on; a probe
 * disabled meanwhile goes to the full path untouched; one with a val takes the first row.
 */
static void test_agg_duration_lean(void **state)
{
	/* upa_ret_lean: push %rax; seto %al; lahf; push %rax; push %rdi;
	   lea 24(%rsp),%rdi (the slot, above the three words); call upa_return_lean */
	static const uint8_t pat[] = { 0x50, 0x0f, 0x90, 0xc0, 0x9f, 0x50, 0x57,
				       0x48, 0x8d, 0x7c, 0x24, 0x18, 0xe8 };
	static struct upa_rt own[UPA_RT_OWNERS << UPA_RT_OWN_ORDER];
	uint64_t stack[8] = { 0 }, *slot = &stack[4], owner[UPA_RT_OWNERS] = { 0 }, me;
	uint64_t hj_off, lahf_off, lean_stub;
	void (*hijack)(struct upa_probe *, uint64_t);
	uint64_t (*ret_lean)(uint64_t *);
	struct upa_rt rt[1u << 4];
	const uint8_t *lean;
	uint32_t flags0 = ctl->flags;
	struct aprobe p;
	unsigned j = UPA_RT_OWNERS;
	int32_t rel;

	(void)state;
	memcpy(&hj_off, code + UPA_HIJACK_AT, 8);
	memcpy(&lahf_off, code + UPA_RET_LAHF_AT, 8);
	hijack = (void (*)(struct upa_probe *, uint64_t))(void *)(code + hj_off);
	lean = code + lahf_off - UPA_RT_CALL_LEN + 2 * UPA_RT_LEAN;
	assert_memory_equal(lean, pat, sizeof(pat));
	memcpy(&rel, lean + sizeof(pat), 4);
	ret_lean = (uint64_t (*)(uint64_t *))(void *)(lean + sizeof(pat) + 4 + rel);

	memset(rt, 0, sizeof(rt));
	memset(own, 0, sizeof(own));
	ctl->rtab = (uint64_t)(uintptr_t)rt;
	ctl->rtab_order = 4;
	ctl->ret_tramp = (uint64_t)(uintptr_t)(code + lahf_off);
	ctl->ns_mult = 1ull << 32;
	ctl->flags |= UPA_F_RTOWN | UPA_F_FS0;
	ctl->rt_owner = (uint64_t)(uintptr_t)owner;
	ctl->rt_own = (uint64_t)(uintptr_t)own;
	__asm__ volatile("mov %%fs:0, %0" : "=r"(me));
	aprobe_init(&p, 1, 0, 1);
	p.d.flags |= UPA_P_RETURN | UPA_P_AGG1;
	p.g.key[0] = (struct upa_agg_key){ .src = UPA_AGG_DURATION, .xform = UPA_AGG_LOG2,
					   .words = 1 };
	slot[-1] = 0x1234; /* where the function goes on */
	for (unsigned i = 1; i <= 2; i++) { /* a slot claimed, then the inline path */
		slot[0] = 0x7777;
		hijack(&p.d, (uint64_t)(uintptr_t)slot);
		for (unsigned k = 0; k < UPA_RT_OWNERS; k++)
			if (owner[k] == me)
				j = k;
		assert_true(j < UPA_RT_OWNERS);
		lean_stub = ctl->ret_tramp + UPA_RT_LEAN + UPA_RT_STUB * (j + 1);
		assert_int_equal(slot[0], 0x7777); /* the call site's call writes the stub */
		assert_int_equal(slot[-2], lean_stub - UPA_RT_CALL_LEN);
		assert_int_equal(slot[-1], 0x1234);
		slot[0] = j; /* the stub's push */
		assert_int_equal(ret_lean(slot), 1);
		assert_int_equal(slot[0], 0x7777);
		assert_int_equal(agg_total(&p), i);
	}
	/* a tail call into the function: the return address is a stub already */
	slot[0] = lean_stub;
	hijack(&p.d, (uint64_t)(uintptr_t)slot);
	assert_int_equal(slot[-2], 0x1234);
	assert_int_equal(slot[0], lean_stub);
	/* disabled before its return: nothing done here, the full path takes it */
	slot[0] = 0x7777;
	hijack(&p.d, (uint64_t)(uintptr_t)slot);
	p.d.flags &= ~UPA_P_ENABLED;
	slot[0] = j;
	assert_int_equal(ret_lean(slot), 0);
	assert_int_equal(slot[0], j);
	assert_int_equal(agg_total(&p), 2);
	/* a val: the first row */
	p.d.flags |= UPA_P_ENABLED;
	p.d.flags &= ~UPA_P_AGG1;
	slot[0] = 0x7777;
	hijack(&p.d, (uint64_t)(uintptr_t)slot);
	assert_int_equal(slot[-2], ctl->ret_tramp + UPA_RT_STUB * (j + 1) - UPA_RT_CALL_LEN);
	ctl->flags = flags0;
	ctl->rt_owner = ctl->rt_own = ctl->rtab = 0;
}

/* ---- a ring a thread ------------------------------------------------------------------ */

#define TR_ORDER 17 /* 128 KiB: 2048 records of 64 bytes, none has to wait for the reader */
#define TR_N 1500
#define TR_RINGS 3 /* thread rings given: a fourth thread writes the shared one */

static struct probe tr_probe;
static volatile int tr_go;
static volatile uint64_t tr_sig_hits[4];
static __thread uint64_t tr_me;

static void tr_handler(int sig)
{
	uint64_t frame[UPA_NREGS] = { 0 };

	(void)sig;
	frame[UPA_RSI] = 100 + tr_me; /* the handler's records: a writer of their own */
	frame[UPA_RDI] = tr_sig_hits[tr_me]++;
	entry(frame, &tr_probe.d);
}

static void *tr_writer(void *arg)
{
	uint64_t frame[UPA_NREGS] = { 0 };

	sigset_t usr1;

	tr_me = (uintptr_t)arg;
	frame[UPA_RSI] = tr_me;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL); /* its handler knows whose it is now */
	while (!tr_go)
		;
	for (uint64_t i = 0; i < TR_N; i++) {
		frame[UPA_RDI] = i;
		entry(frame, &tr_probe.d);
	}
	return NULL;
}

/* Every record of ring rg, in order: counted per writer (rsi), each writer's in
   sequence (rdi); no record incomplete. */
static void tr_parse(struct upa_ring *rg, uint64_t next[], uint64_t *n)
{
	uint8_t *r = (uint8_t *)(uintptr_t)rg->base;
	uint64_t cap = 1ull << rg->order;

	for (uint64_t at = rg->tail; at < rg->head;) {
		struct upa_rec *rec = (struct upa_rec *)(r + (at & (cap - 1)));

		assert_true(rec->slot != 0);
		if (rec->id != UPA_REC_PAD) {
			const uint64_t *regs = (const uint64_t *)(rec + 1); /* rsi, rdi */

			assert_true(regs[0] < 4 || (regs[0] >= 100 && regs[0] < 104));
			assert_int_equal(regs[1], next[regs[0]]);
			next[regs[0]]++;
			(*n)++;
		}
		at += rec->slot;
	}
}

/*
 * Four threads write records while signals interrupt them, their handlers writing
 * records too: the first three threads (slots 0-2) each fill a ring of their own, with
 * the plain cmpxchg, and their handlers' records land in the same ring, whole; the
 * fourth has no ring and writes the shared one.  Nothing lost, every writer in order.
 */
static void test_thread_rings(void **state)
{
	static uint64_t slots[UPA_RT_OWNERS];
	uint8_t *rings[TR_RINGS + 1];
	struct upa_ring shared = ctl->ring[0];
	uint64_t next[104] = { 0 }, n = 0;
	pthread_t th[4];
	struct sigaction sa = { .sa_handler = tr_handler };

	(void)state;
	memset(slots, 0, sizeof(slots));
	reset();
	ctl->rt_owner = (uint64_t)(uintptr_t)slots;
	ctl->flags |= UPA_F_FS0;
	for (unsigned k = 0; k <= TR_RINGS; k++) { /* the shared one as large, for the test */
		rings[k] = mmap(NULL, 1u << TR_ORDER, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		assert_true(rings[k] != MAP_FAILED);
		memset(&ctl->ring[k], 0, sizeof(ctl->ring[k]));
		ctl->ring[k].base = (uint64_t)(uintptr_t)rings[k];
		ctl->ring[k].order = TR_ORDER;
	}
	probe_init(&tr_probe, 1ull << UPA_RDI | 1ull << UPA_RSI, 0, 0);
	finish(&tr_probe);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	tr_go = 0;
	sigset_t usr1, old;

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &old); /* the writers start with it blocked */
	for (uintptr_t t = 0; t < 4; t++)
		assert_int_equal(pthread_create(&th[t], NULL, tr_writer, (void *)t), 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	tr_go = 1;
	for (int i = 0; i < 200; i++)
		for (unsigned t = 0; t < 4; t++)
			pthread_kill(th[t], SIGUSR1);
	for (unsigned t = 0; t < 4; t++)
		pthread_join(th[t], NULL);
	signal(SIGUSR1, SIG_DFL);
	for (unsigned k = 0; k < UPA_RINGS; k++)
		assert_int_equal(ctl->ring[k].lost, 0);
	/* which slot each thread took is first-come: find each ring's writer by its
	   records; three rings with one thread (and its handler) each, the rest shared */
	for (unsigned k = 1; k <= TR_RINGS; k++) {
		uint64_t before[104];

		memcpy(before, next, sizeof(before));
		tr_parse(&ctl->ring[k], next, &n);
		unsigned writers = 0;

		for (unsigned w = 0; w < 4; w++)
			writers += next[w] != before[w];
		assert_int_equal(writers, 1);
		assert_int_equal(ctl->ring[k].head % 32, 0);
	}
	tr_parse(&ctl->ring[0], next, &n);
	for (unsigned w = 0; w < 4; w++) {
		assert_int_equal(next[w], TR_N);
		assert_int_equal(next[100 + w], tr_sig_hits[w]);
	}
	print_message("thread rings: %" PRIu64 " records, %" PRIu64 " from signal handlers\n", n,
		      tr_sig_hits[0] + tr_sig_hits[1] + tr_sig_hits[2] + tr_sig_hits[3]);
	assert_int_equal(n, 4 * TR_N + tr_sig_hits[0] + tr_sig_hits[1] + tr_sig_hits[2] +
				    tr_sig_hits[3]);
	for (unsigned k = 0; k <= TR_RINGS; k++) {
		memset(&ctl->ring[k], 0, sizeof(ctl->ring[k]));
		munmap(rings[k], 1u << TR_ORDER);
	}
	ctl->ring[0] = shared;
	ctl->rt_owner = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registers),
		cmocka_unit_test(test_memory_and_faults),
		cmocka_unit_test(test_string_into_unmapped),
		cmocka_unit_test(test_conditions),
		cmocka_unit_test(test_full_ring_and_pad),
		cmocka_unit_test(test_cpu),
		cmocka_unit_test(test_two_writers),
		cmocka_unit_test(test_agg_log2_and_vals),
		cmocka_unit_test(test_agg_log2_floor),
		cmocka_unit_test(test_agg_buckets_and_full),
		cmocka_unit_test(test_agg_string_key),
		cmocka_unit_test(test_agg_stack_key),
		cmocka_unit_test(test_agg_two_threads),
		cmocka_unit_test(test_agg_duration),
		cmocka_unit_test(test_agg_duration_lean),
		cmocka_unit_test(test_thread_rings),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
