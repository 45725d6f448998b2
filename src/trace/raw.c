// SPDX-License-Identifier: MIT
/*
 * Raw trace files (trace/raw.h): the writer the session calls, and `uprobe report`'s
 * reader, which formats each record the way the session formats a live one.
 */
#include "trace/raw.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>

#include <uprobe/uprobe.h>

#include "agent/rec.h"
#include "trace/fetch.h"
#include "trace/format.h"
#include "trace/spec.h"
#include "trace/stack.h"
#include "sym/unwind_walk.h"

#define RAW_BLOCK_MAX (1u << 30) /* no block is larger: a bigger len is a broken file */
#define RAW_NREGS (sizeof(struct user_regs_struct) / 8)

/* ---- writing ------------------------------------------------------------------------- */

static int put(FILE *out, const void *p, size_t n)
{
	return fwrite(p, 1, n, out) == n ? 0 : (errno ? -errno : -EIO);
}

static int put_block(FILE *out, uint32_t type, const void *a, size_t alen, const void *b,
		     size_t blen)
{
	static const uint8_t zero[8];
	struct up_raw_block h = { type, (uint32_t)(alen + blen) };
	size_t pad = (8 - (alen + blen) % 8) % 8;
	int rc;

	if (alen + blen > RAW_BLOCK_MAX)
		return -E2BIG;
	rc = put(out, &h, sizeof(h));
	if (!rc && alen)
		rc = put(out, a, alen);
	if (!rc && blen)
		rc = put(out, b, blen);
	if (!rc && pad)
		rc = put(out, zero, pad);
	return rc;
}

int up_raw_write_magic(FILE *out)
{
	return put(out, UP_RAW_MAGIC, 8);
}

int up_raw_write_event(FILE *out, uint32_t index, const char *text)
{
	struct up_raw_event e = { .index = index };

	return put_block(out, UP_RAW_EVENT, &e, sizeof(e), text, strlen(text) + 1);
}

int up_raw_write_site(FILE *out, const struct up_raw_site *s)
{
	return put_block(out, UP_RAW_SITE, s, sizeof(*s), NULL, 0);
}

int up_raw_write_map(FILE *out, const struct up_raw_map *m, const char *path)
{
	return put_block(out, UP_RAW_MAP, m, sizeof(*m), path, strlen(path) + 1);
}

int up_raw_write_thread(FILE *out, pid_t pid, pid_t tid, const char *comm)
{
	struct up_raw_thread t = { .pid = pid, .tid = tid };

	snprintf(t.comm, sizeof(t.comm), "%s", comm ? comm : "");
	return put_block(out, UP_RAW_THREAD, &t, sizeof(t), NULL, 0);
}

int up_raw_write_records(FILE *out, const void *recs, size_t len)
{
	return put_block(out, UP_RAW_RECORDS, recs, len, NULL, 0);
}

int up_raw_write_end(FILE *out, uint64_t records, uint64_t lost)
{
	struct up_raw_end e = { records, lost };

	return put_block(out, UP_RAW_END, &e, sizeof(e), NULL, 0);
}

/* ---- reading --------------------------------------------------------------------------- */

struct rev {
	bool valid;
	struct up_spec spec;
};

struct rthread {
	int32_t pid, tid; /* tid 0: free */
	char comm[17];
};

struct reader {
	FILE *in, *out;
	const struct up_raw_report_opts *o;
	struct up_raw_stats *st;
	char *err;
	size_t errlen;
	char why[160]; /* the last bad()'s reason, without the byte */
	uint64_t at;   /* bytes of the file read so far: where the block being read starts */
	struct rev *ev;
	unsigned nev;
	struct up_raw_site *site; /* by probe id */
	bool *has_site;
	unsigned nsite;
	struct rthread *thr; /* open addressing by (pid, tid) */
	unsigned thr_cap, nthr;
	char *line;
	size_t linecap;
	bool header_done;
	struct rsyms { /* the processes' maps (MAP blocks): their stacks walked and named */
		int32_t pid;
		struct up_stack_syms *syms;
	} *syms;
	unsigned nsyms;
	char arena[64 * 1024];
	char names[16 * 1024];
};

__attribute__((format(printf, 2, 3))) static int bad(struct reader *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	snprintf(r->err, r->errlen, "at byte %" PRIu64 ": %s", r->at, r->why);
	return -EINVAL;
}

/* Counts a record or block of kind skipped at byte at; the first of each kind says why. */
__attribute__((format(printf, 4, 5))) static int skip(struct reader *r, enum up_raw_skip_kind kind,
						      uint64_t at, const char *fmt, ...)
{
	char *first = r->st->skip[kind].first;
	va_list ap;
	int n;

	r->st->skipped++;
	if (r->st->skip[kind].n++)
		return 0;
	n = snprintf(first, sizeof(r->st->skip[kind].first), "at byte %" PRIu64 ": ", at);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(r->st->skip[kind].first))
		vsnprintf(first + n, sizeof(r->st->skip[kind].first) - (size_t)n, fmt, ap);
	va_end(ap);
	return 0;
}

static unsigned thr_hash(int32_t pid, int32_t tid, unsigned cap)
{
	return ((uint32_t)pid * 2654435761u ^ (uint32_t)tid * 40503u) & (cap - 1);
}

static struct rthread *thr_find(struct reader *r, int32_t pid, int32_t tid, bool add)
{
	if (add && (r->nthr + 1) * 2 > r->thr_cap) {
		unsigned cap = r->thr_cap ? r->thr_cap * 2 : 64;
		struct rthread *t = calloc(cap, sizeof(*t));

		if (!t)
			return NULL;
		for (unsigned i = 0; i < r->thr_cap; i++) {
			unsigned h;

			if (!r->thr[i].tid)
				continue;
			for (h = thr_hash(r->thr[i].pid, r->thr[i].tid, cap); t[h].tid;)
				h = (h + 1) & (cap - 1);
			t[h] = r->thr[i];
		}
		free(r->thr);
		r->thr = t;
		r->thr_cap = cap;
	}
	if (!r->thr_cap || !tid)
		return NULL;
	for (unsigned h = thr_hash(pid, tid, r->thr_cap);; h = (h + 1) & (r->thr_cap - 1)) {
		struct rthread *t = &r->thr[h];

		if (t->tid == tid && t->pid == pid)
			return t;
		if (!t->tid) {
			if (!add)
				return NULL;
			t->pid = pid;
			t->tid = tid;
			r->nthr++;
			return t;
		}
	}
}

static int on_event(struct reader *r, const uint8_t *p, uint32_t len)
{
	struct up_raw_event e;
	struct up_spec_err se;
	const char *text;

	if (len < sizeof(e) + 1 || p[len - 1])
		return bad(r, "an EVENT block of %u bytes is not an index and a spec", len);
	memcpy(&e, p, sizeof(e));
	text = (const char *)p + sizeof(e);
	if (e.index > 1u << 20)
		return bad(r, "event index %u", e.index);
	if (e.index >= r->nev) {
		struct rev *v = realloc(r->ev, (e.index + 1) * sizeof(*v));

		if (!v)
			return -ENOMEM;
		memset(v + r->nev, 0, (e.index + 1 - r->nev) * sizeof(*v));
		r->ev = v;
		r->nev = e.index + 1;
	}
	if (r->ev[e.index].valid)
		return bad(r, "event %u given twice", e.index);
	if (up_spec_parse(text, &r->ev[e.index].spec, &se))
		return bad(r, "event %u: '%s': %s", e.index, text, se.msg);
	if (r->ev[e.index].spec.kind != UP_SPEC_EVENT) {
		up_spec_free(&r->ev[e.index].spec);
		return bad(r, "event %u: '%s' is not a p: or r: event", e.index, text);
	}
	r->ev[e.index].valid = true;
	return 0;
}

static int on_site(struct reader *r, const uint8_t *p, uint32_t len)
{
	struct up_raw_site s;

	if (len != sizeof(s))
		return bad(r, "a SITE block of %u bytes (%zu expected)", len, sizeof(s));
	memcpy(&s, p, sizeof(s));
	if (s.event >= r->nev || !r->ev[s.event].valid)
		return bad(r, "a site of event %u, which the file has not named", s.event);
	if (s.probe >= 1u << 24)
		return bad(r, "probe id %u", s.probe);
	if (s.probe >= r->nsite) {
		unsigned n = s.probe + 64;
		struct up_raw_site *v = realloc(r->site, n * sizeof(*v));
		bool *h;

		if (!v)
			return -ENOMEM;
		r->site = v;
		h = realloc(r->has_site, n * sizeof(*h));
		if (!h)
			return -ENOMEM;
		memset(h + r->nsite, 0, (n - r->nsite) * sizeof(*h));
		r->has_site = h;
		r->nsite = n;
	}
	r->site[s.probe] = s;
	r->has_site[s.probe] = true;
	return 0;
}

static struct up_stack_syms *syms_of(struct reader *r, int32_t pid)
{
	for (unsigned i = 0; i < r->nsyms; i++)
		if (r->syms[i].pid == pid)
			return r->syms[i].syms;
	return NULL;
}

static int on_map(struct reader *r, const uint8_t *p, uint32_t len)
{
	struct up_raw_map m;
	struct up_stack_syms *s;
	const char *path;

	if (len < sizeof(m) + 2 || p[len - 1])
		return bad(r, "a MAP block of %u bytes is not a mapping and a path", len);
	memcpy(&m, p, sizeof(m));
	path = (const char *)p + sizeof(m);
	if (m.end <= m.start || path[0] != '/')
		return bad(r, "a MAP block of %#" PRIx64 "-%#" PRIx64 " '%.64s'", m.start, m.end,
			   path);
	s = syms_of(r, m.pid);
	if (!s) {
		struct rsyms *v;

		if (r->nsyms >= 4096)
			return bad(r, "maps of more than 4096 processes");
		v = realloc(r->syms, (r->nsyms + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->syms = v;
		s = up_stack_syms_new(0);
		if (!s)
			return -ENOMEM;
		v[r->nsyms++] = (struct rsyms){ m.pid, s };
	}
	return up_stack_syms_add(s, m.start, m.end, m.offset, m.ino, path) == -ENOMEM ? -ENOMEM
										    : 0;
}

/* Frame i of a walk, named as trace/report.c names them. */
static int frame_name(void *ctx, unsigned i, uint64_t addr, char *buf, size_t size)
{
	struct up_stack_syms *s = ctx;

	if (!addr || (i && addr != UP_UNWIND_UNKNOWN && !up_stack_mapped(s, addr)))
		return -1;
	return up_stack_name(s, addr, buf, size);
}

static int on_thread(struct reader *r, const uint8_t *p, uint32_t len)
{
	struct up_raw_thread t;
	struct rthread *e;

	if (len != sizeof(t))
		return bad(r, "a THREAD block of %u bytes (%zu expected)", len, sizeof(t));
	memcpy(&t, p, sizeof(t));
	e = thr_find(r, t.pid, t.tid, true);
	if (!e)
		return t.tid ? -ENOMEM : 0;
	memcpy(e->comm, t.comm, sizeof(t.comm));
	e->comm[sizeof(t.comm)] = '\0';
	return 0;
}

struct rec_mem {
	const uint8_t *mem;
	size_t len;
};

static int read_mem(void *arg, uint64_t addr, void *buf, size_t len)
{
	const struct rec_mem *m = arg;

	return up_rec_mem_read(m->mem, m->len, addr, buf, len);
}

static int emit(struct reader *r, const struct up_spec *spec, const struct up_fmt_ctx *fc,
		const struct up_fmt_event *ev)
{
	int n;

	if (!r->header_done && r->o->header && !r->o->json) {
		char h[512];
		int hl = up_fmt_event_header(h, sizeof(h));

		if (hl > 0 && fwrite(h, 1, strnlen(h, sizeof(h)), r->out) != strnlen(h, sizeof(h)))
			return errno ? -errno : -EIO;
	}
	r->header_done = true;
	for (;;) {
		n = r->o->json ? up_fmt_event_json(r->line, r->linecap, fc, spec, ev)
			       : up_fmt_event_text(r->line, r->linecap, fc, spec, ev);
		if (n < 0)
			return n;
		if ((size_t)n < r->linecap)
			break;
		free(r->line);
		r->linecap = (size_t)n + 256;
		r->line = malloc(r->linecap);
		if (!r->line) {
			r->linecap = 0;
			return -ENOMEM;
		}
	}
	if (fwrite(r->line, 1, (size_t)n, r->out) != (size_t)n)
		return errno ? -errno : -EIO;
	return 0;
}

/* One record of size bytes (its slot) at byte rat of the file. */
static int one_record(struct reader *r, const uint8_t *p, uint32_t size, uint64_t rat)
{
	struct uprobe_raw_rec h;
	union {
		struct user_regs_struct ur;
		uint64_t w[RAW_NREGS];
	} u = { .w = { 0 } };
	const struct up_raw_site *s;
	const struct rev *ev;
	struct rthread *t;
	size_t at = sizeof(h);
	bool is_return;

	memcpy(&h, p, sizeof(h));
	if (h.probe == UPROBE_RAW_SKIP)
		return 0;
	if (h.probe >= r->nsite || !r->has_site[h.probe])
		return skip(r, UP_RAW_SKIP_PROBE, rat,
			    "a record of probe %u, which the file has not named", h.probe);
	if (h.len > size || h.len < sizeof(h))
		return skip(r, UP_RAW_SKIP_LEN, rat, "a record of %u bytes in a slot of %u", h.len,
			    size);
	s = &r->site[h.probe];
	ev = &r->ev[s->event];
	for (uint64_t m = s->regs; m; m &= m - 1) {
		unsigned i = (unsigned)__builtin_ctzll(m);

		if (i >= RAW_NREGS)
			break;
		if (at + 8 > h.len)
			return skip(r, UP_RAW_SKIP_REGS, rat,
				    "a record of %u bytes too short for its registers", h.len);
		memcpy(&u.w[i], p + at, 8);
		at += 8;
	}
	is_return = h.flags & UPROBE_RAW_RET;
	if (!is_return)
		u.ur.rip = s->vaddr;
	t = thr_find(r, h.pid, h.tid, false);
	{
		struct rec_mem mem = { p + at, h.len - at };
		struct up_fetch_env env = {
			.regs = &u.ur,
			.is32 = s->is32,
			.read = read_mem,
			.ctx = &mem,
			.retval = u.ur.rax,
			.has_retval = is_return,
			.comm = t ? t->comm : NULL,
			.file_bias = s->bias,
			.at_entry = up_spec_at_function_entry(&ev->spec),
			.syms = syms_of(r, h.pid), /* NULL: a file without maps, frame pointers */
		};
		struct up_fmt_ctx fc = {
			.comm = t && t->comm[0] ? t->comm : NULL,
			.pid = h.pid,
			.tid = h.tid ? h.tid : h.pid,
			.cpu = (int)(h.flags & UPROBE_RAW_CPU),
			.time_ns = h.time_ns,
		};
		struct up_fetch_value vals[ev->spec.nargs ? ev->spec.nargs : 1];
		struct up_fmt_event fe = {
			.addr = s->vaddr,
			.ret_addr = is_return ? u.ur.rip : 0,
			.vals = vals,
		};
		int rc;

		up_fetch_eval_all(&ev->spec, &env, vals, r->arena, sizeof(r->arena));
		if (env.syms) { /* the stacks named, as trace names them */
			size_t used = 0;

			for (int i = 0; i < ev->spec.nargs && used < sizeof(r->names); i++) {
				if (vals[i].type.kind != UP_TYPE_STACK)
					continue;
				up_fetch_name_stack(&vals[i], r->names + used, sizeof(r->names) - used,
						    frame_name, env.syms);
				used += vals[i].str_len + 1;
			}
		}
		rc = emit(r, &ev->spec, &fc, &fe);
		if (rc)
			return rc;
	}
	r->st->records++;
	return 0;
}

static int on_records(struct reader *r, const uint8_t *p, uint32_t len)
{
	uint64_t base = r->at + sizeof(struct up_raw_block);

	for (uint32_t at = 0; at < len;) {
		uint32_t size;
		int rc;

		/* no framing past a record of impossible size: the rest of the block goes */
		if (len - at < sizeof(struct uprobe_raw_rec))
			return skip(r, UP_RAW_SKIP_REST, base + at,
				    "a record cut short (%u bytes), the rest of its block",
				    len - at);
		memcpy(&size, p + at, sizeof(size));
		if (size < sizeof(struct uprobe_raw_rec) || size % 8 || size > len - at)
			return skip(r, UP_RAW_SKIP_REST, base + at,
				    "a record of size %u with %u bytes left, the rest of its block",
				    size, len - at);
		rc = one_record(r, p + at, size, base + at);
		if (rc)
			return rc;
		at += size;
	}
	return 0;
}

/* The whole records at the start of a block the file cut short. */
static int on_records_cut(struct reader *r, const uint8_t *p, uint32_t len)
{
	uint32_t at = 0, size;

	while (len - at >= sizeof(struct uprobe_raw_rec)) {
		memcpy(&size, p + at, sizeof(size));
		if (size < sizeof(struct uprobe_raw_rec) || size % 8 || size > len - at)
			break;
		at += size;
	}
	return at ? on_records(r, p, at) : 0;
}

/*
 * Reads len bytes into *buf (grown as needed) and says in *got how many were there: the
 * buffer grows with what the file holds, not with what a block's header claims (a file
 * cut short, or forged, does not make the reader allocate a gigabyte).
 */
static int read_block(FILE *in, uint8_t **buf, size_t *cap, size_t len, size_t *got)
{
	*got = 0;
	while (*got < len) {
		size_t want = len - *got, n;

		if (*got + want > *cap) {
			size_t ncap = *cap * 2 > *got + want ? *got + want : *cap * 2;
			uint8_t *nb;

			if (ncap < *got + 1)
				ncap = *got + 1;
			nb = realloc(*buf, ncap);
			if (!nb)
				return -ENOMEM;
			*buf = nb;
			*cap = ncap;
		}
		if (want > *cap - *got)
			want = *cap - *got;
		n = fread(*buf + *got, 1, want, in);
		*got += n;
		if (n < want)
			break;
	}
	return 0;
}

int up_raw_report(FILE *in, FILE *out, const struct up_raw_report_opts *o,
		  struct up_raw_stats *st, char *err, size_t errlen)
{
	struct reader *r = calloc(1, sizeof(*r));
	struct up_raw_stats dummy;
	char magic[8];
	uint8_t *buf = NULL;
	size_t bufcap = 0;
	int rc = 0;

	if (!r)
		return -ENOMEM;
	if (!st)
		st = &dummy;
	memset(st, 0, sizeof(*st));
	r->in = in;
	r->out = out;
	r->o = o;
	r->st = st;
	r->err = err;
	r->errlen = errlen;
	if (fread(magic, 1, 8, in) != 8 || memcmp(magic, UP_RAW_MAGIC, 8)) {
		rc = bad(r, "not a raw trace of uprobe (made by uprobe trace --format raw -o FILE)");
		goto out;
	}
	r->at = 8;
	bufcap = 4096;
	buf = malloc(bufcap);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		struct up_raw_block b;
		size_t n = fread(&b, 1, sizeof(b), in), padded;

		if (n == 0)
			break;
		if (n != sizeof(b))
			break; /* cut short: st->ended says so */
		if (b.len > RAW_BLOCK_MAX) {
			rc = bad(r, "a block of %u bytes", b.len);
			break;
		}
		padded = (b.len + 7u) & ~7u;
		rc = read_block(in, &buf, &bufcap, padded, &n);
		if (rc)
			break;
		if (n != padded) {
			/* cut short (a trace killed, a disk full): the whole records there are
			   still printed */
			if (b.type == UP_RAW_RECORDS)
				rc = on_records_cut(r, buf, n < b.len ? (uint32_t)n : b.len);
			break;
		}
		switch (b.type) {
		case UP_RAW_EVENT:
			rc = on_event(r, buf, b.len);
			break;
		case UP_RAW_SITE:
			rc = on_site(r, buf, b.len);
			break;
		case UP_RAW_THREAD:
			rc = on_thread(r, buf, b.len);
			break;
		case UP_RAW_RECORDS:
			rc = on_records(r, buf, b.len);
			break;
		case UP_RAW_MAP:
			rc = on_map(r, buf, b.len);
			break;
		case UP_RAW_END:
			if (b.len != sizeof(struct up_raw_end)) {
				rc = bad(r, "an END block of %u bytes", b.len);
				break;
			}
			memcpy(&st->lost, buf + offsetof(struct up_raw_end, lost), 8);
			st->ended = true;
			break;
		default:
			rc = bad(r, "a block of unknown type %u", b.type);
			break;
		}
		/* a block that cannot be read: its length says where the next one starts */
		if (rc == -EINVAL && b.type != UP_RAW_RECORDS) {
			skip(r, UP_RAW_SKIP_BLOCK, r->at, "%s", r->why);
			if (r->errlen)
				r->err[0] = '\0';
			rc = 0;
		}
		if (rc)
			break;
		r->at += sizeof(b) + padded;
	}
	if (!rc && ferror(in))
		rc = bad(r, "cannot read the file: %s", strerror(errno));
out:
	for (unsigned i = 0; i < r->nev; i++)
		if (r->ev[i].valid)
			up_spec_free(&r->ev[i].spec);
	free(r->ev);
	free(r->site);
	free(r->has_site);
	free(r->thr);
	for (unsigned i = 0; i < r->nsyms; i++)
		up_stack_syms_free(r->syms[i].syms);
	free(r->syms);
	free(r->line);
	free(buf);
	free(r);
	return rc;
}
