// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the tracer's readers of the fast path's shared region (src/agent/ring.c)
 * -- the live drain, the raw drain, the aggregation reader, the fill and the counts --
 * fed region contents a hostile traced process could write (docs/design.md, "The trust
 * boundary").
 *
 * The tracer's side is fixed: a region made in this process (up_agent_new_local) with
 * three probes, two that record and one that aggregates, and a baseline the agent could
 * have written (records in two rings, entries in the table).  The input is a list of
 * patches over the region -- [window][offset: 2 bytes][n][n bytes], the window one of
 * the ctl page, a ring, the descriptor heap -- applied in two rounds with a drain
 * between them (a target writing while the tracer reads).  Whatever they say:
 *
 *   - every record handed out has its probe's register count and a length within its
 *     probe's largest, its memory entries within it;
 *   - raw spans are whole records: each size a multiple of 8, at least a header, no
 *     more than what is left, len within size, a probe the caller named;
 *   - the aggregation reader hands out the key and value counts the tracer set;
 *   - nothing reads or writes outside the region (ASan), and nothing hangs (-timeout).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uprobe/uprobe.h>

#include "agent/abi.h"
#include "agent/ring.h"
#include "task/task.h"
#include "xol.h"

#define CHECK(cond)                                                                       \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "fuzz_region: check failed: %s (%s:%d)\n", #cond, \
				__FILE__, __LINE__);                                      \
			abort();                                                          \
		}                                                                         \
	} while (0)

/* What ring.c needs of a process, never called for a local region: weak, so that the
   replay build takes the library's own and scripts/fuzz.sh links ring.c alone. */
#define WEAK __attribute__((weak))
WEAK const uint8_t up_agent_blob[UPA_ENTRY_OFF + 16];
WEAK const size_t up_agent_blob_size = UPA_ENTRY_OFF + 16;
WEAK int up_task_syscall(struct up_task *t, long nr, const uint64_t args[6], int64_t *ret)
{
	return -ENOSYS;
}
WEAK int up_task_syscalls(struct up_task *t, uint64_t code, struct up_task_rsys *calls,
			  unsigned n)
{
	return -ENOSYS;
}
WEAK int up_task_call(struct up_task *t, uint64_t fn, uint64_t end, uint64_t a0, uint64_t a1)
{
	return -ENOSYS;
}
WEAK struct up_proc *up_task_proc(const struct up_task *t)
{
	return NULL;
}
WEAK pid_t up_proc_pid(const struct up_proc *p)
{
	return 0;
}
WEAK int up_proc_write_text(struct up_proc *p, uint64_t addr, const void *buf, size_t len)
{
	return -ENOSYS;
}
WEAK int up_xol_find_gap(struct up_proc *p, uint64_t near, uint64_t size, uint64_t *addr)
{
	return -ENOSYS;
}
WEAK bool up_patch_have_lahf(void)
{
	return false;
}

#define RING	(4096u)
#define P_REGS	((1ull << UPA_RDI) | (1ull << UPA_RSI) | (1ull << UPA_RIP))
#define Q_REGS	(1ull << UPA_RIP)
#define NPROBES 3

struct fz {
	struct up_agent *a;
	uint64_t desc[NPROBES];
	uint32_t id[NPROBES];
	uint32_t max_record[NPROBES];
	unsigned nregs[NPROBES];
	uint8_t *map;	  /* the region (its addresses are ours) */
	uint8_t *ring[2]; /* rings 0 and 1, as the tracer placed them */
	unsigned nrec, nraw, nagg;
};

static uint8_t *ring_at(struct fz *z, unsigned k)
{
	return z->ring[k];
}

/* A record as the agent writes it: header, regs, one string entry. */
static uint32_t put_record(uint8_t *at, uint32_t id, unsigned nregs, uint64_t tsc, bool str)
{
	struct upa_rec *r = (struct upa_rec *)at;
	uint8_t *p = at + sizeof(*r);
	uint32_t len;

	for (unsigned i = 0; i < nregs; i++, p += 8)
		memcpy(p, &(uint64_t){ 0x1000 + i }, 8);
	if (str) {
		struct upa_mem m = { 0x7000, 6, UPA_MEM_STRING };

		memcpy(p, &m, sizeof(m));
		memcpy(p + sizeof(m), "hello", 6);
		p += sizeof(m) + 8;
	}
	len = (uint32_t)(p - at);
	r->id = id;
	r->len = len;
	r->cpu = 1;
	r->thread = 0x1234;
	r->tsc = tsc;
	r->slot = (len + UPA_REC_ALIGN - 1) & ~(UPA_REC_ALIGN - 1);
	return r->slot;
}

static int setup(struct fz *z)
{
	struct upa_fetch f = { .base = UPA_BASE_REG,
			       .reg = UPA_RDI,
			       .reg_size = 8,
			       .size = 8,
			       .final = UPA_FINAL_STRING,
			       .final_len = 64 };
	struct upa_fetch kf = { .base = UPA_BASE_REG, .reg = UPA_RSI, .reg_size = 8, .size = 8 };
	struct upa_agg g = { .order = 2, .nkeys = 1, .nvals = 1 };
	struct upa_cond nc[1] = { { 0 } }; /* none: the library copies zero of them */
	struct upa_probe d;
	struct upa_ctl *ctl;

	memset(z, 0, sizeof(*z));
	if (up_agent_new_local(RING, &z->a))
		return -1;
	z->map = up_agent_region(z->a);
	ctl = (struct upa_ctl *)z->map;
	for (unsigned k = 0; k < 2; k++)
		z->ring[k] = (uint8_t *)(uintptr_t)ctl->ring[k].base;
	d = (struct upa_probe){
		.flags = UPA_P_ENABLED, .vaddr = 0x401000, .regs = P_REGS, .nfetch = 1
	};
	CHECK(!up_agent_probe_add(z->a, &d, &f, nc, NULL, &z->desc[0], &z->id[0]));
	z->max_record[0] = d.max_record;
	z->nregs[0] = 3;
	d = (struct upa_probe){ .flags = UPA_P_ENABLED, .vaddr = 0x401100, .regs = Q_REGS };
	CHECK(!up_agent_probe_add(z->a, &d, &f, nc, NULL, &z->desc[1], &z->id[1]));
	z->max_record[1] = d.max_record;
	z->nregs[1] = 1;
	g.key[0] = (struct upa_agg_key){ .src = UPA_AGG_FETCH, .xform = UPA_AGG_LOG2, .words = 1 };
	g.val[0] = (struct upa_agg_val){ .src = UPA_AGG_FETCH, .op = UPA_AGG_SUM };
	d = (struct upa_probe){ .flags = UPA_P_ENABLED, .vaddr = 0x401200, .regs = 0, .nfetch = 1 };
	CHECK(!up_agent_probe_add(z->a, &d, &kf, nc, &g, &z->desc[2], &z->id[2]));

	/* the baseline: records in ring 0 (shared) and ring 1, a few table entries */
	for (unsigned k = 0; k < 2; k++) {
		uint8_t *ring = ring_at(z, k);
		uint64_t at = 0;

		for (unsigned i = 0; i < 6; i++)
			at += put_record(ring + at, z->id[i & 1], z->nregs[i & 1], 100 * i + k,
					 !(i & 1));
		ctl->ring[k].head = at;
	}
	{
		const struct upa_probe *pd = (const struct upa_probe *)(uintptr_t)z->desc[2];
		const struct upa_agg *pg = (const struct upa_agg *)((const uint8_t *)(pd + 1) +
								    sizeof(struct upa_fetch));
		uint64_t *t = (uint64_t *)(uintptr_t)pg->tables;

		for (unsigned i = 0; i < 3; i++, t += pg->entry_words) {
			t[0] = 0x1000 + i; /* a hash */
			t[1] = i;	   /* the key */
			t[2] = 10 + i;	   /* hits */
			t[3] = 7;	   /* the sum */
		}
	}
	return 0;
}

/* The windows of the region an input writes. */
static uint8_t *window(struct fz *z, unsigned w, size_t *len)
{
	const struct upa_probe *pd = (const struct upa_probe *)(uintptr_t)z->desc[0];

	switch (w % 6) {
	case 0:
		*len = 4096; /* the ctl: heads, tails, flags, everything */
		return z->map;
	case 1:
	case 2:
		*len = RING;
		return ring_at(z, 0);
	case 3:
	case 4:
		*len = RING;
		return ring_at(z, 1);
	default:
		*len = 4096; /* the descriptors and the aggregation's geometry and tables */
		return (uint8_t *)pd;
	}
}

/* Applies patches from data until half (round 0) or all of them are used. */
static size_t patch(struct fz *z, const uint8_t *data, size_t size, size_t at, size_t stop)
{
	while (at + 4 <= size && at < stop) {
		size_t wlen, off, n;
		uint8_t *w = window(z, data[at], &wlen);

		off = ((size_t)data[at + 1] | (size_t)data[at + 2] << 8) % wlen;
		n = data[at + 3];
		at += 4;
		if (n > size - at)
			n = size - at;
		if (n > wlen - off)
			n = wlen - off;
		memcpy(w + off, data + at, n);
		at += n;
	}
	return at;
}

static void on_rec(void *arg, const struct up_agent_rec *r)
{
	struct fz *z = arg;
	unsigned p;
	uint8_t buf[64];

	for (p = 0; p < 2 && z->id[p] != r->id; p++)
		;
	CHECK(p < 2);
	CHECK(r->nregs == z->nregs[p]);
	CHECK(sizeof(struct upa_rec) + 8u * r->nregs + r->memlen <= z->max_record[p]);
	for (unsigned i = 0; i < r->nregs; i++)
		z->nrec += (unsigned)(r->regs[i] & 1);
	if (r->memlen) {
		(void)up_agent_rec_read(r, 0x7000, buf, 6);
		(void)up_agent_rec_read(r, r->regs[0], buf, sizeof(buf));
	}
	z->nrec++;
}

static uint32_t raw_probe_of(void *arg, uint32_t id)
{
	struct fz *z = arg;

	return id == z->id[0] ? 100 : id == z->id[1] ? 101 : UPROBE_RAW_SKIP;
}

static void on_raw(void *arg, const void *recs, size_t len)
{
	struct fz *z = arg;
	const uint8_t *b = recs;
	size_t at = 0;

	while (at < len) {
		struct uprobe_raw_rec r;

		CHECK(len - at >= sizeof(r));
		memcpy(&r, b + at, sizeof(r));
		CHECK(r.size >= sizeof(r) && r.size % 8 == 0 && r.size <= len - at);
		CHECK(r.len >= sizeof(r) && r.len <= r.size);
		CHECK(r.probe == 100 || r.probe == 101);
		at += r.size;
		z->nraw++;
	}
	CHECK(at == len);
}

static void on_agg(void *arg, const uint64_t *key, unsigned nkey, const uint64_t *val,
		   unsigned nval)
{
	struct fz *z = arg;

	CHECK(nkey == 1 && nval == 2);
	z->nagg += (unsigned)(key[0] + val[0] + val[1]) & 1;
	z->nagg++;
}

static void read_all(struct fz *z, bool raw)
{
	uint64_t dropped, filtered, lost;

	if (raw)
		up_agent_drain_raw(z->a, 1, raw_probe_of, on_raw, z);
	else
		up_agent_drain(z->a, on_rec, z);
	up_agent_agg_read(z->a, z->desc[2], on_agg, z, &dropped);
	up_agent_agg_read(z->a, z->desc[0], on_agg, z, &dropped); /* records: no table */
	for (unsigned p = 0; p < NPROBES; p++)
		up_agent_probe_counts(z->a, z->desc[p], &filtered, &lost);
	(void)up_agent_fill(z->a);
	(void)up_agent_lost(z->a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz z;
	bool raw;
	size_t at;

	if (!size || setup(&z))
		return 0;
	raw = data[0] & 1;
	at = patch(&z, data, size, 1, size / 2);
	read_all(&z, raw);
	patch(&z, data, size, at, size);
	read_all(&z, raw);
	up_agent_free(z.a);
	return 0;
}
