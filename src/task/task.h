/* SPDX-License-Identifier: MIT */
/*
 * The ptrace engine: what utrace was to the 2010 uprobes.  It seizes every thread of a
 * process (attached to a running pid or launched stopped before its first
 * instruction), tells the kinds of ptrace stop apart, stops and resumes threads,
 * reads and writes registers and memory, and runs system calls inside the traced
 * process.  It knows nothing of probes: whatever it does not handle itself (its own
 * interrupts, group-stops, new threads) it reports to one client through struct
 * up_task_ops.  One thread -- the one that calls up_engine_* -- owns every ptrace call.
 *
 * Errors are negative errno values; details go to the log callback.  Nothing here
 * prints or exits.  Prefix: up_engine_, up_proc_, up_task_.
 */
#ifndef UPROBE_TASK_TASK_H
#define UPROBE_TASK_TASK_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct up_engine;
struct up_proc; /* a traced process (thread group, one address space) */
struct up_task; /* a traced thread */

/* Why a thread stopped, as reported to the client. */
enum up_stop_kind {
	UP_STOP_BREAKPOINT, /* an int3 trapped (SIGTRAP, SI_KERNEL): rip = its address + 1 */
	UP_STOP_STEP,	    /* a single-step the client asked for completed (TRAP_TRACE) */
	UP_STOP_SIGNAL,	    /* signal-delivery-stop: sig, info; the program's own SIGTRAP too */
};

struct up_stop {
	enum up_stop_kind kind;
	int sig;	 /* UP_STOP_SIGNAL: the signal */
	siginfo_t info;	 /* UP_STOP_SIGNAL and UP_STOP_BREAKPOINT */
};

/* What the client wants done with a thread after it looked at a stop. */
enum up_resume {
	UP_RESUME_CONT, /* continue; a UP_STOP_SIGNAL's signal is delivered unless the client
			   called up_task_set_signal(t, 0) (then it is suppressed) */
	UP_RESUME_STEP, /* single-step one instruction; a UP_STOP_STEP follows */
	UP_RESUME_HOLD, /* leave it stopped; the client resumes it later with up_task_resume */
};

/*
 * The client's callbacks.  Each is called from up_engine_dispatch/run, with the
 * thread(s) concerned stopped.  Any may be NULL.
 */
struct up_task_ops {
	/* a breakpoint, single-step or signal stop */
	enum up_resume (*on_stop)(void *ctx, struct up_task *t, const struct up_stop *stop);
	/* a new thread (clone without CLONE_VM-less fork semantics), already attached and
	   stopped; it is resumed when this returns */
	void (*on_thread_new)(void *ctx, struct up_task *parent, struct up_task *t);
	/*
	 * fork/vfork/clone(no CLONE_THREAD): the child is attached and stopped before its
	 * first instruction, and stays stopped until this returns.  It is a new up_proc;
	 * for a vfork child it shares the parent's memory until it execs or exits.  If
	 * the client calls up_proc_detach(child) here, the engine lets it go.  The
	 * parent's thread is stopped too and resumed afterwards.
	 */
	void (*on_fork)(void *ctx, struct up_task *parent, struct up_proc *child, bool vfork);
	/* the process exec'd: one thread remains (t), with the leader's tid; the old
	   address space is gone.  t is stopped before the new program's first
	   instruction; it is resumed when this returns. */
	void (*on_exec)(void *ctx, struct up_proc *p, struct up_task *t);
	/* a thread is gone (it exited or was killed); t is freed after this */
	void (*on_thread_exit)(void *ctx, struct up_task *t);
	/* the whole process is gone: status is its wait status (exited or killed); p is
	   freed after this */
	void (*on_proc_exit)(void *ctx, struct up_proc *p, int status);
	/* a message for the user (the engine's log) */
	void (*log)(void *ctx, const char *msg);
	/*
	 * Optional: is there an int3 of the client's at addr?  Lets a SIGTRAP stop at
	 * addr + 1 be taken for that breakpoint without reading the siginfo (one
	 * ptrace call less per hit).
	 */
	bool (*is_breakpoint)(void *ctx, struct up_task *t, uint64_t addr);
	/* a thread is exiting (PTRACE_EVENT_EXIT): the address space is still readable
	   through up_task_read, for the last time if it is the last thread */
	void (*on_exiting)(void *ctx, struct up_task *t);
	/*
	 * t is about to run code for the tracer at [lo, hi] (a remote system call, a remote
	 * call): back are the registers it goes back to, mask its signal mask; lo == 0: it
	 * has them back.  For the safety net, which finishes it if the tracer dies meanwhile.
	 */
	void (*remote_note)(void *ctx, struct up_task *t, uint64_t lo, uint64_t hi,
			    const struct user_regs_struct *back, uint64_t mask);
	/*
	 * Optional: may t's signal-delivery-stop for info (not a stop signal) be
	 * delivered as it is, now -- the client would pass it on unchanged (no trap or
	 * fault of the client's, no step under way, rip in nothing of the client's)?  A
	 * quiesce then delivers such a signal at once, its stop never reaped, instead
	 * of keeping it for the unquiesce: a tracer's death before that would lose it.
	 * t is stopped for the call (its registers readable).  NULL: never.
	 */
	bool (*may_deliver)(void *ctx, struct up_task *t, const siginfo_t *info);
};

/* ---- the engine ------------------------------------------------------------------ */

int up_engine_new(const struct up_task_ops *ops, void *ctx, struct up_engine **out);
/* Detaches from every process still traced (threads resumed, pending signals kept). */
void up_engine_free(struct up_engine *e);

/*
 * A file descriptor that becomes readable when ptrace events may be pending (a
 * self-pipe written by a SIGCHLD handler the engine installs on first use), for
 * poll/epoll; then call up_engine_dispatch.
 */
int up_engine_fd(struct up_engine *e);
/*
 * A wait for one thread's stop (an attach, a quiesce, a remote syscall) blocks no more:
 * while the thread has not reported, hook(arg, fd) is called, fd the descriptor that
 * becomes readable when a tracee changes state.  The hook may sleep (poll fd) and serve
 * what the tracee waits on before it can stop (a FUSE request it made); it must not
 * call into the engine.  NULL: block in waitpid as before.
 */
int up_engine_set_wait_hook(struct up_engine *e, void (*hook)(void *arg, int fd), void *arg);
/* Handles every pending event without blocking; returns how many, or -errno. */
int up_engine_dispatch(struct up_engine *e);
/*
 * Blocks handling events until no process is traced (returns 0), up_engine_break was
 * called (returns -EINTR), or a signal interrupted the wait while *stop is nonzero
 * (returns -EINTR); stop may be NULL.
 */
int up_engine_run(struct up_engine *e, volatile int *stop);
void up_engine_break(struct up_engine *e);
/* Number of processes traced. */
unsigned up_engine_nprocs(const struct up_engine *e);
/*
 * The exit status of pid, a child that was not traced (any more) when a wait of the
 * engine's reaped it: 0, or -ECHILD where none did.  Taken once.
 */
int up_engine_reaped(pid_t pid, int *status);

/*
 * Attach to every thread of a running process (PTRACE_SEIZE, no SIGSTOP).  Fails with
 * -ESRCH (no such process), -EPERM (no permission: ptrace_scope, another uid, or
 * already traced -- then -EBUSY when /proc/PID/status shows a TracerPid), and logs
 * why.  The threads keep running.
 */
int up_engine_attach(struct up_engine *e, pid_t pid, struct up_proc **out);
/*
 * Launch argv[0] (PATH searched) with argv; the new process is traced and stopped
 * before the first instruction of the new program (at its exec), every thread
 * attached.  Resume it with up_proc_resume.  Its stdio, environment and working
 * directory are the caller's.  -ENOENT etc. when the exec fails (the child exits 127).
 */
int up_engine_spawn(struct up_engine *e, char *const argv[], struct up_proc **out);

/* ---- processes ------------------------------------------------------------------- */

pid_t up_proc_pid(const struct up_proc *p);
/* 64 or 32: from the code segment of a thread */
unsigned up_proc_mode(struct up_proc *p);
void *up_proc_data(const struct up_proc *p);
void up_proc_set_data(struct up_proc *p, void *data);
struct up_engine *up_proc_engine(const struct up_proc *p);

/* Iterates threads: first, then next until NULL. */
struct up_task *up_proc_first_task(struct up_proc *p);
struct up_task *up_proc_next_task(struct up_task *t);
struct up_task *up_proc_find_task(struct up_proc *p, pid_t tid);

/*
 * Stops every thread of the process that is running (PTRACE_INTERRUPT, waiting for
 * each).  A thread that stops for another reason meanwhile (a breakpoint, a signal)
 * counts as stopped; that stop is kept and reported to the client after
 * up_proc_unquiesce.  Nests.  -ESRCH when the process died meanwhile; -EAGAIN when it
 * exec'd before it could be stopped (the exec is not yet handled: up_proc_settle).
 * On failure the process is not quiesced.
 */
int up_proc_quiesce(struct up_proc *p);
/*
 * Handles now, as the event loop would, the exec that made up_proc_quiesce say -EAGAIN
 * (the client's on_exec runs: it forgets the old image before touching the new one).
 * The process may be detached or gone after it.  0 when an exec was handled, -ENOENT
 * when none was pending, -EBUSY when the process is quiesced or gone.
 */
int up_proc_settle(struct up_proc *p);
/* Undoes one up_proc_quiesce: at the outermost one, the threads it stopped run again. */
void up_proc_unquiesce(struct up_proc *p);
/* Resumes a process returned stopped by up_engine_spawn (or every held thread). */
int up_proc_resume(struct up_proc *p);
/* Is the process on its way out (killed: SIGKILL pending; a zombie; no address space)?
   An operation that failed on it failed for that reason. */
bool up_proc_dying(struct up_proc *p);
/*
 * Stops tracing the process: every thread detached (quiesced first; a pending signal
 * is passed on at detach).  The client's data must already be cleaned up.  The
 * up_proc is freed.
 */
int up_proc_detach(struct up_proc *p);

/* Memory: data through process_vm_readv/writev, falling back to /proc/PID/mem. */
int up_proc_read(struct up_proc *p, uint64_t addr, void *buf, size_t len);
/* Through one thread, also while it exits (on_exiting). */
int up_task_read(struct up_task *t, uint64_t addr, void *buf, size_t len);
int up_proc_write(struct up_proc *p, uint64_t addr, const void *buf, size_t len);
/*
 * Text: writes into read-only private mappings through /proc/PID/mem (FOLL_FORCE:
 * the page becomes a private copy, also in shared libraries), falling back to
 * PTRACE_POKETEXT where the kernel refuses forced writes.
 */
int up_proc_write_text(struct up_proc *p, uint64_t addr, const void *buf, size_t len);
/* What a quiesce's page cache holds of p's memory, written to the process now (else at
   the next resume): for a write that something outside the cache must not get ahead
   of -- the safety net's table, written directly, forgetting an int3 still there. */
void up_proc_flush(struct up_proc *p);

/* One line of /proc/PID/maps. */
struct up_map {
	uint64_t start, end, offset;
	uint64_t ino; /* the file's inode number (0: anonymous) */
	bool r, w, x, shared;
	char path[256]; /* "" for anonymous, "[vdso]" etc. */
};
/* The mapping containing addr: 0, or -ENOENT. */
int up_proc_find_map(struct up_proc *p, uint64_t addr, struct up_map *out);
/* Calls fn for every mapping in order until it returns nonzero (returned). */
int up_proc_for_each_map(struct up_proc *p, int (*fn)(void *arg, const struct up_map *m),
			 void *arg);

/*
 * Runs system call nr with up to 6 arguments in the process, from thread t (stopped,
 * and not in the middle of a step the client owns), with every signal blocked and
 * every register and the signal mask restored afterwards.  It executes an existing
 * syscall instruction (the vDSO's); where there is none it writes one at rip, which
 * needs the process quiesced.  nr is the number for the process's mode (32-bit
 * numbers for a 32-bit process).  *ret gets the raw return value (-errno on error).
 * Returns 0 or -errno of the mechanism itself.
 */
int up_task_syscall(struct up_task *t, long nr, const uint64_t args[6], int64_t *ret);

/*
 * The same with the arguments spelled out, and the remote call's own error folded in:
 * 0, the mechanism's -errno, or the syscall's -errno (*ret keeps the raw value).
 */
static inline int up_task_rsys(struct up_task *t, long nr, uint64_t a0, uint64_t a1, uint64_t a2,
			       uint64_t a3, uint64_t a4, uint64_t a5, int64_t *ret)
{
	uint64_t args[6] = { a0, a1, a2, a3, a4, a5 };
	int rc = up_task_syscall(t, nr, args, ret);

	if (rc)
		return rc;
	return *ret < 0 && *ret > -4096 ? (int)*ret : 0;
}
/*
 * System calls one after the other from t, as up_task_syscall runs them, where the
 * tracer must act between them (write what the next needs, from the last's result):
 * next(arg, k, prev, &nr, args) is asked for call k (k 0 first, prev 0; then prev the
 * result of call k-1), and returns false to end -- also after the last call, to hear
 * its result.  Before the safety net's stub exists (64-bit, at an event stop) the
 * calls run through the vDSO's rescue stub without leaving it: two stops a call, and
 * one interrupt at the end, instead of three stops a call.  0, or -errno of the
 * mechanism (a call not run is not asked for; next() then heard no result of it).
 */
typedef bool (*up_task_chain_fn)(void *arg, unsigned k, int64_t prev, long *nr, uint64_t args[6]);
int up_task_syscall_chain(struct up_task *t, up_task_chain_fn next, void *arg);

/*
 * Several system calls in one remote run (one stop instead of one a call): calls[0..n)
 * in order, each argument either its value or, where from[i] names an earlier call
 * (from[i] = k + 1 for calls[k]), that call's result -- a descriptor, an address.  The
 * first call that fails ends the run; ret of a call not run reads -ECANCELED.  The
 * code goes to `code` (UP_TASK_SYSCALLS_CODE bytes of an executable mapping of ours in
 * the process, written here: the process must be quiesced); without it (0), or in a
 * 32-bit process, the calls run one by one as up_task_syscall does.  At most
 * UP_TASK_SYSCALLS_MAX calls; the seventh's result cannot be passed on (it is the last).  Returns 0 or -errno of the mechanism itself; each
 * call's own result is in its ret.
 */
#define UP_TASK_SYSCALLS_MAX 7
#define UP_TASK_SYSCALLS_CODE 704
struct up_task_rsys {
	long nr;
	uint64_t args[6];
	uint8_t from[6];
	int64_t ret;
};
int up_task_syscalls(struct up_task *t, uint64_t code, struct up_task_rsys *calls, unsigned n);

/*
 * Runs code in the process from thread t (stopped; the process quiesced): from fn with
 * rdi = a0, rsi = a1, every signal blocked, until it stops at end, just after an int3
 * that the code ends with.  The code must not use the stack or fault (-EFAULT: it did,
 * and was stopped there).  Every register and the mask are put back.
 */
int up_task_call(struct up_task *t, uint64_t fn, uint64_t end, uint64_t a0, uint64_t a1);

/* ---- threads --------------------------------------------------------------------- */

pid_t up_task_tid(const struct up_task *t);
/*
 * A breakpoint stop whose thread goes on elsewhere (the client set its rip) right after
 * an int3 the client knows, its stop not reaped (its SIGTRAP still the stop's): the
 * siginfo gets si_errno UP_SI_MOVED and si_addr the new rip before the registers go in,
 * so that a tracer dying before the resume leaves the signal saying where the thread
 * was sent, not a trap at the int3 before it (the safety net: src/agent/net.h).
 */
#define UP_SI_MOVED 0x75706d76
/*
 * 64-bit remote system calls of p run at `at` from now on (0: the vDSO's `syscall`
 * again): the bytes `0f 05 cc eb fd` (syscall; int3; jmp back to the int3), run free up
 * to the int3 instead of stepped over the vDSO's instruction.  A tracer that dies while
 * the thread is in the call, or before its registers are back, leaves it trapping at
 * that int3 (into whoever put the stub there: the safety net), not running the vDSO's
 * next instructions with the call's registers (SIGSEGV at gettimeofday+281, seen).
 * The caller clears it before the stub's mapping goes.
 */
void up_proc_set_syscall_stub(struct up_proc *p, uint64_t at);
/* t's blocked signals (PTRACE_GETSIGMASK; t stopped): 0 or -errno. */
int up_task_sigmask(struct up_task *t, uint64_t *mask);
struct up_proc *up_task_proc(const struct up_task *t);
void *up_task_data(const struct up_task *t);
void up_task_set_data(struct up_task *t, void *data);
/* Stopped (in a stop the engine or the client holds)? */
bool up_task_stopped(const struct up_task *t);
/*
 * t, at the trap of an int3 of the client's that is being handled, put back on the
 * int3 in the kernel now (its registers as the client sees them stay, written at the
 * resume): a tracer dying from here on has it run whatever is at the int3's address
 * then -- the int3, or the bytes that replaced it -- not the byte after it.  For a
 * client about to take that int3 out (and put a jmp there) before the thread resumes.
 */
void up_task_park(struct up_task *t);
/* Past its exit stop (PTRACE_EVENT_EXIT handled): it runs no code of the program's
   any more, though it is listed until it is reaped. */
bool up_task_exited(const struct up_task *t);
/*
 * Is t stopped with the trap of an int3 its client has not handled yet (the stop being
 * handled, one deferred, or a SIGTRAP queued behind a quiesce's interrupt)?  Its rip
 * is then the int3's next byte, and it goes back to the int3 if the client finds its
 * probe gone.  Not for a thread stepping.  May read /proc/TID/status.
 */
bool up_task_trap_pending(struct up_task *t);
/*
 * t, stopped by a quiesce in a signal-delivery-stop of an ordinary signal (its status
 * deferred until the unquiesce: it cannot run code for the tracer), takes that signal
 * now -- its handler's frame set up, as the resume after the unquiesce would have --
 * and stops again at the interrupt the quiesce left pending, able to run code.  At
 * most a few signals in a row; 0, -EAGAIN (another stop came instead: deferred as it
 * was) or -errno.
 */
int up_task_serve_signal(struct up_task *t);

/*
 * The registers of a stopped thread: read on first use in a stop, cached; written
 * back at resume when up_task_set_regs was called.
 */
int up_task_get_regs(struct up_task *t, struct user_regs_struct *regs);
int up_task_set_regs(struct up_task *t, const struct user_regs_struct *regs);
/*
 * The signal a UP_RESUME_CONT / up_task_resume passes on (0: none).  At a
 * UP_STOP_BREAKPOINT or UP_STOP_STEP none is passed unless set (then SIGTRAP, say, is
 * delivered as the program's own); at a UP_STOP_SIGNAL the stop's signal is, unless
 * set to 0 or another one.
 */
void up_task_set_signal(struct up_task *t, int sig);
/*
 * Like up_task_set_signal, with the full siginfo (PTRACE_SETSIGINFO at resume), so a
 * signal delayed by the client reaches the program exactly as it was raised.
 */
void up_task_set_siginfo(struct up_task *t, const siginfo_t *info);
/* Resumes a held thread; step: single-step (a UP_STOP_STEP follows). */
int up_task_resume(struct up_task *t, bool step);

/*
 * Implementation notes (src/task/engine.c, no new functions):
 * - The engine waits with waitpid(-1, __WALL): it also reaps exits of the caller's own
 *   untraced children.  A program that forks helpers of its own must not share a
 *   process with an engine, or must reap them before the engine's next dispatch.
 * - Threads past their PTRACE_EVENT_EXIT (about to be reaped, e.g. a zombie leader) are
 *   not listed by up_proc_first_task/next_task/find_task; on_thread_exit still comes.
 * - At a fork/clone/exec event stop the thread is still inside the system call (rax
 *   reads -ENOSYS); up_task_syscall first takes it out to the user boundary with a
 *   PTRACE_INTERRUPT (no user instruction runs), after which rax holds the result.
 *   up_engine_spawn returns the process already there.
 * - A deferred breakpoint stop whose int3 is gone by the time it is handled (the
 *   client removed it while the stop was queued) is not reported: rip is moved back
 *   onto the instruction and the thread resumed, as the kernel's uprobes does.
 */

#endif
