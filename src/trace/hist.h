/* SPDX-License-Identifier: MIT */
/*
 * Histogram triggers: the kernel's hist trigger (Documentation/trace/histogram.rst)
 * on uprobe's events.  A trigger names an event and how to aggregate its hits:
 *
 *   [GRP/]EVENT:hist:keys=KEY[,KEY...][:vals=VAL[,VAL...]][:sort=SORT[,SORT]]
 *                    [:size=N][:name=NAME] [if FILTER]
 *
 *   KEY   FIELD[.MOD]     MOD: hex sym sym-offset log2 buckets=N  (numbers)
 *                         log2floor (ours: v's bit length, bpftrace's hist buckets)
 *                         FIELD: a fetch argument's name, common_pid (the thread),
 *                         stacktrace / common_stacktrace (the user stack),
 *                         $duration (a return probe: ns from entry to return)
 *   VAL   hitcount | FIELD[.hex] (summed) | FIELD.min | FIELD.max | FIELD.avg
 *                         (min/max/avg are uprobe's own; the kernel only sums)
 *   SORT  hitcount | a key or val field as written, [.ascending|.descending]
 *   N     entries a table holds (default 2048, rounded up to a power of two)
 *
 * This module parses a trigger (errors with a caret, as specs), resolves its fields
 * against the event's spec, keeps the tracer-side table (entries merged from the
 * agent's per-CPU tables and from trap-path hits), and prints it as the kernel's
 * `hist` file does, as JSON, or as bpftrace draws a histogram.  It never reads a
 * process, never prints on its own account, never exits.  Prefix: up_hist_.
 */
#ifndef UPROBE_TRACE_HIST_H
#define UPROBE_TRACE_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trace/spec.h"

#define UP_HIST_KEYS_MAX 3	/* the kernel's TRACING_MAP_KEYS_MAX */
#define UP_HIST_VALS_MAX 6
#define UP_HIST_SIZE_DEFAULT 2048
#define UP_HIST_SIZE_MAX (1u << 17)
#define UP_HIST_STRING_KEY 64	/* bytes of a string key kept (the rest is cut) */
#define UP_HIST_STACK_DEPTH 16	/* the kernel's HIST_STACKTRACE_DEPTH */

enum up_hist_src {
	UP_HIST_SRC_ARG,      /* the event's fetch argument arg */
	UP_HIST_SRC_PID,      /* common_pid: the thread id */
	UP_HIST_SRC_STACK,    /* stacktrace, common_stacktrace: the user stack (keys only) */
	UP_HIST_SRC_DURATION, /* $duration: return probes */
	UP_HIST_SRC_HITCOUNT, /* hitcount (vals and sort only) */
};

enum up_hist_mod {
	UP_HIST_MOD_NONE,
	UP_HIST_MOD_HEX,
	UP_HIST_MOD_SYM,
	UP_HIST_MOD_SYM_OFFSET,
	UP_HIST_MOD_LOG2,
	UP_HIST_MOD_BUCKETS,
	UP_HIST_MOD_LOG2FLOOR, /* ours: bpftrace's hist() buckets, v's bit length (agent/agg.h) */
};

enum up_hist_op { UP_HIST_OP_SUM, UP_HIST_OP_MIN, UP_HIST_OP_MAX, UP_HIST_OP_AVG };

struct up_hist_field {
	char name[UP_SPEC_ARG_NAME_MAX + 2]; /* as written, without the modifier */
	enum up_hist_src src;
	int arg;		/* UP_HIST_SRC_ARG: index into the spec's args (resolve) */
	enum up_hist_mod mod;
	uint64_t buckets;	/* UP_HIST_MOD_BUCKETS */
	enum up_hist_op op;	/* vals */
	bool is_string;		/* resolve: the argument is a string (keys only) */
	bool is_signed;		/* resolve: an s-type argument (min/max compare signed) */
	int pos, len;		/* the field's text, in the trigger text, for errors */
	bool hidden;		/* a val up_hist_add_sum added: kept, never printed */
};

struct up_hist_sort {
	enum up_hist_src src;	/* HITCOUNT, or the field below */
	bool is_val;		/* field indexes val[], else key[] */
	unsigned field;
	bool descending;
};

struct up_hist_table;

struct up_hist {
	char group[UP_SPEC_NAME_MAX + 1]; /* "" when the trigger named no group */
	char event[UP_SPEC_NAME_MAX + 1];
	char name[UP_SPEC_NAME_MAX + 1];  /* :name=, "" when none */
	char *filter;			  /* the text after " if ", NULL when none */
	unsigned nkeys, nvals, nsort;
	struct up_hist_field key[UP_HIST_KEYS_MAX];
	struct up_hist_field val[UP_HIST_VALS_MAX];
	struct up_hist_sort sort[2];
	unsigned size;			  /* entries, a power of two */
	struct up_hist_table *base;	  /* hits merged so far (up_hist_resolve makes it) */
};

/*
 * Parses a trigger.  with_event: the text starts with [GRP/]EVENT: (the command line's
 * --trigger); else it is what is written into an event's trigger file ("hist:...").
 * 0 and *h filled (release with up_hist_free), or -EINVAL with err (pos into text) --
 * the kernel's messages where it has one ("Couldn't find field", "Invalid field
 * modifier", "Too many keys" ...).
 */
int up_hist_parse(const char *text, bool with_event, struct up_hist *h,
		  struct up_spec_err *err);

/*
 * A histogram's sum for an exposition that wants one (Prometheus's _sum): when h has one
 * key, a .log2 or .buckets of an argument or of $duration, and no val sums that field,
 * a hidden val that does is added (the tables aggregate it; no printer shows it).
 * Before up_hist_resolve.  True when h has such a sum now.
 */
bool up_hist_add_sum(struct up_hist *h);

/*
 * Binds h's fields to spec's arguments and makes its table: -EINVAL with err when a
 * field names no argument of the event, a string is used as a val or with a numeric
 * modifier, $duration is used on an event that is not a return probe, a stack is a
 * val.  err->pos indexes the text that was given to up_hist_parse.
 */
int up_hist_resolve(struct up_hist *h, const struct up_spec *spec, struct up_spec_err *err);

void up_hist_free(struct up_hist *h);

/* A key as the table keeps it: per key field a number, or a string (strings and
   symbolized stacks: one frame a line, '\n' between them). */
struct up_hist_key {
	uint64_t num[UP_HIST_KEYS_MAX];
	const char *str[UP_HIST_KEYS_MAX]; /* NULL for numbers */
};

/* A key field's number as it is kept: .log2 and .buckets applied (agent/agg.h). */
uint64_t up_hist_key_value(const struct up_hist_field *f, uint64_t v);

/*
 * Tables.  add merges one entry: hits, and per val the value to combine (SUM and AVG
 * add, MIN and MAX keep the extreme).  vals are the combined values of hits hits (an
 * entry of an agent's table), or of one hit.  A table that holds size entries counts
 * new keys as dropped.  -ENOMEM.
 */
struct up_hist_table *up_hist_table_new(const struct up_hist *h);
void up_hist_table_free(struct up_hist_table *t);
int up_hist_table_add(struct up_hist_table *t, const struct up_hist_key *k, uint64_t hits,
		      const uint64_t *vals);
void up_hist_table_drop(struct up_hist_table *t, uint64_t n); /* hits that found no room */
/* dst += src (every entry and the dropped count); -ENOMEM. */
int up_hist_table_merge(struct up_hist_table *dst, const struct up_hist_table *src);
/* A copy of t (to add live entries to before printing); NULL on -ENOMEM. */
struct up_hist_table *up_hist_table_clone(const struct up_hist_table *t);
uint64_t up_hist_table_hits(const struct up_hist_table *t);
/* Every entry of t, in the order they came: its key, hits and vals (as up_hist_table_add
   combined them).  A non-zero return from fn stops the walk and is returned. */
typedef int (*up_hist_entry_fn)(void *ctx, const struct up_hist_key *k, uint64_t hits,
				const uint64_t *vals);
int up_hist_table_for_each(const struct up_hist_table *t, up_hist_entry_fn fn, void *ctx);
/* Hits that found no room in t. */
uint64_t up_hist_table_dropped(const struct up_hist_table *t);
unsigned up_hist_table_entries(const struct up_hist_table *t);

/* The trigger as the kernel's trigger file lists it:
   "hist:keys=size.log2:vals=hitcount:sort=hitcount:size=2048 [active]".  snprintf. */
int up_hist_trigger_info(const struct up_hist *h, char *buf, size_t size);

/*
 * Prints t: UP_HIST_TEXT the kernel's hist file, byte for byte in its layout
 * ("# event histogram", the trigger info, "{ size: ~ 2^10 } hitcount:          3",
 * "Totals:"); UP_HIST_JSON one JSON object; UP_HIST_BARS the way bpftrace prints a
 * map (a single .log2 or .buckets key: "[4, 8)   2 |@@@@   |"; other keys
 * "@[key]: count").  Sorted by h's sort keys (default hitcount, ascending).
 */
enum up_hist_style { UP_HIST_TEXT, UP_HIST_JSON, UP_HIST_BARS };
int up_hist_print(const struct up_hist *h, const struct up_hist_table *t,
		  enum up_hist_style style, FILE *out);

/* fn for each entry of t with its stack key's frames (one a line, innermost first) and
   its hits, until it returns nonzero (returned).  -ENOENT: h has no stack key. */
int up_hist_each_stack(const struct up_hist *h, const struct up_hist_table *t,
		       int (*fn)(void *arg, const char *frames, uint64_t hits), void *arg);
/*
 * Prints t as Prometheus metric families named after family ([a-zA-Z_:][a-zA-Z0-9_:]*),
 * in the text exposition format 0.0.4, or OpenMetrics 1.0 (om: counters' families
 * without _total, le values as floats; the caller writes "# EOF").  One key, .log2 or
 * .buckets: a histogram (cumulative _bucket{le} to +Inf, _sum when h sums the field,
 * _count).  Otherwise keyed counts: FAMILY_hits_total{KEY="..."} and per val a
 * counter (sums of unsigned fields) or a gauge (min, max, avg, signed sums), the keys
 * as labels, escaped; at most max_series keys (most hits first), the rest counted in
 * FAMILY_overflow_hits_total.  help says what the table is (HELP lines).  Entries
 * dropped for want of room: FAMILY_dropped_total.
 */
int up_hist_print_prom(const struct up_hist *h, const struct up_hist_table *t,
		       const char *family, const char *help, unsigned max_series, bool om,
		       FILE *out);

#endif /* UPROBE_TRACE_HIST_H */
