/* SPDX-License-Identifier: MIT */
/*
 * Event filters: `--filter 'size > 4096 && flags & 0x2'`, a conjunction of comparisons
 * of a named fetch argument with a number, as the kernel's event filters write them
 * (ops == != < <= > >= &), and at most one `comm == "ls"` term (== != ~, a glob) on the
 * thread's name, which the tracer evaluates (the agent has no name to compare).  Parsed once, resolved against each event spec's
 * arguments, evaluated on the trap path here and in-process by the fast path's agent
 * (as struct uprobe_cond).  Never prints, never exits.  Prefix: up_filter_.
 */
#ifndef UPROBE_TRACE_FILTER_H
#define UPROBE_TRACE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uprobe/uprobe.h>

#include "trace/fetch.h"
#include "trace/spec.h"

#define UP_FILTER_MAX 8
#define UP_FILTER_COMM_MAX 63

struct up_filter {
	struct {
		char name[UP_SPEC_ARG_NAME_MAX + 1];
		enum uprobe_cmp op;
		int64_t value;
		int pos; /* in the text, for errors */
	} term[UP_FILTER_MAX];
	unsigned n;
	/* one `comm == "PATTERN"` (or !=, ~) term: the thread's name, matched by the tracer
	   as the kernel's filters match strings (a glob), not a condition of the agent's */
	bool has_comm;
	bool comm_ne;
	int comm_pos;
	char comm[UP_FILTER_COMM_MAX + 1];
};

/* Does name match f's comm term (true when it has none)? */
bool up_filter_comm_holds(const struct up_filter *f, const char *name);

/* 0, or -EINVAL with err saying where and why (up_spec_err_format prints it). */
int up_filter_parse(const char *text, struct up_filter *out, struct up_spec_err *err);

/* The filter's terms as conditions on spec's arguments; -ENOENT (msg says which name)
   when spec has no such numeric argument. */
int up_filter_resolve(const struct up_filter *f, const struct up_spec *spec,
		      struct uprobe_cond *conds, char *msg, size_t msglen);

/* Does every condition hold on these values (and, for a $duration term, the return's
   duration in ns)?  A fault or a string never holds. */
bool up_filter_holds(const struct uprobe_cond *conds, unsigned n,
		     const struct up_fetch_value *vals, uint64_t duration);

#endif
