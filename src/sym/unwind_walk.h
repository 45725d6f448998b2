/* SPDX-License-Identifier: MIT */
/*
 * The walk over unwind tables (sym/unwind.h), header-only and freestanding: no libc,
 * no globals, every read through the caller's read(), so the tracer (reading a stopped
 * thread's memory) and the in-process agent (fault-safe reads of its own) take the very
 * same steps and make the very same stacks.
 *
 * From (pc, rsp, rbp) at the hit, each frame: the row that covers the pc (a return
 * address's pc - 1: the call, which may be a function's last instruction) gives the
 * CFA, the caller's rbp and the return address at CFA-8; a signal frame's row gives the
 * interrupted pc, rsp and rbp from the ucontext; where no row can say (no FDE, an
 * UNKNOWN row) one frame-pointer step is taken, as the kernel would.  The walk stops at
 * the outermost frame (an undefined return address, a zero one), at max, or where a
 * step fails (a read that faults, a stack that does not rise, a return address in no
 * code): then, when the frame had no table, UP_UNWIND_UNKNOWN ends the stack, so that
 * code without tables (JIT) says so rather than giving junk.  Prefix: up_unwind_.
 */
#ifndef UPROBE_SYM_UNWIND_WALK_H
#define UPROBE_SYM_UNWIND_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "sym/unwind.h"

/* In a walk's output: the frames beyond here could not be found. */
#define UP_UNWIND_UNKNOWN 1ull

/* x86-64 Linux's rt_sigframe: rsp at __restore_rt points at its ucontext, whose
   mcontext (at 40) holds the gregs r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip */
#define UP_UW_UC_RBP (40 + 8 * 10)
#define UP_UW_UC_RSP (40 + 8 * 15)
#define UP_UW_UC_RIP (40 + 8 * 16)

/* The row of t that covers the file vaddr, or NULL (before the first row). */
static inline __attribute__((always_inline)) const struct up_unwind_row *up_unwind_find(const struct up_unwind_table *t,
							 uint64_t vaddr)
{
	uint64_t rel = vaddr - t->base;
	uint32_t lo = 0, hi = t->nrows;

	if (vaddr < t->base || rel > 0xffffffffu || !hi)
		return NULL;
	if (t->nidx) { /* the rows of rel's 256 bytes: from the one covering their start to
			  the next's */
		const uint32_t *idx = (const uint32_t *)(t->rows + t->nrows);
		uint64_t k = rel >> UP_UNWIND_IDX_SHIFT;

		if (k >= t->nidx)
			k = t->nidx - 1;
		lo = idx[k];
		if (k + 1 < t->nidx && idx[k + 1] < t->nrows)
			hi = idx[k + 1] + 1;
		if (lo >= hi)
			lo = 0, hi = t->nrows; /* not an index we made: all of them */
	}
	while (hi - lo > 1) { /* rows[lo].pc <= rel < rows[hi].pc */
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= rel)
			lo = mid;
		else
			hi = mid;
	}
	return t->rows[lo].pc <= rel ? &t->rows[lo] : NULL;
}

/* The row of t for the file vaddr into *out: 1, or 0 where none.  A trampoline's row is
   made relative to vaddr itself (the same pc always gives the same row: the agent
   caches rows by pc). */
static inline __attribute__((always_inline)) int
up_unwind_row_at(const struct up_unwind_table *t, uint64_t vaddr, struct up_unwind_row *out)
{
	const struct up_unwind_row *r = up_unwind_find(t, vaddr);

	if (!r)
		return 0;
	*out = *r;
	if (t->flags & UP_UNWIND_OURS)
		out->rbp |= UP_UW_RBP_OURS;
	if (r->cfa == UP_UW_TRAMP)
		out->cfa_off = (int32_t)((int64_t)r->cfa_off - (int64_t)(vaddr - t->base - r->pc));
	return 1;
}

/* A file offset of t's file to its vaddr: 0, or -1 where no executable segment has it. */
static inline int up_unwind_vaddr(const struct up_unwind_table *t, uint64_t off, uint64_t *vaddr)
{
	for (uint32_t i = 0; i < t->nsegs && i < UP_UNWIND_SEGS; i++)
		if (off >= t->seg[i].offset && off - t->seg[i].offset < t->seg[i].filesz) {
			*vaddr = t->seg[i].vaddr + (off - t->seg[i].offset);
			return 0;
		}
	return -1;
}

/*
 * The row for a pc of the process, into *row: 1 found; 0 the pc is in code no row
 * covers (row->cfa UP_UW_NONE); -1 the pc is in no code at all.
 */
typedef int (*up_unwind_lookup_fn)(void *ctx, uint64_t pc, struct up_unwind_row *row);
/* len bytes at addr into buf: 0, or nonzero when they cannot be read. */
typedef int (*up_unwind_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);
/* A return address read at slot: the one the function will really return to (a return
   probe's trampoline put there is the caller it hides); value itself otherwise. */
typedef uint64_t (*up_unwind_ret_fn)(void *ctx, uint64_t slot, uint64_t value);

/*
 * The return addresses of the stack at (pc, sp, bp), innermost (pc itself) first, into
 * out[0..max); at_entry: pc is a function's first instruction (used only where no row
 * covers it: the return address at [sp]).  ret (may be NULL, with read's ctx) sees
 * every return address read.  Returns how many were stored.
 */
static inline __attribute__((always_inline)) unsigned up_unwind_walk(uint64_t pc, uint64_t sp, uint64_t bp, int at_entry,
				      up_unwind_lookup_fn lookup, void *lctx,
				      up_unwind_read_fn read, up_unwind_ret_fn ret, void *rctx,
				      uint64_t *out, unsigned max)
{
	struct up_unwind_row r;
	unsigned n = 0;
	int k, is_ra = 0, tramp = 0, last_ours;

	if (!max)
		return 0;
	out[n++] = pc;
	k = lookup(lctx, pc, &r);
	last_ours = k > 0 && (r.rbp & UP_UW_RBP_OURS);
	while (n < max && k >= 0) {
		uint64_t cfa, npc = 0, nsp, nbp = bp, base;
		/* a lookup that found no row (k 0) set only its cfa: the rest is not a row */
		int signal = 0, ok = 0, was_tramp = tramp, ours = k > 0 && (r.rbp & UP_UW_RBP_OURS);

		r.rbp &= (uint8_t)~UP_UW_RBP_OURS;
		if (ours && (r.cfa == UP_UW_NONE || r.cfa == UP_UW_UNKNOWN)) {
			/* our code without CFI (the return trampoline's stubs): no junk */
			out[n - 1] = UP_UNWIND_UNKNOWN;
			break;
		}
		if (k == 0 || r.cfa == UP_UW_NONE || r.cfa == UP_UW_UNKNOWN) {
			/* no row: one frame-pointer step (at an entry, [sp] is the return) */
			uint64_t pair[2];

			if (at_entry && !is_ra) {
				ok = !read(rctx, sp, &npc, 8);
				if (ok && ret)
					npc = ret(rctx, sp, npc);
				nsp = sp + 8;
			} else if (bp && !(bp & 7) && bp >= sp && !read(rctx, bp, pair, 16)) {
				nbp = pair[0];
				npc = ret ? ret(rctx, bp + 8, pair[1]) : pair[1];
				nsp = bp + 16;
				ok = 1;
			}
			if (!ok || !npc || nsp <= sp) {
				out[n++] = UP_UNWIND_UNKNOWN;
				break;
			}
		} else if (r.cfa == UP_UW_END) {
			break;
		} else if (r.cfa == UP_UW_TRAMP) {
			/* our trampoline: the program's own frame takes its place (never two
			   in a row: a trampoline's program pc is the program's code) */
			if (was_tramp)
				break;
			npc = (is_ra ? pc - 1 : pc) + (uint64_t)(int64_t)r.cfa_off;
			nsp = sp + (uint64_t)(uint16_t)r.rbp_off;
			signal = 1; /* an exact pc, not a return address */
			n--;
		} else if (r.cfa == UP_UW_SIGNAL) {
			if (read(rctx, sp + UP_UW_UC_RIP, &npc, 8) ||
			    read(rctx, sp + UP_UW_UC_RSP, &nsp, 8) ||
			    read(rctx, sp + UP_UW_UC_RBP, &nbp, 8))
				break;
			signal = 1;
		} else {
			switch (r.cfa) {
			case UP_UW_CFA_RSP:
				cfa = sp + (uint64_t)(int64_t)r.cfa_off;
				break;
			case UP_UW_CFA_RBP:
				cfa = bp + (uint64_t)(int64_t)r.cfa_off;
				break;
			case UP_UW_CFA_PLT:
				cfa = sp + (uint64_t)(int64_t)r.cfa_off +
				      ((pc & 15) >= (uint64_t)(uint16_t)r.rbp_off ? 8 : 0);
				break;
			default: /* UP_UW_CFA_DEREF */
				if (read(rctx, bp + (uint64_t)(int64_t)r.cfa_off, &base, 8))
					base = 0;
				cfa = base;
				break;
			}
			/* the stack rises, but for our return trampoline's units: CFA rsp+0,
			   where the function's ret left rsp just above its return's slot */
			if (!cfa || cfa < sp || (cfa == sp && !ours) || read(rctx, cfa - 8, &npc, 8))
				break;
			if (ret)
				npc = ret(rctx, cfa - 8, npc);
			if (r.rbp == UP_UW_RBP_AT_CFA) {
				if (read(rctx, cfa + (uint64_t)(int64_t)r.rbp_off, &nbp, 8))
					break;
			} else if (r.rbp == UP_UW_RBP_UNDEF) {
				nbp = 0;
			}
			nsp = cfa;
		}
		if (!npc)
			break; /* the outermost frame */
		if (ours && r.cfa != UP_UW_TRAMP)
			n--; /* the agent's own frame: walked through, not shown */
		is_ra = !signal;
		tramp = r.cfa == UP_UW_TRAMP && k > 0;
		pc = npc;
		sp = nsp;
		bp = nbp;
		k = lookup(lctx, is_ra ? pc - 1 : pc, &r);
		last_ours = k > 0 && (r.rbp & UP_UW_RBP_OURS);
		out[n++] = k < 0 ? UP_UNWIND_UNKNOWN : pc;
	}
	if (last_ours) /* the walk stopped in the agent's code: never its frame */
		out[n - 1] = UP_UNWIND_UNKNOWN;
	return n;
}

#endif
