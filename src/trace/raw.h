/* SPDX-License-Identifier: MIT */
/*
 * Raw trace files: `uprobe trace --format raw -o FILE` writes every event as the
 * fast path recorded it (the ring's bytes, struct uprobe_raw_rec, no formatting), so
 * that the tracer keeps up with a hot thread; `uprobe report FILE` formats them later,
 * line for line as `uprobe trace` would have printed them live.
 *
 * A file is a magic ("UPRAWv1\n"), then blocks, each a struct up_raw_block and len
 * bytes (padded to 8):
 *
 *   EVENT    an event spec: its index, the frame words its records hold, its text
 *   SITE     a probe of an event in a process: probe id, pid, address, file bias
 *   THREAD   a thread's name, before its first record
 *   RECORDS  records, struct uprobe_raw_rec each (the trap path's too, one a block)
 *   END      how many records and how many were lost (the ring was full)
 *
 * The writer never formats and never reads a process; the reader never touches one.
 * Prefix: up_raw_.
 */
#ifndef UPROBE_TRACE_RAW_H
#define UPROBE_TRACE_RAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define UP_RAW_MAGIC "UPRAWv1\n"

enum up_raw_type {
	UP_RAW_EVENT = 1,
	UP_RAW_SITE = 2,
	UP_RAW_THREAD = 3,
	UP_RAW_RECORDS = 4,
	UP_RAW_END = 5,
	UP_RAW_MAP = 6, /* an executable file mapping of a process whose stacks are recorded */
};

struct up_raw_block {
	uint32_t type; /* enum up_raw_type */
	uint32_t len;  /* bytes that follow, before the padding to 8 */
};

struct up_raw_event {
	uint32_t index; /* the spec's, as given (-e order) */
	uint32_t pad;
	/* char text[]: the spec, NUL-terminated */
};

struct up_raw_site {
	uint32_t probe; /* the records' probe field */
	uint32_t event;
	int32_t pid;
	uint32_t is32;
	uint64_t vaddr; /* the probed address (a return probe: the function's) */
	uint64_t bias;	/* @+OFFSET reads at bias + OFFSET */
	uint64_t regs;	/* bit i: word i of struct user_regs_struct is in its records */
};

struct up_raw_thread {
	int32_t pid, tid;
	char comm[16];
};

/* A process's executable file mapping, so that report walks and names its stacks as
   trace does (the unwind tables of the file at path); a later one replaces what it
   overlaps. */
struct up_raw_map {
	int32_t pid;
	uint32_t pad;
	uint64_t start, end, offset, ino;
	/* char path[]: NUL-terminated */
};

struct up_raw_end {
	uint64_t records, lost;
};

/* Writers: 0, or a negative errno of the write. */
int up_raw_write_magic(FILE *out);
int up_raw_write_event(FILE *out, uint32_t index, const char *text);
int up_raw_write_site(FILE *out, const struct up_raw_site *s);
int up_raw_write_map(FILE *out, const struct up_raw_map *m, const char *path);
int up_raw_write_thread(FILE *out, pid_t pid, pid_t tid, const char *comm);
int up_raw_write_records(FILE *out, const void *recs, size_t len);
int up_raw_write_end(FILE *out, uint64_t records, uint64_t lost);

struct up_raw_report_opts {
	bool json;   /* a JSON object a line, as uprobe trace --format json */
	bool header; /* the trace file's comment header first (text) */
};

/*
 * What a reader skips and goes on past, by kind.  A record's size (the slot, from the
 * record framing) says where the next one starts, so a record that cannot be read is
 * skipped alone; a block's header says where the next block starts, so a block that
 * cannot be read is skipped alone.  Only a record whose size is impossible loses the
 * rest of its block, and only a bad magic or a block over 1 GiB (no framing left) ends
 * the reading.
 */
enum up_raw_skip_kind {
	UP_RAW_SKIP_PROBE, /* records of a probe no SITE block named */
	UP_RAW_SKIP_LEN,   /* records whose length does not fit their slot or header */
	UP_RAW_SKIP_REGS,  /* records too short for their registers */
	UP_RAW_SKIP_REST,  /* the rests of RECORDS blocks, after a record of impossible size */
	UP_RAW_SKIP_BLOCK, /* EVENT, SITE, THREAD, END blocks that cannot be read; unknown types */
	UP_RAW_SKIP_KINDS
};

struct up_raw_stats {
	uint64_t records; /* formatted */
	uint64_t lost;	  /* as the END block says */
	bool ended;	  /* an END block was read (else the file was cut short) */
	uint64_t skipped; /* all the skip[].n */
	struct {
		uint64_t n;	 /* how many of the kind were skipped */
		char first[160]; /* the first: "at byte N: why" */
	} skip[UP_RAW_SKIP_KINDS];
};

/*
 * Formats every record of in to out.  0, or -EINVAL with err saying what is wrong
 * with the file (and at which byte) when it cannot be read on (not a raw trace, a block
 * of impossible size), or the errno of a failed write.  A file cut short (in a block,
 * or before its END) gives 0 with st->ended false, its whole records printed.  Records
 * and blocks that cannot be read are skipped and counted in st (see above), and the
 * rest is printed.
 */
int up_raw_report(FILE *in, FILE *out, const struct up_raw_report_opts *o,
		  struct up_raw_stats *st, char *err, size_t errlen);

#endif /* UPROBE_TRACE_RAW_H */
