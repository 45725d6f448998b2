/* SPDX-License-Identifier: MIT */
/*
 * The arbiter's insides (uprobes.c: probepoints, consumers, hits, execution out of
 * line, return instances, the life of processes and threads).  Nothing else includes
 * this: the probe-site layer beneath (src/site/site.h) must not, and never calls up.
 */
#ifndef UPROBE_UPROBES_INT_H
#define UPROBE_UPROBES_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <sys/user.h>

#include <uprobe/uprobe.h>

#include "arch/x86/insn.h"
#include "site/site.h"
#include "task/task.h"

#define PPT_HASH 4096
#define MAX_DELAYED 8
/* u->flags of the library's own trap probes (the TLS watch): their hits are no hits
   of the user's probes, so not counted in stats.hits */
#define UPROBE_F_OWN (1u << 31)

struct ppt {
	struct ppt *next; /* hash chain, or the zombie list */
	uint64_t vaddr;
	struct uprobe **cons;
	unsigned ncons, cap;
	struct up_int3_site site; /* the int3, the slot and its relocation */
	enum uprobe_plan plan;
	unsigned users; /* threads executing it out of line */
	unsigned emulated; /* hits emulated (SLOT_AFTER: a slot is worth its area) */
	bool dead;	/* unregistered, kept for its users */
};

struct uproc {
	struct uproc *next;
	struct uprobe_ctx *ctx;
	struct up_proc *p;
	pid_t pid;
	struct uproc *mm_owner; /* a vfork child: the parent whose memory it shares */
	bool handlers;		/* hits here run the consumers' handlers */
	struct ppt *hash[PPT_HASH];
	struct ppt *zombies;
	struct up_sites sites; /* how its addresses get their control transfer */
	uint64_t tramp; /* return probes: an int3 in the XOL area, 0: none yet */
	/* a one-shot trap probe at the program's entry, where the thread has its TLS, to
	   name the threads the agent names by their stack again (up_site_tls_point) */
	struct uprobe tls_watch;
	bool tls_watched;
	/* being let go: its threads run a little while what we mapped waits to be
	   unmapped (release); its stops are passed on untouched meanwhile */
	bool releasing;
	/* no probe left here, but what we mapped is still in use: tried again from
	   uprobe_ctx_dispatch (idle_teardown) since idle_since, for a while */
	bool idle_due;
	uint64_t idle_since, idle_tried;
	/* reached by following: its probes wait on int3s until cold_hits reaches the
	   context's fast_after (promote) */
	bool followed, cold;
	bool promote_due;
	unsigned cold_hits, promotions;
};

enum ut_state {
	UT_NONE,
	UT_STEP,   /* single-stepping a probepoint's instruction in its slot */
	UT_DRAIN,  /* stepping out of a slot to deliver a signal that arrived there */
	UT_INLINE, /* single-stepping the original in place, the process quiesced */
};

/* A hijacked return: where it really goes, and where that address sits on the stack. */
struct rinst {
	uint64_t orig, sp;
	uint64_t t0; /* CLOCK_MONOTONIC ns at the entry stop: the return's duration */
	struct uprobe *u; /* NULL once unregistered */
};

#define MAX_RINST 256 /* return instances per thread: deeper recursion is not followed */

struct utask {
	enum ut_state state;
	struct ppt *ppt;
	struct up_reloc_step st;
	siginfo_t delayed[MAX_DELAYED];
	unsigned ndelayed;
	struct rinst *rs; /* the return stack, innermost last */
	unsigned nrs, caprs;
};

struct pending_op {
	struct uprobe *u;
	int reg;
};

struct uprobe_ctx {
	struct uprobe_ctx_opts opts;
	struct up_engine *eng;
	struct uproc *procs;
	struct up_site_ctx sites; /* the probe-site layer's: files, rings' fill */
	struct uprobe_stats stats;
	bool in_handler;
	bool in_return;	     /* a ret_handler runs: ret_ns is its return's duration */
	uint64_t ret_ns;
	bool brk; /* uprobe_ctx_break */
	pid_t cur_tid, cur_pid;
	struct up_task *cur_task; /* the thread whose stop is being handled */
	struct pending_op *queue;
	unsigned nqueue, capqueue;
	/* the process release() lets run while it waits; NULL once it exits meanwhile */
	struct uproc *releasing;
};

#endif
