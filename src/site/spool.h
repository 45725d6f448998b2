/* SPDX-License-Identifier: MIT */
/*
 * The tracer's spool of records (design.md section 14): the fast path's records,
 * copied raw out of the traced processes' rings as fast as they are written, wait here
 * to be formatted -- in memory first, then in a temporary file -- so that a formatter
 * slower than the program loses nothing while the spool has room.  A FIFO of whole
 * struct uprobe_raw_rec records, bounded: at most mem bytes of records in memory (plus
 * a chunk being filled), at most file bytes in the file (plus UP_SPOOL_SLACK).
 *
 * It holds only what the tracer copied and checked (up_agent_drain_copy): it reads its
 * records' sizes without checking them again.  Prefix: up_spool_.
 */
#ifndef UPROBE_SITE_SPOOL_H
#define UPROBE_SITE_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uprobe/uprobe.h>

struct up_spool_chunk;

struct up_spool {
	size_t mem_cap, file_cap;	   /* the bounds */
	struct up_spool_chunk *head, *tail; /* memory: oldest chunk first */
	struct up_spool_chunk *spare;	   /* empty chunks kept for reuse, their pages present */
	unsigned nspare;
	size_t mem_q;			   /* bytes of records in the chunks */
	int fd;				   /* the file, -1: none (yet) */
	bool file_failed;		   /* it could not be made or written: memory only */
	uint64_t fhead, ftail;		   /* bytes ever written to, read from the file */
	uint8_t *rbuf;			   /* records read back from the file */
	size_t rcap, rlen, roff;
	/* what it held at most, and in all */
	size_t peak_mem, peak_file;
	uint64_t spilled; /* bytes that went to the file */
	uint64_t dropped; /* bytes of records a failed write of the file lost */
	char *why;	  /* the file's failure, once (the caller logs it) */
};

/* The file's slack: a span may take this much more than file_cap (its records do not
   split between memory and file). */
#define UP_SPOOL_SLACK (16u << 20)

/* total bytes: the first min(total, 64 MiB) in memory, the rest in a file */
void up_spool_init(struct up_spool *s, size_t total);
void up_spool_fini(struct up_spool *s);
/* Empty chunks for bytes of records (at most 8 MiB) made ready and present, before a
   first burst of records needs them (at a recording probe's placement). */
void up_spool_warm(struct up_spool *s, size_t bytes);
/* How many bytes of records it takes now. */
size_t up_spool_room(const struct up_spool *s);
/* Whole records, len bytes of them, no more than up_spool_room() said: 0, or -ENOSPC
   for those that did not fit (a failed file write: they are dropped and counted). */
int up_spool_push(struct up_spool *s, const void *recs, size_t len);
/* The oldest record, taken out (valid until the next call), or NULL: empty. */
const struct uprobe_raw_rec *up_spool_next(struct up_spool *s);
bool up_spool_empty(const struct up_spool *s);

#endif
