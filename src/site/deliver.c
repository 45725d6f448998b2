// SPDX-License-Identifier: MIT
/*
 * Record delivery: the agent's ring drained into each probe's record_handler (or
 * raw spans), trap-path hits made records, the aggregating probes' tables read out,
 * and returns the agent hijacked sent home.  It never blocks the traced program and
 * never writes its text.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "site/internal.h"

struct agg_sum {
	uint64_t hits;
};

static void agg_sum_one(void *arg, const uint64_t *key, unsigned nkey, const uint64_t *val,
			unsigned nval)
{
	(void)key, (void)nkey, (void)nval;
	((struct agg_sum *)arg)->hits += val[0];
}

/* An aggregating site's hits so far: its tables' counts and the hits they dropped. */
uint64_t agg_hits(struct up_sites *mm, struct up_patched *f)
{
	struct agg_sum s = { 0 };
	uint64_t dropped = 0;

	if (mm->agent)
		up_agent_agg_read(mm->agent, f->desc, agg_sum_one, &s, &dropped);
	return s.hits + dropped;
}

/* What a struct uprobe_record's priv points to: a record of the ring, or a trap-path
   hit, whose memory is the live process's. */
struct rec_priv {
	const struct up_agent_rec *ar; /* NULL: a trap-path hit */
	struct up_proc *p; /* a trap-path hit's process */
};

struct deliver_arg {
	struct up_sites *mm;
};

_Static_assert(sizeof(struct user_regs_struct) == UPA_NREGS * 8, "the agent's frame is a user_regs_struct");

static void deliver(void *arg, const struct up_agent_rec *r)
{
	struct up_sites *mm = ((struct deliver_arg *)arg)->mm;
	struct up_patched *f = r->id < mm->nrecp ? mm->recp[r->id] : NULL;
	union {
		struct user_regs_struct ur;
		uint64_t w[UPA_NREGS];
	} u = { .w = { 0 } };
	struct uprobe_record rec;
	struct rec_priv rp;
	unsigned k = 0;

	if (!f || !f->u)
		return;
	/* the frame's words are user_regs_struct's, in its order */
	for (uint64_t regs = f->regs; regs && k < r->nregs; regs &= regs - 1)
		u.w[__builtin_ctzll(regs)] = r->regs[k++];
	if (!r->is_return)
		u.ur.rip = f->site.vaddr;
	rec.is_return = r->is_return;
	rec.pid = mm->pid;
	rec.tid = r->tid;
	rec.cpu = (int)r->cpu;
	rec.time_ns = r->time_ns;
	rec.regs = &u.ur;
	rp.ar = r;
	rp.p = mm->p;
	rec.priv = &rp;
	f->nrec++;
	mm->ctx->stats->records++;
	f->u->record_handler(f->u, &rec);
}

struct put_back {
	struct up_proc *p;
	uint64_t tramp;
};

static void put_back_one(void *arg, uint64_t slot, uint64_t orig)
{
	struct put_back *pb = arg;
	uint64_t cur = 0;

	/* the trampoline's stubs: the shared table's, then one per thread's table */
	if (!up_proc_read(pb->p, slot, &cur, sizeof(cur)) && UPA_RT_IS_STUB(cur, pb->tramp))
		up_proc_write(pb->p, slot, &orig, sizeof(orig));
}

/*
 * The returns the agent hijacked go straight home again in p: mm's own process at
 * detach, or a fork child, whose copy of the stack has them but which has no agent
 * (MADV_DONTFORK).
 *
 * Only a slot that holds a stub is rewritten, and no entry is dropped: the agent's
 * code and tables stay mapped after a detach, and a thread stopped inside a hijack or
 * a return finishes it there on its own once it runs.  A stopped thread can be
 *   - in the entry, the entry claimed but the stub not yet in the slot (upa_hijack
 *     after its key store, the trampoline's way on to the call site, the call site;
 *     hijack() before its store): the slot holds the real address and is left alone;
 *     the thread writes the stub and returns through its entry;
 *   - at a stub (the function has returned, rsp is above the slot): the real address
 *     written into the dead slot is overwritten by the stub's push, and the return
 *     goes on to its entry;
 *   - in a return before the entry is taken (upa_ret_lean, upa_return_lean,
 *     upa_ret_common, upa_return; upa_ret_tramp, whose own return slot that is): the
 *     slot holds the table's number or the real address, or (upa_ret_tramp) the stub,
 *     which the trampoline overwrites with upa_return's answer; the entry is there;
 *   - after its entry was taken: nothing here concerns it.
 * An entry is complete before its stub is in a slot (the claim comes first), so orig
 * is right wherever a stub is.  Dropping the entries here (as detach did) made every
 * thread of the first two kinds return to 0, and one stopped in a return before
 * taking its entry too.  What stays is an entry for each return put back here, which
 * no lookup is misled by: the slot's next claim takes it or an entry before it in the
 * order rt_find reads them, as after a longjmp.
 */
void up_site_unhijack(struct up_sites *mm, struct up_proc *p)
{
	struct put_back pb = { p, 0 };

	if (!mm->agent)
		return;
	pb.tramp = up_agent_ret_tramp(mm->agent);
	up_agent_for_each_return(mm->agent, put_back_one, &pb);
}

struct find_return {
	uint64_t slot, orig;
	bool found;
};

static void find_return_one(void *arg, uint64_t slot, uint64_t orig)
{
	struct find_return *fr = arg;

	if (slot == fr->slot && !fr->found) {
		fr->orig = orig;
		fr->found = true;
	}
}

int up_site_agent_return(struct up_sites *mm, uint64_t slot, uint64_t value, uint64_t *orig)
{
	struct find_return fr = { slot, 0, false };

	/* a stub, or the table's number a stub pushed into the slot on its way home */
	if (!mm || !mm->agent ||
	    (!UPA_RT_IS_STUB(value, up_agent_ret_tramp(mm->agent)) && value + 1 > UPA_RT_OWNERS))
		return -ENOENT;
	up_agent_for_each_return(mm->agent, find_return_one, &fr);
	if (!fr.found)
		return -ENOENT;
	*orig = fr.orig;
	return 0;
}

/* A raw record's probe: the uprobe's raw_id, counted as delivered. */
static uint32_t raw_probe_of(void *arg, uint32_t id)
{
	struct up_sites *mm = ((struct deliver_arg *)arg)->mm;
	struct up_patched *f = id < mm->nrecp ? mm->recp[id] : NULL;

	if (!f || !f->u)
		return UPROBE_RAW_SKIP;
	f->nrec++;
	mm->ctx->stats->records++;
	return f->u->raw_id;
}

static void raw_span(void *arg, const void *recs, size_t len)
{
	struct up_sites *mm = ((struct deliver_arg *)arg)->mm;

	mm->ctx->opts->raw_handler(mm->ctx->opts->arg, recs, len);
}

/* ---- the spool (design.md section 14) ---- */

/* A record for the spool: its probe's agent id, the record left out if the probe is
   gone.  Counted when delivered. */
static uint32_t spool_probe_of(void *arg, uint32_t id)
{
	struct up_sites *mm = ((struct deliver_arg *)arg)->mm;
	struct up_patched *f = id < mm->nrecp ? mm->recp[id] : NULL;

	return f && f->u ? id : UPROBE_RAW_SKIP;
}

static void spool_put(void *arg, const void *recs, size_t len)
{
	struct up_sites *mm = ((struct deliver_arg *)arg)->mm;

	up_spool_push(&mm->ctx->spool, recs, len);
}

static void spool_stats(struct up_site_ctx *c)
{
	c->stats->spool_peak_mem = c->spool.peak_mem;
	c->stats->spool_peak_file = c->spool.peak_file;
	c->stats->spool_spilled = c->spool.spilled;
	c->stats->spool_dropped = c->spool.dropped;
	if (c->spool.why && c->opts->log) {
		c->opts->log(c->opts->log_arg, c->spool.why);
		free(c->spool.why);
		c->spool.why = NULL;
		c->spool.file_failed = true;
	}
}

/* mm's rings copied into the spool, as much as it has room for, up to budget bytes
   (the rest waits in the rings: the threads wait for room, or drop, as --when-full
   says); the bytes taken. */
static size_t spool_copy(struct up_sites *mm, size_t budget)
{
	struct deliver_arg a = { mm };
	size_t room = up_spool_room(&mm->ctx->spool);

	room = room < budget ? room : budget;
	up_agent_heartbeat(mm->agent);
	return room ? up_agent_drain_copy(mm->agent, (pid_t)mm->spool_id, room, spool_probe_of,
					  spool_put, &a)
		    : 0;
}

void up_site_spool_warm(struct up_site_ctx *c)
{
	/* a default ring's worth: what one thread's first burst leaves to copy */
	if (c->spooling)
		up_spool_warm(&c->spool, 4u << 20);
}

static struct up_sites *space_of(struct up_site_ctx *c, uint32_t id)
{
	for (struct up_sites *s = c->spaces; s; s = s->next)
		if (s->spool_id == id)
			return s;
	return NULL;
}

bool up_site_spool_deliver(struct up_site_ctx *c, uint64_t until_ns)
{
	const struct uprobe_raw_rec *r;
	struct up_sites *mm = NULL;
	unsigned n = 0;
	bool left = false, any = false;

	if (c->spool_busy)
		return !up_spool_empty(&c->spool);
	c->spool_busy = true;
	while ((r = up_spool_next(&c->spool))) {
		struct deliver_arg a;
		struct up_agent_rec v;

		if (!mm || mm->spool_id != (uint32_t)r->pid)
			mm = space_of(c, (uint32_t)r->pid);
		/* a space's records are delivered before it goes (up_site_drain): none
		   are left of one gone, but a record of it would be skipped */
		if (mm && mm->agent) {
			a.mm = mm;
			up_agent_rec_of_raw(mm->agent, r, r->probe, &v);
			deliver(&a, &v);
		}
		any = true;
		if (until_ns && !(++n & 63) && up_mono_ns() >= until_ns) {
			left = !up_spool_empty(&c->spool);
			break;
		}
	}
	if (any && c->opts->on_records)
		c->opts->on_records(c->opts->arg);
	spool_stats(c);
	c->spool_busy = false;
	return left;
}

/*
 * mm's rings to record_handler (or raw_handler), all they hold now: before a trap-path
 * hit's handlers, a site's or a process's going, a switch.  With the spool, what it
 * holds goes first (every space's: it is one queue), then the rings' records through
 * it.
 */
void up_site_drain(struct up_sites *mm)
{
	struct deliver_arg a = { mm };
	struct up_site_ctx *c = mm->ctx;
	unsigned n;

	if (!mm->agent || mm->draining)
		return;
	mm->draining = true;
	if (c->spooling) {
		/* a bounded number of rounds: threads that keep writing do not keep the
		   tracer here (each copy takes the heads once) */
		for (int i = 0; i < 4; i++) {
			size_t room = up_spool_room(&c->spool), took = spool_copy(mm, SIZE_MAX);

			up_site_spool_deliver(c, 0);
			if (took < room || !room)
				break;
		}
		mm->draining = false;
		return;
	}
	up_agent_heartbeat(mm->agent);
	if (c->opts->raw_handler)
		n = up_agent_drain_raw(mm->agent, mm->pid, raw_probe_of, raw_span, &a);
	else
		n = up_agent_drain(mm->agent, deliver, &a);
	if (n && c->opts->on_records)
		c->opts->on_records(c->opts->arg);
	mm->draining = false;
}

/* How long the spool's records are handed out before the rings are copied again: a
   hot thread fills a 4 MiB ring in ~1.5 ms. */
#define SPOOL_SLICE_NS 500000ull
/* How much of a space's rings one pass copies before the stops waiting are served:
   the spool's fresh memory faults in as it is written (~3 ms a MiB on this guest), and
   a thread exiting meanwhile waited for all of it (2 threads of 32,768 six-argument
   records: the last exit to the join 1.1-3.6 ms whole, 0.3-1.5 ms in slices).  The loop
   comes back at once while a pass takes this much (up_site_drain_ms). */
#define SPOOL_COPY_SLICE (512u << 10)

void up_site_drain_all(struct up_site_ctx *c)
{
	unsigned fill = 0;

	for (struct up_sites *s = c->spaces; s; s = s->next) {
		if (!s->agent)
			continue;
		if (c->spooling) {
			if (!s->draining)
				spool_copy(s, SPOOL_COPY_SLICE);
		} else {
			up_site_drain(s);
		}

		/* what the drain took, not what the region says is there: see up_agent_fill */
		unsigned f = up_agent_fill(s->agent);

		fill = f > fill ? f : fill;
	}
	if (c->spooling && !up_spool_empty(&c->spool)) {
		up_site_spool_deliver(c, up_mono_ns() + SPOOL_SLICE_NS);
		fill = fill > 4 ? fill : 4; /* more to do: come back at once */
	}
	c->ring_fill = fill;
	if (fill)
		c->rec_seen_ns = up_mono_ns();
}

void up_site_finish(struct up_site_ctx *c)
{
	for (struct up_sites *s = c->spaces; s; s = s->next)
		if (s->agent)
			up_agent_quiet(s->agent);
	/* a thread that looked at the flag before it changed may still be writing a
	   record: the drain takes what is complete, the detach's the rest */
	for (struct up_sites *s = c->spaces; s; s = s->next)
		up_site_drain(s);
}

bool up_site_any_agent(const struct up_site_ctx *c)
{
	for (const struct up_sites *s = c->spaces; s; s = s->next)
		if (s->agent)
			return true;
	return false;
}

/*
 * How soon the fast path's rings are read again while nothing stops: at once while a
 * drain took a 64th of a ring or more; every millisecond in the 200 ms after records came (or
 * a recording site was placed); else every 10 ms.  A 4 MiB ring holds ~45,000 records
 * of six registers, written at ~30 ns each by one hot thread (1.4 ms): sleeping 10 ms
 * lost half of a 0.2 s run's records.
 */
int up_site_drain_ms(const struct up_site_ctx *c)
{
	if (c->ring_fill >= 4)
		return 0;
	return up_mono_ns() - c->rec_seen_ns < 200000000ull ? 1 : 10;
}

int uprobe_record_read(const struct uprobe_record *rec, uint64_t addr, void *buf, size_t len)
{
	const struct rec_priv *rp = rec ? rec->priv : NULL;

	if (!rp)
		return -EINVAL;
	if (!rp->ar)
		return up_proc_read(rp->p, addr, buf, len);
	return up_agent_rec_read(rp->ar, addr, buf, len);
}

/* A recording probe without a handler hit on the trap path: a record of the live
   registers, its memory read from the process (the thread is stopped meanwhile). */
void up_site_record_trap_hit(struct up_proc *p, struct up_task *t, struct uprobe *u,
			     struct user_regs_struct *regs, bool is_return)
{
	struct rec_priv rp = { NULL, p };
	struct uprobe_record rec = {
		.pid = up_proc_pid(p),
		.tid = up_task_tid(t),
		.is_return = is_return,
		.cpu = -1,
		.regs = regs,
		.priv = &rp,
	};

	rec.time_ns = up_mono_ns();
	u->record_handler(u, &rec);
}

struct agg_out {
	struct uprobe *u;
	uint64_t hits;
	void (*fn)(void *arg, const struct uprobe_agg_entry *e);
	void *arg;
};

static void agg_one(void *arg, const uint64_t *key, unsigned nkey, const uint64_t *val,
		    unsigned nval)
{
	struct agg_out *o = arg;
	struct uprobe_agg_entry e = { key, nkey, val, nval };

	o->hits += val[0];
	o->fn(o->arg, &e);
}

static void agg_to_handler(void *arg, const struct uprobe_agg_entry *e)
{
	struct uprobe *u = arg;

	u->agg_handler(u, e);
}

/* Every entry of an aggregating site's tables to fn, then the dropped count; the hits. */
uint64_t agg_emit(struct up_sites *mm, struct up_patched *f,
		  void (*fn)(void *arg, const struct uprobe_agg_entry *e), void *arg)
{
	struct agg_out o = { f->u, 0, fn, arg };
	struct uprobe_agg_entry e = { NULL, 0, NULL, 1 };
	uint64_t dropped = 0;

	if (!mm->agent)
		return 0;
	up_agent_agg_read(mm->agent, f->desc, agg_one, &o, &dropped);
	e.val = &dropped;
	fn(arg, &e);
	return o.hits + dropped;
}

/* A recording site's counts go into its uprobe (it is leaving the fast path); an
   aggregating one's tables go to its agg_handler. */
void rec_settle(struct up_sites *mm, struct up_patched *f)
{
	uint64_t filtered = 0, lost = 0;

	if (mm->agent)
		up_agent_probe_counts(mm->agent, f->desc, &filtered, &lost);
	if (f->agg && f->u->agg_handler)
		f->u->nhits += agg_emit(mm, f, agg_to_handler, f->u);
	else if (f->agg)
		f->u->nhits += agg_hits(mm, f);
	f->u->nhits += f->nrec + filtered + lost;
	f->u->nlost += lost;
	mm->ctx->stats->records_lost += lost;
	mm->ctx->stats->records_filtered += filtered;
	f->nrec = 0;
}
