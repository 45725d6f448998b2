// SPDX-License-Identifier: MIT
/*
 * Probes placed for the specs, in each traced process, and taken out again.  tr_arm_proc
 * places every spec that resolves in a process now (highest address first, see
 * arm_order), and asks maps.c to hook the dynamic linker while some file is not mapped
 * yet; probes go when their file is unmapped, their spec is removed or changed, their
 * process execs or exits, their counts kept in the spec.
 *
 * It never frees a probe whose unregistration may still be under way (the library can
 * handle an exec inside unregister_uprobe): those are retired and freed later.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "trace/raw.h"
#include "trace/session_int.h"

/* Does an r: event read $argN (the entry's arguments)? */
/* Does a spec walk stacks ($ustack, a stacktrace key)? */
static bool walks_stacks(const struct up_trace *tr)
{
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];

		for (unsigned k = 0; ts->hist && k < ts->hist->nkeys; k++)
			if (ts->hist->key[k].src == UP_HIST_SRC_STACK)
				return true;
		for (int a = 0; a < ts->spec.nargs; a++)
			if (ts->spec.args[a].nops &&
			    ts->spec.args[a].ops[ts->spec.args[a].nops - 1].op == UP_FOP_USTACK)
				return true;
	}
	return false;
}

/* The process's executable mappings into the raw file, where its stacks are walked:
   report walks and names them by these (a library mapped later: again). */
static void raw_map_fn(void *arg, uint64_t start, uint64_t end, uint64_t offset, uint64_t ino,
		       const char *path)
{
	struct tproc *tp = arg;
	struct up_raw_map m = { .pid = tp->pid, .start = start, .end = end, .offset = offset,
				.ino = ino };

	tr_raw_check(tp->tr, up_raw_write_map(tp->tr->opts.out, &m, path));
}

void tr_raw_maps(struct up_trace *tr, struct tproc *tp)
{
	struct up_stack_syms *s;

	if (!tr->opts.raw || tr->out_failed || !walks_stacks(tr) || !(s = tr_syms_of(tp)))
		return;
	up_stack_syms_load(s);
	up_stack_syms_each(s, raw_map_fn, tp);
}

static bool uses_entry_args(const struct tspec *ts)
{
	if (ts->spec.kind != UP_SPEC_EVENT || !ts->spec.is_return)
		return false;
	for (int i = 0; i < ts->spec.nargs; i++)
		for (int k = 0; k < ts->spec.args[i].nops; k++)
			if (ts->spec.args[i].ops[k].op == UP_FOP_ARG)
				return true;
	return false;
}

/* Why a probe could not be placed, in the user's terms. */
static const char *reg_error(int rc)
{
	if (rc == -EEXIST)
		return "an int3 is already there: the program's own, a debugger's, or a kernel "
		       "uprobe's (listed in /sys/kernel/tracing/uprobe_events)";
	return strerror(-rc);
}

static void on_registered(struct uprobe *u, int reg, int result)
{
	struct tprobe *p = u->data;

	if (reg && result)
		tr_log(p->tr, "'%s': cannot probe 0x%" PRIx64 " in process %d: %s", p->ts->text,
		       u->vaddr, (int)u->pid, reg_error(result));
}

/* A USDT probe's semaphore goes up where the probe is placed (trace/refctr.h). */
static void ref_get(struct up_trace *tr, struct tproc *tp, struct tprobe *p)
{
	uint64_t a = up_refctr_vaddr(tp->pid, p->ts->dev, p->ts->ino, p->ts->spec.ref_ctr_offset);
	int rc = a ? up_refctr_get(&tp->refs, tp->pid, a) : -ENOENT;

	if (rc)
		tr_log(tr, "'%s': cannot set its semaphore in process %d: %s", p->ts->text,
		       (int)tp->pid, strerror(-rc));
	else
		p->ref_addr = a;
}

/* An event whose arguments a 32-bit process cannot give (r8-r15, the 8-byte frames
   of $ustack) is refused there, once, saying which. */
static int args_for_32bit(struct up_trace *tr, struct tspec *ts, pid_t pid)
{
	for (int k = 0; k < ts->spec.nargs; k++) {
		const struct up_fetch_arg *a = &ts->spec.args[k];

		if (!up_fetch_arg_check(a, true))
			continue;
		tr_log(tr,
		       "'%s': argument %s=%s cannot be fetched in process %d: it is 32-bit "
		       "(%s)",
		       ts->text, a->name, a->comm, (int)pid,
		       a->type.kind == UP_TYPE_STACK ? "$ustack walks 8-byte frames" :
						       "no such register there");
		ts->fatal = true;
		return -EINVAL;
	}
	return 0;
}

static int arm_one(struct up_trace *tr, struct tproc *tp, unsigned i)
{
	struct tspec *ts = tr->specs[i];
	struct tprobe *p;
	uint64_t vaddr, bias = 0;
	int rc;

	if (tp->armed[i] || ts->fatal || ts->removed)
		return 0;
	if (ts->spec.kind == UP_SPEC_SEED) {
		pid_t want = ts->spec.pid ? ts->spec.pid : tr->launched;

		if (want != tp->pid)
			return 0;
		if (ts->spec.seed_type == UP_SEED_ARGS && tp->is32) {
			/* as the seed: A reads the x86_64 argument registers */
			tr_log(tr,
			       "'%s': A is for 64-bit processes only; process %d is 32-bit "
			       "(use S to dump the stack, where its arguments are)",
			       ts->text, (int)tp->pid);
			ts->fatal = true;
			ts->arm_failed = true;
			return -EINVAL;
		}
		vaddr = ts->spec.addr;
	} else if (tp->is32 && (rc = args_for_32bit(tr, ts, tp->pid))) {
		ts->arm_failed = true;
		return rc;
	} else if (!ts->is_file) {
		char why[384];

		vaddr = ts->spec.vaddr;
		if (ts->spec.is_return && tr_check_return_vaddr(tr, tp->pid, vaddr, why, sizeof(why))) {
			tr_log(tr, "'%s': process %d: %s", ts->text, (int)tp->pid, why);
			tp->armed[i] = true; /* do not try again in this image */
			ts->arm_failed = true;
			return -EINVAL;
		}
	} else {
		vaddr = tr_vaddr_of(tr, tp->pid, ts->dev, ts->ino, ts->file_off);
		if (!vaddr)
			return 0; /* not mapped (yet) */
		bias = vaddr - ts->file_off;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->tr = tr;
	p->ts = ts;
	p->tp = tp;
	p->file_bias = bias;
	p->u.pid = tp->pid;
	p->u.vaddr = vaddr;
	p->u.raw_id = tr->raw_next++;
	p->u.data = p;
	p->u.registration_callback = on_registered;
	if (ts->spec.kind == UP_SPEC_EVENT && ts->spec.is_return) {
		p->u.ret_handler = tr_on_ret;
		p->eargs = uses_entry_args(ts);
		if (p->eargs) /* on the trap path the entry keeps them (the agent does too) */
			p->u.handler = tr_on_entry;
	} else if (!tr->opts.out && ts->spec.kind == UP_SPEC_EVENT && !tr->opts.no_fast &&
		   !ts->hist && !ts->hit_fn)
		/* only counted (-c): the library counts, on the fast path where it can */
		p->u.flags = UPROBE_F_COUNT;
	else
		p->u.handler = tr_on_hit;
	/* the session's own (the comm watch) stay on the trap path: their hit must bump the
	   names before the thread goes on to its next probe (a record read later let a
	   thread that renamed itself hit a probe under its old name: run.tracecomm under
	   ASan, once the exits of other threads no longer read the rings) */
	if ((p->u.handler || p->u.ret_handler) && !ts->internal && tr_build_capture(tr, p) &&
	    tr->opts.verbose > 0 &&
	    !tr->opts.no_fast && (tr->opts.out || ts->hist))
		tr_log(tr, "'%s': stays on the trap path in process %d: %s", ts->text, (int)tp->pid,
		       tp->is32 ? "a 32-bit process" :
		       tr_filter_trap_reason(tr, ts) ? tr_filter_trap_reason(tr, ts) :
		       ts->hist ? "a key or value the agent cannot compute (common_pid, $comm)" :
				  "an argument the agent cannot fetch");
	if (tr->opts.verbose > 0 && (ts->filt.n || ts->hfilt.n))
		tr_log(tr, "'%s': filtered %s in process %d", ts->text,
		       !p->recording	   ? "by the tracer on the trap path" :
		       ts->tracer_filter ? "by the tracer on the fast path's records" :
					   "in the process by the agent",
		       (int)tp->pid);
	rc = register_uprobe(tr->ctx, &p->u);
	if (rc && rc != -EINPROGRESS) {
		tr_log(tr, "'%s': cannot probe 0x%" PRIx64 " in process %d: %s", ts->text, vaddr,
		       (int)tp->pid, reg_error(rc));
		tr_probe_free(p);
		tp->armed[i] = true; /* do not try again in this image */
		ts->arm_failed = true;
		return rc;
	}
	p->next = tp->probes;
	tp->probes = p;
	tp->armed[i] = true;
	if (ts->is_file && ts->spec.ref_ctr_offset)
		ref_get(tr, tp, p);
	if (tr->opts.raw) {
		tr_raw_site(tr, p); /* before any of its records: they are drained later */
		tr_raw_maps(tr, tp);
	}
	if (p->recording && !tr_probe_on(tr, p))
		uprobe_set_enabled(tr->ctx, &p->u, false);
	if (tr->opts.verbose > 0)
		tr_log(tr, "'%s': armed at 0x%" PRIx64 " in process %d", ts->text, vaddr,
		       (int)tp->pid);
	return 0;
}

/* A counting probe leaves: its count so far stays with its spec. */
/* Does the library keep this probe's hits (a counting probe, or the fast path's
   records with what was lost or filtered in-process)? */
static bool lib_counts(const struct tprobe *p)
{
	return (p->u.flags & UPROBE_F_COUNT) || (p->recording && !p->counted);
}

void tr_keep_count(struct up_trace *tr, struct tprobe *p)
{
	uint64_t n;

	if (lib_counts(p) && !uprobe_count(tr->ctx, &p->u, &n)) {
		p->ts->hits += n;
		if (!uprobe_lost(tr->ctx, &p->u, &n)) {
			tr->lost += n;
			p->ts->lost += n;
		}
		p->u.flags &= ~UPROBE_F_COUNT; /* counted once */
		p->counted = true;
	}
}

/* Retired probes whose queued unregistration has been applied (a handler's queue runs
   when it returns) are freed now, not at the end: a loop of dlopen/dlclose grew them. */
static void free_retired(struct up_trace *tr)
{
	struct tprobe **pp = &tr->retired;

	if (tr->disarming)
		return; /* one of them is still being unregistered further up the stack */
	while (*pp) {
		struct tprobe *p = *pp;

		if (p->u.kimg) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		tr_probe_free(p);
	}
}

/* Probes whose file is no longer mapped there (dlclose) go; they are armed again if it comes back. */
static void disarm_unmapped(struct up_trace *tr, struct tproc *tp)
{
	struct tprobe **pp = &tp->probes;
	unsigned drops;

	free_retired(tr);
	while (*pp) {
		struct tprobe *p = *pp;
		struct tspec *ts = p->ts;

		if (!ts->is_file ||
		    tr_vaddr_of(tr, tp->pid, ts->dev, ts->ino, ts->file_off) == p->u.vaddr) {
			pp = &p->next;
			continue;
		}
		/* the library may handle an exec in there, whose tr_drop_probes would free p:
		   it retires them instead, and none is freed meanwhile */
		tr->disarming++;
		drops = tp->drops;
		unregister_uprobe(tr->ctx, &p->u); /* a recording probe's last records first */
		tr->disarming--;
		if (tp->drops != drops)
			return; /* an exec it handled dropped them all (retired, p among them) */
		tr_keep_count(tr, p);
		if (p->ref_addr)
			up_refctr_forget(&tp->refs, p->ref_addr); /* unmapped with the file */
		tp->armed[ts->index] = false;
		*pp = p->next;
		if (p->u.kimg) {
			/* queued from a handler: the uprobe must outlive its unregistration */
			p->next = tr->retired;
			tr->retired = p;
		} else {
			tr_probe_free(p);
		}
	}
}

/*
 * The order probes are armed in: by address, the highest first (a file's specs by
 * their offset in it), specs at one address in the order given.  A punned jmp's rel32
 * ends in the bytes after its instruction; armed after its neighbours it ends in their
 * jmps, as they stay, and does not have to move as each comes (E9Patch patches in
 * reverse order for the same reason).
 */
/* Where a spec's probe goes, as arm_order compares it: its offset in its file, or its
   address. */
static uint64_t spec_place(const struct tspec *ts)
{
	if (ts->is_file)
		return ts->file_off;
	return ts->spec.kind == UP_SPEC_SEED ? ts->spec.addr : ts->spec.vaddr;
}

static int arm_order(const void *a, const void *b, void *arg)
{
	const struct tspec *x = ((struct up_trace *)arg)->specs[*(const unsigned *)a];
	const struct tspec *y = ((struct up_trace *)arg)->specs[*(const unsigned *)b];
	uint64_t ox = spec_place(x), oy = spec_place(y);

	if (x->is_file != y->is_file)
		return x->is_file ? -1 : 1;
	if (x->is_file && (x->dev != y->dev || x->ino != y->ino))
		return x->dev != y->dev ? (x->dev < y->dev ? -1 : 1) : (x->ino < y->ino ? -1 : 1);
	if (ox != oy)
		return ox > oy ? -1 : 1;
	return x->index < y->index ? -1 : 1;
}


int tr_arm_proc(struct up_trace *tr, struct tproc *tp)
{
	unsigned *order = malloc((tr->nspecs ? tr->nspecs : 1) * sizeof(*order));
	bool pending = false, held = tr_maps_hold(tr, tp->pid);
	int first = 0;

	disarm_unmapped(tr, tp);
	up_stack_syms_stale(tp->syms);

	for (unsigned i = 0; i < tr->nspecs; i++)
		if (order)
			order[i] = i;
	if (order)
		qsort_r(order, tr->nspecs, sizeof(*order), arm_order, tr);
	for (unsigned n = 0; n < tr->nspecs; n++) {
		unsigned i = order ? order[n] : n;
		int rc = arm_one(tr, tp, i);

		if (rc && !first)
			first = rc;
		if (!tp->armed[i] && tr->specs[i]->is_file && !tr->specs[i]->removed)
			pending = true;
	}
	free(order);
	/* files mapped later: their probes armed, and their unwind tables where stacks are
	   walked in the process */
	if (pending || walks_stacks(tr))
		tr_hook_ldso(tr, tp);
	if (held)
		tr_maps_release(tr);
	tp->rescan = false;
	return first;
}

int up_trace_arm_all(struct up_trace *tr, bool attach)
{
	int first = 0;

	/* a seed spec names its process: trace it first when asked to */
	for (unsigned i = 0; attach && i < tr->nspecs; i++) {
		struct tspec *ts = tr->specs[i];

		if (ts->removed || ts->spec.kind != UP_SPEC_SEED || !ts->spec.pid ||
		    tr_proc_of(tr, ts->spec.pid))
			continue;
		if (up_trace_attach(tr, ts->spec.pid)) {
			tr_log(tr, "'%s': cannot trace process %d", ts->text, (int)ts->spec.pid);
			if (!first)
				first = -ESRCH;
		}
	}
	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		int rc;

		if (tp->gone)
			continue;
		rc = tr_arm_proc(tr, tp);
		if (rc && !first)
			first = rc;
	}
	return first;
}

void up_trace_arming(const struct up_trace *tr, struct up_trace_arming *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];
		bool armed = false;

		if (ts->removed || ts->internal)
			continue;
		out->asked++;
		for (const struct tproc *tp = tr->procs; tp && !armed; tp = tp->next)
			for (const struct tprobe *p = tp->probes; p && !armed; p = p->next)
				armed = p->ts == ts;
		if (armed)
			out->armed++;
		else if (ts->fatal || ts->arm_failed)
			out->failed++;
		else
			out->pending++;
	}
}

/* Every probe of spec i goes (counts kept); it is armed again by the next tr_arm_proc. */
void tr_disarm_spec(struct up_trace *tr, unsigned i)
{
	struct tspec *ts = tr->specs[i];
	unsigned drops;

	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		struct tprobe **pp = &tp->probes;

		while (*pp) {
			struct tprobe *p = *pp;

			if (p->ts != ts) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			/* as in disarm_unmapped: an exec the library handles in there drops the
			   process's other probes, retired (not freed) while this one goes */
			tr->disarming++;
			drops = tp->drops;
			unregister_uprobe(tr->ctx, &p->u);
			tr->disarming--;
			if (tp->drops != drops)
				pp = &tp->probes; /* emptied: pp pointed into a dropped one */
			tr_keep_count(tr, p);
			if (p->ref_addr && tp->drops == drops)
				up_refctr_put(&tp->refs, tp->pid, p->ref_addr);
			if (p->u.kimg) {
				p->next = tr->retired;
				tr->retired = p;
			} else {
				tr_probe_free(p);
			}
		}
		tp->armed[i] = false;
	}
}

uint64_t up_trace_hits(const struct up_trace *tr, unsigned i)
{
	uint64_t hits;

	if (i >= tr->nspecs)
		return 0;
	hits = tr->specs[i]->hits;
	/* and the counts of probes still armed, which the library keeps */
	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		for (struct tprobe *p = tp->probes; p; p = p->next) {
			uint64_t n;

			if (p->ts == tr->specs[i] && lib_counts(p) &&
			    !uprobe_count(tr->ctx, &p->u, &n))
				hits += n;
		}
	}
	return hits;
}
