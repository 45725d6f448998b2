/* SPDX-License-Identifier: MIT */
/*
 * The probe-site layer's insides, shared by its files (src/site/): the patched site,
 * and what one file uses of another.  Only src/site/ includes this; like the layer it
 * never includes uprobes_int.h.
 */
#ifndef UPROBE_SITE_INTERNAL_H
#define UPROBE_SITE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/patch.h"
#include "agent/ring.h"
#include "site/site.h"
#include "sym/unwind.h"

#define FAST_SLOTS 2 /* 128 bytes of trampoline */
#define FAST_SLOTS_REC 6 /* 384 bytes of a recording trampoline */
#define CHAIN_MAX 16

/* A patched site: the jmp over the instruction, its trampoline, its counter. */
struct up_patched {
	struct up_patched *next;
	struct up_patch_site site;
	struct uprobe *u;
	uint64_t tramp, counter;
	unsigned nslots; /* of the trampoline, 0 once given back */
	unsigned home_of[UP_PATCH_MAX_INSN];
	/* its trampoline's unwind rows (up_patch_rows: pcs from tramp), for stacks through
	   it; code_len its bytes of code */
	struct up_unwind_row rows[UP_PATCH_ROWS];
	unsigned nrows, code_len;
	uint64_t last; /* the counter as last read */
	bool patched;
	bool shared; /* the counter is in the agent's region: readable after exec and exit */
	/* a recording site: its descriptor in the shared region, its record id */
	bool rec;
	bool agg; /* rec, aggregating: its tables follow the descriptor */
	uint64_t desc;
	uint32_t id;
	uint64_t regs;	 /* the frame words its records carry */
	uint64_t save;	 /* the frame words its trampoline saves */
	uint64_t nrec;	 /* records delivered */
	/* several probes on one site run in a chain of trampolines: entry probes in the
	   order they came (seq), return probes (they rewrite the return address) last */
	uint64_t seq;
	bool is_ret;
	bool chained; /* its trampoline is one of several: a thread in another may come */
};

/* site.c */
__attribute__((format(printf, 2, 3))) void site_log(struct up_site_ctx *c, const char *fmt, ...);
/* The processes whose threads run in mm's memory: i from 0 while non-NULL (the vfork
   children, newest first, then the owner, as the arbiter lists them). */
struct up_proc *sites_proc(const struct up_sites *mm, unsigned i);
/* A site whose jmp writes or (punned) ends in bytes of [lo, hi); one that writes them. */
struct up_patched *fast_overlapping(struct up_sites *mm, uint64_t lo, uint64_t hi);
struct up_patched *fast_writing(struct up_sites *mm, uint64_t lo, uint64_t hi);
/* Where the next site above vaddr begins, if near enough to matter (0: none). */
uint64_t next_site(struct up_sites *mm, uint64_t vaddr);
void fast_unlink(struct up_sites *mm, struct up_patched *f);
/* f leaves the fast path on its own: unpatched, freed, its uprobe queued for an int3. */
void fast_drop(struct up_sites *mm, struct up_patched *f, struct up_task *t);

/* safety.c: the net's entry for an int3 site (before its byte goes in; updated when its
   slot changes), gone after it is out; the return trampoline's int3; a fork child's
   copy of the parent's net; an address space gone. */
int net_site_put(struct up_sites *s, const struct up_int3_site *i);
void net_site_del(struct up_sites *s, uint64_t vaddr);
int net_ret_int3(struct up_sites *s, uint64_t at);
void net_inherit(struct up_sites *child, const struct up_sites *parent);
void net_forget(struct up_sites *s);
int net_put_back(struct up_sites *s);

/* patched.c */
bool wants_record(const struct uprobe *u);
int fast_arm(struct up_sites *mm, struct uprobe *u, struct up_task *t, char *why, size_t whylen);
int read_counter(struct up_sites *mm, struct up_patched *f, struct up_task *t, uint64_t *v);
/* Its bytes back (f unlinked already); t: the punned jmps that end in them follow
   (NULL: none, every site goes, or an int3 there soon makes them follow). */
void fast_unpatch(struct up_sites *mm, struct up_patched *f, struct up_task *t);
void settle(struct up_sites *mm, struct up_patched *f);

/* inside.c: where a thread's rip or a word of its stack may point: inside one of the
   ranges (lo, hi), or (out of line) anywhere it runs code of ours, from where it jumps
   back into the program (hull: every such place is within it). */
struct where {
	struct up_sites *mm;
	unsigned n;
	uint64_t lo[CHAIN_MAX + 1], hi[CHAIN_MAX + 1];
	bool out_of_line;
	uint64_t hull_lo, hull_hi;
};
void where_range(struct where *w, struct up_sites *mm, uint64_t lo, uint64_t hi);
void where_out_of_line(struct where *w, struct up_sites *mm);
bool any_rip(struct up_sites *mm, const struct where *w);
bool any_rip_in(struct up_sites *mm, uint64_t lo, uint64_t hi);
bool any_stack_word(struct up_sites *mm, const struct where *w);
bool stack_points_in(struct up_sites *mm, uint64_t lo, uint64_t hi);
/* May a thread still run code of ours (xol.maps) or come back to it: its rip, or a
   signal frame on its stack whose saved rip is there?  why says which. */
bool maps_in_use(struct up_sites *mm, char *why, size_t whylen);

/* int3.c */
bool int3_live_in(const struct up_sites *mm, uint64_t lo, uint64_t hi);
/* Out-of-line code jumps back to vaddr (kept for good); does any jump back into
   [lo, hi)? */
void back_add(struct up_sites *mm, uint64_t vaddr);
bool back_in(const struct up_sites *mm, uint64_t lo, uint64_t hi);
void int3_forget(struct up_sites *mm);

/* rseq.c */
void agent_find_rseq(struct up_sites *mm);
void agent_find_tid(struct up_sites *mm);

/* chain.c */
unsigned chain_of(struct up_sites *mm, uint64_t vaddr, struct up_patched **v);
void tramp_reclaim(struct up_sites *mm, struct up_patched *f);
int chain_build(struct up_sites *mm, struct up_task *t, uint64_t vaddr,
		struct up_patched *extra, char *why, size_t whylen);
/* The same with the first trampoline in [lo, hi] (0, 0: a punned jmp's window, or
   anywhere near). */
int chain_build_in(struct up_sites *mm, struct up_task *t, uint64_t vaddr,
		   struct up_patched *extra, uint64_t lo, uint64_t hi, char *why, size_t whylen);
/* The bytes f's trampoline takes as the first of its chain (chained: not the last). */
/* patched.c: the agent's unwind table of the page of trampolines at addr made anew from
   its trampolines' rows (where the process has an unwind area) */
void code_rows_sync(struct up_sites *mm, uint64_t addr);
size_t tramp_need(struct up_sites *mm, const struct up_patched *f, bool chained);

/* pun.c */
/* The bytes [lo, hi) changed: punned jmps that end in them move (t stopped, for what
   they map), or leave the fast path (fast_drop). */
void pun_follow(struct up_sites *mm, struct up_task *t, uint64_t lo, uint64_t hi);
/* The punned chain at a planned again from the bytes after it now and built there,
   its follower's jmp steered where that window has no room (tried: the window as it
   is was tried already).  0, or why not. */
int pun_rebuild(struct up_sites *mm, struct up_task *t, uint64_t a, bool tried, char *why,
		size_t whylen);

/* deliver.c */
uint64_t agg_hits(struct up_sites *mm, struct up_patched *f);
uint64_t agg_emit(struct up_sites *mm, struct up_patched *f,
		  void (*fn)(void *arg, const struct uprobe_agg_entry *e), void *arg);
void rec_settle(struct up_sites *mm, struct up_patched *f);

#endif
