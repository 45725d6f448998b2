// SPDX-License-Identifier: MIT
/*
 * The control filesystem (fs.h) over libfuse3's low-level API.
 *
 * What this file owns: the tree of files (inodes, lookups, directories), the FUSE
 * operations, and the one loop that serves both the FUSE channel and the tracer,
 * including while the tracer waits for a stop (wait_hook).  What each file means is
 * files.c's.  It must never call ptrace from another thread (the kernel ties a tracee to
 * its tracer thread), never block in a request (a blocked trace_pipe read keeps its
 * fuse_req_t and is answered when lines come), never let a request wait on a tracee's
 * stop, and never print: messages go to opts->log, and the lines a user must see (bad
 * probe specs) go to error_log, as tracefs's do.
 *
 * Semantics follow tracefs where this tracer can honour them (files.c); where they
 * cannot, docs/design.md's section 4 says why.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"

#ifdef UPROBE_HAVE_FUSE3

#include "fs/fsd.h"
#include "trace/session.h"

/* ---- the tree -------------------------------------------------------------------------- */

static const struct root_file {
	const char *name;
	enum node node;
	mode_t mode;
} root_files[] = {
	{ "uprobe_events", N_UPROBE_EVENTS, S_IFREG | 0644 },
	{ "uprobes_events", N_UPROBES_EVENTS, S_IFREG | 0644 },
	{ "trace", N_TRACE, S_IFREG | 0644 },
	{ "trace_pipe", N_TRACE_PIPE, S_IFREG | 0444 },
	{ "tracing_on", N_TRACING_ON, S_IFREG | 0644 },
	{ "uprobe_profile", N_PROFILE, S_IFREG | 0444 },
	{ "error_log", N_ERROR_LOG, S_IFREG | 0644 },
	{ "set_event_pid", N_SET_EVENT_PID, S_IFREG | 0644 },
	{ "events", N_EVENTS_DIR, S_IFDIR | 0755 },
	{ "current_tracer", N_CURRENT_TRACER, S_IFREG | 0644 },
	{ "dynamic_events", N_DYNAMIC_EVENTS, S_IFREG | 0644 },
	{ "README", N_README, S_IFREG | 0444 },
};
#define NROOT (sizeof(root_files) / sizeof(root_files[0]))

/* An event directory's files, in inode order after the directory's own. */
static const struct {
	const char *name;
	enum node node;
} event_files[] = {
	{ "enable", N_ENABLE },
	{ "filter", N_FILTER },
	{ "trigger", N_TRIGGER },
	{ "hist", N_HIST },
	{ "format", N_FORMAT },
	{ "id", N_ID },
};

/*
 * Inode numbers are computed, never allocated: 1 the root, 2.. the root's entries in
 * table order, EVENTS_ENABLE_INO events/enable, GROUP_INO + g a group directory and
 * GROUP_ENABLE_INO + g its enable, EVENT_INO + EVENT_FILES * spec + {0 dir, then
 * event_files in order}.  Nothing to forget.  An event named by several probe lines (one
 * event, several places) is the directory of its first.
 */
#define ROOT_INO 1
#define EVENTS_ENABLE_INO 0x8000u
#define GROUP_INO 0x10000u
#define GROUP_ENABLE_INO 0x800000u
#define EVENT_INO 0x1000000u
#define EVENT_FILES 8u
#define NEVENT_FILES (sizeof(event_files) / sizeof(event_files[0]))

/* Is spec i the one whose directory its event is (the first of its name)? */
static bool event_head(struct fsd *d, unsigned i)
{
	const struct up_spec *s = event_spec(d, i);

	return s && up_trace_find(d->tr, s->group, s->event) == (int)i;
}

static enum node node_of(struct fsd *d, fuse_ino_t ino, unsigned *idx)
{
	*idx = 0;
	if (ino == ROOT_INO)
		return N_ROOT;
	if (ino >= 2 && ino < 2 + NROOT)
		return root_files[ino - 2].node;
	if (ino == EVENTS_ENABLE_INO)
		return N_EVENTS_ENABLE;
	if (ino >= EVENT_INO) {
		unsigned i = (unsigned)((ino - EVENT_INO) / EVENT_FILES);
		unsigned k = (unsigned)((ino - EVENT_INO) % EVENT_FILES);

		if (!event_head(d, i) || k > NEVENT_FILES)
			return N_NONE;
		*idx = i;
		return k ? event_files[k - 1].node : N_EVENT_DIR;
	}
	if (ino >= GROUP_ENABLE_INO && group_live(d, (unsigned)(ino - GROUP_ENABLE_INO))) {
		*idx = (unsigned)(ino - GROUP_ENABLE_INO);
		return N_GROUP_ENABLE;
	}
	if (ino >= GROUP_INO && group_live(d, (unsigned)(ino - GROUP_INO))) {
		*idx = (unsigned)(ino - GROUP_INO);
		return N_GROUP_DIR;
	}
	return N_NONE;
}

static mode_t mode_of(enum node n)
{
	switch (n) {
	case N_ROOT:
	case N_EVENTS_DIR:
	case N_GROUP_DIR:
	case N_EVENT_DIR:
		return S_IFDIR | 0755;
	case N_ENABLE:
	case N_FILTER:
	case N_TRIGGER:
	case N_GROUP_ENABLE:
	case N_EVENTS_ENABLE:
		return S_IFREG | 0644;
	case N_HIST:
	case N_FORMAT:
	case N_ID:
		return S_IFREG | 0444;
	default:
		for (size_t i = 0; i < NROOT; i++)
			if (root_files[i].node == n)
				return root_files[i].mode;
		return 0;
	}
}

static void fill_attr(struct stat *st, fuse_ino_t ino, enum node n)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = mode_of(n);
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_blksize = 4096;
	/* size 0, as tracefs says: reads are direct, so they see the content anyway */
}

/* ---- trace ----------------------------------------------------------------------------- */

static void serve_waiters(struct fsd *d)
{
	struct waiter **pp = &d->waiters;

	while (*pp) {
		struct waiter *w = *pp;

		if (w->interrupted) {
			fuse_reply_err(w->req, EINTR);
		} else if (d->ring.len) {
			char *buf = malloc(w->size ? w->size : 1);
			size_t n = buf ? up_fs_ring_consume(&d->ring, buf, w->size) : 0;

			if (buf)
				fuse_reply_buf(w->req, buf, n);
			else
				fuse_reply_err(w->req, ENOMEM);
			free(buf);
		} else {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		free(w);
	}
}

static void on_interrupt(fuse_req_t req, void *arg)
{
	struct waiter *w = arg;

	(void)req;
	w->interrupted = true; /* answered from the loop, outside libfuse's locks */
}

/* ---- serving while the tracer waits ----------------------------------------------------------
 *
 * One thread serves FUSE and traces, and the tracer sometimes waits for a tracee to stop
 * (attaching it, quiescing it to place or remove a probe).  A tracee that is itself in a
 * request to this filesystem stops only once that request is answered, so no such wait
 * may block the requests: the engine calls wait_hook instead of blocking, and the hook
 * serves FUSE there.  What reads the state is answered at once; what would call the
 * tracer (a write, an open's or a truncate's side effect) is queued as work, done in
 * order once the wait is over.  And the request being served when the tracer waits --
 * `echo $$ > set_event_pid`, or a traced shell writing uprobe_events -- is the one its
 * writer is blocked in: the stop interrupts that request, and it is answered then
 * (cur_*), the work going on after, its errors in error_log as the write has returned.
 */

/* What O_TRUNC (at open, or truncate(2)) does to node n. */
static int open_effect(struct fsd *d, enum node n, int flags)
{
	if (!(flags & O_TRUNC))
		return 0;
	switch (n) {
	case N_UPROBE_EVENTS:
	case N_UPROBES_EVENTS:
	case N_DYNAMIC_EVENTS:
		return clear_probes(d, n == N_DYNAMIC_EVENTS);
	case N_TRACE:
		trace_reset(d);
		return 0;
	case N_ERROR_LOG:
		errlog_clear(d);
		return 0;
	case N_SET_EVENT_PID:
		d->npids = 0;
		apply_pid_filter(d);
		return 0;
	default:
		return 0;
	}
}

static void work_add(struct fsd *d, struct work *w)
{
	if (!d->work_tail)
		d->work_tail = &d->work;
	*d->work_tail = w;
	d->work_tail = &w->next;
}

/* A side effect to do after the wait.  A failure cannot be told to the opener then. */
static int work_effect(struct fsd *d, enum node n, unsigned idx, int flags)
{
	struct work *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	*w = (struct work){ .node = n, .idx = idx, .flags = flags };
	work_add(d, w);
	return 0;
}

static void work_interrupt(fuse_req_t req, void *arg)
{
	struct work *w = arg;

	(void)req;
	w->interrupted = true; /* answered from the hook, outside libfuse's locks */
}

static void cur_interrupt(fuse_req_t req, void *arg)
{
	struct fsd *d = arg;

	if (d->cur.req == req)
		d->cur.interrupted = true;
}

static void cur_begin(struct fsd *d, fuse_req_t req, bool open, size_t size,
		      const struct fuse_file_info *fi)
{
	d->cur = (struct cur){ .req = req, .open = open, .size = size };
	if (fi)
		d->cur.fi = *fi;
	fuse_req_interrupt_func(req, cur_interrupt, d);
}

/* True when the request is still to be answered by its handler. */
static bool cur_end(struct fsd *d)
{
	bool todo = !d->cur.replied;

	d->cur.req = NULL;
	return todo;
}

/* Requests whose senders the tracer's stop has reached: answered now. */
static void answer_interrupted(struct fsd *d)
{
	if (d->cur.req && d->cur.interrupted && !d->cur.replied) {
		d->cur.replied = true;
		if (d->cur.open)
			fuse_reply_open(d->cur.req, &d->cur.fi);
		else
			fuse_reply_write(d->cur.req, d->cur.size);
	}
	for (struct work *w = d->work; w; w = w->next)
		if (w->req && w->interrupted) {
			fuse_reply_write(w->req, w->size);
			w->req = NULL;
		}
	serve_waiters(d);
}

static void wait_hook(void *arg, int fd)
{
	struct fsd *d = arg;
	struct pollfd pfd[2] = {
		{ .fd = fd, .events = POLLIN },
		{ .fd = fuse_session_fd(d->se), .events = POLLIN },
	};
	char buf[64];

	d->hooked = true;
	if (poll(pfd, d->in_hook ? 1 : 2, 100) <= 0)
		return;
	if (pfd[0].revents)
		while (read(fd, buf, sizeof(buf)) > 0)
			;
	if (!d->in_hook && (pfd[1].revents & POLLIN)) {
		int res;

		d->in_hook++;
		res = fuse_session_receive_buf(d->se, &d->hbuf);
		if (res > 0)
			fuse_session_process_buf(d->se, &d->hbuf);
		d->in_hook--;
	}
	answer_interrupted(d);
}

/* The queued work, in order, now that no wait is pending. */
static void run_work(struct fsd *d)
{
	while (d->work) {
		struct work *w = d->work;
		unsigned idx;
		int rc;

		d->work = w->next;
		if (!d->work)
			d->work_tail = &d->work;
		if (!w->text) {
			open_effect(d, w->node, w->flags);
		} else if (node_of(d, w->ino, &idx) != w->node) {
			if (w->req)
				fuse_reply_err(w->req, ENOENT); /* the event went away meanwhile */
		} else if (!w->req) {
			d->caller_pid = w->pid;
			node_write(d, w->node, idx, w->text);
		} else {
			cur_begin(d, w->req, false, w->size, NULL);
			d->caller_pid = w->pid;
			rc = node_write(d, w->node, idx, w->text);
			if (cur_end(d)) {
				if (rc)
					fuse_reply_err(w->req, -rc);
				else
					fuse_reply_write(w->req, w->size);
			}
		}
		free(w->text);
		free(w);
	}
}

/* ---- FUSE operations ------------------------------------------------------------------------ */

static struct fsd *fsd_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino, enum node n)
{
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.attr_timeout = 0;
	e.entry_timeout = 0; /* probes come and go: look every name up again */
	fill_attr(&e.attr, ino, n);
	fuse_reply_entry(req, &e);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC; /* see O_TRUNC at open, as tracefs does */
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fsd *d = fsd_of(req);
	unsigned idx, ns = up_trace_nspecs(d->tr);
	enum node pn = node_of(d, parent, &idx);

	switch (pn) {
	case N_ROOT:
		for (size_t i = 0; i < NROOT; i++)
			if (!strcmp(root_files[i].name, name)) {
				reply_entry(req, 2 + i, root_files[i].node);
				return;
			}
		break;
	case N_EVENTS_DIR: {
		int g = group_index(d, name, false);

		if (!strcmp(name, "enable")) {
			reply_entry(req, EVENTS_ENABLE_INO, N_EVENTS_ENABLE);
			return;
		}

		if (g >= 0 && group_live(d, (unsigned)g)) {
			reply_entry(req, GROUP_INO + (unsigned)g, N_GROUP_DIR);
			return;
		}
		break;
	}
	case N_GROUP_DIR:
		if (!strcmp(name, "enable")) {
			reply_entry(req, GROUP_ENABLE_INO + idx, N_GROUP_ENABLE);
			return;
		}
		for (unsigned i = 0; i < ns; i++) {
			const struct up_spec *s = event_spec(d, i);

			if (s && !strcmp(s->group, d->groups[idx]) && !strcmp(s->event, name)) {
				reply_entry(req, EVENT_INO + EVENT_FILES * i, N_EVENT_DIR);
				return;
			}
		}
		break;
	case N_EVENT_DIR:
		for (unsigned k = 0; k < sizeof(event_files) / sizeof(event_files[0]); k++) {
			if (!strcmp(name, event_files[k].name)) {
				reply_entry(req, EVENT_INO + EVENT_FILES * idx + k + 1,
					    event_files[k].node);
				return;
			}
		}
		break;
	case N_NONE:
		fuse_reply_err(req, ENOENT);
		return;
	default:
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fuse_reply_err(req, ENOENT);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fsd *d = fsd_of(req);
	unsigned idx;
	enum node n = node_of(d, ino, &idx);
	struct stat st;

	(void)fi;
	if (n == N_NONE) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(&st, ino, n);
	fuse_reply_attr(req, &st, 0);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fsd *d = fsd_of(req);
	unsigned idx;
	enum node n = node_of(d, ino, &idx);
	struct stat st;

	(void)fi;
	if (n == N_NONE) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size == 0 && (mode_of(n) & 0200)) {
		/* truncate(2): what O_TRUNC at open does */
		int rc = d->in_hook ? work_effect(d, n, idx, O_TRUNC) : open_effect(d, n, O_TRUNC);

		if (rc) {
			fuse_reply_err(req, -rc);
			return;
		}
	}
	fill_attr(&st, ino, n);
	fuse_reply_attr(req, &st, 0);
}

struct dirbuf {
	char *p;
	size_t size;
};

static void dirbuf_add(fuse_req_t req, struct dirbuf *b, const char *name, fuse_ino_t ino,
		       enum node n)
{
	struct stat st;
	size_t old = b->size, need;
	char *p;

	memset(&st, 0, sizeof(st));
	st.st_ino = ino;
	st.st_mode = mode_of(n);
	need = fuse_add_direntry(req, NULL, 0, name, NULL, 0);
	p = realloc(b->p, old + need);
	if (!p)
		return;
	b->p = p;
	b->size = old + need;
	fuse_add_direntry(req, b->p + old, need, name, &st, (off_t)b->size);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fsd *d = fsd_of(req);
	unsigned idx, ns = up_trace_nspecs(d->tr);
	enum node n = node_of(d, ino, &idx);
	struct dirbuf b = { 0 };

	(void)fi;
	if (n == N_NONE) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!S_ISDIR(mode_of(n))) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	dirbuf_add(req, &b, ".", ino, n);
	dirbuf_add(req, &b, "..", ROOT_INO, N_ROOT);
	switch (n) {
	case N_ROOT:
		for (size_t i = 0; i < NROOT; i++)
			dirbuf_add(req, &b, root_files[i].name, 2 + i, root_files[i].node);
		break;
	case N_EVENTS_DIR:
		dirbuf_add(req, &b, "enable", EVENTS_ENABLE_INO, N_EVENTS_ENABLE);
		for (unsigned g = 0; g < d->ngroups; g++)
			if (group_live(d, g))
				dirbuf_add(req, &b, d->groups[g], GROUP_INO + g, N_GROUP_DIR);
		break;
	case N_GROUP_DIR:
		dirbuf_add(req, &b, "enable", GROUP_ENABLE_INO + idx, N_GROUP_ENABLE);
		for (unsigned i = 0; i < ns; i++) {
			const struct up_spec *s = event_spec(d, i);

			if (s && !strcmp(s->group, d->groups[idx]) && event_head(d, i))
				dirbuf_add(req, &b, s->event, EVENT_INO + EVENT_FILES * i, N_EVENT_DIR);
		}
		break;
	case N_EVENT_DIR:
		for (unsigned k = 0; k < sizeof(event_files) / sizeof(event_files[0]); k++)
			dirbuf_add(req, &b, event_files[k].name, EVENT_INO + EVENT_FILES * idx + k + 1,
				   event_files[k].node);
		break;
	default:
		break;
	}
	if ((size_t)off < b.size) {
		size_t n2 = b.size - (size_t)off;

		fuse_reply_buf(req, b.p + off, n2 < size ? n2 : size);
	} else {
		fuse_reply_buf(req, NULL, 0);
	}
	free(b.p);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fsd *d = fsd_of(req);
	unsigned idx;
	enum node n = node_of(d, ino, &idx);
	int acc = fi->flags & O_ACCMODE;
	bool wr = acc != O_RDONLY, rd = acc != O_WRONLY;
	struct ofile *of;

	if (n == N_NONE) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (S_ISDIR(mode_of(n))) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (wr && !(mode_of(n) & 0200)) {
		fuse_reply_err(req, EACCES); /* root too: these files take no writes */
		return;
	}
	of = calloc(1, sizeof(*of));
	if (!of) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	of->node = n;
	fi->fh = (uintptr_t)of;
	fi->direct_io = 1; /* size 0 in stat, content anyway */
	fi->keep_cache = 0;
	if (n == N_TRACE_PIPE)
		fi->nonseekable = 1;
	if (wr && (fi->flags & O_TRUNC)) {
		int rc;

		if (d->in_hook) {
			rc = work_effect(d, n, idx, fi->flags);
		} else {
			cur_begin(d, req, true, 0, fi);
			rc = open_effect(d, n, fi->flags);
			if (!cur_end(d))
				return; /* answered already: the side effect's errors are logged */
		}
		if (rc) {
			free(of);
			fuse_reply_err(req, -rc);
			return;
		}
	}
	if (rd && n != N_TRACE_PIPE) {
		struct text t = { 0 };
		int rc = node_text(d, n, idx, &t);

		if (rc) {
			free(t.p);
			free(of);
			fuse_reply_err(req, -rc);
			return;
		}
		of->data = t.p;
		of->len = t.len;
	}
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fsd *d = fsd_of(req);
	struct ofile *of = (struct ofile *)(uintptr_t)fi->fh;

	(void)ino;
	if (of->node == N_TRACE_PIPE) {
		struct waiter *w;

		if (!d->ring.len && (fi->flags & O_NONBLOCK)) {
			fuse_reply_err(req, EAGAIN);
			return;
		}
		w = calloc(1, sizeof(*w));
		if (!w) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		w->req = req;
		w->size = size;
		w->next = d->waiters;
		d->waiters = w;
		fuse_req_interrupt_func(req, on_interrupt, w);
		serve_waiters(d); /* at once when there are lines already */
		return;
	}
	if (off < 0 || (size_t)off >= of->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	fuse_reply_buf(req, of->data + off,
		       of->len - (size_t)off < size ? of->len - (size_t)off : size);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fsd *d = fsd_of(req);
	struct ofile *of = (struct ofile *)(uintptr_t)fi->fh;
	unsigned idx;
	enum node n = node_of(d, ino, &idx);
	char *text;
	int rc;

	(void)off;
	if (n == N_NONE || n != of->node) {
		fuse_reply_err(req, ENOENT); /* the event went away while open */
		return;
	}
	text = malloc(size + 1);
	if (!text) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(text, buf, size);
	text[size] = '\0';
	if (d->in_hook) {
		struct work *w = calloc(1, sizeof(*w));

		if (!w) {
			free(text);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		*w = (struct work){ .req = req,
				    .node = n,
				    .idx = idx,
				    .ino = ino,
				    .text = text,
				    .size = size,
				    .pid = fuse_req_ctx(req)->pid };
		work_add(d, w);
		fuse_req_interrupt_func(req, work_interrupt, w);
		return;
	}
	cur_begin(d, req, false, size, NULL);
	d->caller_pid = fuse_req_ctx(req)->pid;
	rc = node_write(d, n, idx, text);
	free(text);
	if (!cur_end(d))
		return;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, size);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ofile *of = (struct ofile *)(uintptr_t)fi->fh;

	(void)ino;
	if (of) {
		free(of->data);
		free(of);
	}
	fuse_reply_err(req, 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fsd *d = fsd_of(req);
	unsigned idx;
	enum node n = node_of(d, ino, &idx);

	if (n == N_NONE)
		fuse_reply_err(req, ENOENT);
	else if (!S_ISDIR(mode_of(n)))
		fuse_reply_err(req, ENOTDIR);
	else
		fuse_reply_open(req, fi);
}

/* tracefs makes no files: a name that is not there cannot be made either */
static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)parent;
	(void)name;
	(void)mode;
	(void)fi;
	fuse_reply_err(req, EACCES);
}

static const struct fuse_lowlevel_ops ops = {
	.create = op_create,
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.release = op_release,
};

/* ---- the loop ------------------------------------------------------------------------------- */

static void serve(struct fsd *d)
{
	struct fuse_buf fbuf = { .mem = NULL };
	int tfd = up_trace_fd(d->tr);
	struct pollfd pfd[4] = {
		{ .fd = fuse_session_fd(d->se), .events = POLLIN },
		{ .fd = tfd, .events = POLLIN },
		{ .fd = d->opts->stop_fd, .events = POLLIN },
		{ .fd = d->opts->on_wake ? d->opts->wake_fd : -1, .events = POLLIN },
	};
	nfds_t nfds = 4; /* a negative fd is not polled */

	if (tfd < 0) {
		fslog(d, "cannot wait for the traced processes: %s", strerror(-tfd));
		pfd[1].fd = -1;
	}
	while (!fuse_session_exited(d->se)) {
		int r;

		if (d->opts->argv && up_trace_status(d->tr) != -1)
			break; /* the command is over: so is the mount */
		r = poll(pfd, nfds, up_trace_timeout(d->tr));

		if (r < 0) {
			if (errno == EINTR)
				continue;
			fslog(d, "poll: %s", strerror(errno));
			break;
		}
		if (pfd[2].revents)
			break;
		if (pfd[3].revents & POLLIN)
			d->opts->on_wake(d->opts->wake_arg, d->tr);
		if ((pfd[1].revents & POLLIN) || r == 0) /* r == 0: fast-path records to read */
			up_trace_dispatch(d->tr);
		if (pfd[0].revents) {
			int res = fuse_session_receive_buf(d->se, &fbuf);

			if (res == -EINTR || res == -EAGAIN)
				continue;
			if (res <= 0)
				break; /* unmounted (0) or the channel failed */
			/* stops the tracer has seen but not handled (an exec's, say) first: a
			   request that places a probe must find the processes as they are */
			up_trace_dispatch(d->tr);
			fuse_session_process_buf(d->se, &fbuf);
			/* a write may have attached: let the tracer catch up at once */
			up_trace_dispatch(d->tr);
		}
		run_work(d);
		while (d->hooked) {
			d->hooked = false;
			up_trace_dispatch(d->tr);
			run_work(d);
		}
		fflush(d->out);
		serve_waiters(d);
	}
	free(fbuf.mem);
}

bool up_fs_supported(void)
{
	return true;
}

int up_fs_run(const struct up_fs_opts *opts)
{
	struct fsd d = { .opts = opts, .on = true };
	struct up_trace_opts to = { .header = false, .follow = true, .verbose = opts->verbose,
				    .metrics = opts->metrics, .log = session_log, .log_arg = &d };
	static char a0[] = "uprobe", a1[] = "-o", a2[] = "fsname=uprobe,subtype=uprobe", a3[] = "-d";
	char *argv[] = { a0, a1, a2, a3, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(opts->debug ? 4 : 3, argv);
	int rc;

	rc = up_fs_ring_init(&d.ring, opts->trace_size ? opts->trace_size : TRACE_SIZE_DEFAULT);
	if (rc)
		return rc;
	d.out = up_fs_ring_open_stream(&d.ring);
	if (!d.out) {
		rc = -errno;
		goto out_ring;
	}
	to.out = d.out;
	rc = up_trace_new(&to, &d.tr);
	if (rc)
		goto out_file;
	for (unsigned i = 0; i < opts->npids; i++) {
		rc = up_trace_attach(d.tr, opts->pids[i]);
		if (rc) {
			fslog(&d, "cannot trace process %d: %s", (int)opts->pids[i], strerror(-rc));
			goto out_trace;
		}
	}
	d.se = fuse_session_new(&args, &ops, sizeof(ops), &d);
	if (!d.se) {
		rc = -EINVAL;
		goto out_trace;
	}
	if (fuse_session_mount(d.se, opts->mountpoint)) {
		fslog(&d, "cannot mount %s (is /dev/fuse there, fusermount3 installed?)",
		      opts->mountpoint);
		rc = -EIO;
		goto out_session;
	}
	/* the reads of requests never block: one that poll saw may be gone by the read
	   (the kernel withdraws a request not read yet when its process is interrupted
	   for good), and a read blocked on /dev/fuse answers no stop of the traced
	   processes: ftrace.uprobe's `cat` and `awk` waited at their exec stops for ever,
	   the mount in read(2), 1 run in 40 under load.  -EAGAIN: polled again. */
	{
		int ffd = fuse_session_fd(d.se), fl = fcntl(ffd, F_GETFL);

		if (fl < 0 || fcntl(ffd, F_SETFL, fl | O_NONBLOCK) < 0)
			fslog(&d, "cannot make /dev/fuse non-blocking: %s", strerror(errno));
	}
	rc = up_trace_set_wait_hook(d.tr, wait_hook, &d);
	if (rc) {
		fslog(&d, "cannot serve requests while waiting for a stop: %s", strerror(-rc));
		goto out_unmount;
	}
	if (opts->argv) {
		pid_t pid;

		rc = up_trace_spawn(d.tr, opts->argv, &pid);
		if (!rc)
			rc = up_trace_start(d.tr);
		if (rc)
			goto out_unmount; /* the library said why; the caller names the command */
	}
	if (opts->on_ready)
		opts->on_ready(opts->log_arg);
	serve(&d);
	run_work(&d);

	/* readers of trace_pipe get the end of the file */
	while (d.waiters) {
		struct waiter *w = d.waiters;

		d.waiters = w->next;
		fuse_reply_buf(w->req, NULL, 0);
		free(w);
	}
	rc = 0;
	if (opts->status)
		*opts->status = up_trace_status(d.tr);
out_unmount:
	up_trace_set_wait_hook(d.tr, NULL, NULL);
	up_trace_detach_all(d.tr);
	fuse_session_unmount(d.se);
out_session:
	fuse_session_destroy(d.se);
out_trace:
	up_trace_detach_all(d.tr);
	up_trace_free(d.tr);
out_file:
	fclose(d.out);
out_ring:
	up_fs_ring_fini(&d.ring);
	errlog_clear(&d);
	for (unsigned g = 0; g < d.ngroups; g++)
		free(d.groups[g]);
	free(d.groups);
	free(d.pids);
	free(d.hbuf.mem);
	fuse_opt_free_args(&args); /* libfuse may have copied them */
	return rc;
}

#else /* !UPROBE_HAVE_FUSE3 */

bool up_fs_supported(void)
{
	return false;
}

int up_fs_run(const struct up_fs_opts *opts)
{
	(void)opts;
	return -ENOTSUP;
}

#endif
