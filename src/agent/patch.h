/* SPDX-License-Identifier: MIT */
/*
 * The fast path's patches: a probed instruction (and what follows it, up to 5 bytes)
 * replaced by a jmp to a trampoline in the XOL area that counts the hit in the
 * process's own memory and runs the relocated instructions, without stopping the
 * thread.  This file decides where that is safe and writes the trampoline's code;
 * the arbiter (uprobes.c) places it, patches with every thread stopped, and undoes it.
 * Prefix: up_patch_.
 */
#ifndef UPROBE_AGENT_PATCH_H
#define UPROBE_AGENT_PATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch/x86/insn.h"
#include "task/task.h"

#define UP_PATCH_JMP 5	    /* jmp rel32 */
#define UP_PATCH_MAX_INSN 5 /* instructions a patch may cover */
#define UP_PATCH_TRAMP 128  /* bytes of a counting trampoline, at most */
#define UP_PATCH_TRAMP_REC 384 /* bytes of a recording trampoline, at most */

struct up_ubp_files;
struct up_sym_elf;

/* How a site gets its jmp (plan.c says why each is safe). */
enum up_tactic {
	UP_TACTIC_INT3, /* none: the probe stays on an int3 */
	UP_TACTIC_JMP,	/* one instruction of 5 bytes or more */
	UP_TACTIC_SUCC, /* with its successors, nothing branching into them */
	UP_TACTIC_PAD,	/* with the rest of a short function and the padding after it */
	UP_TACTIC_PUN,	/* the instruction alone, the rel32 ending in the bytes after it */
	UP_TACTIC_HOP,	/* a 2-byte jmp to a 5-byte one planted in the padding nearby */
};
#define UP_TACTIC_COUNT (UP_TACTIC_HOP + 1)
#define UP_PATCH_SHORT 2 /* jmp rel8 */

struct up_patch_site {
	uint64_t vaddr;
	enum up_tactic tactic;
	unsigned ninsn; /* the instructions relocated into the trampoline */
	unsigned len; /* bytes the jmp depends on (and orig holds): >= 5 */
	uint64_t pun_lo, pun_hi; /* UP_TACTIC_PUN: where the trampoline may start */
	/* UP_TACTIC_HOP: where the 5-byte jmp goes (padding no code runs), what it replaces */
	uint64_t hop;
	uint8_t hop_orig[UP_PATCH_JMP];
	struct up_insn insn[UP_PATCH_MAX_INSN];
	uint8_t orig[UP_PATCH_MAX_INSN * UP_INSN_MAX];
	/* several probes on one site: a trampoline ends with a jmp to the next one's
	   (chain), the last with the relocated instructions; 0: this is the last */
	uint64_t chain;
};

/*
 * The planner (plan.c): whether vaddr in p can be patched, and how -- a 64-bit process,
 * an instruction boundary, instructions that run free relocated (no call, no loop,
 * nothing stepped), by the first tactic that applies.  limit: where another site's
 * bytes begin (0: none near), which no tactic may write over -- a punned jmp may end
 * in them.  0 and the site, or -ENOTSUP (-EEXIST for a foreign int3) with why (the
 * reasons of every tactic tried).
 */
int up_patch_site(struct up_proc *p, struct up_ubp_files *files, uint64_t vaddr,
		  uint64_t limit, struct up_patch_site *site, char *why, size_t whylen);

/* A site planned as first_insn left it (its first instruction alone) made a hop, where
   there is padding within reach.  0, or -ENOTSUP with why. */
int up_patch_try_hop(struct up_proc *p, struct up_ubp_files *files, struct up_patch_site *site,
		     char *why, size_t whylen);

/*
 * A punned site whose following bytes changed (a neighbour patched or put back): its
 * window and the bytes it ends in, as they are now.  0, or -ENOTSUP with why (the
 * window left user space).
 */
int up_patch_repun(struct up_proc *p, struct up_patch_site *site, char *why, size_t whylen);

/* The bytes a site writes: a punned jmp only its own instruction's (the rest of its
   rel32 is the bytes that follow, which it depends on but leaves as they are). */
static inline unsigned up_patch_written(const struct up_patch_site *site)
{
	return site->tactic == UP_TACTIC_PUN ? site->insn[0].length : site->len;
}

/* Does the site write any byte of [lo, hi) (its hop's included)? */
static inline bool up_patch_writes(const struct up_patch_site *site, uint64_t lo, uint64_t hi)
{
	return (lo < site->vaddr + up_patch_written(site) && site->vaddr < hi) ||
	       (site->tactic == UP_TACTIC_HOP && lo < site->hop + UP_PATCH_JMP && site->hop < hi);
}

/*
 * The tactic the instruction insn (decoded at its file address) of elf would get, by
 * its code alone: what a live process adds (threads inside, other probes, a free page
 * for a punned jmp's trampoline) is not known here.  [img_lo, img_hi): the file's
 * loaded image, where a punned jmp cannot go.  UP_TACTIC_INT3 with why.
 */
enum up_tactic up_plan_file(struct up_sym_elf *elf, const struct up_insn *insn, uint64_t img_lo,
			    uint64_t img_hi, char *why, size_t whylen);
const char *up_patch_tactic_name(enum up_tactic t);

/* A call, which a trampoline runs as a push of its home return address and a jmp (so
   it can only be the last instruction a site relocates). */
bool up_patch_is_call(const struct up_insn *insn);
int up_patch_emulate_call(const struct up_insn *insn, uint64_t at, uint8_t *c, size_t room);

/*
 * The trampoline's code for site at tramp, counting at counter (a 64-bit word within
 * +-2 GiB): lea -128(%rsp),%rsp; pushfq; lock incq counter(%rip); popfq;
 * lea 128(%rsp),%rsp; the relocated instructions; jmp back.  home_of[i] is the
 * trampoline offset of relocated instruction i (for faults).  -ERANGE when it does not
 * fit or reach.
 */
int up_patch_tramp(const struct up_patch_site *site, uint64_t tramp, uint64_t counter,
		   uint8_t *code, size_t size, size_t *len, unsigned home_of[UP_PATCH_MAX_INSN]);

/* The same with the counter at any address (through rcx, saved around it). */
int up_patch_tramp_abs(const struct up_patch_site *site, uint64_t tramp, uint64_t counter,
		       uint8_t *code, size_t size, size_t *len, unsigned home_of[UP_PATCH_MAX_INSN]);

/*
 * A recording probe's trampoline: the red zone skipped, flags and the caller-saved
 * registers saved into a struct user_regs_struct frame on the stack (with rsp as the
 * thread had it, and the callee-saved registers regs asks for), the agent called as
 * entry(frame, desc), everything put back, then the relocated instructions and a jmp
 * back.  A return probe's entry (is_ret) on a CPU with lahf saves no frame: the agent's
 * upa_hijack keeps the return address, and the function goes on through a call site of
 * the return trampoline (abi.h, UPA_RT_STUB).  -ERANGE when it does not fit.
 */
int up_patch_tramp_rec(const struct up_patch_site *site, uint64_t tramp, uint64_t desc,
		       uint64_t entry, uint64_t regs, bool is_ret, uint8_t *code, size_t size,
		       size_t *len, unsigned home_of[UP_PATCH_MAX_INSN]);

/*
 * The unwind rows (sym/unwind.h, UP_UW_TRAMP) of a trampoline's code for site at tramp
 * (len bytes, home_of as its maker gave them): for each stretch of it, where the
 * program's own frame is (the site's address before the relocated instructions, each
 * one's original address while it runs, the address after them at the jmp back) and
 * how far below the program's rsp the trampoline's is there, so that a signal that
 * interrupts it, or the agent it calls, shows the program's frames.  Row pcs are
 * offsets from tramp, cfa_off from the row's start.  How many rows, at most max.
 */
#define UP_PATCH_ROWS 32
struct up_unwind_row;
unsigned up_patch_rows(const struct up_patch_site *site, uint64_t tramp, const uint8_t *code,
		       size_t len, const unsigned home_of[UP_PATCH_MAX_INSN],
		       struct up_unwind_row *rows, unsigned max);

/* The jmp written over the site. */
/* lahf/sahf work in 64-bit mode here (all but the first x86-64s): flags are kept
   without pushfq/popfq. */
bool up_patch_have_lahf(void);

int up_patch_jmp(const struct up_patch_site *site, uint64_t tramp, uint8_t *code);
/* A hop site's 5-byte jmp (at site->hop) to tramp; its own bytes are up_patch_jmp's
   2-byte jmp to the hop. */
int up_patch_hop(const struct up_patch_site *site, uint64_t tramp, uint8_t *code);

#endif
