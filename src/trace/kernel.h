/* SPDX-License-Identifier: MIT */
/*
 * The kernel backend of `uprobe trace --backend kernel`: the same p:/r: specs, but
 * given to the kernel's own uprobe tracer (Documentation/trace/uprobetracer.rst)
 * through tracefs instead of being run over ptrace.  It doubles as the oracle the
 * ptrace tracer is tested against.
 *
 * How it uses tracefs (mounted at /sys/kernel/tracing when missing; needs root):
 *   - probes are defined in the global uprobe_events, one write() per line, the file
 *     opened O_WRONLY|O_APPEND and never seeked; PATH:SYMBOL[+OFF] targets are turned
 *     into PATH:0xFILEOFFSET first (the kernel takes file offsets only);
 *   - everything else happens in a private trace instance, instances/up_kb_PID_N, so
 *     that the global buffer, set_event_pid and options of other users are left
 *     alone: the instance gets options/irq-info off (so lines are the event text format
 *     of format.h byte for byte), record-tgid on in JSON mode (for "pid"), trace_clock
 *     mono (CLOCK_MONOTONIC, as the ptrace tracer stamps), a larger buffer_size_kb,
 *     the optional set_event_pid, and its own events/GRP/EVENT/enable;
 *   - hits are read from the instance's trace_pipe; counts (-c) of one process are its
 *     lines counted there, of every process the global uprobe_profile's (which counts
 *     every hit of the probe, whatever the pid filter).
 *   Instances left by a crashed process (its pid gone) are removed by up_kb_open().
 *
 * Events are named as the spec names them (default group "uprobes"); a name already
 * defined in uprobe_events is refused by the kernel (-EEXIST).  Removing kernel
 * uprobes is slow (tens of ms each): keep sets small.
 *
 * Library rules: nothing here prints except to opts->out, nothing exits; errors are
 * negative errnos with the details given to opts->log.  Prefix: up_kb_.
 */
#ifndef UPROBE_TRACE_KERNEL_H
#define UPROBE_TRACE_KERNEL_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "trace/spec.h"

struct up_kb; /* a set of kernel uprobe events and the trace instance they report to */

struct up_kb_opts {
	int json;	  /* 0: kernel text lines; 1: JSON lines (format.h's schema) */
	FILE *out;	  /* where up_kb_drain() writes; NULL: stdout is NOT assumed, lines are dropped */
	pid_t pid_filter; /* 0: every process; else only this pid (set_event_pid) */
	void (*log)(void *arg, const char *msg); /* one message per call, no '\n'; may be NULL */
	void *log_arg;
};

/*
 * Finds (or mounts) tracefs and creates the private instance.  0 and *out, or
 * -EPERM (not root / tracefs not writable), -ENOENT (no tracefs, or a kernel without
 * CONFIG_UPROBE_EVENTS), -ENOMEM, or another errno of mkdir(2); the reason is logged.
 */
int up_kb_open(const struct up_kb_opts *o, struct up_kb **out);

/*
 * Defines one kernel event for spec (copied; the caller keeps and frees its own).
 * Only event specs (p:/r:) with a file target: a seed spec or a 0xVADDR target is
 * -EINVAL (logged).  PATH:SYMBOL[+OFF] is resolved through the file's symbols and
 * PT_LOADs: -ENOENT for a missing file or symbol, -ENOEXEC for a non-x86 ELF.  $argN
 * is rewritten to the x86-64 ABI's registers/stack slots for a 64-bit file (refused,
 * -EINVAL, for a 32-bit one).  The kernel's own refusal is returned as its errno
 * (-EINVAL, -EEXIST ...) with the kernel's error_log entry logged.  Must precede
 * up_kb_enable().
 */
int up_kb_add(struct up_kb *kb, const struct up_spec *spec);

/*
 * Configures the instance (see above), clears it, enables every event added and
 * opens trace_pipe.  0 or a negative errno; -EINVAL when no event was added.
 */
int up_kb_enable(struct up_kb *kb);

/* The instance's trace_pipe (O_NONBLOCK) to poll for POLLIN; -EBADF before enable. */
int up_kb_poll_fd(struct up_kb *kb);

/*
 * Reads what trace_pipe holds now (never blocks) and writes each complete line to
 * opts->out: text mode as the kernel wrote it; JSON mode one object per line as
 * format.h describes ("time_ns" from the mono clock at microsecond resolution).
 * A "[LOST N EVENTS]" line is logged and counted (up_kb_lost); in text mode it is
 * also written.  Returns the number of lines written, or a negative errno.
 */
int up_kb_drain(struct up_kb *kb);

/*
 * Loops poll(trace_pipe, 100 ms) + up_kb_drain() until *stop becomes nonzero (stop may
 * be NULL) or, when wait_pid != 0, that process has exited (a child of ours is checked
 * with waitid(WNOWAIT), so the caller can still reap it; another process with kill(0)
 * and /proc), then drains once more.  Returns the lines written, or a negative errno.
 */
int up_kb_run(struct up_kb *kb, volatile int *stop, pid_t wait_pid);

/*
 * Writes one line per event of ours, as -c prints them for the ptrace backend: with a
 * pid filter the lines of that process read from trace_pipe (opts.out NULL: they are
 * counted, not printed), else the kernel's uprobe_profile counts.  Returns the lines
 * written or a negative errno.
 */
int up_kb_counts(struct up_kb *kb, FILE *out);

/* The uprobe_profile hit count of our event GRP/EVENT: 0, or -ENOENT when not ours. */
int up_kb_hits(struct up_kb *kb, const char *group, const char *event, uint64_t *hits);

/*
 * Events the instance lost: the "overrun" of its per_cpu/cpu*\/stats plus what the
 * "[LOST N EVENTS]" lines said.  0 or a negative errno.  Check before trusting counts.
 */
int up_kb_lost(struct up_kb *kb, uint64_t *lost);

/*
 * Disables and removes our events and the instance; accepts NULL, and a set that
 * failed half-way.  Unmounts nothing.
 */
void up_kb_close(struct up_kb *kb);

/*
 * For tests and stale state: removes every event of group from uprobe_events
 * (those still enabled somewhere stay: the kernel refuses with EBUSY).  Returns the
 * number removed or a negative errno.
 */
int up_kb_remove_group(const struct up_kb_opts *o, const char *group);

#endif /* UPROBE_TRACE_KERNEL_H */
