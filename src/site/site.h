/* SPDX-License-Identifier: MIT */
/*
 * The probe-site layer: how an address of a traced process gets its control transfer.
 *
 *   an int3 site    the breakpoint byte (ubp.c), and for the instruction it displaces
 *                   a slot in the XOL area (xol.c) with its relocation (arch/x86/);
 *   a patched site  a jmp over the instruction(s) into a trampoline, the planner
 *                   (agent/plan.c, up_patch_site) choosing how; a counter, or a
 *                   descriptor the agent records by; several probes at one address
 *                   run in a chain of trampolines.
 *
 * The arbiter (uprobes.c) is the one caller.  It asks for the fast path first
 * (up_site_place: the planner's choice, or the reason it stays on an int3, logged),
 * for an int3 otherwise (up_site_int3_*), takes patched sites back to int3 where it
 * needs an int3 within their bytes (up_site_evict), removes sites, and reads counts.
 *
 * Beneath the arbiter: nothing here includes uprobes_int.h or calls the arbiter
 * (ctest layers.site, tests/integration/site_layer.sh, checks both).  What it must
 * know of threads comes as arguments (the thread to run a remote system call in) or
 * from the task layer (the threads of the processes that share the address space,
 * up_sites_share); it logs through the library's public log callback (opts->log).
 * The agent's records, thread names and returns are its business too, since the
 * agent runs in the patched sites.
 *
 * Prefixes: up_site_ (a site, the layer), up_sites_ (an address space's sites).
 */
#ifndef UPROBE_SITE_SITE_H
#define UPROBE_SITE_SITE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/user.h>

#include <uprobe/uprobe.h>

#include "agent/net.h"
#include "site/spool.h"
#include "arch/x86/insn.h"
#include "task/task.h"
#include "ubp.h"
#include "xol.h"

struct up_uwarea;

/* What a uprobe's kimg is (u->kind): the arbiter's probepoint, or a patched site of
   this layer (which sets and clears that kind itself). */
#define UP_KIND_PPT 0
#define UP_KIND_PATCHED 1

struct up_agent;
struct up_patched; /* a patched site (site/internal.h) */

/* What every address space's sites share: the library's options and counters. */
struct up_site_ctx {
	const struct uprobe_ctx_opts *opts; /* log, verbose, no_xol, ring_bytes, handlers */
	struct uprobe_stats *stats;
	struct up_ubp_files files; /* ELF files read to check and plan sites */
	struct up_sites *spaces;   /* every address space's sites, newest first */
	unsigned ring_fill;	   /* the fullest ring at the last drain, in 256ths */
	uint64_t rec_seen_ns;	   /* when records last came (or a recording site was placed) */
	struct up_spool spool;	   /* records copied, waiting for record_handler */
	bool spooling;		   /* record_handler is fed from the spool */
	bool spool_busy;	   /* it is being delivered */
	uint32_t spool_ids;	   /* the last address space's number in it */
};

/* Addresses, sorted, each with a byte (int3.c). */
struct up_site_marks {
	struct up_site_mark {
		uint64_t vaddr;
		uint8_t orig;
	} *v;
	unsigned n, cap;
};

/* An int3 site: the breakpoint and the displaced instruction's slot. */
struct up_int3_site {
	struct up_ubp bp;
	struct up_reloc rel;
	uint64_t slot; /* 0: none */
};

/* The safety net of one address space (safety.c, agent/net.h): where its handler and
   tables are, the program's SIGTRAP disposition it replaced (what a detach puts back),
   and the tracer's copies of the tables. */
struct up_net {
	uint64_t code, data; /* in the process; 0: none */
	bool installed;	     /* our handler is the process's SIGTRAP disposition */
	bool failed;	     /* could not be, or must not: not tried again */
	bool rets_full;
	struct upn_sigaction prog, ours;
	struct upn_site *sites;
	struct upn_ret *rets;
	uint64_t *ret_live; /* a bit an entry of rets: its return is pending */
	unsigned reset;	    /* how often a trap with SIGTRAP blocked took ours away */
	uint64_t ret_int3;  /* the return trampoline's int3, told before the net was */
};

/* A signal disposition the tracer changed in the process: the kernel's struct
   sigaction (handler, flags, restorer, mask) as it was, and the handler put there. */
struct up_site_sig {
	int sig;
	uint64_t ours;
	uint64_t old[4];
};
#define UP_SITE_SIGS 4

/* The sites of one address space. */
struct up_sites {
	struct up_sites *next; /* in ctx->spaces */
	struct up_site_ctx *ctx;
	struct up_proc *p; /* the process that owns the memory */
	pid_t pid;
	/* the other processes whose threads run in this memory (vfork children), oldest
	   first: every "is a thread inside" check looks at theirs too */
	struct up_proc **shared;
	unsigned nshared, capshared;
	struct up_xol xol;
	/* every address we ever wrote an int3 at, with the byte it replaced: a last line
	   of defence should one be left behind (up_site_written_orig); live: the int3s in
	   place now, which a jmp must not cover */
	struct up_site_marks written, live;
	/* every address out-of-line code (a trampoline, a slot) ever jumped back to: a
	   thread running out of line comes back to one of them */
	struct up_site_marks backs;
	bool backs_lost; /* one could not be kept: any may be */
	/* patched sites */
	struct up_patched *fast;
	uint64_t fast_seq;  /* the next site's seq */
	uint64_t counters;  /* their counters' page in the process, 0: none yet */
	unsigned ncounters;
	bool fast_used;	    /* trampolines were live: the XOL area outlives a detach */
	struct up_agent *agent; /* the recording probes' shared ring, NULL: none yet */
	bool tid_looked;	/* glibc's tid offset was looked for (a thread had TLS) */
	struct up_uwarea *uw;	/* stacks: the unwind tables the agent walks by, NULL none */
	struct up_patched **recp; /* by record id: the site, NULL once gone */
	uint32_t nrecp;
	bool draining;
	uint32_t spool_id; /* its records' pid field in the spool */
	/* threads the agent names by their stack, having no TLS block yet (a process
	   caught at its exec has none until its dynamic linker sets one up): while any,
	   records key by rsp and take the cpu with lsl.  notls counts them (and, for good,
	   any that could not be listed); notls_task lists them. */
	unsigned notls;
	struct up_task **notls_task;
	unsigned nnotls, capnotls;
	/* dispositions changed (up_sites_sig_changed), put back when our mappings go */
	struct up_site_sig sigs[UP_SITE_SIGS];
	unsigned nsigs;
	/* uprobes whose sites left the fast path on their own (up_site_evicted) */
	struct uprobe **evicted;
	unsigned nevicted, capevicted;
	struct up_net net;
};

/* ---- the context and an address space's life ---- */
void up_site_ctx_init(struct up_site_ctx *c, const struct uprobe_ctx_opts *opts,
		      struct uprobe_stats *stats);
void up_site_ctx_fini(struct up_site_ctx *c);
/* A batch of registrations begins: mappings may have changed since the last. */
void up_site_ctx_batch(struct up_site_ctx *c);
void up_sites_init(struct up_sites *s, struct up_site_ctx *c, struct up_proc *p);
/* s is no longer used (its address space forgotten before, if it had sites). */
void up_sites_fini(struct up_sites *s);
/* child's threads run in s's memory from now on (vfork), or no longer. */
int up_sites_share(struct up_sites *s, struct up_proc *child);
void up_sites_unshare(struct up_sites *s, struct up_proc *child);
/* The address space is gone (exec, exit): every site forgotten, counts settled. */
void up_sites_forget(struct up_sites *s);
/* Detach (process quiesced, its int3s out): every jmp undone, hijacked returns sent
   home.  What was mapped goes with up_sites_teardown. */
void up_sites_detach(struct up_sites *s);
/*
 * Everything of ours the process still has goes, once no thread can use it (process
 * quiesced, no int3 or jmp of ours left, t a stopped thread for the remote system
 * calls): the signal dispositions we changed put back, hijacked returns sent home
 * again (a thread caught mid-hijack may have finished it since), then, unless a
 * thread runs in code of ours or a word of its stack points there (inside.c,
 * maps_in_use), every mapping of ours unmapped (the XOL areas, the counters' pages,
 * the agent's region; the agent forgotten: a later probe maps a new one).  Returns
 * the bytes still mapped, 0 when none; with last, says on the log how many it leaves
 * and why.  The caller lets the threads run a little and calls again.
 */
uint64_t up_sites_teardown(struct up_sites *s, struct up_task *t, bool last);
/* The tracer changed sig's disposition in the process, from old (the kernel's struct
   sigaction: handler, flags, restorer, mask) to the handler ours: put back when our
   mappings go, if ours is still the handler then.  -ENOSPC: no room to remember. */
int up_sites_sig_changed(struct up_sites *s, int sig, uint64_t ours, const uint64_t old[4]);
/* A fork child (not sharing the memory) gets the original bytes of every jmp, and
   the returns the agent hijacked, back: it has no trampolines. */
void up_sites_fork(struct up_sites *s, struct up_proc *child);
/* Thread t of the process exits: counters read and its records delivered meanwhile,
   or (records_wait) left in its ring for the next drain. */
void up_sites_exiting(struct up_sites *s, struct up_task *t, bool records_wait);

/* ---- int3 sites (int3.c) ---- */
/* Checks and analyses the instruction at vaddr (up_ubp_prepare); msg says why not. */
int up_site_int3_prepare(struct up_sites *s, uint64_t vaddr, struct up_int3_site *i, char *msg,
			 size_t msglen);
/* Has the process an XOL area of ours already (a slot without a remote call, mostly)? */
bool up_site_slots_mapped(const struct up_sites *s);
/* A slot near `near`, mapping an area through t (stopped) if need be. */
int up_site_slot_alloc(struct up_sites *s, struct up_task *t, uint64_t near, uint64_t *slot);
/* i's instruction relocated into slot and written there; the slot is freed on failure. */
int up_site_int3_fill(struct up_sites *s, struct up_int3_site *i, uint64_t slot);
/* Writes the int3 (process quiesced); punned jmps that end in its byte move, through
   t (stopped) for what they map. */
int up_site_int3_insert(struct up_sites *s, struct up_int3_site *i, struct up_task *t);
/* Takes the int3 out, if in; the same moves (t NULL: none, every site goes anyway). */
void up_site_int3_remove(struct up_sites *s, struct up_int3_site *i, struct up_task *t);
/* Gives i's slot back. */
void up_site_int3_free(struct up_sites *s, struct up_int3_site *i);
/* A fork child's copy of the text gets the original byte back (a child not followed). */
void up_site_int3_unfork(struct up_proc *child, const struct up_int3_site *i);
/* A followed fork child has the parent's int3 at i in its copied memory: c is its site. */
void up_site_int3_inherit(struct up_sites *child, const struct up_sites *parent,
			  const struct up_int3_site *i, struct up_int3_site *c);
/* The byte an int3 of ours replaced at vaddr (ever, in this image), or -1. */
int up_site_written_orig(const struct up_sites *s, uint64_t vaddr);
/* A slot holding one int3 near `near` (return probes' trampoline), through t. */
int up_site_ret_int3(struct up_sites *s, struct up_task *t, uint64_t near, uint64_t *at);
bool up_sites_in_xol(const struct up_sites *s, uint64_t addr);

/* ---- the safety net (safety.c): the process outlives the tracer ---- */
/*
 * The net's handler made the process's SIGTRAP handler, through t (stopped, the process
 * quiesced): done before the first int3 goes in (up_site_int3_insert calls it).  0, or
 * why not (logged once; the int3s go in all the same).  UPROBE_NO_NET in the
 * environment leaves it out, to measure what it saves.
 */
int up_site_net_ensure(struct up_sites *s, struct up_task *t);
/* A return the trap path hijacks: in the net before the stack word is written; done
   when it returned (or its frame was dropped). */
int up_site_net_ret_add(struct up_sites *s, uint64_t slot, uint64_t orig);
void up_site_net_ret_done(struct up_sites *s, uint64_t slot);
/*
 * Thread tid is about to run code of ours at [lo, hi] for the tracer (a remote system
 * call, the agent's page toucher): if the tracer dies meanwhile, the trap that ends it
 * gives the thread back regs and its signal mask (mask).  lo == 0: it is over.  0, or
 * -errno (no net: nothing to write).
 */
int up_site_net_remote(struct up_sites *s, pid_t tid, uint64_t lo, uint64_t hi,
		       const struct user_regs_struct *regs, uint64_t mask);
/* The int3s of ours in [lo, hi) are bytes a punned jmp ends in (about to be written):
   the net runs their copies and never heals them. */
void up_site_net_pin(struct up_sites *s, uint64_t lo, uint64_t hi);
/*
 * Detach (the int3s out): the program's own SIGTRAP disposition back, through t, if
 * ours is still in place.  The net's two mappings (s->net.code, UPN_CODE_SIZE;
 * s->net.data, UPN_DATA_SIZE) stay for the teardown to unmap once no thread is in them.
 */
int up_site_net_detach(struct up_sites *s, struct up_task *t);
/*
 * A trap stopped t (an int3, ours or the program's, or a SIGTRAP of the program's own
 * about to be passed on): a forced SIGTRAP that found SIGTRAP blocked has reset the
 * disposition to SIG_DFL (the kernel's rule), the net with it; put ours back through t.
 * The disposition is looked at when t has signals blocked (a forced trap only resets
 * where SIGTRAP was, and the kernel has taken it out of the mask by now), or always.
 */
void up_site_net_hit(struct up_sites *s, struct up_task *t, bool always);

/* ---- patched sites: the choice, eviction, removal, counts (site.c) ---- */
/*
 * The fast path for u where it allows one (a count or a record, no handler to run in
 * the tracer), process quiesced, t a stopped thread for remote system calls (NULL:
 * none).  0: patched (u->kind UP_KIND_PATCHED); 1: u takes an int3 (the reason
 * logged when verbose, counted in stats.fast_refused); -EEXIST: a foreign int3 there.
 */
int up_site_place(struct up_sites *s, struct uprobe *u, struct up_task *t);
/* Could u be placed on the fast path at all (a count without handlers, or a record;
   not UPROBE_F_NO_FAST)?  What up_site_place asks first. */
bool up_site_may_place(const struct uprobe *u);
/* A patched site whose jmp writes vaddr leaves the fast path (an int3 is wanted
   there): its uprobe, marked UPROBE_F_NO_FAST, for the caller to arm on an int3; NULL:
   none left.  (A punned jmp that only ends in vaddr's byte moves when the int3 is in.) */
struct uprobe *up_site_evict(struct up_sites *s, uint64_t vaddr, struct up_task *t);
/* A uprobe whose punned jmp found no room where the bytes it ends in now send it (a
   neighbour changed), left the fast path since the last call: for the caller to arm
   on an int3 (UPROBE_F_NO_FAST set); NULL: none. */
struct uprobe *up_site_evicted(struct up_sites *s);
/* u's patched site goes (process quiesced; s NULL: its process is gone), its counts
   settled into u.  Returns the address whose other probes lost the site with it
   (up_site_evict them there), else 0. */
uint64_t up_site_remove(struct up_sites *s, struct uprobe *u, struct up_task *t);
/* Hits, lost records of u's patched site so far (s NULL: its process is gone). */
uint64_t up_site_hits(struct up_sites *s, const struct uprobe *u);
uint64_t up_site_lost(struct up_sites *s, const struct uprobe *u);
void up_site_set_enabled(struct up_sites *s, const struct uprobe *u, bool on);
void up_site_agg_read(struct up_sites *s, const struct uprobe *u,
		      void (*fn)(void *arg, const struct uprobe_agg_entry *e), void *arg);
/* The patched sites after prev (NULL: the first) with their address and uprobe. */
struct up_patched *up_site_next_patched(struct up_sites *s, struct up_patched *prev,
					uint64_t *vaddr, struct uprobe **u);
/* A fault in a trampoline's relocated instruction: rip and si_addr made the site's
   (set on t); false when regs->rip is in no trampoline's. */
bool up_site_fault_home(struct up_sites *s, struct up_task *t, struct user_regs_struct *regs,
			const siginfo_t *info);

/* ---- thread naming (naming.c) ---- */
/* The agent learns t's name (a new thread, or every thread when the agent comes). */
void up_site_name_thread(struct up_sites *s, struct up_task *t);
/* A thread's comm may have changed: the agent's comm keys ask again. */
void up_site_comm_changed(struct up_sites *s);
/* A new thread t (stopped, not run yet): the rings threads about to record will write
   are made present, t writing them (up_agent_rings_ready), once a probe records. */
void up_site_thread_new(struct up_sites *s, struct up_task *t);
/* At a trap hit: a thread named by its stack is named again once it has TLS. */
void up_site_hit_name(struct up_sites *s, struct up_task *t, const struct user_regs_struct *r);
void up_site_thread_gone(struct up_sites *s, struct up_task *t);
/* Where a one-shot trap probe would see the program's thread with its TLS block, for
   threads the agent names by their stack; 0: none wanted or none possible. */
uint64_t up_site_tls_point(struct up_sites *s);

/* ---- records (deliver.c) ---- */
void up_site_drain(struct up_sites *s);
/* The spool's records to record_handler, oldest first: all of them (until_ns 0), or
   until CLOCK_MONOTONIC until_ns; true when some are left. */
bool up_site_spool_deliver(struct up_site_ctx *c, uint64_t until_ns);
/* A recording probe was placed: the spool's first chunks made ready (up_spool_warm), so
   that the first copies out of the rings fault nothing in the tracer. */
void up_site_spool_warm(struct up_site_ctx *c);
/* Every address space's rings drained; how full they were noted for up_site_drain_ms. */
void up_site_drain_all(struct up_site_ctx *c);
bool up_site_any_agent(const struct up_site_ctx *c);
/* The trace ends: no thread writes another record, and what the rings and the spool
   hold is delivered now, while the processes run on unthrottled, rather than by the
   detach, with every thread stopped. */
void up_site_finish(struct up_site_ctx *c);
/* How soon the rings are read again while nothing stops (ms). */
int up_site_drain_ms(const struct up_site_ctx *c);
/* The agent's hijacked returns go home in p (its table of returns left as it is). */
void up_site_unhijack(struct up_sites *s, struct up_proc *p);
/* A recording probe without a handler hit on the trap path: a record of the live
   registers, its memory read from p (t stopped meanwhile). */
void up_site_record_trap_hit(struct up_proc *p, struct up_task *t, struct uprobe *u,
			     struct user_regs_struct *regs, bool is_return);

/* Stacks: value, read at slot of a thread's stack, is one of the agent's return stubs
   (a fast-path return probe's hijack): 0 and the return it hides in *orig. */
int up_site_agent_return(struct up_sites *mm, uint64_t slot, uint64_t value, uint64_t *orig);
/*
 * Stacks through code of ours (a trampoline, the agent's C code): the row for pc, as the
 * walk's lookup gives it (sym/unwind_walk.h: 1 a row, made relative to pc; 0 code of
 * ours without one; -1 not ours).
 */
struct up_unwind_row;
int up_site_code_row(struct up_sites *mm, uint64_t pc, struct up_unwind_row *row);
/* Stacks: the unwind directory of the process's agent made anew from its maps now (a
   library mapped or unmapped); nothing where no probe walks stacks in the process. */
int up_site_unwind_sync(struct up_sites *mm);

#endif
