// SPDX-License-Identifier: MIT
/*
 * Spec expansion: the u: (USDT) form, wildcard symbols and DWARF variables and lines
 * turned into the kernel's p:/r: specs (see expand.h).  It owns only
 * text: it reads files' notes and symbols, never a process, and never prints.
 */
#include "trace/expand.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sym/dwarf.h"
#include "sym/file.h"
#include "sym/sym.h"
#include "sym/usdt.h"

/* Makes room for need elements of elem bytes in *v (capacity *cap, doubled). */
static int grow(void *v, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 16;
	void *nv;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	nv = realloc(*(void **)v, ncap * elem);
	if (!nv)
		return -ENOMEM;
	*(void **)v = nv;
	*cap = ncap;
	return 0;
}

/* A growing string; oom set once an append failed. */
struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom || grow(&b->s, &b->cap, b->len + n + 1, 1)) {
		b->oom = true;
		return;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		b->oom = true;
		return;
	}
	sb_put(b, tmp, (size_t)n);
}

/* A spec made: counted and handed on (b is released). */
static int emit(struct sbuf *b, up_expand_fn fn, void *ctx, struct up_expand_stats *st)
{
	int rc = -ENOMEM;

	if (!b->oom) {
		st->specs++;
		rc = fn(ctx, b->s);
	}
	free(b->s);
	memset(b, 0, sizeof(*b));
	return rc;
}

/* Event names already made by one expansion, to make each unique. */
struct names {
	char (*v)[UP_SPEC_NAME_MAX + 1];
	size_t n, cap;
};

static bool names_has(const struct names *ns, const char *s)
{
	for (size_t i = 0; i < ns->n; i++)
		if (!strcmp(ns->v[i], s))
			return true;
	return false;
}

/* base made a valid, unused event name into out: base, base_1, base_2 ... */
static int names_take(struct names *ns, const char *base, char out[UP_SPEC_NAME_MAX + 1])
{
	char clean[UP_SPEC_NAME_MAX + 1];
	size_t i;

	snprintf(clean, sizeof(clean) - 8, "%s", base);
	for (i = 0; clean[i]; i++)
		if (!(isalnum((unsigned char)clean[i]) || clean[i] == '_'))
			clean[i] = '_';
	if (!i || isdigit((unsigned char)clean[0])) {
		memmove(clean + 1, clean, i + 1);
		clean[0] = '_';
	}
	snprintf(out, UP_SPEC_NAME_MAX + 1, "%s", clean);
	for (unsigned k = 1; names_has(ns, out); k++)
		snprintf(out, UP_SPEC_NAME_MAX + 1, "%s_%u", clean, k);
	if (grow(&ns->v, &ns->cap, ns->n + 1, sizeof(*ns->v)))
		return -ENOMEM;
	memcpy(ns->v[ns->n++], out, UP_SPEC_NAME_MAX + 1);
	return 0;
}

/* ---- the spec's parts ------------------------------------------------------------------------ */

struct parts {
	const char *text;
	int head, head_len;	/* "u:grp/ev" */
	int target, target_len; /* "PATH:..." */
	int rest;		/* the fetch args, from the blank after the target */
	int rest_end;		/* a '#' comment cut off */
	char group[UP_SPEC_NAME_MAX + 1];
	int event_pos, event_len; /* 0: none given */
};

static int token(const char *t, int i, int *len)
{
	int s;

	while (t[i] && up_spec_is_blank(t[i]))
		i++;
	s = i;
	while (t[i] && !up_spec_is_blank(t[i]))
		i++;
	*len = i - s;
	return s;
}

static void split(const char *text, struct parts *p)
{
	const char *hash;

	memset(p, 0, sizeof(*p));
	p->text = text;
	p->head = token(text, 0, &p->head_len);
	p->target = token(text, p->head + p->head_len, &p->target_len);
	p->rest = p->target + p->target_len;
	p->rest_end = (int)strlen(text);
	hash = strchr(text + p->rest, '#');
	if (hash)
		p->rest_end = (int)(hash - text);
}

static bool has_glob(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '*' || s[i] == '?' || s[i] == '[')
			return true;
	return false;
}

/* "X[:[GRP/]EVENT]": the group (default uprobes) and where the event is.  star_ok: an
   event "*" means none (a wildcard's). */
static int parse_head(struct parts *p, bool star_ok, struct up_spec_err *err)
{
	const char *t = p->text;
	int i = p->head + 1, e = p->head + p->head_len, slash = -1;

	snprintf(p->group, sizeof(p->group), "%s", UP_SPEC_DEFAULT_GROUP);
	if (i == e)
		return 0;
	if (t[i] != ':')
		return up_spec_fail(err, i, 1, "expected ':' after '%c'", t[p->head]);
	i++;
	for (int k = i; k < e; k++)
		if (t[k] == '/' || t[k] == '.') {
			slash = k;
			break;
		}
	if (slash >= 0) {
		if (slash == i || slash - i > UP_SPEC_NAME_MAX)
			return up_spec_fail(err, i, slash > i ? slash - i : 1, "bad group name");
		memcpy(p->group, t + i, (size_t)(slash - i));
		p->group[slash - i] = '\0';
		i = slash + 1;
	}
	if (star_ok && e - i == 1 && t[i] == '*')
		return 0;
	if (i < e) {
		p->event_pos = i;
		p->event_len = e - i;
	}
	return 0;
}

static bool event_given(const struct parts *p, char out[UP_SPEC_NAME_MAX + 1])
{
	if (!p->event_len || p->event_len > UP_SPEC_NAME_MAX)
		return false;
	memcpy(out, p->text + p->event_pos, (size_t)p->event_len);
	out[p->event_len] = '\0';
	return true;
}

/* ---- USDT ----------------------------------------------------------------------------------- */

/* The user's fetch args with $argN made the note's operands. */
static int usdt_args(const struct parts *pt, const struct up_usdt_probe *pr, struct sbuf *b,
		     struct up_spec_err *err)
{
	const char *t = pt->text;
	int i = pt->rest, e = pt->rest_end;
	bool any = false;

	while (i < e) {
		int s, k, eq = -1;

		while (i < e && up_spec_is_blank(t[i]))
			i++;
		if (i >= e)
			break;
		s = i;
		while (i < e && !up_spec_is_blank(t[i]))
			i++;
		any = true;
		sb_put(b, " ", 1);
		for (k = s; k < i && eq < 0; k++)
			if (t[k] == '=')
				eq = k;
		for (k = s; k < i;) {
			unsigned long n;
			char fetch[64], type[8], *end;
			bool alone;

			if (strncmp(t + k, "$arg", 4) || !isdigit((unsigned char)t[k + 4])) {
				sb_put(b, t + k, 1);
				k++;
				continue;
			}
			n = strtoul(t + k + 4, &end, 10);
			if (pr->nargs < 0)
				return up_spec_fail(err, k, (int)(end - t) - k,
						    "%s:%s: operands '%s' are not understood",
						    pr->provider, pr->name, pr->args_text);
			if (n < 1 || n > (unsigned long)pr->nargs)
				return up_spec_fail(err, k, (int)(end - t) - k,
						    "%s:%s has %d argument%s ($arg1..$arg%d)",
						    pr->provider, pr->name, pr->nargs,
						    pr->nargs == 1 ? "" : "s", pr->nargs);
			up_usdt_arg_fetch(&pr->args[n - 1], fetch, sizeof(fetch));
			sb_put(b, fetch, strlen(fetch));
			/* standing alone, untyped: the operand's own type */
			alone = (k == s || k == eq + 1) && end == t + i;
			if (alone) {
				up_usdt_arg_type(&pr->args[n - 1], type, sizeof(type));
				sb_printf(b, ":%s", type);
			}
			k = (int)(end - t);
		}
	}
	if (!any && pr->nargs > 0) {
		for (int a = 0; a < pr->nargs; a++) {
			char fetch[64], type[8];

			up_usdt_arg_fetch(&pr->args[a], fetch, sizeof(fetch));
			up_usdt_arg_type(&pr->args[a], type, sizeof(type));
			sb_printf(b, " arg%d=%s:%s", a + 1, fetch, type);
		}
	}
	return 0;
}

static bool usdt_match(const struct up_usdt_probe *pr, const char *prov, const char *name)
{
	return (!prov[0] || !fnmatch(prov, pr->provider, 0)) && !fnmatch(name, pr->name, 0);
}

static bool usdt_matches(const struct up_usdt_file *f, const char *prov, const char *name)
{
	for (size_t i = 0; i < up_usdt_count(f); i++)
		if (usdt_match(up_usdt_probe(f, i), prov, name))
			return true;
	return false;
}

struct lib_find {
	const char *prov, *name;
	struct up_usdt_file *f; /* the first library with a match */
	char path[4096];
};

static int lib_has(void *ctx, const char *path)
{
	struct lib_find *lf = ctx;
	struct up_usdt_file *f;

	if (up_usdt_open(path, &f))
		return 0;
	if (!usdt_matches(f, lf->prov, lf->name)) {
		up_usdt_close(f);
		return 0;
	}
	lf->f = f;
	snprintf(lf->path, sizeof(lf->path), "%s", path);
	return 1;
}

static int expand_usdt(struct parts *pt, up_expand_fn fn, void *ctx, struct up_expand_stats *st,
		       struct up_spec_err *err)
{
	const char *t = pt->text;
	int ts = pt->target, te = pt->target + pt->target_len;
	const char *c1 = memchr(t + ts, ':', (size_t)(te - ts)), *c2;
	char path[4096], prov[128] = "", name[128], given[UP_SPEC_NAME_MAX + 1];
	struct up_usdt_file *f = NULL;
	struct names used = { 0 };
	bool has_event;
	int rc;

	rc = parse_head(pt, false, err);
	if (rc)
		return rc;
	has_event = event_given(pt, given);
	if (!pt->target_len)
		return up_spec_fail(err, ts, 1, "expected PATH:[PROVIDER:]NAME");
	if (!c1 || c1 == t + ts)
		return up_spec_fail(err, ts, pt->target_len, "expected PATH:[PROVIDER:]NAME");
	if ((size_t)(c1 - t - ts) >= sizeof(path))
		return up_spec_fail(err, ts, (int)(c1 - t) - ts, "path too long");
	memcpy(path, t + ts, (size_t)(c1 - t - ts));
	path[c1 - t - ts] = '\0';
	c2 = memchr(c1 + 1, ':', (size_t)(t + te - c1 - 1));
	if (c2) {
		if ((size_t)(c2 - c1 - 1) >= sizeof(prov) || c2 == c1 + 1)
			return up_spec_fail(err, (int)(c1 - t) + 1, 1, "bad provider name");
		memcpy(prov, c1 + 1, (size_t)(c2 - c1 - 1));
		prov[c2 - c1 - 1] = '\0';
	} else {
		c2 = c1;
	}
	if ((size_t)(t + te - c2 - 1) >= sizeof(name) || c2 + 1 == t + te)
		return up_spec_fail(err, (int)(c2 - t) + 1, 1, "expected the probe's NAME");
	memcpy(name, c2 + 1, (size_t)(t + te - c2 - 1));
	name[t + te - c2 - 1] = '\0';

	rc = up_usdt_open(path, &f);
	if (rc) {
		up_spec_fail(err, ts, (int)(c1 - t) - ts, "%s: %s", path,
			     rc == -ENOEXEC ? "not an ELF file" : up_file_strerror(rc));
		return rc == -EINVAL ? -EIO : rc;
	}
	if (!usdt_matches(f, prov, name)) {
		/* not the program's own: one of the libraries it needs (libpython, libjvm) */
		struct up_sym_elf *elf;
		struct lib_find lf = { .prov = prov, .name = name };

		if (!up_sym_elf_open(path, &elf)) {
			up_sym_elf_for_each_needed(elf, lib_has, &lf);
			up_sym_elf_close(elf);
		}
		if (lf.f) {
			up_usdt_close(f);
			f = lf.f;
			snprintf(path, sizeof(path), "%s", lf.path);
		}
	}
	for (size_t i = 0; !rc && i < up_usdt_count(f); i++) {
		const struct up_usdt_probe *pr = up_usdt_probe(f, i);
		char ev[UP_SPEC_NAME_MAX + 1];
		struct sbuf b = { 0 };

		if (!usdt_match(pr, prov, name))
			continue;
		rc = names_take(&used,
				has_event && !has_glob(name, strlen(name)) ? given : pr->name, ev);
		if (rc)
			break;
		sb_printf(&b, "p:%s/%s %s:0x%" PRIx64, pt->group, ev, path, pr->offset);
		if (pr->sema_offset)
			sb_printf(&b, "(0x%" PRIx64 ")", pr->sema_offset);
		rc = usdt_args(pt, pr, &b, err);
		if (!rc)
			rc = emit(&b, fn, ctx, st);
		free(b.s);
	}
	if (!rc && !st->specs) {
		up_spec_fail(err, (int)(c1 - t) + 1, te - (int)(c1 - t) - 1,
			     "%s (and the libraries it needs) has no USDT probe %s%s%s (try: "
			     "uprobe list --usdt %s)",
			     path, prov, prov[0] ? ":" : "", name, path);
		rc = -ENOENT;
	}
	free(used.v);
	up_usdt_close(f);
	return rc;
}

/* ---- wildcards ------------------------------------------------------------------------------ */

struct glob_walk {
	struct parts *pt;
	struct up_sym_elf *elf;
	const char *pattern;
	const char *path;
	uint64_t off;	    /* +OFF after the glob */
	const char *suffix; /* "%return" or "", as written */
	int suffix_len;
	bool is_return;
	uint64_t *ifuncs; /* addresses of IFUNC symbols, sorted: every name there is a
				resolver's (glibc's local strlen_ifunc is strlen's) */
	size_t nifuncs, capifuncs;
	/* the matching names of the address being walked: the best one is probed */
	char best[256];
	int best_score;
	uint64_t best_value;
	bool pending;
	struct names used;
	struct up_expand_stats *st;
	up_expand_fn fn;
	void *ctx;
};

static int ifunc_one(const struct up_sym *sym, void *arg)
{
	struct glob_walk *w = arg;

	if (!sym->ifunc || (w->nifuncs && w->ifuncs[w->nifuncs - 1] == sym->value))
		return 0;
	if (grow(&w->ifuncs, &w->capifuncs, w->nifuncs + 1, sizeof(*w->ifuncs)))
		return -ENOMEM;
	w->ifuncs[w->nifuncs++] = sym->value; /* the walk is by address: sorted */
	return 0;
}

static bool is_resolver(const struct glob_walk *w, uint64_t addr)
{
	size_t lo = 0, hi = w->nifuncs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (w->ifuncs[mid] == addr)
			return true;
		if (w->ifuncs[mid] < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Of several names of one address, the one people call it by: a global one, with
   the fewest leading underscores, the shortest ("malloc", not "__GI___libc_malloc"). */
static int name_score(const struct up_sym *sym)
{
	int u = 0;

	while (sym->name[u] == '_' && u < 3)
		u++;
	return (sym->global ? 0 : 4000) + u * 1000 + (int)strnlen(sym->name, 999);
}

static int glob_emit(struct glob_walk *w)
{
	const struct parts *pt = w->pt;
	char ev[UP_SPEC_NAME_MAX + 1];
	struct sbuf b = { 0 };
	uint64_t foff;
	int rc;

	w->pending = false;
	if (up_sym_elf_vaddr_to_offset(w->elf, w->best_value + w->off, &foff))
		return 0;
	rc = names_take(&w->used, w->best, ev);
	if (rc)
		return rc;
	sb_printf(&b, "%c:%s/%s %s:0x%" PRIx64, w->is_return ? 'r' : 'p', pt->group, ev, w->path,
		  foff);
	sb_put(&b, w->suffix, (size_t)w->suffix_len);
	sb_put(&b, pt->text + pt->rest, (size_t)(pt->rest_end - pt->rest));
	return emit(&b, w->fn, w->ctx, w->st);
}

static int glob_one(const struct up_sym *sym, void *arg)
{
	struct glob_walk *w = arg;
	int score, rc;

	if (fnmatch(w->pattern, sym->name, 0))
		return 0;
	w->st->matched++;
	if (sym->ifunc || is_resolver(w, sym->value)) {
		w->st->ifuncs++;
		return 0;
	}
	score = name_score(sym);
	if (w->pending && sym->value == w->best_value) {
		w->st->aliases++;
		if (score >= w->best_score)
			return 0;
	} else if (w->pending) {
		rc = glob_emit(w); /* the walk is by address: that one is complete */
		if (rc)
			return rc;
	}
	snprintf(w->best, sizeof(w->best), "%s", sym->name);
	w->best_score = score;
	w->best_value = sym->value;
	w->pending = true;
	return 0;
}

static int expand_glob(struct parts *pt, const char *colon, up_expand_fn fn, void *ctx,
		       struct up_expand_stats *st, struct up_spec_err *err)
{
	const char *t = pt->text, *te = t + pt->target + pt->target_len, *sym = colon + 1;
	const char *se = sym;
	char path[4096], pattern[512];
	struct glob_walk w = { .pt = pt, .st = st, .fn = fn, .ctx = ctx, .suffix = "" };
	int rc;

	rc = parse_head(pt, true, err);
	if (rc)
		return rc;
	if (pt->event_len)
		return up_spec_fail(err, pt->event_pos, pt->event_len,
				    "a wildcard makes one event per function, named after it: "
				    "give no event name, or %c:GRP/*",
				    t[pt->head]);
	w.is_return = t[pt->head] == 'r';
	while (se < te && *se != '+' && *se != '%')
		se++;
	if (se < te && *se == '+') {
		char *end;

		w.off = strtoull(se + 1, &end, 0);
		if (end == se + 1)
			return up_spec_fail(err, (int)(se - t), 1, "expected +OFFSET");
		w.suffix = end;
	} else {
		w.suffix = se;
	}
	w.suffix_len = (int)(te - w.suffix);
	if ((size_t)(colon - t - pt->target) >= sizeof(path) ||
	    (size_t)(se - sym) >= sizeof(pattern))
		return up_spec_fail(err, pt->target, pt->target_len, "too long");
	memcpy(path, t + pt->target, (size_t)(colon - t - pt->target));
	path[colon - t - pt->target] = '\0';
	memcpy(pattern, sym, (size_t)(se - sym));
	pattern[se - sym] = '\0';
	w.path = path;
	w.pattern = pattern;
	rc = up_sym_elf_open(path, &w.elf);
	if (rc) {
		up_spec_fail(err, pt->target, (int)(colon - t) - pt->target, "%s: %s", path,
			     rc == -ENOEXEC ? "not an x86 ELF file" : up_file_strerror(rc));
		return rc == -EINVAL ? -EIO : rc;
	}
	rc = up_sym_elf_for_each_func(w.elf, ifunc_one, &w);
	if (!rc)
		rc = up_sym_elf_for_each_func(w.elf, glob_one, &w);
	if (!rc && w.pending)
		rc = glob_emit(&w);
	if (!rc && !st->specs) {
		up_spec_fail(err, (int)(sym - t), (int)(se - sym),
			     "no function matches '%s' in %s%s (try: uprobe list %s '%s')", pattern,
			     path, st->ifuncs ? " but IFUNC resolvers" : "", path, pattern);
		rc = -ENOENT;
	}
	free(w.used.v);
	free(w.ifuncs);
	up_sym_elf_close(w.elf);
	return rc;
}

/* ---- DWARF -------------------------------------------------------------------------------- */

static bool ident_char(char ch, bool first)
{
	return isalpha((unsigned char)ch) || ch == '_' || (!first && isdigit((unsigned char)ch));
}

/* A fetch arg [s, e) naming a variable ("n", "req->name", "sz=req->size:u32"): the
   kernel's fetches start with one of % @ $ + - \ instead. */
static int var_start(const char *t, int s, int e)
{
	int v = s;

	while (v < e && ident_char(t[v], v == s))
		v++;
	if (v < e && t[v] == '=')
		s = v + 1;
	return s < e && ident_char(t[s], true) ? s : -1;
}

static bool wants_dwarf(const struct parts *pt, const char *colon)
{
	const char *t = pt->text, *te = t + pt->target + pt->target_len;
	const char *c2 = memchr(colon + 1, ':', (size_t)(te - colon - 1));
	int i = pt->rest;

	if (c2) { /* PATH:FILE:LINE, PATH:FUNC:LINE -- unless all but the last ":N" is a
		     file: the kernel splits PATH:OFFSET at the last colon */
		const char *last = c2;
		char path[4096];
		struct stat sb;

		while ((c2 = memchr(last + 1, ':', (size_t)(te - last - 1))))
			last = c2;
		if ((size_t)(last - t - pt->target) < sizeof(path)) {
			memcpy(path, t + pt->target, (size_t)(last - t - pt->target));
			path[last - t - pt->target] = '\0';
			if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
				return false;
		}
		return last + 1 < te && isdigit((unsigned char)last[1]);
	}
	if (isdigit((unsigned char)colon[1]) || memchr(colon, '+', (size_t)(te - colon)))
		return false;
	while (i < pt->rest_end) {
		int s, e;

		while (i < pt->rest_end && up_spec_is_blank(t[i]))
			i++;
		for (s = i; i < pt->rest_end && !up_spec_is_blank(t[i]); i++)
			;
		e = i;
		if (e > s && var_start(t, s, e) >= 0)
			return true;
	}
	return false;
}

struct dsites {
	struct up_dwarf_site v[64];
	int n;
};

static int keep_site(void *ctx, const struct up_dwarf_site *s)
{
	struct dsites *ds = ctx;

	if (ds->n < (int)(sizeof(ds->v) / sizeof(ds->v[0])))
		ds->v[ds->n++] = *s;
	return 0;
}

/* One fetch arg [s, e) at site: a variable compiled, anything else as written. */
static int dwarf_arg(const struct parts *pt, int s, int e, struct up_dwarf *d,
		     const struct up_dwarf_site *site, struct sbuf *b, struct up_spec_err *err)
{
	const char *t = pt->text;
	int v = var_start(t, s, e), x, te;
	char expr[256], fetch[320], why[200], name[UP_SPEC_ARG_NAME_MAX + 1];
	const char *type = NULL;
	int rc, errpos, nl = 0;

	sb_put(b, " ", 1);
	if (v < 0) {
		sb_put(b, t + s, (size_t)(e - s));
		return 0;
	}
	for (te = v; te < e && t[te] != ':'; te++)
		;
	if (te < e)
		type = t + te + 1; /* the user's :TYPE wins */
	if (te - v >= (int)sizeof(expr))
		return up_spec_fail(err, v, te - v, "too long");
	memcpy(expr, t + v, (size_t)(te - v));
	expr[te - v] = '\0';
	rc = up_dwarf_fetch(d, site->vaddr, expr, fetch, sizeof(fetch), why, sizeof(why), &errpos);
	if (rc) {
		up_spec_fail(err, v + errpos, te - v - errpos,
			     "'%s' at %s (%s:%d, 0x%" PRIx64 "): %s", expr, site->func, site->file,
			     site->line, site->vaddr, why);
		return rc == -ENOMEM ? rc : -EINVAL;
	}
	if (v > s) { /* NAME= given */
		sb_put(b, t + s, (size_t)(v - s));
	} else { /* named after the expression: req->name is req_name */
		for (x = 0; expr[x] && nl < UP_SPEC_ARG_NAME_MAX; x++) {
			if (ident_char(expr[x], false))
				name[nl++] = expr[x];
			else if (nl && name[nl - 1] != '_')
				name[nl++] = '_';
		}
		name[nl] = '\0';
		sb_printf(b, "%s=", name);
	}
	if (type) {
		char *colon = strrchr(fetch, ':');

		if (colon)
			*colon = '\0';
		sb_printf(b, "%s:%.*s", fetch, (int)(t + e - type), type);
	} else {
		sb_put(b, fetch, strlen(fetch));
	}
	return 0;
}

static int expand_dwarf(struct parts *pt, const char *colon, up_expand_fn fn, void *ctx,
			struct up_expand_stats *st, struct up_spec_err *err)
{
	const char *t = pt->text, *te = t + pt->target + pt->target_len;
	const char *c2 = memchr(colon + 1, ':', (size_t)(te - colon - 1));
	const char *ae = c2 ? c2 : te;
	char path[4096], what[256], given[UP_SPEC_NAME_MAX + 1];
	struct dsites *ds = calloc(1, sizeof(*ds));
	struct names used = { 0 };
	struct up_dwarf *d = NULL;
	bool has_event;
	int rc, line = 0;

	if (!ds)
		return -ENOMEM;
	rc = parse_head(pt, false, err);
	if (rc)
		goto out;
	has_event = event_given(pt, given);
	if (t[pt->head] == 'r' || memmem(t + pt->target, (size_t)pt->target_len, "%return", 7)) {
		rc = up_spec_fail(err, pt->head, 1,
				  "variables are fetched where a probe is placed: "
				  "not in a return probe (r:), which fetches $retval");
		goto out;
	}
	if ((size_t)(colon - t - pt->target) >= sizeof(path) ||
	    (size_t)(ae - colon - 1) >= sizeof(what)) {
		rc = up_spec_fail(err, pt->target, pt->target_len, "too long");
		goto out;
	}
	memcpy(path, t + pt->target, (size_t)(colon - t - pt->target));
	path[colon - t - pt->target] = '\0';
	memcpy(what, colon + 1, (size_t)(ae - colon - 1));
	what[ae - colon - 1] = '\0';
	rc = up_dwarf_open(path, &d);
	if (rc) {
		up_spec_fail(err, pt->target, (int)(colon - t) - pt->target, "%s: %s", path,
			     rc == -ENODATA ? "no debug information (DWARF) in it or in a debug "
					      "file (build-id, .gnu_debuglink)" :
			     rc == -ENOEXEC ? "not an x86 ELF file" :
					      up_file_strerror(rc));
		rc = rc == -ENODATA ? -EINVAL : rc == -EINVAL ? -EIO : rc;
		goto out;
	}
	if (c2) {
		char *end;
		bool is_file = strchr(what, '.') || strchr(what, '/');

		line = (int)strtol(c2 + 1, &end, 10);
		if (end != te || line <= 0) {
			rc = up_spec_fail(err, (int)(c2 - t) + 1, (int)(te - c2) - 1,
					  "expected a line number");
			goto out;
		}
		rc = up_dwarf_line_sites(d, is_file ? what : NULL, is_file ? NULL : what, line,
					 keep_site, ds);
		if (rc == -ENOENT)
			up_spec_fail(err, (int)(colon - t) + 1, (int)(te - colon) - 1,
				     is_file ? "no code for line %d of %s" :
					       "no code %d lines into function %s",
				     line, what);
	} else {
		rc = up_dwarf_func_site(d, what, &ds->v[0]);
		ds->n = rc ? 0 : 1;
		if (rc == -ENOENT)
			up_spec_fail(err, (int)(colon - t) + 1, (int)(ae - colon) - 1,
				     "no function '%s' in the debug information of %s", what, path);
	}
	if (rc)
		goto out;
	for (int k = 0; k < ds->n && !rc; k++) {
		const struct up_dwarf_site *site = &ds->v[k];
		char ev[UP_SPEC_NAME_MAX + 1], base[UP_SPEC_NAME_MAX + 1];
		struct sbuf b = { 0 };
		int i = pt->rest;

		if (has_event)
			snprintf(base, sizeof(base), "%s", given);
		else if (c2)
			snprintf(base, sizeof(base), "%.48s_L%d", site->func, site->line);
		else
			snprintf(base, sizeof(base), "%s", site->func);
		rc = names_take(&used, base, ev);
		if (rc)
			break;
		sb_printf(&b, "p:%s/%s %s:0x%" PRIx64, pt->group, ev, path, site->offset);
		while (!rc && i < pt->rest_end) {
			int s;

			while (i < pt->rest_end && up_spec_is_blank(t[i]))
				i++;
			for (s = i; i < pt->rest_end && !up_spec_is_blank(t[i]); i++)
				;
			if (i > s)
				rc = dwarf_arg(pt, s, i, d, site, &b, err);
		}
		if (!rc)
			rc = emit(&b, fn, ctx, st);
		free(b.s);
	}
out:
	free(used.v);
	free(ds);
	up_dwarf_close(d);
	return rc;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

int up_expand(const char *text, up_expand_fn fn, void *ctx, struct up_expand_stats *stats,
	      struct up_spec_err *err)
{
	struct up_expand_stats st = { 0 };
	struct parts pt;
	const char *t = text, *colon;
	char h;
	int rc;

	if (err) {
		err->pos = -1;
		err->len = 1;
		err->msg[0] = '\0';
	}
	split(text, &pt);
	h = pt.head_len ? t[pt.head] : 0;
	if ((h == 'p' || h == 'r' || h == 'u') && pt.head_len > 2 && t[pt.head + 1] == ':' &&
	    t[pt.head + 2] == '/' && memchr(t + pt.head + 2, ':', (size_t)pt.head_len - 2)) {
		/* bpftrace's way, "p:/PATH:FUNC": a path is no event name; the same as
		   "p /PATH:FUNC" */
		size_t n = strlen(text);
		char *copy = malloc(n + 1);

		if (!copy)
			return -ENOMEM;
		memcpy(copy, text, n + 1);
		copy[pt.head + 1] = ' ';
		rc = up_expand(copy, fn, ctx, stats, err);
		free(copy);
		return rc;
	}
	colon = pt.target_len ? memchr(t + pt.target, ':', (size_t)pt.target_len) : NULL;
	if (h == 'u' && (pt.head_len == 1 || t[pt.head + 1] == ':')) {
		rc = expand_usdt(&pt, fn, ctx, &st, err);
	} else if ((h == 'p' || h == 'r') && (pt.head_len == 1 || t[pt.head + 1] == ':') && colon) {
		const char *se = colon + 1, *te = t + pt.target + pt.target_len;

		while (se < te && *se != '+' && *se != '%' && *se != '(' && *se != ':')
			se++;
		if (has_glob(colon + 1, (size_t)(se - colon - 1)))
			rc = expand_glob(&pt, colon, fn, ctx, &st, err);
		else if (wants_dwarf(&pt, colon))
			rc = expand_dwarf(&pt, colon, fn, ctx, &st, err);
		else {
			st.specs = 1;
			rc = fn(ctx, text);
		}
	} else {
		st.specs = 1;
		rc = fn(ctx, text);
	}
	if (stats)
		*stats = st;
	return rc;
}
