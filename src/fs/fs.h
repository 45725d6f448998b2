/* SPDX-License-Identifier: MIT */
/*
 * The control filesystem: a FUSE (libfuse3) filesystem whose files behave as
 * tracefs's do for uprobes, so that scripts written for /sys/kernel/tracing drive
 * this tracer unchanged, without root (seeds/008's interface):
 *
 *   uprobe_events, uprobes_events  a written line adds a probe (either spec form; a
 *                                  seed line traces the PID it names); opening with
 *                                  O_TRUNC removes every probe first; "-:[GRP/]EVENT"
 *                                  removes one; reading lists them (up_spec_format)
 *   dynamic_events                 the same for p:/r: events only
 *   error_log                      why the last bad lines failed: the kernel's message,
 *                                  the command and a caret
 *   trace                          header + lines; opening with O_TRUNC clears it
 *   trace_pipe                     blocking reads that consume the lines
 *   tracing_on                     0 / 1
 *   current_tracer                 nop
 *   README                         the kernel's mini-HOWTO for what is here
 *   uprobe_profile                 hits per event
 *   set_event_pid                  processes to trace (attached) and filter on
 *   events/enable, events/GRP/enable, events/GRP/EVENT/enable   0 / 1 (created 0)
 *   events/GRP/EVENT/filter        a filter expression on the event's arguments
 *   events/GRP/EVENT/trigger, hist a hist trigger and its table
 *   events/GRP/EVENT/format, id    the event's fields, its number
 *
 * One thread does everything: the FUSE requests and every ptrace call of the session
 * are served from one poll() loop, so no lock is needed and the tracees are only ever
 * touched by their tracer thread.  While the tracer waits for a tracee to stop, the
 * library calls back (uprobe_ctx_set_wait_hook) and the loop serves FUSE there, so
 * that no request -- a tracee's included -- waits on the tracer.  Prefix: up_fs_.
 */
#ifndef UPROBE_FS_FS_H
#define UPROBE_FS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct up_trace;

struct up_fs_opts {
	const char *mountpoint;
	const pid_t *pids; /* processes to trace from the start (npids of them) */
	unsigned npids;
	size_t trace_size; /* bytes of trace kept; 0: 4 MiB */
	int stop_fd;	   /* readable (a signal handler's pipe): unmount and return; -1: none */
	bool debug;	   /* libfuse's request log on stderr */
	int verbose;
	void (*log)(void *arg, const char *msg);
	void *log_arg;
	/* called once the filesystem is mounted and served */
	void (*on_ready)(void *arg);
	/*
	 * A command to run under the mount (argv, NULL-terminated; NULL: none): started once
	 * DIR is served, it and every descendant traced, so that a probe by path fires in any
	 * program it starts; the mount ends when it exits, its wait status in *status.
	 */
	char *const *argv;
	int *status;
	/*
	 * Which processes enabling an event placed by path reaches beyond COMMAND's tree,
	 * the pids given and set_event_pid's: none unless asked.  reach_all: every process
	 * that maps the file and that this one may trace; reach_uids: those of these users;
	 * reach_comms: those whose comm matches one of these globs (with uids: both must
	 * hold).  Never this process, its ancestors, or a process waiting on the mount.
	 */
	bool reach_all;
	/* wake_fd (-1: none) readable: on_wake is called between two turns of the loop
	   with the session (uprobe mount --listen renders its metrics there) */
	int wake_fd;
	bool metrics; /* the session's opts.metrics: histograms keep their sums */
	void (*on_wake)(void *arg, struct up_trace *tr);
	void *wake_arg;
	const uid_t *reach_uids;
	unsigned nreach_uids;
	char *const *reach_comms;
	unsigned nreach_comms;
};

/* True when built with libfuse3. */
bool up_fs_supported(void);

/*
 * Mounts, serves until unmounted (fusermount3 -u), stop_fd is readable or the command
 * (opts->argv) exited, then
 * lets every traced process go, its probes removed, and unmounts.  Returns 0, or a
 * negative errno (-ENOTSUP when built without libfuse3; -EIO when mounting failed; the
 * command's start failing: -ENOENT when it is not found).
 */
int up_fs_run(const struct up_fs_opts *opts);

#endif
