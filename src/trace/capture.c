// SPDX-License-Identifier: MIT
/*
 * What the in-process agent does for a probe on the fast path: the registers and memory
 * its records capture, so that fetch.c evaluates the spec's arguments afterwards with
 * the same reads in the same order; and, for an event with a hist trigger, what it
 * aggregates in the process instead.
 *
 * It builds structs from the spec and never reads nor writes a process; where the agent
 * cannot do what the spec asks it says -ENOTSUP, and the probe stays on the trap path.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "trace/session_int.h"

/* Stacks are walked by the files' unwind tables on both paths: the agent by the copies
   placed in the process (agent/unwind.h), the trap path (trace/stack.h up_stack_unwind)
   by the same tables, so both give the same stacks (issue 31).  1 puts probes that
   walk a stack on the trap path again. */
#define UNWIND_ON_TRAP_PATH_ONLY 0

static const unsigned abi_regs[6] = {
	offsetof(struct user_regs_struct, rdi), offsetof(struct user_regs_struct, rsi),
	offsetof(struct user_regs_struct, rdx), offsetof(struct user_regs_struct, rcx),
	offsetof(struct user_regs_struct, r8),	offsetof(struct user_regs_struct, r9),
};

static void base_reg(struct uprobe_fetch *f, uint64_t *regs, unsigned off, unsigned size,
		     unsigned shift)
{
	f->base = UPROBE_FETCH_REG;
	f->reg = off;
	f->reg_size = size;
	f->reg_shift = shift;
	*regs |= 1ull << (off / 8);
}

static void step(struct uprobe_fetch *f, int64_t off, unsigned len)
{
	f->step[f->nsteps].off = off;
	f->step[f->nsteps].len = len;
	f->nsteps++;
}

/* One FETCHARG as what the agent must capture for fetch.c to evaluate it afterwards:
   the same reads, in the same order. */
static int capture_arg(const struct up_spec *sp, const struct up_fetch_arg *a, uint64_t bias,
		       struct uprobe_fetch *f, uint64_t *regs)
{
	bool at_return = sp->is_return;
	const struct up_fetch_insn *op = &a->ops[0];
	bool is_string = a->type.kind == UP_TYPE_STRING;

	memset(f, 0, sizeof(*f));
	f->size = a->type.size ? a->type.size : 8;
	f->is_signed = a->type.kind == UP_TYPE_S;
	if (a->type.is_bitfield) {
		f->bf_width = a->type.bf_width;
		f->bf_offset = a->type.bf_offset;
	}
	switch (op->op) {
	case UP_FOP_REG:
		base_reg(f, regs, op->reg.offset, op->reg.size, op->reg.shift);
		break;
	case UP_FOP_STACK:
		base_reg(f, regs, offsetof(struct user_regs_struct, rsp), 8, 0);
		step(f, 8 * (int64_t)op->param, 8);
		break;
	case UP_FOP_STACKP:
		base_reg(f, regs, offsetof(struct user_regs_struct, rsp), 8, 0);
		break;
	case UP_FOP_ARG:
		if (at_return) { /* the entry's, kept by the agent (entry_args) */
			if (op->param < 1 || op->param > 6)
				return -ENOTSUP;
			base_reg(f, regs, offsetof(struct user_regs_struct, fs_base) +
						  8u * (op->param - 1), 8, 0);
		} else if (op->param >= 1 && op->param <= 6) {
			base_reg(f, regs, abi_regs[op->param - 1], 8, 0);
		} else {
			base_reg(f, regs, offsetof(struct user_regs_struct, rsp), 8, 0);
			step(f, 8 * ((int64_t)op->param - 6), 8);
		}
		break;
	case UP_FOP_IMM:
		f->base = UPROBE_FETCH_IMM;
		f->imm = (int64_t)op->imm;
		break;
	case UP_FOP_FOFFS:
		f->base = UPROBE_FETCH_IMM;
		f->imm = (int64_t)(bias + op->imm);
		break;
	case UP_FOP_RETVAL: /* a return's record has every register */
		base_reg(f, regs, offsetof(struct user_regs_struct, rax), 8, 0);
		break;
	case UP_FOP_COMM:
	case UP_FOP_DATA:
		f->base = UPROBE_FETCH_IMM; /* the tracer's own: nothing to read */
		return 0;
	case UP_FOP_USTACK: /* the walk by the tables: its every read (trace/stack.c re-walks) */
		if (UNWIND_ON_TRAP_PATH_ONLY)
			return -ENOTSUP;
		base_reg(f, regs, offsetof(struct user_regs_struct, rbp), 8, 0);
		*regs |= BIT(rsp) | BIT(rip);
		f->final = UPROBE_FETCH_STACK;
		f->final_len = op->param;
		f->at_entry = up_spec_at_function_entry(sp);
		return 0;
	default:
		return -ENOTSUP;
	}
	for (int i = 1; i < a->nops; i++) {
		bool last = i == a->nops - 1;

		if (last && is_string) {
			f->final = UPROBE_FETCH_STRING;
			f->final_off = a->ops[i].offset;
			f->final_len = UP_FETCH_STRING_MAX - 1;
			return 0;
		}
		if (f->nsteps == UPROBE_FETCH_STEPS)
			return -ENOTSUP;
		step(f, a->ops[i].offset, last ? f->size : 8);
	}
	if (is_string) { /* \IMM:string */
		f->final = UPROBE_FETCH_STRING;
		f->final_len = UP_FETCH_STRING_MAX - 1;
	}
	return 0;
}

/* What the agent aggregates for a hist's probe; -ENOTSUP where it cannot (the trap
   path then feeds the same table). */
static int build_agg(struct tprobe *p)
{
	const struct up_hist *hi = p->ts->hist;
	const struct up_spec *sp = &p->ts->spec;
	struct uprobe_agg *g = &p->agg;
	unsigned nv = 0;

	memset(g, 0, sizeof(*g));
	g->size = hi->size;
	g->at_entry = up_spec_at_function_entry(sp);
	g->nkeys = hi->nkeys;
	for (unsigned i = 0; i < hi->nkeys; i++) {
		const struct up_hist_field *f = &hi->key[i];
		struct uprobe_agg_key *k = &g->key[i];

		k->words = 1;
		k->xform = f->mod == UP_HIST_MOD_LOG2 || f->mod == UP_HIST_MOD_LOG2FLOOR
				   ? UPROBE_AGG_LOG2
			   : f->mod == UP_HIST_MOD_BUCKETS ? UPROBE_AGG_BUCKETS
							   : UPROBE_AGG_RAW;
		k->buckets = f->mod == UP_HIST_MOD_LOG2FLOOR ? UPROBE_AGG_LOG2_FLOOR : f->buckets;
		switch (f->src) {
		case UP_HIST_SRC_ARG: {
			enum up_fetch_op op = sp->args[f->arg].ops[0].op;

			if (op == UP_FOP_COMM && sp->args[f->arg].nops == 1) {
				/* the thread's comm: the agent's per-thread cache */
				k->src = UPROBE_AGG_COMM;
				k->words = 2;
				break;
			}
			if (op == UP_FOP_COMM || op == UP_FOP_DATA)
				return -ENOTSUP; /* the tracer's own values */
			k->src = UPROBE_AGG_FETCH;
			k->fetch = (unsigned)f->arg;
			if (f->is_string)
				k->words = UP_HIST_STRING_KEY / 8;
			break;
		}
		case UP_HIST_SRC_DURATION:
			k->src = UPROBE_AGG_DURATION;
			break;
		case UP_HIST_SRC_STACK:
			if (UNWIND_ON_TRAP_PATH_ONLY)
				return -ENOTSUP;
			k->src = UPROBE_AGG_STACK;
			k->words = UP_HIST_STACK_DEPTH;
			break;
		case UP_HIST_SRC_PID:
			k->src = UPROBE_AGG_TID;
			break;
		default:
			return -ENOTSUP;
		}
	}
	for (unsigned i = 0; i < hi->nvals; i++) {
		const struct up_hist_field *f = &hi->val[i];
		struct uprobe_agg_val *v = &g->val[nv];

		p->aval[i] = -1;
		if (f->src == UP_HIST_SRC_HITCOUNT)
			continue;
		if (f->src == UP_HIST_SRC_ARG) {
			enum up_fetch_op op = sp->args[f->arg].ops[0].op;

			if (op == UP_FOP_COMM || op == UP_FOP_DATA)
				return -ENOTSUP;
			v->src = UPROBE_AGG_FETCH;
			v->fetch = (unsigned)f->arg;
		} else if (f->src == UP_HIST_SRC_DURATION) {
			v->src = UPROBE_AGG_DURATION;
		} else {
			return -ENOTSUP;
		}
		v->op = f->op == UP_HIST_OP_MIN	  ? UPROBE_AGG_MIN
			: f->op == UP_HIST_OP_MAX ? UPROBE_AGG_MAX
						  : UPROBE_AGG_SUM;
		v->is_signed = f->is_signed;
		p->aval[i] = (int)nv++;
	}
	g->nvals = nv;
	return 0;
}

/* Why ts's filters keep its probes on the trap path, or NULL when they do not: the
   tracer evaluates a filter the agent cannot (||, !, strings, comm) on a fast-path
   record's values only where it sees every record -- not when the agent aggregates
   (a hist) nor when raw records go out as the agent wrote them -- and not on a
   $duration, which no record carries. */
const char *tr_filter_trap_reason(const struct up_trace *tr, const struct tspec *ts)
{
	if (!ts->tracer_filter)
		return NULL;
	if (ts->hist)
		return "a filter the agent cannot evaluate (||, !, strings, comm) on an "
		       "aggregating event";
	if (tr->opts.raw)
		return "a filter the agent cannot evaluate (||, !, strings, comm) with "
		       "--format raw";
	if (up_filter_uses(&ts->filt, UPROBE_COND_DURATION) ||
	    up_filter_uses(&ts->hfilt, UPROBE_COND_DURATION))
		return "a filter the agent cannot evaluate (||, !, strings, comm) on $duration";
	return NULL;
}

/* What a printing probe captures on the fast path; 0 when p can have one. */
int tr_build_capture(struct up_trace *tr, struct tprobe *p)
{
	const struct up_spec *sp = &p->ts->spec;
	uint64_t regs = BIT(rsp);
	unsigned n = 0;

	if (tr->opts.no_fast || (!tr->opts.out && !p->ts->hist) || p->tp->is32 ||
	    tr_filter_trap_reason(tr, p->ts))
		return -ENOTSUP;
	if (p->ts->hist) {
		int rc = build_agg(p);

		if (rc)
			return rc;
	}
	if (sp->kind == UP_SPEC_EVENT && sp->is_return)
		regs |= BIT(rax) | BIT(rip); /* $retval, and where it returned to */
	n = sp->kind == UP_SPEC_EVENT ? (unsigned)sp->nargs : 1;
	p->fetch = calloc(n ? n : 1, sizeof(*p->fetch));
	if (!p->fetch)
		return -ENOMEM;
	if (sp->kind == UP_SPEC_SEED) {
		switch (sp->seed_type) {
		case UP_SEED_ARGS:
			for (unsigned k = 0; k < sp->size && k < 6; k++)
				regs |= 1ull << (abi_regs[k] / 8);
			n = 0;
			break;
		case UP_SEED_STACK:
			base_reg(&p->fetch[0], &regs, offsetof(struct user_regs_struct, rsp), 8, 0);
			p->fetch[0].final = UPROBE_FETCH_BYTES;
			p->fetch[0].final_len = (unsigned)sp->size;
			break;
		case UP_SEED_DATA:
			p->fetch[0].base = UPROBE_FETCH_IMM;
			p->fetch[0].imm = (int64_t)sp->daddr;
			p->fetch[0].final = UPROBE_FETCH_BYTES;
			p->fetch[0].final_len = (unsigned)sp->size;
			break;
		}
	} else {
		for (unsigned k = 0; k < n; k++) {
			int rc = capture_arg(sp, &sp->args[k], p->file_bias, &p->fetch[k], &regs);

			if (rc)
				return rc;
		}
	}
	p->cap.regs = regs;
	p->cap.entry_args = p->eargs;
	p->cap.fetch = p->fetch;
	p->cap.nfetch = n;
	p->cap.cond = p->ts->conds;
	p->cap.ncond = p->ts->nconds;
	if (p->ts->hist) {
		p->hist = p->ts->hist;
		p->cap.agg = &p->agg;
		p->u.agg_handler = tr_on_agg;
		for (unsigned i = 0; i < p->agg.nkeys; i++)
			if (p->agg.key[i].src == UPROBE_AGG_STACK)
				/* while the maps are there */
				up_stack_syms_load(tr_syms_of(p->tp));
	}
	p->u.capture = &p->cap;
	p->u.record_handler = tr_on_record;
	p->recording = true;
	return 0;
}
