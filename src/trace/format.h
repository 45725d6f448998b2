/* SPDX-License-Identifier: MIT */
/*
 * Output formats of the tracer: text lines byte for byte as the two kernel tracers
 * print them, and JSON lines for programs.  Every function writes into a caller
 * buffer with snprintf semantics (returns the length the whole output needs, or a
 * negative errno; output that does not fit is cut, still NUL-terminated) and ends
 * every line it writes with '\n'.  Nothing here reads a process except through the
 * up_fetch_env the *_hit functions are given; nothing prints, nothing exits.
 *
 * 1. The seed's format (seeds/008, trace_uprobes.c of 2010, ftrace of 2.6.33):
 *
 *        <comm>-<tid> [<cpu>] <sec>.<usec>: : 0x<addr>: <T> 0x<daddr>: <hex>  <ascii>
 *
 *    "%16s-%-5d [%03d] %5lu.%06lu: " is ftrace's context of the time, ": " what an
 *    empty kernel symbol for the user address printed, then the handler's message:
 *      D/S: "0x%lx: %c 0x%lx: " + 8 bytes a line as "%02x " into a 25-column field,
 *           then the printable ASCII (' '..'~', else '.') of those bytes;
 *      D/S that cannot be read: "0x%lx: %c 0x%lx: Data capture failed. Invalid address"
 *      A:   "0x%lx: A ARG %d: %016lx", one line per argument.
 *    One change from the 2010 code: a short last line carries no trailing blanks (the
 *    kernel padded its ASCII area with spaces; the seed's documentation shows none).
 *    A NULL comm prints as "<...>", as in the seed's sample (comm not recorded).
 *
 * 2. The kernel's uprobe event format (trace_output.c + trace_uprobe.c of today, with
 *    the irq-info columns off, which a user-space tracer cannot know):
 *
 *        "%16s-%-7d [%03d] %5lu.%06lu: " EVENT ": (0x%lx)" { " " NAME "=" VALUE }
 *        "%16s-%-7d [%03d] %5lu.%06lu: " EVENT ": (0x%lx <- 0x%lx)" ...   (return:
 *                                                         return address <- function)
 *    VALUE as up_fetch_format() prints it.  A $ustack argument is not on the line: its
 *    frames follow it, one a line, as the kernel's stacktrace trigger prints them:
 *        " => " NAME            (NAME as the tracer named it, else "0x%lx")
 *
 * 3. JSON lines, one object per hit, keys always in this order:
 *
 *    event spec:
 *      {"time_ns":N, "pid":N, "tid":N, "cpu":N, "comm":"S", "event":"GRP/EVENT",
 *       "addr":"0xHEX", ["ret_addr":"0xHEX",] "args":{"NAME":VALUE, ...}}
 *      addr is the probed address (for a return probe, the function's); ret_addr,
 *      only for return probes, is where the function returned to.  VALUE is a JSON
 *      number for u*, s* and bitfield types (s* signed), a string "0xHEX" for x*
 *      types, a JSON string for string types, an array of strings (the frames) for
 *      $ustack, and null when the read faulted.
 *    seed spec (up PID ADDR D|S|A ...):
 *      {"time_ns":N, "pid":N, "tid":N, "cpu":N, "comm":"S", "event":"up/D",
 *       "addr":"0xHEX", "type":"D"|"S", "data_addr":"0xHEX", "data":"HEXBYTES"|null}
 *      {..., "event":"up/A", "addr":"0xHEX", "type":"A", "args":["0x%016x", ...]}
 *      data is null when the read failed ("Data capture failed. Invalid address").
 *    Strings are escaped per RFC 8259: '"', '\\', control characters; bytes that are
 *    not valid UTF-8 are written as \u00XX (their Latin-1 reading).  A NULL comm is "".
 */
#ifndef UPROBE_TRACE_FORMAT_H
#define UPROBE_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "trace/fetch.h"
#include "trace/spec.h"

#define UP_FMT_SEED_BYTES_PER_LINE 8

/* Who hit the probe, where and when. */
struct up_fmt_ctx {
	const char *comm; /* the thread's comm; NULL: "<...>" in text, "" in JSON */
	int pid;	  /* thread group id */
	int tid;	  /* the thread: what the trace file's TASK-PID column shows */
	int cpu;
	uint64_t time_ns; /* CLOCK_MONOTONIC, like the trace clock "local" roughly */
};

/* One hit of an event spec: the values come from up_fetch_eval_all(). */
struct up_fmt_event {
	uint64_t addr;	   /* the probed address; for a return probe, the function's */
	uint64_t ret_addr; /* return probes: where it returned to */
	const struct up_fetch_value *vals; /* spec->nargs values */
};

/* The 4 comment lines a trace file opens with, in each text format. */
int up_fmt_seed_header(char *buf, size_t size);
int up_fmt_event_header(char *buf, size_t size);

/* The context prefix alone ("<comm>-<tid> [<cpu>] <s>.<us>: "), seed: with ": ". */
int up_fmt_seed_prefix(char *buf, size_t size, const struct up_fmt_ctx *ctx);
int up_fmt_event_prefix(char *buf, size_t size, const struct up_fmt_ctx *ctx);

/*
 * Seed D or S lines for len bytes read at daddr (type 'D' or 'S'); data == NULL
 * means the read failed and gives the one "Data capture failed" line.
 */
int up_fmt_seed_dump(char *buf, size_t size, const struct up_fmt_ctx *ctx, uint64_t addr,
		     char type, uint64_t daddr, const uint8_t *data, size_t len);

/* Seed A lines, "ARG 1" .. "ARG n". */
int up_fmt_seed_args(char *buf, size_t size, const struct up_fmt_ctx *ctx, uint64_t addr,
		     const uint64_t *args, unsigned int n);

/*
 * A whole seed hit: reads what the spec asks (D: size bytes at daddr, S: size bytes at
 * the stack pointer, A: the first size ABI arguments) through env and formats it.
 * -EINVAL for a spec that is not a seed spec.
 */
int up_fmt_seed_hit(char *buf, size_t size, const struct up_fmt_ctx *ctx,
		    const struct up_spec *spec, const struct up_fetch_env *env);
int up_fmt_seed_hit_json(char *buf, size_t size, const struct up_fmt_ctx *ctx,
			 const struct up_spec *spec, const struct up_fetch_env *env);

/* One event line, text or JSON. -EINVAL for a spec that is not an event spec. */
int up_fmt_event_text(char *buf, size_t size, const struct up_fmt_ctx *ctx,
		      const struct up_spec *spec, const struct up_fmt_event *ev);
int up_fmt_event_json(char *buf, size_t size, const struct up_fmt_ctx *ctx,
		      const struct up_spec *spec, const struct up_fmt_event *ev);

/* s[0..n) as a JSON string with its quotes. snprintf semantics. */
int up_fmt_json_string(char *buf, size_t size, const char *s, size_t n);

/* A line of -c's table, the same for both backends: where (the file, or the seed
   spec's pid), the probe (GROUP/EVENT, or the seed line), its hits. */
int up_fmt_count_row(char *buf, size_t size, const char *where, const char *label,
		     uint64_t hits);
/* The same row as a JSON line: {"type":"count","where":W,"event":LABEL,"hits":N}. */
int up_fmt_count_json(char *buf, size_t size, const char *where, const char *label, uint64_t hits);

#endif /* UPROBE_TRACE_FORMAT_H */
