// SPDX-License-Identifier: MIT
/*
 * The traced processes and their life: attached or launched, forked (the child has its
 * parent's probes: the library copied them), exec'd (every probe of the old image
 * dropped, the new one armed before it runs), exited, let go; and the cache of their
 * threads' names and cpus (/proc/PID/task/TID/stat, kept open).
 *
 * It never arms nor formats by itself: it asks arm.c, and report.c reads its cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sym/sym.h"
#include "trace/session_int.h"

struct tproc *tr_proc_of(struct up_trace *tr, pid_t pid)
{
	for (struct tproc *tp = tr->procs; tp; tp = tp->next)
		if (tp->pid == pid && !tp->gone)
			return tp;
	return NULL;
}

/* comm and cpu of a thread, from /proc/PID/task/TID/stat (kept open: pread rereads it). */
struct comm_entry *tr_thread_info(struct up_trace *tr, pid_t pid, pid_t tid, int *cpu)
{
	struct comm_entry *c = &tr->comms[(unsigned)tid % COMM_CACHE];
	char buf[1024], *open_paren, *close_paren, *p;
	ssize_t n;
	int field;

	if (c->tid != tid) {
		char path[64];

		if (c->stat_fd > 0)
			close(c->stat_fd);
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
		c->tid = tid;
		c->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
		c->comm[0] = '\0';
		c->in_raw = false;
	}
	*cpu = 0;
	if (c->stat_fd <= 0) {
		/* gone: the name it had at its exit, if it was noted */
		for (unsigned i = 0; !c->comm[0] && i < GONE_COMMS; i++)
			if (tr->gone[i].tid == tid)
				memcpy(c->comm, tr->gone[i].comm, sizeof(c->comm));
		return c;
	}
	n = pread(c->stat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return c;
	buf[n] = '\0';
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return c;
	snprintf(c->comm, sizeof(c->comm), "%.*s", (int)(close_paren - open_paren - 1),
		 open_paren + 1);
	/* field 39 is the cpu it last ran on; field 3 follows the ')' */
	p = close_paren + 2;
	for (field = 3; field < 39 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (p)
		*cpu = atoi(p);
	return c;
}

void tr_forget_threads(struct up_trace *tr)
{
	for (unsigned i = 0; i < COMM_CACHE; i++) {
		if (tr->comms[i].stat_fd > 0)
			close(tr->comms[i].stat_fd);
		memset(&tr->comms[i], 0, sizeof(tr->comms[i]));
	}
}

/* The comm for $comm while the thread is stopped: /proc is read once per thread only. */
const char *tr_comm_cached(struct up_trace *tr, pid_t pid, pid_t tid)
{
	struct comm_entry *c = &tr->comms[(unsigned)tid % COMM_CACHE];
	int cpu;

	if (c->tid != tid || !c->comm[0])
		c = tr_thread_info(tr, pid, tid, &cpu);
	return c->comm;
}

static bool proc_is32(pid_t pid)
{
	char path[64];
	int cls = 64;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (up_sym_elf_identify(path, &cls, NULL))
		return false;
	return cls == 32;
}

void tr_drop_probes(struct tproc *tp)
{
	while (tp->probes) {
		struct tprobe *p = tp->probes;

		tp->probes = p->next;
		tr_keep_count(tp->tr, p); /* a counting probe's hits are the library's */
		if (tp->tr->disarming) {
			/* one of them is being unregistered further up the stack */
			p->next = tp->tr->retired;
			tp->tr->retired = p;
		} else {
			tr_probe_free(p);
		}
	}
	tp->drops++;
	up_refctr_forget(&tp->refs, 0); /* gone with the process's memory, or put back */
	memset(tp->armed, 0, tp->tr->nspecs * sizeof(*tp->armed));
	memset(&tp->ldso, 0, sizeof(tp->ldso));
}

/*
 * The main thread's name read now, while it is its: records are formatted later, and
 * a process that execs soon after (env, sh -c) would otherwise have its first records
 * named after the program it became.
 */
static void name_now(struct up_trace *tr, pid_t pid)
{
	int cpu;

	tr_thread_info(tr, pid, pid, &cpu);
}

/* A process to follow; a fork child is its parent's image (like), not read again. */
static struct tproc *proc_add(struct up_trace *tr, pid_t pid, const struct tproc *like)
{
	struct tproc *tp = calloc(1, sizeof(*tp));

	if (!tp)
		return NULL;
	tp->armed = calloc(tr->nspecs ? tr->nspecs : 1, sizeof(*tp->armed));
	if (!tp->armed) {
		free(tp);
		return NULL;
	}
	tp->pid = pid;
	tp->tr = tr;
	tp->is32 = like ? like->is32 : proc_is32(pid);
	tp->next = tr->procs;
	tr->procs = tp;
	name_now(tr, pid);
	return tp;
}

void tr_cb_exit(void *arg, pid_t pid, int status)
{
	struct up_trace *tr = arg;
	struct tproc *tp = tr_proc_of(tr, pid);

	if (pid == tr->launched)
		tr->status = status;
	if (tp) {
		tp->gone = true;
		tr_drop_probes(tp);
	}
}

void tr_cb_exec(void *arg, pid_t pid)
{
	struct up_trace *tr = arg;
	struct tproc *tp = tr_proc_of(tr, pid);

	/* every probe of the old image is gone (its records were formatted, under the old
	   name): arm the new one before it runs */
	tr_forget_threads(tr);
	name_now(tr, pid);
	if (tp) {
		tr_drop_probes(tp);
		tp->is32 = proc_is32(pid);
		tr_arm_proc(tr, tp);
	}
}

/* A thread exits, its records possibly not formatted yet: its name, noted now. */
void tr_cb_thread_exit(void *arg, pid_t pid, pid_t tid)
{
	struct up_trace *tr = arg;
	struct comm_entry *c;
	unsigned at = tr->gone_next++ % GONE_COMMS;
	int cpu;

	c = tr_thread_info(tr, pid, tid, &cpu);
	tr->gone[at].tid = c->comm[0] ? tid : 0;
	memcpy(tr->gone[at].comm, c->comm, sizeof(tr->gone[at].comm));
}

void tr_cb_fork(void *arg, pid_t parent, pid_t child)
{
	struct up_trace *tr = arg;
	struct tproc *pp = tr_proc_of(tr, parent), *cp = proc_add(tr, child, pp);

	/* the child runs the parent's probes (the library copied them) */
	if (pp && cp) {
		memcpy(cp->armed, pp->armed, tr->nspecs * sizeof(*cp->armed));
		up_refctr_copy(&cp->refs, &pp->refs); /* and its memory the semaphores */
	}
}

int up_trace_attach(struct up_trace *tr, pid_t pid)
{
	int rc = uprobe_attach(tr->ctx, pid);

	if (rc)
		return rc;
	return proc_add(tr, pid, NULL) ? 0 : -ENOMEM;
}

int up_trace_spawn(struct up_trace *tr, char *const argv[], pid_t *pid)
{
	pid_t p;
	int rc = uprobe_spawn(tr->ctx, argv, &p);

	if (rc)
		return rc;
	if (!proc_add(tr, p, NULL))
		return -ENOMEM;
	tr->launched = p;
	if (pid)
		*pid = p;
	return 0;
}

void up_trace_detach_all(struct up_trace *tr)
{
	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		if (tp->gone)
			continue;
		up_refctr_put_all(&tp->refs, tp->pid);
		uprobe_detach(tr->ctx, tp->pid);
		tp->gone = true;
		tr_drop_probes(tp);
	}
}
