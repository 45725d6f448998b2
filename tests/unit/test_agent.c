// SPDX-License-Identifier: MIT
/*
 * The fast path's agent run natively, in this process: the blob the library embeds,
 * copied into executable memory and called as a trampoline calls it, on a ring and a
 * descriptor set up here.  Checks the record layout, fault-safe reads (a bad pointer,
 * a string running into an unmapped page), conditions, a full ring, the pad at the
 * ring's end, up_agent_rec_read's view of the memory entries, and the cpu taken from
 * glibc's rseq area or, without one, from lsl.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
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
	code = mmap(NULL, 8192, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	mem = mmap(NULL, 4096 + (1u << RING_ORDER), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED || mem == MAP_FAILED || up_agent_blob_size > 8192)
		return -1;
	memcpy(code, up_agent_blob, up_agent_blob_size);
	ctl = (struct upa_ctl *)mem;
	ring = mem + 4096;
	memcpy(code, &ctl, 8); /* the blob's first word */
	ctl->magic = UPA_MAGIC;
	ctl->pid = getpid();
	ctl->ring_order = RING_ORDER;
	ctl->ring = (uint64_t)(uintptr_t)ring;
	ctl->flags = UPA_F_FS0;
	entry = (void (*)(uint64_t *, struct upa_probe *))(void *)(code + UPA_ENTRY_OFF);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	munmap(code, 8192);
	munmap(mem, 4096 + (1u << RING_ORDER));
	return 0;
}

static void reset(void)
{
	memset(ring, 0, 1u << RING_ORDER);
	ctl->head = ctl->tail = ctl->lost = 0;
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
		struct upa_rec *r = (struct upa_rec *)(ring + (ctl->tail & (cap - 1)));

		if (!r->slot)
			return NULL;
		if (r->id == UPA_REC_PAD) {
			uint32_t slot = r->slot;

			memset(r, 0, slot);
			ctl->tail += slot;
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
	ctl->tail += slot;
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
	assert_int_equal(ctl->lost, 5); /* full: dropped and counted, never waited for */
	assert_int_equal(p.d.lost, 5);
	/* the rest in order */
	for (unsigned i = 0; i < fit; i++) {
		r = next_record(&v);
		assert_non_null(r);
		assert_int_equal(v.regs[2], i); /* rdx, rsi, rdi: frame order */
		consume(r);
	}
	assert_null(next_record(&v));
	/* records of a size that does not divide the ring: each wrap leaves a pad */
	reset();
	p.d.max_record = 96;
	for (unsigned i = 0; i < 100; i++) {
		frame[UPA_RDI] = 1000 + i;
		entry(frame, &p.d);
		r = next_record(&v);
		assert_non_null(r);
		assert_int_equal(v.regs[2], 1000 + i);
		consume(r);
	}
	assert_int_equal(ctl->lost, 0);
	assert_true(ctl->head > 100 * 96); /* pads were written, and skipped */
	assert_int_equal(ctl->tail, ctl->head);
}

/* ---- two writers, one of them the reader, at once ---- */

#define TW_N 300000

static struct probe tw_probe;
static volatile int tw_go;

/* Has the ring room for two records: this writer's and the other's? */
static bool tw_room(void)
{
	uint64_t cap = 1u << RING_ORDER;

	return __atomic_load_n(&ctl->head, __ATOMIC_ACQUIRE) -
		       __atomic_load_n(&ctl->tail, __ATOMIC_ACQUIRE) <=
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
		uint64_t tail = ctl->tail;
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
		__atomic_store_n(&ctl->tail, tail + slot, __ATOMIC_RELEASE);
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
		assert_int_equal(ctl->lost, 0);
	}
	pthread_join(th, NULL);
	got += tw_read(next);
	print_message("two writers: %" PRIu64 " records, %" PRIu64 " lost\n", got,
		      (uint64_t)ctl->lost);
	assert_int_equal(ctl->lost, 0);
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
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
