// SPDX-License-Identifier: MIT
/*
 * The kernel backend: specs given to the kernel's uprobe tracer through tracefs, hits
 * read back from a private trace instance.  See kernel.h for the choices made.
 */
#include "trace/kernel.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sym/file.h"
#include "sym/sym.h"
#include "trace/fetch.h"
#include "trace/format.h"

#define KB_LINE_MAX 4096	/* one write() to uprobe_events; longer lines split */
#define KB_BUFFER_KB 4096	/* per-cpu buffer_size_kb we ask for at least */
#define KB_TRACEFS "/sys/kernel/tracing"
#define KB_DEBUGFS_TRACING "/sys/kernel/debug/tracing"
#define KB_INST_PREFIX "up_kb_"

struct kb_event {
	struct up_spec spec; /* our copy, target turned into UP_TARGET_OFFSET */
	bool added;	     /* defined in uprobe_events */
	bool enabled;	     /* enabled in our instance */
	uint64_t seen;	     /* its lines read from our instance's trace_pipe */
};

struct up_kb {
	struct up_kb_opts o;
	char root[PATH_MAX];
	char inst[PATH_MAX];
	bool inst_made;
	struct kb_event *ev;
	int nev, cap;
	int pipe_fd;
	char *pend; /* an incomplete line read from trace_pipe */
	size_t plen, pcap;
	uint64_t lost;
};

/* ---- small helpers ------------------------------------------------------------------ */

__attribute__((format(printf, 2, 3))) static void kb_log(const struct up_kb_opts *o,
							  const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!o || !o->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o->log(o->log_arg, msg);
}

/* One write() of text to path; 0 or -errno. */
static int write_file(const char *path, const char *text, int flags)
{
	size_t len = strlen(text);
	ssize_t n;
	int fd, err = 0;

	fd = open(path, O_WRONLY | O_CLOEXEC | flags);
	if (fd < 0)
		return -errno;
	n = write(fd, text, len);
	if (n < 0)
		err = -errno;
	else if ((size_t)n != len)
		err = -EIO;
	if (close(fd) < 0 && !err)
		err = -errno;
	return err;
}

static int path_join(char *buf, size_t size, const char *a, const char *b)
{
	int n = snprintf(buf, size, "%s/%s", a, b);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* Finds tracefs with uprobe_events, mounting it when missing. */
static int find_root(const struct up_kb_opts *o, char *root, size_t size)
{
	const char *cands[] = { KB_TRACEFS, KB_DEBUGFS_TRACING };
	char p[PATH_MAX];

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
			snprintf(p, sizeof(p), "%s/uprobe_events", cands[i]);
			if (access(p, F_OK) == 0) {
				if (access(p, W_OK) != 0) {
					kb_log(o, "%s is not writable (%s): the kernel backend needs root",
					       p, strerror(errno));
					return -EPERM;
				}
				snprintf(root, size, "%s", cands[i]);
				return 0;
			}
		}
		if (pass)
			break;
		/* Nothing there: mount tracefs where it belongs, if it is not mounted. */
		snprintf(p, sizeof(p), "%s/README", KB_TRACEFS);
		if (access(p, F_OK) == 0)
			break; /* mounted, but a kernel without uprobe events */
		if (mount("nodev", KB_TRACEFS, "tracefs", 0, NULL) < 0) {
			int err = errno;

			kb_log(o, "cannot mount tracefs at %s: %s", KB_TRACEFS, strerror(err));
			return err == EPERM || err == EACCES ? -EPERM : -ENOENT;
		}
	}
	kb_log(o, "no uprobe_events in tracefs: a kernel without CONFIG_UPROBE_EVENTS?");
	return -ENOENT;
}

/* The kernel's error_log entry for our command, if it left one. */
static void log_kernel_error(const struct up_kb_opts *o, const char *root, const char *cmd)
{
	char path[PATH_MAX], *text, *c, *last = NULL, *entry;

	if (path_join(path, sizeof(path), root, "error_log") < 0 ||
	    up_file_read_whole(path, SIZE_MAX, &text, NULL) < 0)
		return;
	for (c = strstr(text, "Command: "); c; c = strstr(c + 1, "Command: "))
		last = c;
	if (last && !strncmp(last + 9, cmd, strlen(cmd) < 40 ? strlen(cmd) : 40)) {
		/* the entry starts at the line before "Command:" */
		entry = last;
		while (entry > text && entry[-1] != '\n')
			entry--;
		if (entry > text)
			entry--;
		while (entry > text && entry[-1] != '\n')
			entry--;
		for (c = entry; *c; c++)
			if (*c == '\n')
				*c = '|';
		kb_log(o, "kernel error_log: %s", entry);
	}
	free(text);
}

/* ---- open ------------------------------------------------------------------------- */

static bool pid_gone(pid_t pid)
{
	char path[64], *text;
	bool zombie = false;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (up_file_read_whole(path, SIZE_MAX, &text, NULL) < 0)
		return true;
	{
		char *rp = strrchr(text, ')');

		zombie = rp && (rp[1] == ' ') && (rp[2] == 'Z' || rp[2] == 'X');
	}
	free(text);
	return zombie;
}

/* Removes instances/up_kb_PID_N of processes that no longer exist. */
static void remove_stale_instances(const struct up_kb_opts *o, const char *root)
{
	char dir[PATH_MAX], p[PATH_MAX];
	struct dirent *d;
	DIR *dp;

	if (path_join(dir, sizeof(dir), root, "instances") < 0)
		return;
	dp = opendir(dir);
	if (!dp)
		return;
	while ((d = readdir(dp))) {
		int pid, used = 0;
		unsigned int n;

		if (sscanf(d->d_name, KB_INST_PREFIX "%d_%u%n", &pid, &n, &used) != 2 ||
		    d->d_name[used] || pid <= 0 || pid == (int)getpid() || !pid_gone(pid))
			continue;
		if (path_join(p, sizeof(p), dir, d->d_name) < 0)
			continue;
		if (rmdir(p) == 0)
			kb_log(o, "removed stale trace instance %s", p);
		else
			kb_log(o, "cannot remove stale trace instance %s: %s", p, strerror(errno));
	}
	closedir(dp);
}

int up_kb_open(const struct up_kb_opts *o, struct up_kb **out)
{
	static unsigned int counter;
	struct up_kb *kb;
	char name[64];
	int err;

	if (!o || !out)
		return -EINVAL;
	*out = NULL;
	kb = calloc(1, sizeof(*kb));
	if (!kb)
		return -ENOMEM;
	kb->o = *o;
	kb->pipe_fd = -1;
	err = find_root(o, kb->root, sizeof(kb->root));
	if (err < 0)
		goto fail;
	remove_stale_instances(o, kb->root);
	snprintf(name, sizeof(name), "instances/" KB_INST_PREFIX "%d_%u", (int)getpid(),
		 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
	err = path_join(kb->inst, sizeof(kb->inst), kb->root, name);
	if (err < 0)
		goto fail;
	if (mkdir(kb->inst, 0755) < 0) {
		err = -errno;
		kb_log(o, "cannot create trace instance %s: %s", kb->inst, strerror(errno));
		if (err == -EACCES)
			err = -EPERM;
		goto fail;
	}
	kb->inst_made = true;
	*out = kb;
	return 0;
fail:
	free(kb);
	return err;
}

/* ---- add -------------------------------------------------------------------------- */

static void spec_release(struct up_spec *s)
{
	up_spec_free(s);
}

static int spec_copy(struct up_spec *dst, const struct up_spec *src)
{
	*dst = *src;
	dst->path = NULL;
	dst->symbol = NULL;
	dst->args = NULL;
	if (src->path && !(dst->path = strdup(src->path)))
		goto nomem;
	if (src->symbol && !(dst->symbol = strdup(src->symbol)))
		goto nomem;
	if (src->nargs > 0) {
		dst->args = calloc((size_t)src->nargs, sizeof(*dst->args));
		if (!dst->args)
			goto nomem;
		memcpy(dst->args, src->args, (size_t)src->nargs * sizeof(*dst->args));
	}
	return 0;
nomem:
	spec_release(dst);
	return -ENOMEM;
}

static bool arg_uses(const struct up_fetch_arg *a, enum up_fetch_op op)
{
	for (int i = 0; i < a->nops; i++)
		if (a->ops[i].op == op)
			return true;
	return false;
}

/* $argN -> the x86-64 ABI's %di %si %dx %cx %r8 %r9, then $stack1 ... (at entry). */
static int rewrite_argn(const struct up_kb_opts *o, struct up_fetch_arg *a)
{
	static const char *const regs[] = { "%di", "%si", "%dx", "%cx", "%r8", "%r9" };
	char out[sizeof(a->comm)];
	size_t n = 0;
	bool quoted = false;

	for (const char *c = a->comm; *c;) {
		char rep[32];
		const char *piece = c;
		size_t plen = 1;

		if (*c == '"')
			quoted = !quoted;
		if (!quoted && !strncmp(c, "$arg", 4) && isdigit((unsigned char)c[4])) {
			char *end;
			unsigned long v = strtoul(c + 4, &end, 10);

			if (v == 0)
				return -EINVAL;
			if (v <= 6)
				snprintf(rep, sizeof(rep), "%s", regs[v - 1]);
			else
				snprintf(rep, sizeof(rep), "$stack%lu", v - 6);
			piece = rep;
			plen = strlen(rep);
			c = end;
		} else {
			c++;
		}
		if (n + plen >= sizeof(out)) {
			kb_log(o, "argument %s: too long once $argN is rewritten for the kernel",
			       a->name);
			return -EINVAL;
		}
		memcpy(out + n, piece, plen);
		n += plen;
	}
	out[n] = '\0';
	memcpy(a->comm, out, n + 1);
	return 0;
}

/* Turns a symbol target into a file offset; says whether the file is 64-bit. */
static int resolve_target(const struct up_kb_opts *o, struct up_spec *s, bool *is64)
{
	struct up_sym_elf *elf;
	struct up_sym sym;
	uint64_t vaddr, off;
	int err;

	if (s->target == UP_TARGET_OFFSET) {
		int cls = 64;

		err = up_sym_elf_identify(s->path, &cls, NULL);
		if (err < 0 && err != -ENOEXEC) {
			kb_log(o, "%s: %s", s->path, strerror(-err));
			return err;
		}
		*is64 = cls != 32;
		return 0;
	}
	err = up_sym_elf_open(s->path, &elf);
	if (err < 0) {
		kb_log(o, "%s: %s", s->path, up_file_strerror(err));
		return err;
	}
	*is64 = up_sym_elf_class(elf) == 64;
	err = up_sym_elf_lookup(elf, s->symbol, &sym);
	if (err < 0) {
		kb_log(o, "%s: no function symbol '%s'", s->path, s->symbol);
		goto out;
	}
	if (sym.size && s->offset >= sym.size) {
		kb_log(o, "%s: %s+0x%" PRIx64 " is past the end of %s (size 0x%" PRIx64 ")",
		       s->path, s->symbol, s->offset, s->symbol, sym.size);
		err = -EINVAL;
		goto out;
	}
	if (sym.ifunc)
		kb_log(o, "%s: %s is an IFUNC: the probe is on its resolver", s->path, s->symbol);
	vaddr = sym.value + s->offset;
	err = up_sym_elf_vaddr_to_offset(elf, vaddr, &off);
	if (err < 0) {
		kb_log(o, "%s: %s (0x%" PRIx64 ") is in no loaded segment of the file", s->path,
		       s->symbol, vaddr);
		goto out;
	}
	free(s->symbol);
	s->symbol = NULL;
	s->target = UP_TARGET_OFFSET;
	s->offset = off;
out:
	up_sym_elf_close(elf);
	return err;
}

static int events_write(struct up_kb *kb, const char *line)
{
	char path[PATH_MAX];
	int err;

	err = path_join(path, sizeof(path), kb->root, "uprobe_events");
	if (err < 0)
		return err;
	return write_file(path, line, O_APPEND);
}

int up_kb_add(struct up_kb *kb, const struct up_spec *spec)
{
	struct kb_event *e;
	char line[KB_LINE_MAX + 64];
	bool is64 = true;
	int err, n;

	if (!kb || !spec)
		return -EINVAL;
	if (kb->pipe_fd >= 0) {
		kb_log(&kb->o, "events must be added before up_kb_enable()");
		return -EBUSY;
	}
	if (spec->kind != UP_SPEC_EVENT) {
		kb_log(&kb->o, "the kernel backend takes p:/r: specs only, not seed (up PID ...) "
			       "specs");
		return -EINVAL;
	}
	if (spec->target == UP_TARGET_VADDR) {
		kb_log(&kb->o, "%s/%s: the kernel probes files: use PATH:OFFSET or PATH:SYMBOL, "
			       "not an absolute address 0x%" PRIx64,
		       spec->group, spec->event, spec->vaddr);
		return -EINVAL;
	}
	if (!spec->path)
		return -EINVAL;
	if (kb->nev == kb->cap) {
		int ncap = kb->cap ? kb->cap * 2 : 8;
		struct kb_event *nev = realloc(kb->ev, (size_t)ncap * sizeof(*nev));

		if (!nev)
			return -ENOMEM;
		kb->ev = nev;
		kb->cap = ncap;
	}
	e = &kb->ev[kb->nev];
	memset(e, 0, sizeof(*e));
	err = spec_copy(&e->spec, spec);
	if (err < 0)
		return err;
	err = resolve_target(&kb->o, &e->spec, &is64);
	if (err < 0)
		goto fail;
	for (int i = 0; i < e->spec.nargs; i++) {
		struct up_fetch_arg *a = &e->spec.args[i];

		for (int k = 0; k < a->nops; k++) {
			if (a->ops[k].op == UP_FOP_REG && !a->ops[k].reg.whole) {
				kb_log(&kb->o, "argument %s=%s: sized register names are not the "
					       "kernel's; use the whole register with a type "
					       "(%%ax:u32)", a->name, a->comm);
				err = -EINVAL;
				goto fail;
			}
		}
		if (arg_uses(a, UP_FOP_USTACK)) {
			kb_log(&kb->o, "argument %s=%s: the kernel's uprobe events fetch no user "
				       "stack; use the ptrace backend", a->name, a->comm);
			err = -EINVAL;
			goto fail;
		}
		if (arg_uses(a, UP_FOP_ARG)) {
			if (e->spec.is_return) {
				kb_log(&kb->o, "argument %s=%s: at a return $argN is the argument "
					       "the entry had, which the kernel's uprobe events cannot "
					       "fetch; use the ptrace backend", a->name, a->comm);
				err = -EINVAL;
				goto fail;
			}
			if (!is64) {
				kb_log(&kb->o, "argument %s=%s: $argN for a 32-bit file is not "
					       "supported by the kernel backend", a->name, a->comm);
				err = -EINVAL;
				goto fail;
			}
			err = rewrite_argn(&kb->o, a);
			if (err < 0)
				goto fail;
		}
	}
	n = up_spec_format(&e->spec, line, sizeof(line));
	if (n < 0) {
		err = n;
		goto fail;
	}
	if (n >= KB_LINE_MAX) {
		kb_log(&kb->o, "%s/%s: the uprobe_events line is %d bytes, over the kernel's "
			       "one-write limit of %d", spec->group, spec->event, n, KB_LINE_MAX - 1);
		err = -E2BIG;
		goto fail;
	}
	err = events_write(kb, line);
	if (err < 0) {
		kb_log(&kb->o, "kernel refused '%s': %s", line, strerror(-err));
		log_kernel_error(&kb->o, kb->root, line);
		goto fail;
	}
	e->added = true;
	kb->nev++;
	return 0;
fail:
	spec_release(&e->spec);
	return err;
}

/* ---- enable ----------------------------------------------------------------------- */

static int inst_write(struct up_kb *kb, const char *file, const char *text, int flags)
{
	char path[PATH_MAX];
	int err = path_join(path, sizeof(path), kb->inst, file);

	return err < 0 ? err : write_file(path, text, flags);
}

static int event_enable(struct up_kb *kb, struct kb_event *e, bool on)
{
	char file[3 * UP_SPEC_NAME_MAX];

	snprintf(file, sizeof(file), "events/%s/%s/enable", e->spec.group, e->spec.event);
	return inst_write(kb, file, on ? "1" : "0", O_TRUNC);
}

int up_kb_enable(struct up_kb *kb)
{
	char path[PATH_MAX], num[32], *text;
	int err;

	if (!kb)
		return -EINVAL;
	if (kb->pipe_fd >= 0)
		return -EBUSY;
	if (!kb->nev) {
		kb_log(&kb->o, "no events to enable");
		return -EINVAL;
	}
	inst_write(kb, "tracing_on", "0", O_TRUNC);
	if (inst_write(kb, "options/irq-info", "0", O_TRUNC) < 0)
		kb_log(&kb->o, "cannot turn irq-info off: lines keep the flags column");
	if (inst_write(kb, "options/record-tgid", kb->o.json ? "1" : "0", O_TRUNC) < 0 &&
	    kb->o.json)
		kb_log(&kb->o, "cannot turn record-tgid on: JSON \"pid\" is the thread's id");
	if (inst_write(kb, "trace_clock", "mono", O_TRUNC) < 0)
		kb_log(&kb->o, "cannot set trace_clock mono: timestamps are the local clock");
	if (!path_join(path, sizeof(path), kb->inst, "buffer_size_kb") &&
	    !up_file_read_whole(path, SIZE_MAX, &text, NULL)) {
		unsigned long cur = strtoul(text, NULL, 10);

		free(text);
		if (cur < KB_BUFFER_KB) {
			snprintf(num, sizeof(num), "%d", KB_BUFFER_KB);
			err = write_file(path, num, O_TRUNC);
			if (err < 0)
				kb_log(&kb->o, "cannot set buffer_size_kb to %s: %s", num,
				       strerror(-err));
		}
	}
	if (kb->o.pid_filter > 0) {
		/* the process's threads and children too, as the ptrace backend follows them
		   (set_event_pid names tasks: without event-fork a thread's hits are lost) */
		err = inst_write(kb, "options/event-fork", "1", O_TRUNC);
		if (err < 0)
			kb_log(&kb->o, "cannot set options/event-fork: %s: threads created later "
				       "are not reported", strerror(-err));
		snprintf(num, sizeof(num), "%d", (int)kb->o.pid_filter);
		err = inst_write(kb, "set_event_pid", num, O_TRUNC);
		if (err < 0) {
			kb_log(&kb->o, "cannot filter on pid %s: %s", num, strerror(-err));
			return err;
		}
	}
	err = inst_write(kb, "trace", "", O_TRUNC);
	if (err < 0) {
		kb_log(&kb->o, "cannot clear the trace buffer: %s", strerror(-err));
		return err;
	}
	for (int i = 0; i < kb->nev; i++) {
		err = event_enable(kb, &kb->ev[i], true);
		if (err < 0) {
			kb_log(&kb->o, "cannot enable %s/%s: %s", kb->ev[i].spec.group,
			       kb->ev[i].spec.event, strerror(-err));
			return err;
		}
		kb->ev[i].enabled = true;
	}
	err = inst_write(kb, "tracing_on", "1", O_TRUNC);
	if (err < 0)
		return err;
	err = path_join(path, sizeof(path), kb->inst, "trace_pipe");
	if (err < 0)
		return err;
	kb->pipe_fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kb->pipe_fd < 0) {
		err = -errno;
		kb_log(&kb->o, "cannot open %s: %s", path, strerror(errno));
		return err;
	}
	return 0;
}

int up_kb_poll_fd(struct up_kb *kb)
{
	return kb && kb->pipe_fd >= 0 ? kb->pipe_fd : -EBADF;
}

/* ---- drain: trace lines, and their JSON ------------------------------------------ */

struct kb_hit {
	char comm[64];
	bool has_comm;
	int tid, tgid, cpu;
	uint64_t time_ns;
	const char *event; /* into the line */
	size_t event_len;
	uint64_t a1, a2;
	bool is_ret;
	const char *rest; /* after the address part */
};

static bool parse_uint(const char **pp, uint64_t *v, int base)
{
	const char *p = *pp;
	char *end;

	if (!isxdigit((unsigned char)*p))
		return false;
	errno = 0;
	*v = strtoull(p, &end, base);
	if (end == p || errno)
		return false;
	*pp = end;
	return true;
}

/* "[CPU] [FLAGS ]SEC.USEC: " at p; fills cpu and time, returns the end or NULL. */
static const char *parse_cpu_ts(const char *p, struct kb_hit *h)
{
	uint64_t cpu, sec, usec;
	const char *q = p + 1, *frac;

	if (*p != '[' || !parse_uint(&q, &cpu, 10) || *q != ']' || q[1] != ' ')
		return NULL;
	q += 2;
	while (*q == ' ')
		q++;
	{
		const char *te = q + strcspn(q, " ");

		if (te == q || te[-1] != ':') {
			/* a flags column (irq-info on) before the timestamp */
			q = te;
			while (*q == ' ')
				q++;
		}
	}
	if (!parse_uint(&q, &sec, 10) || *q != '.')
		return NULL;
	frac = ++q;
	if (!parse_uint(&q, &usec, 10) || q[0] != ':' || q[1] != ' ')
		return NULL;
	for (ptrdiff_t d = q - frac; d < 9; d++)
		usec *= 10; /* to nanoseconds whatever the digits */
	h->cpu = (int)cpu;
	h->time_ns = sec * 1000000000ull + usec;
	return q + 2;
}

/* "COMM-TID [(TGID) ][CPU] TS: EVENT: (0xA[ <- 0xB])..." */
static bool parse_line(const char *line, struct kb_hit *h)
{
	const char *p, *rest = NULL, *q, *dash;
	uint64_t v;

	memset(h, 0, sizeof(*h));
	for (p = strchr(line, '['); p; p = strchr(p + 1, '[')) {
		rest = parse_cpu_ts(p, h);
		if (rest)
			break;
	}
	if (!rest)
		return false;
	/* the context before '[' */
	q = p;
	while (q > line && q[-1] == ' ')
		q--;
	if (q > line && q[-1] == ')') {
		const char *op = q - 1;

		while (op > line && *op != '(')
			op--;
		if (*op != '(')
			return false;
		{
			const char *t = op + 1;

			while (*t == ' ')
				t++;
			h->tgid = parse_uint(&t, &v, 10) ? (int)v : 0; /* "(-------)": unknown */
		}
		q = op;
		while (q > line && q[-1] == ' ')
			q--;
	}
	dash = q;
	while (dash > line && isdigit((unsigned char)dash[-1]))
		dash--;
	if (dash == q || dash == line || dash[-1] != '-')
		return false;
	{
		const char *t = dash;

		if (!parse_uint(&t, &v, 10))
			return false;
		h->tid = (int)v;
	}
	{
		const char *c = line;
		size_t n;

		while (*c == ' ' && c < dash - 1)
			c++;
		n = (size_t)(dash - 1 - c);
		if (n >= sizeof(h->comm))
			n = sizeof(h->comm) - 1;
		memcpy(h->comm, c, n);
		h->comm[n] = '\0';
		h->has_comm = strcmp(h->comm, "<...>") != 0;
	}
	/* EVENT: (0x...) */
	q = strstr(rest, ": (0x");
	if (!q)
		return false;
	h->event = rest;
	h->event_len = (size_t)(q - rest);
	q += 5;
	if (!parse_uint(&q, &h->a1, 16))
		return false;
	if (!strncmp(q, " <- 0x", 6)) {
		q += 6;
		if (!parse_uint(&q, &h->a2, 16))
			return false;
		h->is_ret = true;
	}
	if (*q != ')')
		return false;
	h->rest = q + 1;
	return true;
}

static struct kb_event *find_event(struct up_kb *kb, const char *name, size_t len)
{
	for (int i = 0; i < kb->nev; i++)
		if (strlen(kb->ev[i].spec.event) == len && !memcmp(kb->ev[i].spec.event, name, len))
			return &kb->ev[i];
	return NULL;
}

/* Parses "name=value ..." after the address into vals (strings copied into arena). */
static bool parse_args(const struct up_spec *s, const char *p, struct up_fetch_value *vals,
		       char *arena)
{
	for (int i = 0; i < s->nargs; i++) {
		const struct up_fetch_arg *a = &s->args[i];
		struct up_fetch_value *v = &vals[i];
		size_t nl = strlen(a->name);
		const char *val, *end;

		if (*p != ' ' || strncmp(p + 1, a->name, nl) || p[1 + nl] != '=')
			return false;
		val = p + 2 + nl;
		if (i == s->nargs - 1) {
			end = val + strlen(val);
		} else if (a->type.kind == UP_TYPE_STRING) {
			char next[UP_SPEC_ARG_NAME_MAX + 4];

			snprintf(next, sizeof(next), " %s=", s->args[i + 1].name);
			end = strstr(val, next);
			if (!end)
				return false;
		} else {
			end = strchr(val, ' ');
			if (!end)
				return false;
		}
		memset(v, 0, sizeof(*v));
		v->type = a->type;
		if (v->type.is_default) {
			v->type.kind = UP_TYPE_X;
			v->type.size = 8;
		}
		if ((size_t)(end - val) == 7 && !memcmp(val, "(fault)", 7)) {
			v->err = -EFAULT;
		} else if (v->type.kind == UP_TYPE_STRING) {
			size_t n = (size_t)(end - val);

			if (n >= 2 && val[0] == '"' && end[-1] == '"') {
				val++;
				n -= 2;
			}
			memcpy(arena, val, n);
			arena[n] = '\0';
			v->str = arena;
			v->str_len = n;
			arena += n + 1;
		} else {
			char num[32];
			size_t n = (size_t)(end - val);
			char *ne;

			if (n == 0 || n >= sizeof(num))
				return false;
			memcpy(num, val, n);
			num[n] = '\0';
			errno = 0;
			if (v->type.kind == UP_TYPE_S)
				v->u = (uint64_t)strtoll(num, &ne, 10);
			else
				v->u = strtoull(num, &ne, v->type.kind == UP_TYPE_X ? 16 : 10);
			if (*ne || errno)
				return false;
			if (v->type.size && v->type.size < 8)
				v->u &= (1ull << (v->type.size * 8)) - 1;
		}
		p = end;
	}
	return true;
}

static int emit(struct up_kb *kb, const char *s, size_t n)
{
	if (!kb->o.out)
		return 0;
	if (fwrite(s, 1, n, kb->o.out) != n)
		return -EIO;
	return 0;
}

/* One complete line (no '\n'): 1 when written, 0 when skipped, or -errno. */
static int handle_line(struct up_kb *kb, char *line)
{
	struct kb_hit h;
	struct kb_event *e;
	const char *lost = strstr(line, "[LOST ");
	struct up_fetch_value *vals = NULL;
	char *arena = NULL, stackbuf[2048], *out = stackbuf;
	struct up_fmt_ctx ctx;
	struct up_fmt_event fev;
	int n, ret = 0;

	if (!*line)
		return 0;
	if (lost && !strncmp(line, "CPU:", 4)) {
		unsigned long long k = strtoull(lost + 6, NULL, 10);

		kb->lost += k;
		kb_log(&kb->o, "the kernel lost events: %s", line);
		if (kb->o.json)
			return 0;
	}
	if (kb->o.pid_filter > 0) {
		/* one process's lines are counted for up_kb_counts: uprobe_profile counts
		   every process's hits of the probe */
		if (parse_line(line, &h) && (e = find_event(kb, h.event, h.event_len)))
			e->seen++;
		if (!kb->o.out)
			return 0;
	}
	if (!kb->o.json) {
		size_t len = strlen(line);

		line[len] = '\n';
		ret = emit(kb, line, len + 1);
		line[len] = '\0';
		return ret < 0 ? ret : 1;
	}
	if (!parse_line(line, &h) || !(e = find_event(kb, h.event, h.event_len))) {
		kb_log(&kb->o, "cannot parse trace line: %s", line);
		return 0;
	}
	if (e->spec.nargs) {
		vals = calloc((size_t)e->spec.nargs, sizeof(*vals));
		arena = malloc(strlen(line) + 1);
		if (!vals || !arena) {
			ret = -ENOMEM;
			goto out;
		}
	}
	if (!parse_args(&e->spec, h.rest, vals, arena)) {
		kb_log(&kb->o, "cannot parse the arguments of trace line: %s", line);
		goto out;
	}
	ctx.comm = h.has_comm ? h.comm : NULL;
	ctx.tid = h.tid;
	ctx.pid = h.tgid ? h.tgid : (kb->o.pid_filter ? (int)kb->o.pid_filter : h.tid);
	ctx.cpu = h.cpu;
	ctx.time_ns = h.time_ns;
	fev.vals = vals;
	if (h.is_ret) {
		fev.ret_addr = h.a1;
		fev.addr = h.a2;
	} else {
		fev.addr = h.a1;
		fev.ret_addr = 0;
	}
	n = up_fmt_event_json(out, sizeof(stackbuf), &ctx, &e->spec, &fev);
	if (n >= 0 && (size_t)n >= sizeof(stackbuf)) {
		out = malloc((size_t)n + 1);
		if (!out) {
			ret = -ENOMEM;
			goto out;
		}
		n = up_fmt_event_json(out, (size_t)n + 1, &ctx, &e->spec, &fev);
	}
	if (n < 0) {
		ret = n;
		goto out;
	}
	ret = emit(kb, out, (size_t)n);
	if (!ret)
		ret = 1;
out:
	if (out != stackbuf)
		free(out);
	free(vals);
	free(arena);
	return ret;
}

int up_kb_drain(struct up_kb *kb)
{
	char buf[65536];
	int lines = 0;

	if (!kb)
		return -EINVAL;
	if (kb->pipe_fd < 0)
		return -EBADF;
	for (;;) {
		ssize_t n = read(kb->pipe_fd, buf, sizeof(buf));
		size_t start = 0;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -errno;
		}
		if (n == 0)
			break;
		if (kb->plen + (size_t)n + 1 > kb->pcap) {
			size_t ncap = kb->pcap ? kb->pcap : 65536;
			char *np;

			while (ncap < kb->plen + (size_t)n + 1)
				ncap *= 2;
			np = realloc(kb->pend, ncap);
			if (!np)
				return -ENOMEM;
			kb->pend = np;
			kb->pcap = ncap;
		}
		memcpy(kb->pend + kb->plen, buf, (size_t)n);
		kb->plen += (size_t)n;
		for (size_t i = 0; i < kb->plen; i++) {
			int r;

			if (kb->pend[i] != '\n')
				continue;
			kb->pend[i] = '\0';
			r = handle_line(kb, kb->pend + start);
			if (r < 0)
				return r;
			lines += r;
			start = i + 1;
		}
		memmove(kb->pend, kb->pend + start, kb->plen - start);
		kb->plen -= start;
	}
	if (kb->o.out && lines)
		fflush(kb->o.out);
	return lines;
}

static bool wait_gone(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0)
		return si.si_pid != 0;
	if (errno == EINTR)
		return false;
	return pid_gone(pid); /* ECHILD: not ours */
}

int up_kb_run(struct up_kb *kb, volatile int *stop, pid_t wait_pid)
{
	int total = 0, r;

	if (!kb)
		return -EINVAL;
	if (kb->pipe_fd < 0)
		return -EBADF;
	for (;;) {
		struct pollfd pfd = { .fd = kb->pipe_fd, .events = POLLIN };

		if (stop && *stop)
			break;
		if (wait_pid > 0 && wait_gone(wait_pid))
			break;
		if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
			return -errno;
		r = up_kb_drain(kb);
		if (r < 0)
			return r;
		total += r;
	}
	r = up_kb_drain(kb);
	if (r < 0)
		return r;
	return total + r;
}

/* ---- counts ----------------------------------------------------------------------- */

/* Splits a uprobe_profile line "  FILE EVENT HITS" in place. */
static bool split_profile(char *line, char **file, char **event, uint64_t *hits)
{
	char *e = line + strlen(line), *t;

	while (e > line && isspace((unsigned char)e[-1]))
		*--e = '\0';
	t = e;
	while (t > line && isdigit((unsigned char)t[-1]))
		t--;
	if (t == e || t == line || t[-1] != ' ')
		return false;
	*hits = strtoull(t, NULL, 10);
	e = t;
	while (e > line && e[-1] == ' ')
		*--e = '\0';
	t = e;
	while (t > line && t[-1] != ' ')
		t--;
	if (t == e || t == line)
		return false;
	*event = t;
	e = t;
	while (e > line && e[-1] == ' ')
		*--e = '\0';
	while (*line == ' ')
		line++;
	if (!*line)
		return false;
	*file = line;
	return true;
}

/* Calls fn for each of our events with its profile line and count. */
static int for_each_profile(struct up_kb *kb,
			    int (*fn)(struct up_kb *, struct kb_event *, const char *raw,
				      uint64_t hits, void *ctx),
			    void *ctx)
{
	char path[PATH_MAX], *text;
	int err, done = 0;

	err = path_join(path, sizeof(path), kb->root, "uprobe_profile");
	if (err < 0)
		return err;
	err = up_file_read_whole(path, SIZE_MAX, &text, NULL);
	if (err < 0) {
		kb_log(&kb->o, "cannot read %s: %s", path, strerror(-err));
		return err;
	}
	for (int i = 0; i < kb->nev && err >= 0; i++) {
		struct kb_event *e = &kb->ev[i];
		char *line = text;

		while (line && *line) {
			char *nl = strchr(line, '\n'), raw[PATH_MAX + 128], *file, *ev;
			size_t len = nl ? (size_t)(nl - line) : strlen(line);
			uint64_t hits;

			if (len < sizeof(raw)) {
				memcpy(raw, line, len);
				raw[len] = '\0';
				if (split_profile(raw, &file, &ev, &hits) &&
				    !strcmp(file, e->spec.path) && !strcmp(ev, e->spec.event)) {
					memcpy(raw, line, len);
					raw[len] = '\0';
					err = fn(kb, e, raw, hits, ctx);
					if (err >= 0)
						done++;
					break;
				}
			}
			line = nl ? nl + 1 : NULL;
		}
	}
	free(text);
	return err < 0 ? err : done;
}

static int print_count(struct up_kb *kb, struct kb_event *e, const char *raw, uint64_t hits,
		       void *ctx)
{
	FILE *out = ctx;
	char label[192], line[1024];

	(void)raw;
	snprintf(label, sizeof(label), "%s/%s", e->spec.group, e->spec.event);
	if (kb->o.json)
		up_fmt_count_json(line, sizeof(line), e->spec.path, label, hits);
	else
		up_fmt_count_row(line, sizeof(line), e->spec.path, label, hits);
	return fputs(line, out) < 0 ? -EIO : 0;
}

int up_kb_counts(struct up_kb *kb, FILE *out)
{
	int n;

	if (!kb || !out)
		return -EINVAL;
	if (kb->o.pid_filter > 0) {
		/* the process's own hits, from the trace (uprobe_profile would add every
		   other process's hits of the same probes) */
		for (n = 0; n < kb->nev; n++)
			if (print_count(kb, &kb->ev[n], NULL, kb->ev[n].seen, out) < 0)
				return -EIO;
		fflush(out);
		return n;
	}
	n = for_each_profile(kb, print_count, out);
	fflush(out);
	return n;
}

struct hits_q {
	const char *group, *event;
	uint64_t hits;
	bool found;
};

static int take_hits(struct up_kb *kb, struct kb_event *e, const char *raw, uint64_t hits,
		     void *ctx)
{
	struct hits_q *q = ctx;

	if (!strcmp(e->spec.group, q->group) && !strcmp(e->spec.event, q->event)) {
		q->hits = hits;
		q->found = true;
	}
	return 0;
}

int up_kb_hits(struct up_kb *kb, const char *group, const char *event, uint64_t *hits)
{
	struct hits_q q = { group ? group : UP_SPEC_DEFAULT_GROUP, event, 0, false };
	int err;

	if (!kb || !event || !hits)
		return -EINVAL;
	err = for_each_profile(kb, take_hits, &q);
	if (err < 0)
		return err;
	if (!q.found)
		return -ENOENT;
	*hits = q.hits;
	return 0;
}

int up_kb_lost(struct up_kb *kb, uint64_t *lost)
{
	char dir[PATH_MAX], p[PATH_MAX], *text;
	struct dirent *d;
	uint64_t sum;
	DIR *dp;

	if (!kb || !lost)
		return -EINVAL;
	sum = kb->lost;
	if (path_join(dir, sizeof(dir), kb->inst, "per_cpu") < 0)
		return -ENAMETOOLONG;
	dp = opendir(dir);
	if (!dp)
		return -errno;
	while ((d = readdir(dp))) {
		char *o;

		if (strncmp(d->d_name, "cpu", 3))
			continue;
		if (snprintf(p, sizeof(p), "%s/%s/stats", dir, d->d_name) >= (int)sizeof(p) ||
		    up_file_read_whole(p, SIZE_MAX, &text, NULL) < 0)
			continue;
		o = strstr(text, "\noverrun:");
		if (!o && !strncmp(text, "overrun:", 8))
			o = text - 1;
		if (o)
			sum += strtoull(o + 10, NULL, 10);
		free(text);
	}
	closedir(dp);
	*lost = sum;
	return 0;
}

/* ---- close ------------------------------------------------------------------------ */

static int remove_event(const struct up_kb_opts *o, const char *root, const char *group,
			const char *event)
{
	char path[PATH_MAX], line[2 * UP_SPEC_NAME_MAX + 8];
	int err;

	err = path_join(path, sizeof(path), root, "uprobe_events");
	if (err < 0)
		return err;
	snprintf(line, sizeof(line), "-:%s/%s", group, event);
	err = write_file(path, line, O_APPEND);
	if (err < 0)
		kb_log(o, "cannot remove %s/%s: %s", group, event, strerror(-err));
	return err;
}

void up_kb_close(struct up_kb *kb)
{
	if (!kb)
		return;
	if (kb->pipe_fd >= 0)
		close(kb->pipe_fd);
	kb->pipe_fd = -1;
	for (int i = 0; i < kb->nev; i++)
		if (kb->ev[i].enabled && event_enable(kb, &kb->ev[i], false) == 0)
			kb->ev[i].enabled = false;
	if (kb->inst_made) {
		inst_write(kb, "tracing_on", "0", O_TRUNC);
		if (rmdir(kb->inst) < 0)
			kb_log(&kb->o, "cannot remove trace instance %s: %s", kb->inst,
			       strerror(errno));
	}
	for (int i = 0; i < kb->nev; i++) {
		if (kb->ev[i].added)
			remove_event(&kb->o, kb->root, kb->ev[i].spec.group, kb->ev[i].spec.event);
		spec_release(&kb->ev[i].spec);
	}
	free(kb->ev);
	free(kb->pend);
	free(kb);
}

int up_kb_remove_group(const struct up_kb_opts *o, const char *group)
{
	char root[PATH_MAX], path[PATH_MAX], *text, *line;
	size_t gl;
	int err, removed = 0;

	if (!group || !*group)
		return -EINVAL;
	gl = strlen(group);
	err = find_root(o, root, sizeof(root));
	if (err < 0)
		return err;
	err = path_join(path, sizeof(path), root, "uprobe_events");
	if (err < 0)
		return err;
	err = up_file_read_whole(path, SIZE_MAX, &text, NULL);
	if (err < 0)
		return err;
	for (line = text; line && *line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if ((line[0] == 'p' || line[0] == 'r') && line[1] == ':' &&
		    !strncmp(line + 2, group, gl) && line[2 + gl] == '/') {
			char *ev = line + 3 + gl, *sp = strchr(ev, ' ');

			if (sp)
				*sp = '\0';
			if (remove_event(o, root, group, ev) == 0)
				removed++;
		}
		line = nl ? nl + 1 : NULL;
	}
	free(text);
	return removed;
}
