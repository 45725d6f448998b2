/* SPDX-License-Identifier: MIT */
/*
 * The safety net: what the tracer (src/site/safety.c) and the net's freestanding code in
 * the traced process (src/agent/blob/net.c) agree on.  The net is a SIGTRAP handler the
 * tracer installs in a process before it writes the first int3 there, with tables of
 * every int3 of ours and every return the trap path hijacked.  While the tracer lives
 * it sees each of those traps first (a ptrace stop) and the handler never runs for
 * them; once the tracer is gone (SIGKILL, the OOM killer, a crash) the kernel delivers
 * them to the program, and the handler takes each one for the tracer: the original
 * byte back (or the displaced copy run), the real return address, the trap flag of a
 * step cleared.  Every other SIGTRAP goes to the program's own disposition as if the
 * net were not there.  docs/design.md section 9 says why and what is not hidden.
 *
 * Two mappings, neither dropped at fork (a child has the handler too):
 *
 *   code  r-x  [data address: a word the tracer writes][handler][restorer] (the blob)
 *   data  rw-  [struct upn_hdr: one page][sites: 1 << UPN_SITES_ORDER][rets]
 *
 * Both tables are open-addressed (linear probing from upn_hash), written only by the
 * tracer, with the process stopped or the thread at hand stopped.  Prefix: upn_ / UPN_.
 */
#ifndef UPROBE_AGENT_NET_H
#define UPROBE_AGENT_NET_H

#include <stdint.h>

#define UPN_MAGIC 0x74656e65626f7270ull /* "probenet" */

/* The kernel's struct sigaction for rt_sigaction on x86-64 (8-byte sigset). */
struct upn_sigaction {
	uint64_t handler; /* 0 SIG_DFL, 1 SIG_IGN, else the function */
	uint64_t flags;
	uint64_t restorer;
	uint64_t mask;
};

/* An int3 of ours: the address (0 free, 1 a tombstone), the byte it replaced, and where
   a copy of the instruction runs natively and jumps back (0: none). */
struct upn_site {
	uint64_t vaddr;
	uint64_t copy;
	uint64_t slot; /* its XOL slot, if any: a thread whose rip the tracer moved there */
	uint8_t orig;
	uint8_t flags; /* UPN_S_* */
	uint8_t pad[6];
};
#define UPN_S_PINNED \
	1u /* a punned jmp's rel32 ends in this byte: never healed, the copy
			   runs instead */

/* A return the trap path hijacked: the stack slot that held it (0 free), the real
   address.  The tracer keeps these while the return is pending; it reuses entries whose
   return has happened without writing them again. */
struct upn_ret {
	uint64_t orig; /* first: a write torn by the tracer's death leaves the old key */
	uint64_t slot;
};

#define UPN_SITES_ORDER 14
#define UPN_RETS_ORDER	13
#define UPN_PROBES	64 /* entries tried before a table counts as full */
#define UPN_SLOT_SIZE	64 /* the XOL area's slots (xol.h) */

struct upn_hdr {
	uint64_t magic;
	uint64_t self;	/* the data mapping's address */
	uint64_t sites; /* the tables' addresses */
	uint64_t rets;
	uint64_t ret_int3;	   /* the trap path's return trampoline, 0: none yet */
	struct upn_sigaction prog; /* the program's own disposition of SIGTRAP */
	struct upn_sigaction ours; /* rt_sigaction's argument when the tracer installs */
	uint32_t healed;	   /* every int3 of ours is out (the tracer is gone) */
	uint32_t pad;
	uint64_t stats[6]; /* UPN_ST_*: what the handler did, for tests */
	uint64_t last[3];  /* the last trap passed to the program: si_code,
					   rip, the byte before rip (for a post-mortem) */
	struct upn_remote {
		/* the thread running code for the tracer (a remote system call stepped
		   over, the agent's page toucher up to its int3), 0: none; written before
		   the thread's registers become the call's, cleared after its own are back */
		uint64_t tid;
		uint64_t lo, hi; /* the code it runs: a trap of it with rip in [lo, hi] */
		uint64_t mask;	 /* its signal mask, and its registers (a struct
				    user_regs_struct), as they go back */
		uint64_t regs[27];
	} remote;
};
_Static_assert(sizeof(struct upn_hdr) <= 4096, "the header is one page");
enum { UPN_ST_HEALED, UPN_ST_COPY, UPN_ST_RETURN, UPN_ST_STEP, UPN_ST_REMOTE, UPN_ST_MOVED };

#define UPN_HDR_SIZE 4096u
#define UPN_DATA_SIZE                                                  \
	(UPN_HDR_SIZE + (sizeof(struct upn_site) << UPN_SITES_ORDER) + \
	 (sizeof(struct upn_ret) << UPN_RETS_ORDER))

/* The blob: its first word is the data's address; the next two the handler's and the
   restorer's offsets. */
#define UPN_DATA_AT	0
#define UPN_HANDLER_AT	8
#define UPN_RESTORER_AT 16
#define UPN_STUB_AT	24 /* the remote system calls' `syscall; int3; jmp .-1` */
#define UPN_CODE_SIZE	4096u

/* si_code of a SIGTRAP from int3 (the kernel's SI_KERNEL), and of a step. */
#define UPN_SI_KERNEL  0x80
#define UPN_TRAP_BRKPT 1
#define UPN_TRAP_TRACE 2
/* si_errno of an int3's SIGTRAP whose thread the tracer moved (an emulated
   instruction, a slot), with the rip it moved it to in si_addr (the task layer's
   UP_SI_MOVED): where that rip follows an int3, the net must not take it for a trap
   there */
#define UPN_SI_MOVED 0x75706d76

static inline uint64_t upn_hash(uint64_t v)
{
	v ^= v >> 29;
	v *= 0xbf58476d1ce4e5b9ull;
	v ^= v >> 32;
	return v;
}

#endif
