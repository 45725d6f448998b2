/* SPDX-License-Identifier: MIT */
/*
 * System calls run inside a traced process (CRIU compel's way, over a syscall already in
 * the vDSO): from a stopped thread, save its registers and signal mask, block every
 * signal but SIGTRAP (see run_remote), point rip at a `syscall` (64-bit) or `int $0x80`
 * (32-bit) in the vDSO, load the number and arguments, single-step over it, read rax,
 * put everything back.  orig_rax is
 * -1 meanwhile, so the kernel's system-call restart logic leaves our registers alone.
 * Without a vDSO the instruction is written at rip for the duration, which is only safe
 * when no other thread can execute there: the caller must have quiesced the process.
 * Code of ours already in the process (the agent's page toucher) runs the same way,
 * free instead of stepped, until the int3 it ends with.
 *
 * A tracer that dies during a remote call leaves the thread to run on from wherever its
 * registers are: after the vDSO's syscall, with the call's registers and every signal
 * blocked, it would run the vDSO's next instructions (SIGSEGV at gettimeofday+281).
 * Once the safety net exists its stub (`syscall; int3`) takes the calls, and its handler
 * gives the thread back.  Before that (the net's own first calls) a 64-bit call runs at
 * a rescue stub written into the vDSO's unused tail for the call's duration: the
 * `syscall`, then code that a living tracer never lets run -- the thread's signal mask
 * put back, its registers reloaded, a jump to where it was (the kernel's restart of an
 * interrupted system call done as its resume would have done it).  The tail's bytes are
 * zeros again after every call.  And no step there (a ptrace step's trap flag stays in
 * the registers of a thread whose tracer died): the call runs by PTRACE_SYSCALL, from
 * stop to stop (run_remote's RUN_SYSCALL).
 */
#include "task/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

struct vdso_arg {
	uint64_t start, end;
};

static int vdso_fn(void *arg, const struct up_map *m)
{
	struct vdso_arg *a = arg;

	if (strcmp(m->path, "[vdso]"))
		return 0;
	a->start = m->start;
	a->end = m->end;
	return 1;
}

static size_t emit_imm(uint8_t *c, unsigned reg, uint64_t v);

/* r's general-purpose register by its x86 number (rax 0 ... r15 15) */
static uint64_t gpr(const struct user_regs_struct *r, unsigned reg)
{
	const unsigned long long *at[16] = {
		&r->rax, &r->rcx, &r->rdx, &r->rbx, &r->rsp, &r->rbp, &r->rsi, &r->rdi,
		&r->r8,	 &r->r9,  &r->r10, &r->r11, &r->r12, &r->r13, &r->r14, &r->r15,
	};

	return *at[reg & 15];
}

/* the rescue stub's room: 2 + 7 + 4 * 6 + 2 + 9 * 10 + 6 + 8 + 8 bytes at most */
#define RESCUE_LEN 160

static uint64_t rd(const uint8_t *b, size_t at, size_t n)
{
	uint64_t v = 0;

	memcpy(&v, b + at, n);
	return v;
}

/*
 * The first byte of the vDSO image img[0, size) that no part of the ELF file uses (its
 * headers, every segment's and section's bytes), 16-aligned, if RESCUE_LEN zero bytes
 * follow it inside the image; else 0.  img is the process's memory: copied once by the
 * caller, every offset bounded here.
 */
static size_t vdso_tail(const uint8_t *img, size_t size)
{
	uint64_t used = 64, phoff, shoff;
	unsigned phent, phnum, shent, shnum;

	if (size < 64 || memcmp(img, "\177ELF\002", 5))
		return 0;
	phoff = rd(img, 0x20, 8), shoff = rd(img, 0x28, 8);
	phent = (unsigned)rd(img, 0x36, 2), phnum = (unsigned)rd(img, 0x38, 2);
	shent = (unsigned)rd(img, 0x3a, 2), shnum = (unsigned)rd(img, 0x3c, 2);
	if ((phnum && (phent < 56 || phoff > size || (uint64_t)phnum * phent > size - phoff)) ||
	    (shnum && (shent < 64 || shoff > size || (uint64_t)shnum * shent > size - shoff)))
		return 0;
	if (phnum && phoff + (uint64_t)phnum * phent > used)
		used = phoff + (uint64_t)phnum * phent;
	if (shnum && shoff + (uint64_t)shnum * shent > used)
		used = shoff + (uint64_t)shnum * shent;
	for (unsigned i = 0; i < phnum; i++) {
		uint64_t off = rd(img, phoff + (uint64_t)i * phent + 8, 8);
		uint64_t len = rd(img, phoff + (uint64_t)i * phent + 32, 8);

		if (off > size || len > size - off)
			return 0;
		if (off + len > used)
			used = off + len;
	}
	for (unsigned i = 0; i < shnum; i++) {
		const uint64_t sh = shoff + (uint64_t)i * shent;
		uint64_t off = rd(img, sh + 24, 8), len = rd(img, sh + 32, 8);

		if (rd(img, sh + 4, 4) == 8 /* SHT_NOBITS */)
			continue;
		if (off > size || len > size - off)
			return 0;
		if (off + len > used)
			used = off + len;
	}
	used = (used + 15) & ~(uint64_t)15;
	if (used + RESCUE_LEN > size)
		return 0;
	for (size_t i = 0; i < RESCUE_LEN; i++)
		if (img[used + i])
			return 0;
	return (size_t)used;
}

/* Finds and caches the address of a system-call instruction in the vDSO, and the room
   for the rescue stub (64-bit). */
static uint64_t vdso_syscall_insn(struct up_proc *p, unsigned mode)
{
	struct vdso_arg a = { 0, 0 };
	uint8_t *img;
	size_t n;

	if (p->vdso_known)
		return p->syscall_insn;
	p->vdso_known = true;
	p->syscall_insn = 0;
	p->rescue = 0;
	if (up_proc_for_each_map(p, vdso_fn, &a) != 1 || a.end <= a.start)
		return 0;
	n = a.end - a.start < 65536 ? (size_t)(a.end - a.start) : 65536;
	img = malloc(n);
	if (!img)
		return 0;
	if (up_proc_read(p, a.start, img, n) < 0) {
		free(img);
		return 0;
	}
	for (size_t i = 0; i + 1 < n; i++) {
		if ((mode == 64 && img[i] == 0x0f && img[i + 1] == 0x05) ||
		    (mode == 32 && img[i] == 0xcd && img[i + 1] == 0x80)) {
			p->syscall_insn = a.start + i;
			break;
		}
	}
	if (mode == 64 && n == a.end - a.start && !getenv("UPROBE_NO_RESCUE")) {
		size_t tail = vdso_tail(img, n);

		if (tail)
			p->rescue = a.start + tail;
	}
	free(img);
	return p->syscall_insn;
}

/*
 * The rescue stub at `at` for a call from a thread that goes back to registers b and
 * signal mask `mask`: `syscall` (the call, stepped over by the tracer), then what only a
 * thread whose tracer died runs -- rt_sigprocmask(SIG_SETMASK, &mask, NULL, 8), the
 * registers a system call or our call changed (rax, rcx, rdx, rsi, rdi, r8-r11) loaded
 * with movs (the flags as they were: a mov sets none), a jump to b's rip.  b at an
 * interrupted system call the kernel would restart at its resume (rax -ERESTARTSYS,
 * -ERESTARTNOINTR, -ERESTARTNOHAND, orig_rax its number; -ERESTART_RESTARTBLOCK:
 * restart_syscall) goes back to the syscall instruction with the number in rax, as the
 * kernel would have put it there.  Returns its length.
 */
/* b as the kernel leaves it when it resumes b without a signal: an interrupted system
   call to restart goes back to its instruction, its number in rax; orig_rax -1 */
static struct user_regs_struct restarted(const struct user_regs_struct *b)
{
	struct user_regs_struct r = *b;

	if ((int64_t)b->orig_rax >= 0) {
		switch ((int64_t)b->rax) {
		case -512: /* ERESTARTSYS */
		case -513: /* ERESTARTNOINTR */
		case -514: /* ERESTARTNOHAND */
			r.rax = b->orig_rax, r.rip -= 2;
			break;
		case -516: /* ERESTART_RESTARTBLOCK */
			r.rax = 219 /* restart_syscall */, r.rip -= 2;
			break;
		}
	}
	r.orig_rax = (uint64_t)-1;
	return r;
}

static size_t rescue_code(uint8_t *c, const struct user_regs_struct *b0, uint64_t mask)
{
	static const uint8_t kept[9] = { 1 /* rcx */, 2, 6, 7, 8, 9, 10, 11, 0 /* rax */ };
	const struct user_regs_struct rs = restarted(b0), *b = &rs;
	uint64_t rip = b->rip;
	size_t n = 0, lea;
	c[n++] = 0x0f, c[n++] = 0x05;	  /* syscall: the call */
	memcpy(c + n, "\x48\x8d\x35", 3); /* lea mask(%rip), %rsi */
	lea = n + 3;
	n += 7;
	n += emit_imm(c + n, 0, 14 /* rt_sigprocmask */);
	n += emit_imm(c + n, 7, 2 /* SIG_SETMASK */);
	n += emit_imm(c + n, 2, 0);
	n += emit_imm(c + n, 10, 8);
	c[n++] = 0x0f, c[n++] = 0x05;
	for (unsigned i = 0; i < 9; i++) {
		n += emit_imm(c + n, kept[i], gpr(b, kept[i]));
	}
	memcpy(c + n, "\xff\x25\0\0\0\0", 6); /* jmp *0(%rip) */
	n += 6;
	memcpy(c + n, &rip, 8);
	n += 8;
	{
		int32_t rel = (int32_t)(n - (lea + 4));

		memcpy(c + lea, &rel, 4);
	}
	memcpy(c + n, &mask, 8);
	return n + 8;
}

/* Resumes t with req and waits for its next ptrace-stop at the user boundary. */
static int run_until(struct up_task *t, int req, int *status, int *pending_sig)
{
	struct up_engine *e = t->proc->e;

	for (;;) {
		int st, err;

		if (t->proc->tc)
			up__mem_flush(t->proc); /* the syscall instruction written at rip */
		if (up__ptrace(req, t->tid, 0, 0) < 0)
			return -errno;
		t->state = UP_TS_RUNNING;
		err = up__wait_tid(e, t->tid, &st);
		if (err < 0)
			return err;
		if (!WIFSTOPPED(st)) {
			/* died: let dispatch report it */
			t->state = UP_TS_EXITING;
			t->queued = true;
			up__defer(e, t->tid, st, false);
			return -ESRCH;
		}
		t->state = UP_TS_STOPPED;
		t->regs_valid = false;
		if ((st >> 16) == PTRACE_EVENT_EXIT) {
			t->stop = UP_ST_EXIT;
			t->queued = true;
			up__defer(e, t->tid, st, false);
			return -ESRCH;
		}
		if ((st >> 16) == 0 && (WSTOPSIG(st) == SIGSEGV || WSTOPSIG(st) == SIGBUS ||
					WSTOPSIG(st) == SIGILL || WSTOPSIG(st) == SIGFPE)) {
			/* a fault (blocked, so forced): the code run there is broken */
			*status = st;
			return -EFAULT;
		}
		if ((st >> 16) == 0 && WSTOPSIG(st) == (SIGTRAP | 0x80)) {
			*status = st; /* a system-call stop (PTRACE_O_TRACESYSGOOD) */
			return 0;
		}
		if ((st >> 16) == 0 && WSTOPSIG(st) != SIGTRAP) {
			/* an unblockable signal (SIGSTOP) meanwhile: sent again afterwards */
			*pending_sig = WSTOPSIG(st);
			continue;
		}
		if ((st >> 16) == PTRACE_EVENT_STOP &&
		    (req == PTRACE_SINGLESTEP || req == PTRACE_SYSCALL))
			continue; /* an interrupt or group-stop before the step: step again */
		*status = st;
		return 0;
	}
}

int up__task_normalize(struct up_task *t)
{
	int st, sig = 0, err;

	if (t->state != UP_TS_STOPPED)
		return -ESRCH;
	if (t->stop != UP_ST_IN_SYSCALL)
		return 0;
	if (t->regs_dirty) {
		if (up__ptrace(PTRACE_SETREGS, t->tid, 0, &t->regs) < 0)
			return -errno;
		t->regs_dirty = false;
	}
	if (up__ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) < 0)
		return -errno;
	err = run_until(t, PTRACE_CONT, &st, &sig);
	if (err < 0)
		return err;
	if ((st >> 16) != PTRACE_EVENT_STOP) {
		up__log(t->proc->e, "thread %d: unexpected stop 0x%x leaving a system call", t->tid,
			st);
		return -EIO;
	}
	t->interrupt_sent = false;
	t->stop = (WSTOPSIG(st) == SIGTRAP) ? UP_ST_EVENT : UP_ST_GROUP;
	if (sig)
		tgkill(t->proc->pid, t->tid, sig);
	return 0;
}

/* t stopped and normalized, its registers loaded: -errno if it cannot run code now. */
static int ready(struct up_task *t)
{
	int err;

	if (t->state != UP_TS_STOPPED || t->stop == UP_ST_EXIT || t->queued)
		return -ESRCH;
	if (up__defer_pending_sigtrap(t))
		return -EAGAIN; /* its breakpoint stop first: another thread may serve */
	err = up__task_normalize(t);
	if (err < 0)
		return err;
	return up__load_regs(t);
}

/*
 * The registers t goes back to after a remote call: its own, but on the int3 it trapped
 * on if it waits at a breakpoint stop not handled yet (the step's stop replaces it and
 * is reaped, so a tracer dying afterwards must find it on the int3, to trap again into
 * the safety net, not one byte past it).
 */
static struct user_regs_struct regs_back(struct up_task *t)
{
	struct up_engine *e = t->proc->e;
	struct user_regs_struct b = t->regs;

	if (t->stop == UP_ST_SIGNAL && t->info.si_signo == SIGTRAP &&
	    t->info.si_code == SI_KERNEL && (!t->regs_dirty || t->rewound) &&
	    e->ops->is_breakpoint && e->ops->is_breakpoint(e->ctx, t, b.rip - 1))
		b.rip--;
	return b;
}

enum run_how {
	RUN_FREE,    /* free until the int3 before end */
	RUN_STEP,    /* single steps, each leaving rip at r->rip or end */
	RUN_SYSCALL, /* through the system call at r->rip by its two system-call stops */
};

/*
 * Runs t from registers *r, every signal blocked, until it stops with rip at end (how);
 * the code run is [lo, end] (for the safety net: remote_note).  *r gets the registers
 * there.  t's registers and mask are put back, unless it died meanwhile (-ESRCH).
 * rescue: r->rip is the vDSO's tail, where the rescue stub goes first.  The registers
 * are set before the mask is: a death between the two finds the thread at the call,
 * with its own mask, which the stub or the net's handler puts back anyway.
 *
 * RUN_SYSCALL (with the rescue stub, from a stop that holds no signal) leaves nothing
 * for a death to deliver: a system-call stop not yet reaped carries SIGTRAP | 0x80,
 * which the kernel does not send when its tracer is gone, and no trap flag is set (a
 * step's flag stays in the registers of a thread whose tracer died before its resume:
 * a trap into the program after one instruction, its own handler's or SIGTRAP's
 * default).  The thread ends in an event stop again.
 */
/* RUN_SYSCALL's next calls, asked at each call's exit stop (up_task_syscall_chain) */
struct chain {
	up_task_chain_fn next;
	void *arg;
	unsigned k;
	bool ended; /* next() said no more */
	/* the thread was in a system call's event stop (an exec's, a fork's): it stays in
	   the last call's exit stop, as resumable as that one, instead of an interrupt's
	   round trip to an event stop (a stop of the process less) */
	bool stay;
};

/* A 64-bit system call nr's number and arguments in r (not one to restart). */
static void call_regs64(struct user_regs_struct *r, long nr, const uint64_t args[6])
{
	r->rax = (uint64_t)nr;
	r->orig_rax = (uint64_t)-1;
	r->rdi = args[0];
	r->rsi = args[1];
	r->rdx = args[2];
	r->r10 = args[3];
	r->r8 = args[4];
	r->r9 = args[5];
}

/* r as the next call of a chain wants it: rip back on the syscall instruction */
static bool chain_next(struct chain *c, struct user_regs_struct *r, uint64_t insn_at)
{
	uint64_t args[6] = { 0 };
	long nr;

	if (!c->next(c->arg, ++c->k, (int64_t)r->rax, &nr, args)) {
		c->ended = true;
		return false;
	}
	r->rip = insn_at;
	call_regs64(r, nr, args);
	return true;
}

static int run_remote_chain(struct up_task *t, struct user_regs_struct *r, enum run_how how,
			    uint64_t lo, uint64_t end, bool rescue, const char *what,
			    struct chain *chain);

static int run_remote(struct up_task *t, struct user_regs_struct *r, enum run_how how, uint64_t lo,
		      uint64_t end, bool rescue, const char *what)
{
	return run_remote_chain(t, r, how, lo, end, rescue, what, NULL);
}

/*
 * RUN_SYSCALL with a chain: at each call's exit stop the chain may ask for another
 * call, run from the same instruction through its own two stops, the thread never
 * leaving the rescue stub's cover in between (a death at any of those stops ends in
 * the stub's restoring tail, as after a lone call).
 */
static int run_remote_chain(struct up_task *t, struct user_regs_struct *r, enum run_how how,
			    uint64_t lo, uint64_t end, bool rescue, const char *what,
			    struct chain *chain)
{
	struct up_engine *e = t->proc->e;
	struct user_regs_struct saved = t->regs, back = regs_back(t), now;
	enum up_stype orig_stop = t->stop;
	/* every signal but SIGTRAP: the step's trap (or the int3's) is forced, and a forced
	   signal that is blocked resets its disposition to SIG_DFL (the kernel's
	   force_sig_info_to_task), which took the program's own SIGTRAP handler, and the
	   safety net's, with every remote system call */
	uint64_t mask = 0, all = ~0ULL & ~(1ULL << (SIGTRAP - 1)), start = r->rip;
	int err, st, pending = 0, sys_stops = 0;

	/* mask starts defined: valgrind does not know that GETSIGMASK writes it, and it goes
	   into the process (remote_note) */
	if (up__ptrace(PTRACE_GETSIGMASK, t->tid, (void *)sizeof(mask), &mask) < 0)
		return -errno;
	if (rescue) {
		uint8_t c[RESCUE_LEN];

		err = up_proc_write_text(t->proc, r->rip, c, rescue_code(c, &back, mask));
		if (err < 0)
			return err;
	}
	/* the code in the process before rip points there (the rescue stub, the code of
	   up_task_syscalls, both written through a quiesce's text cache, which goes out at
	   the resume): a tracer dying before the resume left the thread running what was
	   there before, zeros (SIGSEGV past the page's end) */
	up__mem_flush(t->proc);
	if (e->ops->remote_note)
		e->ops->remote_note(e->ctx, t, lo, how == RUN_STEP ? end + 15 : end, &back, mask);
	r->eflags &= ~0x100ULL; /* TF: the step is ptrace's */
	if (up__ptrace(PTRACE_SETREGS, t->tid, 0, r) < 0) {
		err = -errno;
		goto note_off;
	}
	t->regs_valid = false;
	if (up__ptrace(PTRACE_SETSIGMASK, t->tid, (void *)sizeof(all), &all) < 0) {
		err = -errno;
		up__ptrace(PTRACE_SETREGS, t->tid, 0, &saved); /* it has not run */
		t->regs = saved;
		t->regs_valid = true;
		t->regs_dirty = false;
		goto note_off;
	}
	for (;;) {
		static const int req[] = { PTRACE_CONT, PTRACE_SINGLESTEP, PTRACE_SYSCALL };

		err = run_until(t, req[how], &st, &pending);
		if (err == -ESRCH)
			goto note_off; /* died: nothing to put back */
		if (err < 0)
			goto restore_regs;
		if (up__ptrace(PTRACE_GETREGS, t->tid, 0, &now) < 0) {
			err = -errno;
			goto restore_regs;
		}
		if (how == RUN_SYSCALL) {
			if ((st >> 16) != 0 || WSTOPSIG(st) != (SIGTRAP | 0x80) || now.rip != end) {
				up__log(e,
					"thread %d: %s: stop 0x%x at 0x%llx, not a system call's",
					t->tid, what, st, (unsigned long long)now.rip);
				err = -EIO;
				goto restore_regs;
			}
			if (++sys_stops < 2)
				continue;
			/* its exit: the chain's next call, or the end */
			if (!chain || !chain_next(chain, &now, end - 2))
				break;
			if (up__ptrace(PTRACE_SETREGS, t->tid, 0, &now) < 0) {
				err = -errno;
				goto restore_regs;
			}
			sys_stops = 0;
			continue;
		}
		if (now.rip == end)
			break;
		if (how == RUN_STEP ? now.rip != start : (st >> 16) != PTRACE_EVENT_STOP) {
			up__log(e, "thread %d: %s: stopped at 0x%llx, not 0x%llx", t->tid, what,
				(unsigned long long)now.rip, (unsigned long long)end);
			err = -EIO;
			goto restore_regs;
		}
	}
	*r = now;
	err = 0;

restore_regs:
	/* the mask first: a tracer dying between the two leaves the thread with the call's
	   registers, which the rescue stub, or the net's handler at the next step's trap,
	   puts right */
	up__ptrace(PTRACE_SETSIGMASK, t->tid, (void *)sizeof(mask), &mask);
	if (how == RUN_SYSCALL && sys_stops == 1) {
		/* at the call's entry: it must not run with back's registers (orig_rax its
		   number again), so none runs and back is as its resume would have made it */
		struct user_regs_struct b = restarted(&back);

		if (up__ptrace(PTRACE_SETREGS, t->tid, 0, &b) < 0 && !err)
			err = -errno;
	} else if (up__ptrace(PTRACE_SETREGS, t->tid, 0, &back) < 0 && !err) {
		err = -errno;
	}
	t->regs = saved;
	t->regs_valid = true;
	t->rewound = back.rip != saved.rip;
	t->regs_dirty = t->rewound;
	if (how == RUN_SYSCALL) {
		/* at a system-call stop: to an event stop, as it was */
		t->stop = UP_ST_IN_SYSCALL;
		if (sys_stops == 1)
			t->regs_valid = false; /* restarted(): read them again */
		if (!chain || !chain->stay)
			up__task_normalize(t);
		if (pending)
			tgkill(t->proc->pid, t->tid, pending);
		goto note_off;
	}
	/* we are in the step's SIGTRAP signal-delivery-stop now */
	if (orig_stop == UP_ST_SIGNAL)
		t->info_clobbered = true;
	t->stop = UP_ST_SIGNAL;
	if (orig_stop == UP_ST_GROUP) {
		/* back into a group-stop trap so the resume can PTRACE_LISTEN */
		t->stop = UP_ST_IN_SYSCALL;
		if (up__task_normalize(t) < 0)
			t->stop = UP_ST_SIGNAL;
	}
	if (pending)
		tgkill(t->proc->pid, t->tid, pending);
note_off:
	if (e->ops->remote_note)
		e->ops->remote_note(e->ctx, t, 0, 0, NULL, 0);
	return err;
}

int up_task_syscall(struct up_task *t, long nr, const uint64_t args[6], int64_t *ret)
{
	static const uint64_t zero[6];
	struct up_proc *p = t->proc;
	struct user_regs_struct r;
	uint64_t insn_at;
	uint8_t saved_insn[2], insn[2];
	bool wrote = false, rescue = false;
	char what[48];
	unsigned mode;
	int err;

	if (!args)
		args = zero;
	err = ready(t);
	if (err < 0)
		return err;
	r = t->regs;
	mode = r.cs == 0x23 ? 32 : 64;
	if (mode == 64) {
		call_regs64(&r, nr, args);
	} else {
		r.rax = (uint64_t)nr;
		r.orig_rax = (uint64_t)-1;
		r.rbx = (uint32_t)args[0];
		r.rcx = (uint32_t)args[1];
		r.rdx = (uint32_t)args[2];
		r.rsi = (uint32_t)args[3];
		r.rdi = (uint32_t)args[4];
		r.rbp = (uint32_t)args[5];
	}
	snprintf(what, sizeof(what), "remote syscall %ld", nr);
	if (mode == 64 && p->syscall_stub) {
		/* free up to the stub's int3: no step to lose (up_proc_set_syscall_stub) */
		r.rip = p->syscall_stub;
		err = run_remote(t, &r, RUN_FREE, p->syscall_stub, p->syscall_stub + 3, false,
				 what);
		if (!err)
			*ret = (int64_t)r.rax;
		return err;
	}
	insn_at = vdso_syscall_insn(p, mode);
	if (mode == 64 && p->rescue) {
		insn_at = p->rescue;
		rescue = true;
	} else if (!insn_at) {
		insn_at = r.rip;
		insn[0] = mode == 64 ? 0x0f : 0xcd;
		insn[1] = mode == 64 ? 0x05 : 0x80;
		err = up_proc_read(p, insn_at, saved_insn, 2);
		if (!err)
			err = up_proc_write_text(p, insn_at, insn, 2);
		if (err < 0)
			return err;
		wrote = true;
	}
	r.rip = insn_at;
	/* through its system-call stops where the rescue stub makes a death harmless and
	   the thread's stop holds no signal to keep (an interrupt's or group-stop's) */
	err = run_remote(t, &r,
			 rescue && (t->stop == UP_ST_EVENT || t->stop == UP_ST_GROUP) ?
				 RUN_SYSCALL :
				 RUN_STEP,
			 insn_at, insn_at + 2, rescue, what);
	if (!err)
		*ret = mode == 64 ? (int64_t)r.rax : (int64_t)(int32_t)r.rax;
	if (wrote)
		up_proc_write_text(p, insn_at, saved_insn, 2);
	if (rescue) { /* the thread is off it: the tail's zeros again */
		static const uint8_t zeros[RESCUE_LEN];

		up_proc_write_text(p, insn_at, zeros, sizeof(zeros));
	}
	return err;
}

int up_task_syscall_chain(struct up_task *t, up_task_chain_fn next, void *arg)
{
	struct chain c = { next, arg, 0, false, false };
	struct up_proc *p = t->proc;
	struct user_regs_struct r;
	uint64_t args[6] = { 0 };
	int64_t ret = 0;
	long nr;
	int err;

	if (!next(arg, 0, 0, &nr, args))
		return 0;
	c.stay = t->state == UP_TS_STOPPED && t->stop == UP_ST_IN_SYSCALL;
	err = ready(t);
	if (err < 0)
		return err;
	r = t->regs;
	if (r.cs != 0x23)
		vdso_syscall_insn(p, 64); /* finds the rescue stub's place once */
	if (r.cs == 0x23 || p->syscall_stub || !p->rescue ||
	    (t->stop != UP_ST_EVENT && t->stop != UP_ST_GROUP)) {
		/* no chain here: one call after the other, each as up_task_syscall runs it */
		for (;;) {
			err = up_task_syscall(t, nr, args, &ret);
			if (err < 0)
				return err;
			memset(args, 0, sizeof(args));
			if (!next(arg, ++c.k, ret, &nr, args))
				return 0;
		}
	}
	call_regs64(&r, nr, args);
	r.rip = p->rescue;
	err = run_remote_chain(t, &r, RUN_SYSCALL, p->rescue, p->rescue + 2, true,
			       "remote system calls", &c);
	{
		static const uint8_t zeros[RESCUE_LEN];

		up_proc_write_text(p, p->rescue, zeros, sizeof(zeros));
	}
	if (err < 0)
		return err;
	/* the last call's result, for a next() that had not been told it yet */
	if (!c.ended)
		next(arg, ++c.k, (int64_t)r.rax, &nr, args);
	return 0;
}

int up_task_call(struct up_task *t, uint64_t fn, uint64_t end, uint64_t a0, uint64_t a1)
{
	struct user_regs_struct r;
	int err = ready(t);

	if (err < 0)
		return err;
	r = t->regs;
	r.rip = fn;
	r.rdi = a0;
	r.rsi = a1;
	r.orig_rax = (uint64_t)-1;
	return run_remote(t, &r, RUN_FREE, fn, end, false, "remote call");
}

/* ---- several system calls in one run: a few bytes of straight-line code -------------- */

/* where calls[k]'s result is kept: registers a syscall leaves alone; the seventh's stays
   in rax (read when the sixth succeeded: nothing comes after it to overwrite it) */
#define KEPT 6
static const uint8_t keep_reg[KEPT] = { 3 /* rbx */, 5 /* rbp */, 12, 13, 14, 15 };
/* the argument registers of the 64-bit system call, in order */
static const uint8_t arg_reg[6] = { 7 /* rdi */, 6 /* rsi */, 2 /* rdx */, 10, 8, 9 };

static size_t emit_imm(uint8_t *c, unsigned reg, uint64_t v)
{
	size_t n = 0;

	if (v <= 0xffffffffu) { /* mov $imm32, %r32: zero-extends */
		if (reg >= 8)
			c[n++] = 0x41;
		c[n++] = (uint8_t)(0xb8 + (reg & 7));
		memcpy(c + n, &v, 4);
		return n + 4;
	}
	c[n++] = (uint8_t)(0x48 | (reg >> 3)); /* movabs $imm64, %r64 */
	c[n++] = (uint8_t)(0xb8 + (reg & 7));
	memcpy(c + n, &v, 8);
	return n + 8;
}

static size_t emit_mov(uint8_t *c, unsigned dst, unsigned src)
{
	c[0] = (uint8_t)(0x48 | ((src >> 3) << 2) | (dst >> 3)); /* mov %src, %dst */
	c[1] = 0x89;
	c[2] = (uint8_t)(0xc0 | ((src & 7) << 3) | (dst & 7));
	return 3;
}

/* The calls one by one (32-bit, or no code place): the same contract. */
static int syscalls_each(struct up_task *t, struct up_task_rsys *calls, unsigned n)
{
	bool failed = false;
	int err = 0;

	for (unsigned k = 0; k < n; k++)
		calls[k].ret = -ECANCELED;
	for (unsigned k = 0; k < n && !failed && !err; k++) {
		uint64_t args[6];
		int64_t ret;

		for (int i = 0; i < 6; i++)
			args[i] = calls[k].from[i] ? (uint64_t)calls[calls[k].from[i] - 1].ret :
						     calls[k].args[i];
		err = up_task_syscall(t, calls[k].nr, args, &ret);
		if (!err) {
			calls[k].ret = ret;
			failed = (uint64_t)ret >= (uint64_t)-4095;
		}
	}
	return err;
}

/* at most 10 + 6 * 10 + 2 + 3 + 12 bytes a call, 10 a result register, the int3 and its
   jmp back */
_Static_assert((87 + 10) * UP_TASK_SYSCALLS_MAX + 3 <= UP_TASK_SYSCALLS_CODE,
	       "room for the code of UP_TASK_SYSCALLS_MAX calls");

int up_task_syscalls(struct up_task *t, uint64_t code, struct up_task_rsys *calls, unsigned n)
{
	uint8_t c[UP_TASK_SYSCALLS_CODE];
	struct user_regs_struct r;
	size_t len = 0, jae[UP_TASK_SYSCALLS_MAX];
	const uint64_t none = (uint64_t)-ECANCELED;
	int err;

	if (n > UP_TASK_SYSCALLS_MAX)
		return -EINVAL;
	for (unsigned k = 0; k < n; k++)
		for (int i = 0; i < 6; i++)
			if (calls[k].from[i] > k || calls[k].from[i] > KEPT)
				return -EINVAL; /* only an earlier call's result */
	err = ready(t);
	if (err < 0)
		return err;
	if (!code || t->regs.cs == 0x23)
		return syscalls_each(t, calls, n);
	/* every result register reads "not run" until its call has run */
	for (unsigned k = 0; k < n && k < KEPT; k++)
		len += emit_imm(c + len, keep_reg[k], none);
	for (unsigned k = 0; k < n; k++) {
		len += emit_imm(c + len, 0 /* rax */, (uint64_t)calls[k].nr);
		for (int i = 0; i < 6; i++)
			len += calls[k].from[i] ? emit_mov(c + len, arg_reg[i],
							   keep_reg[calls[k].from[i] - 1]) :
						  emit_imm(c + len, arg_reg[i], calls[k].args[i]);
		c[len++] = 0x0f, c[len++] = 0x05; /* syscall */
		if (k < KEPT)
			len += emit_mov(c + len, keep_reg[k], 0);
		/* cmp $-4095, %rax; jae the end: a failed call ends the run */
		memcpy(c + len, "\x48\x3d\x01\xf0\xff\xff\x0f\x83", 8);
		len += 8;
		jae[k] = len;
		len += 4;
	}
	for (unsigned k = 0; k < n; k++) {
		int32_t rel = (int32_t)(len - (jae[k] + 4));

		memcpy(c + jae[k], &rel, 4);
	}
	c[len++] = 0xcc; /* int3: the end */
	/* jmp back to it, past the run's end: a thread resumed after the int3 without its
	   trap (a stop reaped, then the tracer's death) traps again, into the safety net,
	   which gives it back; it ran on into whatever followed (SIGSEGV) */
	c[len] = 0xeb, c[len + 1] = 0xfd;
	err = up_proc_write_text(t->proc, code, c, len + 2);
	if (err < 0)
		return err;
	r = t->regs;
	r.rip = code;
	r.orig_rax = (uint64_t)-1;
	err = run_remote(t, &r, RUN_FREE, code, code + len, false, "remote system calls");
	if (err < 0)
		return err;
	for (unsigned k = 0; k < n; k++) {
		if (k == KEPT) { /* in rax, if it ran: the one before it succeeded */
			calls[k].ret = (uint64_t)calls[k - 1].ret >= (uint64_t)-4095 ?
					       -ECANCELED :
					       (int64_t)r.rax;
			break;
		}
		calls[k].ret = (int64_t)gpr(&r, keep_reg[k]);
	}
	return 0;
}
