/* SPDX-License-Identifier: MIT */
/*
 * Private to src/task/: the engine's objects and the helpers its files share.  Nothing
 * outside src/task/ includes this; the contract is task.h.
 */
#ifndef UPROBE_TASK_INTERNAL_H
#define UPROBE_TASK_INTERNAL_H

#include "task/task.h"

#include <sched.h>

/* Where a thread is, as far as ptrace goes. */
enum up_tstate {
	UP_TS_RUNNING,	 /* resumed by us (PTRACE_CONT/SINGLESTEP) */
	UP_TS_LISTENING, /* in a group-stop, PTRACE_LISTEN: not executing, not ptrace-stopped */
	UP_TS_STOPPED,	 /* in a ptrace-stop */
	UP_TS_EXITING,	 /* continued past PTRACE_EVENT_EXIT (or died): waiting to be reaped */
	UP_TS_GONE,	 /* detached or reaped; the object lingers until freed */
};

/* Which kind of ptrace-stop a UP_TS_STOPPED thread is in (what a resume may do). */
enum up_stype {
	UP_ST_SIGNAL,	   /* signal-delivery-stop: a signal can be injected at resume */
	UP_ST_EVENT,	   /* PTRACE_EVENT_STOP (interrupt, new thread): at the user boundary */
	UP_ST_GROUP,	   /* PTRACE_EVENT_STOP of a group-stop: resumed with PTRACE_LISTEN */
	UP_ST_IN_SYSCALL,  /* fork/vfork/clone/exec event: still inside the system call */
	UP_ST_EXIT,	   /* PTRACE_EVENT_EXIT */
};

struct up_task {
	struct up_task *next;
	struct up_proc *proc;
	pid_t tid;
	enum up_tstate state;
	enum up_stype stop;
	bool held;	     /* the client (or spawn) holds it stopped */
	bool qstopped;	     /* stopped by up_proc_quiesce: resumed at the outermost unquiesce */
	int qdepth;	   /* the quiesce depth that stopped it (qstopped) */
	bool qstep;	   /* stepping, resumed for it while its process was quiesced */
	bool queued;	     /* a stop of it waits in the engine's deferred queue */
	bool qwait;	     /* interrupted by up_proc_quiesce, its stop not seen yet */
	bool stepping;	     /* resumed with PTRACE_SINGLESTEP for the client */
	bool interrupt_sent; /* a PTRACE_INTERRUPT whose stop has not been seen */
	bool regs_valid, regs_dirty;
	bool info_clobbered; /* a remote syscall replaced the signal-delivery-stop's siginfo */
	/* the kernel's rip is one byte before ours: put back on the int3 of a breakpoint
	   stop whose SIGTRAP was consumed (up__park_safe) */
	bool rewound;
	int sig;	     /* passed on at resume (signal-delivery-stops only) */
	siginfo_t info;	     /* of the current signal-delivery-stop */
	struct user_regs_struct regs;
	void *data;
};

struct up_proc {
	struct up_proc *next;
	struct up_engine *e;
	pid_t pid;
	struct up_task *tasks;
	int quiesce;
	int memfd; /* /proc/PID/mem, reopened after exec; -1 when not open */
	unsigned mode; /* 0: unknown */
	bool vdso_known;
	uint64_t syscall_insn; /* address of a syscall / int $0x80 in the vDSO, 0: none */
	uint64_t rescue; /* the vDSO's unused tail: a 64-bit remote call's place before the
			    net's stub exists (syscall.c's rescue stub), 0: none */
	uint64_t syscall_stub; /* `syscall; int3; jmp .-1` of the client's (the safety
				  net's), 0: none -- preferred to the vDSO's (syscall.c) */
	bool vfork_child;
	struct up_tcache *tc; /* mem.c: pages read and written while quiesced, or NULL */
	bool gone; /* detached or exited: freed when refs drops to 0 */
	int refs;
	void *data;
};

struct up_deferred {
	pid_t tid;
	int status;
	bool orphan; /* the stop of a thread not known yet (its creator's event is due) */
	pid_t exec_former; /* a PTRACE_EVENT_EXEC stop: the tid that exec'd (0: not one) */
};

struct up_engine {
	const struct up_task_ops *ops;
	void *ctx;
	struct up_proc *procs;
	unsigned nprocs;
	struct up_deferred *dq;
	size_t ndq, cap_dq;
	volatile int brk;
	/* placement (engine.c): the engine thread follows its tracees' CPU */
	bool pin_on;	    /* UPROBE_PIN=1 and there are CPUs to choose from */
	int pin_cpu;	    /* the CPU the engine thread is pinned to, -1: none (its own mask) */
	uint64_t pin_next;  /* CLOCK_MONOTONIC_COARSE ns of the next look at a tracee's CPU */
	cpu_set_t pin_orig; /* the engine thread's own mask: restored, and given to spawns */
	/* while a wait for one thread blocks: called with the wake descriptor instead */
	void (*wait_hook)(void *arg, int fd);
	void *wait_arg;
};

/* TRACESYSGOOD: a system-call stop (syscall.c's remote calls before the safety net)
   carries SIGTRAP | 0x80, which a thread whose tracer died does not take as a signal */
#define UP_PTRACE_OPTIONS                                                                  \
	(PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | \
	 PTRACE_O_TRACEEXIT | PTRACE_O_TRACESYSGOOD)

/* engine.c */
void up__log(struct up_engine *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
struct up_task *up__find_task(struct up_engine *e, pid_t tid);
/* Waits for tid's next status; statuses of other threads seen meanwhile are deferred. */
/*
 * ptrace(2) for the engine's own requests.  ESRCH normally means the thread was killed;
 * one from a thread that /proc still shows alive is not that: the request is tried once
 * more (a lost ptrace relationship is logged by the caller if it persists).
 */
long up__ptrace(int req, pid_t tid, void *addr, void *data);
/* A thread stopped by our interrupt with an int3's SIGTRAP still pending takes it now,
   the stop deferred; true if so (the thread is not to be run for us). */
bool up__defer_pending_sigtrap(struct up_task *t);
int up__wait_tid(struct up_engine *e, pid_t tid, int *status);
int up__defer(struct up_engine *e, pid_t tid, int status, bool orphan);
int up__load_regs(struct up_task *t);
/* A breakpoint stop of t taken without resuming it at once: rip back on the int3 in the
   kernel (the tracer's copy stays as it was), so that the tracer's death lets the
   thread trap again into the safety net instead of running one byte past it. */
void up__park_safe(struct up_task *t, int status);
/* A ptrace-stopped thread the engine may run ptrace requests on, or NULL. */
struct up_task *up__stopped_task(struct up_proc *p);
/* A thread whose memory is readable (not exiting), or NULL. */
struct up_task *up__live_task(struct up_proc *p);
void up__wake_fd(void);

/* mem.c */
int up__proc_open_mem(struct up_proc *p);
void up__proc_close_mem(struct up_proc *p);
/* Writes back what the quiesced process's page cache holds; before any thread runs. */
void up__mem_flush(struct up_proc *p);
/* up__mem_flush, then forgets the cache (at the outermost unquiesce). */
void up__mem_release(struct up_proc *p);
/* Forgets the cache unwritten (the address space is gone: exec, exit). */
void up__mem_drop(struct up_proc *p);

/* syscall.c */
/* Brings a thread in an in-syscall event stop to a PTRACE_EVENT_STOP at the user
   boundary, no user instruction executed. */
int up__task_normalize(struct up_task *t);

#endif
