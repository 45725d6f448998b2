/* SPDX-License-Identifier: MIT */
/*
 * The ptrace engine's core: seizing threads, waiting for and telling apart the kinds of
 * ptrace-stop, the event loop, quiesce/resume, spawn/attach/detach.
 *
 * Rules it keeps:
 * - A thread's stop is reported once.  Stops seen while quiescing (a breakpoint hit by a
 *   thread we were about to interrupt, a signal) are deferred with the raw wait status;
 *   the thread stays in that ptrace-stop and the status is handled by a later dispatch,
 *   after the process is unquiesced.
 * - Our own PTRACE_INTERRUPT stops and group-stops never reach the client.  Group-stops are
 *   resumed with PTRACE_LISTEN so SIGSTOP/SIGCONT behave as without a tracer.
 * - Threads and processes are freed only from dispatch at top level (never inside a
 *   client call), or after the client's callback returns (refs).
 * - Never PTRACE_O_EXITKILL: a dying tracer must not take the target with it.
 * - An int3's stop is not reaped while it is handled (wait_any, peeked), and one that
 *   is reaped and waits has rip on its int3 (up__park_safe), put there before the
 *   reap (park_unreaped): a tracer dying at any moment leaves no thread one byte past
 *   an int3 without its SIGTRAP.
 */
#include "task/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

/* ---- ptrace ---------------------------------------------------------------------- */

/* Does the thread exist and is it not dead yet (/proc/TID/stat's state)? */
static bool thread_alive(pid_t tid)
{
	char path[64], buf[512], *rp;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/*
 * The thread whose SIGTRAP signal-delivery-stop the event loop took with WNOWAIT
 * (wait_any): the stop is not reaped, so the kernel still holds the SIGTRAP as the
 * stop's signal until we resume the thread, and a tracer that dies meanwhile lets the
 * thread take it (the safety net's handler, docs/design.md section 9) with whatever
 * registers it has: not one byte past an int3 without a signal.  A reaped stop keeps
 * no signal: the thread would run on past the int3.  0: none.
 */
static pid_t peeked;

static bool is_resume(int req)
{
	switch (req) {
	case PTRACE_CONT:
	case PTRACE_SINGLESTEP:
	case PTRACE_SYSCALL:
	case PTRACE_LISTEN:
	case PTRACE_DETACH:
	case PTRACE_KILL:
		return true;
	default:
		return false;
	}
}

long up__ptrace(int req, pid_t tid, void *addr, void *data)
{
	long r;

	if (tid == peeked && is_resume(req))
		peeked = 0; /* its stop ends here: the next status of it is a new one */

	errno = 0;
	r = ptrace(req, tid, addr, data);
	if (r == -1 && errno == ESRCH && thread_alive(tid)) {
		errno = 0;
		r = ptrace(req, tid, addr, data);
	}
	return r;
}

/* ---- logging, lookup ------------------------------------------------------------- */

void up__log(struct up_engine *e, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!e || !e->ops || !e->ops->log)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	e->ops->log(e->ctx, buf);
}

static struct up_proc *find_proc(struct up_engine *e, pid_t pid)
{
	for (struct up_proc *p = e->procs; p; p = p->next)
		if (p->pid == pid && !p->gone)
			return p;
	return NULL;
}

struct up_task *up__find_task(struct up_engine *e, pid_t tid)
{
	for (struct up_proc *p = e->procs; p; p = p->next) {
		if (p->gone)
			continue;
		for (struct up_task *t = p->tasks; t; t = t->next)
			if (t->tid == tid && t->state != UP_TS_GONE)
				return t;
	}
	return NULL;
}

struct up_task *up__stopped_task(struct up_proc *p)
{
	for (struct up_task *t = p->tasks; t; t = t->next)
		if (t->state == UP_TS_STOPPED && t->stop != UP_ST_EXIT)
			return t;
	return NULL;
}

struct up_task *up__live_task(struct up_proc *p)
{
	for (struct up_task *t = p->tasks; t; t = t->next)
		if (t->state != UP_TS_EXITING && t->state != UP_TS_GONE)
			return t;
	return NULL;
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/* ---- the self-pipe --------------------------------------------------------------- */

static int sigchld_pipe[2] = { -1, -1 };
static struct sigaction sigchld_old;

static void sigchld_handler(int sig, siginfo_t *info, void *uc)
{
	int saved = errno;

	if (sigchld_pipe[1] >= 0) {
		ssize_t r = write(sigchld_pipe[1], "", 1);
		(void)r;
	}
	if (sigchld_old.sa_flags & SA_SIGINFO) {
		if (sigchld_old.sa_sigaction)
			sigchld_old.sa_sigaction(sig, info, uc);
	} else if (sigchld_old.sa_handler != SIG_DFL && sigchld_old.sa_handler != SIG_IGN) {
		sigchld_old.sa_handler(sig);
	}
	errno = saved;
}

void up__wake_fd(void)
{
	if (sigchld_pipe[1] >= 0) {
		ssize_t r = write(sigchld_pipe[1], "", 1);
		(void)r;
	}
}

static int sigchld_install(void)
{
	struct sigaction sa;

	if (sigchld_pipe[0] >= 0)
		return 0;
	if (pipe2(sigchld_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sigchld_handler;
	sa.sa_flags = SA_RESTART | SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGCHLD, &sa, &sigchld_old) < 0) {
		int err = -errno;

		close(sigchld_pipe[0]);
		close(sigchld_pipe[1]);
		sigchld_pipe[0] = sigchld_pipe[1] = -1;
		return err;
	}
	return 0;
}

static void drain_pipe(void)
{
	char buf[64];

	if (sigchld_pipe[0] < 0)
		return;
	while (read(sigchld_pipe[0], buf, sizeof(buf)) > 0)
		;
}

/* ---- placement ------------------------------------------------------------------- */

/*
 * A ptrace stop and resume costs more when the tracer runs on another CPU than its
 * tracee: a cross-CPU wakeup each way (here 17 us on one CPU, 25 us across).  With
 * UPROBE_PIN=1 the engine thread -- never the traced program, which must not notice --
 * pins itself to the CPU the thread that stopped last ran on (field 39 of
 * /proc/TID/stat), looked up at most every UP_PIN_RECHECK_NS, never per stop.  With a
 * program's threads on several CPUs it follows whichever stopped at that moment: one
 * move per interval at most, no thrashing.  The thread gets its own mask back when
 * nothing is traced any more, and a spawned program starts with that mask.
 *
 * Off by default: measured side by side (make bench) it did not help, because at each
 * resume the scheduler wakes the tracee on the idle CPU, not beside the tracer, so the
 * wakeups stay cross-CPU; only pinning the tracee too would help, and that is the
 * program's business.
 */
#define UP_PIN_RECHECK_NS (100 * 1000 * 1000ULL)

static void pin_init(struct up_engine *e)
{
	const char *env = getenv("UPROBE_PIN");

	e->pin_cpu = -1;
	if (!env || !strcmp(env, "0") || !env[0])
		return;
	if (sched_getaffinity(0, sizeof(e->pin_orig), &e->pin_orig) < 0 ||
	    CPU_COUNT(&e->pin_orig) < 2)
		return;
	e->pin_on = true;
}

/* The CPU tid last ran on, or -1. */
static int task_cpu(pid_t tid)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* the comm may hold spaces: count from its ')'; field 3 follows ") " */
	p = strrchr(buf, ')');
	for (int field = 3; p && field <= 39; field++)
		p = strchr(p + 1, ' ');
	return p ? atoi(p + 1) : -1;
}

static void pin_set(struct up_engine *e, int cpu)
{
	cpu_set_t set;

	if (cpu < 0) {
		set = e->pin_orig;
	} else {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
	}
	if (sched_setaffinity(0, sizeof(set), &set) == 0)
		e->pin_cpu = cpu;
}

/* At a stop of t: now and then, move next to it. */
static void pin_follow(struct up_engine *e, struct up_task *t)
{
	struct timespec ts;
	uint64_t now;
	int cpu;

	if (!e->pin_on)
		return;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	if (now < e->pin_next)
		return;
	e->pin_next = now + UP_PIN_RECHECK_NS;
	cpu = task_cpu(t->tid);
	if (cpu >= 0 && cpu < CPU_SETSIZE && cpu != e->pin_cpu && CPU_ISSET(cpu, &e->pin_orig))
		pin_set(e, cpu);
}

static void pin_release(struct up_engine *e)
{
	if (e->pin_cpu >= 0)
		pin_set(e, -1);
	e->pin_next = 0;
}

/* ---- objects --------------------------------------------------------------------- */

static struct up_proc *proc_new(struct up_engine *e, pid_t pid)
{
	struct up_proc *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->e = e;
	p->pid = pid;
	p->memfd = -1;
	p->next = e->procs;
	e->procs = p;
	e->nprocs++;
	up__proc_open_mem(p);
	return p;
}

static struct up_task *task_new(struct up_proc *p, pid_t tid, enum up_tstate state)
{
	struct up_task *t = calloc(1, sizeof(*t)), **pp;

	if (!t)
		return NULL;
	t->proc = p;
	t->tid = tid;
	t->state = state;
	t->stop = UP_ST_EVENT;
	/* keep the list in creation order: the leader first */
	for (pp = &p->tasks; *pp; pp = &(*pp)->next)
		;
	*pp = t;
	return t;
}

static void drop_deferred(struct up_engine *e, pid_t tid)
{
	for (size_t i = 0; i < e->ndq;) {
		if (e->dq[i].tid == tid) {
			memmove(&e->dq[i], &e->dq[i + 1], (e->ndq - i - 1) * sizeof(e->dq[0]));
			e->ndq--;
		} else {
			i++;
		}
	}
}

static void task_free(struct up_task *t)
{
	struct up_proc *p = t->proc;

	for (struct up_task **pp = &p->tasks; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	if (t->queued)
		drop_deferred(p->e, t->tid);
	free(t);
}

/* Unlinks and frees p, unless a client callback on it is still running. */
static void proc_try_free(struct up_proc *p)
{
	struct up_engine *e = p->e;

	if (!p->gone || p->refs > 0)
		return;
	for (struct up_proc **pp = &e->procs; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	while (p->tasks)
		task_free(p->tasks);
	up__proc_close_mem(p);
	free(p);
}

static void proc_mark_gone(struct up_proc *p)
{
	if (p->gone)
		return;
	p->gone = true;
	if (--p->e->nprocs == 0)
		pin_release(p->e);
	for (struct up_task *t = p->tasks; t; t = t->next) {
		if (t->queued)
			drop_deferred(p->e, t->tid);
		t->queued = false;
		t->state = UP_TS_GONE;
	}
}

/* ---- the deferred queue ---------------------------------------------------------- */

int up__defer(struct up_engine *e, pid_t tid, int status, bool orphan)
{
	if (e->ndq == e->cap_dq) {
		size_t cap = e->cap_dq ? e->cap_dq * 2 : 16;
		struct up_deferred *dq = realloc(e->dq, cap * sizeof(*dq));

		if (!dq)
			return -ENOMEM;
		e->dq = dq;
		e->cap_dq = cap;
	}
	e->dq[e->ndq++] = (struct up_deferred){ .tid = tid, .status = status, .orphan = orphan };
	return 0;
}

static bool take_deferred(struct up_engine *e, pid_t tid, int *status)
{
	for (size_t i = 0; i < e->ndq; i++) {
		if (e->dq[i].tid == tid) {
			*status = e->dq[i].status;
			memmove(&e->dq[i], &e->dq[i + 1], (e->ndq - i - 1) * sizeof(e->dq[0]));
			e->ndq--;
			return true;
		}
	}
	return false;
}

/* A thread at its PTRACE_EVENT_EXIT stop goes on exiting (the client's last look first). */
static void let_exit(struct up_engine *e, struct up_task *t)
{
	if (e->ops->on_exiting)
		e->ops->on_exiting(e->ctx, t);
	t->stop = UP_ST_EXIT;
	t->held = false;
	t->qstopped = false;
	if (up__ptrace(PTRACE_CONT, t->tid, 0, 0) < 0 && errno != ESRCH)
		up__log(e, "thread %d: cannot continue to exit: %s", t->tid, strerror(errno));
	t->state = UP_TS_EXITING;
}

/* Is tid gone in a non-leader exec whose stop is deferred (the exec'ing thread's former
   tid, or the old leader's, now the exec'ing thread's)? */
static bool exec_deferred(struct up_engine *e, pid_t tid)
{
	for (size_t i = 0; i < e->ndq; i++)
		if (e->dq[i].exec_former && (e->dq[i].exec_former == tid || e->dq[i].tid == tid))
			return true;
	return false;
}

static void park_unreaped(struct up_task *t);

/*
 * A program's signal stop seen (not reaped) by a wait during a quiesce: reaped and kept
 * for the unquiesce, its signal would be lost at a tracer's death meanwhile (the kernel
 * delivers only what a stop not yet reaped holds: the attach's quiesce lost a raised
 * SIGTRAP in 8 of 60 deaths).  Where the client lets it go as it is, it goes now,
 * unreaped: the thread takes it (its handler's frame set up, as the resume after the
 * unquiesce would have) and stops at the quiesce's pending interrupt.  True if so.
 */
static bool deliver_unreaped(struct up_engine *e, const siginfo_t *si)
{
	struct up_task *o = up__find_task(e, si->si_pid);
	int sig = si->si_status;
	siginfo_t info;

	/* only a thread a quiesce interrupted and waits for (qwait): it runs the program's
	   code, and stops again at that interrupt */
	if (si->si_code != CLD_TRAPPED || sig <= 0 || sig >= 0x80 || is_stop_signal(sig) ||
	    !o || !e->ops->may_deliver || !o->qwait || !o->interrupt_sent ||
	    o->state != UP_TS_RUNNING || o->stepping || o->queued || o->tid == peeked)
		return false;
	if (up__ptrace(PTRACE_GETSIGINFO, o->tid, 0, &info) < 0 || info.si_signo != sig)
		return false;
	o->state = UP_TS_STOPPED; /* for the client's look at it */
	o->stop = UP_ST_SIGNAL;
	o->regs_valid = false;
	o->regs_dirty = false;
	if (!e->ops->may_deliver(e->ctx, o, &info) ||
	    up__ptrace(PTRACE_CONT, o->tid, 0, (void *)(long)sig) < 0) {
		o->state = UP_TS_RUNNING;
		o->regs_valid = false;
		return false;
	}
	o->state = UP_TS_RUNNING;
	o->regs_valid = false;
	return true;
}

/*
 * The exit statuses of children that were no tracees (any more) when a wait for any
 * reaped them: a launched command the library let go (an exec it does not follow), whose
 * parent's waitpid then says ECHILD.  Process-wide, like the waits: kept after the
 * engine is gone, the newest UP_REAPED.
 */
#define UP_REAPED 16
static struct {
	pid_t pid;
	int status;
} reaped[UP_REAPED];
static unsigned nreaped;

static void keep_reaped(pid_t pid, int status)
{
	reaped[nreaped % UP_REAPED].pid = pid;
	reaped[nreaped % UP_REAPED].status = status;
	nreaped++;
}

int up_engine_reaped(pid_t pid, int *status)
{
	for (unsigned i = 0; i < UP_REAPED; i++)
		if (reaped[i].pid == pid && pid > 0) {
			*status = reaped[i].status;
			reaped[i].pid = 0;
			return 0;
		}
	return -ECHILD;
}

/*
 * Reaps r's status (any child's: the caller saw it with WNOWAIT), an int3's stop put
 * back on its int3 first -- tid's own too: a quiesce or a pending trap's drain waits for
 * another stop and keeps an int3's for later, reaped, and a death meanwhile ran the
 * thread from the int3's next byte (SIGSEGV; the sweep's killafter at a quiesce during
 * another thread's hit).  The pid, 0 or -1 as waitpid.
 */
static pid_t reap_parked(struct up_engine *e, const siginfo_t *si, int *st)
{
	if (si->si_code == CLD_TRAPPED && si->si_status == SIGTRAP) {
		struct up_task *o = up__find_task(e, si->si_pid);

		if (o)
			park_unreaped(o);
	}
	return waitpid(si->si_pid, st, __WALL | WNOHANG);
}

/*
 * Every wait for one thread goes through here and waits for any child: a zombie
 * leader is not reported until its other threads are reaped, so waitpid(leader)
 * could wait for ever while those threads wait for us.
 *
 * Other threads' PTRACE_EVENT_EXIT stops are let go at once, never deferred: a thread
 * exec'ing (de_thread) waits for every other thread to be dead, and the one waited for
 * may be that thread -- deferring them deadlocked a quiesce against a non-leader exec.
 */
int up__wait_tid(struct up_engine *e, pid_t tid, int *status)
{
	const int hang = e->wait_hook ? WNOHANG : 0;

	if (exec_deferred(e, tid))
		return -ESRCH; /* the exec stop waits for the dispatch, not for this wait */
	if (take_deferred(e, tid, status))
		return 0;
	for (;;) {
		int st;
		pid_t r;

		siginfo_t si;

		if (exec_deferred(e, tid))
			return -ESRCH;
		/* looked at first, reaped after (reap_parked): another thread's int3 stop
		   reaped here would leave it one byte past the int3, without the SIGTRAP that
		   a tracer's death delivers, until up__park_safe put it back */
		si.si_pid = 0;
		if (waitid(P_ALL, 0, &si, WEXITED | WSTOPPED | __WALL | WNOWAIT | hang) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!si.si_pid) {
			/* nothing yet: the hook serves what the tracee may be waiting on */
			e->wait_hook(e->wait_arg, sigchld_pipe[0]);
			continue;
		}
		if (deliver_unreaped(e, &si))
			continue;
		r = reap_parked(e, &si, &st);
		if (r == 0)
			continue;
		if (r < 0) {
			if (errno == EINTR || errno == ECHILD)
				continue;
			return -errno;
		}
		/*
		 * A non-leader thread exec'd: it reports under the leader's tid and its own
		 * tid is gone for good (and so is the old leader, whose death is never
		 * reported).  The exec stop stays deferred for the leader; whoever waits for
		 * one of the two is told it went away (-ESRCH).
		 */
		if (WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_EXEC) {
			unsigned long former = 0;

			if (up__ptrace(PTRACE_GETEVENTMSG, r, 0, &former) == 0 && former &&
			    (pid_t)former != r) {
				struct up_task *l = up__find_task(e, r);

				if (l) {
					l->state = UP_TS_STOPPED;
					l->queued = true;
					l->stop = UP_ST_IN_SYSCALL;
				}
				if (up__defer(e, r, st, false) == 0)
					e->dq[e->ndq - 1].exec_former = (pid_t)former;
				if ((pid_t)former == tid || r == tid)
					return -ESRCH;
				continue;
			}
		}
		if (r == peeked) {
			/* the stop being handled, reaped now by this wait: its SIGTRAP is gone */
			struct up_task *pt = up__find_task(e, r);

			peeked = 0;
			if (pt)
				up__park_safe(pt, st);
			continue;
		}
		if (r == tid) {
			*status = st;
			return 0;
		}
		struct up_task *o = up__find_task(e, r);

		if (WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_EXIT) {
			if (o) {
				if (o->queued)
					drop_deferred(e, o->tid);
				o->queued = false;
				let_exit(e, o);
			} else {
				up__ptrace(PTRACE_CONT, r, 0, 0);
			}
			continue;
		}
		if (o) {
			if (WIFSTOPPED(st) && o->state != UP_TS_EXITING)
				o->state = UP_TS_STOPPED;
			o->queued = true;
			if (WIFSTOPPED(st)) {
				int ev = st >> 16;
				o->stop = (ev == PTRACE_EVENT_STOP) ? UP_ST_EVENT
					  : ev ? UP_ST_IN_SYSCALL
					       : UP_ST_SIGNAL;
			}
		}
		if (o)
			up__park_safe(o, st);
		if (!o && !WIFSTOPPED(st)) {
			keep_reaped(r, st); /* not ours: its parent may ask */
			continue;
		}
		up__defer(e, r, st, !o && WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_STOP);
	}
}

/*
 * t's int3 stop put back on its int3 (the kernel's rip; ours stays in t->regs, written
 * at the resume).  unreaped: its stop is not reaped yet, so the kernel holds its SIGTRAP
 * until the rip is back on the int3 -- a death before that delivers the trap at the
 * int3's next byte (the net heals it), after it the SIGTRAP comes with rip on the int3,
 * marked as moved there first (si_errno UP_SI_MOVED, si_addr the rip: the net runs on,
 * and the int3 traps again, whatever byte is before it), and once reaped the thread
 * traps on the int3 anew.
 */
static void park(struct up_task *t, bool unreaped)
{
	struct up_engine *e = t->proc->e;
	struct user_regs_struct r;
	siginfo_t si;

	if (t->rewound || !e->ops->is_breakpoint)
		return;
	if (up__ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) < 0 || si.si_signo != SIGTRAP ||
	    si.si_code != SI_KERNEL)
		return;
	if (up__ptrace(PTRACE_GETREGS, t->tid, 0, &r) < 0 ||
	    !e->ops->is_breakpoint(e->ctx, t, r.rip - 1))
		return;
	if (!t->regs_valid) {
		t->regs = r;
		t->regs_valid = true;
	}
	r.rip--;
	si.si_errno = UP_SI_MOVED;
	si.si_addr = (void *)(uintptr_t)r.rip;
	if ((unreaped && up__ptrace(PTRACE_SETSIGINFO, t->tid, 0, &si) < 0) ||
	    up__ptrace(PTRACE_SETREGS, t->tid, 0, &r) < 0)
		return;
	t->regs_dirty = true; /* ours go in at the resume */
	t->rewound = true;
}

void up__park_safe(struct up_task *t, int status)
{
	if (WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP && !(status >> 16))
		park(t, false);
}

static void park_unreaped(struct up_task *t)
{
	park(t, true);
}

void up_task_park(struct up_task *t)
{
	if (t->state == UP_TS_STOPPED && t->stop == UP_ST_SIGNAL)
		park(t, t->tid == peeked);
}

/* ---- resuming -------------------------------------------------------------------- */

int up__load_regs(struct up_task *t)
{
	if (t->state != UP_TS_STOPPED)
		return -ESRCH;
	if (t->regs_valid)
		return 0;
	if (up__ptrace(PTRACE_GETREGS, t->tid, 0, &t->regs) < 0)
		return -errno;
	t->regs_valid = true;
	t->regs_dirty = false;
	if (t->rewound) {
		t->regs.rip++; /* the kernel's is on the int3 (up__park_safe) */
		t->regs_dirty = true;
	}
	return 0;
}

static int flush_regs(struct up_task *t)
{
	if (!t->regs_dirty)
		return 0;
	t->regs_dirty = false;
	t->rewound = false;
	if (up__ptrace(PTRACE_SETREGS, t->tid, 0, &t->regs) < 0) {
		int err = -errno;

		up__log(t->proc->e, "thread %d: cannot write registers: %s", t->tid,
			strerror(-err));
		return err;
	}
	return 0;
}

/*
 * t's int3 stop, unreaped (peeked), ends with its registers changed: if the new rip
 * follows an int3 of the client's, a tracer dying between the SETREGS and the resume
 * would deliver the stop's SIGTRAP with that rip, which reads as a trap at that int3
 * (the safety net healed it and ran the instruction before again: a 1-byte push run
 * twice).  The siginfo says where the thread was sent first (UP_SI_MOVED), so every
 * moment is told apart: before the mark, a trap as it was; between the mark and the
 * registers, si_addr is not rip; after, it is.  One PTRACE_SETSIGINFO, only there.
 */
static void mark_moved(struct up_task *t)
{
	struct up_engine *e = t->proc->e;
	siginfo_t si;

	if (t->tid != peeked || !t->regs_valid || t->info.si_signo != SIGTRAP ||
	    t->info.si_code != SI_KERNEL || !e->ops->is_breakpoint ||
	    !e->ops->is_breakpoint(e->ctx, t, t->regs.rip - 1))
		return;
	memset(&si, 0, sizeof(si));
	si.si_signo = SIGTRAP;
	si.si_code = SI_KERNEL;
	si.si_errno = UP_SI_MOVED;
	si.si_addr = (void *)(uintptr_t)t->regs.rip;
	up__ptrace(PTRACE_SETSIGINFO, t->tid, 0, &si);
}

/* Resumes a ptrace-stopped thread as its stop allows. */
static int task_resume_raw(struct up_task *t, bool step)
{
	int req, sig = 0;

	if (t->state != UP_TS_STOPPED)
		return -ESRCH;
	if (t->proc->tc)
		up__mem_flush(t->proc); /* the thread runs what the cache holds */
	if (t->stop == UP_ST_SIGNAL && !t->sig && t->regs_dirty)
		mark_moved(t);
	flush_regs(t);
	if (t->stop == UP_ST_SIGNAL) {
		sig = t->sig;
		if (sig && t->info_clobbered && t->info.si_signo == sig) {
			/*
			 * Another signal in place of an unreaped SIGTRAP stop (a delayed one
			 * passed on at its step's end): between the SETSIGINFO and the resume
			 * the stop's signal is still SIGTRAP, which a tracer's death delivers
			 * with the info rewritten as SI_USER -- a SIGTRAP of the program's own
			 * to the net, the default's core dump.  Reaped first, a death there
			 * delivers nothing (the delayed signal is lost, as it is throughout
			 * the step before).
			 */
			if (t->tid == peeked && sig != SIGTRAP) {
				int st;

				peeked = 0;
				waitpid(t->tid, &st, __WALL | WNOHANG);
			}
			up__ptrace(PTRACE_SETSIGINFO, t->tid, 0, &t->info);
		}
	}
	if (step)
		req = PTRACE_SINGLESTEP;
	else if (t->stop == UP_ST_GROUP)
		req = PTRACE_LISTEN;
	else
		req = PTRACE_CONT;
	t->regs_valid = false;
	t->info_clobbered = false;
	t->held = false;
	t->qstopped = false;
	t->sig = 0;
	if (up__ptrace(req, t->tid, 0, (void *)(long)sig) < 0) {
		int err = -errno;

		if (err == -ESRCH) {
			/* killed meanwhile: its exit is on the way */
			t->state = UP_TS_EXITING;
			return 0;
		}
		up__log(t->proc->e, "thread %d: cannot resume: %s", t->tid, strerror(-err));
		return err;
	}
	t->stepping = step;
	t->qstep = step && t->proc->quiesce > 0;
	t->state = req == PTRACE_LISTEN ? UP_TS_LISTENING : UP_TS_RUNNING;
	return 0;
}

/* After the engine handled a stop on its own: go on as before (a step stays a step),
   unless someone holds the thread. */
static void task_continue(struct up_task *t)
{
	if (t->state != UP_TS_STOPPED || t->held || t->queued)
		return;
	if (t->proc->quiesce > 0) {
		t->qstopped = true;
		t->qdepth = t->proc->quiesce;
		return;
	}
	task_resume_raw(t, t->stepping);
}

/* ---- handling one wait status ---------------------------------------------------- */

static void report_thread_exit(struct up_task *t)
{
	struct up_engine *e = t->proc->e;

	if (e->ops->on_thread_exit)
		e->ops->on_thread_exit(e->ctx, t);
}

static void proc_exited(struct up_proc *p, int status)
{
	struct up_engine *e = p->e;

	p->refs++;
	/* the leader last */
	for (struct up_task *t = p->tasks; t; t = t->next)
		if (t->tid != p->pid && t->state != UP_TS_GONE)
			report_thread_exit(t);
	for (struct up_task *t = p->tasks; t; t = t->next)
		if (t->tid == p->pid && t->state != UP_TS_GONE)
			report_thread_exit(t);
	if (e->ops->on_proc_exit)
		e->ops->on_proc_exit(e->ctx, p, status);
	p->refs--;
	proc_mark_gone(p);
	proc_try_free(p);
}

static void task_reaped(struct up_task *t, int status)
{
	struct up_proc *p = t->proc;

	if (t->tid == p->pid) {
		proc_exited(p, status);
		return;
	}
	p->refs++;
	report_thread_exit(t);
	p->refs--;
	if (p->gone) {
		proc_try_free(p);
		return;
	}
	task_free(t);
}

static void report_stop(struct up_task *t, const struct up_stop *stop)
{
	struct up_proc *p = t->proc;
	struct up_engine *e = p->e;
	enum up_resume r = UP_RESUME_CONT;

	t->stepping = false;
	p->refs++;
	if (e->ops->on_stop)
		r = e->ops->on_stop(e->ctx, t, stop);
	p->refs--;
	if (p->gone) {
		proc_try_free(p);
		return;
	}
	if (t->state != UP_TS_STOPPED)
		return; /* the client resumed it itself */
	switch (r) {
	case UP_RESUME_HOLD:
		t->held = true;
		break;
	case UP_RESUME_STEP:
		task_resume_raw(t, true);
		break;
	case UP_RESUME_CONT:
	default:
		task_resume_raw(t, false);
		break;
	}
}

/* A pid field of /proc/TID/status ("Tgid:", "PPid:"); -1 if unknown. */
static pid_t status_pid(pid_t tid, const char *field)
{
	char path[64], line[256];
	size_t n = strlen(field);
	pid_t v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && sscanf(line + n, " %d", &v) == 1)
			break;
	fclose(f);
	return v;
}

static pid_t tgid_of(pid_t tid)
{
	return status_pid(tid, "Tgid:");
}

/*
 * Whether pid is this process or one of its ancestors.  Tracing either can only hang: a
 * tracer that stops the shell waiting for it (or the terminal multiplexer above) stops
 * the one who would have to let it go on.
 */
static bool is_self_or_ancestor(pid_t pid)
{
	pid_t at = getpid();

	for (int depth = 0; at > 0 && depth < 4096; depth++) {
		if (at == pid)
			return true;
		at = status_pid(at, "PPid:");
	}
	return false;
}

static void handle_stop(struct up_engine *e, struct up_task *t, int status);

static void handle_new_child(struct up_engine *e, struct up_task *t, int ev)
{
	struct up_proc *p = t->proc;
	unsigned long msg = 0;
	pid_t ntid;
	int st, err;

	t->stop = UP_ST_IN_SYSCALL;
	if (up__ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &msg) < 0) {
		task_continue(t);
		return;
	}
	ntid = (pid_t)msg;
	if (up__find_task(e, ntid)) {
		/* seen at attach already */
		task_continue(t);
		return;
	}
	err = up__wait_tid(e, ntid, &st);
	if (err < 0 || !WIFSTOPPED(st)) {
		if (err < 0)
			up__log(e, "thread %d: new child %d: wait: %s", t->tid, ntid, strerror(-err));
		task_continue(t);
		return;
	}
	bool thread = ev == PTRACE_EVENT_CLONE && tgid_of(ntid) == p->pid;

	if (thread) {
		struct up_task *nt = task_new(p, ntid, UP_TS_STOPPED);

		if (!nt) {
			up__ptrace(PTRACE_DETACH, ntid, 0, 0);
			task_continue(t);
			return;
		}
		if ((st >> 16) != PTRACE_EVENT_STOP) {
			/* not the initial stop: handle it as it is after the report */
			nt->queued = true;
			up__defer(e, ntid, st, false);
		}
		p->refs++;
		if (e->ops->on_thread_new)
			e->ops->on_thread_new(e->ctx, t, nt);
		p->refs--;
		if (p->gone) {
			proc_try_free(p);
			return;
		}
		task_continue(nt);
		task_continue(t);
		return;
	}

	struct up_proc *np = proc_new(e, ntid);
	struct up_task *nt = np ? task_new(np, ntid, UP_TS_STOPPED) : NULL;

	if (!nt) {
		if (np) {
			proc_mark_gone(np);
			proc_try_free(np);
		}
		up__ptrace(PTRACE_DETACH, ntid, 0, 0);
		task_continue(t);
		return;
	}
	np->vfork_child = ev == PTRACE_EVENT_VFORK;
	np->mode = p->mode;
	if ((st >> 16) != PTRACE_EVENT_STOP) {
		nt->queued = true;
		up__defer(e, ntid, st, false);
	}
	p->refs++;
	np->refs++;
	if (e->ops->on_fork)
		e->ops->on_fork(e->ctx, t, np, ev == PTRACE_EVENT_VFORK);
	np->refs--;
	p->refs--;
	if (np->gone)
		proc_try_free(np);
	else
		task_continue(nt);
	if (p->gone) {
		proc_try_free(p);
		return;
	}
	task_continue(t);
}

static void handle_exec(struct up_engine *e, struct up_task *t)
{
	struct up_proc *p = t->proc;
	unsigned long former = 0;

	up__ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &former);
	if ((pid_t)former != t->tid && former != 0) {
		/* a non-leader exec'd: it now has the leader's tid; keep its object */
		for (struct up_task *o = p->tasks; o; o = o->next) {
			if (o->tid == (pid_t)former && o->state != UP_TS_GONE) {
				if (o->queued)
					drop_deferred(e, o->tid);
				o->queued = false;
				o->state = UP_TS_STOPPED;
				o->regs_valid = false;
				t = o;
				break;
			}
		}
	}
	t->stop = UP_ST_IN_SYSCALL;
	t->stepping = false;
	/* every other thread vanished (the old leader too, when another thread exec'd) */
	p->refs++;
	for (struct up_task *o = p->tasks; o; o = o->next)
		if (o != t && o->state != UP_TS_GONE)
			report_thread_exit(o);
	p->refs--;
	for (struct up_task *o = p->tasks, *n; o; o = n) {
		n = o->next;
		if (o != t) {
			/*
			 * Statuses it left deferred go too: the old leader's tid is the exec'ing
			 * thread's now, and a stale stop of the old leader (a breakpoint it hit
			 * before de_thread killed it) handled as the new image's would resume
			 * it out of its exec stop, or hand it a SIGTRAP of the old image.
			 */
			if (o->queued)
				drop_deferred(e, o->tid);
			o->queued = false;
			task_free(o);
		}
	}
	t->tid = p->pid;
	if (p->gone) {
		proc_try_free(p);
		return;
	}
	/* a new address space */
	up__proc_close_mem(p);
	up__proc_open_mem(p);
	p->vdso_known = false;
	p->syscall_insn = 0;
	p->rescue = 0;
	p->syscall_stub = 0;
	p->mode = 0;
	p->vfork_child = false;
	p->refs++;
	if (e->ops->on_exec)
		e->ops->on_exec(e->ctx, p, t);
	p->refs--;
	if (p->gone) {
		proc_try_free(p);
		return;
	}
	task_continue(t);
}

/* A queued breakpoint stop whose int3 the client has removed meanwhile: rewind to
   execute the original instruction, as the kernel's uprobes does. */
static bool stale_breakpoint(struct up_task *t)
{
	uint8_t b;

	if (up__load_regs(t) < 0)
		return false;
	if (up_proc_read(t->proc, t->regs.rip - 1, &b, 1) < 0 || b == 0xcc)
		return false;
	t->regs.rip--;
	t->regs_dirty = true;
	return true;
}

static void handle_stop(struct up_engine *e, struct up_task *t, int status)
{
	int sig = WSTOPSIG(status), ev = status >> 16;
	bool was_queued = t->queued;
	struct up_stop stop;


	t->state = UP_TS_STOPPED;
	t->queued = false;
	t->regs_valid = false;
	t->regs_dirty = false;
	t->info_clobbered = false;
	t->sig = 0;
	if (t->rewound)
		up__load_regs(t); /* ours, one byte on, to go in at the resume */

	switch (ev) {
	case PTRACE_EVENT_STOP:
		t->interrupt_sent = false;
		t->stop = is_stop_signal(sig) ? UP_ST_GROUP : UP_ST_EVENT;
		if (t->stepping && t->stop == UP_ST_EVENT && !t->held && t->proc->quiesce > 0) {
			/*
			 * An interrupt left pending by an earlier quiesce (the thread stopped for
			 * a breakpoint first) came before the step we resumed it for.  The process
			 * is quiesced for that very step (the in-place one): parked, the thread
			 * would wait for the unquiesce and the unquiesce for its step -- the
			 * soak's hang.  Step again.
			 */
			task_resume_raw(t, true);
			return;
		}
		task_continue(t);
		return;
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		handle_new_child(e, t, ev);
		return;
	case PTRACE_EVENT_EXEC:
		handle_exec(e, t);
		return;
	case PTRACE_EVENT_EXIT:
		/* its memory is still there: the client's last look */
		let_exit(e, t);
		return;
	case 0:
		break;
	default:
		t->stop = UP_ST_IN_SYSCALL;
		task_continue(t);
		return;
	}

	/* a signal-delivery-stop */
	t->stop = UP_ST_SIGNAL;
	memset(&stop, 0, sizeof(stop));
	/*
	 * The hot path: a SIGTRAP right after one of the client's int3s is that int3.
	 * The registers are needed anyway; the siginfo read is saved.
	 */
	if (sig == SIGTRAP && !t->stepping && !was_queued && e->ops->is_breakpoint &&
	    up__load_regs(t) == 0 && e->ops->is_breakpoint(e->ctx, t, t->regs.rip - 1)) {
		memset(&t->info, 0, sizeof(t->info));
		t->info.si_signo = SIGTRAP;
		t->info.si_code = SI_KERNEL;
		stop.info = t->info;
		stop.sig = sig;
		stop.kind = UP_STOP_BREAKPOINT;
		report_stop(t, &stop);
		return;
	}
	if (up__ptrace(PTRACE_GETSIGINFO, t->tid, 0, &t->info) < 0) {
		memset(&t->info, 0, sizeof(t->info));
		t->info.si_signo = sig;
	}
	stop.info = t->info;
	stop.sig = sig;
	if (sig == SIGTRAP && t->info.si_code == SI_KERNEL) {
		if (was_queued && stale_breakpoint(t)) {
			task_resume_raw(t, false);
			return;
		}
		stop.kind = UP_STOP_BREAKPOINT;
	} else if (sig == SIGTRAP && t->stepping &&
		   (t->info.si_code == TRAP_TRACE || t->info.si_code == TRAP_BRKPT)) {
		stop.kind = UP_STOP_STEP;
	} else {
		stop.kind = UP_STOP_SIGNAL;
		t->sig = sig;
	}
	report_stop(t, &stop);
}

static void handle_status(struct up_engine *e, pid_t tid, int status)
{
	struct up_task *t = up__find_task(e, tid);

	if (!t) {
		if (!WIFSTOPPED(status)) { /* a thread we dropped (exec), or not ours */
			keep_reaped(tid, status);
			return;
		}
		if ((status >> 16) == PTRACE_EVENT_STOP) {
			/* a new thread's first stop before its creator's event */
			up__defer(e, tid, status, true);
			return;
		}
		/* a thread we no longer know: let it go on */
		up__ptrace(PTRACE_CONT, tid, 0,
		       (void *)(long)((status >> 16) ? 0 : WSTOPSIG(status)));
		return;
	}
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		t->queued = false;
		task_reaped(t, status);
		return;
	}
	if (WIFSTOPPED(status)) {
		pin_follow(e, t);
		handle_stop(e, t, status);
	}
}

/* Handles deferred statuses whose process is not quiesced; returns how many. */
static int run_deferred(struct up_engine *e)
{
	int n = 0;
	bool progress = true;

	while (progress) {
		progress = false;
		for (size_t i = 0; i < e->ndq; i++) {
			struct up_deferred d = e->dq[i];
			struct up_task *t;

			if (d.orphan)
				continue;
			t = up__find_task(e, d.tid);
			/* a quiesced process's statuses wait, but for the step it is quiesced
			   for (the in-place one): a nested quiesce may have deferred its end */
			if (t && t->proc->quiesce > 0 && !(t->stepping && t->qstep))
				continue;
			memmove(&e->dq[i], &e->dq[i + 1], (e->ndq - i - 1) * sizeof(e->dq[0]));
			e->ndq--;
			handle_status(e, d.tid, d.status);
			n++;
			progress = true;
			break;
		}
	}
	return n;
}

/* ---- the engine ------------------------------------------------------------------ */

int up_engine_new(const struct up_task_ops *ops, void *ctx, struct up_engine **out)
{
	static const struct up_task_ops none;
	struct up_engine *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->ops = ops ? ops : &none;
	e->ctx = ctx;
	pin_init(e);
	*out = e;
	return 0;
}

void up_engine_free(struct up_engine *e)
{
	if (!e)
		return;
	while (e->procs) {
		struct up_proc *p = e->procs;

		if (!p->gone)
			up_proc_detach(p);
		else {
			p->refs = 0;
			proc_try_free(p);
		}
	}
	pin_release(e);
	free(e->dq);
	free(e);
}

int up_engine_set_wait_hook(struct up_engine *e, void (*hook)(void *arg, int fd), void *arg)
{
	int err = hook ? sigchld_install() : 0;

	if (err < 0)
		return err;
	e->wait_hook = hook;
	e->wait_arg = arg;
	return 0;
}

int up_engine_fd(struct up_engine *e)
{
	int err = sigchld_install();

	if (err < 0)
		return err;
	if (e->ndq)
		up__wake_fd();
	return sigchld_pipe[0];
}

/*
 * The event loop's wait for any thread: a SIGTRAP signal-delivery-stop (an int3 hit,
 * nearly every stop) is only looked at (WNOWAIT) and stays unreaped while it is handled
 * (see peeked); any other status is reaped at once.  The pid, 0 (WNOHANG: none), -1.
 */
static pid_t wait_any(int *st, bool nohang)
{
	for (;;) {
		siginfo_t si;
		pid_t r;

		si.si_pid = 0;
		if (waitid(P_ALL, 0, &si,
			   WEXITED | WSTOPPED | __WALL | WNOWAIT | (nohang ? WNOHANG : 0)) < 0)
			return -1;
		if (!si.si_pid)
			return 0;
		if (si.si_code == CLD_TRAPPED && si.si_status == SIGTRAP) {
			peeked = si.si_pid;
			*st = (SIGTRAP << 8) | 0x7f;
			return si.si_pid;
		}
		r = waitpid(si.si_pid, st, __WALL | WNOHANG);
		if (r != 0)
			return r;
	}
}

/* After a status's handling: a peeked stop not resumed (held, deferred, parked) is
   reaped now, its thread's rip put back on the int3 it trapped on. */
static void settle_peeked(struct up_engine *e)
{
	pid_t tid = peeked;
	struct up_task *t;
	int st;

	if (!tid)
		return;
	peeked = 0;
	t = up__find_task(e, tid);
	if (t)
		park_unreaped(t); /* before the reap: see there */
	if (waitpid(tid, &st, __WALL | WNOHANG) != tid)
		return;
	if (t)
		up__park_safe(t, st);
}

/*
 * At most this many statuses a dispatch: threads that trap as fast as they are resumed
 * (a loop on a trap-path site) never let the WNOHANG wait run dry, and the caller's loop
 * -- its stop flag (SIGINT), the agent's records -- would never run again.  Found by
 * fast.tactics' removal: a tracer that ignored its SIGINT for ever.  The rest is
 * announced on the fd, so a poll returns at once.
 */
#define UP_DISPATCH_BATCH 64

int up_engine_dispatch(struct up_engine *e)
{
	int n = 0, handled = 0;

	drain_pipe();
	n += run_deferred(e);
	for (;;) {
		int st;
		pid_t r;

		if (handled == UP_DISPATCH_BATCH) {
			up__wake_fd();
			break;
		}
		r = wait_any(&st, true);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		handle_status(e, r, st);
		settle_peeked(e);
		handled++;
		n++;
		n += run_deferred(e);
	}
	return n;
}

int up_engine_run(struct up_engine *e, volatile int *stop)
{
	e->brk = 0;
	while (e->nprocs > 0) {
		int st;
		pid_t r;

		if (e->brk || (stop && *stop))
			return -EINTR;
		if (run_deferred(e) > 0)
			continue;
		r = wait_any(&st, false);
		if (r < 0) {
			if (errno == EINTR) {
				if (e->brk || (stop && *stop))
					return -EINTR;
				continue;
			}
			return -errno;
		}
		handle_status(e, r, st);
		settle_peeked(e);
	}
	return 0;
}

void up_engine_break(struct up_engine *e)
{
	e->brk = 1;
}

unsigned up_engine_nprocs(const struct up_engine *e)
{
	return e->nprocs;
}

/* ---- attach ---------------------------------------------------------------------- */

static long status_field(pid_t pid, const char *name)
{
	char path[64], line[256];
	size_t n = strlen(name);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, name, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static int explain_attach_error(struct up_engine *e, pid_t pid, int err)
{
	char path[64];
	long tracer, uid;
	int scope = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (err == ESRCH || access(path, F_OK) < 0) {
		up__log(e, "attach %d: no such process", pid);
		return -ESRCH;
	}
	tracer = status_field(pid, "TracerPid");
	if (tracer > 0) {
		up__log(e, "attach %d: already traced by process %ld (TracerPid in /proc/%d/status)",
			pid, tracer, pid);
		return -EBUSY;
	}
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = -1;
		fclose(f);
	}
	uid = status_field(pid, "Uid");
	if (uid >= 0 && uid != (long)geteuid() && geteuid() != 0)
		up__log(e,
			"attach %d: %s: the process belongs to uid %ld, we run as uid %d: run as "
			"that user, or as root (CAP_SYS_PTRACE)",
			pid, strerror(err), uid, (int)geteuid());
	else if (scope > 0)
		up__log(e,
			"attach %d: %s: /proc/sys/kernel/yama/ptrace_scope is %d (%s); "
			"'sysctl kernel.yama.ptrace_scope=0' allows it, or run as root",
			pid, strerror(err), scope,
			scope == 1 ? "only descendants may be traced"
			: scope == 2 ? "only CAP_SYS_PTRACE may trace"
				     : "no process may be traced");
	else
		up__log(e,
			"attach %d: %s: not allowed (uid %ld, ours %d; no Yama restriction): the "
			"process may be non-dumpable (setuid, prctl PR_SET_DUMPABLE) or protected by "
			"an LSM; run as root (CAP_SYS_PTRACE)",
			pid, strerror(err), uid, (int)geteuid());
	return -err;
}

/* Seizes every thread of p not seized yet; repeats until /proc/PID/task is stable. */
static int seize_threads(struct up_proc *p)
{
	char path[64];
	bool changed = true;
	int rounds = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", p->pid);
	while (changed && rounds++ < 100) {
		DIR *d = opendir(path);
		struct dirent *de;

		changed = false;
		if (!d)
			return -errno;
		while ((de = readdir(d))) {
			pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
			bool known = false;

			if (tid <= 0)
				continue;
			for (struct up_task *t = p->tasks; t; t = t->next)
				if (t->tid == tid)
					known = true;
			if (known)
				continue;
			if (up__ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)UP_PTRACE_OPTIONS) < 0) {
				int err = errno;

				if (tid == p->pid) {
					closedir(d);
					return explain_attach_error(p->e, p->pid, err);
				}
				/* gone, or auto-attached through a seized thread's clone: that
				   one reports through its creator's event */
				continue;
			}
			if (!task_new(p, tid, UP_TS_RUNNING)) {
				closedir(d);
				return -ENOMEM;
			}
			changed = true;
		}
		closedir(d);
	}
	return 0;
}

int up_engine_attach(struct up_engine *e, pid_t pid, struct up_proc **out)
{
	struct up_proc *p;
	char path[64];
	int err;

	if (pid <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (access(path, F_OK) < 0) {
		up__log(e, "attach %d: no such process", pid);
		return -ESRCH;
	}
	if (tgid_of(pid) != pid) {
		up__log(e, "attach %d: a thread, not a process (its process is %d)", pid,
			tgid_of(pid));
		return -ESRCH;
	}
	if (find_proc(e, pid))
		return -EBUSY;
	if (is_self_or_ancestor(pid)) {
		up__log(e,
			"attach %d: %s; a tracer never stops itself or the processes that wait "
			"for it",
			pid, pid == getpid() ? "that is this process" : "an ancestor of this process");
		return -EDEADLK;
	}
	p = proc_new(e, pid);
	if (!p)
		return -ENOMEM;
	err = seize_threads(p);
	if (err < 0) {
		/* let go of the threads seized so far */
		for (struct up_task *t = p->tasks; t; t = t->next)
			up__ptrace(PTRACE_DETACH, t->tid, 0, 0);
		proc_mark_gone(p);
		proc_try_free(p);
		return err;
	}
	/* the memory opened again, now that it is seized: an exec between the first open
	   and the seize (a shell's child, attached the moment it was started) left that
	   descriptor on the old image, and no exec event to reopen it -- every read and
	   write would fail with ESRCH */
	up__proc_close_mem(p);
	up__proc_open_mem(p);
	*out = p;
	return 0;
}

/* ---- spawn ----------------------------------------------------------------------- */

/*
 * The child waits for the word go in a read, not in a stop of its own: a tracer
 * killed before the seize, or after it before the exec, lets it go on (its read sees
 * the pipe's end) and run its program untraced.  It used to wait in a SIGSTOP, and a
 * death before the tracer's SIGCONT left it stopped for good (reliability.survive.spawn:
 * at the first request; by time, 4 of 11 kills that came after the fork).
 */
int up_engine_spawn(struct up_engine *e, char *const argv[], struct up_proc **out)
{
	int pfd[2], go[2], st, err = 0;
	pid_t pid;

	if (!argv || !argv[0])
		return -EINVAL;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(go, O_CLOEXEC) < 0) {
		err = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return err;
	}
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(pfd[0]);
		close(pfd[1]);
		close(go[0]);
		close(go[1]);
		return err;
	}
	if (pid == 0) {
		char c;

		close(pfd[0]);
		close(go[1]);
		if (e->pin_cpu >= 0) /* the program's mask is the caller's, not the pinned one */
			sched_setaffinity(0, sizeof(e->pin_orig), &e->pin_orig);
		while (read(go[0], &c, 1) < 0 && errno == EINTR)
			;
		execvp(argv[0], argv);
		err = errno;
		if (write(pfd[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	close(go[0]);

	if (up__ptrace(PTRACE_SEIZE, pid, 0, (void *)(long)UP_PTRACE_OPTIONS) < 0) {
		err = -errno;
		up__log(e, "spawn %s: cannot trace the child: %s", argv[0], strerror(-err));
		close(go[1]);
		goto fail_kill;
	}
	/* seized: it may run to its exec */
	if (write(go[1], "g", 1) != 1) {
		err = -errno;
		close(go[1]);
		goto fail_kill;
	}
	close(go[1]);
	for (;;) {
		int ev, sig;

		if (waitpid(pid, &st, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto fail_kill;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			int cerr = 0;

			if (read(pfd[0], &cerr, sizeof(cerr)) == (ssize_t)sizeof(cerr) && cerr > 0)
				err = -cerr;
			else
				err = -ECHILD;
			up__log(e, "spawn %s: %s", argv[0], strerror(-err));
			close(pfd[0]);
			return err;
		}
		ev = st >> 16;
		sig = WSTOPSIG(st);
		if (ev == PTRACE_EVENT_EXEC)
			break;
		if (ev == 0 && sig != SIGCONT && sig != SIGSTOP)
			up__ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig);
		else
			up__ptrace(PTRACE_CONT, pid, 0, 0);
	}
	close(pfd[0]);

	struct up_proc *p = proc_new(e, pid);
	struct up_task *t = p ? task_new(p, pid, UP_TS_STOPPED) : NULL;

	if (!t) {
		if (p) {
			proc_mark_gone(p);
			proc_try_free(p);
		}
		kill(pid, SIGKILL);
		up__ptrace(PTRACE_DETACH, pid, 0, 0);
		waitpid(pid, &st, __WALL);
		return -ENOMEM;
	}
	t->stop = UP_ST_IN_SYSCALL;
	t->held = true;
	/* out of execve to the user boundary: registers as the program will see them */
	up__task_normalize(t);
	*out = p;
	return 0;

fail_kill:
	kill(pid, SIGKILL);
	while (waitpid(pid, &st, __WALL) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	return err;
}

/* ---- processes ------------------------------------------------------------------- */

pid_t up_proc_pid(const struct up_proc *p)
{
	return p->pid;
}

void *up_proc_data(const struct up_proc *p)
{
	return p->data;
}

void up_proc_set_data(struct up_proc *p, void *data)
{
	p->data = data;
}

struct up_engine *up_proc_engine(const struct up_proc *p)
{
	return p->e;
}

/* Threads past their PTRACE_EVENT_EXIT run no more user code: not listed. */
static struct up_task *skip_gone(struct up_task *t)
{
	while (t && (t->state == UP_TS_GONE || t->state == UP_TS_EXITING))
		t = t->next;
	return t;
}

struct up_task *up_proc_first_task(struct up_proc *p)
{
	return skip_gone(p->tasks);
}

struct up_task *up_proc_next_task(struct up_task *t)
{
	return skip_gone(t->next);
}

struct up_task *up_proc_find_task(struct up_proc *p, pid_t tid)
{
	for (struct up_task *t = p->tasks; t; t = t->next)
		if (t->tid == tid && t->state != UP_TS_GONE)
			return t;
	return NULL;
}

unsigned up_proc_mode(struct up_proc *p)
{
	struct up_task *t = up__stopped_task(p);
	char path[64];
	unsigned char ident[5];
	int fd;

	if (p->mode)
		return p->mode;
	if (t && up__load_regs(t) == 0) {
		p->mode = t->regs.cs == 0x23 ? 32 : 64;
		return p->mode;
	}
	/* no thread stopped: the executable's ELF class */
	snprintf(path, sizeof(path), "/proc/%d/exe", p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, ident, sizeof(ident)) == (ssize_t)sizeof(ident) && ident[4] == 1) {
			close(fd);
			return 32;
		}
		close(fd);
	}
	return 64;
}

bool up_proc_dying(struct up_proc *p)
{
	char path[64], line[256];
	bool dying = true; /* no /proc entry: gone */
	FILE *f;

	if (p->gone)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/status", p->pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "State:", 6)) {
			const char *st = line + 6 + strspn(line + 6, " \t");

			if (*st == 'Z' || *st == 'X')
				break;
			dying = false;
		} else if (!strncmp(line, "ShdPnd:", 7)) {
			if (strtoull(line + 7, NULL, 16) & (1ULL << (SIGKILL - 1)))
				dying = true;
			break;
		}
	}
	fclose(f);
	if (!dying) {
		struct up_map m;

		dying = up_proc_find_map(p, 0, &m) == -ESRCH;
	}
	return dying;
}

int up_proc_quiesce(struct up_proc *p)
{
	struct up_engine *e = p->e;
	bool execd = false;
	int err = 0;

	if (p->gone)
		return -ESRCH;
	p->quiesce++;
	for (struct up_task *t = p->tasks; t; t = t->next) {
		if (t->state != UP_TS_RUNNING && t->state != UP_TS_LISTENING)
			continue;
		if (up__ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) < 0) {
			/* it died meanwhile: its exit is due */
			t->state = UP_TS_EXITING;
			continue;
		}
		t->interrupt_sent = true;
		t->qwait = true;
	}
	for (struct up_task *t = p->tasks; t; t = t->next) {
		int st, ev;

		if (!t->qwait)
			continue;
		t->queued = false; /* a status up__wait_tid deferred is this one's */
		err = up__wait_tid(e, t->tid, &st);
		t->qwait = false;
		if (err < 0) {
			t->state = UP_TS_EXITING;
			if (err == -ESRCH)
				execd = true; /* it exec'd: the old image is going */
			continue;
		}
		if (!WIFSTOPPED(st)) {
			/* gone: reported by a later dispatch */
			t->state = UP_TS_EXITING;
			t->queued = true;
			up__defer(e, t->tid, st, false);
			continue;
		}
		t->state = UP_TS_STOPPED;
		t->regs_valid = false;
		t->regs_dirty = false;
		t->qstopped = true;
		t->qdepth = p->quiesce;
		ev = st >> 16;
		if (ev == PTRACE_EVENT_STOP) {
			t->interrupt_sent = false;
			t->stop = is_stop_signal(WSTOPSIG(st)) ? UP_ST_GROUP : UP_ST_EVENT;
			continue;
		}
		if (ev == PTRACE_EVENT_EXIT) {
			/*
			 * An exiting thread goes on exiting: held, it would keep a non-leader
			 * exec (de_thread waits for every other thread to die) from finishing.
			 */
			let_exit(e, t);
			continue;
		}
		/* another stop: keep it for after the unquiesce */
		t->stop = ev ? UP_ST_IN_SYSCALL : UP_ST_SIGNAL;
		t->queued = true;
		up__defer(e, t->tid, st, false);
		/* an exec already done: the memory is a new image's, the client's state
		   the old one's (an int3 written now would outlive the probes' drop) */
		if (ev == PTRACE_EVENT_EXEC)
			execd = true;
	}
	if (p->gone || !up__live_task(p) || execd) {
		/* dead, or exec'ing: no unquiesce will come, and deferred statuses must flow
		   (the exec's own stop among them) */
		if (--p->quiesce == 0)
			up__mem_drop(p);
		return execd && !p->gone ? -EAGAIN : -ESRCH;
	}
	return 0;
}

int up_proc_settle(struct up_proc *p)
{
	struct up_engine *e = p->e;

	if (p->gone || p->quiesce > 0)
		return -EBUSY;
	for (size_t i = 0; i < e->ndq; i++) {
		struct up_deferred d = e->dq[i];

		if (d.orphan || d.tid != p->pid || !WIFSTOPPED(d.status) ||
		    (d.status >> 16) != PTRACE_EVENT_EXEC)
			continue;
		memmove(&e->dq[i], &e->dq[i + 1], (e->ndq - i - 1) * sizeof(e->dq[0]));
		e->ndq--;
		handle_status(e, d.tid, d.status);
		return 0;
	}
	return -ENOENT;
}

void up_proc_unquiesce(struct up_proc *p)
{
	bool queued = false;

	if (p->quiesce <= 0)
		return;
	if (--p->quiesce > 0) {
		/*
		 * A nested quiesce ends.  The one thread the outer one lets run is the one
		 * doing the in-place step: the inner one stopped it, so it steps on now, or
		 * the outer quiesce would wait for that step for ever (the soak's hang).
		 */
		for (struct up_task *t = p->tasks; t; t = t->next) {
			if (!t->qstopped || t->qdepth <= p->quiesce || !t->stepping ||
			    t->state != UP_TS_STOPPED || t->held || t->queued)
				continue;
			t->qstopped = false;
			task_resume_raw(t, true);
		}
		for (struct up_task *t = p->tasks; t; t = t->next)
			if (t->queued && t->stepping && t->qstep)
				up__wake_fd(); /* its step's end, deferred by the nested one */
		return;
	}
	up__mem_release(p);
	for (struct up_task *t = p->tasks; t; t = t->next) {
		if (t->queued)
			queued = true;
		if (!t->qstopped)
			continue;
		t->qstopped = false;
		if (t->state == UP_TS_STOPPED && !t->held && !t->queued)
			task_resume_raw(t, t->stepping);
	}
	if (queued)
		up__wake_fd();
}

int up_proc_resume(struct up_proc *p)
{
	int err = 0;

	for (struct up_task *t = p->tasks; t; t = t->next) {
		if (t->state == UP_TS_STOPPED && t->held) {
			int r = task_resume_raw(t, false);

			if (r < 0 && !err)
				err = r;
		}
	}
	return err;
}

/* Is a SIGTRAP waiting in the thread's own queue (/proc/TID/status SigPnd)? */
static bool sigtrap_pending(pid_t tid)
{
	char path[64], line[256];
	bool pending = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "SigPnd:", 7)) {
			pending = strtoull(line + 7, NULL, 16) & (1ULL << (SIGTRAP - 1));
			break;
		}
	}
	fclose(f);
	return pending;
}

/*
 * The same, for a thread about to be run for our own ends (a remote system call): run
 * from its interrupt stop, it would take the int3's SIGTRAP as the end of the first step
 * and the next step would drop it -- the thread then went on from the byte after the
 * int3, inside the probed instruction (SIGSEGV, SIGILL at start-up in the soak).  Let it
 * take the signal now and keep that stop deferred, as if it had come before the
 * interrupt's.  True when the thread now has a queued stop (or is gone): not usable.
 */
bool up__defer_pending_sigtrap(struct up_task *t)
{
	struct up_engine *e = t->proc->e;
	int st, err;

	if (t->state != UP_TS_STOPPED || t->stop != UP_ST_EVENT || t->queued ||
	    !sigtrap_pending(t->tid))
		return false;
	flush_regs(t);
	if (up__ptrace(PTRACE_CONT, t->tid, 0, 0) < 0)
		return false;
	t->state = UP_TS_RUNNING;
	t->regs_valid = false;
	err = up__wait_tid(e, t->tid, &st);
	if (err < 0) {
		t->state = UP_TS_EXITING;
		return true;
	}
	if (WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_EXIT) {
		let_exit(e, t);
		return true;
	}
	t->state = WIFSTOPPED(st) ? UP_TS_STOPPED : UP_TS_EXITING;
	if (WIFSTOPPED(st)) {
		int ev = st >> 16;

		t->stop = ev == PTRACE_EVENT_STOP ? UP_ST_EVENT : ev ? UP_ST_IN_SYSCALL : UP_ST_SIGNAL;
	}
	t->queued = true;
	up__defer(e, t->tid, st, false);
	return true;
}

/*
 * A thread our interrupt stopped right after an int3 trapped: the int3's SIGTRAP still
 * waits in its queue, and detached it would kill the program.  Let the thread take it
 * (it stops again before running any instruction), and treat it as a breakpoint stop:
 * the signal to pass on at the detach (0 for one of ours).
 */
static int drain_sigtrap(struct up_engine *e, struct up_task *t)
{
	bool client_set = t->regs_valid && t->regs_dirty;
	int st;

	flush_regs(t);
	if (up__ptrace(PTRACE_CONT, t->tid, 0, 0) < 0 || up__wait_tid(e, t->tid, &st) < 0)
		return 0;
	if (!WIFSTOPPED(st) || (st >> 16) != 0 || WSTOPSIG(st) != SIGTRAP) {
		/* something else came first: pass it on, the SIGTRAP question stays */
		return WIFSTOPPED(st) && (st >> 16) == 0 ? WSTOPSIG(st) : 0;
	}
	t->state = UP_TS_STOPPED;
	t->stop = UP_ST_SIGNAL;
	t->regs_valid = false;
	if (up__ptrace(PTRACE_GETSIGINFO, t->tid, 0, &t->info) < 0 || t->info.si_code != SI_KERNEL)
		return SIGTRAP; /* the program's own */
	if (client_set)
		return 0; /* the client put the thread right already */
	return stale_breakpoint(t) ? 0 : SIGTRAP;
}

/* A thread up__park_safe put back on its int3 whose registers the client has not set
   since (ours are the kernel's but for rip, one byte on). */
static bool rewound_untouched(struct up_task *t)
{
	struct user_regs_struct k;

	if (!t->regs_valid || up__ptrace(PTRACE_GETREGS, t->tid, 0, &k) < 0)
		return false;
	k.rip++;
	return !memcmp(&k, &t->regs, sizeof(k));
}

int up_proc_detach(struct up_proc *p)
{
	struct up_engine *e = p->e;
	int err;

	if (p->gone)
		return -ESRCH;
	err = up_proc_quiesce(p);
	(void)err;
	up__mem_release(p); /* what the client wrote, in place before the threads go */
	for (struct up_task *t = p->tasks; t; t = t->next) {
		int sig = 0, st;

		if (t->state == UP_TS_EXITING) {
			if (t->tid != p->pid)
				waitpid(t->tid, &st, __WALL | WNOHANG);
			continue;
		}
		if (t->state != UP_TS_STOPPED)
			continue;
		if (t->queued && take_deferred(e, t->tid, &st)) {
			t->queued = false;
			if (!WIFSTOPPED(st))
				continue;
			if (t->rewound && rewound_untouched(t)) {
				/* an int3's stop never handled, on the int3 already: it runs
				   the original byte, the int3 being out */
				t->regs_valid = t->regs_dirty = t->rewound = false;
			} else if ((st >> 16) == 0) {
				sig = WSTOPSIG(st);
				if (sig == SIGTRAP &&
				    up__ptrace(PTRACE_GETSIGINFO, t->tid, 0, &t->info) == 0) {
					if (t->info.si_code == SI_KERNEL && t->regs_valid &&
					    t->regs_dirty) {
						/* the client has put this thread right already
						   (a return through its trampoline, say) */
						sig = 0;
					} else if (t->info.si_code == SI_KERNEL) {
						/* ours if the client removed it; else the program's */
						t->regs_valid = false;
						sig = stale_breakpoint(t) ? 0 : SIGTRAP;
					} else if (t->stepping && (t->info.si_code == TRAP_TRACE ||
								   t->info.si_code == TRAP_BRKPT)) {
						sig = 0;
					}
				}
			} else if ((st >> 16) == PTRACE_EVENT_EXIT) {
				sig = 0;
			}
		} else if (t->stop == UP_ST_SIGNAL) {
			sig = t->sig;
			if (sig == SIGTRAP && t->rewound) {
				/* an int3's stop, put back on the int3 (up__park_safe) and not
				   handled: with the int3 out it runs the original instruction
				   from there -- its SIGTRAP passed on would kill the program */
				sig = 0;
				if (rewound_untouched(t))
					t->regs_valid = t->regs_dirty = t->rewound = false;
			} else if (sig && t->info_clobbered && t->info.si_signo == sig) {
				up__ptrace(PTRACE_SETSIGINFO, t->tid, 0, &t->info);
			}
		} else if (t->stop == UP_ST_EVENT && sigtrap_pending(t->tid)) {
			sig = drain_sigtrap(e, t);
		}
		flush_regs(t);
		if (up__ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)sig) < 0 && errno != ESRCH)
			up__log(e, "thread %d: detach: %s", t->tid, strerror(errno));
	}
	/* statuses of threads that came and went meanwhile */
	for (struct up_task *t = p->tasks; t; t = t->next)
		if (t->queued)
			drop_deferred(e, t->tid);
	proc_mark_gone(p);
	proc_try_free(p);
	return 0;
}

/* ---- threads --------------------------------------------------------------------- */

pid_t up_task_tid(const struct up_task *t)
{
	return t->tid;
}

void up_proc_set_syscall_stub(struct up_proc *p, uint64_t at)
{
	p->syscall_stub = at;
}

int up_task_sigmask(struct up_task *t, uint64_t *mask)
{
	*mask = 0;
	if (t->state != UP_TS_STOPPED)
		return -ESRCH;
	if (up__ptrace(PTRACE_GETSIGMASK, t->tid, (void *)sizeof(*mask), mask) < 0)
		return -errno;
	return 0;
}

struct up_proc *up_task_proc(const struct up_task *t)
{
	return t->proc;
}

void *up_task_data(const struct up_task *t)
{
	return t->data;
}

void up_task_set_data(struct up_task *t, void *data)
{
	t->data = data;
}

bool up_task_stopped(const struct up_task *t)
{
	return t->state == UP_TS_STOPPED;
}

bool up_task_exited(const struct up_task *t)
{
	return t->stop == UP_ST_EXIT || t->state == UP_TS_EXITING || t->state == UP_TS_GONE;
}

bool up_task_trap_pending(struct up_task *t)
{
	struct up_engine *e = t->proc->e;
	siginfo_t si;

	if (t->state != UP_TS_STOPPED || t->stepping || t->qstep)
		return false;
	if (t->queued) {
		/* a deferred stop; parked (rewound): its SIGTRAP taken, the thread put back
		   on the int3, its rip shown one past it until the stop is handled */
		for (size_t i = 0; i < e->ndq; i++) {
			int st = e->dq[i].status;

			if (e->dq[i].tid != t->tid)
				continue;
			return !e->dq[i].orphan && WIFSTOPPED(st) && !(st >> 16) &&
			       WSTOPSIG(st) == SIGTRAP &&
			       (t->rewound || (up__ptrace(PTRACE_GETSIGINFO, t->tid, 0, &si) == 0 &&
					       si.si_code == SI_KERNEL));
		}
		return false;
	}
	if (t->rewound)
		return false;
	if (t->stop == UP_ST_SIGNAL)
		return !t->info_clobbered && t->info.si_signo == SIGTRAP &&
		       t->info.si_code == SI_KERNEL;
	return t->stop == UP_ST_EVENT && sigtrap_pending(t->tid);
}

/* Is tid's deferred status an ordinary signal's delivery stop (not a stop signal; a
   SIGTRAP only if a process sent it: not a trap, not a step)?  Its signal, or 0. */
static int deferred_plain_signal(struct up_engine *e, pid_t tid)
{
	for (size_t i = 0; i < e->ndq; i++) {
		int st = e->dq[i].status;
		siginfo_t si;

		if (e->dq[i].tid != tid)
			continue;
		if (e->dq[i].orphan || !WIFSTOPPED(st) || (st >> 16) ||
		    is_stop_signal(WSTOPSIG(st)))
			return 0;
		if (WSTOPSIG(st) == SIGTRAP &&
		    (up__ptrace(PTRACE_GETSIGINFO, tid, 0, &si) < 0 || si.si_code > 0))
			return 0;
		return WSTOPSIG(st);
	}
	return 0;
}

int up_task_serve_signal(struct up_task *t)
{
	struct up_engine *e = t->proc->e;

	for (int round = 0; round < 4; round++) {
		int sig, st, ev;

		/* only a stop the quiesce made and will end (qstopped): another one served
		   here would leave the thread in an event stop nobody resumes */
		if (t->state != UP_TS_STOPPED || !t->queued || t->stop != UP_ST_SIGNAL ||
		    t->proc->quiesce <= 0 || !t->qstopped)
			return -EINVAL;
		sig = deferred_plain_signal(e, t->tid);
		if (!sig)
			return -EAGAIN;
		flush_regs(t);
		/* the quiesce's interrupt is still pending (the signal's stop came first);
		   one more if not, so that the thread stops again after the signal's setup */
		if (!t->interrupt_sent) {
			if (up__ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) < 0)
				return -errno;
			t->interrupt_sent = true;
		}
		drop_deferred(e, t->tid);
		t->queued = false;
		if (up__ptrace(PTRACE_CONT, t->tid, 0, (void *)(long)sig) < 0) {
			/* still stopped in it: as it was */
			t->queued = true;
			up__defer(e, t->tid, (sig << 8) | 0x7f, false);
			return -errno;
		}
		t->state = UP_TS_RUNNING;
		t->regs_valid = false;
		if (up__wait_tid(e, t->tid, &st) < 0) {
			t->state = UP_TS_EXITING;
			return -ESRCH;
		}
		if (!WIFSTOPPED(st)) {
			t->state = UP_TS_EXITING;
			t->queued = true;
			up__defer(e, t->tid, st, false);
			return -ESRCH;
		}
		t->state = UP_TS_STOPPED;
		ev = st >> 16;
		if (ev == PTRACE_EVENT_STOP) {
			t->interrupt_sent = false;
			t->stop = is_stop_signal(WSTOPSIG(st)) ? UP_ST_GROUP : UP_ST_EVENT;
			return 0;
		}
		if (ev == PTRACE_EVENT_EXIT) {
			let_exit(e, t);
			return -ESRCH;
		}
		/* another signal first (a second one pending): served in the next round */
		t->stop = ev ? UP_ST_IN_SYSCALL : UP_ST_SIGNAL;
		t->queued = true;
		up__defer(e, t->tid, st, false);
		if (ev)
			return -EAGAIN;
	}
	return -EAGAIN;
}

int up_task_get_regs(struct up_task *t, struct user_regs_struct *regs)
{
	int err = up__load_regs(t);

	if (err < 0)
		return err;
	*regs = t->regs;
	return 0;
}

int up_task_set_regs(struct up_task *t, const struct user_regs_struct *regs)
{
	if (t->state != UP_TS_STOPPED)
		return -ESRCH;
	t->regs = *regs;
	t->regs_valid = true;
	t->regs_dirty = true;
	return 0;
}

void up_task_set_signal(struct up_task *t, int sig)
{
	t->sig = sig;
}

void up_task_set_siginfo(struct up_task *t, const siginfo_t *info)
{
	/* written at resume: task_resume_raw sets a clobbered siginfo back */
	t->sig = info->si_signo;
	t->info = *info;
	t->info_clobbered = true;
}

int up_task_resume(struct up_task *t, bool step)
{
	if (t->state != UP_TS_STOPPED)
		return -ESRCH;
	if (t->queued)
		return -EBUSY; /* its stop is still to be reported */
	return task_resume_raw(t, step);
}
