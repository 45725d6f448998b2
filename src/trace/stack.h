/* SPDX-License-Identifier: MIT */
/*
 * User stacks: the frame-pointer walk a trap-path hit takes (the same walk the agent
 * takes in-process, blob/agent.c agg_stack, so both paths make the same key), and the
 * names a tracer gives the addresses it finds, from the process's maps and the ELF
 * symbols of the files mapped there:
 *
 *   "malloc+0x0 [libc.so.6]"      a function symbol holds the address
 *   "[ls]+0x4a3c"                 no symbol: the file and the offset in it
 *   "0x7f3a12345678"              no file (anonymous memory, JIT code)
 *   "[unknown]"                   the unwind walk could not go on (UP_UNWIND_UNKNOWN)
 *
 * Names are made while the process can still be read (a table is read at its exit
 * stop at the latest); each process keeps a cache of its maps and of the files opened.
 * Never prints, never exits.  Prefix: up_stack_.
 */
#ifndef UPROBE_TRACE_STACK_H
#define UPROBE_TRACE_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/*
 * The walk: ip (the probed address; at a return, where it returned to); when at_entry
 * (a function's first instruction, and not a return) the return address at [rsp];
 * then [rbp + 8] of each frame while [rbp] goes up the stack.  It stops at a zero
 * return address, a read that fails, an unaligned or non-rising frame, or max.
 * Returns the number of addresses in out (the rest of out is zeroed).
 */
unsigned up_stack_walk(const struct user_regs_struct *regs, uint64_t ip, bool at_entry,
		       int (*read)(void *ctx, uint64_t addr, void *buf, size_t len), void *ctx,
		       uint64_t *out, unsigned max);

struct up_stack_syms;

/*
 * The walk by the unwind tables of the files mapped in s's process (sym/unwind_walk.h:
 * frame pointers only where no table covers a pc, "[unknown]" where a stack cannot be
 * followed); s NULL: up_stack_walk.  As up_stack_walk otherwise.
 */
unsigned up_stack_unwind(struct up_stack_syms *s, const struct user_regs_struct *regs, uint64_t ip,
			 bool at_entry,
			 int (*read)(void *ctx, uint64_t addr, void *buf, size_t len), void *ctx,
			 uint64_t *out, unsigned max);

struct up_stack_syms *up_stack_syms_new(pid_t pid);
/* The walks' return addresses through ret (the one a return probe's trampoline hides,
   at slot): ctx is ret's. */
void up_stack_syms_returns(struct up_stack_syms *s,
			   uint64_t (*ret)(void *ctx, uint64_t slot, uint64_t value), void *ctx);
/* The rows of code of the library's own (uprobe_code_row: trampolines, the agent) for
   the pcs in no file's mapping or in the library's memfds: ctx is code's. */
struct up_unwind_row;
void up_stack_syms_code(struct up_stack_syms *s,
			int (*code)(void *ctx, uint64_t pc, struct up_unwind_row *row), void *ctx);
void up_stack_syms_free(struct up_stack_syms *s);
/* The maps are read again at the next miss (an exec, a dlopen). */
void up_stack_syms_stale(struct up_stack_syms *s);
/* The maps read now, if they were never read or are stale (while they can be). */
void up_stack_syms_load(struct up_stack_syms *s);

/* A process no longer there (a raw file's): its maps are the ones added, the last
   replacing what it overlaps, the files read by their paths.  0 or -errno. */
int up_stack_syms_add(struct up_stack_syms *s, uint64_t start, uint64_t end, uint64_t offset,
		      uint64_t ino, const char *path);
/* fn for each executable file mapping known (as loaded last). */
void up_stack_syms_each(struct up_stack_syms *s,
			void (*fn)(void *arg, uint64_t start, uint64_t end, uint64_t offset,
				   uint64_t ino, const char *path),
			void *arg);

/* Is addr in an executable file mapping?  A frame-pointer walk through code built
   without frame pointers reads garbage: its frames are in none. */
bool up_stack_mapped(struct up_stack_syms *s, uint64_t addr);

/* addr's name, as above.  snprintf semantics. */
int up_stack_name(struct up_stack_syms *s, uint64_t addr, char *buf, size_t size);

#endif
