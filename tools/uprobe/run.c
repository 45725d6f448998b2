// SPDX-License-Identifier: MIT
/*
 * uprobe run: bpftrace programs, unchanged, without privilege.  The program is parsed
 * and checked by src/bt/, its uprobe/uretprobe/usdt attach points become the session's
 * p:/r: specs (src/trace/session.h, wildcards and USDT through trace/expand.h), and each
 * hit runs the probe's body in the tracer (up_trace_set_hit_fn).  BEGIN, END and
 * interval probes run here.  The output is bpftrace's: "Attaching N probes...", what
 * the bodies print, then at the end the maps.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bt/bt.h"
#include "bt/tokens.h"
#include "cli.h"
#include "trace/expand.h"
#include "trace/session.h"
#include "trace/spec.h"
#include "sym/sym.h"

#define STOP_EXIT (-2) /* the program called exit() */

static void run_usage(FILE *out)
{
	fputs("usage: uprobe run [-v] [-f text|json] [-o FILE] [-p PID | -c 'CMD [ARGS]'] (-e PROGRAM | FILE) [ARG]...\n"
	      "       uprobe run -l [PATTERN]\n"
	      "\n"
	      "Runs a bpftrace program on the user-space probes of one process: a running one\n"
	      "(-p, every thread) or a command launched for it (-c), and its children.  No\n"
	      "privilege is needed: the probes are placed through ptrace, so any process you\n"
	      "may debug you may trace.  The output is bpftrace's: 'Attaching N probes...', what\n"
	      "the program prints, and at the end (the command exits, exit() is called, or\n"
	      "Ctrl-C) every map, as bpftrace prints them.  A script starting with\n"
	      "'#!/usr/bin/env -S uprobe run' runs as a command.\n"
	      "\n"
	      "Options:\n"
	      "  -e PROGRAM   the program's text (else FILE, '-' for standard input)\n"
	      "  -p PID       trace this process\n"
	      "  -c 'CMD'     launch CMD (split at blanks, no shell) and trace it\n"
	      "  -o FILE      the output into FILE\n"
	      "  -f text|json the output as text (default) or bpftrace's JSON lines\n"
	      "  -l [PATTERN] list the probes PATTERN matches: uprobe:PATH:GLOB\n"
	      "  -v           say where each probe was placed, on standard error\n"
	      "  --no-fast    every body on the trap path (see below)\n"
	      "  --listen HOST:PORT  serve the maps at http://HOST:PORT/metrics for\n"
	      "               Prometheus while running (':9464' is 127.0.0.1:9464): count()\n"
	      "               and sum() counters, hist()/lhist() histograms, avg()/stats()\n"
	      "               summaries, min()/max() gauges; the keys as labels; uprobe(1)\n"
	      "  --max-series N  at most N keys a map as series (default 1000, the most\n"
	      "               counted)\n"
	      "  ARG...       the program's $1, $2, ...\n"
	      "\n"
	      "Probes:      uprobe:BIN:FUNC (u), uretprobe:BIN:FUNC (ur), usdt:BIN:[PROV:]NAME (U),\n"
	      "             BEGIN, END, interval:s:N, interval:ms:N.  FUNC may be a glob\n"
	      "             (uprobe:/bin/bash:read*).  BIN is a path, or a library's name\n"
	      "             (libc: the one -p's process maps, else the linker's search path),\n"
	      "             or a command's (in PATH).  Several probes may share one body.\n"
	      "Actions:     @map[key, ...] = count() sum() avg() min() max() stats() hist()\n"
	      "             lhist(v, min, max, step), or a value; $var = value; delete(@m[k]),\n"
	      "             clear(@m), zero(@m), print(@m[, top[, div]]), print(v),\n"
	      "             printf(\"fmt\", ...), time(\"fmt\"), exit(); if (...) { } else { };\n"
	      "             /predicate/\n"
	      "Values:      integers and the C operators, (int8) .. (uint64) casts, strings\n"
	      "             compared with == and !=, ?:, pid tid comm nsecs elapsed cpu uid gid\n"
	      "             retval arg0..arg5 func probe ustack ustack(N) usym(addr)\n"
	      "             str(addr[, len]) strftime(\"fmt\", nsecs) ntop([af, ]addr) $1..$9\n"
	      "Not taken:   the kernel's probes (kprobe, tracepoint, profile, ...: they need\n"
	      "             bpftrace as root) and bpftrace's other functions: each is refused\n"
	      "             by name.\n"
	      "\n"
	      "Examples:\n"
	      "  uprobe run -e 'uprobe:libc:malloc { @bytes = hist(arg0); }' -c 'ls -R /usr/share/doc'\n"
	      "  uprobe run -e 'uretprobe:/bin/bash:readline { printf(\"%s\\n\", str(retval)); }' -p $$\n"
	      "  uprobe run -e 'u:libc:open* { @[func, comm] = count(); }' -p 1234\n"
	      "  uprobe run /usr/sbin/gethostlatency.bt -c 'getent hosts localhost'\n"
	      "\n"
	      "A probe whose body is one aggregation of argN (or argN & 255) or retval into\n"
	      "a map used nowhere else (@[arg0] = count(), @h = hist(arg1), @s[arg0] =\n"
	      "sum(arg2)) runs in the process, without stopping the thread; so does the\n"
	      "latency pair uprobe:X:f { @start[tid] = nsecs; } uretprobe:X:f /@start[tid]/\n"
	      "{ @ns = hist(nsecs - @start[tid]); delete(@start[tid]); } (the return's\n"
	      "duration in the process).  Any other body (tid and comm keys too) stops its\n"
	      "thread while it runs in uprobe (the trap path, ~10 us a hit).  -v says which.\n"
	      "Exit status: 0; 1 when the program cannot run; 2 for a bad command line.\n",
	      out);
}


/*
 * A probe whose body the process can run: no predicate, one statement
 * @m[K, ...] = count() | sum(V) | avg(V) | stats(V) | min(V) | max(V) | hist(V) |
 * lhist(V, ...), keys and V each argN (uprobe), retval (uretprobe) or tid, and @m used
 * nowhere else.  It becomes a hist trigger on the probe's spec (trace/hist.h): the
 * agent aggregates in the traced thread, the tracer reads its table at the end into
 * @m.  A hist or lhist keeps its value as a key (the kernel's .log2 rounds where
 * bpftrace's buckets do not); a map without keys is keyed by the thread, merged.
 */
struct fastplan {
	char fetch[256]; /* the spec's fetch arguments: " a0=%di rv=$retval" */
	char trigger[256]; /* "hist:keys=...:vals=...:size=N" (after GRP/EVENT:) */
	int map;
	unsigned nmapkeys;
	bool valkey; /* the value is the last key */
	bool has_val;
	bool bucket_sum; /* valkey a bucket's low bound: vals[0] sums the values themselves */
	bool log2floor; /* valkey is a hist bucket's bit length (agent/agg.h), not a value */
	unsigned size; /* the table's entries, per process */
	int folded; /* the latency pair's entry probe: runs as its return's $duration (-1: no) */
	bool comm; /* a key is comm: the spec fetches $comm (the agent's cached comm) */
	bool keystr[3]; /* the map's key i is a string (comm) */
	bool skip; /* this is such an entry probe: nothing to add, its return counts it */
};

static bool has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

static int count_map_refs(const struct bt_node *n, int map)
{
	int c = 0;

	if (!n)
		return 0;
	if (n->k == BT_N_MAP && n->id == map)
		c++;
	c += count_map_refs(n->a, map) + count_map_refs(n->b, map) + count_map_refs(n->c, map);
	for (unsigned i = 0; i < n->n; i++)
		c += count_map_refs(n->v[i], map);
	return c;
}

/* The trigger's field for a value, its fetch argument added; NULL when the agent
   cannot give it. */
static const char *fast_field(struct fastplan *fp, const struct bt_node *n, bool ret)
{
	static const char *const regs[6] = { "%di", "%si", "%dx", "%cx", "%r8", "%r9" };
	static const char *const names[6] = { "a0", "a1", "a2", "a3", "a4", "a5" };

	/* argN & (2^k - 1): the low k bits, a bitfield fetch the agent reads */
	if (n->k == BT_N_BIN && n->op == T_AMP && n->a->k == BT_N_BUILTIN &&
	    n->a->ival >= BT_B_ARG0 && n->a->ival < BT_B_ARG0 + 6 && !ret &&
	    n->b->k == BT_N_INT && n->b->ival > 0 && n->b->ival < INT32_MAX &&
	    !((uint64_t)n->b->ival & ((uint64_t)n->b->ival + 1))) {
		static char name[6][8][16];
		int i = (int)(n->a->ival - BT_B_ARG0);
		int bits = __builtin_popcountll((uint64_t)n->b->ival);
		char f[64];
		char *nm = name[i][bits % 8];

		snprintf(nm, 16, "a%d_b%d", i, bits);
		snprintf(f, sizeof(f), " %s=%s:b%d@0/64", nm, regs[i], bits);
		if (!strstr(fp->fetch, f) && strlen(fp->fetch) + strlen(f) < sizeof(fp->fetch))
			strcat(fp->fetch, f);
		return nm;
	}
	if (n->k != BT_N_BUILTIN)
		return NULL;
	/* the thread's id and comm: the agent keeps them per thread (agent/abi.h,
	   struct upa_thr) */
	if (n->ival == BT_B_TID)
		return "common_pid";
	if (n->ival == BT_B_COMM) {
		if (!strstr(fp->fetch, " cm="))
			strcat(fp->fetch, " cm=$comm");
		fp->comm = true;
		return "cm";
	}
	if (n->ival == BT_B_RETVAL && ret) {
		if (!strstr(fp->fetch, " rv="))
			strcat(fp->fetch, " rv=$retval");
		return "rv";
	}
	if (n->ival >= BT_B_ARG0 && n->ival < BT_B_ARG0 + 6 && !ret) {
		int i = (int)(n->ival - BT_B_ARG0);
		char f[32];

		snprintf(f, sizeof(f), " %s=%s", names[i], regs[i]);
		if (!strstr(fp->fetch, f))
			strcat(fp->fetch, f);
		return names[i];
	}
	return NULL;
}

static bool fast_plan(const struct bt_prog *p, unsigned pi, struct fastplan *fp, bool sum)
{
	const struct bt_probe *pr = &p->probes[pi];
	const struct bt_node *st, *l, *r;
	const struct bt_map *m;
	char keys[160] = "";
	const char *vals = "hitcount", *f;
	char vbuf[48];
	bool ret = false;
	int refs = 0;

	memset(fp, 0, sizeof(*fp));
	fp->folded = -1;
	if (pr->pred || !pr->body || pr->body->n != 1)
		return false;
	for (unsigned j = 0; j < pr->nap; j++) {
		if (pr->ap[j].kind != BT_P_UPROBE && pr->ap[j].kind != BT_P_URETPROBE)
			return false;
		if (j && (pr->ap[j].kind == BT_P_URETPROBE) != ret)
			return false;
		ret = pr->ap[j].kind == BT_P_URETPROBE;
	}
	st = pr->body->v[0];
	if (st->k != BT_N_ASSIGN || st->a->k != BT_N_MAP || st->b->k != BT_N_CALL)
		return false;
	l = st->a;
	r = st->b;
	m = &p->maps[l->id];
	if (m->kind < BT_M_COUNT)
		return false;
	for (unsigned i = 0; i < p->nprobes; i++)
		refs += count_map_refs(p->probes[i].pred, l->id) +
			count_map_refs(p->probes[i].body, l->id);
	if (refs != 1)
		return false;
	if (l->n + (m->kind == BT_M_HIST || m->kind == BT_M_LHIST) > 3)
		return false;
	for (unsigned i = 0; i < l->n; i++) {
		f = fast_field(fp, l->v[i], ret);
		if (!f)
			return false;
		fp->keystr[i] = !strcmp(f, "cm");
		snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys), "%s%s", i ? "," : "", f);
	}
	fp->nmapkeys = l->n;
	if (r->n) {
		f = fast_field(fp, r->v[0], ret);
		if (!f || !strcmp(f, "cm") || !strcmp(f, "common_pid"))
			return false;
		fp->has_val = true;
		if (m->kind == BT_M_LHIST && m->lmin >= 0 && m->lmin % m->lstep == 0 &&
		    (m->lmax - m->lmin) % m->lstep == 0) {
			/* buckets of step from 0 are lhist's own: any value of one lands in
			   the same bucket as its key */
			snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys),
				 "%s%s.buckets=%" PRId64, l->n ? "," : "", f, m->lstep);
			fp->valkey = true;
			/* and their sum, which the buckets lose (Prometheus's _sum, --listen) */
			snprintf(vbuf, sizeof(vbuf), "%s", f);
			vals = vbuf;
			fp->bucket_sum = true;
		} else if (m->kind == BT_M_HIST) {
			/* bpftrace's buckets, [2^k, 2^(k+1)): the value's bit length
			   (.log2floor, agent/agg.h), 65 keys at most; 64 is a value that is
			   negative as bpftrace's int64 (its "(..., 0)") */
			snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys),
				 "%s%s.log2floor", l->n ? "," : "", f);
			fp->valkey = true;
			fp->log2floor = true;
			fp->size = 128 << (l->n ? 6 : 0);
			if (sum) {
				/* and the values' sum, which the buckets lose (--listen) */
				snprintf(vbuf, sizeof(vbuf), "%s", f);
				vals = vbuf;
				fp->bucket_sum = true;
			}
		} else if (m->kind == BT_M_LHIST) {
			/* the value itself: the agent's .log2 is the kernel's ceil(log2 v),
			   bpftrace's buckets are floor(log2 v) */
			snprintf(keys + strlen(keys), sizeof(keys) - strlen(keys), "%s%s",
				 l->n ? "," : "", f);
			fp->valkey = true;
			fp->size = 65536;
		} else {
			snprintf(vbuf, sizeof(vbuf), "%s%s", f, m->kind == BT_M_MIN ? ".min" :
				 m->kind == BT_M_MAX ? ".max" : "");
			vals = vbuf;
		}
	}
	if (!keys[0]) {
		/* a map without keys: one constant key */
		strcat(fp->fetch, " k=\\0");
		snprintf(keys, sizeof(keys), "k");
	}
	fp->map = l->id;
	if (!fp->size)
		fp->size = 8192;
	snprintf(fp->trigger, sizeof(fp->trigger), "hist:keys=%s:vals=%s:size=%u", keys, vals,
		 fp->size);
	return true;
}

static bool is_builtin(const struct bt_node *n, int b)
{
	return n && n->k == BT_N_BUILTIN && n->ival == b;
}

/* @m[tid] (m < 0: any map) */
static bool is_map_tid(const struct bt_node *n, int m)
{
	return n && n->k == BT_N_MAP && (m < 0 || n->id == m) && n->n == 1 &&
	       is_builtin(n->v[0], BT_B_TID);
}

/* nsecs - @m[tid] */
static bool is_since(const struct bt_node *n, int m)
{
	return n && n->k == BT_N_BIN && n->op == T_MINUS && is_builtin(n->a, BT_B_NSECS) &&
	       is_map_tid(n->b, m);
}

static int prog_map_refs(const struct bt_prog *p, int map)
{
	int refs = 0;

	for (unsigned i = 0; i < p->nprobes; i++)
		refs += count_map_refs(p->probes[i].pred, map) +
			count_map_refs(p->probes[i].body, map);
	return refs;
}

static int count_var_refs(const struct bt_node *n, int var)
{
	int c = 0;

	if (!n)
		return 0;
	if (n->k == BT_N_VAR && n->id == var)
		c++;
	c += count_var_refs(n->a, var) + count_var_refs(n->b, var) + count_var_refs(n->c, var);
	for (unsigned i = 0; i < n->n; i++)
		c += count_var_refs(n->v[i], var);
	return c;
}

/* Both probes' attach points the same functions, in the same order, entry and return. */
static bool same_functions(const struct bt_probe *e, const struct bt_probe *r)
{
	if (e->nap != r->nap)
		return false;
	for (unsigned j = 0; j < e->nap; j++)
		if (e->ap[j].kind != BT_P_UPROBE || r->ap[j].kind != BT_P_URETPROBE ||
		    strcmp(e->ap[j].target, r->ap[j].target) || strcmp(e->ap[j].func, r->ap[j].func) ||
		    has_glob(e->ap[j].func))
			return false;
	return true;
}

/*
 * The latency pair, gethostlatency.bt's shape:
 *   uprobe:X:f { @start[tid] = nsecs; }
 *   uretprobe:X:f /@start[tid]/ { [$d = nsecs - @start[tid];] @h = hist(nsecs - @start[tid] | $d);
 *                                 delete(@start[tid]); }
 * with @start and @h used nowhere else.  The return probe pi becomes a hist trigger keyed
 * by $duration.log2floor (the agent keeps a return probe's entry time: section 1 of
 * docs/design.md), bpftrace's hist buckets; the entry probe runs nowhere (fp->folded
 * names it, so its probes are still counted).  Per thread, as @start[tid] is: the same
 * answers for a function that does not call itself; a recursive one pairs each return
 * with its own entry, where bpftrace pairs it with the last entry of the thread.
 */
static bool fast_latency(const struct bt_prog *p, unsigned pi, struct fastplan *fp, bool sum)
{
	const struct bt_probe *r = &p->probes[pi], *e = NULL;
	const struct bt_node *b = r->body, *st, *h;
	unsigned s = 0;
	int start, var = -1, ei = -1, cleared = 0;

	memset(fp, 0, sizeof(*fp));
	fp->folded = -1;
	if (!is_map_tid(r->pred, -1) || !b || b->n < 2 || b->n > 3)
		return false;
	start = r->pred->id;
	st = b->v[s];
	if (b->n == 3) {
		if (st->k != BT_N_ASSIGN || st->op != T_ASSIGN || st->a->k != BT_N_VAR ||
		    !is_since(st->b, start))
			return false;
		var = st->a->id;
		st = b->v[++s];
	}
	/* @h = hist(...) */
	if (st->k != BT_N_ASSIGN || st->op != T_ASSIGN || st->a->k != BT_N_MAP || st->a->n ||
	    st->b->k != BT_N_CALL || st->b->op != F_HIST || st->b->n != 1 ||
	    p->maps[st->a->id].kind != BT_M_HIST || prog_map_refs(p, st->a->id) != 1)
		return false;
	h = st->b->v[0];
	if (var >= 0 ? !(h->k == BT_N_VAR && h->id == var) || count_var_refs(b, var) != 2
		     : !is_since(h, start))
		return false;
	fp->map = st->a->id;
	/* delete(@start[tid]) */
	st = b->v[++s];
	if (st->k != BT_N_CALL || st->op != F_DELETE || st->n != 1 || !is_map_tid(st->v[0], start))
		return false;
	/* the entry: @start[tid] = nsecs, alone; END may clear(@start) (empty here) */
	for (unsigned i = 0; i < p->nprobes; i++) {
		const struct bt_probe *q = &p->probes[i];

		if (q->nap == 1 && q->ap[0].kind == BT_P_END && !q->pred && q->body)
			for (unsigned j = 0; j < q->body->n; j++) {
				st = q->body->v[j];
				if (st->k == BT_N_CALL && st->op == F_CLEAR && st->n == 1 &&
				    st->v[0]->k == BT_N_MAP && st->v[0]->id == start)
					cleared++;
			}
		if (i == pi || !count_map_refs(q->body, start) || q->ap[0].kind == BT_P_END)
			continue;
		if (e || q->pred || !q->body || q->body->n != 1)
			return false;
		st = q->body->v[0];
		if (st->k != BT_N_ASSIGN || st->op != T_ASSIGN || !is_map_tid(st->a, start) ||
		    !is_builtin(st->b, BT_B_NSECS))
			return false;
		e = q;
		ei = (int)i;
	}
	if (!e || prog_map_refs(p, start) != 4 + cleared || !same_functions(e, r))
		return false;
	fp->valkey = true;
	fp->log2floor = true;
	fp->size = 128; /* 65 bit lengths */
	fp->bucket_sum = sum;
	snprintf(fp->trigger, sizeof(fp->trigger), "hist:keys=$duration.log2floor:vals=%s:size=%u",
		 sum ? "$duration" : "hitcount", fp->size);
	fp->folded = ei;
	return true;
}

/* A probe the session holds: which program probe and what its builtins say. */
struct hooked {
	struct bt_rt *rt;
	unsigned probe;
	char *func;
	char *name;
	bool usdt;
	FILE *out;
	bool flush;
	unsigned spec;
	const struct fastplan *fast; /* in-process: its trigger's table feeds the map */
};

static void on_hit(void *arg, const struct up_trace_hit *h)
{
	struct hooked *k = arg;
	uint64_t uargs[16];
	struct bt_ctx c = { .hit = h, .func = k->func, .probe = k->name };

	if (k->usdt) {
		c.nusdt = up_trace_hit_args(h, uargs, 16);
		c.usdt_args = uargs;
	}
	bt_rt_run(k->rt, k->probe, &c);
	if (k->flush)
		fflush(k->out);
	if (bt_rt_exiting(k->rt) && (!cli_stop_sig || cli_stop_sig == CLI_STOP_TICK))
		cli_stop_sig = STOP_EXIT;
}

static char *read_all(FILE *f)
{
	size_t n = 0, cap = 4096;
	char *s = malloc(cap);

	while (s) {
		size_t r = fread(s + n, 1, cap - n - 1, f);

		n += r;
		if (n + 1 < cap)
			break;
		cap *= 2;
		char *t = realloc(s, cap);

		if (!t) {
			free(s);
			return NULL;
		}
		s = t;
	}
	if (s)
		s[n] = '\0';
	return s;
}

/* A program in PATH (uprobe:bash:readline). */
static bool in_exec_path(const char *name, char *out, size_t size)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (!path)
		path = "/bin:/usr/bin";
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *sv, *t = strtok_r(buf, ":", &sv); t; t = strtok_r(NULL, ":", &sv)) {
		struct stat st;

		snprintf(out, size, "%s/%s", t, name);
		if (!stat(out, &st) && S_ISREG(st.st_mode) && !access(out, X_OK))
			return true;
	}
	return false;
}

static bool resolve_target(const char *target, pid_t pid, char *out, size_t size)
{
	if (strchr(target, '/')) {
		snprintf(out, size, "%s", target);
		return true;
	}
	if (up_sym_find_lib(target, pid, out, size))
		return true;
	return in_exec_path(target, out, size);
}


/*
 * The function an expanded spec (PATH:0xOFFSET, named after the function with the
 * characters an event name cannot hold made '_') stands for: among the functions at
 * that address that match the glob, the one whose name gives the event's.
 */
struct name_find {
	const char *glob, *event;
	uint64_t vaddr;
	char best[256];
	bool exact;
};

static bool event_of(const char *name, const char *event)
{
	size_t i;

	for (i = 0; name[i] && event[i]; i++)
		if (event[i] != name[i] && !(event[i] == '_' && !(isalnum((unsigned char)name[i]) ||
								 name[i] == '_')))
			return false;
	return !name[i] && (!event[i] || event[i] == '_');
}

static int name_find_fn(const struct up_sym *sym, void *ctx)
{
	struct name_find *nf = ctx;

	if (sym->value != nf->vaddr || fnmatch(nf->glob, sym->name, 0))
		return 0;
	if (!nf->best[0] || (!nf->exact && event_of(sym->name, nf->event))) {
		snprintf(nf->best, sizeof(nf->best), "%s", sym->name);
		nf->exact = event_of(sym->name, nf->event);
	}
	return 0;
}

static char *expanded_name(struct up_sym_elf *elf, const struct up_spec *sp, const char *glob)
{
	struct name_find nf = { .glob = glob, .event = sp->event };

	if (sp->symbol)
		return strdup(sp->symbol);
	if (!elf || sp->target != UP_TARGET_OFFSET ||
	    up_sym_elf_offset_to_vaddr(elf, sp->offset, &nf.vaddr))
		return strdup(sp->event);
	up_sym_elf_for_each_func(elf, name_find_fn, &nf);
	return strdup(nf.best[0] ? nf.best : sp->event);
}

struct adder {
	struct up_trace *tr;
	struct bt_rt *rt;
	const struct bt_attach *ap;
	unsigned probe;
	const char *path;
	struct up_sym_elf *elf; /* the path's, for names of a glob's functions */
	unsigned added;
	struct hooked **hooks;
	unsigned nhooks;
	int verbose;
	FILE *out;
	bool flush;
	const struct fastplan *fast; /* the probe's, or NULL: the trap path */
	bool unfast; /* a spec of the probe's could not take its trigger */
	char err[1024];
};

static int add_one(void *ctx, const char *spec)
{
	struct adder *a = ctx;
	char err[1024];
	int rc = up_trace_add(a->tr, spec, err, sizeof(err));
	unsigned i = up_trace_nspecs(a->tr) - 1;
	const struct up_spec *sp;
	struct hooked *k, **v;
	const char *kind;

	if (rc) {
		/* bpftrace leaves out, silently, a function the file does not have */
		if (a->verbose > 0 || rc != -ENOENT)
			fprintf(stderr, "uprobe run: %s: left out: %s%s", a->ap->text, err,
				err[0] && err[strlen(err) - 1] == '\n' ? "" : "\n");
		return 0;
	}
	sp = up_trace_spec(a->tr, i);
	k = calloc(1, sizeof(*k));
	v = realloc(a->hooks, (a->nhooks + 1) * sizeof(*v));
	if (!k || !v) {
		free(k);
		return -ENOMEM;
	}
	a->hooks = v;
	v[a->nhooks++] = k;
	k->rt = a->rt;
	k->probe = a->probe;
	k->out = a->out;
	k->flush = a->flush;
	k->usdt = a->ap->kind == BT_P_USDT;
	kind = a->ap->kind == BT_P_UPROBE ? "uprobe" : a->ap->kind == BT_P_URETPROBE ? "uretprobe"
									     : "usdt";
	k->func = k->usdt ? strdup(a->ap->func) : expanded_name(a->elf, sp, a->ap->func);
	if (asprintf(&k->name, "%s:%s:%s", kind, a->path, k->func) < 0)
		k->name = NULL;
	if (!k->func || !k->name)
		return -ENOMEM;
	k->spec = i;
	if (a->fast) {
		char trig[512];

		snprintf(trig, sizeof(trig), "%s/%s:%s", sp->group, sp->event, a->fast->trigger);
		if (up_trace_add_trigger(a->tr, trig, err, sizeof(err)) == 0) {
			k->fast = a->fast;
			if (a->verbose > 0)
				fprintf(stderr, "uprobe run: %s: in the process (%s)\n", k->name, trig);
		} else if (a->verbose > 0) {
			fprintf(stderr, "uprobe run: %s: the trap path: %s\n", k->name, err);
		}
	}
	if (!k->fast) {
		a->unfast = a->fast != NULL;
		up_trace_set_hit_fn(a->tr, i, on_hit, k);
	}
	a->added++;
	if (a->verbose > 0)
		fprintf(stderr, "uprobe run: %s: %s\n", k->name, spec);
	return 0;
}

static bool node_uses(const struct bt_node *n, int builtin)
{
	if (!n)
		return false;
	if (n->k == BT_N_BUILTIN && n->ival == builtin)
		return true;
	if (node_uses(n->a, builtin) || node_uses(n->b, builtin) || node_uses(n->c, builtin))
		return true;
	for (unsigned i = 0; i < n->n; i++)
		if (node_uses(n->v[i], builtin))
			return true;
	return false;
}

/* -c's text split at blanks, no shell (bpftrace's): 0, or the CLI status said. */
static int split_cmd(const char *cmd, char ***out)
{
	/* from the first word: v[0] is the copy, which the caller frees */
	char *copy = strdup(cmd + strspn(cmd, " \t"));
	char **v = calloc(strlen(cmd) / 2 + 2, sizeof(*v));
	unsigned n = 0;

	if (!copy || !v) {
		free(copy);
		free(v);
		cli_err("run", "%s", strerror(ENOMEM));
		return CLI_FAIL;
	}
	for (char *sv, *t = strtok_r(copy, " \t", &sv); t; t = strtok_r(NULL, " \t", &sv))
		v[n++] = t;
	if (!n) {
		free(copy);
		free(v);
		return cli_usage_error(&cli_cmd_run, "-c: no command");
	}
	*out = v;
	return 0;
}

static void on_child(int sig)
{
	(void)sig; /* wakes the loop's sigsuspend */
}

/* The session's notes, with -v. */
static void run_log(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "uprobe run: %s\n", msg);
}

/* Does a user-space probe of p read the builtin? */
static bool prog_uses(const struct bt_prog *p, int builtin)
{
	for (unsigned i = 0; i < p->nprobes; i++)
		if (p->probes[i].nap && (p->probes[i].ap[0].kind == BT_P_UPROBE ||
					 p->probes[i].ap[0].kind == BT_P_URETPROBE ||
					 p->probes[i].ap[0].kind == BT_P_USDT) &&
		    (node_uses(p->probes[i].pred, builtin) || node_uses(p->probes[i].body, builtin)))
			return true;
	return false;
}

/* The program's user-space attach points, into the session. */
static int add_probes_of(struct adder *a, struct bt_prog *p, pid_t pid, struct fastplan *plans,
			 unsigned i);

static int add_probes(struct adder *a, struct bt_prog *p, pid_t pid, struct fastplan *plans)
{
	for (unsigned i = 0; i < p->nprobes; i++) {
		unsigned before = a->added;
		int rc;

		if (plans && plans[i].skip)
			continue;
		a->unfast = false;
		rc = add_probes_of(a, p, pid, plans, i);
		if (rc)
			return rc;
		/* the latency pair's entry: as many probes as its return (bpftrace's count);
		   where a return could not take its trigger (on the trap path), the entry
		   runs as written, so that @start[tid] is there */
		if (plans && plans[i].trigger[0] && plans[i].folded >= 0 && a->unfast) {
			unsigned e = (unsigned)plans[i].folded;

			plans[e].trigger[0] = '\0'; /* still skipped by this loop: added here */
			if (a->verbose > 0)
				fprintf(stderr, "uprobe run: probe %u: the entry of %s's latency "
					"pair: on the trap path, as its return\n", e + 1,
					p->maps[plans[i].map].name);
			rc = add_probes_of(a, p, pid, plans, e);
			if (rc)
				return rc;
		} else if (plans && plans[i].trigger[0] && plans[i].folded >= 0) {
			a->added += a->added - before;
			if (a->verbose > 0)
				fprintf(stderr, "uprobe run: probe %d: the entry of %s's latency pair: "
					"its return's $duration, in the process\n", plans[i].folded + 1,
					p->maps[plans[i].map].name);
		}
	}
	return 0;
}

static int add_probes_of(struct adder *a, struct bt_prog *p, pid_t pid, struct fastplan *plans,
			 unsigned i)
{
	{
		for (unsigned j = 0; j < p->probes[i].nap; j++) {
			const struct bt_attach *ap = &p->probes[i].ap[j];
			char path[PATH_MAX], text[PATH_MAX + 512];
			struct up_expand_stats st;
			struct up_spec_err se;
			int rc;

			if (ap->kind != BT_P_UPROBE && ap->kind != BT_P_URETPROBE &&
			    ap->kind != BT_P_USDT)
				continue;
			if (!resolve_target(ap->target, pid, path, sizeof(path))) {
				bt_errf(p, ap->line, ap->col, ap->len, a->err, sizeof(a->err),
					"uprobe target file '%s' does not exist or is not executable",
					ap->target);
				return -ENOENT;
			}
			a->ap = ap;
			a->probe = i;
			a->path = path;
			if (ap->kind == BT_P_USDT)
				snprintf(text, sizeof(text), "u:bt%u_%u/%s %s:%s", i, j, "e", path,
					 ap->func);
			else
				snprintf(text, sizeof(text), "%c:bt%u_%u/%s %s:%s%s",
					 ap->kind == BT_P_URETPROBE ? 'r' : 'p', i, j,
					 has_glob(ap->func) ? "*" : "e", path, ap->func,
					 plans && plans[i].trigger[0] ? plans[i].fetch : "");
			a->fast = plans && plans[i].trigger[0] ? &plans[i] : NULL;
			a->elf = NULL;
			if (ap->kind != BT_P_USDT && has_glob(ap->func) &&
			    up_sym_elf_open(path, &a->elf))
				a->elf = NULL;
			rc = up_expand(text, add_one, a, &st, &se);
			up_sym_elf_close(a->elf);
			a->elf = NULL;
			if (rc == -ENOMEM)
				return rc;
			if (rc && (a->verbose > 0 || rc != -ENOENT)) {
				char e[1024];

				up_spec_err_format(text, &se, e, sizeof(e));
				fprintf(stderr, "uprobe run: %s: left out:\n%s", ap->text, e);
			}
		}
	}
	return 0;
}


struct feed {
	struct bt_map *m;
	const struct fastplan *fp;
	unsigned fails;
};

static int feed_one(void *ctx, const struct up_hist_key *k, uint64_t hits, const uint64_t *vals)
{
	struct feed *fd = ctx;
	struct bt_val key[3];
	struct bt_entry *e;
	int64_t v = 0;

	memset(key, 0, sizeof(key));
	for (unsigned i = 0; i < fd->fp->nmapkeys; i++) {
		if (fd->fp->keystr[i]) {
			key[i].t = BT_T_STR;
			key[i].s = k->str[i] ? k->str[i] : "";
			continue;
		}
		key[i].t = BT_T_INT;
		key[i].bits = 64;
		key[i].i = (int64_t)k->num[i];
	}
	if (fd->fp->valkey)
		v = (int64_t)k->num[fd->fp->nmapkeys];
	else if (fd->fp->has_val)
		v = (int64_t)vals[0];
	if (fd->fp->log2floor) /* a bit length: its bucket's low bound (64: negative) */
		v = v <= 0 ? 0 : v >= 64 ? -1 : (int64_t)(1ull << (v - 1));
	e = bt_table_get(fd->m, key, fd->fp->nmapkeys, true);
	if (!e) {
		fd->fails++;
		return 0;
	}
	if (fd->fp->bucket_sum)
		bt_entry_merge_total(fd->m, e, hits, v, (int64_t)vals[0]);
	else
		bt_entry_merge(fd->m, e, hits, v);
	return 0;
}

/* The in-process tables into the program's maps, before the session goes. */
static void feed_maps(struct up_trace *tr, struct bt_prog *p, struct adder *a)
{
	for (unsigned i = 0; i < a->nhooks; i++) {
		const struct hooked *k = a->hooks[i];
		struct feed fd = { .m = k->fast ? &p->maps[k->fast->map] : NULL, .fp = k->fast };
		uint64_t dropped = 0;

		if (!k->fast)
			continue;
		up_trace_hist_for_each(tr, k->spec, feed_one, &fd, &dropped);
		if (dropped || fd.fails)
			cli_err("run", "%s: %" PRIu64 " hits found no room in the in-process table "
				"(%u keys): left out of %s (--no-fast counts every one)", k->name,
				dropped + fd.fails, k->fast->size, p->maps[k->fast->map].name);
	}
}

/* --listen: the program's maps as they are now, the processes' tables merged into
   copies, as Prometheus metrics (bt_map_print_prom) */
struct run_metrics {
	struct up_trace *tr;
	struct bt_prog *p;
	struct adder *a;
};

static int render_run(void *arg, FILE *f, bool om, unsigned max_series)
{
	struct run_metrics *r = arg;
	struct bt_prog *p = r->p;
	struct bt_map *c = calloc(p->nmaps ? p->nmaps : 1, sizeof(*c));
	unsigned *order = calloc(p->nmaps ? p->nmaps : 1, sizeof(*order));
	int rc = 0;

	if (!c || !order) {
		free(c);
		free(order);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < p->nmaps && !rc; i++) {
		c[i] = p->maps[i];
		c[i].t = bt_table_copy(&p->maps[i]);
		if (!c[i].t)
			rc = -ENOMEM;
		order[i] = i;
	}
	for (unsigned i = 0; i < r->a->nhooks && !rc && r->tr; i++) {
		const struct hooked *k = r->a->hooks[i];
		struct feed fd = { .m = k->fast ? &c[k->fast->map] : NULL, .fp = k->fast };
		uint64_t dropped = 0;

		if (k->fast)
			up_trace_hist_for_each(r->tr, k->spec, feed_one, &fd, &dropped);
	}
	/* by name, as the maps are printed */
	for (unsigned i = 1; i < p->nmaps; i++)
		for (unsigned j = i; j > 0 && strcmp(c[order[j - 1]].name, c[order[j]].name) > 0;
		     j--) {
			unsigned t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	if (!rc) {
		uint64_t *over = calloc(p->nmaps ? p->nmaps : 1, sizeof(*over));

		if (!over)
			rc = -ENOMEM;
		for (unsigned i = 0; i < p->nmaps && !rc; i++)
			rc = bt_map_print_prom(f, &c[order[i]], om, max_series, &over[order[i]]);
		if (!rc) {
			fprintf(f, "# HELP uprobe_run_keys_dropped%s New keys a map refused: it held "
				   "BPFTRACE_MAP_KEYS_MAX.\n# TYPE uprobe_run_keys_dropped%s counter\n",
				om ? "" : "_total", om ? "" : "_total");
			for (unsigned i = 0; i < p->nmaps; i++)
				fprintf(f, "uprobe_run_keys_dropped_total{map=\"%s\"} %" PRIu64 "\n",
					c[order[i]].name, bt_table_dropped(&c[order[i]], NULL));
			fprintf(f, "# HELP uprobe_run_overflow%s What the keys beyond --max-series "
				   "counted.\n# TYPE uprobe_run_overflow%s counter\n",
				om ? "" : "_total", om ? "" : "_total");
			for (unsigned i = 0; i < p->nmaps; i++)
				fprintf(f, "uprobe_run_overflow_total{map=\"%s\"} %" PRIu64 "\n",
					c[order[i]].name, over[order[i]]);
			if (om)
				fputs("# EOF\n", f);
		}
		free(over);
	}
	for (unsigned i = 0; i < p->nmaps; i++)
		bt_table_free(c[i].t);
	free(c);
	free(order);
	return rc ? rc : ferror(f) ? -EIO : 0;
}

/* -l PATTERN: the functions a uprobe:PATH:GLOB matches, one probe a line. */
struct lister {
	const char *kind, *path, *glob;
	struct up_sym_elf *elf;
	char **v; /* the lines, sorted before they are printed (as bpftrace -l) */
	unsigned n;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_one(void *ctx, const char *spec)
{
	struct lister *l = ctx;
	struct up_spec sp;
	struct up_spec_err se;

	if (up_spec_parse(spec, &sp, &se))
		return 0;
	{
		char *name = expanded_name(l->elf, &sp, l->glob), *line;
		char **v = realloc(l->v, (l->n + 1) * sizeof(*v));

		if (!v || asprintf(&line, "%s:%s:%s", l->kind, l->path, name ? name : sp.event) < 0) {
			free(name);
			up_spec_free(&sp);
			return -ENOMEM;
		}
		free(name);
		l->v = v;
		v[l->n++] = line;
	}
	up_spec_free(&sp);
	return 0;
}

static int list_probes(const char *pattern, pid_t pid)
{
	char *c1, *c2, path[PATH_MAX], text[2 * PATH_MAX + 1024];
	char type[32], target[PATH_MAX], func[512];
	struct lister l = { 0 };
	struct up_spec_err se;
	int rc;

	if (!pattern) {
		fputs("uprobe run: -l needs a PATTERN here: uprobe:BIN:GLOB (user space has no "
		      "list of every probe)\n", stderr);
		return CLI_USAGE;
	}
	c1 = strchr(pattern, ':');
	c2 = c1 ? strrchr(c1 + 1, ':') : NULL;
	if (!c1 || !c2 || c2 == c1 || (size_t)(c1 - pattern) >= sizeof(type)) {
		fprintf(stderr, "uprobe run: -l '%s': give uprobe:BIN:GLOB\n", pattern);
		return CLI_USAGE;
	}
	snprintf(type, sizeof(type), "%.*s", (int)(c1 - pattern), pattern);
	snprintf(target, sizeof(target), "%.*s", (int)(c2 - c1 - 1), c1 + 1);
	snprintf(func, sizeof(func), "%s", c2 + 1);
	if (strcmp(type, "uprobe") && strcmp(type, "uretprobe") && strcmp(type, "u") &&
	    strcmp(type, "ur")) {
		fprintf(stderr, "uprobe run: -l '%s': uprobe run lists uprobe:BIN:GLOB probes\n",
			pattern);
		return CLI_USAGE;
	}
	if (!resolve_target(target, pid, path, sizeof(path))) {
		fprintf(stderr, "uprobe run: -l: '%s': no such file or library\n", target);
		return CLI_FAIL;
	}
	l.kind = type[1] == 'r' || !strcmp(type, "uretprobe") ? "uretprobe" : "uprobe";
	l.path = path;
	/* a name without a glob lists that function (and its look-alikes: name*) */
	snprintf(text, sizeof(text), "p:l/* %s:%s%s", path, func, has_glob(func) ? "" : "*");
	snprintf(func + strlen(func), sizeof(func) - strlen(func), "%s", has_glob(func) ? "" : "*");
	l.glob = func;
	if (up_sym_elf_open(path, &l.elf))
		l.elf = NULL;
	rc = up_expand(text, list_one, &l, NULL, &se);
	up_sym_elf_close(l.elf);
	qsort(l.v, l.n, sizeof(*l.v), cmp_str);
	for (unsigned i = 0; i < l.n; i++) {
		puts(l.v[i]);
		free(l.v[i]);
	}
	free(l.v);
	if (rc && rc != -ENOENT) {
		char e[1024];

		up_spec_err_format(text, &se, e, sizeof(e));
		fprintf(stderr, "uprobe run: -l:\n%s", e);
		return CLI_FAIL;
	}
	return CLI_OK;
}

static unsigned long gcd(unsigned long a, unsigned long b)
{
	while (b) {
		unsigned long t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Runs every probe of kind (BEGIN, END) in the program's order. */
static void run_kind(struct bt_rt *rt, struct bt_prog *p, enum bt_pk kind, FILE *out)
{
	for (unsigned i = 0; i < p->nprobes; i++)
		for (unsigned j = 0; j < p->probes[i].nap; j++)
			if (p->probes[i].ap[j].kind == kind) {
				struct bt_ctx c = { .probe = p->probes[i].ap[j].text };

				if (kind == BT_P_END && bt_rt_exiting(rt))
					return;
				bt_rt_run(rt, i, &c);
				fflush(out);
			}
}

static int run_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "no-fast", no_argument, NULL, 'F' },
		{ "listen", required_argument, NULL, 'M' },
		{ "max-series", required_argument, NULL, 'Q' },
		{ 0, 0, 0, 0 },
	};
	const char *prog_text = NULL, *prog_file = NULL, *outpath = NULL, *cmd = NULL;
	const char *format = NULL;
	bool list = false, no_fast = false;
	struct fastplan *plans = NULL;
	int verbose = 0, c, status = CLI_OK, rc;
	pid_t pid = 0, child = 0, plain = 0; /* plain: -c's command, untraced */
	char *src = NULL, err[4096];
	struct bt_prog *prog = NULL;
	struct bt_rt *rt = NULL;
	struct up_trace *tr = NULL;
	struct adder ad = { 0 };
	FILE *out = stdout, *outf = NULL;
	char **cargv = NULL;
	unsigned nprobes = 0, nuser = 0;
	uint64_t period_ns = 0;
	bool flush = false;
	const char *listen_at = NULL;
	unsigned max_series = 1000;
	struct cli_listen *srv = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "e:p:c:o:f:lvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'e': prog_text = optarg; break;
		case 'c': cmd = optarg; break;
		case 'o': outpath = optarg; break;
		case 'f': format = optarg; break;
		case 'l': list = true; break;
		case 'v': verbose++; break;
		case 'F': no_fast = true; break;
		case 'M': listen_at = optarg; break;
		case 'Q': {
			char *end;
			unsigned long n = strtoul(optarg, &end, 10);

			if (*end || !n || n > 1000000)
				return cli_usage_error(&cli_cmd_run,
						       "--max-series '%s': expected 1 to 1000000", optarg);
			max_series = (unsigned)n;
			break;
		}
		case 'p': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v <= 0 || v > INT_MAX)
				return cli_usage_error(&cli_cmd_run, "-p '%s': not a process id", optarg);
			pid = (pid_t)v;
			break;
		}
		case 'h':
			run_usage(stdout);
			return CLI_OK;
		default:
			return cli_usage_error(&cli_cmd_run, "unknown option");
		}
	}
	if (format && strcmp(format, "text") && strcmp(format, "json"))
		return cli_usage_error(&cli_cmd_run, "-f %s: text or json", format);
	if (list)
		return list_probes(optind < argc ? argv[optind] : prog_text, pid);
	if (pid && cmd)
		return cli_usage_error(&cli_cmd_run, "-p and -c: one or the other");
	if (!prog_text) {
		FILE *f;

		if (optind >= argc)
			return cli_usage_error(&cli_cmd_run, "no program: give -e PROGRAM or a FILE");
		prog_file = argv[optind++];
		f = strcmp(prog_file, "-") ? fopen(prog_file, "re") : stdin;
		if (!f) {
			cli_err("run", "%s: %s", prog_file, strerror(errno));
			return CLI_FAIL;
		}
		src = read_all(f);
		if (f != stdin)
			fclose(f);
	} else {
		src = strdup(prog_text);
	}
	if (!src) {
		cli_err("run", "%s", strerror(ENOMEM));
		return CLI_FAIL;
	}
	rc = bt_parse(src, prog_file && strcmp(prog_file, "-") ? prog_file : "stdin", &prog, err,
		      sizeof(err));
	if (!rc)
		rc = bt_check_pos(prog, (const char *const *)argv + optind,
				  (unsigned)(argc - optind), err, sizeof(err));
	if (rc) {
		fputs(err, stderr);
		bt_prog_free(prog);
		free(src);
		return CLI_FAIL;
	}
	for (unsigned i = 0; i < prog->nprobes; i++)
		for (unsigned j = 0; j < prog->probes[i].nap; j++) {
			const struct bt_attach *ap = &prog->probes[i].ap[j];

			if (ap->kind == BT_P_INTERVAL)
				period_ns = period_ns ? gcd(period_ns, ap->period_ns) : ap->period_ns;
			if (ap->kind == BT_P_UPROBE || ap->kind == BT_P_URETPROBE ||
			    ap->kind == BT_P_USDT)
				nuser++;
			else
				nprobes++;
		}
	if (nuser && !pid && !cmd) {
		cli_err("run", "uprobes need a process: give -p PID or -c 'CMD' (bpftrace's "
			"system-wide uprobes are the kernel's, and need root)");
		status = CLI_USAGE;
		goto out;
	}
	if (outpath) {
		out = cli_open_output("run", outpath);
		if (!out) {
			status = CLI_USAGE;
			goto out;
		}
		if (out != stdout)
			outf = out;
	}
	{
		struct stat st;

		/* a pipe or a terminal sees each event at once */
		flush = fstat(fileno(out), &st) == 0 && !S_ISREG(st.st_mode);
	}
	signal(SIGPIPE, SIG_IGN);
	{
		struct bt_rt_opts ro = { .out = out, .sep_out = stdout,
					 .pos = (const char *const *)argv + optind,
					 .npos = (unsigned)(argc - optind),
					 .json = format && !strcmp(format, "json") };

		rc = bt_rt_new(prog, &ro, &rt);
		if (rc) {
			cli_err("run", "%s", strerror(-rc));
			status = CLI_FAIL;
			goto out;
		}
	}
	if (nuser) {
		struct up_trace_opts opts = { .out = NULL, .follow = true, .no_fast = no_fast,
					      .verbose = verbose, .log = verbose > 0 ? run_log : NULL };

		plans = calloc(prog->nprobes, sizeof(*plans));
		for (unsigned i = 0; plans && !no_fast && i < prog->nprobes; i++)
			if (!fast_plan(prog, i, &plans[i], listen_at != NULL) &&
			    !fast_latency(prog, i, &plans[i], listen_at != NULL))
				plans[i].trigger[0] = '\0';
		for (unsigned i = 0; plans && !no_fast && i < prog->nprobes; i++)
			if (plans[i].trigger[0] && plans[i].folded >= 0)
				plans[plans[i].folded].skip = true;

		rc = up_trace_new(&opts, &tr);
		if (rc) {
			cli_err("run", "%s", strerror(-rc));
			status = CLI_FAIL;
			goto out;
		}
		/* from the first byte written into a process on, a stop detaches */
		cli_catch_stops(true);
		if (pid) {
			rc = up_trace_attach(tr, pid);
			if (rc) {
				cli_err("run", "cannot trace process %d: %s%s", (int)pid, strerror(-rc),
					rc == -EBUSY ? " (another tracer, a debugger, is attached)" : "");
				status = CLI_FAIL;
				goto out;
			}
		}
		ad.tr = tr;
		ad.rt = rt;
		ad.verbose = verbose;
		ad.out = out;
		ad.flush = flush;
		rc = add_probes(&ad, prog, pid, plans);
		if (rc) {
			if (rc == -ENOMEM)
				cli_err("run", "%s", strerror(-rc));
			else
				fputs(ad.err, stderr);
			status = CLI_FAIL;
			goto out;
		}
		nprobes += ad.added;
		/* comm is the thread's name at the hit, as bpftrace reads it from the
		   kernel: both paths cache names per thread, so renames are watched */
		if (ad.added && prog_uses(prog, BT_B_COMM))
			up_trace_watch_comm(tr, pid);
		if (!nprobes) {
			fputs("No probes to attach\n", stderr);
			status = CLI_FAIL;
			goto out;
		}
		if (cmd) {
			status = split_cmd(cmd, &cargv);
			if (status)
				goto out;
			rc = up_trace_spawn(tr, cargv, &child);
			if (rc) {
				cli_err("run", "cannot run %s: %s", cargv[0], strerror(-rc));
				status = CLI_FAIL;
				goto out;
			}
		}
	}
	if (!nuser && cmd) {
		/* no probe in it: the command runs untraced, and the program ends with it
		   (BEGIN, intervals, END), as bpftrace's -c */
		struct sigaction ca = { .sa_handler = on_child }; /* no SA_RESTART */

		char path[PATH_MAX];

		status = split_cmd(cmd, &cargv);
		if (status)
			goto out;
		/* refused before anything is attached, as a traced command is */
		if (strchr(cargv[0], '/') ? access(cargv[0], X_OK) != 0
					  : !in_exec_path(cargv[0], path, sizeof(path))) {
			cli_err("run", "cannot run %s: %s", cargv[0],
				strerror(strchr(cargv[0], '/') ? errno : ENOENT));
			status = CLI_FAIL;
			goto out;
		}
		sigaction(SIGCHLD, &ca, NULL);
		fflush(NULL);
		plain = fork();
		if (plain < 0) {
			cli_err("run", "cannot run %s: %s", cargv[0], strerror(errno));
			status = CLI_FAIL;
			goto out;
		}
		if (!plain) {
			execvp(cargv[0], cargv);
			fprintf(stderr, "uprobe run: cannot run %s: %s\n", cargv[0], strerror(errno));
			_exit(127);
		}
	}
	if (format && !strcmp(format, "json"))
		fprintf(out, "{\"type\": \"attached_probes\", \"data\": {\"probes\": %u}}\n",
			nprobes);
	else
		fprintf(out, "Attaching %u probe%s...\n", nprobes, nprobes == 1 ? "" : "s");
	fflush(out);
	cli_catch_stops(true);
	if (listen_at) {
		struct sigaction wa = { .sa_handler = cli_on_scrape }; /* no SA_RESTART */
		char lerr[256];

		sigaction(SIGUSR2, &wa, NULL);
		rc = cli_listen_start(listen_at, max_series, true, &srv, lerr, sizeof(lerr));
		if (rc) {
			cli_err("run", "%s", lerr);
			status = rc == -EINVAL ? CLI_USAGE : CLI_FAIL;
			if (child)
				kill(child, SIGKILL);
			goto out;
		}
		cli_err("run", "metrics at http://%s/metrics", cli_listen_where(srv));
	}
	run_kind(rt, prog, BT_P_BEGIN, out);
	if (tr) {
		rc = up_trace_start(tr);
		if (rc) {
			if (rc != -ECANCELED)
				cli_err("run", "cannot start tracing: %s", strerror(-rc));
			status = CLI_FAIL;
			if (child)
				kill(child, SIGKILL);
			goto out;
		}
	}
	cli_catch_stops(false); /* the loop's wait returns for a stop */
	if (period_ns) {
		struct sigaction ta = { .sa_handler = cli_on_tick };
		struct itimerval it;

		it.it_interval.tv_sec = (time_t)(period_ns / 1000000000ull);
		it.it_interval.tv_usec = (suseconds_t)(period_ns % 1000000000ull / 1000);
		it.it_value = it.it_interval;
		sigaction(SIGALRM, &ta, NULL);
		setitimer(ITIMER_REAL, &it, NULL);
	}
	{
		uint64_t ticks = 0;

		while (!bt_rt_exiting(rt)) {
			sigset_t all, old;

			bool tick, scrape;

			if (tr) {
				rc = up_trace_run(tr, &cli_stop_sig);
				if (rc != -EINTR)
					break;
			} else if (plain) {
				/* until the command ends, a tick, a scrape or a stop */
				sigset_t chld, prev;
				int st;

				sigemptyset(&chld);
				sigaddset(&chld, SIGCHLD);
				sigprocmask(SIG_BLOCK, &chld, &prev);
				if (waitpid(plain, &st, WNOHANG) == plain)
					plain = 0;
				else if (!cli_stop_sig && !cli_tick_due)
					sigsuspend(&prev);
				sigprocmask(SIG_SETMASK, &prev, NULL);
				if (plain && waitpid(plain, &st, WNOHANG) == plain)
					plain = 0;
				if (!plain)
					break;
			} else if (!cli_stop_sig) {
				pause();
			}
			scrape = srv && cli_listen_due(srv);
			if (!cli_tick_due && !scrape)
				break;
			sigfillset(&all);
			sigprocmask(SIG_BLOCK, &all, &old);
			if (cli_stop_sig == CLI_STOP_TICK)
				cli_stop_sig = 0;
			tick = cli_tick_due;
			cli_tick_due = 0;
			sigprocmask(SIG_SETMASK, &old, NULL);
			if (cli_stop_sig)
				break;
			if (scrape) {
				struct run_metrics rm = { tr, prog, &ad };

				cli_listen_serve_with(srv, render_run, &rm);
			}
			if (!tick)
				continue;
			ticks++;
			/* each interval probe whose period this tick ends */
			for (unsigned i = 0; i < prog->nprobes && !bt_rt_exiting(rt); i++)
				for (unsigned j = 0; j < prog->probes[i].nap; j++) {
					const struct bt_attach *ap = &prog->probes[i].ap[j];
					struct bt_ctx cx = { .probe = ap->text };

					if (ap->kind == BT_P_INTERVAL &&
					    ticks % (ap->period_ns / period_ns) == 0) {
						bt_rt_run(rt, i, &cx);
						fflush(out);
					}
				}
		}
	}
	if (period_ns) {
		struct itimerval off = { { 0, 0 }, { 0, 0 } };

		setitimer(ITIMER_REAL, &off, NULL);
	}
	if (tr) /* what waits in the rings, handled while the processes run on */
		up_trace_finish(tr);
	/* the probes out before END: the process runs on, unprobed; what the processes
	   aggregated comes into the maps first */
	cli_listen_stop(srv); /* before the session goes: no scrape waits on it */
	srv = NULL;
	if (tr)
		feed_maps(tr, prog, &ad);
	if (tr) {
		up_trace_free(tr);
		tr = NULL;
	}
	{
		/* exit() in a body stops the others, not END */
		struct bt_rt *end_rt = rt;

		if (bt_rt_exiting(rt)) {
			struct bt_rt_opts ro = { .out = out, .sep_out = stdout,
						 .pos = (const char *const *)argv + optind,
						 .npos = (unsigned)(argc - optind),
						 .json = format && !strcmp(format, "json") };

			if (!bt_rt_new(prog, &ro, &end_rt)) {
				run_kind(end_rt, prog, BT_P_END, out);
				bt_rt_free(end_rt);
			}
		} else {
			run_kind(rt, prog, BT_P_END, out);
		}
	}
	bt_rt_print_all(rt);
	for (unsigned i = 0; i < prog->nmaps; i++) {
		size_t max;
		uint64_t n = bt_table_dropped(&prog->maps[i], &max);

		if (n)
			cli_err("run", "%s: %" PRIu64 " updates of new keys dropped: the map "
				"holds %zu keys (BPFTRACE_MAP_KEYS_MAX)", prog->maps[i].name, n, max);
	}
	if (bt_rt_errors(rt) && verbose > 0)
		cli_err("run", "%" PRIu64 " reads of the process's memory failed (their values "
			"are 0 or empty)", bt_rt_errors(rt));
out:
	cli_listen_stop(srv);
	up_trace_free(tr);
	if (child && status == CLI_OK) {
		int st;

		/* the command runs on, unprobed, to its end */
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
	}
	if (plain) {
		int st;

		/* stopped early (exit(), Ctrl-C): the command runs on to its end, as a traced
		   one does */
		while (waitpid(plain, &st, 0) < 0 && errno == EINTR)
			;
	}
	for (unsigned i = 0; i < ad.nhooks; i++) {
		free(ad.hooks[i]->func);
		free(ad.hooks[i]->name);
		free(ad.hooks[i]);
	}
	free(ad.hooks);
	free(plans);
	if (cargv) {
		free(cargv[0]);
		free(cargv);
	}
	bt_rt_free(rt);
	bt_prog_free(prog);
	free(src);
	if (outf)
		fclose(outf);
	else
		fflush(stdout);
	return status;
}

const struct cli_cmd cli_cmd_run = {
	.name = "run",
	.run = run_run,
	.synopsis = "run [-v] [-o FILE] [-p PID | -c 'CMD'] (-e PROGRAM | FILE) [ARG...]",
	.summary = "run a bpftrace program on a process's user-space probes, without privilege",
	.usage = run_usage,
};
