// SPDX-License-Identifier: MIT
/*
 * The in-process agent: runs inside the traced program, called by a probe's trampoline
 * with the thread's register frame.  It evaluates the probe's conditions, reserves room
 * in the shared ring, and writes a record: the chosen registers and every piece of
 * memory the fetches read.  The tracer formats the record later, in its own time.
 *
 * Freestanding and position-independent: no libc, no data or bss (the linker script
 * refuses them), nothing assumed about the program's TLS beyond what the trampoline
 * was told is safe (UPA_F_FS0).  Memory is read with process_vm_readv on the process
 * itself, so a bad pointer is an error code, never a fault in the program.  The ring
 * never blocks: when it is full the record is dropped and counted.
 */
#include <stddef.h>
#include <stdint.h>

#include "agent/abi.h"
#include "agent/agg.h"
#include "sym/unwind_walk.h"

#define NR_PROCESS_VM_READV 310
#define PAGE 4096u

#include "agent/blob/sys.h"

/* 0 when all len bytes at addr were read into dst. */
static int read_mem(const struct upa_ctl *ctl, void *dst, uint64_t addr, uint64_t len)
{
	struct iov local = { dst, len }, remote = { (void *)addr, len };

	if (!len)
		return 0;
	return sys6(NR_PROCESS_VM_READV, ctl->pid, (long)&local, 1, (long)&remote, 1, 0) ==
			       (long)len
		       ? 0
		       : -1;
}

static inline void copy(void *dst, const void *src, uint64_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	while (n--)
		*d++ = *s++;
}

static inline uint64_t mask(uint64_t v, unsigned size)
{
	return size >= 8 ? v : v & ((1ull << (size * 8)) - 1);
}

/* The thread, without a syscall (one costs microseconds on some machines): the word
   at its TLS block where every thread is known to have one, else its stack pointer. */
static inline uint64_t thread_key(const struct upa_ctl *ctl, const uint64_t *frame, uint32_t *sp)
{
	uint64_t k;

	if (ctl->flags & UPA_F_FS0) {
		__asm__ volatile("mov %%fs:0, %0" : "=r"(k));
		*sp = 0;
		return k;
	}
	*sp = UPA_REC_SP;
	return frame[UPA_RSP];
}

static inline uint32_t cpu_number(const struct upa_ctl *ctl)
{
	uint32_t p = 0;

	/* the kernel keeps it in the thread's rseq area (cpu_id, 4 bytes in): a load, where
	   lsl costs ~12 ns */
	if ((ctl->flags & UPA_F_RSEQ) &&
	    *(const volatile uint32_t *)(uintptr_t)ctl->rseq_size_at >= 20) {
		int64_t at = *(const volatile int64_t *)(uintptr_t)ctl->rseq_offset_at + 4;
		int32_t c;

		__asm__ volatile("movl %%fs:(%1), %0" : "=r"(c) : "r"(at));
		if (c >= 0)
			return (uint32_t)c & 0xfff;
	}
	/* the kernel's per-cpu GDT entry: its limit is cpu | node << 12 (vgetcpu's way) */
	__asm__ volatile("lsl %1, %0" : "=r"(p) : "r"(0x7bu) : "cc");
	return p & 0xfff;
}

static inline uint64_t tsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* Where memory entries go while a record is written; NULL when only evaluating. */
struct out {
	uint8_t *p;
};

static void log_mem(struct out *o, uint64_t addr, uint32_t len, uint32_t flags,
		    const void *bytes)
{
	struct upa_mem *m;

	if (!o)
		return;
	m = (struct upa_mem *)o->p;
	m->addr = addr;
	m->len = len;
	m->flags = flags;
	o->p += sizeof(*m);
	if (!(flags & UPA_MEM_FAULT)) {
		if (bytes)
			copy(o->p, bytes, len);
		o->p += UPA_ALIGN8(len);
	}
}

/* Zeroes [from, to) of a record being written. */
static void zero(uint8_t *p, uint32_t from, uint32_t to)
{
	for (; from < to && (from & 7); from++)
		p[from] = 0;
	for (; from + 8 <= to; from += 8)
		*(volatile uint64_t *)(p + from) = 0;
	for (; from < to; from++)
		p[from] = 0;
}

/*
 * A string at addr, page by page until its NUL or max bytes (strncpy_from_user).  What
 * a chunk read past the NUL is zeroed again: the record gives back the bytes it did
 * not use, the next record's header goes there, and the tracer must never find a
 * nonzero slot word before the record is complete (a header is complete, or the
 * region is corrupt: ring.c).
 */
static void read_string(const struct upa_ctl *ctl, struct out *o, uint64_t addr, uint32_t max)
{
	struct upa_mem *m = (struct upa_mem *)o->p;
	uint8_t *data = o->p + sizeof(*m);
	uint32_t got = 0, wrote = 0;
	int fault = 0;

	while (got < max) {
		uint64_t a = addr + got;
		uint32_t chunk = PAGE - (uint32_t)(a & (PAGE - 1)), i;

		if (chunk > max - got)
			chunk = max - got;
		wrote = got + chunk;
		if (read_mem(ctl, data + got, a, chunk)) {
			fault = 1;
			break;
		}
		for (i = 0; i < chunk && data[got + i]; i++)
			;
		if (i < chunk) {
			got += i + 1;
			break;
		}
		got += chunk;
	}
	zero(data, got, wrote);
	if (got || !fault) {
		m->addr = addr;
		m->len = got;
		m->flags = UPA_MEM_STRING;
		o->p += sizeof(*m) + UPA_ALIGN8(got);
	}
	if (fault) {
		uint64_t a = addr + got;
		uint32_t chunk = PAGE - (uint32_t)(a & (PAGE - 1));

		if (chunk > max - got)
			chunk = max - got;
		log_mem(o, a, chunk, UPA_MEM_FAULT, NULL);
	}
}

#define SLOT_UNKNOWN (-2) /* not looked up yet */

static unsigned unwind(struct upa_ctl *ctl, const uint64_t *frame, uint64_t pc, int at_entry,
		       uint64_t *w, unsigned max, struct out *o, int slot);
static unsigned fp_walk(struct upa_ctl *ctl, const uint64_t *frame, uint64_t pc, int at_entry,
			uint64_t *w, unsigned max, struct out *o, int slot);

/* Evaluates f: its value into *val; the reads into o.  -1 when a read faulted. */
static int fetch(const struct upa_ctl *ctl, const uint64_t *frame, const struct upa_fetch *f,
		 struct out *o, uint64_t *val)
{
	uint64_t v;

	if (f->base == UPA_BASE_REG)
		v = mask(frame[f->reg] >> f->reg_shift, f->reg_size);
	else
		v = (uint64_t)f->imm;
	for (unsigned i = 0; i < f->nsteps; i++) {
		uint64_t addr = v + (uint64_t)f->step[i].off, w = 0;
		uint32_t len = (uint32_t)f->step[i].len;

		if (read_mem(ctl, &w, addr, len)) {
			log_mem(o, addr, len, UPA_MEM_FAULT, NULL);
			return -1;
		}
		log_mem(o, addr, len, 0, &w);
		v = w;
	}
	if (f->final == UPA_FINAL_STACK) {
		/* record(): the walk, by the unwind tables, once the pc is known */
	} else if (f->final == UPA_FINAL_STRING) {
		if (o)
			read_string(ctl, o, v + (uint64_t)f->final_off, f->final_len);
	} else if (f->final == UPA_FINAL_BYTES && o) {
		uint64_t addr = v + (uint64_t)f->final_off;
		struct upa_mem *m = (struct upa_mem *)o->p;

		if (read_mem(ctl, o->p + sizeof(*m), addr, f->final_len)) {
			log_mem(o, addr, f->final_len, UPA_MEM_FAULT, NULL);
			return -1;
		}
		log_mem(o, addr, f->final_len, 0, NULL);
	}
	v = mask(v, f->size);
	if (f->bf_width) {
		v >>= f->bf_offset;
		v = f->bf_width >= 64 ? v : v & ((1ull << f->bf_width) - 1);
	}
	if (f->is_signed && f->size < 8 && (v >> (f->size * 8 - 1)) & 1)
		v |= ~0ull << (f->size * 8);
	*val = v;
	return 0;
}

static int holds(const struct upa_cond *c, uint64_t v, int is_signed)
{
	int64_t s = (int64_t)v, k = c->value;
	uint64_t u = (uint64_t)c->value;

	switch (c->op) {
	case UPA_EQ: return v == u;
	case UPA_NE: return v != u;
	case UPA_LT: return is_signed ? s < k : v < u;
	case UPA_LE: return is_signed ? s <= k : v <= u;
	case UPA_GT: return is_signed ? s > k : v > u;
	case UPA_GE: return is_signed ? s >= k : v >= u;
	case UPA_AND: return (v & u) != 0;
	}
	return 0;
}

/* *p += v: one instruction, which a signal cannot split (a private table: only its
   thread writes it), or a locked one (the shared table). */
static inline void add(uint64_t *p, uint64_t v, int shared)
{
	if (shared)
		__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
	else
		__asm__ volatile("addq %1, %0" : "+m"(*p) : "r"(v) : "cc");
}

/* *p = v if *p is still o: cmpxchg, locked only for the shared table.  1 if it was. */
static inline int cas(uint64_t *p, uint64_t *o, uint64_t v, int shared)
{
	uint8_t ok;

	if (shared)
		return __atomic_compare_exchange_n(p, o, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	__asm__ volatile("cmpxchgq %3, %1\n\tsete %2"
			 : "+a"(*o), "+m"(*p), "=q"(ok)
			 : "r"(v)
			 : "cc");
	return ok;
}

/*
 * size bytes in rg, NULL when it is full.  shared: any thread may reserve in it (a
 * locked compare-and-swap); else only this thread and its signal handlers do, and a
 * plain cmpxchg, one instruction, is atomic enough.
 */
static struct upa_rec *reserve(struct upa_ring *rg, uint32_t size, int shared, uint64_t *at)
{
	uint64_t cap = 1ull << rg->order;
	uint64_t h = __atomic_load_n(&rg->head, __ATOMIC_RELAXED), t, off, pad;
	uint8_t *ring = (uint8_t *)rg->base;

	for (;;) {
		t = __atomic_load_n(&rg->tail, __ATOMIC_ACQUIRE);
		off = h & (cap - 1);
		pad = off + size > cap ? cap - off : 0;
		if (h + pad + size - t > cap) {
			/* full -- or h is stale: other threads wrote since, and the tracer read
			   past it (t > h, the difference wrapped); head is at least t now */
			uint64_t now = __atomic_load_n(&rg->head, __ATOMIC_RELAXED);

			if (now == h)
				return NULL;
			h = now;
			continue;
		}
		if (shared ? __atomic_compare_exchange_n(&rg->head, &h, h + pad + size, 1,
							 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)
			   : cas(&rg->head, &h, h + pad + size, 0))
			break;
	}
	if (pad) {
		struct upa_rec *p = (struct upa_rec *)(ring + off);

		p->id = UPA_REC_PAD;
		p->len = (uint32_t)pad;
		__atomic_store_n(&p->slot, (uint32_t)pad, __ATOMIC_RELEASE);
		off = 0;
	}
	*at = h + pad;
	return (struct upa_rec *)(ring + off);
}

#define NR_FUTEX 202
#define FUTEX_WAIT 0

struct ts {
	long sec, nsec;
};

/*
 * UPA_F_BLOCK: the ring was full; size bytes in it once the tracer made room, or NULL
 * when it will not: blocking is off (the tracer detached, or found the process
 * corrupt), or the tracer showed no life (ctl.alive, bumped at each of its drains,
 * stood still) for UPA_GONE_NS -- it is dead or stuck: ctl.gone is set, and no record
 * waits again until a tracer that drains clears it.  Each wait is a futex on the
 * ring's wseq for UPA_WAIT_NS at most, in the memfd both processes map; a signal ends
 * it (EINTR) and is delivered as usual; its handler's hits on this thread wait
 * likewise, before this one reserves: nothing is half-reserved meanwhile.
 */
static struct upa_rec *wait_room(struct upa_ctl *ctl, struct upa_ring *rg, uint32_t size,
				 int shared, uint64_t *at)
{
	uint64_t seen = __atomic_load_n(&ctl->alive, __ATOMIC_RELAXED), since = tsc();
	struct upa_rec *r;

	for (;;) {
		uint32_t seq = __atomic_load_n(&rg->wseq, __ATOMIC_ACQUIRE);
		struct ts ts = { 0, (long)UPA_WAIT_NS };
		uint64_t now, alive;

		/* said before the last look, so a tracer that moves the tail after it sees
		   a waiter and wakes it (its store of tail, a fence, its load of waiters) */
		__atomic_fetch_add(&rg->waiters, 1, __ATOMIC_SEQ_CST);
		r = reserve(rg, size, shared, at);
		if (!r)
			sys6(NR_FUTEX, (long)&rg->wseq, FUTEX_WAIT, (long)seq, (long)&ts, 0, 0);
		__atomic_fetch_sub(&rg->waiters, 1, __ATOMIC_SEQ_CST);
		if (r || (r = reserve(rg, size, shared, at)))
			return r;
		if ((__atomic_load_n(&ctl->flags, __ATOMIC_RELAXED) & (UPA_F_BLOCK | UPA_F_QUIET)) !=
			    UPA_F_BLOCK ||
		    __atomic_load_n(&ctl->gone, __ATOMIC_RELAXED))
			return 0;
		now = tsc();
		alive = __atomic_load_n(&ctl->alive, __ATOMIC_RELAXED);
		if (alive != seen) {
			seen = alive;
			since = now;
		} else if ((uint64_t)((unsigned __int128)(now - since) * ctl->ns_mult >> 32) >=
			   UPA_GONE_NS) {
			__atomic_store_n(&ctl->gone, 1, __ATOMIC_RELAXED);
			return 0;
		}
	}
}

/* Every condition holds (dur: a return's duration in ns); else the hit is counted as
   filtered. */
static int passes(struct upa_ctl *ctl, struct upa_probe *d, const uint64_t *frame, uint64_t dur)
{
	const struct upa_fetch *f = (const struct upa_fetch *)(d + 1);
	const struct upa_cond *c = (const struct upa_cond *)(f + d->nfetch);
	uint64_t v;

	for (unsigned i = 0; i < d->ncond; i++) {
		int ok;

		if (c[i].fetch == UPA_COND_DURATION) {
			ok = holds(&c[i], dur, 0);
		} else {
			const struct upa_fetch *cf = &f[c[i].fetch];

			ok = !fetch(ctl, frame, cf, NULL, &v) && holds(&c[i], v, cf->is_signed);
		}
		if (!ok) {
			__atomic_fetch_add(&d->filtered, 1, __ATOMIC_RELAXED);
			return 0;
		}
	}
	return 1;
}

/* ---- aggregation ------------------------------------------------------------------ */

/* A string key: its bytes up to the NUL (cut at words * 8 - 1), NUL-padded; one that
   cannot be read is "(fault)", as the tracer prints it. */
static void agg_string(const struct upa_ctl *ctl, uint64_t *w, unsigned words, uint64_t addr)
{
	uint8_t *b = (uint8_t *)w;
	uint32_t max = words * 8 - 1, got = 0;

	for (unsigned i = 0; i < words; i++)
		w[i] = 0;
	while (got < max) {
		uint64_t a = addr + got;
		uint32_t chunk = PAGE - (uint32_t)(a & (PAGE - 1)), i;

		if (chunk > max - got)
			chunk = max - got;
		if (read_mem(ctl, b + got, a, chunk)) {
			if (!got)
				copy(b, "(fault)", 8);
			else
				b[got] = 0;
			return;
		}
		for (i = 0; i < chunk && b[got + i]; i++)
			;
		if (i < chunk) {
			got += i;
			break;
		}
		got += chunk;
	}
	for (uint32_t i = got; i < words * 8; i++)
		b[i] = 0;
}

/* A stack key: the hit's address, then the walk (its words past the last frame 0). */
static void agg_stack(const struct upa_ctl *ctl, const struct upa_probe *d,
		      const struct upa_agg *a, const uint64_t *frame, uint64_t *w, unsigned words)
{
	int ret = d->flags & UPA_P_RETURN;
	unsigned n;

	w[0] = ret ? frame[UPA_RIP] : d->vaddr; /* words >= 1: the tracer checked */
	if (ctl->uw_dir)
		n = unwind((struct upa_ctl *)ctl, frame, w[0], a->at_entry && !ret, w, words, 0,
			   SLOT_UNKNOWN);
	else
		n = fp_walk((struct upa_ctl *)ctl, frame, w[0], a->at_entry && !ret, w, words, 0,
			    SLOT_UNKNOWN);
	while (n < words)
		w[n++] = 0;
}

static void agg_min(uint64_t *p, uint64_t v, int is_signed, int shared)
{
	uint64_t o = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (is_signed ? (int64_t)v < (int64_t)o : v < o)
		if (cas(p, &o, v, shared))
			break;
}

static void agg_max(uint64_t *p, uint64_t v, int is_signed, int shared)
{
	uint64_t o = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (is_signed ? (int64_t)v > (int64_t)o : v > o)
		if (cas(p, &o, v, shared))
			break;
}

/*
 * The calling thread's slot among the threads that have tables of their own (returns,
 * aggregations): found by the word at its TLS block, or claimed now, first come first
 * served (slot 0 first, so the first threads also get the aggregations' private
 * tables, which may be fewer); only while every thread has a TLS block of its own.
 * Slots are never given back.  -1: none, the shared tables.
 */
static inline __attribute__((always_inline)) int thread_slot(const struct upa_ctl *ctl)
{
	uint64_t *owner = (uint64_t *)ctl->rt_owner, me;

	if (!owner || !(ctl->flags & UPA_F_FS0))
		return -1;
	__asm__ volatile("mov %%fs:0, %0" : "=r"(me));
	if (!me)
		return -1;
	for (int k = 0; k < UPA_RT_OWNERS; k++) {
		uint64_t cur = __atomic_load_n(&owner[k], __ATOMIC_RELAXED);

		if (cur == me)
			return k;
		if (!cur && (__atomic_compare_exchange_n(&owner[k], &cur, me, 0, __ATOMIC_RELAXED,
							 __ATOMIC_RELAXED) || cur == me))
			return k;
	}
	return -1;
}


#define NR_PRCTL 157
#define NR_GETTID 186
#define PR_GET_NAME 16

/* The calling thread's id: the kernel's word in its TLS block where the tracer found
   glibc's thread descriptor (ctl->tid_off), a load; else, or while that word is 0 (a
   process caught before glibc set it up), a gettid. */
static inline __attribute__((always_inline)) uint64_t thread_tid(const struct upa_ctl *ctl)
{
	uint64_t off = ctl->tid_off;

	if (off && (ctl->flags & UPA_F_FS0)) {
		int32_t t;

		__asm__ volatile("movl %%fs:(%1), %0" : "=r"(t) : "r"(off));
		if (t > 0)
			return (uint64_t)t;
	}
	return (uint64_t)sys6(NR_GETTID, 0, 0, 0, 0, 0, 0);
}

/* A comm as the kernel gave it, NUL-padded from its first NUL. */
static void comm_pad(uint64_t *w)
{
	uint8_t *b = (uint8_t *)w;
	unsigned i = 0;

	while (i < 16 && b[i])
		i++;
	for (; i < 16; i++)
		b[i] = 0;
}

/* thread_comm's slow path: prctl(PR_GET_NAME), cached in th (NULL: none). */
static __attribute__((noinline)) void thread_comm_ask(struct upa_thr *th, uint32_t tid,
						      uint32_t gen, uint64_t *w)
{
	uint64_t b[2] = { 0, 0 };

	if (sys6(NR_PRCTL, PR_GET_NAME, (long)b, 0, 0, 0, 0) < 0)
		b[0] = b[1] = 0;
	comm_pad(b);
	w[0] = b[0];
	w[1] = b[1];
	if (!th)
		return;
	__atomic_store_n(&th->tid, 0, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	th->comm[0] = b[0];
	th->comm[1] = b[1];
	th->gen = gen;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&th->tid, tid, __ATOMIC_RELAXED);
}

/*
 * The calling thread's comm into w[0..1]: its slot's cache (struct upa_thr) while the
 * cache is this thread's (the tid in its TLS block) and no older than ctl->comm_gen,
 * else prctl(PR_GET_NAME), cached.  comm_gen is read before the kernel is asked: a
 * change the tracer announces after that is seen at the next hit.
 */
static inline __attribute__((always_inline)) void thread_comm(struct upa_ctl *ctl, int slot,
							       uint64_t *w)
{
	uint32_t gen = __atomic_load_n(&ctl->comm_gen, __ATOMIC_ACQUIRE);
	uint32_t tid = (uint32_t)thread_tid(ctl);
	struct upa_thr *th = slot >= 0 ? &ctl->thr[slot] : 0;

	if (th && th->tid == tid && th->gen == gen) {
		w[0] = th->comm[0];
		w[1] = th->comm[1];
		return;
	}
	thread_comm_ask(th, tid, gen, w);
}

/* The aggregation table of a thread in slot: its own while there is one for it, else
   the shared one, the last. */
static inline unsigned own_table(const struct upa_ctl *ctl, const struct upa_agg *a, int slot)
{
	unsigned nown = a->ntables - 1;

	if (slot == SLOT_UNKNOWN)
		slot = thread_slot(ctl);
	return slot >= 0 && (unsigned)slot < nown ? (unsigned)slot : nown;
}

/* A hit of an aggregating probe: the key, then its entry in this CPU's table. */
/* The slot of key (n words, hashed h) in table t: found, or claimed for it; NULL when
   none is free within UPA_AGG_PROBES. */
static inline uint64_t *agg_slot(struct upa_agg *a, uint64_t *t, const uint64_t *key, unsigned n,
				 uint64_t h)
{
	uint64_t m = (1ull << a->order) - 1;

	for (unsigned i = 0; i < UPA_AGG_PROBES; i++) {
		uint64_t *s = t + ((h + i) & m) * a->entry_words;
		uint64_t st = __atomic_load_n(s, __ATOMIC_ACQUIRE);
		unsigned j;

		if (st == h) {
			for (j = 0; j < n && s[1 + j] == key[j]; j++)
				;
			if (j == n)
				return s;
			continue;
		}
		if (st != 0)
			continue;
		if (!__atomic_compare_exchange_n(s, &st, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
			continue; /* taken meanwhile: by this key perhaps, merged later */
		for (j = 0; j < n; j++)
			s[1 + j] = key[j];
		s[1 + n] = 0;
		for (j = 0; j < a->nvals; j++) {
			const struct upa_agg_val *x = &a->val[j];

			s[2 + n + j] = x->op == UPA_AGG_MIN   ? (x->is_signed ? ~0ull >> 1 : ~0ull)
				       : x->op == UPA_AGG_MAX ? (x->is_signed ? 1ull << 63 : 0)
							       : 0;
		}
		__atomic_store_n(s, h, __ATOMIC_RELEASE);
		return s;
	}
	return 0;
}

/* The one key v of a UPA_P_AGG1 probe, transformed and counted in the table of the
   thread in slot. */
static inline __attribute__((always_inline)) void agg1_count(const struct upa_ctl *ctl,
							      struct upa_agg *a, uint64_t v,
							      int slot)
{
	uint64_t *e;
	unsigned ti;

	if (a->key[0].xform == UPA_AGG_LOG2)
		v = upa_agg_log2_key(v, a->key[0].buckets);
	else if (a->key[0].xform == UPA_AGG_BUCKETS)
		v = upa_agg_bucket(v, a->key[0].buckets);
	ti = own_table(ctl, a, slot);
	e = agg_slot(a, (uint64_t *)a->tables + ((uint64_t)ti * a->entry_words << a->order), &v, 1,
		     upa_agg_hash(&v, 1));
	if (!e)
		__atomic_fetch_add(&a->dropped, 1, __ATOMIC_RELAXED);
	else
		add(&e[2], 1, ti == a->ntables - 1);
}

/* UPA_P_AGG1: one register's value (or the return's duration), transformed, counted.  No call, no loop over
   fetches: the cost of a histogram is this and the trampoline. */
static void aggregate1(struct upa_ctl *ctl, struct upa_probe *d, const uint64_t *frame,
		       uint64_t dur, int slot)
{
	const struct upa_fetch *f = (const struct upa_fetch *)(d + 1);
	struct upa_agg *a = (struct upa_agg *)(f + d->nfetch);
	uint64_t v = dur;

	if (a->key[0].src == UPA_AGG_COMM) {
		uint64_t w[2], *e;
		unsigned ti;

		if (slot == SLOT_UNKNOWN)
			slot = thread_slot(ctl);
		thread_comm(ctl, slot, w);
		ti = own_table(ctl, a, slot);
		e = agg_slot(a, (uint64_t *)a->tables + ((uint64_t)ti * a->entry_words << a->order),
			     w, 2, upa_agg_hash(w, 2));
		if (!e)
			__atomic_fetch_add(&a->dropped, 1, __ATOMIC_RELAXED);
		else
			add(&e[3], 1, ti == a->ntables - 1);
		return;
	}
	if (a->key[0].src == UPA_AGG_TID) {
		v = thread_tid(ctl);
	} else if (a->key[0].src == UPA_AGG_FETCH) {
		const struct upa_fetch *kf = &f[a->key[0].fetch];

		v = mask(mask(frame[kf->reg] >> kf->reg_shift, kf->reg_size), kf->size);
		if (kf->bf_width) {
			v >>= kf->bf_offset;
			v = kf->bf_width >= 64 ? v : v & ((1ull << kf->bf_width) - 1);
		}
		if (kf->is_signed && kf->size < 8 && (v >> (kf->size * 8 - 1)) & 1)
			v |= ~0ull << (kf->size * 8);
	}
	agg1_count(ctl, a, v, slot);
}

static void aggregate(struct upa_ctl *ctl, struct upa_probe *d, const uint64_t *frame,
		      uint64_t dur, int slot)
{
	const struct upa_fetch *f = (const struct upa_fetch *)(d + 1);
	struct upa_agg *a = (struct upa_agg *)((const struct upa_cond *)(f + d->nfetch) + d->ncond);
	uint64_t key[UPA_AGG_KEY_WORDS], val[UPA_AGG_VALS], v, h, *t, *e;
	unsigned n = 0, ti;
	int shared;

	for (unsigned i = 0; i < a->nkeys; i++) {
		const struct upa_agg_key *k = &a->key[i];

		if (k->src == UPA_AGG_STACK) {
			agg_stack(ctl, d, a, frame, key + n, k->words);
			n += k->words;
			continue;
		}
		if (k->src == UPA_AGG_COMM) {
			if (slot == SLOT_UNKNOWN)
				slot = thread_slot(ctl);
			thread_comm(ctl, slot, key + n);
			n += 2;
			continue;
		}
		if (k->src == UPA_AGG_DURATION) {
			v = dur;
		} else if (k->src == UPA_AGG_TID) {
			v = thread_tid(ctl);
		} else if (f[k->fetch].final == UPA_FINAL_STRING) {
			const struct upa_fetch *sf = &f[k->fetch];

			/* the string's address: the value before its type's masking */
			if (fetch(ctl, frame, sf, NULL, &v))
				v = 0, agg_string(ctl, key + n, k->words, 0);
			else
				agg_string(ctl, key + n, k->words, v + (uint64_t)sf->final_off);
			n += k->words;
			continue;
		} else if (fetch(ctl, frame, &f[k->fetch], NULL, &v)) {
			v = 0; /* a read that faulted counts as 0, on the trap path too */
		}
		if (k->xform == UPA_AGG_LOG2)
			v = upa_agg_log2_key(v, k->buckets);
		else if (k->xform == UPA_AGG_BUCKETS)
			v = upa_agg_bucket(v, k->buckets);
		key[n++] = v;
	}
	for (unsigned i = 0; i < a->nvals; i++) {
		const struct upa_agg_val *x = &a->val[i];

		if (x->src == UPA_AGG_DURATION)
			val[i] = dur;
		else if (fetch(ctl, frame, &f[x->fetch], NULL, &val[i]))
			val[i] = 0;
	}
	h = upa_agg_hash(key, n);
	ti = own_table(ctl, a, slot);
	t = (uint64_t *)a->tables + ((uint64_t)ti * a->entry_words << a->order);
	shared = ti == a->ntables - 1;
	e = agg_slot(a, t, key, n, h);
	if (!e) {
		__atomic_fetch_add(&a->dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	add(&e[1 + n], 1, shared);
	for (unsigned j = 0; j < a->nvals; j++) {
		uint64_t *p = &e[2 + n + j];

		if (a->val[j].op == UPA_AGG_MIN)
			agg_min(p, val[j], a->val[j].is_signed, shared);
		else if (a->val[j].op == UPA_AGG_MAX)
			agg_max(p, val[j], a->val[j].is_signed, shared);
		else
			add(p, val[j], shared);
	}
}

/* ---- records ---------------------------------------------------------------------- */

/* The record of a hit (ret: a return, frame[UPA_RIP] where it returned to), in the
   thread's own ring while it has a slot (and the ring is there), else the shared one. */
static void record(struct upa_ctl *ctl, struct upa_probe *d, const uint64_t *frame, int ret,
		   int slot)
{
	const struct upa_fetch *f = (const struct upa_fetch *)(d + 1);
	struct upa_ring *rg = &ctl->ring[0];
	struct upa_rec *r;
	struct out o;
	uint64_t regs, v, at, end;
	uint32_t sp, used;
	int shared;

	if (__atomic_load_n(&ctl->flags, __ATOMIC_RELAXED) & UPA_F_QUIET)
		return; /* after the end of the trace: not an event, not a loss */
	if (slot == SLOT_UNKNOWN)
		slot = thread_slot(ctl);
	if (slot >= 0 && ctl->ring[slot + 1].base)
		rg = &ctl->ring[slot + 1];
	shared = rg == &ctl->ring[0];
	r = reserve(rg, d->max_record, shared, &at);
	if (!r && (ctl->flags & UPA_F_BLOCK) && !ctl->gone)
		r = wait_room(ctl, rg, d->max_record, shared, &at);
	if (!r && (__atomic_load_n(&ctl->flags, __ATOMIC_RELAXED) & UPA_F_QUIET))
		return; /* it waited for room until the trace ended */
	if (!r) {
		__atomic_fetch_add(&rg->lost, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&d->lost, 1, __ATOMIC_RELAXED);
		return;
	}
	r->id = d->id;
	r->thread = thread_key(ctl, frame, &sp);
	r->cpu = cpu_number(ctl) | sp | (ret ? UPA_REC_RET : 0);
	r->tsc = tsc();
	o.p = (uint8_t *)(r + 1);
	for (regs = d->regs; regs; regs &= regs - 1) {
		unsigned i = (unsigned)__builtin_ctzll(regs);

		*(uint64_t *)o.p = i == UPA_RIP && !ret ? d->vaddr : frame[i];
		o.p += 8;
	}
	for (unsigned i = 0; i < d->nfetch; i++) {
		fetch(ctl, frame, &f[i], &o, &v);
		if (f[i].final != UPA_FINAL_STACK)
			continue;
		/* frame 0, the hit's address, is in the record already; the walk's every read
		   goes in, for the tracer's walk on the record (trace/stack.c) */
		if (ctl->uw_dir)
			unwind(ctl, frame, ret ? frame[UPA_RIP] : d->vaddr, f[i].at_entry, 0,
			       f[i].final_len, &o, slot);
		else
			fp_walk(ctl, frame, ret ? frame[UPA_RIP] : d->vaddr, f[i].at_entry, 0,
				f[i].final_len, &o, slot);
	}
	r->len = (uint32_t)(o.p - (uint8_t *)r);
	/* what the record did not use goes back, while nobody reserved after it (strings
	   reserve their maximum, ~4 KiB each, and mostly take a few bytes): head first,
	   then the slot, so the drain never walks past head */
	used = (r->len + UPA_REC_ALIGN - 1) & ~(UPA_REC_ALIGN - 1);
	end = at + d->max_record;
	if (used < d->max_record && !cas(&rg->head, &end, at + used, shared))
		used = d->max_record;
	__atomic_store_n(&r->slot, used, __ATOMIC_RELEASE);
}

/* A hit that is to count: aggregated or recorded. */
static void hit(struct upa_ctl *ctl, struct upa_probe *d, const uint64_t *frame, int ret,
		uint64_t dur, int slot)
{
	if (!(d->flags & UPA_P_ENABLED) || !passes(ctl, d, frame, dur))
		return;
	if (d->flags & UPA_P_AGG)
		aggregate(ctl, d, frame, dur, slot);
	else
		record(ctl, d, frame, ret, slot);
}

static inline struct upa_rt *rt_at(struct upa_rt *tab, unsigned order, uint64_t key, unsigned i)
{
	uint64_t mask = (1ull << order) - 1;

	return tab + ((((key >> 3) * 0x9e3779b97f4a7c15ull >> 20) + i) & mask);
}

/* The table of hijacked returns of the thread in slot k. */
static inline struct upa_rt *rt_of_slot(const struct upa_ctl *ctl, unsigned k)
{
	return (struct upa_rt *)ctl->rt_own + ((uint64_t)k << UPA_RT_OWN_ORDER);
}

/* The calling thread's own table of hijacked returns (*j its slot), or NULL: the
   shared table. */
static inline __attribute__((always_inline)) struct upa_rt *rt_own(const struct upa_ctl *ctl,
								   unsigned *j)
{
	int k;

	if (!(ctl->flags & UPA_F_RTOWN) || (k = thread_slot(ctl)) < 0)
		return 0;
	*j = (unsigned)k;
	return rt_of_slot(ctl, *j);
}

/* A return that only counts its duration (UPA_P_AGG1, a $duration key): its stub is in
   the second row, whose code needs no register frame. */
static inline int lean_return(const struct upa_probe *d, uint32_t fl)
{
	const struct upa_agg *a = (const struct upa_agg *)((const struct upa_fetch *)(d + 1) +
							   d->nfetch);

	return fl == (UPA_P_ENABLED | UPA_P_RETURN | UPA_P_AGG | UPA_P_AGG1) &&
	       a->key[0].src == UPA_AGG_DURATION;
}

/*
 * A return probe's entry: the return address at slot is remembered in the thread's
 * own table of returns or the shared one, with the entry's TSC (and the arguments in
 * frame, UPA_P_ENTRY_ARGS).  The stub it is to return to, or 0: not hijacked (a tail
 * call into a probed function, whose first hijack stands; or no room).  The caller
 * writes the stub, which nothing here does.
 */
static inline __attribute__((always_inline)) uint64_t
rt_claim(struct upa_ctl *ctl, struct upa_probe *d, const uint64_t *frame, uint64_t slot)
{
	uint64_t *ra = (uint64_t *)slot, stub;
	uint32_t fl = __atomic_load_n(&d->flags, __ATOMIC_RELAXED);
	struct upa_rt *own, *e = 0;
	unsigned j = 0;

	if (UPA_RT_IS_STUB(*ra, ctl->ret_tramp))
		return 0;
	own = rt_own(ctl, &j);
	for (unsigned i = 0; own && i < UPA_RT_PROBES; i++) {
		struct upa_rt *o = rt_at(own, UPA_RT_OWN_ORDER, slot, i);
		uint64_t k = __atomic_load_n(&o->key, __ATOMIC_RELAXED);

		if (k == slot || k == UPA_RT_FREE || k == UPA_RT_TOMB) {
			/* claimed first: a signal handler's hijack on this thread passes it by */
			__atomic_store_n(&o->key, slot, __ATOMIC_RELAXED);
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			e = o;
			break;
		}
	}
	if (e) {
		stub = ctl->ret_tramp + UPA_RT_STUB * (j + 1);
	} else {
		for (unsigned i = 0; !e && i < UPA_RT_PROBES; i++) {
			struct upa_rt *o = rt_at((struct upa_rt *)ctl->rtab, ctl->rtab_order, slot, i);
			uint64_t k = __atomic_load_n(&o->key, __ATOMIC_ACQUIRE);

			if (k == slot ||
			    ((k == UPA_RT_FREE || k == UPA_RT_TOMB) &&
			     __atomic_compare_exchange_n(&o->key, &k, slot, 0, __ATOMIC_ACQ_REL,
							 __ATOMIC_RELAXED)))
				e = o;
		}
		if (!e) {
			/* the table is full: this return goes unrecorded */
			__atomic_fetch_add(&ctl->ring[0].lost, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&d->lost, 1, __ATOMIC_RELAXED);
			return 0;
		}
		stub = ctl->ret_tramp;
	}
	if (fl & UPA_P_ENTRY_ARGS) {
		e->args[0] = frame[UPA_RDI];
		e->args[1] = frame[UPA_RSI];
		e->args[2] = frame[UPA_RDX];
		e->args[3] = frame[UPA_RCX];
		e->args[4] = frame[UPA_R8];
		e->args[5] = frame[UPA_R9];
	}
	e->orig = *ra;
	e->desc = (uint64_t)d;
	e->tsc = tsc();
	return stub;
}

/* A return probe's entry from upa_entry (the register frame; CPUs without lahf): the
   return address at [rsp] is remembered and replaced by its stub. */
static void hijack(struct upa_ctl *ctl, struct upa_probe *d, const uint64_t *frame)
{
	uint64_t stub = rt_claim(ctl, d, frame, frame[UPA_RSP]);

	/* the entry complete before its stub is in the slot: a detach trusts the orig of
	   an entry whose slot holds a stub (up_site_unhijack) */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (stub)
		*(uint64_t *)frame[UPA_RSP] = stub;
}

/*
 * A return probe's entry from its trampoline on a CPU with lahf: called with no frame
 * (no_caller_saved_registers: it saves what it uses; nothing here may call a function
 * that is not inlined, or every register is saved around it).  The return address at
 * slot is remembered; the trampoline then jumps to slot[-2]: the call site of the stub
 * the function is to return to, whose call writes the stub in the slot, or slot[-1],
 * the function straight on.  No string instruction: DF is the program's.
 */
static __attribute__((noinline, no_caller_saved_registers)) uint64_t
rt_claim_far(struct upa_ctl *ctl, struct upa_probe *d, uint64_t slot)
{
	return rt_claim(ctl, d, (const uint64_t *)(slot - UPA_HIJACK_FRAME), slot);
}

__attribute__((used, no_caller_saved_registers)) void upa_hijack(struct upa_probe *d,
								 uint64_t slot)
{
	struct upa_ctl *ctl = (struct upa_ctl *)d->ctl;
	const uint64_t *owner = (const uint64_t *)ctl->rt_owner;
	uint64_t *ra = (uint64_t *)slot, stub = 0, me;
	uint32_t fl = __atomic_load_n(&d->flags, __ATOMIC_RELAXED);
	unsigned j = 0;

	/* the common case inline, with few registers to save: a thread that has its
	   own table already, the first entry its slot hashes to free, no arguments */
	if ((ctl->flags & (UPA_F_RTOWN | UPA_F_FS0)) == (UPA_F_RTOWN | UPA_F_FS0) && owner &&
	    !(fl & UPA_P_ENTRY_ARGS) && !UPA_RT_IS_STUB(*ra, ctl->ret_tramp)) {
		__asm__ volatile("mov %%fs:0, %0" : "=r"(me));
		while (j < UPA_RT_OWNERS && __atomic_load_n(&owner[j], __ATOMIC_RELAXED) != me)
			j++;
		if (me && j < UPA_RT_OWNERS) {
			struct upa_rt *e = rt_at(rt_of_slot(ctl, j), UPA_RT_OWN_ORDER, slot, 0);
			uint64_t k = __atomic_load_n(&e->key, __ATOMIC_RELAXED);

			if (k == slot || k == UPA_RT_FREE || k == UPA_RT_TOMB) {
				__atomic_store_n(&e->key, slot, __ATOMIC_RELAXED);
				__atomic_signal_fence(__ATOMIC_SEQ_CST);
				e->orig = *ra;
				e->desc = (uint64_t)d;
				e->tsc = tsc();
				stub = ctl->ret_tramp + UPA_RT_STUB * (j + 1);
			}
		}
	}
	if (!stub)
		stub = rt_claim_far(ctl, d, slot);
	if (stub && lean_return(d, fl))
		stub += UPA_RT_LEAN;
	/* (below the slot by address: the words are the function's red zone, not ra's) */
	*(uint64_t *)(slot - 16) = stub ? stub - UPA_RT_CALL_LEN : *(uint64_t *)(slot - 8);
}

/* slot's entry in tab, or NULL */
static inline __attribute__((always_inline)) struct upa_rt *rt_find(struct upa_rt *tab,
								    unsigned order, uint64_t slot)
{
	for (unsigned i = 0; i < UPA_RT_PROBES; i++) {
		struct upa_rt *e = rt_at(tab, order, slot, i);
		uint64_t k = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);

		if (k == slot)
			return e;
		if (k == UPA_RT_FREE)
			break;
	}
	return 0;
}


/* ---- stacks by the unwind tables ---------------------------------------------------- */

/*
 * A walk's reads (sym/unwind_walk.h).  The stack of the thread is read with plain loads
 * from pages found readable (one process_vm_readv of a byte a page, UW_GROW pages at a
 * time, from the hit's rsp up), which stay readable while the thread lives on that
 * stack: its own stack is never unmapped under it.  The pages found are kept for the
 * thread's next walk (ctl->stk, by its slot) while its rsp is in them.  Anything else
 * (a signal frame's other stack, a bad rbp) is read by process_vm_readv: a bad address
 * is an error, never a fault in the program.
 */
#define UW_GROW 16

struct uw {
	struct upa_ctl *ctl;
	const struct upa_uw_dir *dir;
	uint64_t lo, hi; /* pages read with plain loads */
	struct out *o;	 /* every read logged (a record), or NULL */
	struct upa_mem *last; /* the entry last logged */
	int cfi; /* the frame being stepped has a row: its reads are the stack's */
	const struct upa_uw_map *map; /* the last frame's */
	struct upa_uw_cache *cache;   /* the thread's, NULL none */
	struct upa_uw_memo *memo;     /* the reads kept for the memo, NULL none */
	unsigned nrd;		      /* reads kept; past UPA_UW_MEMO_READS: not memoized */
	int live;		      /* the last lookup was in a live table (not cached) */
};

static void uw_grow(struct uw *u, uint64_t to)
{
	struct iov local, remote[UW_GROW];
	uint8_t b[UW_GROW];
	unsigned n = 0;
	long got;

	for (; n < UW_GROW && u->hi + (uint64_t)n * PAGE < to; n++)
		remote[n] = (struct iov){ (void *)(u->hi + (uint64_t)n * PAGE), 1 };
	local = (struct iov){ b, n };
	got = sys6(NR_PROCESS_VM_READV, u->ctl->pid, (long)&local, 1, (long)remote, n, 0);
	if (got > 0)
		u->hi += (uint64_t)got * PAGE;
}

static inline __attribute__((always_inline)) int uw_read(void *ctx, uint64_t addr, void *buf,
							 size_t len)
{
	struct uw *u = ctx;
	int bad;

	/* only where the tables led: a frame-pointer step's rbp may be anything */
	if (u->cfi && addr >= u->lo && addr + len > u->hi && addr + len > addr &&
	    addr + len <= u->hi + (uint64_t)UW_GROW * PAGE)
		uw_grow(u, addr + len);
	if (u->cfi && addr >= u->lo && addr + len <= u->hi && addr + len > addr) {
		if (len == 8) /* the walk's: a word (its alignment the stack's) */
			*(uint64_t *)buf = *(const uint64_t __attribute__((may_alias, aligned(1))) *)addr;
		else
			copy(buf, (const void *)addr, len);
		bad = 0;
		/* the memo keeps the words read (8 or 16 bytes), else is not kept */
		if (u->memo && u->nrd + 2 <= UPA_UW_MEMO_READS && (len == 8 || len == 16)) {
			u->memo->rd[u->nrd].addr = addr;
			u->memo->rd[u->nrd++].v = ((const uint64_t *)buf)[0];
			if (len == 16) {
				u->memo->rd[u->nrd].addr = addr + 8;
				u->memo->rd[u->nrd++].v = ((const uint64_t *)buf)[1];
			}
		} else {
			u->memo = 0;
		}
	} else {
		bad = read_mem(u->ctl, buf, addr, len);
		u->memo = 0;
	}
	if (u->o) {
		u->last = (struct upa_mem *)u->o->p;
		log_mem(u->o, addr, (uint32_t)len, bad ? UPA_MEM_FAULT : 0, buf);
	}
	return bad;
}

/* The row of the file mapped at pc (unwind_walk.h's lookup): the directory's mapping
   (the last frame's first), then the row of its table, as trace/stack.c finds them. */
static __attribute__((noinline)) int uw_lookup_dir(struct uw *u, uint64_t pc,
						  struct up_unwind_row *row)
{
	const struct upa_uw_dir *d = u->dir;
	const struct upa_uw_map *m = u->map;
	const struct up_unwind_table *t;
	uint64_t lo = 0, hi = d->n, vaddr;

	u->cfi = 0;
	if (!m || pc < m->start || pc >= m->end) {
		while (lo < hi) {
			uint64_t mid = lo + (hi - lo) / 2;

			if (d->map[mid].end <= pc)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo >= d->n || pc < d->map[lo].start)
			return -1;
		m = u->map = &d->map[lo];
	}
	row->cfa = UP_UW_NONE;
	t = (const struct up_unwind_table *)m->table;
	if (t && (t->flags & UP_UNWIND_LIVE)) {
		/* a page of trampolines, rewritten in place: its rows are not cached nor
		   a walk through them kept */
		u->live = 1;
		u->memo = 0;
	}
	if (!t || up_unwind_vaddr(t, pc - m->start + m->offset, &vaddr) ||
	    !up_unwind_row_at(t, vaddr, row))
		return 0;
	u->cfi = row->cfa != UP_UW_UNKNOWN && row->cfa != UP_UW_NONE && row->cfa != UP_UW_TRAMP;
	return 1;
}

/* The lookup through the thread's cache of rows by pc: a walk of a stack seen before
   looks nothing up (libc's rows are 340 KB: a bisection missing the cache a frame). */
static inline __attribute__((always_inline)) int uw_lookup(void *ctx, uint64_t pc,
							   struct up_unwind_row *row)
{
	struct uw *u = ctx;
	struct upa_uw_cent *e;
	struct up_unwind_row found; /* the walk's row stays in registers: not passed on */
	int k;

	if (!u->cache) {
		k = uw_lookup_dir(u, pc, &found);
		*row = found;
		return k;
	}
	e = &u->cache->e[(pc ^ pc >> 8 ^ pc >> 16) & (UPA_UW_CACHE_N - 1)];
	if (e->pc == pc) {
		*row = *(const struct up_unwind_row *)e->row;
		k = e->k;
		u->cfi = k == 1 && row->cfa != UP_UW_UNKNOWN && row->cfa != UP_UW_NONE;
		return k;
	}
	u->live = 0;
	k = uw_lookup_dir(u, pc, &found);
	*row = found;
	if (u->live)
		return k;
	e->pc = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	*(struct up_unwind_row *)e->row = *row;
	e->k = k;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	e->pc = pc;
	return k;
}

/* A return address read at slot: where the function really returns to, when one of our
   return trampoline's stubs stands there (its stub names the table of its entry); in a
   record, the logged word is made that address too, so the tracer's walk on the record
   sees what this one saw. */
static __attribute__((noinline)) uint64_t uw_ret_stub(struct uw *u, uint64_t slot,
							  uint64_t value)
{
	const struct upa_ctl *ctl = u->ctl;
	uint64_t v = value - ctl->ret_tramp, orig;
	struct upa_rt *e;
	unsigned k;

	k = (unsigned)(v % UPA_RT_LEAN / UPA_RT_STUB);
	if (k && k <= UPA_RT_OWNERS)
		e = rt_find(rt_of_slot(ctl, k - 1), UPA_RT_OWN_ORDER, slot);
	else
		e = rt_find((struct upa_rt *)ctl->rtab, ctl->rtab_order, slot);
	if (!e)
		return value;
	orig = e->orig;
	if (u->last && !(u->last->flags & UPA_MEM_FAULT) && slot >= u->last->addr &&
	    slot + 8 <= u->last->addr + u->last->len)
		copy((uint8_t *)(u->last + 1) + (slot - u->last->addr), &orig, 8);
	return orig;
}

static inline __attribute__((always_inline)) uint64_t uw_ret(void *ctx, uint64_t slot,
							      uint64_t value)
{
	struct uw *u = ctx;
	uint64_t stub, r;

	if (value - u->ctl->ret_tramp >= 2 * UPA_RT_LEAN && value + 1 > UPA_RT_OWNERS)
		return value; /* not a stub: the common case, inline */
	u->memo = 0; /* the stub's return is in a table, not in the words read */
	if (value - u->ctl->ret_tramp < 2 * UPA_RT_LEAN)
		return uw_ret_stub(u, slot, value);
	/* the table's number (-1 the shared one's) that a stub pushed into the slot on
	   its way home (upa_ret_common, upa_ret_lean): that table's stub's return */
	stub = u->ctl->ret_tramp + (value + 1) * UPA_RT_STUB;
	r = uw_ret_stub(u, slot, stub);
	return r == stub ? value : r;
}

/* The pages of the thread's stack found readable by its last walk, while its rsp is in
   them (else none yet: the rsp's page on) */
static inline void stk_load(struct uw *u, int slot, uint64_t sp)
{
	uint64_t c = 0;

	if (slot >= 0 && slot < UPA_RT_OWNERS)
		c = __atomic_load_n(&u->ctl->stk[slot], __ATOMIC_RELAXED);
	if (c && sp >= UPA_STK_LO(c) && sp < UPA_STK_HI(c)) {
		u->lo = UPA_STK_LO(c);
		u->hi = UPA_STK_HI(c);
	} else {
		u->lo = u->hi = sp & ~(uint64_t)(PAGE - 1);
	}
}

static inline void stk_store(struct uw *u, int slot, uint64_t sp)
{
	if (slot >= 0 && slot < UPA_RT_OWNERS && u->hi > u->lo && sp >= u->lo && sp < u->hi &&
	    (u->hi - u->lo) / PAGE < 0xffffff)
		__atomic_store_n(&u->ctl->stk[slot], UPA_STK(u->hi, (u->hi - u->lo) / PAGE),
				 __ATOMIC_RELAXED);
}

/* The thread's memo (abi.h struct upa_uw_memo) of a walk with these inputs, its words
   still on the stack pages and unchanged: its frames into w, their number; else 0. */
static inline unsigned memo_take(const struct uw *u, const struct upa_uw_memo *m, uint64_t pc,
				 uint64_t sp, uint64_t bp, int at_entry, unsigned max,
				 uint64_t *w)
{
	uint64_t diff = 0;
	unsigned n = m->n, nrd = m->nrd;

	if (!n || n > max || nrd > UPA_UW_MEMO_READS || m->dir != (uint64_t)u->dir ||
	    m->pc != pc || m->sp != sp || m->bp != bp || m->at_entry != (uint32_t)at_entry ||
	    m->max != max)
		return 0;
	for (unsigned i = 0; i < nrd; i++) /* in range first: nothing else is loaded */
		if (m->rd[i].addr < u->lo || m->rd[i].addr > u->hi - 8)
			return 0;
	for (unsigned i = 0; i < nrd; i++) /* loads that do not wait on each other */
		diff |= *(const volatile uint64_t *)m->rd[i].addr ^ m->rd[i].v;
	if (diff)
		return 0;
	for (unsigned i = 0; i < n; i++)
		w[i] = m->out[i];
	return n;
}

/* The stack at the hit (pc; the frame's rsp and rbp) by the unwind tables: into w
   (frames, pc first) when not NULL, every read into o when not NULL.  The frames.
   One copy (the walk and its callbacks inlined in it) for records and stack keys.
   A stack key (w, no o) is taken from the thread's memo where its inputs match. */
static __attribute__((noinline)) unsigned unwind(struct upa_ctl *ctl, const uint64_t *frame, uint64_t pc, int at_entry,
		       uint64_t *w, unsigned max, struct out *o, int slot)
{
	uint64_t sp = frame[UPA_RSP], bp = frame[UPA_RBP], buf[UPA_AGG_KEY_WORDS];
	struct uw u = { ctl, (const struct upa_uw_dir *)__atomic_load_n(&ctl->uw_dir,
									  __ATOMIC_ACQUIRE),
			0, 0, o, 0, 0, 0, 0, 0, 0, 0 };
	struct upa_uw_memo *m = 0;
	unsigned n;

	if (max > UPA_AGG_KEY_WORDS)
		max = UPA_AGG_KEY_WORDS;
	if (slot == SLOT_UNKNOWN)
		slot = thread_slot(ctl);
	stk_load(&u, slot, sp);
	if (slot >= 0 && slot < UPA_RT_OWNERS && ctl->uw_cache) {
		struct upa_uw_cache *c = (struct upa_uw_cache *)ctl->uw_cache + slot;

		if (!c->busy) { /* else a walk this signal handler interrupted has it */
			c->busy = 1;
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			if (c->dir != (uint64_t)u.dir) { /* the maps changed: all stale */
				for (unsigned i = 0; i < UPA_UW_CACHE_N; i++)
					c->e[i].pc = 0;
				c->dir = (uint64_t)u.dir;
			}
			u.cache = c;
			if (w && !o && max <= UPA_UW_MEMO_FRAMES) {
				m = &c->memo[(sp >> 4 ^ pc >> 2) & (UPA_UW_MEMOS - 1)];
				n = memo_take(&u, m, pc, sp, bp, at_entry, max, w);
				if (n) {
					m->miss = 0;
					goto done;
				}
				if (m->miss < 0x80000000u)
					m->miss++;
				if (m->miss <= 8 || !(m->miss & 15)) {
					m->n = 0; /* kept anew below, or not at all */
					u.memo = m;
				}
			}
		}
	}
	n = up_unwind_walk(pc, sp, bp, at_entry, uw_lookup, &u, uw_read, uw_ret, &u,
			   w ? w : buf, max);
	if (m && u.memo && n) {
		m->dir = (uint64_t)u.dir;
		m->pc = pc;
		m->sp = sp;
		m->bp = bp;
		m->at_entry = (uint32_t)at_entry;
		m->max = max;
		m->nrd = u.nrd;
		for (unsigned i = 0; i < n; i++)
			m->out[i] = w[i];
		m->n = n;
	}
done:
	if (u.cache) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		u.cache->busy = 0;
	}
	stk_store(&u, slot, sp);
	return n;
}


/* The frame-pointer walk, where the process has no unwind tables (UPROBE_STACKS=fp:
   make bench's floor): [rsp] at an entry, then [rbp + 8] of each frame while [rbp]
   goes up, read as the unwind walk reads (plain loads on the stack pages found
   readable, process_vm_readv elsewhere, every read logged), so that it costs what a
   walk costs and nothing more; trace/stack.c up_stack_walk reads the same. */
static __attribute__((noinline)) unsigned fp_walk(struct upa_ctl *ctl, const uint64_t *frame,
						  uint64_t pc, int at_entry, uint64_t *w,
						  unsigned max, struct out *o, int slot)
{
	uint64_t sp = frame[UPA_RSP], fp = frame[UPA_RBP], pair[2];
	struct uw u = { ctl, 0, 0, 0, o, 0, 1, 0, 0, 0, 0, 0 };
	unsigned n = 0;

	if (!max)
		return 0;
	if (slot == SLOT_UNKNOWN)
		slot = thread_slot(ctl);
	stk_load(&u, slot, sp);
	if (w)
		w[n] = pc;
	n++;
	if (at_entry && n < max && !uw_read(&u, sp, &pair[1], 8) && pair[1]) {
		if (w)
			w[n] = pair[1];
		n++;
	}
	while (n < max && fp && !(fp & 7)) {
		if (uw_read(&u, fp, pair, 16) || !pair[1])
			break;
		if (w)
			w[n] = pair[1];
		n++;
		if (pair[0] <= fp)
			break;
		fp = pair[0];
	}
	stk_store(&u, slot, sp);
	return n;
}

/*
 * Called by the return trampolines: records the return, gives back where it goes.
 * table: the thread's own table the entry went into (its stub's number), or -1: the
 * shared one.
 */
__attribute__((used)) uint64_t upa_return(uint64_t *frame, struct upa_ctl *ctl, int64_t table)
{
	uint64_t slot = frame[UPA_RSP] - 8;
	struct upa_rt *e;
	struct upa_probe *d;
	uint64_t orig, t, dur;
	uint32_t fl;

	/* the stub says the thread's slot; a return through the shared table does not */
	int ts = table >= 0 && table < UPA_RT_OWNERS ? (int)table : SLOT_UNKNOWN;

	if (ts >= 0)
		e = rt_find(rt_of_slot(ctl, (unsigned)ts), UPA_RT_OWN_ORDER, slot);
	else
		e = rt_find((struct upa_rt *)ctl->rtab, ctl->rtab_order, slot);
	if (!e)
		return 0; /* not ours: cannot happen while the tables are intact */
	orig = e->orig;
	t = tsc() - e->tsc;
	d = (struct upa_probe *)e->desc;
	dur = (uint64_t)((unsigned __int128)t * ctl->ns_mult >> 32);
	fl = __atomic_load_n(&d->flags, __ATOMIC_RELAXED);
	if (fl & UPA_P_ENTRY_ARGS)
		for (unsigned i = 0; i < 6; i++)
			frame[UPA_ENTRY_ARG + i] = e->args[i];
	/* the slot the real return address before the entry goes (upa_ret_common writes
	   it again): a stack walked meanwhile, by a signal's handler, finds the caller */
	*(uint64_t *)slot = orig;
	__atomic_store_n(&e->key, UPA_RT_TOMB, __ATOMIC_RELEASE);
	frame[UPA_RIP] = orig;
	if ((fl & ~UPA_P_ENTRY_ARGS) == (UPA_P_ENABLED | UPA_P_RETURN | UPA_P_AGG | UPA_P_AGG1))
		aggregate1(ctl, d, frame, dur, ts);
	else
		hit(ctl, d, frame, 1, dur, ts);
	return orig;
}

/* The blob's first word (the trampolines' asm below): the ctl's address. */
extern struct upa_ctl *const upa_ctl_word __attribute__((visibility("hidden")));

/*
 * A return through a stub of the second row (lean_return): the duration counted with
 * no register frame (no_caller_saved_registers, as upa_hijack), the real return address
 * put in the slot (which held the stub's table number), 1.  0 when the probe is no
 * longer what the row is for (disabled meanwhile): nothing is done, and the trampoline
 * goes on to the full path, upa_return.
 */
static __attribute__((noinline, no_caller_saved_registers)) uint64_t
return_lean_far(uint64_t *slotp)
{
	struct upa_ctl *ctl = upa_ctl_word;
	uint64_t slot = (uint64_t)slotp, t;
	int64_t table = (int64_t)*slotp;
	int ts = table >= 0 && table < UPA_RT_OWNERS ? (int)table : SLOT_UNKNOWN;
	struct upa_rt *e;
	struct upa_probe *d;

	if (ts >= 0)
		e = rt_find(rt_of_slot(ctl, (unsigned)ts), UPA_RT_OWN_ORDER, slot);
	else
		e = rt_find((struct upa_rt *)ctl->rtab, ctl->rtab_order, slot);
	if (!e)
		return 0;
	d = (struct upa_probe *)e->desc;
	if (!lean_return(d, __atomic_load_n(&d->flags, __ATOMIC_RELAXED)))
		return 0;
	t = tsc() - e->tsc;
	*slotp = e->orig;
	__atomic_store_n(&e->key, UPA_RT_TOMB, __ATOMIC_RELEASE);
	agg1_count(ctl, (struct upa_agg *)((struct upa_fetch *)(d + 1) + d->nfetch),
		   (uint64_t)((unsigned __int128)t * ctl->ns_mult >> 32), ts);
	return 1;
}

static __attribute__((noinline, no_caller_saved_registers)) void
agg1_count_far(const struct upa_ctl *ctl, struct upa_agg *a, uint64_t v, int slot)
{
	agg1_count(ctl, a, v, slot);
}

__attribute__((used, no_caller_saved_registers)) uint64_t upa_return_lean(uint64_t *slotp)
{
	struct upa_ctl *ctl = upa_ctl_word;
	uint64_t slot = (uint64_t)slotp, table = *slotp;

	/* the common case inline (as upa_hijack's): the thread's own table, the entry
	   where the slot hashes, a log2 key, the key's entry where it hashes in the
	   thread's own table of the aggregation */
	if (table < UPA_RT_OWNERS) {
		struct upa_rt *e = rt_at(rt_of_slot(ctl, (unsigned)table), UPA_RT_OWN_ORDER, slot, 0);
		struct upa_probe *d = (struct upa_probe *)e->desc;

		if (__atomic_load_n(&e->key, __ATOMIC_ACQUIRE) == slot &&
		    __atomic_load_n(&d->flags, __ATOMIC_RELAXED) ==
			    (UPA_P_ENABLED | UPA_P_RETURN | UPA_P_AGG | UPA_P_AGG1)) {
			struct upa_agg *a = (struct upa_agg *)((struct upa_fetch *)(d + 1) + d->nfetch);
			uint64_t t = tsc() - e->tsc, dur, v, h, *s;

			*slotp = e->orig;
			__atomic_store_n(&e->key, UPA_RT_TOMB, __ATOMIC_RELEASE);
			dur = (uint64_t)((unsigned __int128)t * ctl->ns_mult >> 32);
			if (a->key[0].xform == UPA_AGG_LOG2 && table < a->ntables - 1) {
				v = upa_agg_log2_key(dur, a->key[0].buckets);
				h = upa_agg_hash(&v, 1);
				s = (uint64_t *)a->tables +
				    (((uint64_t)table << a->order) + (h & ((1ull << a->order) - 1))) *
					    a->entry_words;
				if (__atomic_load_n(s, __ATOMIC_ACQUIRE) == h && s[1] == v) {
					add(&s[2], 1, 0);
					return 1;
				}
			}
			agg1_count_far(ctl, a, dur, (int)table);
			return 1;
		}
	}
	return return_lean_far(slotp);
}

/*
 * The return trampoline, at the blob's start: a probed function returned here, rsp
 * just above where its return address was.  That slot, dead now, receives the real
 * address; every register and the flags are as the function left them when the real
 * return happens.  The blob's first word is the ctl's address (the tracer writes it).
 */
__asm__(".section .text.entry0,\"ax\",@progbits\n"
	".globl upa_ctl_word\n"
	".hidden upa_ctl_word\n"
	"upa_ctl_word:\n"
	"	.quad 0\n"
	"	.quad upa_ret_tramp_lahf\n" /* UPA_RET_LAHF_AT: the faster one's offset */
	"	.balign 16\n"
	".globl upa_ret_tramp\n"
	"upa_ret_tramp:\n"
	"	lea -8(%rsp),%rsp\n"		/* the slot for the real return address */
	"	pushfq\n"
	"	cld\n"
	"	lea -216(%rsp),%rsp\n"		/* a struct user_regs_struct frame */
	"	mov %r15,0(%rsp)\n	mov %r14,8(%rsp)\n	mov %r13,16(%rsp)\n"
	"	mov %r12,24(%rsp)\n	mov %rbp,32(%rsp)\n	mov %rbx,40(%rsp)\n"
	"	mov %r11,48(%rsp)\n	mov %r10,56(%rsp)\n	mov %r9,64(%rsp)\n"
	"	mov %r8,72(%rsp)\n	mov %rax,80(%rsp)\n	mov %rcx,88(%rsp)\n"
	"	mov %rdx,96(%rsp)\n	mov %rsi,104(%rsp)\n	mov %rdi,112(%rsp)\n"
	"	mov 216(%rsp),%rax\n	mov %rax,144(%rsp)\n"	/* eflags */
	"	lea 232(%rsp),%rax\n	mov %rax,152(%rsp)\n"	/* rsp after the return */
	"	mov %rsp,%rdi\n"
	"	mov upa_ctl_word(%rip),%rsi\n"		/* the ctl */
	"	mov $-1,%rdx\n"			/* the shared table */
	"	call upa_return\n"
	"	mov %rax,224(%rsp)\n"
	"	mov 48(%rsp),%r11\n	mov 56(%rsp),%r10\n	mov 64(%rsp),%r9\n"
	"	mov 72(%rsp),%r8\n	mov 80(%rsp),%rax\n	mov 88(%rsp),%rcx\n"
	"	mov 96(%rsp),%rdx\n	mov 104(%rsp),%rsi\n	mov 112(%rsp),%rdi\n"
	"	lea 216(%rsp),%rsp\n"
	"	popfq\n"
	"	ret\n"
	/* upa_touch(lo = rdi, pages = rsi > 0), run by the tracer (up_task_call): a write
	   in each of the pages from lo, from user mode, before any hit needs one: the region at
	   attach, a ring before its thread records.  A hypervisor may fill its own page
	   tables only at a first user access (~5 us a page; a fresh 4 MiB ring costed ~140
	   ns a record in its first lap), and the kernel's writes (MADV_POPULATE_WRITE, a
	   read into it) do not count.  A locked or of 0: the same value is written back,
	   and a thread writing a record there meanwhile loses nothing. */
	"	.org 224\n" /* UPA_TOUCH_OFF */
	"upa_touch:\n"
	"1:	lock orb $0,(%rdi)\n"
	"	add $4096,%rdi\n"
	"	dec %esi\n"
	"	jnz 1b\n"
	/* the end; a thread resumed past it without its trap (a stop the tracer reaped,
	   then died) traps again, and the safety net gives it back */
	"2:	int3\n"
	"	jmp 2b\n"
	"	.org 248\n" /* UPA_HIJACK_AT */
	"	.quad upa_hijack\n"
	".previous\n");

/*
 * The same trampoline without popfq (~5 ns of a return): the flags a function's return
 * hands its caller are put back by hand, SF ZF AF PF CF with sahf, OF with the add
 * $0x7f trick; DF is 0 at any return (the ABI), so cld changes nothing.  For CPUs with
 * lahf in 64-bit mode; the tracer picks it (UPA_RET_LAHF_AT: its first stub).  Two rows
 * of units (abi.h, UPA_RT_STUB): a call site, which a return probe's entry trampoline
 * goes on through into the function, and a stub: the first unit of a row for a return
 * hijacked into the shared table, then one per thread's own table (UPA_F_RTOWN); each
 * stub pushes its table's number into the slot the real return address takes later,
 * so the return need not look for it.  The first row's stubs go to the full path (a
 * register frame, upa_return), the second's to the lean one (upa_return_lean).
 */
/* CFI (for stacks a signal interrupts here): a unit is entered by a jump with rsp at
   the slot, which holds the return address; then rsp is just above it, which the call
   fills with the stub's address and the stub with its table's number (the walk's
   return lookup knows both: unwind_walk.h's ret) */
#define UPA_RT_ROW(common)                                                                 \
	"	.irp n, 0xff,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"                          \
	"	.cfi_startproc\n"                                                              \
	"	lea 8(%rsp),%rsp\n" /* rsp above the slot, which the call fills */            \
	"	.cfi_adjust_cfa_offset -8\n"                                                   \
	"	call *-16(%rsp)\n"  /* into the function: [slot - 8] */                      \
	"	.byte 0x6a, \\n\n"  /* the stub: push $n */                                   \
	"	.cfi_adjust_cfa_offset 8\n"                                                    \
	"	.byte 0xe9\n	.long " common " - . - 4\n"                                       \
	"	.cfi_endproc\n"                                                                \
	"	.endr\n"
__asm__(".text\n"
	"	.balign 16\n"
	"upa_rt_units:\n"
	".globl upa_ret_tramp_lahf\n"
	"upa_ret_tramp_lahf = upa_rt_units + 9\n" /* UPA_RT_CALL_LEN: the first stub */
	UPA_RT_ROW("upa_ret_common")
	UPA_RT_ROW("upa_ret_lean")
	/* CFI (the blob's .eh_frame, for stacks a signal interrupts here): the slot is
	   the return address; it holds the table's number until upa_return* writes the
	   real return address there */
	"upa_ret_lean:\n"			/* the slot: the table's number */
	"	.cfi_startproc\n"
	"	push %rax\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	seto %al\n"
	"	lahf\n"
	"	push %rax\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	lea 24(%rsp),%rdi\n"		/* the slot */
	"	call upa_return_lean\n"		/* saves what it uses */
	"	test %rax,%rax\n"
	"	pop %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rax\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	jz 1f\n"
	"	add $0x7f,%al\n"
	"	sahf\n"
	"	.cfi_remember_state\n"
	"	pop %rax\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	ret\n"				/* the slot: the real return address */
	"	.cfi_restore_state\n"
	"1:	add $0x7f,%al\n"			/* not lean after all: the full path */
	"	sahf\n"
	"	pop %rax\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"upa_ret_common:\n"
	"	lea -8(%rsp),%rsp\n"		/* the flags' word; the table's number in the slot */
	"	.cfi_adjust_cfa_offset 8\n"
	"	lea -216(%rsp),%rsp\n"
	"	.cfi_adjust_cfa_offset 216\n"
	"	mov %r15,0(%rsp)\n	mov %r14,8(%rsp)\n	mov %r13,16(%rsp)\n"
	"	mov %r12,24(%rsp)\n	mov %rbp,32(%rsp)\n	mov %rbx,40(%rsp)\n"
	"	mov %r11,48(%rsp)\n	mov %r10,56(%rsp)\n	mov %r9,64(%rsp)\n"
	"	mov %r8,72(%rsp)\n	mov %rax,80(%rsp)\n	mov %rcx,88(%rsp)\n"
	"	mov %rdx,96(%rsp)\n	mov %rsi,104(%rsp)\n	mov %rdi,112(%rsp)\n"
	"	seto %al\n"
	"	lahf\n"
	"	mov %rax,216(%rsp)\n"		/* al: OF; ah: SF ZF AF PF CF */
	"	cld\n"
	"	movzbl %ah,%ecx\n	movzbl %al,%eax\n	shl $11,%eax\n"
	"	or %ecx,%eax\n	or $0x202,%eax\n"
	"	mov %rax,144(%rsp)\n"		/* eflags, for the frame's readers */
	"	lea 232(%rsp),%rax\n	mov %rax,152(%rsp)\n"	/* rsp after the return */
	"	mov %rsp,%rdi\n"
	"	mov upa_ctl_word(%rip),%rsi\n"
	"	mov 224(%rsp),%rdx\n"		/* the table's number */
	"	call upa_return\n"
	"	mov %rax,224(%rsp)\n"
	"	mov 48(%rsp),%r11\n	mov 56(%rsp),%r10\n	mov 64(%rsp),%r9\n"
	"	mov 72(%rsp),%r8\n	mov 88(%rsp),%rcx\n"
	"	mov 96(%rsp),%rdx\n	mov 104(%rsp),%rsi\n	mov 112(%rsp),%rdi\n"
	"	mov 216(%rsp),%rax\n"
	"	add $0x7f,%al\n"			/* OF */
	"	sahf\n"
	"	mov 80(%rsp),%rax\n"
	/* home by a ret: the function's ret into the stub was predicted, its call site's
	   call having pushed it onto the return stack buffer, whose top is the caller's
	   return address again (a return hijacked by upa_entry, with no call, is
	   mispredicted once more here, and is still right) */
	"	lea 224(%rsp),%rsp\n"
	"	.cfi_adjust_cfa_offset -224\n"
	"	ret\n"
	"	.cfi_endproc\n");

__attribute__((section(".text.entry1"), used, force_align_arg_pointer)) void
upa_entry(uint64_t *frame, struct upa_probe *d)
{
	struct upa_ctl *ctl = (struct upa_ctl *)d->ctl;
	uint32_t fl = __atomic_load_n(&d->flags, __ATOMIC_RELAXED);

	if (fl == (UPA_P_ENABLED | UPA_P_AGG | UPA_P_AGG1)) {
		aggregate1(ctl, d, frame, 0, SLOT_UNKNOWN);
		return;
	}
	if (fl & UPA_P_RETURN) {
		hijack(ctl, d, frame); /* also while disabled: the return decides */
		return;
	}
	hit(ctl, d, frame, 0, 0, SLOT_UNKNOWN);
}
