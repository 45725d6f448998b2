/* SPDX-License-Identifier: MIT */
/*
 * bpftrace's language, as `uprobe run` takes it: a program parsed into probes (attach
 * points, a predicate, a body), checked, and interpreted at each hit with the hit's
 * registers and memory (trace/session.h's up_trace_hit); maps kept and printed at the
 * end as bpftrace prints them.
 *
 *   parse.c   the lexer and parser (bpftrace's grammar, the subset below), the checks
 *             that give each map its kind, and errors in bpftrace's caret form
 *   interp.c  the body run at a hit: expressions, statements, builtins, printf
 *   maps.c    the maps: keyed values and aggregations, printed as bpftrace prints them
 *   pred.c    predicates compiled for trace/filter.h's evaluator, which --filter shares
 *
 * What is taken: probes uprobe/u, uretprobe/ur (wildcards), usdt/U, BEGIN, END,
 * interval:s:N, interval:ms:N; maps global or keyed by one or more values, scratch
 * $variables, count sum avg min max stats hist lhist, delete clear zero print,
 * predicates, if/else, ?:, the C operators on 64-bit integers, casts to (u)int8..64,
 * string ==/!=, builtins pid tid comm nsecs elapsed cpu retval arg0..arg5 func probe
 * ustack usym str printf time strftime ntop exit uid gid $1..$9; print(@m, top, div).  Anything else is refused by name.
 * Nothing here prints except where the program says so (to the output given), or
 * exits.  Prefix: bt_.
 */
#ifndef UPROBE_BT_BT_H
#define UPROBE_BT_BT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct up_trace_hit;

#define BT_STRLEN 64	   /* bpftrace's default string size, the NUL included */
#define BT_MAX_KEYS 8
#define BT_MAX_ARGS 16

enum bt_nk {
	BT_N_INT, BT_N_STR, BT_N_MAP, BT_N_VAR, BT_N_BUILTIN, BT_N_CALL, BT_N_BIN, BT_N_UN,
	BT_N_CAST, BT_N_TERN, BT_N_ASSIGN, BT_N_IF, BT_N_BLOCK, BT_N_INCDEC,
};

/* Builtins. */
enum bt_builtin {
	BT_B_PID, BT_B_TID, BT_B_COMM, BT_B_NSECS, BT_B_ELAPSED, BT_B_CPU, BT_B_RETVAL,
	BT_B_ARG0, /* ..BT_B_ARG0+5 */
	BT_B_FUNC = BT_B_ARG0 + 6, BT_B_PROBE, BT_B_USTACK, BT_B_UID, BT_B_GID, BT_B_POS,
	BT_B_ARGN_USDT,
};

/* Map kinds, from the program's assignments. */
enum bt_mk {
	BT_M_NONE, BT_M_INT, BT_M_STR, BT_M_COUNT, BT_M_SUM, BT_M_AVG, BT_M_MIN, BT_M_MAX,
	BT_M_STATS, BT_M_HIST, BT_M_LHIST,
};

/* The static type of an expression. */
enum bt_ty { BT_T_INT, BT_T_STR, BT_T_STACK, BT_T_SYM, BT_T_NONE };

struct bt_node {
	enum bt_nk k;
	int op;		/* BIN/UN/ASSIGN/INCDEC: the operator token; CALL: the function id */
	int64_t ival;	/* INT; BUILTIN: its enum bt_builtin; CAST: bits; POS: N */
	char *s;	/* STR: the text; MAP, VAR, CALL: the name */
	int id;		/* MAP: its index in the program's maps; VAR: its slot */
	bool sign;	/* CAST: signed; INCDEC: prefix */
	enum bt_ty ty;	/* the expression's type (after the checks) */
	struct bt_node *a, *b, *c;
	struct bt_node **v; /* MAP: keys; CALL: arguments; BLOCK: statements */
	unsigned n;
	int line, col, len; /* where, for errors */
};

enum bt_pk { BT_P_UPROBE, BT_P_URETPROBE, BT_P_USDT, BT_P_BEGIN, BT_P_END, BT_P_INTERVAL };

struct bt_attach {
	enum bt_pk kind;
	char *text;	/* as written */
	char *target;	/* uprobe/usdt: the path or library as written */
	char *func;	/* uprobe: the function or glob; usdt: [PROVIDER:]NAME */
	uint64_t period_ns; /* interval */
	int line, col, len;
};

struct up_filter;

struct bt_probe {
	struct bt_attach *ap;
	unsigned nap;
	struct bt_node *pred; /* NULL: none */
	struct bt_node *body; /* a BLOCK */
	/* pred compiled for the predicate evaluator `uprobe trace --filter` shares
	   (pred.c, trace/filter.h): its nodes, and the expressions its fields are */
	struct up_filter *cpred;
	struct bt_node **pleaf;
};

struct bt_map {
	char *name; /* "@", "@x" */
	enum bt_mk kind;
	enum bt_ty vty;	  /* INT/STR maps: the value's type */
	bool vsign;	  /* INT maps: the value is signed */
	unsigned vbits;	  /* INT maps: its width */
	unsigned nkeys;	  /* 0: a map without keys; fixed by the first use */
	int64_t lmin, lmax, lstep; /* lhist */
	struct bt_table *t; /* maps.c */
};

struct bt_prog {
	const char *src; /* the text (not owned) */
	const char *name; /* "stdin" or the file, for errors */
	struct bt_probe *probes;
	unsigned nprobes;
	struct bt_map *maps;
	unsigned nmaps;
	char **vars; /* scratch variable names, slots */
	unsigned nvars;
	unsigned max_pos; /* the highest $N used */
};

/*
 * Parses and checks src.  0, or -EINVAL with err holding bpftrace's error text:
 * "NAME:LINE:COL-COL: ERROR: MESSAGE\nTHE LINE\n   ~~~\n" (-ENOMEM: err says so).
 */
int bt_parse(const char *src, const char *name, struct bt_prog **out, char *err, size_t errlen);
/* pred.c: p's predicate into p->cpred and p->pleaf (bt_parse does it); 0 or -ENOMEM. */
int bt_pred_compile(struct bt_probe *p);
void bt_pred_free(struct bt_probe *p);
void bt_prog_free(struct bt_prog *p);
/* The program's $N read as numbers against the parameters given: -EINVAL with err
   holding bpftrace's "$1 used numerically but given "abc". Try using str($1)." */
int bt_check_pos(const struct bt_prog *p, const char *const *pos, unsigned npos, char *err,
		 size_t errlen);
/* Formats an error at a node or a place as bpftrace does. */
int bt_errf(const struct bt_prog *p, int line, int col, int len, char *err, size_t errlen,
	    const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* The running program. */
struct bt_rt;

struct bt_rt_opts {
	FILE *out;
	/* where the "\n\n" before the maps at the end goes (NULL: out): bpftrace writes it
	   to its standard output whatever -o says */
	FILE *sep_out;
	bool json; /* bpftrace's -f json: one JSON object a message */
	const char *const *pos; /* $1..$N */
	unsigned npos;
};

int bt_rt_new(struct bt_prog *p, const struct bt_rt_opts *o, struct bt_rt **out);
void bt_rt_free(struct bt_rt *rt);

/* A hit's context, as the body reads it. */
struct bt_ctx {
	const struct up_trace_hit *hit; /* NULL: BEGIN, END, interval */
	const char *func;		/* the probed function */
	const char *probe;		/* the probe's full name */
	const uint64_t *usdt_args;	/* usdt: its arguments */
	unsigned nusdt;
};

/* Runs probe i's predicate and body. */
void bt_rt_run(struct bt_rt *rt, unsigned probe, const struct bt_ctx *c);
/* exit() was called. */
bool bt_rt_exiting(const struct bt_rt *rt);
/* The maps, at the end: bpftrace's "\n\n" then every map by name. */
void bt_rt_print_all(struct bt_rt *rt);
/* Errors met while running ("str: cannot read ..."), counted. */
uint64_t bt_rt_errors(const struct bt_rt *rt);

/* maps.c (for interp.c) */
struct bt_val {
	enum bt_ty t;
	bool sign;
	uint8_t bits;
	int64_t i;
	const char *s; /* STR, STACK, SYM: the text (an arena's or a map's) */
};

struct bt_table;
struct bt_table *bt_table_new(void);
void bt_table_free(struct bt_table *t);
/* The entry of key (n values), made when absent if make.  NULL when absent. */
struct bt_entry *bt_table_get(struct bt_map *m, const struct bt_val *key, unsigned n, bool make);
void bt_table_delete(struct bt_map *m, const struct bt_val *key, unsigned n);
/* New keys refused because the map held its *max keys (BPFTRACE_MAP_KEYS_MAX, 4096). */
uint64_t bt_table_dropped(const struct bt_map *m, size_t *max);
void bt_table_clear(struct bt_map *m);
void bt_table_zero(struct bt_map *m);
/* Entry updates. */
void bt_entry_set(struct bt_map *m, struct bt_entry *e, const struct bt_val *v);
void bt_entry_agg(struct bt_map *m, struct bt_entry *e, int64_t v);
/* What an in-process table aggregated: hits hits; v their sum (sum, avg, stats), their
   min or max, or (hist, lhist) the one value that came hits times. */
void bt_entry_merge(struct bt_map *m, struct bt_entry *e, uint64_t hits, int64_t v);
/* The entry's value as an expression reads it (count, sum, avg, int, string). */
/* The same, for hits values of the bucket v whose sum is total (an in-process lhist's
   bucket, whose values themselves are gone). */
void bt_entry_merge_total(struct bt_map *m, struct bt_entry *e, uint64_t hits, int64_t v,
			  int64_t total);
void bt_entry_value(const struct bt_map *m, const struct bt_entry *e, struct bt_val *out);
/* print(@m) */
void bt_map_print(FILE *out, struct bt_map *m);
/* print(@m, top, div): the top biggest entries only (0: all), each value (a hist's
   counts) divided by div (0, 1: as they are); stats() maps ignore both, as bpftrace's. */
void bt_map_print_top(FILE *out, struct bt_map *m, uint32_t top, uint32_t div);
/* The same as bpftrace's -f json prints it (nothing for an empty map). */
void bt_map_print_json(FILE *out, struct bt_map *m);
void bt_map_print_json_top(FILE *out, struct bt_map *m, uint32_t top, uint32_t div);
/* s as bpftrace's JSON output escapes it, quoted. */
void bt_json_str(FILE *out, const char *s, size_t n);
/* A copy of m's table (entries and the dropped count), for a live reading; NULL: -ENOMEM. */
struct bt_table *bt_table_copy(const struct bt_map *m);
/*
 * m as a Prometheus metric family uprobe_bt_NAME (text format 0.0.4, or OpenMetrics
 * with om): count() and unsigned sum() counters, min/max/integers gauges, avg() and
 * stats() summaries (_sum, _count), hist() and lhist() histograms (a bucket [lo, hi) of
 * integers is le hi - 1; _sum, _count), the keys as labels key or key1..keyN; string
 * maps have no number and are left out.  At most max_series keys (the most counted);
 * what the others counted in *overflow.  0, -ENOMEM, -EIO.
 */
int bt_map_print_prom(FILE *out, const struct bt_map *m, bool om, unsigned max_series,
		      uint64_t *overflow);

#endif
