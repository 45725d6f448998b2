/* SPDX-License-Identifier: MIT */
/*
 * The control filesystem's internals, shared by its files: fs.c (the tree, the FUSE
 * operations, the loop that serves requests and the tracer's waits) and files.c (what
 * reading and writing each file means).  Not installed.  Prefix: none (file-local names
 * of one program part), as fs.c had them.
 */
#ifndef UPROBE_FS_FSD_H
#define UPROBE_FS_FSD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define FUSE_USE_VERSION 35
#include <fuse3/fuse_lowlevel.h>

#include "fs/fs.h"
#include "fs/ring.h"
#include "trace/spec.h"

#define TRACE_SIZE_DEFAULT (4u << 20)
#define ERRLOG_MAX	   16 /* TRACING_LOG_ERRS_MAX */

enum node {
	N_NONE,
	N_ROOT,
	N_EVENTS_DIR,
	N_UPROBE_EVENTS,
	N_UPROBES_EVENTS, /* the seed's spelling, the same file */
	N_CURRENT_TRACER, /* "nop", the only tracer */
	N_README,	  /* the kernel's mini-HOWTO, the lines of what is here */
	N_EVENTS_ENABLE,  /* events/enable */
	N_GROUP_ENABLE,	  /* events/GRP/enable */
	N_FORMAT,	  /* events/GRP/EVENT/format */
	N_ID,		  /* events/GRP/EVENT/id */
	N_DYNAMIC_EVENTS, /* its uprobe lines, as the kernel's dynamic_events shows them */
	N_TRACE,
	N_TRACE_PIPE,
	N_TRACING_ON,
	N_PROFILE,
	N_ERROR_LOG,
	N_SET_EVENT_PID,
	N_GROUP_DIR, /* events/GRP */
	N_EVENT_DIR, /* events/GRP/EVENT */
	N_ENABLE,
	N_FILTER,
	N_TRIGGER,
	N_HIST,
};

struct waiter {
	fuse_req_t req;
	size_t size;
	bool interrupted;
	struct waiter *next;
};

/*
 * A request that came while the tracer waited for a tracee's stop (the wait hook): a
 * write, or an open's or truncate's side effect, done when the wait is over.  A write
 * whose writer is interrupted meanwhile (the tracer's stop reaching it) is answered at
 * once, its errors left to error_log.
 */
struct work {
	fuse_req_t req; /* a write still to be answered; NULL: answered, or a side effect */
	enum node node;
	unsigned idx;
	fuse_ino_t ino;
	int flags;  /* a side effect: the open's flags (O_TRUNC, O_APPEND) */
	char *text; /* a write: its bytes, NUL-terminated */
	size_t size;
	pid_t pid; /* the writer's: never reached while it waits for its answer */
	bool interrupted;
	struct work *next;
};

/* The request being served while the tracer works for it (reply-first window). */
struct cur {
	fuse_req_t req;
	bool interrupted, replied;
	bool open; /* an open (fi), else a write (size) */
	size_t size;
	struct fuse_file_info fi;
};

struct fsd {
	const struct up_fs_opts *opts;
	struct fuse_session *se;
	struct up_trace *tr;
	struct up_fs_ring ring;
	FILE *out;
	char *errlog[ERRLOG_MAX]; /* oldest first */
	unsigned nerr;
	char **groups;
	unsigned ngroups;
	pid_t *pids; /* set_event_pid */
	unsigned npids;
	bool on;
	bool last_seed; /* the kind of the last spec added: which trace header */
	struct waiter *waiters;
	char lastlog[512];
	/* serving while the tracer waits for a stop (fs.c: wait_hook) */
	int in_hook;	      /* > 0: inside the hook: nothing may call the tracer */
	bool hooked;	      /* the hook ran: dispatch again (it drained the wake-ups) */
	struct fuse_buf hbuf; /* the hook's request buffer (the loop's is in use) */
	struct work *work, **work_tail;
	struct cur cur;
	pid_t caller_pid; /* of that request: blocked in it, so never reached */
};

struct ofile {
	enum node node;
	char *data; /* what a read sees: made at open */
	size_t len;
};

struct text {
	char *p;
	size_t len, cap;
	bool oom;
};

/* An event's id (its id and format files): a number of its own, above the kernel's. */
#define EVENT_ID_BASE 20000u

void text_put(struct text *t, const char *s, size_t n);
void text_printf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fslog(struct fsd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void session_log(void *arg, const char *msg);
int group_index(struct fsd *d, const char *name, bool add);
/* The live event spec i, or NULL. */
const struct up_spec *event_spec(struct fsd *d, unsigned i);
bool group_live(struct fsd *d, unsigned g);
void errlog_clear(struct fsd *d);
void errlog_add(struct fsd *d, const char *line, const char *msg, const char *caret);
void trace_reset(struct fsd *d);
/* O_TRUNC on uprobe_events: every probe goes (-EBUSY, none going, if one is enabled);
   on dynamic_events (events_only): every p:/r: event, the seed's lines stay. */
int clear_probes(struct fsd *d, bool events_only);
void apply_pid_filter(struct fsd *d);
/* readme.c: README's text; event spec i's format file */
void up_fs_readme(struct text *t);
void up_fs_format(struct fsd *d, unsigned i, struct text *t);
/* Writing text to node n (idx: its event or group): 0 or a negative errno. */
int node_write(struct fsd *d, enum node n, unsigned idx, char *text);
/* What reading node n shows now. */
int node_text(struct fsd *d, enum node n, unsigned idx, struct text *t);

#endif
