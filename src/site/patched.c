// SPDX-License-Identifier: MIT
/*
 * The patched site: a probe whose actions need no tracer-side handler (a count, a
 * record of registers and memory, a return) becomes a jmp over the probed instructions
 * to a trampoline in the XOL area, placed and removed with every thread stopped.  It
 * never patches a site a thread, a branch or a saved context could enter in the middle
 * (agent/plan.c and ubp.c decide, the checks on live threads are in inside.c), and
 * never unmaps what a thread may still execute.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/unwind.h"
#include "site/internal.h"
#include "sym/unwind_walk.h"

/* the unwind area: far from the program's mappings, as the agent's region */
extern const size_t up_agent_blob_size; /* the agent's code (blob/agent.c) */

#define UNWIND_NEAR 0x200000000000ull

int read_counter(struct up_sites *mm, struct up_patched *f, struct up_task *t, uint64_t *v)
{
	int rc;

	if (f->rec) {
		uint64_t filtered = 0, lost = 0;

		if (mm->agent)
			up_agent_probe_counts(mm->agent, f->desc, &filtered, &lost);
		*v = f->nrec + filtered + lost + (f->agg ? agg_hits(mm, f) : 0);
		f->last = *v;
		return 0;
	}
	if (f->shared) {
		*v = mm->agent ? up_agent_read(mm->agent, f->counter) : f->last;
		f->last = *v;
		return 0;
	}
	rc = t ? up_task_read(t, f->counter, v, sizeof(*v))
	       : up_proc_read(mm->p, f->counter, v, sizeof(*v));
	if (!rc)
		f->last = *v;
	return rc;
}

/* A seccomp filter may forbid the agent's syscalls (or kill the program for them). */
static bool under_seccomp(pid_t pid)
{
	char path[64], line[128];
	bool on = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Seccomp:", 8))
			on = atoi(line + 8) != 0;
	fclose(f);
	return on;
}

/* The traced process wrote into its agent's region what the agent never writes: one
   message, naming the probe when the bad record named one (agent/ring.c). */
static void agent_corrupt(void *arg, uint32_t id, const char *why)
{
	struct up_sites *mm = arg;
	struct up_patched *f = id < mm->nrecp ? mm->recp[id] : NULL;

	if (f)
		site_log(mm->ctx, "process %d: probe at 0x%" PRIx64 ": %s", (int)mm->pid,
			 f->site.vaddr, why);
	else
		site_log(mm->ctx, "process %d: %s", (int)mm->pid, why);
}

#define AGENT_SCRATCH_SLOTS ((UP_AGENT_SCRATCH + UP_XOL_AREA_SIZE / UP_XOL_SLOTS - 1) / \
			     (UP_XOL_AREA_SIZE / UP_XOL_SLOTS))

static int agent_ensure(struct up_sites *mm, struct up_task *t, char *why, size_t whylen)
{
	struct up_proc *p;
	uint64_t scratch;
	int rc;

	if (mm->agent)
		return 0;
	if (under_seccomp(mm->pid)) {
		snprintf(why, whylen, "the process runs under seccomp: the agent's reads "
				      "are syscalls it may forbid");
		return -ENOTSUP;
	}
	/* any area will do (the code there reaches nothing): the first one's, not a new
	   area mapped (two more remote system calls of each process followed) */
	rc = up_xol_alloc_n(&mm->xol, t, mm->xol.areas ? mm->xol.areas->base : 0x10000,
			    AGENT_SCRATCH_SLOTS, &scratch);
	if (rc) {
		snprintf(why, whylen, "no XOL slot (%s)", strerror(-rc));
		return rc;
	}
	rc = up_agent_new(t, scratch, mm->ctx->opts->ring_bytes, &mm->agent, why, whylen);
	up_xol_free_n(&mm->xol, scratch, AGENT_SCRATCH_SLOTS);
	if (rc)
		return rc;
	{
		/* its two mappings join the list of ours, to go when we go */
		uint64_t at[2], len[2];

		up_agent_maps(mm->agent, at, len);
		for (int k = 0; k < 2; k++)
			if (up_xol_note_map(&mm->xol, at[k], len[k], k == 1)) {
				uint64_t un[6] = { at[k], len[k] };
				int64_t ret;

				/* not listed, not kept: the agent goes (a thread may not be
				   in it yet: nothing leads there) */
				for (int j = 0; j < 2; j++) {
					un[0] = at[j], un[1] = len[j];
					up_task_syscall(t, 11 /* munmap */, un, &ret);
				}
				if (k)
					mm->xol.nmaps--;
				up_agent_free(mm->agent);
				mm->agent = NULL;
				snprintf(why, whylen, "no memory to list the agent's mappings");
				return -ENOMEM;
			}
	}
	up_agent_on_corrupt(mm->agent, agent_corrupt, mm);
	/* --when-full=block: a full ring holds the thread while the tracer makes room */
	up_agent_set_block(mm->agent, mm->ctx->opts->when_full == UPROBE_WHEN_FULL_BLOCK);
	agent_find_rseq(mm);
	for (unsigned i = 0; (p = sites_proc(mm, i)); i++)
		for (struct up_task *x = up_proc_first_task(p); x; x = up_proc_next_task(x))
			up_site_name_thread(mm, x);
	return 0;
}

/* The rows of the trampolines in the XOL area at base (UP_XOL_AREA_SIZE bytes), pcs
   from base, sorted, each trampoline's end a NONE row; how many (at most max). */
static unsigned area_rows(struct up_sites *mm, uint64_t base, struct up_unwind_row *v, unsigned max)
{
	unsigned n = 0;

	for (struct up_patched *f = mm->fast; f; f = f->next) {
		uint32_t at = (uint32_t)(f->tramp - base);

		if (!f->nslots || !f->nrows || f->tramp < base ||
		    f->tramp - base >= UP_XOL_AREA_SIZE || n + f->nrows + 1 > max)
			continue;
		for (unsigned i = 0; i < f->nrows; i++) {
			v[n] = f->rows[i];
			v[n++].pc += at;
		}
		v[n++] = (struct up_unwind_row){ .pc = at + f->code_len, .cfa = UP_UW_NONE };
	}
	/* by pc (insertion: a page holds a few dozen), a trampoline's rows before an end
	   at the same pc */
	for (unsigned i = 1; i < n; i++) {
		struct up_unwind_row r = v[i];
		unsigned j = i;

		for (; j > 0 &&
		       (v[j - 1].pc > r.pc ||
			(v[j - 1].pc == r.pc && v[j - 1].cfa == UP_UW_NONE && r.cfa != UP_UW_NONE));
		     j--)
			v[j] = v[j - 1];
		v[j] = r;
	}
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) /* one row a pc */
		if (!k || v[k - 1].pc != v[i].pc)
			v[k++] = v[i];
	return k;
}

#define AREA_ROWS (64 * (UP_PATCH_ROWS + 1)) /* a page of one-slot trampolines */

/* The area of mm's XOL areas that holds addr, 0 none. */
static uint64_t area_of(struct up_sites *mm, uint64_t addr)
{
	for (struct up_xol_area *a = mm->xol.areas; a; a = a->next)
		if (addr >= a->base && addr - a->base < UP_XOL_AREA_SIZE)
			return a->base;
	return 0;
}

/* One area's table; 1: the directory must be written again. */
static int area_sync(struct up_sites *mm, uint64_t base)
{
	struct up_unwind_row *v = malloc(AREA_ROWS * sizeof(*v));
	int rc;

	if (!v)
		return 0;
	rc = up_uwarea_code(mm->uw, base, UP_XOL_AREA_SIZE, v, area_rows(mm, base, v, AREA_ROWS));
	free(v);
	return rc == 1;
}

void code_rows_sync(struct up_sites *mm, uint64_t addr)
{
	uint64_t base = area_of(mm, addr);

	if (mm->uw && base && area_sync(mm, base))
		up_site_unwind_sync(mm);
}

/* Every page of trampolines' table and the agent's code's, before a directory. */
static void code_rows_all(struct up_sites *mm)
{
	for (struct up_xol_area *a = mm->xol.areas; a; a = a->next)
		area_sync(mm, a->base);
	if (mm->agent)
		up_uwarea_blob(mm->uw, up_agent_entry(mm->agent) - UPA_ENTRY_OFF,
			       up_agent_blob_size);
}

int up_site_code_row(struct up_sites *mm, uint64_t pc, struct up_unwind_row *row)
{
	const struct up_unwind_table *t;
	uint64_t code;

	if (!mm)
		return -1;
	if (mm->agent) {
		code = up_agent_entry(mm->agent) - UPA_ENTRY_OFF;
		if (pc >= code && pc - code < up_agent_blob_size) {
			t = up_uwarea_blob_table();
			row->cfa = UP_UW_NONE;
			if (!t || !up_unwind_row_at(t, t->seg[0].vaddr + (pc - code), row))
				return 0;
			return 1;
		}
	}
	for (struct up_patched *f = mm->fast; f; f = f->next) {
		uint64_t off = pc - f->tramp;
		unsigned i = 0;

		if (!f->nslots || !f->nrows || pc < f->tramp || off >= f->code_len)
			continue;
		while (i + 1 < f->nrows && f->rows[i + 1].pc <= off)
			i++;
		*row = f->rows[i];
		row->cfa_off = (int32_t)((int64_t)row->cfa_off - (int64_t)(off - row->pc));
		return 1;
	}
	return up_xol_contains(&mm->xol, pc) ? 0 : -1;
}

/*
 * Stacks: the unwind area beside the agent (agent/unwind.h), its directory of the
 * process's maps as they are now, the agent told where it is.  Listed with the other
 * mappings, to go when we go.
 */
static int unwind_ensure(struct up_sites *mm, struct up_task *t, char *why, size_t whylen)
{
	uint64_t scratch, at, len, dir = 0;
	const char *env = getenv("UPROBE_STACKS");
	int rc;

	/* make bench's floor: the agent's frame-pointer walk (wrong stacks where frame
	   pointers are not kept) */
	if (env && !strcmp(env, "fp"))
		return 0;
	if (!mm->uw) {
		rc = up_xol_alloc(&mm->xol, t, 0x10000, &scratch);
		if (rc) {
			snprintf(why, whylen, "no XOL slot (%s)", strerror(-rc));
			return rc;
		}
		rc = up_uwarea_new(t, scratch, UNWIND_NEAR, &mm->uw, why, whylen);
		up_xol_free(&mm->xol, scratch);
		if (rc)
			return rc;
		up_uwarea_map(mm->uw, &at, &len);
		if (up_xol_note_map(&mm->xol, at, len, false)) {
			uint64_t un[6] = { at, len };
			int64_t ret;

			up_task_syscall(t, 11 /* munmap */, un, &ret);
			up_uwarea_free(mm->uw);
			mm->uw = NULL;
			snprintf(why, whylen, "no memory to list the unwind tables' mapping");
			return -ENOMEM;
		}
	}
	code_rows_all(mm);
	rc = up_uwarea_sync(mm->uw, mm->pid, &dir);
	if (rc && !dir) {
		snprintf(why, whylen, "cannot place the unwind tables (%s)", strerror(-rc));
		return rc;
	}
	up_agent_set_unwind(mm->agent, dir, up_uwarea_caches(mm->uw));
	return 0;
}

int up_site_unwind_sync(struct up_sites *mm)
{
	uint64_t dir = 0;
	int rc;

	if (!mm || !mm->uw || !mm->agent)
		return 0;
	rc = up_uwarea_sync(mm->uw, mm->pid, &dir);
	if (dir)
		up_agent_set_unwind(mm->agent, dir, up_uwarea_caches(mm->uw));
	return rc;
}

/* Does the probe walk stacks (a $ustack, a stacktrace key)? */
static bool walks_stacks(const struct upa_fetch *fe, unsigned nf, const struct upa_agg *ag)
{
	for (unsigned i = 0; i < nf; i++)
		if (fe[i].final == UPA_FINAL_STACK)
			return true;
	for (unsigned i = 0; ag && i < ag->nkeys && i < UPA_AGG_KEYS; i++)
		if (ag->key[i].src == UPA_AGG_STACK)
			return true;
	return false;
}

/* The frame words the agent can see: the general registers, rip, rsp and flags. */
static bool word_in_process(unsigned w)
{
	return w <= UPA_RDI || w == UPA_RIP || w == UPA_RSP || w == UPA_EFLAGS;
}

/* ... and at a return with UPA_P_ENTRY_ARGS the words it fills with the entry's
   arguments. */
static bool word_seen(unsigned w, bool entry_args)
{
	return word_in_process(w) || (entry_args && w >= UPA_ENTRY_ARG && w < UPA_ENTRY_ARG + 6);
}

static const char *word_name(unsigned w)
{
	static const char *const n[UPA_NREGS] = {
		"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax", "cx",
		"dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss", "fs_base",
		"gs_base", "ds", "es", "fs", "gs",
	};
	return w < UPA_NREGS ? n[w] : "?";
}

/* u's capture as the agent's descriptor; *save: the frame words the trampoline fills. */
static int build_desc(struct uprobe *u, struct upa_probe *d, struct upa_fetch *f,
		      struct upa_cond *c, uint64_t *save, char *why, size_t whylen)
{
	const struct uprobe_capture *cap = u->capture;
	bool entry_args = cap->entry_args && u->ret_handler;

	memset(d, 0, sizeof(*d));
	d->flags = UPA_P_ENABLED | (entry_args ? UPA_P_ENTRY_ARGS : 0);
	d->vaddr = u->vaddr;
	d->regs = cap->regs | 1ull << UPA_RIP;
	d->nfetch = cap->nfetch;
	d->ncond = cap->ncond;
	*save = d->regs;
	if (entry_args) /* the entry's trampoline saves what the hijack keeps */
		*save |= 1ull << UPA_RDI | 1ull << UPA_RSI | 1ull << UPA_RDX | 1ull << UPA_RCX |
			 1ull << UPA_R8 | 1ull << UPA_R9;
	for (unsigned w = 0; w < UPA_NREGS; w++) {
		if ((d->regs >> w & 1) && !word_seen(w, entry_args)) {
			snprintf(why, whylen, "register %%%s is not available in-process",
				 word_name(w));
			return -ENOTSUP;
		}
	}
	for (unsigned i = 0; i < cap->nfetch; i++) {
		const struct uprobe_fetch *in = &cap->fetch[i];
		struct upa_fetch *o = &f[i];

		memset(o, 0, sizeof(*o));
		o->base = in->base == UPROBE_FETCH_REG ? UPA_BASE_REG : UPA_BASE_IMM;
		o->imm = in->imm;
		if (in->base == UPROBE_FETCH_REG) {
			unsigned w = in->reg / 8;

			if (in->reg % 8 || w >= UPA_NREGS || !word_seen(w, entry_args)) {
				snprintf(why, whylen, "register %%%s is not available in-process",
					 word_name(w));
				return -ENOTSUP;
			}
			if (w == UPA_RIP) { /* the probed address itself */
				o->base = UPA_BASE_IMM;
				o->imm = (int64_t)u->vaddr;
			}
			o->reg = (uint8_t)w;
			o->reg_size = (uint8_t)(in->reg_size ? in->reg_size : 8);
			o->reg_shift = (uint8_t)in->reg_shift;
			*save |= 1ull << w;
		}
		if (in->nsteps > UPA_STEPS) {
			snprintf(why, whylen, "too many dereferences");
			return -ENOTSUP;
		}
		o->nsteps = (uint8_t)in->nsteps;
		for (unsigned k = 0; k < in->nsteps; k++) {
			o->step[k].off = in->step[k].off;
			o->step[k].len = in->step[k].len ? in->step[k].len : 8;
		}
		o->final = in->final == UPROBE_FETCH_STRING  ? UPA_FINAL_STRING
			   : in->final == UPROBE_FETCH_BYTES ? UPA_FINAL_BYTES
			   : in->final == UPROBE_FETCH_STACK ? UPA_FINAL_STACK
							     : UPA_FINAL_NONE;
		o->at_entry = in->at_entry;
		if (o->final == UPA_FINAL_STACK) /* [sp] at an entry: the caller */
			*save |= 1ull << UPA_RSP;
		o->final_off = in->final_off;
		o->final_len = in->final_len;
		o->size = (uint8_t)(in->size ? in->size : 8);
		o->is_signed = in->is_signed;
		o->bf_width = (uint8_t)in->bf_width;
		o->bf_offset = (uint8_t)in->bf_offset;
	}
	for (unsigned i = 0; i < cap->ncond; i++) {
		if (cap->cond[i].fetch == UPROBE_COND_DURATION && u->ret_handler)
			c[i].fetch = UPA_COND_DURATION;
		else if (cap->cond[i].fetch >= cap->nfetch)
			return -EINVAL;
		else
			c[i].fetch = cap->cond[i].fetch;
		c[i].op = (uint32_t)cap->cond[i].op;
		c[i].value = cap->cond[i].value;
	}
	return 0;
}

/* An aggregating probe's struct upa_agg, from its capture's. */
static int build_agg(const struct uprobe *u, struct upa_agg *g, char *why, size_t whylen)
{
	const struct uprobe_capture *cap = u->capture;
	const struct uprobe_agg *in = cap->agg;
	unsigned size = in->size ? in->size : 2048, words = 0;

	memset(g, 0, sizeof(*g));
	if (in->nkeys > UPA_AGG_KEYS || in->nvals > UPA_AGG_VALS || size & (size - 1) ||
	    size > 1u << 20) {
		snprintf(why, whylen, "an aggregation the agent cannot hold");
		return -EINVAL;
	}
	g->order = (uint32_t)__builtin_ctz(size);
	g->nkeys = in->nkeys;
	g->nvals = in->nvals;
	g->at_entry = in->at_entry;
	for (unsigned i = 0; i < in->nkeys; i++) {
		const struct uprobe_agg_key *k = &in->key[i];
		struct upa_agg_key *o = &g->key[i];

		if ((k->src == UPROBE_AGG_FETCH && k->fetch >= cap->nfetch) ||
		    (k->src == UPROBE_AGG_DURATION && !u->ret_handler) || !k->words ||
		    k->words > 255 || (k->src == UPROBE_AGG_TID && k->words != 1) ||
		    (k->src == UPROBE_AGG_COMM && k->words != 2)) {
			snprintf(why, whylen, "key %u cannot be computed in-process", i + 1);
			return -EINVAL;
		}
		o->src = k->src == UPROBE_AGG_STACK	 ? UPA_AGG_STACK
			 : k->src == UPROBE_AGG_DURATION ? UPA_AGG_DURATION
			 : k->src == UPROBE_AGG_TID	 ? UPA_AGG_TID
			 : k->src == UPROBE_AGG_COMM	 ? UPA_AGG_COMM
							 : UPA_AGG_FETCH;
		o->xform = k->xform == UPROBE_AGG_LOG2	    ? UPA_AGG_LOG2
			   : k->xform == UPROBE_AGG_BUCKETS ? UPA_AGG_BUCKETS
							    : UPA_AGG_RAW;
		o->buckets = k->buckets;
		o->words = (uint8_t)k->words;
		o->fetch = k->fetch;
		words += k->words;
	}
	if (words > UPA_AGG_KEY_WORDS) {
		snprintf(why, whylen, "a key of %u words (the agent takes %u)", words,
			 (unsigned)UPA_AGG_KEY_WORDS);
		return -EINVAL;
	}
	for (unsigned i = 0; i < in->nvals; i++) {
		const struct uprobe_agg_val *v = &in->val[i];
		struct upa_agg_val *o = &g->val[i];

		if ((v->src == UPROBE_AGG_FETCH && v->fetch >= cap->nfetch) ||
		    (v->src == UPROBE_AGG_DURATION && !u->ret_handler) ||
		    v->src == UPROBE_AGG_STACK || v->src == UPROBE_AGG_TID ||
		    v->src == UPROBE_AGG_COMM) {
			snprintf(why, whylen, "value %u cannot be computed in-process", i + 1);
			return -EINVAL;
		}
		o->src = v->src == UPROBE_AGG_DURATION ? UPA_AGG_DURATION : UPA_AGG_FETCH;
		o->op = v->op == UPROBE_AGG_MIN ? UPA_AGG_MIN
			: v->op == UPROBE_AGG_MAX ? UPA_AGG_MAX
						  : UPA_AGG_SUM;
		o->is_signed = v->is_signed;
		o->fetch = v->fetch;
	}
	return 0;
}

static int rec_slot(struct up_sites *mm, struct up_patched *f)
{
	if (f->id >= mm->nrecp) {
		uint32_t n = mm->nrecp ? mm->nrecp : 64;
		struct up_patched **r;

		while (n <= f->id)
			n *= 2;
		r = realloc(mm->recp, n * sizeof(*r));
		if (!r)
			return -ENOMEM;
		memset(r + mm->nrecp, 0, (n - mm->nrecp) * sizeof(*r));
		mm->recp = r;
		mm->nrecp = n;
	}
	mm->recp[f->id] = f;
	return 0;
}

/* A recording site's descriptor (in the shared region) and its record id. */
static int rec_desc(struct up_sites *mm, struct up_task *t, struct up_patched *f, char *why,
		    size_t whylen)
{
	struct uprobe *u = f->u;
	unsigned nf = u->capture->nfetch, nc = u->capture->ncond;
	struct upa_fetch *fe = calloc(nf ? nf : 1, sizeof(*fe));
	struct upa_cond *co = calloc(nc ? nc : 1, sizeof(*co));
	struct upa_probe d;
	struct upa_agg ag;
	uint64_t save = 0;
	int rc = -ENOMEM;

	if (!fe || !co)
		goto out;
	rc = build_desc(u, &d, fe, co, &save, why, whylen);
	if (rc)
		goto out;
	if (u->ret_handler) {
		/* the entry hijacks the return; the trampoline the agent returns through
		   saves every register, so the record can take any */
		d.flags |= UPA_P_RETURN;
	}
	if (u->capture->agg) {
		rc = build_agg(u, &ag, why, whylen);
		if (rc)
			goto out;
		save |= 1ull << UPA_RBP; /* a stack key walks from it */
	}
	rc = agent_ensure(mm, t, why, whylen);
	if (!rc && walks_stacks(fe, nf, u->capture->agg ? &ag : NULL))
		rc = unwind_ensure(mm, t, why, whylen);
	if (rc)
		goto out;
	rc = up_agent_probe_add(mm->agent, &d, fe, co, u->capture->agg ? &ag : NULL, &f->desc,
				&f->id);
	if (rc) {
		snprintf(why, whylen, rc == -E2BIG ? "a record would not fit the ring"
						   : "no room for its descriptor (%s)",
			 strerror(-rc));
		goto out;
	}
	up_agent_heap_ready(mm->agent, t); /* best effort: its descriptor and tables */
	f->rec = true;
	f->agg = u->capture->agg != NULL;
	if (!f->agg) { /* best effort: else the first lap of records faults the pages in */
		up_agent_rings_ready(mm->agent, t, true);
		up_site_spool_warm(mm->ctx);
	}
	f->regs = d.regs;
	f->save = save | 1ull << UPA_RSP; /* the agent names the thread by its stack */
	rc = rec_slot(mm, f);
out:
	free(fe);
	free(co);
	return rc;
}

void up_site_thread_new(struct up_sites *mm, struct up_task *t)
{
	if (mm->agent)
		up_agent_rings_ready(mm->agent, t, false);
}

bool wants_record(const struct uprobe *u)
{
	return u->capture && u->record_handler;
}

/* Is the padding f's hop would write another site's, or an int3's? */
static bool hop_taken(struct up_sites *mm, const struct up_patched *f)
{
	uint64_t lo = f->site.hop, hi = lo + UP_PATCH_JMP;

	for (struct up_patched *o = mm->fast; o; o = o->next)
		if (o != f && up_patch_writes(&o->site, lo, hi))
			return true;
	return int3_live_in(mm, lo, hi);
}

/*
 * Tries the fast path for a counting or recording uprobe (process quiesced).  Where
 * another one's jmp already starts at its address, it joins that site's chain.
 */
int fast_arm(struct up_sites *mm, struct uprobe *u, struct up_task *t, char *why, size_t whylen)
{
	struct up_site_ctx *ctx = mm->ctx;
	struct up_patched *f, *base, *v[CHAIN_MAX];
	bool rec = wants_record(u);
	struct where ool = { .n = 0 };
	unsigned n;
	int rc;

	if (!t || ctx->opts->no_xol) {
		snprintf(why, whylen, "no XOL area");
		return -ENOTSUP;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->u = u;
	f->is_ret = u->ret_handler != NULL;
	rc = -ENOTSUP;
	base = fast_writing(mm, u->vaddr, u->vaddr + 1);
	if (base && (base->site.vaddr != u->vaddr || !base->patched)) {
		/* its bytes are a jmp now: the arbiter takes that site back to int3s */
		snprintf(why, whylen, "inside another fast-path site");
		goto fail;
	}
	if (base) {
		/* the site is checked and patched already: only the chain grows */
		n = chain_of(mm, u->vaddr, v);
		for (unsigned i = 0; i < n; i++) {
			if (f->is_ret && v[i]->is_ret) {
				snprintf(why, whylen, "another return probe shares the site");
				goto fail;
			}
		}
		if (n == CHAIN_MAX) {
			snprintf(why, whylen, "%u probes share the site already", n);
			goto fail;
		}
		f->site = base->site;
		f->site.chain = 0;
	} else {
		rc = up_patch_site(mm->p, &ctx->files, u->vaddr, next_site(mm, u->vaddr),
				   &f->site, why, whylen);
		if (rc)
			goto fail;
		rc = -ENOTSUP;
		for (unsigned i = 0; i < up_patch_written(&f->site); i++) {
			if (int3_live_in(mm, u->vaddr + i, u->vaddr + i + 1)) {
				snprintf(why, whylen, "another probe at 0x%" PRIx64, u->vaddr + i);
				goto fail;
			}
		}
		/* a punned jmp may end in another site's bytes (and another's may end in
		   this one's: it moves, pun.c); no two write the same byte */
		if (fast_writing(mm, u->vaddr, u->vaddr + up_patch_written(&f->site))) {
			snprintf(why, whylen, "overlaps another fast-path site");
			goto fail;
		}
		if (f->site.tactic == UP_TACTIC_HOP && hop_taken(mm, f)) {
			snprintf(why, whylen, "the padding its hop would use is another site's");
			goto fail;
		}
		if (any_rip_in(mm, u->vaddr, u->vaddr + up_patch_written(&f->site))) {
			snprintf(why, whylen, "a thread is inside the bytes the jmp would cover "
					      "(or trapped on an int3 there)");
			goto fail;
		}
		if (f->site.ninsn > 1 &&
		    stack_points_in(mm, u->vaddr, u->vaddr + f->site.len)) {
			snprintf(why, whylen, "a thread's stack holds an address inside the bytes "
					      "the jmp would cover (a signal frame?)");
			goto fail;
		}
		if (f->site.ninsn > 1 &&
		    back_in(mm, u->vaddr + 1, u->vaddr + up_patch_written(&f->site))) {
			/* from a slot or a trampoline it jumps back to the instruction after
			   the one it ran there: one is inside these bytes (and in a signal
			   handler, its frame's rip would take it there) */
			where_out_of_line(&ool, mm);
			if (any_rip(mm, &ool) || any_stack_word(mm, &ool)) {
				snprintf(why, whylen, "a thread is running out of line and may "
						      "come back inside the bytes the jmp would cover");
				goto fail;
			}
		}
	}
	if (rec) {
		rc = rec_desc(mm, t, f, why, whylen);
		if (rc) {
			if (rc > -4096 && !why[0])
				snprintf(why, whylen, "no descriptor (%s)", strerror(-rc));
			rc = -ENOTSUP;
			goto fail;
		}
	} else {
		/* a counter in the shared region where the agent can be had: its count
		   survives an exec; else on a page of counters by the XOL area */
		char sub[160];

		f->shared = !agent_ensure(mm, t, sub, sizeof(sub)) &&
			    !up_agent_counter(mm->agent, &f->counter);
		/* its page is not made present from here: a trampoline's lock incq runs
		   no agent code, and its first hit's fault costs less than the remote call
		   that would spare it (a stop of the process) */
		if (!f->shared && (!mm->counters || mm->ncounters == 4096 / 8)) {
			rc = up_xol_map_data(&mm->xol, t, u->vaddr, &mm->counters);
			if (rc) {
				snprintf(why, whylen, "no counter page (%s)", strerror(-rc));
				mm->counters = 0;
				goto fail;
			}
			mm->ncounters = 0;
		}
		if (!f->shared)
			f->counter = mm->counters + 8ull * mm->ncounters;
	}
	f->seq = mm->fast_seq++;
	f->patched = true;
	if (rec)
		ctx->rec_seen_ns = up_mono_ns(); /* records may come at once: look soon */
	f->next = mm->fast;
	mm->fast = f;
	rc = chain_build(mm, t, u->vaddr, NULL, why, whylen);
	if (rc && !base && f->site.tactic == UP_TACTIC_PUN) {
		char w2[200] = "";

		if (!pun_rebuild(mm, t, u->vaddr, true, w2, sizeof(w2)))
			rc = 0;
	}
	if (rc && !base && f->site.tactic == UP_TACTIC_PUN) {
		/* no room where the punned jmp goes: a hop to the padding nearby */
		struct up_patch_site pun = f->site;
		char w3[200] = "";

		f->site.pun_lo = f->site.pun_hi = 0;
		if (!up_patch_try_hop(mm->p, &ctx->files, &f->site, w3, sizeof(w3)) &&
		    !hop_taken(mm, f) && !chain_build(mm, t, u->vaddr, NULL, w3, sizeof(w3)))
			rc = 0;
		else
			f->site = pun;
	}
	if (rc) {
		fast_unlink(mm, f);
		if (f->rec) {
			if (f->id < mm->nrecp)
				mm->recp[f->id] = NULL;
			up_agent_probe_enable(mm->agent, f->desc, false);
		}
		rc = -ENOTSUP;
		goto fail;
	}
	if (!rec && !f->shared)
		mm->ncounters++;
	mm->fast_used = true;
	u->kimg = (struct uprobe_kimg *)f;
	u->kind = UP_KIND_PATCHED;
	ctx->stats->fast_patched++;
	if (ctx->opts->verbose)
		site_log(ctx, "process %d: 0x%" PRIx64 " on the fast path (%s: a jmp to 0x%" PRIx64
			   ", %s%s)",
		      (int)mm->pid, u->vaddr, up_patch_tactic_name(f->site.tactic), f->tramp,
		      rec ? "recorded in-process" : "counted",
		      f->chained ? ", its trampoline chained with the site's other probes" : "");
	return 0;
fail:
	free(f);
	return rc < 0 ? rc : -ENOTSUP;
}

/* f's hits so far go into its uprobe; a recording site stops recording. */
void settle(struct up_sites *mm, struct up_patched *f)
{
	uint64_t v;

	if (f->rec) {
		/* records already written are delivered; a thread still inside the
		   trampoline finishes its record, which nobody reads */
		up_site_drain(mm);
		rec_settle(mm, f);
		if (f->id < mm->nrecp)
			mm->recp[f->id] = NULL;
		/* returns still hijacked go home through the agent, unrecorded */
		if (mm->agent)
			up_agent_probe_enable(mm->agent, f->desc, false);
		return;
	}
	if (!read_counter(mm, f, NULL, &v))
		f->u->nhits += v;
	else
		f->u->nhits += f->last;
	f->last = 0;
}

/* Puts the original instruction back (its own bytes: a punned jmp leaves those after
   it) (process quiesced); the trampoline stays mapped
   until no thread can be inside it.  The site's other probes, if any, are unpatched
   with it (each is then unpatched, or downgraded, on its own: a no-op for the bytes). */
void fast_unpatch(struct up_sites *mm, struct up_patched *f, struct up_task *t)
{
	const struct up_patch_site *s = &f->site;

	if (!f->patched)
		return;
	up_proc_write_text(mm->p, s->vaddr, s->orig, up_patch_written(s));
	if (s->tactic == UP_TACTIC_HOP)
		up_proc_write_text(mm->p, s->hop, s->hop_orig, UP_PATCH_JMP);
	f->patched = false;
	tramp_reclaim(mm, f);
	settle(mm, f);
	if (t && !fast_writing(mm, s->vaddr, s->vaddr + 1)) {
		pun_follow(mm, t, s->vaddr, s->vaddr + up_patch_written(s));
		if (s->tactic == UP_TACTIC_HOP)
			pun_follow(mm, t, s->hop, s->hop + UP_PATCH_JMP);
	}
}
