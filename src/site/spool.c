// SPDX-License-Identifier: MIT
/*
 * The tracer's spool of records: a FIFO in memory chunks, then in a temporary file
 * read back as a ring (site/spool.h, design.md section 14).
 *
 * Order: records go to memory while the file holds none and nothing read back from it
 * waits, else to the file; they are taken from what was read back first, then from
 * memory, then from the file.  So whatever is in memory is older than whatever is in
 * the file, and records come out in the order they went in.
 *
 * It never reads the traced process; the records are the tracer's own copies.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "site/spool.h"

#define CHUNK (1u << 20)   /* memory is taken this much at a time */
#define READ_BACK (1u << 20) /* the file is read back this much at a time */
#define MEM_MAX ((size_t)64 << 20)
/* empty chunks kept for reuse, their pages present: a chunk taken fresh from the system
   costs its pages' faults as records are copied into it (~4 ms a MiB on this
   shadow-paged guest, ~370 ns a six-argument record), time in which the tracer
   neither copies nor answers its tracees' stops */
#define SPARE_MAX 8

struct up_spool_chunk {
	struct up_spool_chunk *next;
	size_t cap, len, off;
	uint8_t data[];
};

void up_spool_init(struct up_spool *s, size_t total)
{
	memset(s, 0, sizeof(*s));
	s->mem_cap = total < MEM_MAX ? total : MEM_MAX;
	s->file_cap = total - s->mem_cap;
	s->fd = -1;
}

void up_spool_fini(struct up_spool *s)
{
	while (s->head) {
		struct up_spool_chunk *c = s->head;

		s->head = c->next;
		free(c);
	}
	while (s->spare) {
		struct up_spool_chunk *c = s->spare;

		s->spare = c->next;
		free(c);
	}
	free(s->rbuf);
	free(s->why);
	if (s->fd >= 0)
		close(s->fd);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}

void up_spool_warm(struct up_spool *s, size_t bytes)
{
	size_t want = bytes / CHUNK;

	if (want > SPARE_MAX)
		want = SPARE_MAX;
	if (want > s->mem_cap / CHUNK)
		want = s->mem_cap / CHUNK;
	while (s->nspare < want) {
		struct up_spool_chunk *c = malloc(sizeof(*c) + CHUNK);

		if (!c)
			return;
		/* written, not only mapped: a page the kernel populated still costs the
		   guest's first access a fill of the hypervisor's tables here (and a memset
		   of fresh memory may become a calloc that writes nothing) */
		for (size_t i = 0; i < CHUNK; i += 4096)
			((volatile uint8_t *)c->data)[i] = 0;
		((volatile uint8_t *)c->data)[CHUNK - 1] = 0;
		c->cap = CHUNK;
		c->next = s->spare;
		s->spare = c;
		s->nspare++;
	}
}

static uint64_t file_q(const struct up_spool *s)
{
	return s->fhead - s->ftail;
}

size_t up_spool_room(const struct up_spool *s)
{
	size_t room = 0;

	if (!file_q(s) && s->roff == s->rlen && s->mem_q < s->mem_cap)
		room = s->mem_cap - s->mem_q;
	if (!s->file_failed && file_q(s) < s->file_cap)
		room += s->file_cap - (size_t)file_q(s);
	return room;
}

bool up_spool_empty(const struct up_spool *s)
{
	return !s->mem_q && !file_q(s) && s->roff == s->rlen;
}

static void file_fail(struct up_spool *s, const char *what, int err)
{
	char msg[256];

	s->file_failed = true;
	if (s->why)
		return;
	snprintf(msg, sizeof(msg), "the spool's temporary file: %s: %s; records wait in memory "
		 "only (%zu MiB)", what, strerror(err), s->mem_cap >> 20);
	s->why = strdup(msg);
}

/* The file, made on the first spill: unnamed, in $TMPDIR or /tmp, the tracer's only. */
static bool file_open(struct up_spool *s)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];

	if (s->fd >= 0)
		return true;
	if (s->file_failed)
		return false;
	if (!dir || !*dir)
		dir = "/tmp";
	s->fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
	if (s->fd < 0) {
		snprintf(path, sizeof(path), "%s/uprobe-spool.XXXXXX", dir);
		s->fd = mkostemp(path, O_CLOEXEC);
		if (s->fd >= 0)
			unlink(path);
	}
	if (s->fd < 0)
		file_fail(s, dir, errno);
	return s->fd >= 0;
}

/* len bytes at the file's ring position pos (the ring is file_cap + slack long). */
static int file_io(struct up_spool *s, bool wr, uint64_t pos, void *buf, size_t len)
{
	uint64_t size = (uint64_t)s->file_cap + UP_SPOOL_SLACK;

	while (len) {
		uint64_t at = pos % size;
		size_t n = len < size - at ? len : (size_t)(size - at);
		ssize_t r = wr ? pwrite(s->fd, buf, n, (off_t)at) : pread(s->fd, buf, n, (off_t)at);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		pos += (uint64_t)r;
		buf = (uint8_t *)buf + r;
		len -= (size_t)r;
	}
	return 0;
}

static int file_push(struct up_spool *s, const uint8_t *p, size_t len)
{
	int rc;

	if (!len)
		return 0;
	if (!file_open(s) || file_q(s) + len > (uint64_t)s->file_cap + UP_SPOOL_SLACK)
		return -ENOSPC;
	rc = file_io(s, true, s->fhead, (void *)p, len);
	if (rc) {
		file_fail(s, "write", -rc);
		return -ENOSPC;
	}
	s->fhead += len;
	s->spilled += len;
	if (file_q(s) > s->peak_file)
		s->peak_file = (size_t)file_q(s);
	return 0;
}

static int mem_push(struct up_spool *s, const uint8_t *p, size_t len)
{
	struct up_spool_chunk *c = s->tail;

	if (!c || c->cap - c->len < len) {
		size_t cap = len > CHUNK ? len : CHUNK;

		if (s->spare && s->spare->cap >= cap) {
			c = s->spare;
			s->spare = c->next;
			s->nspare--;
		} else {
			c = malloc(sizeof(*c) + cap);
			if (!c)
				return -ENOMEM;
			c->cap = cap;
		}
		c->next = NULL;
		c->len = c->off = 0;
		if (s->tail)
			s->tail->next = c;
		else
			s->head = c;
		s->tail = c;
	}
	memcpy(c->data + c->len, p, len);
	c->len += len;
	s->mem_q += len;
	if (s->mem_q > s->peak_mem)
		s->peak_mem = s->mem_q;
	return 0;
}

int up_spool_push(struct up_spool *s, const void *recs, size_t len)
{
	const uint8_t *b = recs;
	size_t at = 0, run = 0; /* records from run on go to the file together */

	while (at + sizeof(struct uprobe_raw_rec) <= len) {
		const struct uprobe_raw_rec *r = (const void *)(b + at);
		size_t size = r->size;

		if (size < sizeof(*r) || size > len - at)
			break; /* never: the tracer's own copies */
		if (at == run && !file_q(s) && s->roff == s->rlen &&
		    s->mem_q + size <= s->mem_cap && !mem_push(s, b + at, size))
			run = at + size;
		at += size;
	}
	if (file_push(s, b + run, at - run)) {
		s->dropped += at - run;
		return -ENOSPC;
	}
	return 0;
}

/* More of the file read back behind what is left of the last read. */
static bool read_back(struct up_spool *s)
{
	size_t left = s->rlen - s->roff, want;
	uint64_t q = file_q(s);

	if (!q)
		return false;
	want = q < READ_BACK ? (size_t)q : READ_BACK;
	if (left + want > s->rcap) {
		size_t cap = left + want;
		uint8_t *nb = malloc(cap);

		if (!nb)
			return false;
		memcpy(nb, s->rbuf + s->roff, left);
		free(s->rbuf);
		s->rbuf = nb;
		s->rcap = cap;
	} else {
		memmove(s->rbuf, s->rbuf + s->roff, left);
	}
	s->roff = 0;
	s->rlen = left;
	if (file_io(s, false, s->ftail, s->rbuf + left, want)) {
		/* what cannot be read back is lost: the file is given up */
		file_fail(s, "read", errno ? errno : EIO);
		s->ftail = s->fhead;
		return false;
	}
	s->ftail += want;
	s->rlen += want;
	return true;
}

const struct uprobe_raw_rec *up_spool_next(struct up_spool *s)
{
	for (;;) {
		size_t left = s->rlen - s->roff;

		if (left >= sizeof(struct uprobe_raw_rec)) {
			const struct uprobe_raw_rec *r = (const void *)(s->rbuf + s->roff);

			if (r->size >= sizeof(*r) && r->size <= left) {
				s->roff += r->size;
				return r;
			}
			if (r->size < sizeof(*r) || !read_back(s)) {
				s->roff = s->rlen = 0; /* never: whole records went in */
				return NULL;
			}
			continue;
		}
		if (s->head) {
			struct up_spool_chunk *c = s->head;

			if (c->off < c->len) {
				const struct uprobe_raw_rec *r = (const void *)(c->data + c->off);

				c->off += r->size;
				s->mem_q -= r->size;
				return r;
			}
			/* a chunk read to its end: kept for reuse, or freed */
			s->head = c->next;
			if (!s->head)
				s->tail = NULL;
			if (s->nspare < SPARE_MAX && c->cap == CHUNK) {
				c->next = s->spare;
				s->spare = c;
				s->nspare++;
			} else {
				free(c);
			}
			continue;
		}
		/* nothing in memory: the file, behind a record cut by the last read's end */
		if (!read_back(s))
			return NULL;
	}
}
