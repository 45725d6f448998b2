// SPDX-License-Identifier: MIT
/*
 * --format raw: hits written to the trace file unformatted (the format is trace/raw.h;
 * `uprobe report` formats them later).  The fast path's records go as the ring held
 * them, with the names of their threads before them; a trap-path hit is made into the
 * same record, its reads of the process kept in it as the agent keeps its captures.
 *
 * It never formats; a failed write stops the trace, as a failed write of lines does.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/raw.h"
#include "trace/session_int.h"

/* A failed write of the file stops the trace, as a failed write of lines does. */
void tr_raw_check(struct up_trace *tr, int rc)
{
	if (rc && !tr->out_failed) {
		tr->out_failed = -rc;
		if (tr->ctx)
			uprobe_ctx_break(tr->ctx);
	}
}

/* The thread's name goes into the file before its first record. */
static void raw_thread(struct up_trace *tr, pid_t pid, pid_t tid)
{
	struct comm_entry *c = &tr->comms[(unsigned)tid % COMM_CACHE];
	int cpu;

	/* the name cache says which threads the file has named, and since when */
	if (!tid || (c->tid == tid && c->in_raw))
		return;
	if (c->tid != tid || !c->comm[0])
		c = tr_thread_info(tr, pid, tid, &cpu);
	c->in_raw = true;
	tr_raw_check(tr, up_raw_write_thread(tr->opts.out, pid, tid, c->comm));
}

/* The fast path's records, as the ring held them: named threads, then the bytes. */
void tr_cb_raw(void *arg, const void *recs, size_t len)
{
	struct up_trace *tr = arg;
	const uint8_t *b = recs;

	if (tr->out_failed)
		return;
	for (size_t at = 0; at + sizeof(struct uprobe_raw_rec) <= len;) {
		const struct uprobe_raw_rec *r = (const void *)(b + at);

		if (r->probe != UPROBE_RAW_SKIP) {
			raw_thread(tr, r->pid, r->tid);
			tr->raw_records++;
		}
		if (!r->size)
			break;
		at += r->size;
	}
	tr_raw_check(tr, up_raw_write_records(tr->opts.out, recs, len));
}

/* The frame words p's records hold: its capture's, or all of them. */
static uint64_t raw_regs(const struct tprobe *p)
{
	return p->recording ? p->cap.regs | BIT(rip)
			    : (1ull << (sizeof(struct user_regs_struct) / 8)) - 1;
}

void tr_raw_site(struct up_trace *tr, const struct tprobe *p)
{
	struct up_raw_site s = {
		.probe = p->u.raw_id,
		.event = p->ts->index,
		.pid = p->tp->pid,
		.is32 = p->tp->is32,
		.vaddr = p->u.vaddr,
		.bias = p->file_bias,
		.regs = raw_regs(p),
	};

	tr_raw_check(tr, up_raw_write_site(tr->opts.out, &s));
}

static int raw_grow(struct up_trace *tr, size_t more)
{
	size_t words = (tr->raw_len + more + 7) / 8;

	if (words * 8 <= tr->raw_cap)
		return 0;
	words = words * 2 + 64;
	uint64_t *nb = realloc(tr->raw_buf, words * 8);

	if (!nb)
		return -ENOMEM;
	tr->raw_buf = nb;
	tr->raw_cap = words * 8;
	return 0;
}

/* A trap-path hit's reads: done on the process, kept in the record as the agent would. */
static int raw_read(void *arg, uint64_t addr, void *buf, size_t len)
{
	struct read_ctx *rc = arg;
	struct up_trace *tr = rc->tr;
	int ret = tr_read_mem(rc, addr, buf, len);
	struct uprobe_raw_mem m = { addr, (uint32_t)len, ret ? UPROBE_RAW_FAULT : 0 };
	size_t need = sizeof(m) + (ret ? 0 : (len + 7) / 8 * 8);

	if (len > UINT32_MAX || raw_grow(tr, need))
		return ret;
	memcpy((uint8_t *)tr->raw_buf + tr->raw_len, &m, sizeof(m));
	tr->raw_len += sizeof(m);
	if (!ret) {
		memset((uint8_t *)tr->raw_buf + tr->raw_len, 0, need - sizeof(m));
		memcpy((uint8_t *)tr->raw_buf + tr->raw_len, buf, len);
		tr->raw_len += need - sizeof(m);
	}
	return ret;
}

/* A trap-path hit, written as the agent writes a record (its filter applied first). */
void tr_raw_trap(struct tprobe *p, uprobe_regs_t *regs, bool is_return, const struct hit *h,
		 const struct up_fetch_env *env)
{
	struct up_trace *tr = p->tr;
	struct tspec *ts = p->ts;
	const uint64_t *w = (const uint64_t *)regs;
	uint64_t mask = raw_regs(p), dur = 0;
	struct read_ctx rc = { .tr = tr, .pid = h->pid };
	struct up_fetch_value vals[ts->spec.nargs ? ts->spec.nargs : 1];
	static char arena[64 * 1024];
	struct uprobe_raw_rec r = {
		.probe = p->u.raw_id,
		.flags = is_return ? UPROBE_RAW_RET : 0,
		.pid = h->pid,
		.tid = h->tid,
		.time_ns = h->time_ns,
	};

	tr->raw_len = 0;
	if (raw_grow(tr, sizeof(r) + 8u * (unsigned)__builtin_popcountll(mask)))
		return;
	tr->raw_len = sizeof(r);
	for (uint64_t m = mask; m; m &= m - 1) {
		tr->raw_buf[tr->raw_len / 8] = w[__builtin_ctzll(m)];
		tr->raw_len += 8;
	}
	{
		/* the caller's environment, its reads kept as the record's memory */
		struct up_fetch_env keep = *env;

		keep.read = raw_read;
		keep.ctx = &rc;
		/* a $ustack walk by the unwind tables: uprobe report walks it again over
		   the record's memory with the maps the file holds (tr_raw_maps) */
		keep.comm = tr_comm_cached(tr, h->pid, h->tid);
		up_fetch_eval_all(&ts->spec, &keep, vals, arena, sizeof(arena));
	}
	if (is_return)
		uprobe_current_duration(tr->ctx, &dur);
	if (!tr_filter_holds(ts, vals, dur, tr_comm_cached(tr, h->pid, h->tid)))
		return;
	r.len = r.size = (uint32_t)tr->raw_len;
	memcpy(tr->raw_buf, &r, sizeof(r));
	raw_thread(tr, h->pid, h->tid);
	tr->raw_records++;
	tr_raw_check(tr, up_raw_write_records(tr->opts.out, tr->raw_buf, tr->raw_len));
	if (tr->opts.flush && fflush(tr->opts.out))
		tr_raw_check(tr, errno ? -errno : -EIO);
}
