/* SPDX-License-Identifier: MIT */
/*
 * XOL, the execution-out-of-line area (seed 004): pages mapped into the traced process
 * by remote mmap, within +-2 GiB of the code they serve, cut into slots of
 * UP_SLOT_MAX bytes, one per probepoint, never inherited by fork (MADV_DONTFORK).
 * Prefix: up_xol_.
 */
#ifndef UPROBE_XOL_H
#define UPROBE_XOL_H

#include <stdbool.h>
#include <stdint.h>

#include "task/task.h"

#define UP_XOL_AREA_SIZE 4096u
#define UP_XOL_SLOTS (UP_XOL_AREA_SIZE / 64u)

struct up_xol_area {
	uint64_t base;
	uint64_t used; /* bitmap of slots */
	struct up_xol_area *next;
};

/* A mapping made in the process (an area's pages, a page of counters, the agent's). */
struct up_xol_map {
	uint64_t start, len;
	bool exec; /* code runs there */
};

struct up_xol {
	struct up_xol_area *areas;
	unsigned nareas;
	/* every mapping of ours in the process, to be unmapped when we go: one list for
	   the XOL areas, the counters' pages and the agent's region (up_xol_note_map) */
	struct up_xol_map *maps;
	unsigned nmaps, capmaps;
};

/*
 * A free slot within +-2 GiB of near (any slot for a 32-bit process), mapping a new
 * area through thread t (stopped; the process quiesced) when none has room.
 * -ENOMEM when no area can be placed.
 */
int up_xol_alloc(struct up_xol *x, struct up_task *t, uint64_t near, uint64_t *slot);
/* n consecutive slots (a trampoline of n * 64 bytes). */
int up_xol_alloc_n(struct up_xol *x, struct up_task *t, uint64_t near, unsigned n,
		   uint64_t *slot);
void up_xol_free_n(struct up_xol *x, uint64_t slot, unsigned n);
/*
 * bytes of trampoline starting anywhere in [lo, hi] (a punned jmp's window: its start
 * need not be a slot's), in an area that has the slots free or in a page mapped for it
 * within the window.  *at the start, *nslots the slots it takes (free them with
 * up_xol_free_n(x, *at, *nslots)).  -ENOMEM when no page there can be had.
 */
int up_xol_alloc_in(struct up_xol *x, struct up_task *t, uint64_t lo, uint64_t hi,
		    uint64_t bytes, uint64_t *at, unsigned *nslots);
/* Are the slots of [at, at + bytes) in one area, and free? */
bool up_xol_span_free(const struct up_xol *x, uint64_t at, uint64_t bytes);
/* A read-write page near `near` (the fast path's counters), never inherited by fork. */
int up_xol_map_data(struct up_xol *x, struct up_task *t, uint64_t near, uint64_t *addr);
/* A mapping made in the process by other means (the agent's region) joins the list;
   -ENOMEM: it could not (the caller unmaps it). */
int up_xol_note_map(struct up_xol *x, uint64_t start, uint64_t len, bool exec);
/* The bytes of ours mapped in the process. */
uint64_t up_xol_mapped(const struct up_xol *x);
/* Is addr in a mapping of ours (a slot area, the agent, the safety net...)? */
bool up_xol_ours(const struct up_xol *x, uint64_t addr);
/*
 * A free range of size bytes within +-2 GiB of near, a page away from any mapping
 * (not placed: the caller maps it with MAP_FIXED_NOREPLACE).  -ENOMEM when none.
 */
int up_xol_find_gap(struct up_proc *p, uint64_t near, uint64_t size, uint64_t *addr);
/* Writes the slot's code. */
int up_xol_write(struct up_proc *p, uint64_t slot, const void *code, size_t len);
void up_xol_free(struct up_xol *x, uint64_t slot);
/* Is addr inside an area?  (Not necessarily an allocated slot.) */
bool up_xol_contains(const struct up_xol *x, uint64_t addr);
/* Forgets every area and mapping: the address space is gone (exec, exit). */
void up_xol_drop(struct up_xol *x);
/* Unmaps every mapping of ours through t (stopped; the caller proved no thread uses
   them), then forgets them.  0, or the first munmap's error (the rest unmapped all
   the same). */
int up_xol_unmap(struct up_xol *x, struct up_task *t);

#endif
