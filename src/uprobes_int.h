/* SPDX-License-Identifier: MIT */
/*
 * The arbiter's insides, shared by uprobes.c (probepoints, hits, the life of
 * processes) and the fast path's files in src/site/ (patched sites, the checks on
 * threads inside them, trampoline chains, thread naming, rseq, record delivery).
 * Nothing else includes this.
 */
#ifndef UPROBE_UPROBES_INT_H
#define UPROBE_UPROBES_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <sys/user.h>

#include <uprobe/uprobe.h>

#include "agent/patch.h"
#include "arch/x86/insn.h"
#include "task/task.h"
#include "agent/ring.h"
#include "ubp.h"
#include "xol.h"

#define PPT_HASH 4096
#define KIND_PPT 0
#define KIND_FAST 1
#define FAST_SLOTS 2 /* 128 bytes of trampoline */
#define FAST_SLOTS_REC 6 /* 384 bytes of a recording trampoline */
#define MAX_DELAYED 8
/* u->flags of the library's own trap probes (the TLS watch): their hits are no hits
   of the user's probes, so not counted in stats.hits */
#define UPROBE_F_OWN (1u << 31)

struct ppt {
	struct ppt *next; /* hash chain, or the zombie list */
	uint64_t vaddr;
	struct uprobe **cons;
	unsigned ncons, cap;
	struct up_ubp bp;
	struct up_reloc rel;
	uint64_t slot; /* 0: none */
	enum uprobe_plan plan;
	unsigned users; /* threads executing it out of line */
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
	struct up_xol xol;
	uint64_t tramp; /* return probes: an int3 in the XOL area, 0: none yet */
	struct fastp *fast;    /* fast-path patches */
	uint64_t fast_seq;     /* the next fastp's seq */
	uint64_t counters;     /* their counters' page in the process, 0: none yet */
	unsigned ncounters;
	bool fast_used;	       /* trampolines were live: the XOL area outlives a detach */
	struct up_agent *agent; /* the recording probes' shared ring, NULL: none yet */
	struct fastp **recp;	/* by record id: the site, NULL once gone */
	uint32_t nrecp;
	bool draining;
	/* threads the agent names by their stack, having no TLS block yet (a process
	   caught at its exec has none until its dynamic linker sets one up): while any,
	   records key by rsp and take the cpu with lsl.  tls_watch: a one-shot trap probe
	   at the program's entry, where the thread has its TLS, to name it again. */
	unsigned notls;
	struct uprobe tls_watch;
	bool tls_watched;
	/* every address we ever wrote an int3 at, with the byte it replaced: a last line
	   of defence should one be left behind (a hit with no probepoint and an int3 that
	   the program never had there is ours) */
	struct { uint64_t vaddr; uint8_t orig; } *written;
	unsigned nwritten, capwritten;
};

/* A fast-path site: the jmp over the instruction, its trampoline, its counter. */
struct fastp {
	struct fastp *next;
	struct up_patch_site site;
	struct uprobe *u;
	uint64_t tramp, counter;
	unsigned nslots; /* of the trampoline, 0 once given back */
	unsigned home_of[UP_PATCH_MAX_INSN];
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
	bool notls; /* counted in its process's uproc notls */
};

struct pending_op {
	struct uprobe *u;
	int reg;
};

struct uprobe_ctx {
	struct uprobe_ctx_opts opts;
	struct up_engine *eng;
	struct uproc *procs;
	struct up_ubp_files files;
	struct uprobe_stats stats;
	bool in_handler;
	bool in_return;	     /* a ret_handler runs: ret_ns is its return's duration */
	uint64_t ret_ns;
	bool brk; /* uprobe_ctx_break */
	unsigned ring_fill;   /* the fullest ring at the last drain_all, in 256ths */
	uint64_t rec_seen_ns; /* when records last came (or a recording site was placed) */
	pid_t cur_tid, cur_pid;
	struct up_task *cur_task; /* the thread whose stop is being handled */
	struct pending_op *queue;
	unsigned nqueue, capqueue;
};

/* ---- uprobes.c ---- */
__attribute__((format(printf, 2, 3))) void logf_(struct uprobe_ctx *ctx, const char *fmt, ...);
struct uproc *mm_of(struct uproc *up);
struct ppt *ppt_lookup(struct uproc *mm, uint64_t vaddr);
/* The byte an int3 of ours replaced at vaddr (ever, in this image), or -1. */
int written_orig(const struct uproc *mm, uint64_t vaddr);
struct uproc *uproc_of_pid(struct uprobe_ctx *ctx, pid_t pid);
struct up_task *idle_task(struct uproc *up);
struct utask *utask_of(struct up_task *t); /* NULL: out of memory */
int arm(struct uprobe_ctx *ctx, struct uproc *mm, struct uprobe *u);

/* ---- src/site/ ---- */
bool wants_record(const struct uprobe *u);
int fast_arm(struct uproc *mm, struct uprobe *u, char *why, size_t whylen);
struct fastp *fast_overlapping(struct uproc *mm, uint64_t lo, uint64_t hi);
void fast_unpatch(struct uproc *mm, struct fastp *f);
/* Unregisters f (process quiesced): the site's other probes keep it, else it is
   unpatched; f is unlinked, the caller frees it. */
void fast_remove(struct uproc *mm, struct fastp *f);
void fast_unlink(struct uproc *mm, struct fastp *f);
void fast_forget(struct uproc *mm);
void fast_downgrade(struct uproc *mm, struct fastp *f);
int read_counter(struct uproc *mm, struct fastp *f, struct up_task *t, uint64_t *v);
void agent_name_thread(struct uproc *mm, struct up_task *t);
void agent_thread_gone(struct uproc *mm, struct utask *ut);
void agent_watch_entry(struct uproc *mm);
void agent_unhijack(struct uproc *mm, struct up_proc *p, bool take);
void agent_drain(struct uproc *mm);
void drain_all(struct uprobe_ctx *ctx);
bool any_agent(struct uprobe_ctx *ctx);
void record_trap_hit(struct uproc *up, struct up_task *t, struct uprobe *u,
		     struct user_regs_struct *regs, bool is_return);

#endif
