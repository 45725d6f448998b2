/* SPDX-License-Identifier: MIT */
/*
 * Event filters in the kernel's syntax (Documentation/trace/events.rst, "Event
 * filtering"): `--filter 'size > 4096 && (flags & 0x2 || !(name ~ "py*"))'`.
 * Predicates compare a field with a value -- `== != < <= > >= &` on numeric fields,
 * `== != ~` on string fields (`~` a glob: `*`, `?`, `[...]`) -- combined with `&&`, `||`,
 * `!` and parentheses.  The fields are the event spec's named arguments, `$duration` on a
 * return, and `comm` (or `common_comm`): the thread's name.
 *
 * Parsed once, resolved against each event spec's arguments, evaluated by the tracer
 * (up_filter_eval) on a hit's fetched values.  A filter that is a conjunction of numeric
 * comparisons (at most UP_FILTER_MAX) is also a list of struct uprobe_cond that the
 * fast path's agent evaluates in the process (up_filter_conds); anything else is the
 * tracer's alone.  Never prints, never exits.  Prefix: up_filter_.
 */
#ifndef UPROBE_TRACE_FILTER_H
#define UPROBE_TRACE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uprobe/uprobe.h>

#include "trace/fetch.h"
#include "trace/spec.h"

#define UP_FILTER_MAX	  8  /* conditions the agent takes from one filter */
#define UP_FILTER_NODES	  48 /* predicates and operators of one filter */
#define UP_FILTER_STR_MAX 63 /* a string value, without the NUL */
#define UP_FILTER_DEPTH	  16 /* nested parentheses and ! */

#define UP_FILTER_GLOB 0x40	   /* node.op of `~`; the others are enum uprobe_cmp */
#define UP_FILTER_TRUTH 0x41	   /* node.op: the field alone, true when nonzero (a string:
				      not empty) -- bpftrace's `/@start[tid]/` */
#define UP_FILTER_COMM 0xfffffffeu /* node.fetch: the thread's name */

enum up_filter_kind { UP_FILTER_PRED, UP_FILTER_AND, UP_FILTER_OR, UP_FILTER_NOT };

struct up_filter_node {
	uint8_t kind;	/* enum up_filter_kind */
	uint8_t op;	/* PRED: enum uprobe_cmp, or UP_FILTER_GLOB */
	bool is_num;	/* PRED: the value is a number (value), else a string (str) */
	bool is_str;	/* PRED, resolved: the field is a string (str compared) */
	int16_t l, r;	/* AND/OR: both operands; NOT: l */
	int pos;	/* PRED: the field's place in the text; others: the operator's */
	int vpos;	/* PRED: the value's */
	uint32_t fetch; /* PRED, resolved: the argument, UPROBE_COND_DURATION or UP_FILTER_COMM
			   (up_filter_eval); any field number of the caller's (up_filter_eval_fn) */
	bool rfield;	/* PRED: the right operand is field rfetch, not the value */
	bool const_signed; /* PRED: a numeric value compares signed (bpftrace's literals);
			      the kernel's compare as the field's type says */
	uint32_t rfetch;
	int64_t value;
	char name[UP_SPEC_ARG_NAME_MAX + 1];
	char str[UP_FILTER_STR_MAX + 1]; /* the value's text (a number's too) */
};

struct up_filter {
	struct up_filter_node node[UP_FILTER_NODES];
	unsigned n; /* 0: no filter (everything holds) */
	int root;
};

/* 0, or -EINVAL with err saying where and why (up_spec_err_format prints it). */
int up_filter_parse(const char *text, struct up_filter *out, struct up_spec_err *err);

/* Binds f's fields to spec's arguments (in place); -ENOENT (msg says which name and
   why) when spec has no such argument or the operator does not fit the field's type. */
int up_filter_resolve(struct up_filter *f, const struct up_spec *spec, char *msg, size_t msglen);

/* A resolved f as the agent's conditions: their number (0 for no filter), or -1 when f
   is not a conjunction of at most max numeric comparisons (the tracer evaluates it). */
int up_filter_conds(const struct up_filter *f, struct uprobe_cond *conds, unsigned max);

/* Does f mention its field fetch (an argument index, UPROBE_COND_DURATION, UP_FILTER_COMM)? */
bool up_filter_uses(const struct up_filter *f, uint32_t fetch);

/*
 * The one evaluator of predicates: `uprobe trace --filter` (the kernel's syntax, parsed
 * here) and `uprobe run`'s predicates (bpftrace's, compiled into the same nodes by
 * src/bt/pred.c) both hold or fail here.  A front end gives each field's value through
 * fn: a number (is_signed: compared signed), or a string (s, len; NUL-terminated at
 * len); err: it could not be read, and no predicate on it holds.
 */
struct up_pred_val {
	bool err;
	bool is_str;
	bool is_signed;
	uint64_t u;
	const char *s;
	size_t len;
};
typedef void (*up_pred_field_fn)(void *ctx, uint32_t field, struct up_pred_val *out);

/* Does f hold, its fields' values given by fn (a filter of no nodes always holds)?
   Operators: && || ! evaluated left to right, short-circuit; a comparison of two
   numbers is signed where either side is; strings take == != (exact) and ~ (a glob). */
bool up_filter_eval_fn(const struct up_filter *f, up_pred_field_fn fn, void *ctx);

/* Does resolved f hold on a hit's values, its return's duration (ns) and its thread's
   name (NULL: unknown, compared as "")?  A fault never holds a predicate.
   (up_filter_eval_fn with the event's fields.) */
bool up_filter_eval(const struct up_filter *f, const struct up_fetch_value *vals, uint64_t duration,
		    const char *comm);

/* Does every condition hold on these values (and, for a $duration term, the return's
   duration in ns)?  What the agent does with conds.  A fault or a string never holds. */
bool up_filter_holds(const struct uprobe_cond *conds, unsigned n, const struct up_fetch_value *vals,
		     uint64_t duration);

#endif
