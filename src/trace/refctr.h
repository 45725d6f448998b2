/* SPDX-License-Identifier: MIT */
/*
 * USDT semaphores ("reference counters" in the kernel's uprobe_events:
 * PATH:0xOFFSET(0xREF_CTR_OFFSET)): a 16-bit counter in the traced program's data
 * that it reads to decide whether a probe's arguments are worth computing.  As the
 * kernel does (uprobes.c, update_ref_ctr), a probe that has one adds 1 to it in each
 * process where the probe is placed and takes 1 off when it is removed there; a
 * process that exits or execs takes its counters with it.  A set remembers what was
 * added in one process so that a detach leaves every counter as it found it.
 *
 * Nothing here prints or exits.  Prefix: up_refctr_.
 */
#ifndef UPROBE_TRACE_REFCTR_H
#define UPROBE_TRACE_REFCTR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct up_refctr_set {
	struct up_refctr {
		uint64_t addr;
		unsigned n; /* increments of ours there */
	} * v;
	size_t n, cap;
};

/*
 * The address of file offset off of the file (dev, ino) in process pid, in any of its
 * mappings (the counter is in a writable data one); 0 when not mapped.
 */
uint64_t up_refctr_vaddr(pid_t pid, dev_t dev, ino_t ino, uint64_t off);

/* Adds 1 (get) or takes 1 (put) at addr in pid, and remembers it.  0 or a negative
   errno (the counter is left alone when it would go below 0, as the kernel does). */
int up_refctr_get(struct up_refctr_set *s, pid_t pid, uint64_t addr);
int up_refctr_put(struct up_refctr_set *s, pid_t pid, uint64_t addr);

/* Takes back every increment of the set in pid (a detach), and empties it. */
void up_refctr_put_all(struct up_refctr_set *s, pid_t pid);

/* Empties the set without touching the process (it exited, execed, unmapped it);
   addr 0: every counter, else the one at addr. */
void up_refctr_forget(struct up_refctr_set *s, uint64_t addr);

/* dst (a forked child's, empty) gets src's counts: the child's memory has them. */
int up_refctr_copy(struct up_refctr_set *dst, const struct up_refctr_set *src);

/* Releases the set's memory (accepts an empty one). */
void up_refctr_free(struct up_refctr_set *s);

#endif
