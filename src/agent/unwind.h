/* SPDX-License-Identifier: MIT */
/*
 * The unwind area of a traced process (agent/abi.h struct upa_uw_dir): the unwind
 * tables (sym/unwind.h) of the files it maps, where its agent walks stacks with them.
 * One memfd the process makes itself (as the agent's region: nothing of the tracer's
 * is opened there), mapped read-only in the process and read-write here.  A file's
 * table is built once by the tracer (up_unwind_get, shared by every process mapping
 * it) and copied once into each area; the directory is written anew when the
 * process's executable mappings change (dlopen) and swapped in the agent's ctl.
 * Prefix: up_uwarea_.
 */
#ifndef UPROBE_AGENT_UNWIND_H
#define UPROBE_AGENT_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct up_task;
struct up_uwarea;

/* The area in t's process (scratch: 64 writable bytes there, for the memfd's name),
   near `near`; 0, or -errno with why. */
int up_uwarea_new(struct up_task *t, uint64_t scratch, uint64_t near, struct up_uwarea **out,
		  char *why, size_t whylen);
/* The tracer's side of it (the process's mapping goes with the others, xol.maps). */
void up_uwarea_free(struct up_uwarea *w);
/* Its mapping in the process (two: the threads' caches of rows, read-write, at start,
   then the tables, read-only; the one range unmaps both). */
void up_uwarea_map(const struct up_uwarea *w, uint64_t *start, uint64_t *len);
/* The threads' caches (agent/abi.h struct upa_uw_cache), in the process. */
uint64_t up_uwarea_caches(const struct up_uwarea *w);
/*
 * The directory of pid's executable file mappings as they are now, their tables copied
 * in where they are not yet: its address in the process in *dir (the last one when
 * nothing changed).  0; -ENOSPC when the area is full (the last directory stands).
 */
int up_uwarea_sync(struct up_uwarea *w, pid_t pid, uint64_t *dir);
/*
 * Code of ours in the process with rows of its own, listed in the next directory (a
 * directory entry each): a page of trampolines (its rows, pcs from start: a table
 * rewritten in place from then on, UP_UNWIND_LIVE), the agent's code at start (its
 * .eh_frame's table).  1: the directory must be written again (up_uwarea_sync) for
 * the agent to find them; 0; -ENOSPC, -ENOMEM.
 */
struct up_unwind_row;
struct up_unwind_table;
int up_uwarea_code(struct up_uwarea *w, uint64_t start, uint64_t len,
		   const struct up_unwind_row *rows, unsigned n);
int up_uwarea_blob(struct up_uwarea *w, uint64_t start, uint64_t len);
/* The agent's code's table (its blob's .eh_frame, built once), NULL where none. */
const struct up_unwind_table *up_uwarea_blob_table(void);
/* Bytes of the area used (tables and directories). */
size_t up_uwarea_used(const struct up_uwarea *w);

#endif
