// SPDX-License-Identifier: MIT
/*
 * Histogram triggers: parsing, binding to an event, the tracer's tables, and the three
 * ways to print them (hist.h).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agg.h"
#include "trace/hist.h"

/* ---- parsing ------------------------------------------------------------------------------ */

static int fail(struct up_spec_err *err, int pos, int len, const char *msg)
{
	if (err) {
		err->pos = pos;
		err->len = len > 0 ? len : 1;
		snprintf(err->msg, sizeof(err->msg), "%s", msg);
	}
	return -EINVAL;
}

static bool is_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

/* One field "name[.mod[=N]]" at text[pos, pos + len). */
static int parse_field(const char *text, int pos, int len, bool is_val, struct up_hist_field *f,
		       struct up_spec_err *err)
{
	const char *s = text + pos, *dot = memchr(s, '.', (size_t)len);
	int nlen = dot ? (int)(dot - s) : len;

	memset(f, 0, sizeof(*f));
	f->pos = pos;
	f->len = len;
	f->arg = -1;
	if (!nlen)
		return fail(err, pos, len, "Field name missing");
	if (nlen > UP_SPEC_ARG_NAME_MAX + 1)
		return fail(err, pos, nlen, "Field name too long");
	for (int i = 0; i < nlen; i++)
		if (!is_name_char(s[i]) || (s[i] == '$' && i))
			return fail(err, pos + i, 1, "Invalid character in field name");
	memcpy(f->name, s, (size_t)nlen);
	if (!strcmp(f->name, "hitcount"))
		f->src = UP_HIST_SRC_HITCOUNT;
	else if (!strcmp(f->name, "common_pid"))
		f->src = UP_HIST_SRC_PID;
	else if (!strcmp(f->name, "stacktrace") || !strcmp(f->name, "common_stacktrace"))
		f->src = UP_HIST_SRC_STACK;
	else if (!strcmp(f->name, "$duration"))
		f->src = UP_HIST_SRC_DURATION;
	else if (f->name[0] == '$')
		return fail(err, pos, nlen, "Unknown variable (only $duration)");
	else
		f->src = UP_HIST_SRC_ARG;
	if (!dot)
		return 0;
	{
		const char *m = dot + 1;
		int mpos = (int)(m - text), mlen = len - nlen - 1;
		char mod[32];

		if (mlen <= 0 || mlen >= (int)sizeof(mod))
			return fail(err, mpos - 1, mlen + 1, "Invalid field modifier");
		memcpy(mod, m, (size_t)mlen);
		mod[mlen] = '\0';
		if (!strcmp(mod, "hex")) {
			f->mod = UP_HIST_MOD_HEX;
		} else if (!is_val && !strcmp(mod, "sym")) {
			f->mod = UP_HIST_MOD_SYM;
		} else if (!is_val && !strcmp(mod, "sym-offset")) {
			f->mod = UP_HIST_MOD_SYM_OFFSET;
		} else if (!is_val && !strcmp(mod, "log2")) {
			f->mod = UP_HIST_MOD_LOG2;
		} else if (!is_val && !strncmp(mod, "buckets=", 8)) {
			char *end;
			unsigned long long n = strtoull(mod + 8, &end, 0);

			if (!mod[8] || *end || !n || mod[8] == '-')
				return fail(err, mpos + 8, mlen - 8, "Invalid bucket size");
			f->mod = UP_HIST_MOD_BUCKETS;
			f->buckets = n;
		} else if (is_val && !strcmp(mod, "min")) {
			f->op = UP_HIST_OP_MIN;
		} else if (is_val && !strcmp(mod, "max")) {
			f->op = UP_HIST_OP_MAX;
		} else if (is_val && !strcmp(mod, "avg")) {
			f->op = UP_HIST_OP_AVG;
		} else {
			return fail(err, mpos, mlen, "Invalid field modifier");
		}
	}
	if (f->src == UP_HIST_SRC_HITCOUNT && (f->mod || f->op))
		return fail(err, pos, len, "hitcount takes no modifier");
	if (f->src == UP_HIST_SRC_STACK && f->mod)
		return fail(err, pos, len, "A stacktrace takes no modifier");
	return 0;
}

/* The fields of "a,b.log2,c" at text[pos, pos + len), into v (at most max). */
static int parse_list(const char *text, int pos, int len, bool is_val, struct up_hist_field *v,
		      unsigned max, unsigned *n, const char *too_many, struct up_spec_err *err)
{
	int at = pos, end = pos + len;

	*n = 0;
	if (!len)
		return fail(err, pos, 1, is_val ? "No values given" : "No keys given");
	while (at <= end) {
		const char *comma = memchr(text + at, ',', (size_t)(end - at));
		int flen = comma ? (int)(comma - (text + at)) : end - at, rc;

		if (*n == max)
			return fail(err, at, flen, too_many);
		rc = parse_field(text, at, flen, is_val, &v[*n], err);
		if (rc)
			return rc;
		for (unsigned i = 0; i < *n; i++)
			if (!strcmp(v[i].name, v[*n].name) && v[i].mod == v[*n].mod &&
			    v[i].op == v[*n].op)
				return fail(err, at, flen, "Duplicate field");
		(*n)++;
		at += flen + 1;
	}
	return 0;
}

static int parse_sort(struct up_hist *h, const char *text, int pos, int len,
		      struct up_spec_err *err)
{
	int at = pos, end = pos + len;

	h->nsort = 0;
	if (!len)
		return fail(err, pos, 1, "Missing sort field");
	while (at <= end) {
		const char *comma = memchr(text + at, ',', (size_t)(end - at));
		int flen = comma ? (int)(comma - (text + at)) : end - at;
		const char *s = text + at, *dot = memchr(s, '.', (size_t)flen);
		int nlen = dot ? (int)(dot - s) : flen;
		struct up_hist_sort *o;
		char name[UP_SPEC_ARG_NAME_MAX + 2];
		bool found = false;

		if (h->nsort == 2)
			return fail(err, at, flen, "Too many sort fields (Max = 2)");
		o = &h->sort[h->nsort];
		memset(o, 0, sizeof(*o));
		if (!nlen || nlen >= (int)sizeof(name))
			return fail(err, at, flen ? flen : 1, "Invalid sort field");
		memcpy(name, s, (size_t)nlen);
		name[nlen] = '\0';
		if (dot) {
			int mlen = flen - nlen - 1;

			if (mlen == 10 && !strncmp(dot + 1, "descending", 10))
				o->descending = true;
			else if (!(mlen == 9 && !strncmp(dot + 1, "ascending", 9)))
				return fail(err, (int)(dot + 1 - text), mlen, "Invalid sort modifier");
		}
		if (!strcmp(name, "hitcount")) {
			o->src = UP_HIST_SRC_HITCOUNT;
			found = true;
		}
		for (unsigned i = 0; i < h->nkeys && !found; i++) {
			if (!strcmp(h->key[i].name, name)) {
				o->src = h->key[i].src;
				o->field = i;
				found = true;
			}
		}
		for (unsigned i = 0; i < h->nvals && !found; i++) {
			if (!strcmp(h->val[i].name, name) && h->val[i].src != UP_HIST_SRC_HITCOUNT) {
				o->src = h->val[i].src;
				o->is_val = true;
				o->field = i;
				found = true;
			}
		}
		if (!found)
			return fail(err, at, nlen, "Couldn't find sort field");
		h->nsort++;
		at += flen + 1;
	}
	return 0;
}

int up_hist_parse(const char *text, bool with_event, struct up_hist *h, struct up_spec_err *err)
{
	int len = (int)strlen(text), at = 0, end;
	const char *iff;
	bool have_keys = false, have_sort = false;
	int rc, sort_pos = 0, sort_len = 0;

	memset(h, 0, sizeof(*h));
	h->size = UP_HIST_SIZE_DEFAULT;
	while (at < len && isspace((unsigned char)text[at]))
		at++;
	while (len > at && isspace((unsigned char)text[len - 1]))
		len--;
	if (with_event) {
		const char *colon = memchr(text + at, ':', (size_t)(len - at));
		const char *slash;
		int elen;

		if (!colon)
			return fail(err, at, len - at, "Expected [GRP/]EVENT:hist:...");
		elen = (int)(colon - (text + at));
		slash = memchr(text + at, '/', (size_t)elen);
		if (slash) {
			int glen = (int)(slash - (text + at));

			if (!glen || glen > UP_SPEC_NAME_MAX)
				return fail(err, at, glen ? glen : 1, "Invalid group name");
			memcpy(h->group, text + at, (size_t)glen);
			at += glen + 1;
			elen -= glen + 1;
		}
		if (!elen || elen > UP_SPEC_NAME_MAX)
			return fail(err, at, elen ? elen : 1, "Invalid event name");
		for (int i = 0; i < elen; i++)
			if (!isalnum((unsigned char)text[at + i]) && text[at + i] != '_')
				return fail(err, at + i, 1, "Invalid character in event name");
		memcpy(h->event, text + at, (size_t)elen);
		at += elen + 1;
	}
	if (len - at < 4 || strncmp(text + at, "hist", 4) ||
	    (len - at > 4 && text[at + 4] != ':' && !isspace((unsigned char)text[at + 4])))
		return fail(err, at, 4, "Only hist triggers are supported ('hist:keys=...')");
	at += 4;
	/* " if FILTER" ends it */
	end = len;
	iff = strstr(text + at, " if ");
	if (iff && iff < text + len) {
		const char *f = iff + 4;
		int flen = (int)(text + len - f);

		while (flen > 0 && isspace((unsigned char)*f))
			f++, flen--;
		if (flen <= 0)
			return fail(err, (int)(iff - text) + 1, 2, "Missing filter after 'if'");
		h->filter = strndup(f, (size_t)flen);
		if (!h->filter)
			return -ENOMEM;
		end = (int)(iff - text);
	}
	while (at < end) {
		const char *colon;
		int plen, vpos;

		if (text[at] != ':') {
			rc = fail(err, at, 1, "Expected ':' before a trigger parameter");
			goto out;
		}
		at++;
		colon = memchr(text + at, ':', (size_t)(end - at));
		plen = colon ? (int)(colon - (text + at)) : end - at;
		if (!strncmp(text + at, "keys=", 5) || !strncmp(text + at, "key=", 4)) {
			vpos = at + (text[at + 3] == 's' ? 5 : 4);
			rc = parse_list(text, vpos, at + plen - vpos, false, h->key, UP_HIST_KEYS_MAX,
					&h->nkeys, "Too many keys (Max = 3)", err);
			have_keys = true;
		} else if (!strncmp(text + at, "vals=", 5) || !strncmp(text + at, "values=", 7)) {
			vpos = at + (text[at + 3] == 's' ? 5 : 7);
			rc = parse_list(text, vpos, at + plen - vpos, true, h->val, UP_HIST_VALS_MAX,
					&h->nvals, "Too many values (Max = 6)", err);
		} else if (!strncmp(text + at, "sort=", 5)) {
			rc = 0;
			have_sort = true; /* after the keys and vals: it names them */
			sort_pos = at + 5;
			sort_len = plen - 5;
		} else if (!strncmp(text + at, "size=", 5)) {
			char num[24], *e;
			unsigned long long n;

			vpos = at + 5;
			rc = 0;
			if (plen - 5 <= 0 || plen - 5 >= (int)sizeof(num)) {
				rc = fail(err, vpos, plen - 5, "Invalid size");
			} else {
				memcpy(num, text + vpos, (size_t)(plen - 5));
				num[plen - 5] = '\0';
				n = strtoull(num, &e, 0);
				if (*e || !n || n > UP_HIST_SIZE_MAX || num[0] == '-') {
					rc = fail(err, vpos, plen - 5, "Invalid size (1 to 131072)");
				} else {
					h->size = 1;
					while (h->size < n)
						h->size <<= 1;
				}
			}
		} else if (!strncmp(text + at, "name=", 5)) {
			rc = 0;
			if (plen - 5 <= 0 || plen - 5 > UP_SPEC_NAME_MAX)
				rc = fail(err, at + 5, plen - 5, "Invalid name");
			else
				memcpy(h->name, text + at + 5, (size_t)(plen - 5));
		} else {
			rc = fail(err, at, plen, "Unknown trigger parameter (keys= vals= sort= size= "
						 "name=)");
		}
		if (rc)
			goto out;
		at += plen;
	}
	if (!have_keys) {
		rc = fail(err, end, 1, "No keys given: hist:keys=FIELD[,FIELD...]");
		goto out;
	}
	for (unsigned i = 0; i < h->nkeys; i++) {
		if (h->key[i].src == UP_HIST_SRC_HITCOUNT) {
			rc = fail(err, h->key[i].pos, h->key[i].len, "hitcount is not a key");
			goto out;
		}
	}
	for (unsigned i = 0; i < h->nvals; i++) {
		if (h->val[i].src == UP_HIST_SRC_STACK || h->val[i].src == UP_HIST_SRC_PID) {
			rc = fail(err, h->val[i].pos, h->val[i].len, "Not a value: a key only");
			goto out;
		}
	}
	if (have_sort) {
		rc = parse_sort(h, text, sort_pos, sort_len, err);
		if (rc)
			goto out;
	} else {
		h->nsort = 1;
		h->sort[0].src = UP_HIST_SRC_HITCOUNT;
	}
	return 0;
out:
	free(h->filter);
	h->filter = NULL;
	return rc;
}

int up_hist_resolve(struct up_hist *h, const struct up_spec *spec, struct up_spec_err *err)
{
	struct up_hist_field *all[UP_HIST_KEYS_MAX + UP_HIST_VALS_MAX];
	unsigned n = 0;

	for (unsigned i = 0; i < h->nkeys; i++)
		all[n++] = &h->key[i];
	for (unsigned i = 0; i < h->nvals; i++)
		all[n++] = &h->val[i];
	for (unsigned i = 0; i < n; i++) {
		struct up_hist_field *f = all[i];
		bool is_val = i >= h->nkeys;

		if (f->src == UP_HIST_SRC_DURATION && !spec->is_return)
			return fail(err, f->pos, f->len,
				    "$duration is a return probe's (an r: event)");
		if (f->src != UP_HIST_SRC_ARG)
			continue;
		f->arg = -1;
		for (int a = 0; a < spec->nargs; a++)
			if (!strcmp(spec->args[a].name, f->name))
				f->arg = a;
		if (f->arg < 0)
			return fail(err, f->pos, (int)strlen(f->name), "Couldn't find field");
		f->is_string = spec->args[f->arg].type.kind == UP_TYPE_STRING;
		f->is_signed = spec->args[f->arg].type.kind == UP_TYPE_S;
		if (f->is_string && is_val)
			return fail(err, f->pos, f->len, "A string cannot be a value");
		if (f->is_string && f->mod != UP_HIST_MOD_NONE)
			return fail(err, f->pos, f->len, "Invalid modifier for a string field");
	}
	h->base = up_hist_table_new(h);
	return h->base ? 0 : -ENOMEM;
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
	if (f->mod == UP_HIST_MOD_BUCKETS)
		return upa_agg_bucket(v, f->buckets);
	return v;
}

/* ---- tables ------------------------------------------------------------------------------- */

struct entry {
	uint64_t num[UP_HIST_KEYS_MAX];
	char *str[UP_HIST_KEYS_MAX];
	uint64_t hash;
	uint64_t hits;
	uint64_t val[UP_HIST_VALS_MAX];
};

struct up_hist_table {
	const struct up_hist *h;
	struct entry *e;
	unsigned n, cap;
	uint32_t *slot; /* open addressing: entry index + 1, 0 free */
	unsigned nslot;
	uint64_t dropped;
};

/* A field whose key is its string (a string, a stack); .sym keys are their number. */
static bool key_is_str(const struct up_hist_field *f)
{
	return f->src == UP_HIST_SRC_STACK || (f->src == UP_HIST_SRC_ARG && f->is_string);
}

static uint64_t key_hash(const struct up_hist *h, const struct up_hist_key *k)
{
	uint64_t x = 0xcbf29ce484222325ull;

	for (unsigned i = 0; i < h->nkeys; i++) {
		if (key_is_str(&h->key[i])) {
			for (const char *s = k->str[i] ? k->str[i] : ""; *s; s++)
				x = (x ^ (uint8_t)*s) * 0x100000001b3ull;
			x = (x ^ 0xff) * 0x100000001b3ull;
		} else {
			x = (x ^ k->num[i]) * 0x100000001b3ull;
			x ^= x >> 29;
		}
	}
	return x;
}

static bool key_eq(const struct up_hist *h, const struct entry *e, const struct up_hist_key *k)
{
	for (unsigned i = 0; i < h->nkeys; i++) {
		if (key_is_str(&h->key[i])) {
			if (strcmp(e->str[i] ? e->str[i] : "", k->str[i] ? k->str[i] : ""))
				return false;
		} else if (e->num[i] != k->num[i]) {
			return false;
		}
	}
	return true;
}

struct up_hist_table *up_hist_table_new(const struct up_hist *h)
{
	struct up_hist_table *t = calloc(1, sizeof(*t));

	if (t)
		t->h = h;
	return t;
}

void up_hist_table_free(struct up_hist_table *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->n; i++)
		for (unsigned k = 0; k < UP_HIST_KEYS_MAX; k++)
			free(t->e[i].str[k]);
	free(t->e);
	free(t->slot);
	free(t);
}

static int grow_slots(struct up_hist_table *t)
{
	unsigned n = t->nslot ? t->nslot * 2 : 64;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	free(t->slot);
	t->slot = s;
	t->nslot = n;
	for (unsigned i = 0; i < t->n; i++) {
		unsigned j = (unsigned)t->e[i].hash & (n - 1);

		while (t->slot[j])
			j = (j + 1) & (n - 1);
		t->slot[j] = i + 1;
	}
	return 0;
}

static void combine(const struct up_hist *h, struct entry *e, uint64_t hits, const uint64_t *vals,
		    bool first)
{
	for (unsigned i = 0; i < h->nvals; i++) {
		const struct up_hist_field *f = &h->val[i];
		uint64_t v = vals ? vals[i] : 0;
		bool s = f->is_signed;

		if (f->src == UP_HIST_SRC_HITCOUNT)
			continue;
		if (f->op == UP_HIST_OP_MIN) {
			if (first || (s ? (int64_t)v < (int64_t)e->val[i] : v < e->val[i]))
				e->val[i] = v;
		} else if (f->op == UP_HIST_OP_MAX) {
			if (first || (s ? (int64_t)v > (int64_t)e->val[i] : v > e->val[i]))
				e->val[i] = v;
		} else {
			e->val[i] += v;
		}
	}
	e->hits += hits;
}

int up_hist_table_add(struct up_hist_table *t, const struct up_hist_key *k, uint64_t hits,
		      const uint64_t *vals)
{
	const struct up_hist *h = t->h;
	uint64_t hash = key_hash(h, k);
	struct entry *e;
	unsigned j;

	if (!hits)
		return 0;
	if ((t->n + 1) * 2 > t->nslot && grow_slots(t))
		return -ENOMEM;
	for (j = (unsigned)hash & (t->nslot - 1); t->slot[j]; j = (j + 1) & (t->nslot - 1)) {
		e = &t->e[t->slot[j] - 1];
		if (e->hash == hash && key_eq(h, e, k)) {
			combine(h, e, hits, vals, false);
			return 0;
		}
	}
	if (t->n >= h->size) {
		t->dropped += hits;
		return 0;
	}
	if (t->n == t->cap) {
		unsigned cap = t->cap ? t->cap * 2 : 32;
		struct entry *ne = realloc(t->e, cap * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		t->e = ne;
		t->cap = cap;
	}
	e = &t->e[t->n];
	memset(e, 0, sizeof(*e));
	e->hash = hash;
	for (unsigned i = 0; i < h->nkeys; i++) {
		e->num[i] = k->num[i];
		if (k->str[i]) {
			e->str[i] = strdup(k->str[i]);
			if (!e->str[i]) {
				for (unsigned q = 0; q < i; q++)
					free(e->str[q]);
				return -ENOMEM;
			}
		}
	}
	combine(h, e, hits, vals, true);
	t->slot[j] = ++t->n;
	return 0;
}

void up_hist_table_drop(struct up_hist_table *t, uint64_t n)
{
	t->dropped += n;
}

int up_hist_table_merge(struct up_hist_table *dst, const struct up_hist_table *src)
{
	for (unsigned i = 0; i < src->n; i++) {
		const struct entry *e = &src->e[i];
		struct up_hist_key k;
		int rc;

		memcpy(k.num, e->num, sizeof(k.num));
		for (unsigned q = 0; q < UP_HIST_KEYS_MAX; q++)
			k.str[q] = e->str[q];
		rc = up_hist_table_add(dst, &k, e->hits, e->val);
		if (rc)
			return rc;
	}
	dst->dropped += src->dropped;
	return 0;
}

struct up_hist_table *up_hist_table_clone(const struct up_hist_table *t)
{
	struct up_hist_table *c = up_hist_table_new(t->h);

	if (c && up_hist_table_merge(c, t)) {
		up_hist_table_free(c);
		return NULL;
	}
	return c;
}

uint64_t up_hist_table_hits(const struct up_hist_table *t)
{
	uint64_t n = t->dropped;

	for (unsigned i = 0; i < t->n; i++)
		n += t->e[i].hits;
	return n;
}

unsigned up_hist_table_entries(const struct up_hist_table *t)
{
	return t->n;
}

/* ---- printing ------------------------------------------------------------------------------ */

static void field_text(struct up_spec_buf *b, const struct up_hist_field *f, bool is_val)
{
	up_spec_buf_printf(b, "%s", f->name);
	switch (f->mod) {
	case UP_HIST_MOD_HEX: up_spec_buf_printf(b, ".hex"); break;
	case UP_HIST_MOD_SYM: up_spec_buf_printf(b, ".sym"); break;
	case UP_HIST_MOD_SYM_OFFSET: up_spec_buf_printf(b, ".sym-offset"); break;
	case UP_HIST_MOD_LOG2: up_spec_buf_printf(b, ".log2"); break;
	case UP_HIST_MOD_BUCKETS: up_spec_buf_printf(b, ".buckets=%" PRIu64, f->buckets); break;
	case UP_HIST_MOD_NONE: break;
	}
	if (is_val && f->op != UP_HIST_OP_SUM)
		up_spec_buf_printf(b, "%s", f->op == UP_HIST_OP_MIN   ? ".min"
					    : f->op == UP_HIST_OP_MAX ? ".max"
								      : ".avg");
}

int up_hist_trigger_info(const struct up_hist *h, char *buf, size_t size)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	up_spec_buf_printf(&b, "hist:");
	if (h->name[0])
		up_spec_buf_printf(&b, "%s:", h->name);
	up_spec_buf_printf(&b, "keys=");
	for (unsigned i = 0; i < h->nkeys; i++) {
		if (i)
			up_spec_buf_putc(&b, ',');
		field_text(&b, &h->key[i], false);
	}
	up_spec_buf_printf(&b, ":vals=hitcount");
	for (unsigned i = 0; i < h->nvals; i++) {
		if (h->val[i].src == UP_HIST_SRC_HITCOUNT)
			continue;
		up_spec_buf_putc(&b, ',');
		field_text(&b, &h->val[i], true);
	}
	up_spec_buf_printf(&b, ":sort=");
	for (unsigned i = 0; i < h->nsort; i++) {
		const struct up_hist_sort *s = &h->sort[i];

		if (i)
			up_spec_buf_putc(&b, ',');
		if (s->src == UP_HIST_SRC_HITCOUNT)
			up_spec_buf_printf(&b, "hitcount");
		else
			up_spec_buf_printf(&b, "%s", s->is_val ? h->val[s->field].name
							       : h->key[s->field].name);
		if (s->descending)
			up_spec_buf_printf(&b, ".descending");
	}
	up_spec_buf_printf(&b, ":size=%u", h->size);
	if (h->filter)
		up_spec_buf_printf(&b, " if %s", h->filter);
	up_spec_buf_printf(&b, " [active]");
	return up_spec_buf_result(&b);
}

/* A val as printed: an average is the sum over the hits. */
static uint64_t val_of(const struct up_hist *h, const struct entry *e, unsigned i)
{
	if (h->val[i].op == UP_HIST_OP_AVG)
		return e->hits ? e->val[i] / e->hits : 0;
	return e->val[i];
}

static int cmp_u(uint64_t a, uint64_t b, bool is_signed)
{
	if (is_signed)
		return (int64_t)a < (int64_t)b ? -1 : (int64_t)a > (int64_t)b;
	return a < b ? -1 : a > b;
}

static const struct up_hist *sort_h; /* qsort has no argument */

static int cmp_entry(const void *pa, const void *pb)
{
	const struct entry *a = *(const struct entry *const *)pa, *b = *(const struct entry *const *)pb;
	const struct up_hist *h = sort_h;
	int c = 0;

	for (unsigned i = 0; i < h->nsort && !c; i++) {
		const struct up_hist_sort *s = &h->sort[i];

		if (s->src == UP_HIST_SRC_HITCOUNT)
			c = cmp_u(a->hits, b->hits, false);
		else if (s->is_val)
			c = cmp_u(val_of(h, a, s->field), val_of(h, b, s->field),
				  h->val[s->field].is_signed);
		else if (key_is_str(&h->key[s->field]))
			c = strcmp(a->str[s->field] ? a->str[s->field] : "",
				   b->str[s->field] ? b->str[s->field] : "");
		else
			c = cmp_u(a->num[s->field], b->num[s->field], h->key[s->field].is_signed);
		if (s->descending)
			c = -c;
	}
	/* ties: by the key, for an order that does not depend on the hash */
	for (unsigned i = 0; i < h->nkeys && !c; i++) {
		if (key_is_str(&h->key[i]))
			c = strcmp(a->str[i] ? a->str[i] : "", b->str[i] ? b->str[i] : "");
		else
			c = cmp_u(a->num[i], b->num[i], false);
	}
	return c;
}

static const struct entry **sorted(const struct up_hist *h, const struct up_hist_table *t)
{
	const struct entry **v = malloc((t->n ? t->n : 1) * sizeof(*v));

	if (!v)
		return NULL;
	for (unsigned i = 0; i < t->n; i++)
		v[i] = &t->e[i];
	sort_h = h;
	qsort(v, t->n, sizeof(*v), cmp_entry);
	return v;
}

static void print_text_entry(const struct up_hist *h, const struct entry *e, FILE *out)
{
	bool multiline = false;

	fputs("{ ", out);
	for (unsigned i = 0; i < h->nkeys; i++) {
		const struct up_hist_field *f = &h->key[i];
		const char *str = e->str[i] ? e->str[i] : "";

		if (i)
			fputs(", ", out);
		if (f->src == UP_HIST_SRC_STACK) {
			const char *p = str;

			fprintf(out, "%s:\n", f->name);
			while (*p) {
				size_t n = strcspn(p, "\n");

				fprintf(out, "         %.*s\n", (int)n, p);
				p += n + (p[n] == '\n');
			}
			multiline = true;
			continue;
		}
		if (f->src == UP_HIST_SRC_ARG && f->is_string) {
			fprintf(out, "%s: %-50s", f->name, str);
			continue;
		}
		switch (f->mod) {
		case UP_HIST_MOD_HEX:
			fprintf(out, "%s: %" PRIx64, f->name, e->num[i]);
			break;
		case UP_HIST_MOD_SYM:
			if (e->str[i])
				fprintf(out, "%s: [%" PRIx64 "] %-45s", f->name, e->num[i], str);
			else
				fprintf(out, "%s: [%" PRIx64 "] %-45" PRIx64, f->name, e->num[i],
					e->num[i]);
			break;
		case UP_HIST_MOD_SYM_OFFSET:
			if (e->str[i])
				fprintf(out, "%s: [%" PRIx64 "] %-55s", f->name, e->num[i], str);
			else
				fprintf(out, "%s: [%" PRIx64 "] %-55" PRIx64, f->name, e->num[i],
					e->num[i]);
			break;
		case UP_HIST_MOD_LOG2:
			fprintf(out, "%s: ~ 2^%-2" PRIu64, f->name, e->num[i]);
			break;
		case UP_HIST_MOD_BUCKETS:
			fprintf(out, "%s: ~ %" PRIu64 "-%" PRIu64, f->name, e->num[i],
				e->num[i] + f->buckets - 1);
			break;
		case UP_HIST_MOD_NONE:
			if (f->is_signed)
				fprintf(out, "%s: %10" PRId64, f->name, (int64_t)e->num[i]);
			else
				fprintf(out, "%s: %10" PRIu64, f->name, e->num[i]);
			break;
		}
	}
	if (!multiline)
		fputc(' ', out);
	fprintf(out, "} hitcount: %10" PRIu64, e->hits);
	for (unsigned i = 0; i < h->nvals; i++) {
		const struct up_hist_field *f = &h->val[i];
		char name[UP_SPEC_ARG_NAME_MAX + 16];
		struct up_spec_buf b = { name, sizeof(name), 0 };
		uint64_t v = val_of(h, e, i);

		if (f->src == UP_HIST_SRC_HITCOUNT)
			continue;
		field_text(&b, f, true);
		if (f->mod == UP_HIST_MOD_HEX)
			fprintf(out, "  %s: %10" PRIx64, name, v);
		else if (f->is_signed)
			fprintf(out, "  %s: %10" PRId64, name, (int64_t)v);
		else
			fprintf(out, "  %s: %10" PRIu64, name, v);
	}
	fputc('\n', out);
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

/*
 * JSON: {"event": "GRP/EVENT", "trigger": "hist:...", "entries": [{"key": {FIELD: V,
 * ...}, "hitcount": N, "vals": {FIELD: V, ...}}, ...], "totals": {"hits": N, "entries":
 * N, "dropped": N}}, entries in the text's order.  FIELD is the field as the trigger
 * info writes it ("size.log2": the exponent; "size.buckets=10": the bucket's low end);
 * numbers are numbers (s-types signed), strings strings, a .sym key "[addr] name", a
 * stack an array of frames.
 */
static void print_json(const struct up_hist *h, const struct up_hist_table *t,
		       const struct entry **v, FILE *out)
{
	char info[512];

	up_hist_trigger_info(h, info, sizeof(info));
	fputs("{\"event\":", out);
	{
		char ev[2 * UP_SPEC_NAME_MAX + 2];

		snprintf(ev, sizeof(ev), "%s%s%s", h->group, h->group[0] ? "/" : "", h->event);
		json_str(out, ev);
	}
	fputs(",\"trigger\":", out);
	json_str(out, info);
	fputs(",\"entries\":[", out);
	for (unsigned n = 0; n < t->n; n++) {
		const struct entry *e = v[n];

		fprintf(out, "%s{\"key\":{", n ? "," : "");
		for (unsigned i = 0; i < h->nkeys; i++) {
			const struct up_hist_field *f = &h->key[i];
			char name[UP_SPEC_ARG_NAME_MAX + 32];
			struct up_spec_buf b = { name, sizeof(name), 0 };

			field_text(&b, f, false);
			fputs(i ? "," : "", out);
			json_str(out, name);
			fputc(':', out);
			if (f->src == UP_HIST_SRC_STACK) {
				const char *p = e->str[i] ? e->str[i] : "";
				bool first = true;

				fputc('[', out);
				while (*p) {
					size_t k = strcspn(p, "\n");
					char frame[1024];

					snprintf(frame, sizeof(frame), "%.*s", (int)k, p);
					fputs(first ? "" : ",", out);
					json_str(out, frame);
					first = false;
					p += k + (p[k] == '\n');
				}
				fputc(']', out);
			} else if (f->src == UP_HIST_SRC_ARG && f->is_string) {
				json_str(out, e->str[i] ? e->str[i] : "");
			} else if ((f->mod == UP_HIST_MOD_SYM || f->mod == UP_HIST_MOD_SYM_OFFSET) &&
				   e->str[i]) {
				char s[1024];

				snprintf(s, sizeof(s), "[%" PRIx64 "] %s", e->num[i], e->str[i]);
				json_str(out, s);
			} else if (f->is_signed && f->mod == UP_HIST_MOD_NONE) {
				fprintf(out, "%" PRId64, (int64_t)e->num[i]);
			} else {
				fprintf(out, "%" PRIu64, e->num[i]);
			}
		}
		fprintf(out, "},\"hitcount\":%" PRIu64 ",\"vals\":{", e->hits);
		for (unsigned i = 0, k = 0; i < h->nvals; i++) {
			const struct up_hist_field *f = &h->val[i];
			char name[UP_SPEC_ARG_NAME_MAX + 32];
			struct up_spec_buf b = { name, sizeof(name), 0 };
			uint64_t x = val_of(h, e, i);

			if (f->src == UP_HIST_SRC_HITCOUNT)
				continue;
			field_text(&b, f, true);
			fputs(k++ ? "," : "", out);
			json_str(out, name);
			if (f->is_signed)
				fprintf(out, ":%" PRId64, (int64_t)x);
			else
				fprintf(out, ":%" PRIu64, x);
		}
		fputs("}}", out);
	}
	fprintf(out, "],\"totals\":{\"hits\":%" PRIu64 ",\"entries\":%u,\"dropped\":%" PRIu64 "}}\n",
		up_hist_table_hits(t), t->n, t->dropped);
}

/* bpftrace's numbers in a histogram label: 1024 -> 1K, 1048576 -> 1M ... */
static const char *suffixed(uint64_t v, char *buf, size_t size)
{
	static const char sfx[] = "KMGTPE";
	int k = -1;

	while (v >= 1024 && v % 1024 == 0 && k < 5) {
		v /= 1024;
		k++;
	}
	if (k < 0)
		snprintf(buf, size, "%" PRIu64, v);
	else
		snprintf(buf, size, "%" PRIu64 "%c", v, sfx[k]);
	return buf;
}

static void bar_row(FILE *out, const char *label, uint64_t count, uint64_t max)
{
	unsigned n = max ? (unsigned)(count * 52 / max) : 0;

	fprintf(out, "%-20s %8" PRIu64 " |", label, count);
	for (unsigned i = 0; i < 52; i++)
		fputc(i < n ? '@' : ' ', out);
	fputs("|\n", out);
}

static void print_bars(const struct up_hist *h, const struct up_hist_table *t,
		       const struct entry **v, FILE *out)
{
	const struct up_hist_field *k0 = &h->key[0];
	const char *name = h->name[0] ? h->name : h->event;

	fprintf(out, "@%s:\n", name);
	if (h->nkeys == 1 && (k0->mod == UP_HIST_MOD_LOG2 || k0->mod == UP_HIST_MOD_BUCKETS) &&
	    t->n) {
		uint64_t lo = UINT64_MAX, hi = 0, max = 0;

		for (unsigned i = 0; i < t->n; i++) {
			lo = t->e[i].num[0] < lo ? t->e[i].num[0] : lo;
			hi = t->e[i].num[0] > hi ? t->e[i].num[0] : hi;
			max = t->e[i].hits > max ? t->e[i].hits : max;
		}
		for (uint64_t key = lo;; key += k0->mod == UP_HIST_MOD_LOG2 ? 1 : k0->buckets) {
			uint64_t count = 0;
			char label[64], a[24], b[24];

			for (unsigned i = 0; i < t->n; i++)
				if (t->e[i].num[0] == key)
					count = t->e[i].hits;
			if (k0->mod == UP_HIST_MOD_BUCKETS)
				snprintf(label, sizeof(label), "[%s, %s)", suffixed(key, a, sizeof(a)),
					 suffixed(key + k0->buckets, b, sizeof(b)));
			else if (key == 0)
				snprintf(label, sizeof(label), "[0, 1]");
			else
				snprintf(label, sizeof(label), "(%s, %s]",
					 suffixed(1ull << (key - 1), a, sizeof(a)),
					 suffixed(key >= 64 ? UINT64_MAX : 1ull << key, b, sizeof(b)));
			bar_row(out, label, count, max);
			if (key >= hi || (k0->mod == UP_HIST_MOD_BUCKETS && key > UINT64_MAX - k0->buckets))
				break;
		}
	} else {
		/* bpftrace prints a map sorted by count, ascending */
		for (unsigned n = 0; n < t->n; n++) {
			const struct entry *e = v[n];
			bool stack = false;

			fputc('@', out);
			fputc('[', out);
			for (unsigned i = 0; i < h->nkeys; i++) {
				const struct up_hist_field *f = &h->key[i];

				fputs(i ? ", " : "", out);
				if (f->src == UP_HIST_SRC_STACK) {
					const char *p = e->str[i] ? e->str[i] : "";

					fputc('\n', out);
					while (*p) {
						size_t k = strcspn(p, "\n");

						fprintf(out, "        %.*s\n", (int)k, p);
						p += k + (p[k] == '\n');
					}
					stack = true;
				} else if (e->str[i]) {
					fputs(e->str[i], out);
				} else if (f->mod == UP_HIST_MOD_HEX) {
					fprintf(out, "0x%" PRIx64, e->num[i]);
				} else if (f->is_signed) {
					fprintf(out, "%" PRId64, (int64_t)e->num[i]);
				} else {
					fprintf(out, "%" PRIu64, e->num[i]);
				}
			}
			(void)stack;
			fprintf(out, "]: %" PRIu64 "\n", e->hits);
		}
	}
	if (t->dropped)
		fprintf(out, "@%s dropped (the table was full): %" PRIu64 "\n", name, t->dropped);
	fputc('\n', out);
}

int up_hist_print(const struct up_hist *h, const struct up_hist_table *t,
		  enum up_hist_style style, FILE *out)
{
	const struct entry **v = sorted(h, t);
	char info[512];

	if (!v)
		return -ENOMEM;
	if (style == UP_HIST_JSON) {
		print_json(h, t, v, out);
	} else if (style == UP_HIST_BARS) {
		print_bars(h, t, v, out);
	} else {
		up_hist_trigger_info(h, info, sizeof(info));
		fprintf(out, "# event histogram\n#\n# trigger info: %s\n#\n\n", info);
		for (unsigned i = 0; i < t->n; i++)
			print_text_entry(h, v[i], out);
		fprintf(out, "\nTotals:\n    Hits: %" PRIu64 "\n    Entries: %u\n    Dropped: %" PRIu64
			     "\n",
			up_hist_table_hits(t), t->n, t->dropped);
	}
	free(v);
	return ferror(out) ? -EIO : 0;
}
