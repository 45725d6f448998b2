/* SPDX-License-Identifier: MIT */
/*
 * What the subcommands of the uprobe command share.  Each subcommand lives in its own
 * file (decode.c, list.c, ...) and is listed in main.c's table.  Subcommands parse and
 * print; the work is done by library calls.
 */
#ifndef UPROBE_TOOLS_CLI_H
#define UPROBE_TOOLS_CLI_H

#include <stdbool.h>
#include <stdio.h>

struct up_sym_elf;

/* Exit statuses of every subcommand. */
enum {
	CLI_OK = 0,
	CLI_FAIL = 1,  /* ran, but found nothing / the operation failed */
	CLI_USAGE = 2, /* bad arguments, or an input that cannot be used */
};

struct cli_cmd {
	const char *name;
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
	const char *synopsis;		   /* "decode [-m 32|64] FILE [SYMBOL]" */
	const char *summary;		   /* one line for `uprobe --help` */
	void (*usage)(FILE *out);	   /* the subcommand's full help */
};

extern const struct cli_cmd cli_cmd_decode;
extern const struct cli_cmd cli_cmd_list;
extern const struct cli_cmd cli_cmd_mount;
extern const struct cli_cmd cli_cmd_report;
extern const struct cli_cmd cli_cmd_run;
extern const struct cli_cmd cli_cmd_trace;

/* "uprobe CMD: message\n" on stderr. */
void cli_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Opens an ELF file for cmd; on failure prints why, naming the file ("not an ELF file",
 * "ELF machine 183 (aarch64) is not x86", strerror) and returns NULL.
 */
struct up_sym_elf *cli_open_elf(const char *cmd, const char *path);

/*
 * Opens -o FILE for cmd, for writing (created, truncated), or stdout for "-"; on a
 * refusal or failure prints why, naming the file, and returns NULL.  In a sticky
 * world-writable directory (/tmp) a symlink is not followed, nor another user's file
 * or FIFO written, unless ours or the directory owner's (the kernel's protected_symlinks,
 * protected_regular and protected_fifos, whatever those are set to); elsewhere a symlink
 * is followed (/dev/stdout, a link of one's own).  A block device is refused.
 */
FILE *cli_open_output(const char *cmd, const char *path);

/*
 * --listen HOST:PORT (listen.c): GET /metrics served from a thread of its own, the
 * session's metrics rendered by the main thread between turns of its loop.  A scrape
 * makes cli_listen_fd readable and, with signal_main, sends the main thread SIGUSR2,
 * whose handler (the caller's, installed before start, without SA_RESTART) must make
 * its loop return.  start: serving, or -errno with err;
 * where: "ADDR:PORT" as bound; due: a scrape waits (after the loop returned -EINTR);
 * serve: render for the waiting scrapes; stop: the server gone.
 */
struct cli_listen;
struct up_trace;
int cli_listen_start(const char *spec, unsigned max_series, bool signal_main,
		     struct cli_listen **out, char *err, size_t errlen);
const char *cli_listen_where(const struct cli_listen *l);
int cli_listen_fd(const struct cli_listen *l);
bool cli_listen_due(struct cli_listen *l);
void cli_listen_serve(struct cli_listen *l, struct up_trace *tr);
/* the same, with render writing the metrics (om: OpenMetrics, "# EOF" its own) */
void cli_listen_serve_with(struct cli_listen *l,
			   int (*render)(void *arg, FILE *f, bool om, unsigned max_series), void *arg);
void cli_listen_stop(struct cli_listen *l);

/*
 * A tracing loop's signals (signals.c): cli_on_stop sets cli_stop_sig to the signal (a
 * stop); cli_on_tick (an interval) sets cli_tick_due and, cli_on_scrape (--listen) alone,
 * cli_stop_sig to CLI_STOP_TICK when no stop is pending, so that the loop's wait returns
 * without ending.  Install them without SA_RESTART.
 */
#define CLI_STOP_TICK (-1)
extern volatile int cli_stop_sig;
extern volatile int cli_tick_due;
void cli_on_stop(int sig);
void cli_on_tick(int sig);
void cli_on_scrape(int sig);
/* SIGINT, SIGTERM and SIGHUP to cli_on_stop.  restart: during the attach and the arming,
   so that a stop there is kept for the loop instead of failing a wait half-way (a
   stop before the handler existed killed the tracer with the probes half-armed);
   then without, so that the loop's wait returns. */
void cli_catch_stops(bool restart);

/* Prints "Try 'uprobe help CMD'." style hint and returns CLI_USAGE. */
int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
