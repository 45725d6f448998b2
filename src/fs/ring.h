/* SPDX-License-Identifier: MIT */
/*
 * The control filesystem's trace buffer: whole text lines in a bounded byte ring that,
 * when full, drops its oldest lines, as ftrace's overwriting ring does.  Bytes come in
 * through a FILE* (fopencookie), so the tracing session writes into it as into any
 * stream; only complete lines become visible.  Prefix: up_fs_ring_.
 */
#ifndef UPROBE_FS_RING_H
#define UPROBE_FS_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct up_fs_ring {
	char *buf;	   /* cap bytes; the lines are buf[start, start + len) (no wrap) */
	size_t cap, start, len;
	char *part;	   /* a line written only in part so far */
	size_t partlen, partcap;
	uint64_t dropped;  /* lines overwritten because the ring was full */
	uint64_t written;  /* lines ever committed */
	void (*on_lines)(void *arg); /* after new lines were committed */
	void *arg;
};

int up_fs_ring_init(struct up_fs_ring *r, size_t cap);
void up_fs_ring_fini(struct up_fs_ring *r);
/* Appends bytes; each '\n' completes a line. */
void up_fs_ring_write(struct up_fs_ring *r, const char *data, size_t n);
void up_fs_ring_clear(struct up_fs_ring *r);
/* The committed lines, contiguous. */
static inline const char *up_fs_ring_data(const struct up_fs_ring *r, size_t *len)
{
	*len = r->len;
	return r->buf + r->start;
}
/*
 * Takes up to max bytes from the front (trace_pipe): whole lines when at least one
 * fits, else the front of the first line.  Returns the number of bytes copied to out.
 */
size_t up_fs_ring_consume(struct up_fs_ring *r, char *out, size_t max);
/* A write-only FILE* feeding the ring (fully buffered: lines arrive at fflush). */
FILE *up_fs_ring_open_stream(struct up_fs_ring *r);

#endif
