// SPDX-License-Identifier: MIT
/*
 * bpftrace's maps in the tracer: a hash table per map, of keys (one or more values) and
 * what the map holds (an integer, a string, or an aggregation: count, sum, avg, min,
 * max, stats, a log2 or a linear histogram), and their printing as bpftrace prints
 * them -- the order (integers and counts by value, histograms by their total, stats
 * and averages by the average; ties in the order of the keys' bytes, as bpftrace's
 * std::map and its stable small sorts leave them), the '@' bars, the blank lines.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctype.h>

#include "bt/bt.h"
#include "trace/prom.h"

struct bt_entry {
	struct bt_entry *next;
	uint64_t hash;
	unsigned n;
	struct bt_val key[BT_MAX_KEYS]; /* strings owned */
	int64_t v;			/* INT, COUNT, SUM, MIN, MAX */
	bool has;			/* MIN, MAX: a value came */
	char *s;			/* STR */
	int64_t count, total;		/* AVG, STATS */
	uint64_t *b;			/* HIST (65), LHIST */
	unsigned nb;
};

struct bt_table {
	struct bt_entry **b;
	size_t nb, n;
	size_t max;	  /* keys it takes (bpftrace's BPFTRACE_MAP_KEYS_MAX, 4096) */
	uint64_t dropped; /* new keys refused: it was full */
};

struct bt_table *bt_table_new(void)
{
	struct bt_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->nb = 64;
	t->max = 4096;
	{
		/* as bpftrace: a map holds BPFTRACE_MAP_KEYS_MAX keys, and a process that
		   makes more cannot grow the tracer without bound */
		const char *e = getenv("BPFTRACE_MAP_KEYS_MAX");
		char *end;
		unsigned long long v = e ? strtoull(e, &end, 10) : 0;

		if (e && !*end && v > 0 && v <= (1ull << 26))
			t->max = (size_t)v;
	}
	t->b = calloc(t->nb, sizeof(*t->b));
	if (!t->b) {
		free(t);
		return NULL;
	}
	return t;
}

static void entry_free(struct bt_entry *e)
{
	for (unsigned i = 0; i < e->n; i++)
		if (e->key[i].t != BT_T_INT)
			free((char *)e->key[i].s);
	free(e->s);
	free(e->b);
	free(e);
}

void bt_table_clear(struct bt_map *m)
{
	struct bt_table *t = m->t;

	for (size_t i = 0; i < t->nb; i++)
		while (t->b[i]) {
			struct bt_entry *e = t->b[i];

			t->b[i] = e->next;
			entry_free(e);
		}
	t->n = 0;
}

void bt_table_free(struct bt_table *t)
{
	struct bt_map m = { .t = t };

	if (!t)
		return;
	bt_table_clear(&m);
	free(t->b);
	free(t);
}

static uint64_t key_hash(const struct bt_val *k, unsigned n)
{
	uint64_t h = 1469598103934665603ull;

	for (unsigned i = 0; i < n; i++) {
		if (k[i].t == BT_T_INT) {
			h ^= (uint64_t)k[i].i;
			h *= 1099511628211ull;
		} else {
			for (const char *s = k[i].s; *s; s++) {
				h ^= (unsigned char)*s;
				h *= 1099511628211ull;
			}
		}
		h ^= h >> 29;
	}
	return h;
}

static bool key_eq(const struct bt_entry *e, const struct bt_val *k, unsigned n)
{
	if (e->n != n)
		return false;
	for (unsigned i = 0; i < n; i++) {
		if (e->key[i].t != k[i].t)
			return false;
		if (k[i].t == BT_T_INT ? e->key[i].i != k[i].i : strcmp(e->key[i].s, k[i].s))
			return false;
	}
	return true;
}

static void grow(struct bt_table *t)
{
	size_t nb = t->nb * 2;
	struct bt_entry **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < t->nb; i++)
		while (t->b[i]) {
			struct bt_entry *e = t->b[i];

			t->b[i] = e->next;
			e->next = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	free(t->b);
	t->b = b;
	t->nb = nb;
}

struct bt_entry *bt_table_get(struct bt_map *m, const struct bt_val *key, unsigned n, bool make)
{
	struct bt_table *t = m->t;
	uint64_t h = key_hash(key, n);
	struct bt_entry *e;

	for (e = t->b[h & (t->nb - 1)]; e; e = e->next)
		if (e->hash == h && key_eq(e, key, n))
			return e;
	if (!make)
		return NULL;
	if (t->n >= t->max) {
		t->dropped++;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->hash = h;
	e->n = n;
	for (unsigned i = 0; i < n; i++) {
		e->key[i] = key[i];
		if (key[i].t != BT_T_INT) {
			e->key[i].s = strdup(key[i].s);
			if (!e->key[i].s) {
				e->n = i;
				entry_free(e);
				return NULL;
			}
		}
	}
	if (m->kind == BT_M_HIST || m->kind == BT_M_LHIST) {
		e->nb = m->kind == BT_M_HIST ? 65 : (unsigned)((m->lmax - m->lmin) / m->lstep) + 2;
		e->b = calloc(e->nb, sizeof(*e->b));
		if (!e->b) {
			entry_free(e);
			return NULL;
		}
	}
	e->next = t->b[h & (t->nb - 1)];
	t->b[h & (t->nb - 1)] = e;
	if (++t->n > t->nb)
		grow(t);
	return e;
}

uint64_t bt_table_dropped(const struct bt_map *m, size_t *max)
{
	if (max)
		*max = m->t->max;
	return m->t->dropped;
}

void bt_table_delete(struct bt_map *m, const struct bt_val *key, unsigned n)
{
	struct bt_table *t = m->t;
	uint64_t h = key_hash(key, n);

	for (struct bt_entry **pe = &t->b[h & (t->nb - 1)]; *pe; pe = &(*pe)->next)
		if ((*pe)->hash == h && key_eq(*pe, key, n)) {
			struct bt_entry *e = *pe;

			*pe = e->next;
			entry_free(e);
			t->n--;
			return;
		}
}

void bt_table_zero(struct bt_map *m)
{
	struct bt_table *t = m->t;

	for (size_t i = 0; i < t->nb; i++)
		for (struct bt_entry *e = t->b[i]; e; e = e->next) {
			e->v = e->count = e->total = 0;
			e->has = false;
			if (e->b)
				memset(e->b, 0, e->nb * sizeof(*e->b));
		}
}

/* An integer as a map's value keeps: the width and sign the program gave it. */
static int64_t narrow(const struct bt_map *m, int64_t v)
{
	switch (m->vbits) {
	case 8: return m->vsign ? (int64_t)(int8_t)v : (int64_t)(uint8_t)v;
	case 16: return m->vsign ? (int64_t)(int16_t)v : (int64_t)(uint16_t)v;
	case 32: return m->vsign ? (int64_t)(int32_t)v : (int64_t)(uint32_t)v;
	default: return v;
	}
}

void bt_entry_set(struct bt_map *m, struct bt_entry *e, const struct bt_val *v)
{
	if (m->kind == BT_M_STR) {
		char *s = strdup(v->s ? v->s : "");

		if (s) {
			free(e->s);
			e->s = s;
		}
	} else {
		e->v = narrow(m, v->i);
	}
}

static unsigned log2_bucket(int64_t v)
{
	if (v < 0)
		return 0;
	if (v == 0)
		return 1;
	return 2 + (unsigned)(63 - __builtin_clzll((uint64_t)v));
}

void bt_entry_agg(struct bt_map *m, struct bt_entry *e, int64_t v)
{
	switch (m->kind) {
	case BT_M_COUNT: e->v++; break;
	case BT_M_SUM: e->v += v; break;
	case BT_M_MIN: if (!e->has || v < e->v) e->v = v; e->has = true; break;
	case BT_M_MAX: if (!e->has || v > e->v) e->v = v; e->has = true; break;
	case BT_M_AVG: case BT_M_STATS: e->count++; e->total += v; break;
	case BT_M_HIST: e->b[log2_bucket(v)]++; e->total += v; break;
	case BT_M_LHIST: {
		unsigned i;

		e->total += v; /* not printed: Prometheus's _sum (bt_map_print_prom) */
		if (v < m->lmin)
			i = 0;
		else if (v >= m->lmax)
			i = e->nb - 1;
		else
			i = (unsigned)((v - m->lmin) / m->lstep) + 1;
		e->b[i]++;
		break;
	}
	default: break;
	}
}

void bt_entry_merge(struct bt_map *m, struct bt_entry *e, uint64_t hits, int64_t v)
{
	switch (m->kind) {
	case BT_M_COUNT: e->v += (int64_t)hits; break;
	case BT_M_SUM: e->v += v; break;
	case BT_M_MIN: if (!e->has || v < e->v) e->v = v; e->has = true; break;
	case BT_M_MAX: if (!e->has || v > e->v) e->v = v; e->has = true; break;
	case BT_M_AVG: case BT_M_STATS: e->count += (int64_t)hits; e->total += v; break;
	case BT_M_HIST: case BT_M_LHIST: {
		/* v is one value that came hits times */
		unsigned i = m->kind == BT_M_HIST ? log2_bucket(v) :
			     v < m->lmin ? 0 : v >= m->lmax ? e->nb - 1 :
			     (unsigned)((v - m->lmin) / m->lstep) + 1;

		e->b[i] += hits;
		e->total += v * (int64_t)hits;
		break;
	}
	default: break;
	}
}

void bt_entry_merge_total(struct bt_map *m, struct bt_entry *e, uint64_t hits, int64_t v,
			  int64_t total)
{
	bt_entry_merge(m, e, hits, v);
	e->total += total - v * (int64_t)hits;
}

void bt_entry_value(const struct bt_map *m, const struct bt_entry *e, struct bt_val *out)
{
	memset(out, 0, sizeof(*out));
	out->t = BT_T_INT;
	out->sign = m->kind == BT_M_AVG || m->kind == BT_M_STATS ||
		    ((m->kind == BT_M_INT || m->kind == BT_M_SUM || m->kind == BT_M_MIN ||
		      m->kind == BT_M_MAX) && m->vsign);
	out->bits = 64;
	switch (m->kind) {
	case BT_M_STR: out->t = m->vty; out->s = e ? e->s : ""; break;
	case BT_M_AVG: case BT_M_STATS: out->i = e && e->count ? e->total / e->count : 0; break;
	default: out->i = e ? e->v : 0; break;
	}
}

/* --- printing --- */

static uint64_t entry_total(const struct bt_entry *e)
{
	uint64_t s = 0;

	for (unsigned i = 0; i < e->nb; i++)
		s += e->b[i];
	return s;
}

/* The order of bpftrace's key bytes: integers little-endian, strings zero-padded. */
static int key_bytes_cmp(const struct bt_entry *a, const struct bt_entry *b)
{
	for (unsigned i = 0; i < a->n && i < b->n; i++) {
		if (a->key[i].t == BT_T_INT && b->key[i].t == BT_T_INT) {
			uint64_t x = __builtin_bswap64((uint64_t)a->key[i].i);
			uint64_t y = __builtin_bswap64((uint64_t)b->key[i].i);

			if (x != y)
				return x < y ? -1 : 1;
		} else if (a->key[i].t != BT_T_INT && b->key[i].t != BT_T_INT) {
			int c = strcmp(a->key[i].s, b->key[i].s);

			if (c)
				return c;
		}
	}
	return 0;
}

static const struct bt_map *sort_map;

static int entry_cmp(const void *pa, const void *pb)
{
	const struct bt_entry *a = *(const struct bt_entry *const *)pa;
	const struct bt_entry *b = *(const struct bt_entry *const *)pb;
	const struct bt_map *m = sort_map;

	switch (m->kind) {
	case BT_M_COUNT:
		if ((uint64_t)a->v != (uint64_t)b->v)
			return (uint64_t)a->v < (uint64_t)b->v ? -1 : 1;
		break;
	case BT_M_INT: case BT_M_SUM: case BT_M_MIN: case BT_M_MAX:
		if (!m->vsign && (uint64_t)a->v != (uint64_t)b->v)
			return (uint64_t)a->v < (uint64_t)b->v ? -1 : 1;
		if (a->v != b->v)
			return a->v < b->v ? -1 : 1;
		break;
	case BT_M_HIST: case BT_M_LHIST: {
		uint64_t x = entry_total(a), y = entry_total(b);

		if (x != y)
			return x < y ? -1 : 1;
		break;
	}
	case BT_M_AVG: case BT_M_STATS: {
		int64_t x = a->count ? a->total / a->count : 0;
		int64_t y = b->count ? b->total / b->count : 0;

		if (x != y)
			return x < y ? -1 : 1;
		break;
	}
	case BT_M_STR:
		/* bpftrace's sort_by_key: integers by value, strings as text */
		for (unsigned i = 0; i < a->n; i++) {
			if (a->key[i].t == BT_T_INT && a->key[i].i != b->key[i].i)
				return a->key[i].i < b->key[i].i ? -1 : 1;
			if (a->key[i].t != BT_T_INT) {
				int c = strcmp(a->key[i].s, b->key[i].s);

				if (c)
					return c;
			}
		}
		break;
	default:
		break;
	}
	return key_bytes_cmp(a, b);
}

static void print_int(FILE *out, const struct bt_val *v)
{
	if (v->sign)
		fprintf(out, "%" PRId64, v->i);
	else
		fprintf(out, "%" PRIu64, (uint64_t)v->i);
}

static void print_key(FILE *out, const struct bt_map *m, const struct bt_entry *e)
{
	fputs(m->name, out);
	if (!e->n)
		return;
	fputc('[', out);
	for (unsigned i = 0; i < e->n; i++) {
		if (i)
			fputs(", ", out);
		if (e->key[i].t == BT_T_INT)
			print_int(out, &e->key[i]);
		else if (e->key[i].t == BT_T_STACK) {
			/* a stack's frames, indented 4 in a key (8 as a value) */
			const char *s = e->key[i].s;

			fputc('\n', out);
			while (*s) {
				size_t l = strcspn(s, "\n");

				fprintf(out, "    %.*s\n", (int)l, s);
				s += l + (s[l] == '\n');
			}
		} else
			fputs(e->key[i].s, out);
	}
	fputc(']', out);
}

static void hist_label(char *buf, size_t size, int power)
{
	static const char suf[] = { 0, 'K', 'M', 'G', 'T' };
	int k = power >= 40 ? 4 : power / 10;

	if (k > 4)
		k = 4;
	power -= 10 * k;
	if (suf[k])
		snprintf(buf, size, "%d%c", 1 << power, suf[k]);
	else
		snprintf(buf, size, "%d", 1 << power);
}

static void lhist_label(char *buf, size_t size, int64_t n)
{
	if (n == 0)
		snprintf(buf, size, "0");
	else if (n % 1048576 == 0)
		snprintf(buf, size, "%" PRId64 "M", n / 1048576);
	else if (n % 1024 == 0)
		snprintf(buf, size, "%" PRId64 "K", n / 1024);
	else
		snprintf(buf, size, "%" PRId64, n);
}

static void bar_line(FILE *out, const char *header, uint64_t v, uint64_t maxv, uint32_t div)
{
	/* bpftrace: int bar_width = values.at(i) / (float)max_value * max_width, the
	   values undivided; the count printed is divided (print(@h, top, div)) */
	int w = (int)((float)v / (float)(int)maxv * 52);
	char bar[53];

	if (w < 0)
		w = 0;
	if (w > 52)
		w = 52;
	memset(bar, '@', (size_t)w);
	bar[w] = '\0';
	fprintf(out, "%-16s%8" PRIu64 " |%-52s|\n", header, div > 1 ? v / div : v, bar);
}

static void print_hist(FILE *out, const struct bt_map *m, const struct bt_entry *e,
		       uint32_t div)
{
	int lo = -1, hi = -1;
	uint64_t maxv = 0;
	char h[64], l1[24], l2[24];

	for (unsigned i = 0; i < e->nb; i++) {
		int v = (int)e->b[i]; /* bpftrace reads them as int */

		if (v > 0) {
			if (lo < 0)
				lo = (int)i;
			hi = (int)i;
		}
		if (v > (int)maxv)
			maxv = (uint64_t)v;
	}
	if (hi < 0)
		return;
	if (m->kind == BT_M_LHIST) {
		unsigned buckets = e->nb - 2;

		for (int i = lo; i <= hi; i++) {
			if (i == 0) {
				lhist_label(l1, sizeof(l1), m->lmin);
				snprintf(h, sizeof(h), "(..., %s)", l1);
			} else if ((unsigned)i == buckets + 1) {
				lhist_label(l1, sizeof(l1), m->lmax);
				snprintf(h, sizeof(h), "[%s, ...)", l1);
			} else {
				lhist_label(l1, sizeof(l1), (i - 1) * m->lstep + m->lmin);
				lhist_label(l2, sizeof(l2), i * m->lstep + m->lmin);
				snprintf(h, sizeof(h), "[%s, %s)", l1, l2);
			}
			bar_line(out, h, e->b[i], maxv, div);
		}
		return;
	}
	for (int i = lo; i <= hi; i++) {
		if (i == 0)
			snprintf(h, sizeof(h), "(..., 0)");
		else if (i == 1)
			snprintf(h, sizeof(h), "[0]");
		else if (i == 2)
			snprintf(h, sizeof(h), "[1]");
		else {
			hist_label(l1, sizeof(l1), i - 2);
			hist_label(l2, sizeof(l2), i - 1);
			snprintf(h, sizeof(h), "[%s, %s)", l1, l2);
		}
		bar_line(out, h, e->b[i], maxv, div);
	}
}

/* An integer value divided as print(@m, top, div) divides it (0, 1: as it is). */
static void divide(struct bt_val *v, uint32_t div)
{
	if (div <= 1)
		return;
	if (v->sign)
		v->i /= (int64_t)div;
	else
		v->i = (int64_t)((uint64_t)v->i / div);
}

/* The entries of m sorted as bpftrace prints them, the first *skip of them left out
   by top (0: none); NULL on -ENOMEM. */
static struct bt_entry **sorted(struct bt_map *m, uint32_t top, size_t *n, size_t *skip)
{
	struct bt_table *t = m->t;
	struct bt_entry **v = malloc((t->n ? t->n : 1) * sizeof(*v));

	*n = *skip = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < t->nb; i++)
		for (struct bt_entry *e = t->b[i]; e; e = e->next)
			v[(*n)++] = e;
	sort_map = m;
	/* a stable order: ties by the key's bytes (entry_cmp's last word) */
	qsort(v, *n, sizeof(*v), entry_cmp);
	/* print(@m, top): the last top (the biggest); stats() maps ignore it, as
	   bpftrace does (with a warning) */
	if (top && top < *n && m->kind != BT_M_STATS)
		*skip = *n - top;
	return v;
}

void bt_map_print(FILE *out, struct bt_map *m)
{
	bt_map_print_top(out, m, 0, 0);
}

void bt_map_print_top(FILE *out, struct bt_map *m, uint32_t top, uint32_t div)
{
	size_t n, skip;
	struct bt_entry **v = sorted(m, top, &n, &skip);
	const char *delim = "\n";

	if (!v)
		return;
	if (m->kind == BT_M_STATS || m->kind == BT_M_LHIST)
		div = 0; /* bpftrace 0.17 divides neither */
	if (m->kind == BT_M_STR && (m->vty == BT_T_STACK || m->vty == BT_T_SYM))
		delim = "";
	for (size_t i = skip; i < n; i++) {
		struct bt_entry *e = v[i];
		struct bt_val val;

		if (i > skip)
			fputs(m->kind == BT_M_HIST || m->kind == BT_M_LHIST ? "\n" : delim, out);
		print_key(out, m, e);
		fputs(": ", out);
		switch (m->kind) {
		case BT_M_HIST:
		case BT_M_LHIST:
			fputc('\n', out);
			print_hist(out, m, e, div);
			break;
		case BT_M_STATS:
			fprintf(out, "count %" PRId64 ", average %" PRId64 ", total %" PRId64,
				e->count, e->count ? e->total / e->count : 0, e->total);
			break;
		case BT_M_STR:
			if (m->vty == BT_T_STACK) {
				const char *s = e->s;

				fputc('\n', out);
				while (s && *s) {
					size_t l = strcspn(s, "\n");

					fprintf(out, "        %.*s\n", (int)l, s);
					s += l + (s[l] == '\n');
				}
			} else {
				fputs(e->s ? e->s : "", out);
			}
			break;
		default:
			bt_entry_value(m, e, &val);
			divide(&val, div);
			print_int(out, &val);
			break;
		}
	}
	fputc('\n', out);
	if (m->kind == BT_M_STATS || m->kind == BT_M_AVG)
		fputc('\n', out);
	free(v);
}

/* --- bpftrace's -f json --- */

void bt_json_str(FILE *out, const char *s, size_t n)
{
	fputc('"', out);
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		switch (c) {
		case '"': fputs("\\\"", out); break;
		case '\\': fputs("\\\\", out); break;
		case '\n': fputs("\\n", out); break;
		case '\r': fputs("\\r", out); break;
		case '\t': fputs("\\t", out); break;
		default:
			/* bpftrace: c <= '\x1f' on a signed char, bytes >= 0x80 too, printed as
			   the int they sign-extend to */
			if (c <= '\x1f')
				fprintf(out, "\\u%04x", (unsigned)(int)c);
			else
				fputc(c, out);
		}
	}
	fputc('"', out);
}

static void json_hist(FILE *out, const struct bt_map *m, const struct bt_entry *e,
		      uint32_t div)
{
	int lo = -1, hi = -1;
	bool first = true;

	for (unsigned i = 0; i < e->nb; i++)
		if (e->b[i]) {
			if (lo < 0)
				lo = (int)i;
			hi = (int)i;
		}
	fputc('[', out);
	for (int i = lo; lo >= 0 && i <= hi; i++) {
		if (!first)
			fputs(", ", out);
		first = false;
		fputc('{', out);
		if (m->kind == BT_M_LHIST) {
			unsigned buckets = e->nb - 2;

			if (i == 0)
				fprintf(out, "\"max\": %" PRId64 ", ", m->lmin - 1);
			else if ((unsigned)i == buckets + 1)
				fprintf(out, "\"min\": %" PRId64 ", ", m->lmax);
			else
				fprintf(out, "\"min\": %" PRId64 ", \"max\": %" PRId64 ", ",
					(i - 1) * m->lstep + m->lmin, i * m->lstep + m->lmin - 1);
		} else if (i == 0) {
			fputs("\"max\": -1, ", out);
		} else if (i == 1) {
			fputs("\"min\": 0, \"max\": 0, ", out);
		} else if (i == 2) {
			fputs("\"min\": 1, \"max\": 1, ", out);
		} else {
			fprintf(out, "\"min\": %llu, \"max\": %llu, ", 1ull << (i - 2),
				(1ull << (i - 1)) - 1);
		}
		fprintf(out, "\"count\": %" PRIu64 "}", div > 1 ? e->b[i] / div : e->b[i]);
	}
	fputc(']', out);
}

void bt_map_print_json(FILE *out, struct bt_map *m)
{
	bt_map_print_json_top(out, m, 0, 0);
}

void bt_map_print_json_top(FILE *out, struct bt_map *m, uint32_t top, uint32_t div)
{
	size_t n, skip;
	struct bt_entry **v;
	const char *type = m->kind == BT_M_HIST || m->kind == BT_M_LHIST ? "hist" :
			   m->kind == BT_M_STATS || m->kind == BT_M_AVG ? "stats" : "map";

	if (!m->t->n)
		return;
	v = sorted(m, top, &n, &skip);
	if (!v)
		return;
	if (m->kind == BT_M_STATS || m->kind == BT_M_LHIST)
		div = 0;
	fprintf(out, "{\"type\": \"%s\", \"data\": {", type);
	bt_json_str(out, m->name, strlen(m->name));
	fputs(": ", out);
	if (m->nkeys)
		fputc('{', out);
	for (size_t i = skip; i < n; i++) {
		struct bt_entry *e = v[i];
		struct bt_val val;

		if (i > skip)
			fputs(", ", out);
		if (e->n) {
			char *kb = NULL;
			size_t kl = 0;
			FILE *k = open_memstream(&kb, &kl);

			for (unsigned j = 0; k && j < e->n; j++) {
				if (j)
					fputc(',', k);
				if (e->key[j].t == BT_T_INT)
					print_int(k, &e->key[j]);
				else
					fputs(e->key[j].s, k);
			}
			if (k) {
				fclose(k);
				bt_json_str(out, kb, kl);
				free(kb);
			}
			fputs(": ", out);
		}
		switch (m->kind) {
		case BT_M_HIST:
		case BT_M_LHIST:
			json_hist(out, m, e, div);
			break;
		case BT_M_STATS:
			fprintf(out, "{\"count\": %" PRId64 ", \"average\": %" PRId64
				", \"total\": %" PRId64 "}", e->count,
				e->count ? e->total / e->count : 0, e->total);
			break;
		case BT_M_STR:
			bt_json_str(out, e->s ? e->s : "", strlen(e->s ? e->s : ""));
			break;
		default:
			bt_entry_value(m, e, &val);
			divide(&val, div);
			print_int(out, &val);
			break;
		}
	}
	if (m->nkeys)
		fputc('}', out);
	fputs("}}\n", out);
	free(v);
}

/* --- Prometheus (uprobe run --listen) --- */

struct bt_table *bt_table_copy(const struct bt_map *m)
{
	struct bt_table *t = bt_table_new();
	struct bt_map c = *m;

	if (!t)
		return NULL;
	t->max = m->t->max;
	t->dropped = m->t->dropped;
	c.t = t;
	for (size_t i = 0; i < m->t->nb; i++)
		for (const struct bt_entry *e = m->t->b[i]; e; e = e->next) {
			struct bt_entry *d = bt_table_get(&c, e->key, e->n, true);

			if (!d) {
				bt_table_free(t);
				return NULL;
			}
			d->v = e->v;
			d->has = e->has;
			d->count = e->count;
			d->total = e->total;
			if (e->s && !(d->s = strdup(e->s))) {
				bt_table_free(t);
				return NULL;
			}
			if (e->b && d->b)
				memcpy(d->b, e->b, (d->nb < e->nb ? d->nb : e->nb) * sizeof(*d->b));
		}
	return t;
}

static void prom_str(FILE *out, const char *s)
{
	up_prom_escape(out, s, s ? strlen(s) : 0, true);
}

/* {key="..."} or {key1="...",key2="..."}; a stack's frames joined by ';', outermost
   first; extra (le="...") appended */
static void prom_labels(FILE *out, const struct bt_entry *e, const char *extra)
{
	if (!e->n && !extra)
		return;
	fputc('{', out);
	for (unsigned i = 0; i < e->n; i++) {
		if (i)
			fputc(',', out);
		if (e->n == 1)
			fputs("key=\"", out);
		else
			fprintf(out, "key%u=\"", i + 1);
		if (e->key[i].t == BT_T_INT) {
			print_int(out, &e->key[i]);
		} else if (e->key[i].t == BT_T_STACK) {
			up_prom_frames(out, e->key[i].s);
		} else {
			prom_str(out, e->key[i].s);
		}
		fputc('"', out);
	}
	if (extra)
		fprintf(out, "%s%s", e->n ? "," : "", extra);
	fputc('}', out);
}

static uint64_t prom_weight(const struct bt_map *m, const struct bt_entry *e)
{
	uint64_t w = 0;

	switch (m->kind) {
	case BT_M_COUNT: case BT_M_SUM: return (uint64_t)e->v;
	case BT_M_AVG: case BT_M_STATS: return (uint64_t)e->count;
	case BT_M_HIST: case BT_M_LHIST:
		for (unsigned i = 0; i < e->nb; i++)
			w += e->b[i];
		return w;
	default: return 0;
	}
}

static const struct bt_map *weigh_map;

static int cmp_weight(const void *pa, const void *pb)
{
	const struct bt_entry *a = *(const struct bt_entry *const *)pa;
	const struct bt_entry *b = *(const struct bt_entry *const *)pb;
	uint64_t x = prom_weight(weigh_map, a), y = prom_weight(weigh_map, b);

	return x != y ? (x < y ? 1 : -1) : (a->hash > b->hash) - (a->hash < b->hash);
}

/* One bucket line of a histogram: le an integer (integers: [lo, hi) is le hi - 1). */
static void prom_bucket(FILE *out, const char *fam, const struct bt_entry *e, int64_t le,
			bool inf, uint64_t cum, bool om)
{
	char extra[64];

	if (inf)
		snprintf(extra, sizeof(extra), "le=\"+Inf\"");
	else
		snprintf(extra, sizeof(extra), om ? "le=\"%" PRId64 ".0\"" : "le=\"%" PRId64 "\"", le);
	fprintf(out, "%s_bucket", fam);
	prom_labels(out, e, extra);
	fprintf(out, " %" PRIu64 "\n", cum);
}

static void prom_hist(FILE *out, const char *fam, const struct bt_map *m, const struct bt_entry *e,
		      bool om)
{
	uint64_t cum = 0, total = 0;
	int hi = -1;

	for (unsigned i = 0; i < e->nb; i++) {
		total += e->b[i];
		if (e->b[i])
			hi = (int)i;
	}
	for (int i = 0; i <= hi; i++) {
		int64_t le;

		cum += e->b[i];
		if (m->kind == BT_M_HIST) /* (..., 0), [0], [1], [2, 4) ... */
			le = i == 0 ? -1 : i == 1 ? 0 : i == 2 ? 1 : (int64_t)((1ull << (i - 1)) - 1);
		else if (i == 0) /* (..., min) */
			le = m->lmin - 1;
		else if ((unsigned)i == e->nb - 1) /* [max, ...): +Inf alone */
			break;
		else
			le = m->lmin + (int64_t)i * m->lstep - 1;
		prom_bucket(out, fam, e, le, false, cum, om);
	}
	prom_bucket(out, fam, e, 0, true, total, om);
	fprintf(out, "%s_sum", fam);
	prom_labels(out, e, NULL);
	fprintf(out, " %" PRId64 "\n%s_count", e->total, fam);
	prom_labels(out, e, NULL);
	fprintf(out, " %" PRIu64 "\n", total);
}

int bt_map_print_prom(FILE *out, const struct bt_map *m, bool om, unsigned max_series,
		      uint64_t *overflow)
{
	const struct bt_table *t = m->t;
	const struct bt_entry **v;
	const char *type, *help;
	char fam[160];
	size_t n = 0, k = (size_t)snprintf(fam, sizeof(fam), "uprobe_bt");
	bool counter;

	*overflow = 0;
	if (m->kind == BT_M_STR || m->kind == BT_M_NONE)
		return 0; /* no number to give */
	if (m->name[1])
		k += (size_t)snprintf(fam + k, sizeof(fam) - k, "_");
	for (const char *p = m->name + 1; *p && k + 1 < sizeof(fam); p++)
		fam[k++] = isalnum((unsigned char)*p) ? *p : '_';
	fam[k] = '\0';
	counter = m->kind == BT_M_COUNT || (m->kind == BT_M_SUM && !m->vsign);
	switch (m->kind) {
	case BT_M_COUNT: type = "counter", help = "count()"; break;
	case BT_M_SUM: type = counter ? "counter" : "gauge", help = "sum()"; break;
	case BT_M_AVG: type = "summary", help = "avg(): _sum / _count"; break;
	case BT_M_STATS: type = "summary", help = "stats(): _sum / _count"; break;
	case BT_M_MIN: type = "gauge", help = "min()"; break;
	case BT_M_MAX: type = "gauge", help = "max()"; break;
	case BT_M_HIST: type = "histogram", help = "hist()"; break;
	case BT_M_LHIST: type = "histogram", help = "lhist()"; break;
	default: type = "gauge", help = "an integer"; break;
	}
	v = malloc((t->n ? t->n : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < t->nb; i++)
		for (const struct bt_entry *e = t->b[i]; e; e = e->next)
			v[n++] = e;
	weigh_map = m;
	qsort(v, n, sizeof(*v), cmp_weight);
	fprintf(out, "# HELP %s%s bpftrace map ", fam, counter && !om ? "_total" : "");
	prom_str(out, m->name);
	fprintf(out, ": %s\n# TYPE %s%s %s\n", help, fam, counter && !om ? "_total" : "", type);
	for (size_t i = 0; i < n; i++) {
		const struct bt_entry *e = v[i];
		struct bt_val val;

		if (i >= max_series) {
			*overflow += prom_weight(m, e);
			continue;
		}
		switch (m->kind) {
		case BT_M_HIST:
		case BT_M_LHIST:
			prom_hist(out, fam, m, e, om);
			break;
		case BT_M_AVG:
		case BT_M_STATS:
			fprintf(out, "%s_sum", fam);
			prom_labels(out, e, NULL);
			fprintf(out, " %" PRId64 "\n%s_count", e->total, fam);
			prom_labels(out, e, NULL);
			fprintf(out, " %" PRId64 "\n", e->count);
			break;
		default:
			bt_entry_value(m, e, &val);
			fprintf(out, "%s%s", fam, counter ? "_total" : "");
			prom_labels(out, e, NULL);
			fputc(' ', out);
			print_int(out, &val);
			fputc('\n', out);
			break;
		}
	}
	free(v);
	return ferror(out) ? -EIO : 0;
}
