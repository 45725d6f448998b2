/* SPDX-License-Identifier: MIT */
/*
 * The fast path's files' shared insides (src/site/): what one of them uses of another.
 */
#ifndef UPROBE_SITE_INTERNAL_H
#define UPROBE_SITE_INTERNAL_H

#include "uprobes_int.h"

#define CHAIN_MAX 16

/* Where a thread's rip or a word of its stack may point: inside one of the ranges
   (lo, hi), or (out of line) anywhere it runs code of ours, from where it jumps back
   into the program (hull: every such place is within it). */
struct where {
	struct uproc *mm;
	unsigned n;
	uint64_t lo[CHAIN_MAX + 1], hi[CHAIN_MAX + 1];
	bool out_of_line;
	uint64_t hull_lo, hull_hi;
};

void where_range(struct where *w, struct uproc *mm, uint64_t lo, uint64_t hi);
void where_out_of_line(struct where *w, struct uproc *mm);
bool any_rip(struct uproc *mm, const struct where *w);
bool any_rip_in(struct uproc *mm, uint64_t lo, uint64_t hi);
bool any_stack_word(struct uproc *mm, const struct where *w);
bool stack_points_in(struct uproc *mm, uint64_t lo, uint64_t hi);
void agent_find_rseq(struct uproc *mm);
unsigned chain_of(struct uproc *mm, uint64_t vaddr, struct fastp **v);
void tramp_reclaim(struct uproc *mm, struct fastp *f);
int chain_build(struct uproc *mm, struct up_task *t, uint64_t vaddr,
		       struct fastp *extra, char *why, size_t whylen);
uint64_t agg_hits(struct uproc *mm, struct fastp *f);
uint64_t agg_emit(struct uproc *mm, struct fastp *f,
			 void (*fn)(void *arg, const struct uprobe_agg_entry *e), void *arg);
void rec_settle(struct uproc *mm, struct fastp *f);

#endif
