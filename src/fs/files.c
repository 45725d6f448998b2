// SPDX-License-Identifier: MIT
/*
 * The control filesystem's files (fsd.h): what reading and writing each one means,
 * following tracefs where this tracer can honour it (docs/design.md section 4 lists
 * where it cannot).  Never replies to a FUSE request and never waits for one: fs.c does
 * both.  As tracefs:
 *  - events are created disabled; an enabled event cannot be removed (EBUSY); only
 *    O_TRUNC on uprobe_events removes every probe;
 *  - removing probes resets `trace`, as the kernel does when an event goes
 *    (trace_remove_event_call resets the buffers) and as seed 008's walkthrough shows;
 *  - error_log entries are the kernel's message, the command and a caret alone;
 *  - `filter` takes filter expressions on the event's arguments (src/trace/filter.c);
 *  - `trigger` takes one hist trigger an event ("hist:keys=...", "!hist:..." removes
 *    it) and `hist` shows its table; other trigger commands are refused;
 *  - `set_event_pid` also brings the processes it names under tracing (a ptrace tracer
 *    sees no process it was not given); the session filters on one process, so with
 *    several PIDs listed every traced process's hits are kept.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#ifdef UPROBE_HAVE_FUSE3

#include "agent/ring.h" /* up_mono_ns */
#include "fs/fsd.h"
#include "trace/expand.h"
#include "trace/format.h"
#include "trace/session.h"

void text_put(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		size_t cap = (t->len + n + 1) * 2;
		char *p = realloc(t->p, cap);

		if (!p) {
			t->oom = true;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

void text_printf(struct text *t, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		text_put(t, small, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);

	if (!big) {
		t->oom = true;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	text_put(t, big, (size_t)n);
	free(big);
}

void fslog(struct fsd *d, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!d->opts->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	d->opts->log(d->opts->log_arg, msg);
}

/* The session's messages: kept (the last one explains a failed write) and passed on. */
void session_log(void *arg, const char *msg)
{
	struct fsd *d = arg;

	snprintf(d->lastlog, sizeof(d->lastlog), "%s", msg);
	if (d->opts->log)
		d->opts->log(d->opts->log_arg, msg);
}

/* ---- groups and event nodes ----------------------------------------------------------- */

int group_index(struct fsd *d, const char *name, bool add)
{
	for (unsigned g = 0; g < d->ngroups; g++)
		if (!strcmp(d->groups[g], name))
			return (int)g;
	if (!add)
		return -ENOENT;
	char **v = realloc(d->groups, (d->ngroups + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	d->groups = v;
	v[d->ngroups] = strdup(name);
	if (!v[d->ngroups])
		return -ENOMEM;
	return (int)d->ngroups++;
}

/* The live event spec i, or NULL. */
const struct up_spec *event_spec(struct fsd *d, unsigned i)
{
	const struct up_spec *s;

	if (!up_trace_spec_live(d->tr, i))
		return NULL;
	s = up_trace_spec(d->tr, i);
	return s && s->kind == UP_SPEC_EVENT ? s : NULL;
}

bool group_live(struct fsd *d, unsigned g)
{
	unsigned n = up_trace_nspecs(d->tr);

	if (g >= d->ngroups)
		return false;
	for (unsigned i = 0; i < n; i++) {
		const struct up_spec *s = event_spec(d, i);

		if (s && !strcmp(s->group, d->groups[g]))
			return true;
	}
	return false;
}

/* ---- error_log -------------------------------------------------------------------------- */

void errlog_clear(struct fsd *d)
{
	for (unsigned i = 0; i < d->nerr; i++)
		free(d->errlog[i]);
	d->nerr = 0;
}

/*
 * One entry as the kernel's tracing_log_err() shows it:
 *   [  123.456789] trace_uprobe: error: MSG
 *     Command: LINE
 *                ^            (when the error is at a place in LINE: pos)
 * who: what the kernel names as the error's source ("trace_uprobe", "hist:GRP:EVENT").
 */
static void errlog_add_at(struct fsd *d, const char *who, const char *line, const char *msg,
			  int pos)
{
	uint64_t t = up_mono_ns();
	struct text e = { 0 };

	text_printf(&e, "[%5" PRIu64 ".%06" PRIu64 "] %s: error: %s\n  Command: %s\n",
		    t / 1000000000u, t % 1000000000u / 1000u, who, msg, line);
	if (pos >= 0)
		text_printf(&e, "%*s^\n", 11 + pos, "");
	if (e.oom || !e.p) {
		free(e.p);
		return;
	}
	if (d->nerr == ERRLOG_MAX) {
		free(d->errlog[0]);
		memmove(d->errlog, d->errlog + 1, (ERRLOG_MAX - 1) * sizeof(*d->errlog));
		d->nerr--;
	}
	d->errlog[d->nerr++] = e.p;
	fslog(d, "%s: %s", line, msg);
}

void errlog_add(struct fsd *d, const char *line, const char *msg, const char *caret)
{
	errlog_add_at(d, "trace_uprobe", line, msg, caret ? (int)(strchr(caret, '^') - caret) : -1);
}

/*
 * A parse error.  The parser's messages are the kernel's (trace_probe.h) followed by a
 * hint after ": expected"; error_log shows the kernel's part, and a caret alone.
 */
static void errlog_parse(struct fsd *d, const char *line, const struct up_spec_err *se)
{
	char msg[sizeof(se->msg)];
	const char *hint = strstr(se->msg, ": expected");

	snprintf(msg, sizeof(msg), "%.*s", hint ? (int)(hint - se->msg) : (int)sizeof(msg),
		 se->msg);
	errlog_add_at(d, "trace_uprobe", line, msg, se->pos);
}

void trace_reset(struct fsd *d)
{
	fflush(d->out);
	up_fs_ring_clear(&d->ring);
}

bool header_is_seed(struct fsd *d)
{
	unsigned n = up_trace_nspecs(d->tr);

	for (unsigned i = 0; i < n; i++)
		if (up_trace_spec_live(d->tr, i))
			return up_trace_spec(d->tr, i)->kind == UP_SPEC_SEED;
	return d->last_seed;
}

/* ---- uprobe_events ----------------------------------------------------------------------- */

static void remove_spec(struct fsd *d, unsigned i)
{
	up_trace_remove(d->tr, i);
}

int clear_probes(struct fsd *d, bool events_only)
{
	unsigned n = up_trace_nspecs(d->tr);
	bool any = false;

	/* the kernel's dyn_events_release_all: nothing goes while one event is in use */
	for (unsigned i = 0; i < n; i++)
		if (event_spec(d, i) && up_trace_enabled(d->tr, i))
			return -EBUSY;
	for (unsigned i = 0; i < n; i++)
		if (up_trace_spec_live(d->tr, i) && (!events_only || event_spec(d, i))) {
			remove_spec(d, i);
			any = true;
		}
	if (any)
		trace_reset(d);
	return 0;
}

/* "-:[GRP/]EVENT" */
static int delete_line(struct fsd *d, const char *line)
{
	char name[2 * UP_SPEC_NAME_MAX + 2], *slash, *group = NULL, *event = name;
	const char *s = line + 2;
	size_t n = strcspn(s, " \t");
	int i;

	if (!n || n >= sizeof(name)) {
		errlog_add(d, line, n ? "Event name is too long" : "Event name is not specified",
			   NULL);
		return -EINVAL;
	}
	memcpy(name, s, n);
	name[n] = '\0';
	slash = strchr(name, '/');
	if (slash) {
		*slash = '\0';
		group = name;
		event = slash + 1;
	}
	i = up_trace_find(d->tr, group, event);
	if (i < 0)
		return -ENOENT; /* the kernel says no more either */
	if (up_trace_enabled(d->tr, (unsigned)i))
		return -EBUSY; /* as the kernel's: disable it first */
	/* every probe of the event (a name may have several places) */
	group = (char *)up_trace_spec(d->tr, (unsigned)i)->group;
	{
		char g[UP_SPEC_NAME_MAX + 1];

		snprintf(g, sizeof(g), "%s", group);
		while ((i = up_trace_find(d->tr, g, event)) >= 0)
			remove_spec(d, (unsigned)i);
	}
	trace_reset(d);
	return 0;
}

/* Where the probe's file starts in line: the second word. */
static int target_pos(const char *line)
{
	size_t i = strcspn(line, " \t");

	return (int)(i + strspn(line + i, " \t"));
}

static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	if (!a || !b)
		return a == b;
	if (stat(a, &sa) || stat(b, &sb))
		return !strcmp(a, b);
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static bool same_place(const struct up_spec *a, const struct up_spec *b)
{
	if (a->target != b->target || a->offset != b->offset)
		return false;
	if (a->target == UP_TARGET_VADDR)
		return a->vaddr == b->vaddr;
	if (a->target == UP_TARGET_SYMBOL && strcmp(a->symbol, b->symbol))
		return false;
	return same_file(a->path, b->path);
}

static bool same_args(const struct up_spec *a, const struct up_spec *b)
{
	if (a->nargs != b->nargs)
		return false;
	for (int k = 0; k < a->nargs; k++)
		if (strcmp(a->args[k].name, b->args[k].name) ||
		    a->args[k].type.kind != b->args[k].type.kind ||
		    a->args[k].type.size != b->args[k].type.size)
			return false;
	return true;
}

/*
 * What the kernel checks of a new probe against those there (trace_uprobe.c,
 * append_trace_uprobe and validate_ref_ctr_offset): the file exists and is a regular
 * one; another probe on the same place has the same reference counter; a probe named as
 * an existing event joins it (one event, several places) when it has the same kind and
 * arguments and is not the same place.  0, or an error logged.
 */
static int check_event(struct fsd *d, const char *line, const struct up_spec *spec)
{
	unsigned n = up_trace_nspecs(d->tr);
	struct stat st;

	if (spec->path) {
		if (stat(spec->path, &st)) {
			errlog_add_at(d, "trace_uprobe", line, "Failed to find the given file",
				      target_pos(line));
			return -ENOENT;
		}
		if (!S_ISREG(st.st_mode)) {
			errlog_add_at(d, "trace_uprobe", line, "Not a regular file", target_pos(line));
			return -EINVAL;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		const struct up_spec *o = event_spec(d, i);

		if (!o)
			continue;
		if (same_place(o, spec) && o->ref_ctr_offset != spec->ref_ctr_offset) {
			errlog_add(d, line, "Reference counter offset mismatch", NULL);
			return -EINVAL;
		}
		if (strcmp(o->group, spec->group) || strcmp(o->event, spec->event))
			continue;
		if (o->is_return != spec->is_return) {
			errlog_add(d, line, "Probe type is different from existing probe", NULL);
			return -EEXIST;
		}
		if (!same_args(o, spec)) {
			errlog_add(d, line, "Argument type or name is different from existing probe",
				   NULL);
			return -EEXIST;
		}
		if (same_place(o, spec)) {
			errlog_add(d, line, "There is already the exact same probe event", NULL);
			return -EEXIST;
		}
	}
	return 0;
}

static int add_line(struct fsd *d, const char *line)
{
	struct up_spec spec;
	struct up_spec_err se;
	char err[1024];
	unsigned idx;
	int rc;

	rc = up_spec_parse(line, &spec, &se);
	if (rc == -EINVAL) {
		errlog_parse(d, line, &se);
		return rc;
	}
	if (rc)
		return rc;
	if (spec.kind == UP_SPEC_SEED) {
		if (!spec.pid) {
			errlog_add(d, line, "PID 0 names the launched command: give a process id",
				   NULL);
			rc = -EINVAL;
		} else if (kill(spec.pid, 0) < 0 && errno == ESRCH) {
			errlog_add(d, line, "No such process", NULL);
			rc = -ESRCH;
		}
	} else {
		rc = check_event(d, line, &spec);
		if (!rc && group_index(d, spec.group, true) < 0)
			rc = -ENOMEM;
	}
	up_spec_free(&spec);
	if (rc)
		return rc;

	rc = up_trace_add(d->tr, line, err, sizeof(err));
	if (rc) {
		errlog_add(d, line, err[0] ? err : strerror(-rc), NULL);
		return rc;
	}
	idx = up_trace_nspecs(d->tr) - 1;
	d->last_seed = up_trace_spec(d->tr, idx)->kind == UP_SPEC_SEED;
	if (!d->last_seed) {
		/* the kernel makes an event disabled; one joining an event takes its state */
		int first = up_trace_find(d->tr, up_trace_spec(d->tr, idx)->group,
					  up_trace_spec(d->tr, idx)->event);

		up_trace_enable(d->tr, idx, first >= 0 && (unsigned)first != idx &&
						    up_trace_enabled(d->tr, (unsigned)first));
	}
	d->lastlog[0] = '\0';
	rc = up_trace_arm_all(d->tr, true);
	if (rc) {
		/* refused here and now: no probe is left that could never fire */
		remove_spec(d, idx);
		errlog_add(d, line, d->lastlog[0] ? d->lastlog : strerror(-rc), NULL);
		return rc;
	}
	return 0;
}

static int add_expanded(void *ctx, const char *spec)
{
	return add_line(ctx, spec);
}

/* u: (USDT), wildcard and DWARF lines become the p:/r: lines they stand for
   (trace/expand.h), each an event of its own. */
static int add_lines(struct fsd *d, const char *line)
{
	struct up_spec_err se;
	int rc = up_expand(line, add_expanded, d, NULL, &se);

	if (rc && se.msg[0])
		errlog_parse(d, line, &se);
	return rc;
}

/*
 * Lines as the kernel splits them: '#' starts a comment, blank lines do nothing.
 * dynamic: dynamic_events, which takes events only (no seed lines).
 */
static int events_write(struct fsd *d, char *text, bool dynamic)
{
	char *save = NULL;

	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *hash = strchr(line, '#'), *e;
		int rc;

		/* a '#' inside \"...\" is text, not a comment: leave those to the parser */
		if (hash && !strstr(line, "\\\""))
			*hash = '\0';
		while (*line == ' ' || *line == '\t')
			line++;
		e = line + strlen(line);
		while (e > line && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			*--e = '\0';
		if (!*line)
			continue;
		if (dynamic && !strchr("pr-", line[0]))
			return -EINVAL; /* an event type this filesystem does not have */
		rc = line[0] == '-' && line[1] == ':' ? delete_line(d, line) : add_lines(d, line);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- the other files ------------------------------------------------------------------------ */

static int parse_bool(const char *s, bool *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	while (*end == ' ' || *end == '\t' || *end == '\n')
		end++;
	if (end == s || *end || errno)
		return -EINVAL;
	*out = v != 0;
	return 0;
}

void apply_pid_filter(struct fsd *d)
{
	up_trace_set_pid_filter(d->tr, d->npids == 1 ? d->pids[0] : 0);
}

static int event_pid_write(struct fsd *d, char *text)
{
	char *save = NULL;

	for (char *tok = strtok_r(text, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
		char *end;
		long v = strtol(tok, &end, 10);
		pid_t *np;
		int rc;

		if (*end || v <= 0 || v > INT32_MAX)
			return -EINVAL;
		rc = up_trace_attach(d->tr, (pid_t)v);
		if (rc && rc != -EALREADY) {
			fslog(d, "set_event_pid: cannot trace process %ld: %s", v, strerror(-rc));
			return rc;
		}
		np = realloc(d->pids, (d->npids + 1) * sizeof(*np));
		if (!np)
			return -ENOMEM;
		d->pids = np;
		np[d->npids++] = (pid_t)v;
		apply_pid_filter(d);
		up_trace_arm_all(d->tr, false); /* failures are logged; the process stays */
	}
	return 0;
}

/*
 * events/GRP/EVENT/trigger: "hist:keys=..." adds the event's hist trigger,
 * "!hist:keys=..." removes it; an error goes to error_log as the kernel's
 * "hist:GRP:EVENT: error:" with the command and a caret.
 */
static int trigger_write(struct fsd *d, unsigned idx, char *text)
{
	const struct up_spec *s = up_trace_spec(d->tr, idx);
	char err[1024], who[2 * UP_SPEC_NAME_MAX + 8], *e, *caret = NULL, *msg = err;
	int rc;

	while (*text == ' ' || *text == '\t' || *text == '\n')
		text++;
	e = text + strlen(text);
	while (e > text && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n'))
		*--e = '\0';
	if (!*text)
		return 0;
	rc = up_trace_set_trigger(d->tr, idx, text, err, sizeof(err));
	if (!rc)
		return 0;
	/* err: the command, a caret line, the message; or one line saying why */
	if (err[0]) {
		char *l2 = strchr(err, '\n'), *l3 = l2 ? strchr(l2 + 1, '\n') : NULL;

		if (l2 && l3 && strchr(l2 + 1, '^') && strchr(l2 + 1, '^') < l3) {
			*l3 = '\0';
			caret = l2 + 1;
			msg = l3 + 1;
		}
		e = msg + strlen(msg);
		while (e > msg && e[-1] == '\n')
			*--e = '\0';
	} else {
		snprintf(err, sizeof(err), "%s", strerror(-rc));
	}
	snprintf(who, sizeof(who), "hist:%s:%s", s ? s->group : "", s ? s->event : "");
	errlog_add_at(d, who, text, msg, caret ? (int)(strchr(caret, '^') - caret) : -1);
	return rc == -ENOMEM || rc == -EEXIST || rc == -ENOENT ? rc : -EINVAL;
}

/* Does event spec i belong to what node n (idx) covers: one event, a group, all? */
static bool covers(struct fsd *d, enum node n, unsigned idx, unsigned i)
{
	const struct up_spec *s = event_spec(d, i), *e;

	if (!s)
		return false;
	switch (n) {
	case N_EVENTS_ENABLE:
		return true;
	case N_GROUP_ENABLE:
		return idx < d->ngroups && !strcmp(s->group, d->groups[idx]);
	default:
		e = event_spec(d, idx);
		return e && !strcmp(s->group, e->group) && !strcmp(s->event, e->event);
	}
}

/* Does process pid map file (dev, ino), or the file named real? */
static bool maps_file(pid_t pid, dev_t dev, ino_t ino, const char *real)
{
	char path[64], line[4096];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long long inode;
		int name = 0;
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (sscanf(line, "%*s %*s %*s %x:%x %llu %n", &maj, &min, &inode, &name) < 3)
			continue;
		found = (makedev(maj, min) == dev && inode == ino) ||
			(name > 0 && real && !strcmp(line + name, real));
	}
	fclose(f);
	return found;
}

/* The comm of process pid (its /proc/PID/comm, without the newline), or "". */
static void comm_of(pid_t pid, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* Whether the reach options (up_fs_opts) take process pid, of user uid. */
static bool reach_takes(const struct up_fs_opts *o, pid_t pid, uid_t uid)
{
	bool uid_ok = false, comm_ok = false;
	char comm[64];

	if (o->nreach_uids) {
		for (unsigned i = 0; i < o->nreach_uids; i++)
			uid_ok |= o->reach_uids[i] == uid;
	} else {
		/* --comm or --all alone: every user's process this one may trace */
		uid_ok = geteuid() == 0 || uid == geteuid();
	}
	if (!uid_ok)
		return false;
	if (!o->nreach_comms)
		return true;
	comm_of(pid, comm, sizeof(comm));
	for (unsigned i = 0; i < o->nreach_comms; i++)
		comm_ok |= !fnmatch(o->reach_comms[i], comm, 0);
	return comm_ok;
}

/* Whether pid waits for an answer from this mount: the writer being served, or one whose
   write is queued.  Stopping it while it waits is what hung a session for 900 s. */
static bool waits_on_mount(const struct fsd *d, pid_t pid)
{
	if (pid == d->caller_pid)
		return true;
	for (const struct work *w = d->work; w; w = w->next)
		if (w->req && w->pid == pid)
			return true;
	return false;
}

/*
 * The kernel's uprobe fires in every process that maps the file; a ptrace tracer only
 * in those it traces: COMMAND's tree (`uprobe mount DIR -- COMMAND`), the pids given
 * with -p and written to set_event_pid.  Processes beyond those are reached only when
 * asked (--all, --uid, --comm): enabling a path probe then brings in the processes the
 * options take that map the file already (found in /proc).  Never this daemon, its
 * ancestors (the engine refuses them) or a process waiting on the mount.
 */
static void reach_mappers(struct fsd *d, const struct up_spec *s)
{
	const struct up_fs_opts *o = d->opts;
	char real[4096];
	struct stat fst;
	struct dirent *de;
	bool any = false;
	DIR *dir;

	if (!o->reach_all && !o->nreach_uids && !o->nreach_comms)
		return;
	if (!s->path || stat(s->path, &fst) || !realpath(s->path, real))
		return;
	dir = opendir("/proc");
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		char *end, path[64];
		long v = strtol(de->d_name, &end, 10);
		struct stat pst;
		int rc;

		if (*end || v <= 0 || v > INT32_MAX || (pid_t)v == getpid() ||
		    waits_on_mount(d, (pid_t)v))
			continue;
		snprintf(path, sizeof(path), "/proc/%ld", v);
		if (stat(path, &pst) || !reach_takes(o, (pid_t)v, pst.st_uid) ||
		    !maps_file((pid_t)v, fst.st_dev, fst.st_ino, real))
			continue;
		rc = up_trace_attach(d->tr, (pid_t)v);
		if (!rc)
			any = true;
		else if (rc != -EALREADY && rc != -EDEADLK)
			fslog(d, "%s: cannot trace process %ld, which maps it: %s", s->path, v,
			      strerror(-rc));
	}
	closedir(dir);
	if (any)
		up_trace_arm_all(d->tr, false); /* failures are logged; the processes stay */
}

static void enable_write(struct fsd *d, enum node n, unsigned idx, bool on)
{
	unsigned ns = up_trace_nspecs(d->tr);

	for (unsigned i = 0; i < ns; i++)
		if (covers(d, n, idx, i)) {
			if (on && !up_trace_enabled(d->tr, i))
				reach_mappers(d, up_trace_spec(d->tr, i));
			up_trace_enable(d->tr, i, on);
		}
}

/* "1", "0", or "X" when the events covered differ (the kernel's events/enable). */
static char enable_state(struct fsd *d, enum node n, unsigned idx)
{
	unsigned ns = up_trace_nspecs(d->tr);
	bool on = false, off = false;

	for (unsigned i = 0; i < ns; i++)
		if (covers(d, n, idx, i)) {
			if (up_trace_enabled(d->tr, i))
				on = true;
			else
				off = true;
		}
	return on && off ? 'X' : on ? '1' : '0';
}

/*
 * events/GRP/EVENT/filter: the expression applies to every probe of the event; an error
 * goes to error_log as the kernel's event filter errors do ("event filter parse error").
 */
static int filter_write(struct fsd *d, unsigned idx, char *text)
{
	unsigned ns = up_trace_nspecs(d->tr);
	char err[1024], *e;
	int rc = 0;

	text += strspn(text, " \t\n");
	e = text + strlen(text);
	while (e > text && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n'))
		*--e = '\0';
	for (unsigned i = 0; i < ns && !rc; i++)
		if (covers(d, N_FILTER, idx, i))
			rc = up_trace_set_event_filter(d->tr, i, text, err, sizeof(err));
	if (rc == -EINVAL) {
		/* err: the text, a caret line, the message; or one line */
		char *l2 = strchr(err, '\n'), *l3 = l2 ? strchr(l2 + 1, '\n') : NULL;
		int pos = -1;
		char *msg = err;

		if (l2 && l3 && strchr(l2 + 1, '^') && strchr(l2 + 1, '^') < l3) {
			pos = (int)(strchr(l2 + 1, '^') - (l2 + 1));
			msg = l3 + 1;
		}
		e = msg + strlen(msg);
		while (e > msg && e[-1] == '\n')
			*--e = '\0';
		errlog_add_at(d, "event filter parse error", text, msg, pos);
	}
	return rc;
}

/* current_tracer: the nop tracer is the only one (probe events need no other). */
static int tracer_write(char *text)
{
	char *e;

	text += strspn(text, " \t\n");
	e = text + strcspn(text, " \t\n");
	*e = '\0';
	return !*text || !strcmp(text, "nop") ? 0 : -EINVAL;
}

int node_write(struct fsd *d, enum node n, unsigned idx, char *text)
{
	bool b;
	int rc;

	switch (n) {
	case N_UPROBE_EVENTS:
	case N_UPROBES_EVENTS:
		return events_write(d, text, false);
	case N_TRACE:
	case N_ERROR_LOG:
		return 0; /* what is written does not matter; O_TRUNC cleared it at open */
	case N_TRACING_ON:
		rc = parse_bool(text, &b);
		if (!rc) {
			d->on = b;
			up_trace_set_on(d->tr, b);
		}
		return rc;
	case N_ENABLE:
	case N_GROUP_ENABLE:
	case N_EVENTS_ENABLE:
		rc = parse_bool(text, &b);
		if (!rc)
			enable_write(d, n, idx, b);
		return rc;
	case N_CURRENT_TRACER:
		return tracer_write(text);
	case N_DYNAMIC_EVENTS:
		return events_write(d, text, true);
	case N_FILTER:
		return filter_write(d, idx, text);
	case N_SET_EVENT_PID:
		return event_pid_write(d, text);
	case N_TRIGGER:
		return trigger_write(d, idx, text);
	default:
		return -EACCES;
	}
}

/* What reading node n shows now. */
int node_text(struct fsd *d, enum node n, unsigned idx, struct text *t)
{
	unsigned ns = up_trace_nspecs(d->tr);

	switch (n) {
	case N_UPROBE_EVENTS:
	case N_UPROBES_EVENTS:
	case N_DYNAMIC_EVENTS:
		for (unsigned i = 0; i < ns; i++) {
			char line[1024];
			int len;

			if (!up_trace_spec_live(d->tr, i) || (n == N_DYNAMIC_EVENTS && !event_spec(d, i)))
				continue;
			len = up_spec_format(up_trace_spec(d->tr, i), line, sizeof(line));
			if (len < 0)
				continue;
			if ((size_t)len < sizeof(line)) {
				text_put(t, line, (size_t)len);
			} else {
				char *big = malloc((size_t)len + 1);

				if (!big)
					return -ENOMEM;
				up_spec_format(up_trace_spec(d->tr, i), big, (size_t)len + 1);
				text_put(t, big, (size_t)len);
				free(big);
			}
			text_put(t, "\n", 1);
		}
		break;
	case N_TRACE: {
		char h[512];
		int hl;
		size_t len;
		const char *data;

		fflush(d->out);
		hl = header_is_seed(d) ? up_fmt_seed_header(h, sizeof(h))
				       : up_fmt_event_header(h, sizeof(h));
		if (hl > 0)
			text_put(t, h, (size_t)hl < sizeof(h) ? (size_t)hl : sizeof(h) - 1);
		data = up_fs_ring_data(&d->ring, &len);
		text_put(t, data, len);
		break;
	}
	case N_TRACING_ON:
		text_put(t, d->on ? "1\n" : "0\n", 2);
		break;
	case N_PROFILE:
		/* the kernel's probes_profile_seq_show: file, event name, hits */
		for (unsigned i = 0; i < ns; i++) {
			const struct up_spec *s;
			char where[32];

			if (!up_trace_spec_live(d->tr, i))
				continue;
			s = up_trace_spec(d->tr, i);
			if (s->kind == UP_SPEC_SEED) {
				char label[256];

				snprintf(where, sizeof(where), "%d", (int)s->pid);
				up_spec_format(s, label, sizeof(label));
				text_printf(t, "  %s %-44s %15" PRIu64 "\n", where, label,
					    up_trace_hits(d->tr, i));
			} else {
				text_printf(t, "  %s %-44s %15" PRIu64 "\n", s->path ? s->path : "(any)",
					    s->event, up_trace_hits(d->tr, i));
			}
		}
		break;
	case N_ERROR_LOG:
		for (unsigned i = 0; i < d->nerr; i++)
			text_put(t, d->errlog[i], strlen(d->errlog[i]));
		break;
	case N_SET_EVENT_PID:
		for (unsigned i = 0; i < d->npids; i++)
			text_printf(t, "%d\n", (int)d->pids[i]);
		break;
	case N_ENABLE:
	case N_GROUP_ENABLE:
	case N_EVENTS_ENABLE:
		text_printf(t, "%c\n", enable_state(d, n, idx));
		break;
	case N_CURRENT_TRACER:
		text_put(t, "nop\n", 4);
		break;
	case N_README:
		up_fs_readme(t);
		break;
	case N_FORMAT:
		up_fs_format(d, idx, t);
		break;
	case N_ID:
		text_printf(t, "%u\n", EVENT_ID_BASE + idx);
		break;
	case N_FILTER: {
		const char *f = up_trace_event_filter(d->tr, idx);

		text_printf(t, "%s\n", f ? f : "none");
		break;
	}
	case N_TRIGGER: {
		char info[1024];

		if (up_trace_trigger_text(d->tr, idx, info, sizeof(info)) >= 0)
			text_printf(t, "%s\n", info);
		else /* the kernel lists the commands it knows; this one knows hist */
			text_put(t, "# Available triggers:\n# hist\n", 29);
		break;
	}
	case N_HIST: {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		if (!f)
			return -ENOMEM;
		up_trace_print_hist(d->tr, idx, UP_HIST_TEXT, f); /* none: an empty file */
		fclose(f);
		text_put(t, buf, len);
		free(buf);
		break;
	}
	default:
		return -EISDIR;
	}
	if (t->oom)
		return -ENOMEM;
	return 0;
}

#endif /* UPROBE_HAVE_FUSE3 */
