// SPDX-License-Identifier: MIT
/*
 * The trace ring (ring.h).  Kept linear: the lines live in one contiguous run that is
 * moved to the front when it would run off the end, so a reader of `trace` copies one
 * block.  Never prints, never blocks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/ring.h"

int up_fs_ring_init(struct up_fs_ring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->buf = malloc(cap);
	if (!r->buf)
		return -ENOMEM;
	r->cap = cap;
	return 0;
}

void up_fs_ring_fini(struct up_fs_ring *r)
{
	free(r->buf);
	free(r->part);
	memset(r, 0, sizeof(*r));
}

void up_fs_ring_clear(struct up_fs_ring *r)
{
	r->start = r->len = 0;
	r->partlen = 0;
}

/* Drops the oldest line; false when there is none. */
static bool drop_line(struct up_fs_ring *r)
{
	char *s = r->buf + r->start, *nl;

	if (!r->len)
		return false;
	nl = memchr(s, '\n', r->len);
	size_t n = nl ? (size_t)(nl - s) + 1 : r->len;

	r->start += n;
	r->len -= n;
	r->dropped++;
	if (!r->len)
		r->start = 0;
	return true;
}

/* Commits one complete line (with its '\n'). */
static void commit(struct up_fs_ring *r, const char *line, size_t n)
{
	if (n > r->cap) { /* longer than the whole ring: keep its end */
		line += n - r->cap;
		n = r->cap;
	}
	while (r->len + n > r->cap && drop_line(r))
		;
	if (r->start + r->len + n > r->cap) {
		memmove(r->buf, r->buf + r->start, r->len);
		r->start = 0;
	}
	memcpy(r->buf + r->start + r->len, line, n);
	r->len += n;
	r->written++;
}

static int part_append(struct up_fs_ring *r, const char *data, size_t n)
{
	if (r->partlen + n > r->partcap) {
		size_t cap = (r->partlen + n) * 2 + 256;
		char *p = realloc(r->part, cap);

		if (!p)
			return -ENOMEM;
		r->part = p;
		r->partcap = cap;
	}
	memcpy(r->part + r->partlen, data, n);
	r->partlen += n;
	return 0;
}

void up_fs_ring_write(struct up_fs_ring *r, const char *data, size_t n)
{
	bool any = false;

	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t k;

		if (!nl) {
			part_append(r, data, n); /* out of memory: the fragment is lost */
			break;
		}
		k = (size_t)(nl - data) + 1;
		if (r->partlen) {
			if (!part_append(r, data, k))
				commit(r, r->part, r->partlen);
			r->partlen = 0;
		} else {
			commit(r, data, k);
		}
		any = true;
		data += k;
		n -= k;
	}
	if (any && r->on_lines)
		r->on_lines(r->arg);
}

size_t up_fs_ring_consume(struct up_fs_ring *r, char *out, size_t max)
{
	const char *s = r->buf + r->start;
	size_t n = r->len < max ? r->len : max;

	if (n < r->len) {
		/* cut after the last whole line that fits, if any */
		const char *nl = NULL;

		for (size_t i = n; i > 0; i--)
			if (s[i - 1] == '\n') {
				nl = s + i;
				break;
			}
		if (nl)
			n = (size_t)(nl - s);
	}
	memcpy(out, s, n);
	r->start += n;
	r->len -= n;
	if (!r->len)
		r->start = 0;
	return n;
}

static ssize_t stream_write(void *cookie, const char *data, size_t n)
{
	up_fs_ring_write(cookie, data, n);
	return (ssize_t)n;
}

FILE *up_fs_ring_open_stream(struct up_fs_ring *r)
{
	cookie_io_functions_t io = { .write = stream_write };
	FILE *f = fopencookie(r, "w", io);

	if (f)
		setvbuf(f, NULL, _IOFBF, 64 * 1024);
	return f;
}
