// SPDX-License-Identifier: MIT
/*
 * The safety net's handler, run inside the traced program (src/agent/net.h says what it
 * shares with the tracer).  It is the program's SIGTRAP handler while the tracer has
 * int3s in the process, and it does nothing but pass traps on while the tracer lives:
 * the tracer's ptrace stop takes every trap of ours first.  Once the tracer is gone the
 * traps of ours reach it, and it finishes what the tracer would have done:
 *
 *   an int3 of ours at rip - 1   every int3 of ours healed (the original byte back,
 *                                through /proc/self/mem), rip = the int3's address; or,
 *                                for a byte a punned jmp ends in (never healed), rip =
 *                                a copy of the instruction that runs and jumps back
 *   the return trampoline's int3 rip = the real return address (the rets table)
 *   the trap of a step           nothing more: the instruction ran in its slot (whose
 *                                jmp back runs next) or in place
 *   rip moved by the tracer      (into a slot, or past an emulated instruction) run on
 *
 * Anything else is the program's own SIGTRAP: its saved disposition is applied as the
 * kernel would have (its handler, with SA_SIGINFO or not, SA_RESETHAND; SIG_IGN for a
 * sent signal; the default action by SIG_DFL and the signal raised again).
 *
 * Freestanding, position-independent, no data or bss (net.ld refuses them): the only
 * state is the data mapping the blob's first word points at.
 */
#include <stddef.h>
#include <stdint.h>

#include "agent/net.h"

#define NR_PREAD64	    17
#define NR_PWRITE64	    18
#define NR_OPEN		    2
#define NR_CLOSE	    3
#define NR_RT_SIGACTION	    13
#define NR_RT_SIGPROCMASK   14
#define NR_RT_SIGRETURN	    15
#define NR_GETPID	    39
#define NR_GETTID	    186
#define NR_TGKILL	    234
#define NR_PROCESS_VM_READV 310
#define NR_RESTART_SYSCALL  219

/* the kernel's restart codes (include/linux/errno.h) */
#define ERESTARTSYS	      512
#define ERESTARTNOINTR	      513
#define ERESTARTNOHAND	      514
#define ERESTART_RESTARTBLOCK 516

#define SIGTRAP	     5
#define SIG_UNBLOCK  1
#define SIG_SETMASK  2
#define SA_NODEFER   0x40000000u
#define SA_SIGINFO   4u
#define SA_RESETHAND 0x80000000u
#define O_RDWR	     2
#define O_CLOEXEC    02000000
#define TF	     0x100ull

/* struct ucontext (x86-64): uc_mcontext's gregs from byte 40 (safety.c checks these
   against <sys/ucontext.h>) */
#define UC_GREGS   40
#define UC_SIGMASK 296
#define G_RAX	   13
#define G_RSP	   15
#define G_RIP	   16
#define G_EFL	   17

#include "agent/blob/sys.h"

#define sys3(nr, a, b, c)    sys6(nr, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(nr, a, b, c, d) sys6(nr, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

extern struct upn_hdr *const upn_data_word __attribute__((visibility("hidden")));

/* 0 when all len bytes at addr (of this process) were read: a bad address is an error,
   not a fault. */
static int read_self(void *dst, uint64_t addr, uint64_t len)
{
	struct iov local = { dst, len }, remote = { (void *)addr, len };

	return sys6(NR_PROCESS_VM_READV, sys3(NR_GETPID, 0, 0, 0), (long)&local, 1, (long)&remote,
		    1, 0) == (long)len ?
		       0 :
		       -1;
}

static struct upn_site *site_of(const struct upn_hdr *h, uint64_t v)
{
	struct upn_site *t = (struct upn_site *)h->sites;
	const uint64_t m = (1ull << UPN_SITES_ORDER) - 1, i = upn_hash(v);

	for (unsigned k = 0; k < UPN_PROBES; k++) {
		struct upn_site *e = &t[(i + k) & m];
		uint64_t a = __atomic_load_n(&e->vaddr, __ATOMIC_RELAXED);

		if (a == v)
			return e;
		if (!a)
			return NULL;
	}
	return NULL;
}

static struct upn_ret *ret_of(const struct upn_hdr *h, uint64_t slot)
{
	struct upn_ret *t = (struct upn_ret *)h->rets;
	const uint64_t m = (1ull << UPN_RETS_ORDER) - 1, i = upn_hash(slot);

	for (unsigned k = 0; k < UPN_PROBES; k++) {
		struct upn_ret *e = &t[(i + k) & m];
		uint64_t a = __atomic_load_n(&e->slot, __ATOMIC_RELAXED);

		if (a == slot)
			return e;
		if (!a)
			return NULL;
	}
	return NULL;
}

/* Is addr inside the XOL slot of an int3 site of ours (rip the tracer moved there, a
   step's instruction run there, or a call's return address into one)? */
static int in_slot(const struct upn_hdr *h, uint64_t addr)
{
	const struct upn_site *t = (const struct upn_site *)h->sites;

	for (uint64_t i = 0; i < (1ull << UPN_SITES_ORDER); i++)
		if (t[i].vaddr > 1 && t[i].slot && addr - t[i].slot < UPN_SLOT_SIZE)
			return 1;
	return 0;
}

/* The original byte back at e, if an int3 is there. */
static void heal_one(long fd, const struct upn_site *e)
{
	uint8_t b = 0;

	if (sys4(NR_PREAD64, fd, &b, 1, e->vaddr) == 1 && b == 0xcc)
		sys4(NR_PWRITE64, fd, &e->orig, 1, e->vaddr);
}

/*
 * Every int3 of ours out (the first time; after that, e's alone: another thread may
 * have trapped on it while the first healed), written through /proc/self/mem as the
 * tracer wrote them in.  A byte a punned jmp ends in stays.  0 when e is healed.
 */
static int heal(struct upn_hdr *h, const struct upn_site *e)
{
	long fd = sys3(NR_OPEN, "/proc/self/mem", O_RDWR | O_CLOEXEC, 0);
	uint8_t b = 0xcc;

	if (fd < 0)
		return -1;
	if (!__atomic_load_n(&h->healed, __ATOMIC_ACQUIRE)) {
		const struct upn_site *t = (const struct upn_site *)h->sites;

		for (uint64_t i = 0; i < (1ull << UPN_SITES_ORDER); i++)
			if (t[i].vaddr > 1 && !(t[i].flags & UPN_S_PINNED))
				heal_one(fd, &t[i]);
		__atomic_store_n(&h->healed, 1, __ATOMIC_RELEASE);
	}
	heal_one(fd, e);
	sys4(NR_PREAD64, fd, &b, 1, e->vaddr);
	sys3(NR_CLOSE, fd, 0, 0);
	return b == 0xcc ? -1 : 0;
}

/*
 * The thread ran code for the tracer (a remote system call, the agent's page toucher)
 * and the tracer died meanwhile: the trap that ends it (the step's, the int3's) gives
 * the thread its own registers and signal mask back, as the tracer would have.  Its rip
 * is where the tracer would have let it go on (the int3 it stopped at, if it was at
 * one: it traps again, into this handler).
 */
static int remote_end(struct upn_hdr *h, void *uc, uint64_t rip)
{
	/* user_regs_struct's index of each of uc_mcontext.gregs' first 18 */
	static const uint8_t from[18] = { 9, 8, 7, 6, 3, 2, 1, 0, 14, 13, 4, 5, 12, 10, 11, 19, 16, 18 };
	uint64_t *g = (uint64_t *)((uint8_t *)uc + UC_GREGS);
	uint64_t tid = __atomic_load_n(&h->remote.tid, __ATOMIC_ACQUIRE);

	if (!tid || tid != (uint64_t)sys3(NR_GETTID, 0, 0, 0) || rip < h->remote.lo ||
	    rip > h->remote.hi)
		return 0;
	int64_t nr = (int64_t)h->remote.regs[15], ax;

	for (unsigned i = 0; i < 18; i++)
		g[i] = h->remote.regs[from[i]];
	g[G_EFL] &= ~TF;
	/* a system call the tracer's interrupt broke off is restarted as the kernel would
	   have on the thread's way out (sigreturn disables that: orig_rax -1) */
	ax = (int64_t)g[G_RAX];
	if (nr >= 0 && (ax == -ERESTARTSYS || ax == -ERESTARTNOINTR || ax == -ERESTARTNOHAND)) {
		g[G_RAX] = (uint64_t)nr;
		g[G_RIP] -= 2;
	} else if (nr >= 0 && ax == -ERESTART_RESTARTBLOCK) {
		g[G_RAX] = NR_RESTART_SYSCALL;
		g[G_RIP] -= 2;
	}
	*(uint64_t *)((uint8_t *)uc + UC_SIGMASK) = h->remote.mask;
	__atomic_store_n(&h->remote.tid, 0, __ATOMIC_RELEASE);
	h->stats[UPN_ST_REMOTE]++;
	return 1;
}

/* The kernel's action for a SIGTRAP the program does not catch: its default, a core
   dump, with our handler out of the way and the signal unblocked. */
static void die_default(void)
{
	struct upn_sigaction dfl = { 0, 0, 0, 0 };
	uint64_t m = 1ull << (SIGTRAP - 1);

	sys4(NR_RT_SIGACTION, SIGTRAP, &dfl, 0, 8);
	sys4(NR_RT_SIGPROCMASK, SIG_UNBLOCK, &m, 0, 8);
	sys3(NR_TGKILL, sys3(NR_GETPID, 0, 0, 0), sys3(NR_GETTID, 0, 0, 0), SIGTRAP);
}

/* The program's own SIGTRAP: what its disposition says. */
static void chain(struct upn_hdr *h, int sig, int32_t *info, void *uc)
{
	struct upn_sigaction a = h->prog;
	uint64_t mask;
	/* raised by the kernel for the thread (int3, a step, a breakpoint): forced, so an
	   ignored SIGTRAP kills as the default would */
	int forced = info[2] > 0;

	if (a.handler == 1 && !forced)
		return;
	if (a.handler <= 1) {
		die_default();
		return;
	}
	if (a.flags & SA_RESETHAND)
		h->prog.handler = 0; /* as the kernel would reset it, without our net going */
	/* the mask the kernel would have given its handler (ours blocks everything else) */
	mask = *(uint64_t *)((uint8_t *)uc + UC_SIGMASK) | a.mask;
	if (!(a.flags & SA_NODEFER))
		mask |= 1ull << (SIGTRAP - 1);
	sys4(NR_RT_SIGPROCMASK, SIG_SETMASK, &mask, 0, 8);
	if (a.flags & SA_SIGINFO)
		((void (*)(int, void *, void *))a.handler)(sig, info, uc);
	else
		((void (*)(int))a.handler)(sig);
}

__attribute__((used)) void upn_handler(int sig, int32_t *info, void *uc)
{
	struct upn_hdr *h = upn_data_word;
	uint64_t *g = (uint64_t *)((uint8_t *)uc + UC_GREGS);
	const uint64_t rip = g[G_RIP];
	const int code = info[2];
	struct upn_site *e;
	uint8_t b[2];

	if (sig != SIGTRAP || !h || h->magic != UPN_MAGIC)
		goto theirs;
	if (code > 0 && remote_end(h, uc, rip))
		return;
	if (code == UPN_SI_KERNEL) {
		if (info[1] == UPN_SI_MOVED && *(uint64_t *)(info + 4) == rip) {
			/* the tracer sent it there and died before letting it go */
			h->stats[UPN_ST_MOVED]++;
			return;
		}
		e = site_of(h, rip - 1);
		if (e) {
			if (!(e->flags & UPN_S_PINNED) && !heal(h, e)) {
				g[G_RIP] = rip - 1;
				h->stats[UPN_ST_HEALED]++;
				return;
			}
			if (e->copy) {
				g[G_RIP] = e->copy;
				h->stats[UPN_ST_COPY]++;
				return;
			}
			goto theirs; /* nothing can run it: as without the net */
		}
		if (h->ret_int3 && rip - 1 == h->ret_int3) {
			struct upn_ret *r = ret_of(h, g[G_RSP] - 8);

			if (!r)
				goto theirs;
			g[G_RIP] = r->orig;
			h->stats[UPN_ST_RETURN]++;
			return;
		}
		if (in_slot(h, rip))
			return; /* sent to its slot, and let go before it ran there */
		/* the program's own int3 (or int $3) is still there before rip; else the
		   tracer had moved rip past the instruction it emulated */
		if (!read_self(b, rip - 2, 2) && (b[1] == 0xcc || (b[0] == 0xcd && b[1] == 3)))
			goto theirs;
		if (read_self(b + 1, rip - 1, 1) || b[1] == 0xcc)
			goto theirs;
		return;
	}
	if (code == UPN_TRAP_TRACE || code == UPN_TRAP_BRKPT) {
		uint64_t ret = 0;

		/* a step of ours: in a slot, or a call's return address into one, or any
		   step while the program has no handler that could have asked for it, or
		   any step without the trap flag in the context.  (The kernel took the trap
		   flag of a ptrace step out of the context already, and the thread's
		   stepping with it: handle_signal, user_disable_single_step; a program that
		   steps itself has set the flag, and it is in the context.)  Without that
		   last, the step of an instruction run in place, or of a signal's drain out
		   of a slot, ended by the tracer's death reached the program's own handler
		   (a likely cause of the own-mode run that counted 33 traps of 32). */
		if (in_slot(h, rip) || (!read_self(&ret, g[G_RSP], 8) && in_slot(h, ret)) ||
		    h->prog.handler <= 1 || !(g[G_EFL] & TF)) {
			g[G_EFL] &= ~TF;
			h->stats[UPN_ST_STEP]++;
			return;
		}
	}
theirs:
	if (h && h->magic == UPN_MAGIC) {
		h->last[0] = (uint64_t)(int64_t)code;
		h->last[1] = rip;
		h->last[2] = read_self(b, rip - 1, 1) ? 0x100 : b[0];
		chain(h, sig, info, uc);
	} else
		die_default();
}

/*
 * The first word: the data's address (the tracer writes it); then the handler's and the
 * restorer's offsets in the blob; the restorer returns from the handler as glibc's
 * __restore_rt does.
 */
__asm__(".section .text.head,\"ax\",@progbits\n"
	".globl upn_data_word\n"
	".hidden upn_data_word\n"
	"upn_data_word:\n"
	"	.quad 0\n"
	"	.quad upn_handler\n"  /* UPN_HANDLER_AT */
	"	.quad upn_restorer\n" /* UPN_RESTORER_AT */
	"	.quad upn_syscall\n"  /* UPN_STUB_AT */
	"	.balign 16\n"
	"upn_restorer:\n"
	"	mov $15,%eax\n" /* NR_RT_SIGRETURN */
	"	syscall\n"
	"	hlt\n"
	"	.balign 16\n"
	/* the tracer's remote system calls (up_proc_set_syscall_stub): a death during one
	   traps at the int3 (remote_end), whether or not the int3's stop was seen */
	"upn_syscall:\n"
	"	syscall\n"
	"	int3\n"
	"1:	jmp 1b-1\n"
	".previous\n");
