/* SPDX-License-Identifier: MIT */
/*
 * Unwind tables (src/sym/unwind.c): a file's .eh_frame CFI compiled once into compact
 * rows, x86-64 only, for a walk that needs no libdw at the hit (sym/unwind_walk.h).
 *
 * A row holds from its pc to the next row's: the CFA (the caller's rsp) is rsp or rbp
 * plus an offset, the return address is at CFA-8, and rbp is either unchanged or was
 * saved at CFA + an offset.  What the CFI says in other words (expressions, a CFA in
 * another register, the return address elsewhere) is UNKNOWN: the walk falls back to
 * frame pointers there.  Two expressions are common enough to have their own kind: the
 * PLT's (CFA = rsp + 8, + 8 more past the push of a lazy stub) and a stack realigned
 * through rbp (CFA = [rbp + offset]).  A signal frame's row (the kernel's rt_sigframe
 * under __restore_rt) reads the interrupted registers from the ucontext at rsp.
 *
 * A table is one malloc'd block without pointers (so it can be copied anywhere as it
 * is, the agent's shared region included): the header, then the rows sorted by pc, then
 * an index of them by 256 bytes of code.
 * Its pcs are the file's own vaddrs less base; segs map file offsets to vaddrs.
 * Prefix: up_unwind_.
 */
#ifndef UPROBE_SYM_UNWIND_H
#define UPROBE_SYM_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum {
	UP_UW_NONE = 0,	 /* no FDE covers the pc: frame pointers, if anything */
	UP_UW_CFA_RSP,	 /* CFA = rsp + cfa_off */
	UP_UW_CFA_RBP,	 /* CFA = rbp + cfa_off */
	UP_UW_CFA_PLT,	 /* CFA = rsp + cfa_off, + 8 where (pc & 15) >= rbp_off */
	UP_UW_CFA_DEREF, /* CFA = [rbp + cfa_off] (a realigned stack) */
	UP_UW_SIGNAL,	 /* rt_sigframe: the interrupted rip, rsp, rbp in the ucontext at rsp */
	UP_UW_END,	 /* the return address is undefined: the outermost frame (_start) */
	UP_UW_UNKNOWN,	 /* the CFI says what these rows cannot: frame pointers */
	UP_UW_TRAMP,	 /* uprobe's own out-of-line code (a trampoline): the program's frame
			    is at pc + cfa_off (exact, not a return address) with rsp + rbp_off,
			    rbp unchanged; cfa_off from the row's start in a table, from the
			    pc looked up once up_unwind_row_at gave it */
};

enum {
	UP_UW_RBP_SAME = 0, /* the caller's rbp is this frame's */
	UP_UW_RBP_AT_CFA,   /* saved at CFA + rbp_off */
	UP_UW_RBP_UNDEF,    /* cannot be recovered */
};
/* In a row up_unwind_row_at gave: the frame is uprobe's own (the agent's code), walked
   through but not shown. */
#define UP_UW_RBP_OURS 0x80

struct up_unwind_row {
	uint32_t pc; /* vaddr - base */
	int32_t cfa_off;
	int16_t rbp_off; /* UP_UW_CFA_PLT: the threshold */
	uint8_t cfa;	 /* UP_UW_* */
	uint8_t rbp;	 /* UP_UW_RBP_* */
};

#define UP_UNWIND_SEGS 8

/* The index after the rows: for each 256 bytes of code from base, the row that covers
   its first byte, so that a lookup bisects the few rows there (libc: ~5, in a cache
   line) rather than all of them (28,274 rows, 340 KB: 15 dependent loads, missing the
   cache, were half of a 10-frame walk's cost in the agent).  libc's: 24 KB. */
#define UP_UNWIND_IDX_SHIFT 8

/* A table rewritten in place (a page of trampolines, while the process is quiesced):
   its rows are not kept in the agent's caches, nor a walk that used one in a memo. */
#define UP_UNWIND_LIVE 1u
/* A table of uprobe's own code (the agent's): its frames are not shown. */
#define UP_UNWIND_OURS 2u

struct up_unwind_table {
	uint64_t size; /* bytes of the whole block */
	uint64_t base; /* rows' pcs are vaddr - base */
	uint32_t nrows;
	uint32_t nsegs; /* the executable PT_LOADs */
	struct {
		uint64_t offset, vaddr, filesz;
	} seg[UP_UNWIND_SEGS];
	uint32_t nidx; /* entries of the index after the rows (uint32_t each), 0 none */
	uint32_t flags; /* UP_UNWIND_LIVE */
	struct up_unwind_row rows[];
};

/* elf's .eh_frame compiled (elf as libelf opened it).  0 with a malloc'd table in
   *out (rows may be 0: no CFI); -ENOMEM; -ENOENT where the file has no .eh_frame. */
int up_unwind_build(void *elf, struct up_unwind_table **out);

/* The same with debug_elf's .debug_frame (a separate debug file's, or NULL) for the code
   .eh_frame does not cover; -ENOENT where neither has CFI. */
int up_unwind_build_debug(void *elf, void *debug_elf, struct up_unwind_table **out);

struct up_file_map;

/* The table of the file a process maps (opened through up_file_open: the inode mapped),
   built once per file (keyed by the opened file's dev and ino) and kept for the life
   of the process: NULL where none can be.  Tracer threads only (one lock). */
const struct up_unwind_table *up_unwind_get(const char *path, const struct up_file_map *map);

#endif
