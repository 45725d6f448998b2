// SPDX-License-Identifier: MIT
/*
 * Histogram triggers (trace/hist.h): the parser of "[GRP/]EVENT:hist:keys=...", the
 * binding of its fields to an event's fetch arguments, the tracer's table of merged
 * entries, and the three ways of printing that table.
 *
 * The text form is the kernel's hist file byte for byte (kernel/trace/trace_events_hist.c:
 * hist_trigger_show, hist_trigger_print_key, hist_trigger_entry_print,
 * event_hist_trigger_print; tracing_map.c for what Hits and Dropped count), so that a
 * histogram taken here can be diffed against one the kernel takes of the same uprobe
 * event.  Two choices follow the kernel of today rather than older ones: a stack key is
 * called "common_stacktrace" (the rename of 6.5; "stacktrace" is still accepted), and
 * Totals' Hits counts only the hits that found an entry (tracing_map_insert increments
 * hits only then; a hit that found no room counts in Dropped alone).
 *
 * Extensions over the kernel, marked where they are made: .min/.max/.avg vals, sizes
 * below 128 entries (useful for small tables; the kernel's minimum is 2^7), and
 * min/max/avg of signed arguments printed signed.
 *
 * Never reads a process, never prints but to the FILE it is given, never exits.
 */
#include "trace/hist.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agg.h"
#include "trace/format.h"
#include "trace/prom.h"

/* What the kernel calls a stack key since 6.5, whichever way it was written. */
#define HIST_STACK_NAME "common_stacktrace"
#define HIST_BAR_WIDTH 52	/* bpftrace's max_width */
#define HIST_BAR_GAP_ROWS 1024	/* most zero rows drawn between two .buckets keys */

/* ---- parser ------------------------------------------------------------------------- */

struct hparser {
	const char *text;
	struct up_spec_err *err;
	struct up_hist *h;
};

#define fail(p, pos, len, ...) up_spec_fail((p)->err, pos, len, __VA_ARGS__)
#define is_blank up_spec_is_blank

/* Is text[s..e) exactly lit? */
static bool span_is(const char *text, int s, int e, const char *lit)
{
	size_t n = strlen(lit);

	return (size_t)(e - s) == n && !memcmp(text + s, lit, n);
}

static int span_find(const char *text, int s, int e, char c)
{
	for (int i = s; i < e; i++)
		if (text[i] == c)
			return i;
	return -1;
}

static bool is_ident(const char *s, int n)
{
	if (n <= 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (int i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return false;
	return true;
}

/* kstrtoul(base 0) over s[0..n): 0x hex, 0 octal, else decimal; nothing else. */
static bool parse_ulong(const char *s, int n, uint64_t *out)
{
	char buf[32], *end;
	unsigned long long v;

	if (n <= 0 || n >= (int)sizeof(buf) || !isdigit((unsigned char)s[0]))
		return false;
	memcpy(buf, s, (size_t)n);
	buf[n] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 0);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

static const char *key_mod_name(enum up_hist_mod mod)
{
	switch (mod) {
	case UP_HIST_MOD_HEX:
		return "hex";
	case UP_HIST_MOD_SYM:
		return "sym";
	case UP_HIST_MOD_SYM_OFFSET:
		return "sym-offset";
	case UP_HIST_MOD_LOG2:
		return "log2";
	case UP_HIST_MOD_BUCKETS:
		return "buckets";
	case UP_HIST_MOD_LOG2FLOOR:
		return "log2floor";
	case UP_HIST_MOD_NONE:
		break;
	}
	return NULL;
}

static const char *val_op_name(enum up_hist_op op)
{
	switch (op) {
	case UP_HIST_OP_MIN:
		return "min";
	case UP_HIST_OP_MAX:
		return "max";
	case UP_HIST_OP_AVG:
		return "avg";
	case UP_HIST_OP_SUM:
		break;
	}
	return NULL;
}

/* The modifier as the kernel lists it ("log2", "buckets=10", "hex"; ours "max"), "" none. */
static void field_mod_text(const struct up_hist_field *f, bool is_key, struct up_spec_buf *b)
{
	const char *m = is_key ? key_mod_name(f->mod) : val_op_name(f->op);

	if (!is_key && !m && f->mod == UP_HIST_MOD_HEX)
		m = "hex";
	if (!m)
		return;
	up_spec_buf_printf(b, "%s", m);
	if (is_key && f->mod == UP_HIST_MOD_BUCKETS)
		up_spec_buf_printf(b, "=%" PRIu64, f->buckets);
}

/* A field as event_hist_trigger_print writes it: "size.log2", "common_stacktrace". */
static void field_text(const struct up_hist_field *f, bool is_key, struct up_spec_buf *b)
{
	size_t len;

	if (f->src == UP_HIST_SRC_STACK) {
		up_spec_buf_printf(b, "%s", HIST_STACK_NAME);
		return;
	}
	up_spec_buf_printf(b, "%s", f->name);
	len = b->len;
	up_spec_buf_putc(b, '.');
	field_mod_text(f, is_key, b);
	if (b->len == len + 1) { /* no modifier: take the '.' back */
		b->len = len;
		if (len < b->size)
			b->buf[len] = '\0';
	}
}

static int field_text_buf(const struct up_hist_field *f, bool is_key, char *buf, size_t size)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	field_text(f, is_key, &b);
	return up_spec_buf_result(&b);
}

static int parse_key_mod(const char *t, int s, int e, struct up_hist_field *f)
{
	static const struct {
		const char *name;
		enum up_hist_mod mod;
	} mods[] = {
		{ "hex", UP_HIST_MOD_HEX },
		{ "sym", UP_HIST_MOD_SYM },
		{ "sym-offset", UP_HIST_MOD_SYM_OFFSET },
		{ "log2", UP_HIST_MOD_LOG2 },
		{ "log2floor", UP_HIST_MOD_LOG2FLOOR },
	};
	int i;

	for (size_t m = 0; m < sizeof(mods) / sizeof(mods[0]); m++) {
		if (span_is(t, s, e, mods[m].name)) {
			f->mod = mods[m].mod;
			return 0;
		}
	}
	/* parse_field: "bucket" or "buckets", then "=N" with N > 0 */
	if (e - s < 7 || memcmp(t + s, "bucket", 6))
		return -EINVAL;
	i = s + 6;
	if (t[i] == 's')
		i++;
	if (i >= e || t[i] != '=')
		return -EINVAL;
	i++;
	if (!parse_ulong(t + i, e - i, &f->buckets) || !f->buckets)
		return -EINVAL;
	f->mod = UP_HIST_MOD_BUCKETS;
	return 0;
}

/*
 * One key or val field, text[s..e).  Errors point where the kernel's do: an unknown
 * field at its name, an unknown modifier at the modifier, a key-only modifier on a val
 * at the whole val (__create_val_field).
 */
static int parse_field(struct hparser *p, int s, int e, bool is_key, struct up_hist_field *f)
{
	const char *t = p->text;
	int dot, ne, nl, ms;

	memset(f, 0, sizeof(*f));
	f->pos = s;
	f->len = e - s;
	f->arg = -1;
	if (s == e)
		return fail(p, s, 1, "Couldn't find field");
	dot = span_find(t, s, e, '.');
	ne = dot < 0 ? e : dot;
	nl = ne - s;
	if (!nl || nl >= (int)sizeof(f->name))
		return fail(p, s, nl ? nl : 1, "Couldn't find field");
	memcpy(f->name, t + s, (size_t)nl);
	f->name[nl] = '\0';

	if (!strcmp(f->name, "common_pid")) {
		f->src = UP_HIST_SRC_PID;
	} else if (!strcmp(f->name, "stacktrace") || !strcmp(f->name, HIST_STACK_NAME)) {
		f->src = UP_HIST_SRC_STACK;
	} else if (f->name[0] == '$') {
		if (strcmp(f->name, "$duration"))
			return fail(p, s, nl, "Couldn't find variable");
		f->src = UP_HIST_SRC_DURATION;
	} else {
		f->src = UP_HIST_SRC_ARG;
	}
	if (!is_key && f->src == UP_HIST_SRC_STACK)
		return fail(p, s, e - s, "A stack trace can only be a key");
	if (dot < 0)
		return 0;

	ms = dot + 1;
	if (ms == e)
		return fail(p, dot, 1, "Invalid field modifier");
	if (is_key) {
		if (f->src == UP_HIST_SRC_STACK || parse_key_mod(t, ms, e, f))
			return fail(p, ms, e - ms, "Invalid field modifier");
		return 0;
	}
	if (span_is(t, ms, e, "hex")) {
		f->mod = UP_HIST_MOD_HEX;
	} else if (span_is(t, ms, e, "min")) {
		f->op = UP_HIST_OP_MIN;
	} else if (span_is(t, ms, e, "max")) {
		f->op = UP_HIST_OP_MAX;
	} else if (span_is(t, ms, e, "avg")) {
		f->op = UP_HIST_OP_AVG;
	} else {
		struct up_hist_field k = *f;

		if (!parse_key_mod(t, ms, e, &k))
			return fail(p, s, e - s, "Invalid field modifier");
		return fail(p, ms, e - ms, "Invalid field modifier");
	}
	return 0;
}

static bool field_same(const struct up_hist_field *a, const struct up_hist_field *b)
{
	return !strcmp(a->name, b->name) && a->src == b->src && a->mod == b->mod &&
	       a->buckets == b->buckets && a->op == b->op;
}

/* keys= or vals=, text[s..e): fields split at ','. */
static int parse_fields(struct hparser *p, int s, int e, bool is_key)
{
	struct up_hist *h = p->h;
	unsigned max = is_key ? UP_HIST_KEYS_MAX : UP_HIST_VALS_MAX;
	unsigned *n = is_key ? &h->nkeys : &h->nvals;
	struct up_hist_field *fields = is_key ? h->key : h->val;
	int fs = s;

	*n = 0;
	for (;;) {
		int fe = span_find(p->text, fs, e, ',');
		int ret;

		if (fe < 0)
			fe = e;
		/* the kernel's create_val_fields: hitcount is always there, first */
		if (!is_key && span_is(p->text, fs, fe, "hitcount"))
			goto next;
		if (*n == max)
			return fail(p, fs, fe - fs, "Too many %s (Max = %u)", is_key ? "keys" : "vals",
				    max);
		ret = parse_field(p, fs, fe, is_key, &fields[*n]);
		if (ret)
			return ret;
		for (unsigned i = 0; i < *n; i++)
			if (field_same(&fields[i], &fields[*n]))
				return fail(p, fs, fe - fs, "Duplicate field");
		(*n)++;
next:
		if (fe == e)
			return 0;
		fs = fe + 1;
	}
}

static bool sort_name_matches(const struct up_hist_field *f, const char *t, int s, int e)
{
	if (f->src == UP_HIST_SRC_STACK)
		return span_is(t, s, e, "stacktrace") || span_is(t, s, e, HIST_STACK_NAME);
	return span_is(t, s, e, f->name);
}

/*
 * One sort field, text[s..e): hitcount or a key or val by name; then, ours, the
 * field's modifier as listed (to tell lat.min from lat.max); then the kernel's
 * .ascending or .descending.
 */
static int parse_sort_field(struct hparser *p, int s, int e, struct up_hist_sort *out)
{
	const char *t = p->text;
	const struct up_hist *h = p->h;
	int dot = span_find(t, s, e, '.');
	int ne = dot < 0 ? e : dot, rs = dot < 0 ? e : dot + 1;
	bool found = false;

	memset(out, 0, sizeof(*out));
	if (ne == s)
		return fail(p, s, 1, "Empty sort field");
	if (span_is(t, s, ne, "hitcount")) {
		out->src = UP_HIST_SRC_HITCOUNT;
		goto dir;
	}
	/* vals before keys: the kernel looks through fields[] in that order */
	for (unsigned pass = 0; pass < 2; pass++) {
		bool is_val = pass == 0;
		unsigned n = is_val ? h->nvals : h->nkeys;
		const struct up_hist_field *fs = is_val ? h->val : h->key;

		for (unsigned i = 0; i < n; i++) {
			char mod[48];
			struct up_spec_buf b = { mod, sizeof(mod), 0 };
			int ml;

			if (!sort_name_matches(&fs[i], t, s, ne))
				continue;
			mod[0] = '\0';
			field_mod_text(&fs[i], !is_val, &b);
			ml = (int)strlen(mod);
			if (ml && e - rs >= ml && !memcmp(t + rs, mod, (size_t)ml) &&
			    (rs + ml == e || t[rs + ml] == '.')) {
				/* the modifier as listed picks this field among its namesakes */
				out->src = fs[i].src;
				out->is_val = is_val;
				out->field = i;
				rs += ml + (rs + ml < e);
				goto dir;
			}
			if (!found) {
				out->src = fs[i].src;
				out->is_val = is_val;
				out->field = i;
				found = true;
			}
		}
	}
	if (!found)
		return fail(p, s, ne - s, "Sort field must be a key or a val");
dir:
	if (rs >= e || span_is(t, rs, e, "ascending"))
		return 0;
	if (span_is(t, rs, e, "descending")) {
		out->descending = true;
		return 0;
	}
	return fail(p, rs, e - rs, "Invalid sort modifier");
}

static int parse_sort(struct hparser *p, int s, int e)
{
	struct up_hist *h = p->h;
	int fs = s;

	h->nsort = 0;
	for (;;) {
		int fe = span_find(p->text, fs, e, ',');
		int ret;

		if (fe < 0)
			fe = e;
		if (fe == fs)
			return fail(p, fs, 1, "Empty sort field");
		if (h->nsort == 2)
			return fail(p, fs, fe - fs, "Too many sort fields (Max = 2)");
		ret = parse_sort_field(p, fs, fe, &h->sort[h->nsort]);
		if (ret)
			return ret;
		h->nsort++;
		if (fe == e)
			return 0;
		fs = fe + 1;
	}
}

static int parse_size(struct hparser *p, int s, int e)
{
	uint64_t n;
	unsigned size = 1;

	if (!parse_ulong(p->text + s, e - s, &n) || !n || n > UP_HIST_SIZE_MAX)
		return fail(p, s, e - s, "Invalid size: expected 1 to %u entries", UP_HIST_SIZE_MAX);
	while (size < n)
		size <<= 1;
	p->h->size = size;
	return 0;
}

static int parse_names(struct hparser *p, int s, int e, char *out, const char *what)
{
	if (e - s > UP_SPEC_NAME_MAX)
		return fail(p, s, e - s, "%s name is too long (at most %d characters)", what,
			    UP_SPEC_NAME_MAX);
	if (!is_ident(p->text + s, e - s))
		return fail(p, s, e - s, "%s name must follow the same rules as C identifiers",
			    what);
	memcpy(out, p->text + s, (size_t)(e - s));
	out[e - s] = '\0';
	return 0;
}

/* [GRP/]EVENT: at text[*i..end). */
static int parse_event_prefix(struct hparser *p, int *i, int end)
{
	const char *t = p->text;
	int colon = span_find(t, *i, end, ':');
	int slash, es, ret;

	if (colon < 0)
		return fail(p, *i, end - *i, "Expected [GRP/]EVENT:hist:keys=...");
	slash = span_find(t, *i, colon, '/');
	es = *i;
	if (slash >= 0) {
		if (slash == *i)
			return fail(p, *i, 1, "Group name is not specified: expected GRP/EVENT:hist");
		ret = parse_names(p, *i, slash, p->h->group, "Group");
		if (ret)
			return ret;
		es = slash + 1;
	}
	if (es == colon)
		return fail(p, es, 1, "Event name is not specified: expected [GRP/]EVENT:hist");
	ret = parse_names(p, es, colon, p->h->event, "Event");
	if (ret)
		return ret;
	*i = colon + 1;
	return 0;
}

/*
 * Where the filter starts: the first "if" with a blank before and after it, as
 * event_hist_trigger_parse separates "k:v [if filter]".  -1 when there is none.
 */
static int find_filter(const char *t, int s, int e)
{
	for (int q = s + 1; q + 1 < e; q++) {
		if (t[q] != 'i' || t[q + 1] != 'f' || !is_blank(t[q - 1]))
			continue;
		if (q + 2 == e || is_blank(t[q + 2]))
			return q;
	}
	return -1;
}

static int parse_trigger(struct hparser *p, bool with_event)
{
	const char *t = p->text;
	struct up_hist *h = p->h;
	int i = 0, end = (int)strlen(t), cmd, pe, q;
	int keys_s = -1, keys_e = -1, vals_s = -1, vals_e = -1, sort_s = -1, sort_e = -1;
	int ret;

	while (i < end && is_blank(t[i]))
		i++;
	while (end > i && is_blank(t[end - 1]))
		end--;
	if (with_event) {
		ret = parse_event_prefix(p, &i, end);
		if (ret)
			return ret;
	}
	cmd = i;
	q = span_find(t, i, end, ':');
	if (q < 0)
		q = end;
	if (!span_is(t, cmd, q, "hist"))
		return fail(p, cmd, q - cmd, "Unknown trigger command: expected 'hist:keys=...'");
	i = q < end ? q + 1 : q;

	pe = end;
	q = find_filter(t, i, end);
	if (q >= 0) {
		int fs = q + 2;

		while (fs < end && is_blank(t[fs]))
			fs++;
		if (fs == end)
			return fail(p, q, 2, "The filter is missing after 'if'");
		h->filter = strndup(t + fs, (size_t)(end - fs));
		if (!h->filter)
			return -ENOMEM;
		pe = q;
		while (pe > i && is_blank(t[pe - 1]))
			pe--;
	}

	h->size = UP_HIST_SIZE_DEFAULT;
	for (int a = i; a < pe;) {
		int ae = span_find(t, a, pe, ':'), eq;

		if (ae < 0)
			ae = pe;
		if (ae == a)
			return fail(p, a, 1, "Empty hist attribute");
		eq = span_find(t, a, ae, '=');
		if (eq < 0) {
			return fail(p, a, ae - a, "Unknown or unsupported hist attribute "
						  "(expected keys=, vals=, sort=, size=, name=)");
		} else if (eq + 1 == ae) {
			return fail(p, a, ae - a, "Empty assignment");
		} else if (span_is(t, a, eq, "keys") || span_is(t, a, eq, "key")) {
			keys_s = eq + 1;
			keys_e = ae;
		} else if (span_is(t, a, eq, "vals") || span_is(t, a, eq, "values") ||
			   span_is(t, a, eq, "val")) {
			vals_s = eq + 1;
			vals_e = ae;
		} else if (span_is(t, a, eq, "sort")) {
			sort_s = eq + 1;
			sort_e = ae;
		} else if (span_is(t, a, eq, "size")) {
			ret = parse_size(p, eq + 1, ae);
			if (ret)
				return ret;
		} else if (span_is(t, a, eq, "name")) {
			ret = parse_names(p, eq + 1, ae, h->name, "Histogram");
			if (ret)
				return ret;
		} else {
			/* the kernel's variables (x=expr), clock= and actions are not here */
			return fail(p, a, eq - a, "Unknown or unsupported hist attribute "
						  "(expected keys=, vals=, sort=, size=, name=)");
		}
		a = ae + 1;
	}
	if (keys_s < 0)
		return fail(p, cmd, 4, "A hist trigger needs keys=");
	ret = parse_fields(p, keys_s, keys_e, true);
	if (!ret && vals_s >= 0)
		ret = parse_fields(p, vals_s, vals_e, false);
	if (ret)
		return ret;
	if (sort_s >= 0)
		return parse_sort(p, sort_s, sort_e);
	/* create_sort_keys: "we always have at least one, hitcount" */
	h->nsort = 1;
	h->sort[0].src = UP_HIST_SRC_HITCOUNT;
	return 0;
}

int up_hist_parse(const char *text, bool with_event, struct up_hist *h,
		  struct up_spec_err *err)
{
	struct hparser p = { text, err, h };
	int ret;

	if (!text || !h)
		return -EINVAL;
	memset(h, 0, sizeof(*h));
	ret = parse_trigger(&p, with_event);
	if (ret) {
		if (ret == -ENOMEM)
			fail(&p, -1, 1, "Out of memory");
		up_hist_free(h);
		memset(h, 0, sizeof(*h));
	}
	return ret;
}

/* ---- resolve ------------------------------------------------------------------------ */

static int resolve_field(struct hparser *p, struct up_hist_field *f, const struct up_spec *spec,
			 bool is_key)
{
	int nl = (int)strlen(f->name);

	f->is_string = false;
	f->is_signed = false;
	f->arg = -1;
	switch (f->src) {
	case UP_HIST_SRC_ARG:
		for (int i = 0; i < spec->nargs; i++) {
			if (!strcmp(spec->args[i].name, f->name)) {
				f->arg = i;
				break;
			}
		}
		if (f->arg < 0)
			return fail(p, f->pos, nl, "Couldn't find field");
		if (spec->args[f->arg].type.kind == UP_TYPE_STACK)
			return fail(p, f->pos, f->len, "A $ustack argument is not a field: the "
						       "stack key is 'stacktrace'");
		f->is_string = spec->args[f->arg].type.kind == UP_TYPE_STRING;
		f->is_signed = spec->args[f->arg].type.kind == UP_TYPE_S;
		if (f->is_string && !is_key)
			return fail(p, f->pos, f->len, "String type can not be a val");
		if (f->is_string && f->mod != UP_HIST_MOD_NONE)
			return fail(p, f->pos + nl + 1, f->len - nl - 1,
				    "Invalid field modifier: '%s' is a string", f->name);
		return 0;
	case UP_HIST_SRC_DURATION:
		if (spec->kind != UP_SPEC_EVENT || !spec->is_return)
			return fail(p, f->pos, nl, "$duration needs a return probe (r:)");
		return 0;
	case UP_HIST_SRC_STACK:
		if (!is_key)
			return fail(p, f->pos, f->len, "A stack trace can only be a key");
		return 0;
	case UP_HIST_SRC_PID:
	case UP_HIST_SRC_HITCOUNT:
		return 0;
	}
	return 0;
}

int up_hist_resolve(struct up_hist *h, const struct up_spec *spec, struct up_spec_err *err)
{
	struct hparser p = { NULL, err, h };
	int ret;

	if (!h || !spec)
		return -EINVAL;
	for (unsigned i = 0; i < h->nkeys; i++) {
		ret = resolve_field(&p, &h->key[i], spec, true);
		if (ret)
			return ret;
	}
	for (unsigned i = 0; i < h->nvals; i++) {
		ret = resolve_field(&p, &h->val[i], spec, false);
		if (ret)
			return ret;
	}
	up_hist_table_free(h->base);
	h->base = up_hist_table_new(h);
	if (!h->base) {
		fail(&p, -1, 1, "Out of memory");
		return -ENOMEM;
	}
	return 0;
}

void up_hist_free(struct up_hist *h)
{
	if (!h)
		return;
	free(h->filter);
	h->filter = NULL;
	up_hist_table_free(h->base);
	h->base = NULL;
}

uint64_t up_hist_key_value(const struct up_hist_field *f, uint64_t v)
{
	if (f->mod == UP_HIST_MOD_LOG2)
		return upa_agg_log2(v);
	if (f->mod == UP_HIST_MOD_LOG2FLOOR)
		return upa_agg_log2_floor(v);
	if (f->mod == UP_HIST_MOD_BUCKETS)
		return upa_agg_bucket(v, f->buckets);
	return v;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_s64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

/* ---- tables ------------------------------------------------------------------------- */

enum key_kind {
	KEY_NUM,    /* compared by number */
	KEY_SYM,    /* compared by number; str is the symbol of the first add, for printing */
	KEY_STRING, /* a string argument: compared by content, cut at UP_HIST_STRING_KEY */
	KEY_STACK,  /* symbolized frames: compared by content, whole */
};

struct hist_entry {
	uint64_t num[UP_HIST_KEYS_MAX];
	char *str[UP_HIST_KEYS_MAX];
	uint64_t hits;
	uint64_t val[UP_HIST_VALS_MAX];
	uint64_t hash;
};

/*
 * Entries live in an array in the order they came; an open-addressed index of
 * positions (0 free, else position + 1) finds them, kept at most half full.
 */
struct up_hist_table {
	unsigned nkeys, nvals, size;
	enum key_kind kind[UP_HIST_KEYS_MAX];
	enum up_hist_op op[UP_HIST_VALS_MAX];
	bool is_signed[UP_HIST_VALS_MAX];
	struct hist_entry *ents;
	unsigned nents, cap_ents;
	uint32_t *index;
	unsigned cap_index; /* a power of two */
	uint64_t hits, dropped;
};

static size_t key_str_len(enum key_kind kind, const char *s)
{
	if (!s)
		return 0;
	return kind == KEY_STRING ? strnlen(s, UP_HIST_STRING_KEY - 1) : strlen(s);
}

static bool kind_is_str(enum key_kind kind)
{
	return kind == KEY_STRING || kind == KEY_STACK;
}

static uint64_t key_hash(const struct up_hist_table *t, const struct up_hist_key *k)
{
	uint64_t w[UP_HIST_KEYS_MAX];

	for (unsigned i = 0; i < t->nkeys; i++) {
		if (kind_is_str(t->kind[i])) {
			const char *s = k->str[i];
			size_t n = key_str_len(t->kind[i], s);
			uint64_t x = 0xcbf29ce484222325ull;

			for (size_t j = 0; j < n; j++) {
				x ^= (unsigned char)s[j];
				x *= 0x100000001b3ull;
			}
			w[i] = x;
		} else {
			w[i] = k->num[i];
		}
	}
	return upa_agg_hash(w, t->nkeys);
}

static bool key_match(const struct up_hist_table *t, const struct hist_entry *e,
		      const struct up_hist_key *k)
{
	for (unsigned i = 0; i < t->nkeys; i++) {
		if (kind_is_str(t->kind[i])) {
			size_t n = key_str_len(t->kind[i], k->str[i]);

			if (strlen(e->str[i]) != n || memcmp(e->str[i], k->str[i] ? k->str[i] : "", n))
				return false;
		} else if (e->num[i] != k->num[i]) {
			return false;
		}
	}
	return true;
}

static int index_grow(struct up_hist_table *t)
{
	unsigned cap = t->cap_index ? t->cap_index * 2 : 16;
	uint32_t *index = calloc(cap, sizeof(*index));

	if (!index)
		return -ENOMEM;
	for (unsigned i = 0; i < t->nents; i++) {
		unsigned slot = (unsigned)t->ents[i].hash & (cap - 1);

		while (index[slot])
			slot = (slot + 1) & (cap - 1);
		index[slot] = i + 1;
	}
	free(t->index);
	t->index = index;
	t->cap_index = cap;
	return 0;
}

static struct hist_entry *table_find(const struct up_hist_table *t, const struct up_hist_key *k,
				     uint64_t hash, unsigned *slot_out)
{
	unsigned slot;

	if (!t->cap_index) {
		*slot_out = 0;
		return NULL;
	}
	slot = (unsigned)hash & (t->cap_index - 1);
	while (t->index[slot]) {
		struct hist_entry *e = &t->ents[t->index[slot] - 1];

		if (e->hash == hash && key_match(t, e, k))
			return e;
		slot = (slot + 1) & (t->cap_index - 1);
	}
	*slot_out = slot;
	return NULL;
}

static void combine(const struct up_hist_table *t, struct hist_entry *e, const uint64_t *vals)
{
	for (unsigned i = 0; i < t->nvals; i++) {
		uint64_t v = vals[i], cur = e->val[i];
		int c = t->is_signed[i] ? cmp_s64((int64_t)v, (int64_t)cur) : cmp_u64(v, cur);

		switch (t->op[i]) {
		case UP_HIST_OP_SUM:
		case UP_HIST_OP_AVG:
			e->val[i] += v;
			break;
		case UP_HIST_OP_MIN:
			if (c < 0)
				e->val[i] = v;
			break;
		case UP_HIST_OP_MAX:
			if (c > 0)
				e->val[i] = v;
			break;
		}
	}
}

static void entry_free_strs(struct hist_entry *e)
{
	for (unsigned i = 0; i < UP_HIST_KEYS_MAX; i++) {
		free(e->str[i]);
		e->str[i] = NULL;
	}
}

static int table_insert(struct up_hist_table *t, const struct up_hist_key *k, uint64_t hash,
			uint64_t hits, const uint64_t *vals)
{
	struct hist_entry e = { .hits = hits, .hash = hash };
	unsigned slot;

	for (unsigned i = 0; i < t->nkeys; i++) {
		e.num[i] = kind_is_str(t->kind[i]) ? 0 : k->num[i];
		if (kind_is_str(t->kind[i]) || (t->kind[i] == KEY_SYM && k->str[i])) {
			const char *s = k->str[i] ? k->str[i] : "";

			e.str[i] = t->kind[i] == KEY_STRING ? strndup(s, key_str_len(t->kind[i], s))
							     : strdup(s);
			if (!e.str[i])
				goto nomem;
		}
	}
	for (unsigned i = 0; i < t->nvals; i++)
		e.val[i] = vals[i];
	if (t->nents == t->cap_ents) {
		unsigned cap = t->cap_ents ? t->cap_ents * 2 : 16;
		struct hist_entry *ents = realloc(t->ents, cap * sizeof(*ents));

		if (!ents)
			goto nomem;
		t->ents = ents;
		t->cap_ents = cap;
	}
	if ((t->nents + 1) * 2 > t->cap_index) {
		if (index_grow(t))
			goto nomem;
		table_find(t, k, hash, &slot);
	} else {
		table_find(t, k, hash, &slot);
	}
	t->ents[t->nents] = e;
	t->index[slot] = ++t->nents;
	t->hits += hits;
	return 0;
nomem:
	entry_free_strs(&e);
	return -ENOMEM;
}

struct up_hist_table *up_hist_table_new(const struct up_hist *h)
{
	struct up_hist_table *t;

	if (!h || !h->nkeys || h->nkeys > UP_HIST_KEYS_MAX || h->nvals > UP_HIST_VALS_MAX) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->nkeys = h->nkeys;
	t->nvals = h->nvals;
	t->size = h->size ? h->size : UP_HIST_SIZE_DEFAULT;
	for (unsigned i = 0; i < h->nkeys; i++) {
		const struct up_hist_field *f = &h->key[i];

		if (f->src == UP_HIST_SRC_STACK)
			t->kind[i] = KEY_STACK;
		else if (f->is_string)
			t->kind[i] = KEY_STRING;
		else if (f->mod == UP_HIST_MOD_SYM || f->mod == UP_HIST_MOD_SYM_OFFSET)
			t->kind[i] = KEY_SYM;
		else
			t->kind[i] = KEY_NUM;
	}
	for (unsigned i = 0; i < h->nvals; i++) {
		t->op[i] = h->val[i].op;
		t->is_signed[i] = h->val[i].is_signed;
	}
	return t;
}

void up_hist_table_free(struct up_hist_table *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->nents; i++)
		entry_free_strs(&t->ents[i]);
	free(t->ents);
	free(t->index);
	free(t);
}

int up_hist_table_add(struct up_hist_table *t, const struct up_hist_key *k, uint64_t hits,
		      const uint64_t *vals)
{
	static const uint64_t zeros[UP_HIST_VALS_MAX];
	struct hist_entry *e;
	uint64_t hash;
	unsigned slot;

	if (!t || !k)
		return -EINVAL;
	if (!vals)
		vals = zeros;
	if (!hits)
		return 0;
	hash = key_hash(t, k);
	e = table_find(t, k, hash, &slot);
	if (e) {
		e->hits += hits;
		t->hits += hits;
		combine(t, e, vals);
		return 0;
	}
	if (t->nents >= t->size) { /* tracing_map_insert: no free elt, a drop */
		t->dropped += hits;
		return 0;
	}
	return table_insert(t, k, hash, hits, vals);
}

void up_hist_table_drop(struct up_hist_table *t, uint64_t n)
{
	if (t)
		t->dropped += n;
}

static void entry_key(const struct up_hist_table *t, const struct hist_entry *e,
		      struct up_hist_key *k)
{
	memset(k, 0, sizeof(*k));
	for (unsigned i = 0; i < t->nkeys; i++) {
		k->num[i] = e->num[i];
		k->str[i] = e->str[i];
	}
}

int up_hist_table_merge(struct up_hist_table *dst, const struct up_hist_table *src)
{
	if (!dst || !src || dst->nkeys != src->nkeys || dst->nvals != src->nvals ||
	    memcmp(dst->kind, src->kind, sizeof(dst->kind)) ||
	    memcmp(dst->op, src->op, sizeof(dst->op)))
		return -EINVAL;
	for (unsigned i = 0; i < src->nents; i++) {
		struct up_hist_key k;
		int ret;

		entry_key(src, &src->ents[i], &k);
		ret = up_hist_table_add(dst, &k, src->ents[i].hits, src->ents[i].val);
		if (ret)
			return ret;
	}
	dst->dropped += src->dropped;
	return 0;
}

struct up_hist_table *up_hist_table_clone(const struct up_hist_table *t)
{
	struct up_hist_table *c;

	if (!t) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	*c = *t;
	c->ents = NULL;
	c->index = NULL;
	c->nents = c->cap_ents = c->cap_index = 0;
	c->hits = 0;
	if (up_hist_table_merge(c, t)) {
		up_hist_table_free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->dropped = t->dropped;
	return c;
}

int up_hist_table_for_each(const struct up_hist_table *t, up_hist_entry_fn fn, void *ctx)
{
	for (unsigned i = 0; t && i < t->nents; i++) {
		const struct hist_entry *e = &t->ents[i];
		struct up_hist_key k;
		int rc;

		for (unsigned j = 0; j < UP_HIST_KEYS_MAX; j++) {
			k.num[j] = e->num[j];
			k.str[j] = e->str[j];
		}
		rc = fn(ctx, &k, e->hits, e->val);
		if (rc)
			return rc;
	}
	return 0;
}

uint64_t up_hist_table_dropped(const struct up_hist_table *t)
{
	return t ? t->dropped : 0;
}

uint64_t up_hist_table_hits(const struct up_hist_table *t)
{
	return t ? t->hits : 0;
}

unsigned up_hist_table_entries(const struct up_hist_table *t)
{
	return t ? t->nents : 0;
}

/* ---- trigger info ------------------------------------------------------------------- */

static void sort_text(const struct up_hist *h, const struct up_hist_sort *s,
		      struct up_spec_buf *b)
{
	if (s->src == UP_HIST_SRC_HITCOUNT)
		up_spec_buf_printf(b, "hitcount");
	else if (s->is_val)
		field_text(&h->val[s->field], false, b);
	else
		field_text(&h->key[s->field], true, b);
	if (s->descending)
		up_spec_buf_printf(b, ".descending");
}

int up_hist_trigger_info(const struct up_hist *h, char *buf, size_t size)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	if (!h)
		return -EINVAL;
	up_spec_buf_printf(&b, "hist:");
	if (h->name[0]) /* the kernel keeps the attribute whole, "name=" and all */
		up_spec_buf_printf(&b, "name=%s:", h->name);
	up_spec_buf_printf(&b, "keys=");
	for (unsigned i = 0; i < h->nkeys; i++) {
		if (i)
			up_spec_buf_putc(&b, ',');
		field_text(&h->key[i], true, &b);
	}
	up_spec_buf_printf(&b, ":vals=hitcount");
	for (unsigned i = 0; i < h->nvals; i++) {
		if (h->val[i].hidden)
			continue;
		up_spec_buf_putc(&b, ',');
		field_text(&h->val[i], false, &b);
	}
	up_spec_buf_printf(&b, ":sort=");
	for (unsigned i = 0; i < h->nsort; i++) {
		if (i)
			up_spec_buf_putc(&b, ',');
		sort_text(h, &h->sort[i], &b);
	}
	if (!h->nsort)
		up_spec_buf_printf(&b, "hitcount");
	up_spec_buf_printf(&b, ":size=%u", h->size);
	if (h->filter)
		up_spec_buf_printf(&b, " if %s", h->filter);
	up_spec_buf_printf(&b, " [active]");
	return up_spec_buf_result(&b);
}

/* ---- sorting ------------------------------------------------------------------------ */

/* Min, max and avg of a signed argument are signed; a sum stays the kernel's u64. */
static bool val_printed_signed(const struct up_hist_field *f)
{
	return f->is_signed && f->op != UP_HIST_OP_SUM && f->mod != UP_HIST_MOD_HEX;
}

static uint64_t val_value(const struct up_hist_field *f, const struct hist_entry *e, unsigned i)
{
	if (f->op != UP_HIST_OP_AVG || !e->hits)
		return e->val[i];
	if (f->is_signed)
		return (uint64_t)((int64_t)e->val[i] / (int64_t)e->hits);
	return e->val[i] / e->hits;
}

static const char *entry_str(const struct hist_entry *e, unsigned i)
{
	return e->str[i] ? e->str[i] : "";
}

static int cmp_key_field(const struct up_hist *h, const struct up_hist_table *t, unsigned i,
			 const struct hist_entry *a, const struct hist_entry *b)
{
	const struct up_hist_field *f = &h->key[i];

	if (kind_is_str(t->kind[i]))
		return strcmp(entry_str(a, i), entry_str(b, i));
	if (f->is_signed && f->mod == UP_HIST_MOD_NONE)
		return cmp_s64((int64_t)a->num[i], (int64_t)b->num[i]);
	return cmp_u64(a->num[i], b->num[i]);
}

struct sort_ctx {
	const struct up_hist *h;
	const struct up_hist_table *t;
	bool by_hits_only; /* BARS: by count, then key */
};

static int cmp_entries(const void *pa, const void *pb, void *arg)
{
	const struct sort_ctx *c = arg;
	const struct hist_entry *a = *(const struct hist_entry *const *)pa;
	const struct hist_entry *b = *(const struct hist_entry *const *)pb;
	unsigned nsort = c->by_hits_only ? 1 : c->h->nsort;
	int r;

	for (unsigned i = 0; i < nsort; i++) {
		const struct up_hist_sort *s = &c->h->sort[i];

		if (c->by_hits_only || s->src == UP_HIST_SRC_HITCOUNT) {
			r = cmp_u64(a->hits, b->hits);
		} else if (s->is_val) {
			const struct up_hist_field *f = &c->h->val[s->field];
			uint64_t x = val_value(f, a, s->field), y = val_value(f, b, s->field);

			r = val_printed_signed(f) ? cmp_s64((int64_t)x, (int64_t)y) : cmp_u64(x, y);
		} else {
			r = cmp_key_field(c->h, c->t, s->field, a, b);
		}
		if (r)
			return !c->by_hits_only && s->descending ? -r : r;
	}
	/* the kernel leaves ties in hash order; keys make the output the same every time */
	for (unsigned i = 0; i < c->t->nkeys; i++) {
		r = cmp_key_field(c->h, c->t, i, a, b);
		if (r)
			return r;
	}
	return 0;
}

static const struct hist_entry **sorted_entries(const struct up_hist *h,
						const struct up_hist_table *t, bool by_hits_only)
{
	struct sort_ctx c = { h, t, by_hits_only };
	const struct hist_entry **v = malloc((t->nents ? t->nents : 1) * sizeof(*v));

	if (!v)
		return NULL;
	for (unsigned i = 0; i < t->nents; i++)
		v[i] = &t->ents[i];
	qsort_r(v, t->nents, sizeof(*v), cmp_entries, &c);
	return v;
}

/* ---- text: the kernel's hist file --------------------------------------------------- */

/* Frames of a stack key, one a line; empty lines (a trailing '\n') are no frames. */
static void put_frames(FILE *out, const char *s, const char *indent)
{
	while (*s) {
		const char *nl = strchr(s, '\n');
		size_t n = nl ? (size_t)(nl - s) : strlen(s);

		if (n)
			fprintf(out, "%s%.*s\n", indent, (int)n, s);
		s += n + (nl != NULL);
	}
}

static void text_key(FILE *out, const struct up_hist *h, const struct up_hist_table *t,
		     const struct hist_entry *e)
{
	bool multiline = false;
	char sym[32];

	fputs("{ ", out);
	for (unsigned i = 0; i < h->nkeys; i++) {
		const struct up_hist_field *f = &h->key[i];
		unsigned long long v = e->num[i];

		if (i)
			fputs(", ", out);
		snprintf(sym, sizeof(sym), "0x%llx", v); /* %ps of an address without a symbol */
		if (t->kind[i] == KEY_STACK) {
			fputs(HIST_STACK_NAME ":\n", out);
			put_frames(out, entry_str(e, i), "         ");
			multiline = true;
		} else if (f->mod == UP_HIST_MOD_HEX) {
			fprintf(out, "%s: %llx", f->name, v);
		} else if (f->mod == UP_HIST_MOD_SYM) {
			fprintf(out, "%s: [%llx] %-45s", f->name, v, e->str[i] ? e->str[i] : sym);
		} else if (f->mod == UP_HIST_MOD_SYM_OFFSET) {
			fprintf(out, "%s: [%llx] %-55s", f->name, v, e->str[i] ? e->str[i] : sym);
		} else if (f->mod == UP_HIST_MOD_LOG2) {
			fprintf(out, "%s: ~ 2^%-2llu", f->name, v);
		} else if (f->mod == UP_HIST_MOD_LOG2FLOOR) {
			fprintf(out, "%s: ~ %llu-%llu", f->name, v ? 1ull << (v - 1) : 0,
				v ? (v >= 64 ? ~0ull : (1ull << v) - 1) : 0);
		} else if (f->mod == UP_HIST_MOD_BUCKETS) {
			fprintf(out, "%s: ~ %llu-%llu", f->name, v,
				v + (unsigned long long)f->buckets - 1);
		} else if (t->kind[i] == KEY_STRING) {
			fprintf(out, "%s: %-50s", f->name, entry_str(e, i));
		} else {
			fprintf(out, "%s: %10llu", f->name, v);
		}
	}
	if (!multiline)
		fputc(' ', out);
	fputc('}', out);
}

/* A val's label: the kernel's field name for sums; ours say which of min/max/avg. */
static void val_label(const struct up_hist_field *f, char *buf, size_t size)
{
	const char *op = val_op_name(f->op);

	if (op)
		snprintf(buf, size, "%s.%s", f->name, op);
	else
		snprintf(buf, size, "%s", f->name);
}

static void text_entry(FILE *out, const struct up_hist *h, const struct up_hist_table *t,
		       const struct hist_entry *e)
{
	char label[sizeof(h->val[0].name) + 8];

	text_key(out, h, t, e);
	fprintf(out, " hitcount: %10llu", (unsigned long long)e->hits);
	for (unsigned i = 0; i < h->nvals; i++) {
		const struct up_hist_field *f = &h->val[i];
		uint64_t v = val_value(f, e, i);

		if (f->hidden)
			continue;
		val_label(f, label, sizeof(label));
		if (f->mod == UP_HIST_MOD_HEX)
			fprintf(out, "  %s: %10llx", label, (unsigned long long)v);
		else if (val_printed_signed(f))
			fprintf(out, "  %s: %10lld", label, (long long)v);
		else
			fprintf(out, "  %s: %10llu", label, (unsigned long long)v);
	}
	fputc('\n', out);
}

static char *trigger_info_dup(const struct up_hist *h)
{
	int n = up_hist_trigger_info(h, NULL, 0);
	char *s;

	if (n < 0)
		return NULL;
	s = malloc((size_t)n + 1);
	if (s)
		up_hist_trigger_info(h, s, (size_t)n + 1);
	return s;
}

static int print_text(const struct up_hist *h, const struct up_hist_table *t, FILE *out)
{
	const struct hist_entry **v = sorted_entries(h, t, false);
	char *info = trigger_info_dup(h);

	if (!v || !info) {
		free(v);
		free(info);
		return -ENOMEM;
	}
	fprintf(out, "# event histogram\n#\n# trigger info: %s\n#\n\n", info);
	for (unsigned i = 0; i < t->nents; i++)
		text_entry(out, h, t, v[i]);
	fprintf(out, "\nTotals:\n    Hits: %llu\n    Entries: %u\n    Dropped: %llu\n",
		(unsigned long long)t->hits, t->nents, (unsigned long long)t->dropped);
	free(v);
	free(info);
	return 0;
}

/* ---- JSON --------------------------------------------------------------------------- */

/*
 * One object and a newline:
 *   {"event":"GRP/EVENT","trigger":"hist:keys=...:size=2048 [active]",
 *    "entries":[{"key":{"size.log2":10,"comm":"ls","addr.sym":"main+0x4",
 *                       "common_stacktrace":["f1","f2"]},
 *                "hitcount":3,"vals":{"bytes":100,"bytes.hex":"0x64","lat.max":-2}}, ...],
 *    "totals":{"hits":N,"entries":N,"dropped":N}}
 * Keys and vals are named as the trigger lists them.  Numbers are JSON numbers (the
 * kept value: a .log2 key's exponent, a .buckets key's first value; signed for a
 * plain key of an s-type argument and where the text prints signed); .hex ones are
 * "0x.." strings, .sym ones the symbol (or "0x.." without one).  Entries come in the
 * text's order; "event" has no "GRP/" when the trigger named no group.
 */
static int put_json_str(FILE *out, const char *s, size_t n)
{
	int len = up_fmt_json_string(NULL, 0, s, n);
	char *buf;

	if (len < 0)
		return len;
	buf = malloc((size_t)len + 1);
	if (!buf)
		return -ENOMEM;
	up_fmt_json_string(buf, (size_t)len + 1, s, n);
	fputs(buf, out);
	free(buf);
	return 0;
}

static int put_json_cstr(FILE *out, const char *s)
{
	return put_json_str(out, s, strlen(s));
}

static int json_key(FILE *out, const struct up_hist *h, const struct up_hist_table *t,
		    const struct hist_entry *e)
{
	char name[sizeof(h->key[0].name) + 32];
	int ret = 0;

	fputc('{', out);
	for (unsigned i = 0; i < h->nkeys && !ret; i++) {
		const struct up_hist_field *f = &h->key[i];
		unsigned long long v = e->num[i];

		if (i)
			fputc(',', out);
		field_text_buf(f, true, name, sizeof(name));
		ret = put_json_cstr(out, name);
		fputc(':', out);
		if (ret)
			break;
		if (t->kind[i] == KEY_STACK) {
			const char *s = entry_str(e, i);
			bool first = true;

			fputc('[', out);
			while (*s && !ret) {
				const char *nl = strchr(s, '\n');
				size_t n = nl ? (size_t)(nl - s) : strlen(s);

				if (n) {
					if (!first)
						fputc(',', out);
					ret = put_json_str(out, s, n);
					first = false;
				}
				s += n + (nl != NULL);
			}
			fputc(']', out);
		} else if (t->kind[i] == KEY_STRING) {
			ret = put_json_cstr(out, entry_str(e, i));
		} else if ((f->mod == UP_HIST_MOD_SYM || f->mod == UP_HIST_MOD_SYM_OFFSET) &&
			   e->str[i]) {
			ret = put_json_cstr(out, e->str[i]);
		} else if (f->mod == UP_HIST_MOD_HEX || f->mod == UP_HIST_MOD_SYM ||
			   f->mod == UP_HIST_MOD_SYM_OFFSET) {
			fprintf(out, "\"0x%llx\"", v);
		} else if (f->is_signed && f->mod == UP_HIST_MOD_NONE) {
			fprintf(out, "%lld", (long long)v);
		} else {
			fprintf(out, "%llu", v);
		}
	}
	fputc('}', out);
	return ret;
}

static int json_entry(FILE *out, const struct up_hist *h, const struct up_hist_table *t,
		      const struct hist_entry *e)
{
	char name[sizeof(h->val[0].name) + 32];
	int ret;

	fputs("{\"key\":", out);
	ret = json_key(out, h, t, e);
	if (ret)
		return ret;
	fprintf(out, ",\"hitcount\":%llu,\"vals\":{", (unsigned long long)e->hits);
	for (unsigned i = 0, n = 0; i < h->nvals; i++) {
		const struct up_hist_field *f = &h->val[i];
		uint64_t v = val_value(f, e, i);

		if (f->hidden)
			continue;
		if (n++)
			fputc(',', out);
		field_text_buf(f, false, name, sizeof(name));
		ret = put_json_cstr(out, name);
		if (ret)
			return ret;
		if (f->mod == UP_HIST_MOD_HEX)
			fprintf(out, ":\"0x%llx\"", (unsigned long long)v);
		else if (val_printed_signed(f))
			fprintf(out, ":%lld", (long long)v);
		else
			fprintf(out, ":%llu", (unsigned long long)v);
	}
	fputs("}}", out);
	return 0;
}

static int print_json(const struct up_hist *h, const struct up_hist_table *t, FILE *out)
{
	const struct hist_entry **v = sorted_entries(h, t, false);
	char *info = trigger_info_dup(h);
	char event[2 * UP_SPEC_NAME_MAX + 2];
	int ret = -ENOMEM;

	if (!v || !info)
		goto out;
	snprintf(event, sizeof(event), "%s%s%s", h->group, h->group[0] ? "/" : "", h->event);
	fputs("{\"event\":", out);
	ret = put_json_cstr(out, event);
	if (ret)
		goto out;
	fputs(",\"trigger\":", out);
	ret = put_json_cstr(out, info);
	if (ret)
		goto out;
	fputs(",\"entries\":[", out);
	for (unsigned i = 0; i < t->nents; i++) {
		if (i)
			fputc(',', out);
		ret = json_entry(out, h, t, v[i]);
		if (ret)
			goto out;
	}
	fprintf(out, "],\"totals\":{\"hits\":%llu,\"entries\":%u,\"dropped\":%llu}}\n",
		(unsigned long long)t->hits, t->nents, (unsigned long long)t->dropped);
out:
	free(v);
	free(info);
	return ret;
}

/* ---- bars: bpftrace's map output ---------------------------------------------------- */

/* bpftrace's hist_index_label: 2^p with a K/M/G/T/P/E suffix for each 1024. */
static void pow2_label(unsigned p, char *buf, size_t size)
{
	static const char suffix[] = "\0KMGTPE";
	unsigned decade;

	if (p > 63)
		p = 63;
	decade = p / 10;
	if (decade > 6)
		decade = 6;
	p -= 10 * decade;
	if (suffix[decade])
		snprintf(buf, size, "%llu%c", 1ull << p, suffix[decade]);
	else
		snprintf(buf, size, "%llu", 1ull << p);
}

/* A row as TextOutput::hist_to_str draws it: label, count, a bar out of 52. */
static void bar_row(FILE *out, const char *label, uint64_t count, uint64_t max)
{
	int width = max ? (int)((float)count / (float)max * HIST_BAR_WIDTH) : 0;
	char bar[HIST_BAR_WIDTH + 1];

	memset(bar, '@', (size_t)width);
	bar[width] = '\0';
	fprintf(out, "%-16s%8llu |%-*s|\n", label, (unsigned long long)count, HIST_BAR_WIDTH,
		bar);
}

static uint64_t count_of(const struct up_hist_table *t, uint64_t key)
{
	for (unsigned i = 0; i < t->nents; i++)
		if (t->ents[i].num[0] == key)
			return t->ents[i].hits;
	return 0;
}

/*
 * A log2 key k holds the values v with 2^(k-1) < v <= 2^k (0 holds 0 and 1), which is
 * not bpftrace's [2^k, 2^(k+1)): the labels say what was counted, in bpftrace's
 * layout.  Gaps between the lowest and the highest key are drawn as empty rows, as
 * bpftrace does.
 */
static void bars_log2(FILE *out, const struct up_hist_table *t, uint64_t lo, uint64_t hi,
		      uint64_t max)
{
	for (uint64_t k = lo; k <= hi; k++) {
		char label[64], a[24], b[24];

		if (k == 0) {
			snprintf(label, sizeof(label), "[0, 1]");
		} else {
			pow2_label((unsigned)k - 1, a, sizeof(a));
			pow2_label((unsigned)k, b, sizeof(b));
			snprintf(label, sizeof(label), "(%s, %s]", a, b);
		}
		bar_row(out, label, count_of(t, k), max);
	}
}

static void bars_buckets(FILE *out, const struct up_hist *h, const struct up_hist_table *t,
			 const struct hist_entry **v, uint64_t lo, uint64_t hi, uint64_t max)
{
	uint64_t n = h->key[0].buckets;
	char label[64];

	if (n && (hi - lo) / n < HIST_BAR_GAP_ROWS) {
		for (uint64_t b = lo;; b += n) {
			snprintf(label, sizeof(label), "[%llu, %llu)", (unsigned long long)b,
				 (unsigned long long)(b + n));
			bar_row(out, label, count_of(t, b), max);
			if (hi - b < n)
				break;
		}
		return;
	}
	/* too wide to draw every bucket: the ones that were hit, in key order */
	for (unsigned i = 0; i < t->nents; i++) {
		uint64_t b = v[i]->num[0];

		snprintf(label, sizeof(label), "[%llu, %llu)", (unsigned long long)b,
			 (unsigned long long)(b + n));
		bar_row(out, label, v[i]->hits, max);
	}
}

static int cmp_by_key0(const void *pa, const void *pb)
{
	const struct hist_entry *a = *(const struct hist_entry *const *)pa;
	const struct hist_entry *b = *(const struct hist_entry *const *)pb;

	return cmp_u64(a->num[0], b->num[0]);
}

/* "@name[k1, k2]: count", as bpftrace prints a map: by count, smallest first. */
static void bars_map(FILE *out, const char *name, const struct up_hist *h,
		     const struct up_hist_table *t, const struct hist_entry **v)
{
	for (unsigned i = 0; i < t->nents; i++) {
		const struct hist_entry *e = v[i];

		fprintf(out, "@%s[", name);
		for (unsigned j = 0; j < h->nkeys; j++) {
			const struct up_hist_field *f = &h->key[j];
			unsigned long long x = e->num[j];

			if (j)
				fputs(", ", out);
			if (t->kind[j] == KEY_STACK) {
				fputc('\n', out);
				put_frames(out, entry_str(e, j), "        ");
			} else if (t->kind[j] == KEY_STRING) {
				fputs(entry_str(e, j), out);
			} else if (t->kind[j] == KEY_SYM && e->str[j]) {
				fputs(e->str[j], out);
			} else if (f->mod == UP_HIST_MOD_HEX || t->kind[j] == KEY_SYM) {
				fprintf(out, "0x%llx", x);
			} else if (f->mod == UP_HIST_MOD_LOG2) {
				fprintf(out, "2^%llu", x);
			} else if (f->mod == UP_HIST_MOD_BUCKETS) {
				fprintf(out, "%llu-%llu", x, x + (unsigned long long)f->buckets - 1);
			} else if (f->is_signed) {
				fprintf(out, "%lld", (long long)x);
			} else {
				fprintf(out, "%llu", x);
			}
		}
		fprintf(out, "]: %llu\n", (unsigned long long)e->hits);
	}
}

static int print_bars(const struct up_hist *h, const struct up_hist_table *t, FILE *out)
{
	const char *name = h->name[0] ? h->name : h->event;
	const struct up_hist_field *f = &h->key[0];
	bool one_num = h->nkeys == 1 && t->kind[0] == KEY_NUM;
	const struct hist_entry **v = sorted_entries(h, t, true);
	uint64_t lo = UINT64_MAX, hi = 0, max = 0;

	if (!v)
		return -ENOMEM;
	for (unsigned i = 0; i < t->nents; i++) {
		lo = t->ents[i].num[0] < lo ? t->ents[i].num[0] : lo;
		hi = t->ents[i].num[0] > hi ? t->ents[i].num[0] : hi;
		max = t->ents[i].hits > max ? t->ents[i].hits : max;
	}
	if (one_num && f->mod == UP_HIST_MOD_LOG2 && hi <= 64) {
		fprintf(out, "@%s:\n", name);
		if (t->nents)
			bars_log2(out, t, lo, hi, max);
	} else if (one_num && f->mod == UP_HIST_MOD_BUCKETS) {
		fprintf(out, "@%s:\n", name);
		qsort(v, t->nents, sizeof(*v), cmp_by_key0);
		if (t->nents)
			bars_buckets(out, h, t, v, lo, hi, max);
	} else {
		bars_map(out, name, h, t, v);
	}
	fputc('\n', out);
	free(v);
	return 0;
}

int up_hist_each_stack(const struct up_hist *h, const struct up_hist_table *t,
		       int (*fn)(void *arg, const char *frames, uint64_t hits), void *arg)
{
	unsigned k = 0;
	int rc = 0;

	if (!h || !(t = t ? t : h->base) || t->nkeys != h->nkeys)
		return -EINVAL;
	while (k < h->nkeys && t->kind[k] != KEY_STACK)
		k++;
	if (k == h->nkeys)
		return -ENOENT;
	for (unsigned i = 0; i < t->nents && !rc; i++)
		if (t->ents[i].hits)
			rc = fn(arg, entry_str(&t->ents[i], k), t->ents[i].hits);
	return rc;
}

int up_hist_print(const struct up_hist *h, const struct up_hist_table *t,
		  enum up_hist_style style, FILE *out)
{
	int ret;

	if (!h || !out)
		return -EINVAL;
	if (!t)
		t = h->base;
	if (!t || t->nkeys != h->nkeys || t->nvals != h->nvals)
		return -EINVAL;
	switch (style) {
	case UP_HIST_TEXT:
		ret = print_text(h, t, out);
		break;
	case UP_HIST_JSON:
		ret = print_json(h, t, out);
		break;
	case UP_HIST_BARS:
		ret = print_bars(h, t, out);
		break;
	default:
		return -EINVAL;
	}
	if (!ret && ferror(out))
		ret = -EIO;
	return ret;
}

/* ---- prom: Prometheus's text exposition and OpenMetrics ----------------------------- */

bool up_hist_add_sum(struct up_hist *h)
{
	const struct up_hist_field *k = &h->key[0];
	struct up_hist_field *v;

	if (!h || h->nkeys != 1 || (k->mod != UP_HIST_MOD_LOG2 && k->mod != UP_HIST_MOD_BUCKETS) ||
	    (k->src != UP_HIST_SRC_ARG && k->src != UP_HIST_SRC_DURATION))
		return false;
	for (unsigned i = 0; i < h->nvals; i++)
		if (h->val[i].op == UP_HIST_OP_SUM && h->val[i].src == k->src &&
		    !strcmp(h->val[i].name, k->name) && h->val[i].mod == UP_HIST_MOD_NONE)
			return true;
	if (h->nvals >= UP_HIST_VALS_MAX)
		return false;
	v = &h->val[h->nvals++];
	*v = *k;
	v->mod = UP_HIST_MOD_NONE;
	v->buckets = 0;
	v->op = UP_HIST_OP_SUM;
	v->hidden = true;
	return true;
}

/* The val that sums the histogram's field, or -1. */
static int prom_sum_val(const struct up_hist *h)
{
	const struct up_hist_field *k = &h->key[0];

	for (unsigned i = 0; i < h->nvals; i++)
		if (h->val[i].op == UP_HIST_OP_SUM && h->val[i].src == k->src &&
		    !strcmp(h->val[i].name, k->name) && h->val[i].mod != UP_HIST_MOD_HEX)
			return (int)i;
	return -1;
}

/* A field's name as a label name: [a-zA-Z_][a-zA-Z0-9_]*, never __-prefixed. */
static void prom_label_name(FILE *out, const char *name)
{
	const char *s = name;

	while (*s == '$' || *s == '_')
		s++;
	if (!*s || isdigit((unsigned char)*s))
		fputs("key_", out);
	for (; *s; s++)
		fputc(isalnum((unsigned char)*s) ? *s : '_', out);
}

static void prom_head(FILE *out, const char *family, const char *suffix, const char *type,
		      const char *help, const char *what)
{
	fprintf(out, "# HELP %s%s ", family, suffix);
	up_prom_escape(out, help, strlen(help), false);
	fprintf(out, "%s\n# TYPE %s%s %s\n", what, family, suffix, type);
}

static void prom_le(FILE *out, uint64_t le, bool om)
{
	fprintf(out, om ? "%llu.0" : "%llu", (unsigned long long)le);
}

/*
 * A log2 key k counts 2^(k-1) < v <= 2^k (0: v <= 1), so its le is 2^k, inclusive as
 * Prometheus's is.  A .buckets=n key b counts b <= v < b + n: of integers, le b + n - 1.
 * Every log2 bucket from 2^0 to the highest is written, so a series never comes and
 * goes; linear ones likewise up to 256 of them, else the ones hit.
 */
static void print_prom_histogram(const struct up_hist *h, const struct up_hist_table *t,
				 const char *family, const char *help, bool om, FILE *out)
{
	const struct up_hist_field *f = &h->key[0];
	const struct hist_entry **v = malloc((t->nents ? t->nents : 1) * sizeof(*v));
	int sv = prom_sum_val(h);
	uint64_t cum = 0, sum = 0, hi = 0, n = f->buckets ? f->buckets : 1;

	if (!v)
		return;
	for (unsigned i = 0; i < t->nents; i++) {
		v[i] = &t->ents[i];
		hi = t->ents[i].num[0] > hi ? t->ents[i].num[0] : hi;
		if (sv >= 0)
			sum += t->ents[i].val[sv];
	}
	qsort(v, t->nents, sizeof(*v), cmp_by_key0);
	prom_head(out, family, "", "histogram", help, "");
	if (f->mod == UP_HIST_MOD_LOG2 || hi / n < 256) {
		unsigned j = 0;

		for (uint64_t k = 0; t->nents; k += f->mod == UP_HIST_MOD_LOG2 ? 1 : n) {
			while (j < t->nents && v[j]->num[0] == k)
				cum += v[j++]->hits;
			fprintf(out, "%s_bucket{le=\"", family);
			prom_le(out, f->mod == UP_HIST_MOD_LOG2 ? (k >= 64 ? UINT64_MAX : 1ull << k)
								 : k + n - 1,
				om);
			fprintf(out, "\"} %llu\n", (unsigned long long)cum);
			if (k >= hi)
				break;
		}
	} else {
		for (unsigned j = 0; j < t->nents; j++) {
			cum += v[j]->hits;
			fprintf(out, "%s_bucket{le=\"", family);
			prom_le(out, v[j]->num[0] + n - 1, om);
			fprintf(out, "\"} %llu\n", (unsigned long long)cum);
		}
	}
	fprintf(out, "%s_bucket{le=\"+Inf\"} %llu\n", family, (unsigned long long)t->hits);
	if (sv >= 0)
		fprintf(out, "%s_sum %llu\n", family, (unsigned long long)sum);
	fprintf(out, "%s_count %llu\n", family, (unsigned long long)t->hits);
	free(v);
}

/* {key="value",...}: the entry's keys as print_bars shows them; a stack's frames
   joined by ';', outermost first, as folded stacks are. */
static void prom_labels(FILE *out, const struct up_hist *h, const struct up_hist_table *t,
			const struct hist_entry *e)
{
	fputc('{', out);
	for (unsigned j = 0; j < h->nkeys; j++) {
		const struct up_hist_field *f = &h->key[j];
		unsigned long long x = e->num[j];
		char num[48];

		if (j)
			fputc(',', out);
		prom_label_name(out, f->name);
		fputs("=\"", out);
		if (t->kind[j] == KEY_STACK) {
			up_prom_frames(out, entry_str(e, j));
			fputc('"', out);
			continue;
		}
		if (t->kind[j] == KEY_STRING || (t->kind[j] == KEY_SYM && e->str[j])) {
			up_prom_escape(out, entry_str(e, j), UP_HIST_STRING_KEY, true);
			fputc('"', out);
			continue;
		}
		if (f->mod == UP_HIST_MOD_HEX || t->kind[j] == KEY_SYM)
			snprintf(num, sizeof(num), "0x%llx", x);
		else if (f->mod == UP_HIST_MOD_LOG2)
			snprintf(num, sizeof(num), "2^%llu", x);
		else if (f->mod == UP_HIST_MOD_BUCKETS)
			snprintf(num, sizeof(num), "%llu-%llu", x,
				 x + (unsigned long long)f->buckets - 1);
		else if (f->is_signed)
			snprintf(num, sizeof(num), "%lld", (long long)x);
		else
			snprintf(num, sizeof(num), "%llu", x);
		fputs(num, out);
		fputc('"', out);
	}
	fputc('}', out);
}

static int cmp_hits_desc(const void *pa, const void *pb)
{
	const struct hist_entry *a = *(const struct hist_entry *const *)pa;
	const struct hist_entry *b = *(const struct hist_entry *const *)pb;

	return a->hits != b->hits ? (a->hits < b->hits ? 1 : -1) : cmp_u64(a->hash, b->hash);
}

static void print_prom_keyed(const struct up_hist *h, const struct up_hist_table *t,
			     const char *family, const char *help, unsigned max_series, bool om,
			     FILE *out)
{
	const struct hist_entry **v = malloc((t->nents ? t->nents : 1) * sizeof(*v));
	unsigned n = t->nents < max_series ? t->nents : max_series;
	uint64_t over = 0;

	if (!v)
		return;
	for (unsigned i = 0; i < t->nents; i++)
		v[i] = &t->ents[i];
	qsort(v, t->nents, sizeof(*v), cmp_hits_desc);
	for (unsigned i = n; i < t->nents; i++)
		over += v[i]->hits;
	prom_head(out, family, om ? "_hits" : "_hits_total", "counter", help, ": hits by key");
	for (unsigned i = 0; i < n; i++) {
		fprintf(out, "%s_hits_total", family);
		prom_labels(out, h, t, v[i]);
		fprintf(out, " %llu\n", (unsigned long long)v[i]->hits);
	}
	for (unsigned k = 0; k < h->nvals; k++) {
		const struct up_hist_field *f = &h->val[k];
		bool counter = f->op == UP_HIST_OP_SUM && !f->is_signed;
		static const char *const opn[] = { "sum", "min", "max", "avg" };
		char suffix[sizeof(f->name) + 32], what[sizeof(f->name) + 32];
		size_t m;

		if (f->hidden)
			continue;
		m = (size_t)snprintf(suffix, sizeof(suffix), "_");
		for (const char *s = f->name; *s && m + 2 < sizeof(suffix); s++)
			if (*s != '$')
				suffix[m++] = isalnum((unsigned char)*s) ? *s : '_';
		snprintf(suffix + m, sizeof(suffix) - m, "_%s%s", opn[f->op],
			 counter && !om ? "_total" : "");
		snprintf(what, sizeof(what), ": %s of %s by key", opn[f->op], f->name);
		prom_head(out, family, suffix, counter ? "counter" : "gauge", help, what);
		if (counter && om)
			strcat(suffix, "_total");
		for (unsigned i = 0; i < n; i++) {
			uint64_t x = val_value(f, v[i], k);

			fprintf(out, "%s%s", family, suffix);
			prom_labels(out, h, t, v[i]);
			if (val_printed_signed(f) || f->is_signed)
				fprintf(out, " %lld\n", (long long)x);
			else
				fprintf(out, " %llu\n", (unsigned long long)x);
		}
	}
	prom_head(out, family, om ? "_overflow_hits" : "_overflow_hits_total", "counter", help,
		  ": hits of keys beyond the exported series");
	fprintf(out, "%s_overflow_hits_total %llu\n", family, (unsigned long long)over);
	free(v);
}

int up_hist_print_prom(const struct up_hist *h, const struct up_hist_table *t,
		       const char *family, const char *help, unsigned max_series, bool om,
		       FILE *out)
{
	bool one_num;

	if (!h || !out || !family)
		return -EINVAL;
	if (!t)
		t = h->base;
	if (!t || t->nkeys != h->nkeys || t->nvals != h->nvals)
		return -EINVAL;
	one_num = h->nkeys == 1 && t->kind[0] == KEY_NUM;
	if (one_num && (h->key[0].mod == UP_HIST_MOD_LOG2 || h->key[0].mod == UP_HIST_MOD_BUCKETS))
		print_prom_histogram(h, t, family, help, om, out);
	else
		print_prom_keyed(h, t, family, help, max_series ? max_series : 1, om, out);
	prom_head(out, family, om ? "_dropped" : "_dropped_total", "counter", help,
		  ": hits whose key found no room in the table");
	fprintf(out, "%s_dropped_total %llu\n", family, (unsigned long long)t->dropped);
	return ferror(out) ? -EIO : 0;
}
