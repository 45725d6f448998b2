/* SPDX-License-Identifier: MIT */
/*
 * The tracer's half of the in-process agent: the shared region (a memfd mapped into
 * the traced process by remote syscalls and into the tracer), the agent's code placed
 * in it, the probes' descriptors, and the ring the agent writes records into, drained
 * here without a single syscall.  One per address space.  Prefix: up_agent_.
 *
 * It never patches code (the arbiter does, with every thread stopped) and never frees
 * anything the target may still be executing or writing: the target's mappings stay
 * until its address space goes.
 */
#ifndef UPROBE_AGENT_RING_H
#define UPROBE_AGENT_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uprobe/uprobe.h>

#include "agent/abi.h"
#include "task/task.h"

struct up_agent;

/* A record, as the drain hands it out (valid during the callback only). */
struct up_agent_rec {
	uint32_t id;	 /* the probe's */
	uint32_t cpu;
	bool is_return;	 /* a return probe's: regs[rip] is where it returned to */
	pid_t tid;	 /* 0 when the thread could not be named */
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	const uint64_t *regs; /* the probe's chosen frame words, in order */
	unsigned nregs;
	const uint8_t *mem; /* the memory entries */
	size_t memlen;
};

/*
 * Creates the region in t's process (stopped, the process quiesced), scratch being
 * UP_AGENT_SCRATCH bytes of the XOL area (consecutive slots) for the code of its remote
 * system calls (up_task_syscalls: one stop for the memfd, its size, both mappings and
 * their MADV_DONTFORK) and the memfd's name.  ring_bytes is rounded up to a power of two
 * (0: the default, 4 MiB).  0, or a negative errno with why.
 */
#define UP_AGENT_SCRATCH (UP_TASK_SYSCALLS_CODE + 64)
int up_agent_new(struct up_task *t, uint64_t scratch, size_t ring_bytes, struct up_agent **out,
		 char *why, size_t whylen);
/*
 * A region in the tracer alone, the agent's addresses the tracer's own (tests and the
 * fuzzer: fuzz/fuzz_region.c writes the target's side).  0 or a negative errno.
 */
int up_agent_new_local(size_t ring_bytes, struct up_agent **out);
/* The tracer's mapping of the region (tests and the fuzzer write the target's side). */
void *up_agent_region(const struct up_agent *a);
/*
 * fn is told, once, that the traced process wrote into the region what the agent
 * never writes (id: the probe whose record it was, or UINT32_MAX); the ring it was in
 * is abandoned, the others are read on (design.md, "The trust boundary").
 */
void up_agent_on_corrupt(struct up_agent *a, void (*fn)(void *arg, uint32_t id, const char *why),
			 void *arg);
/* The tracer's mapping goes; the target's are the caller's (up_agent_maps: the site
   layer unmaps them once no thread can be inside). */
void up_agent_free(struct up_agent *a);

/*
 * The rings of the thread slots about to be claimed made present before their writers
 * need them, t (stopped) doing the writes in its process, once a recording probe was
 * placed: at a placement (recording) the rings of the next RING_POOL slots (ring.c),
 * for threads not born yet; at a new thread (t) the ring of the slot it will claim if
 * the pool ran out.  8 MiB of each at most (1 MiB at a new thread, which waits).  A
 * negative errno when t could not run.
 */
int up_agent_rings_ready(struct up_agent *a, struct up_task *t, bool recording);

/* The region's two mappings in the process: data (read-write), then code. */
void up_agent_maps(const struct up_agent *a, uint64_t start[2], uint64_t len[2]);

/* Stacks: the agent walks by the unwind directory at dir (agent/unwind.h), 0 none,
   its threads caching rows at caches. */
void up_agent_set_unwind(struct up_agent *a, uint64_t dir, uint64_t caches);
/* Where the agent's entry, and the trampoline hijacked returns go to, are. */
uint64_t up_agent_entry(const struct up_agent *a);
uint64_t up_agent_ret_tramp(const struct up_agent *a);

/*
 * Every return a return probe hijacked and that has not happened yet: the stack slot
 * holding the trampoline's address, and the real one (to put back in a fork child,
 * or at detach).  The entries stay: a thread stopped half-way through a hijack or a
 * return still needs its own (up_site_unhijack).
 */
void up_agent_for_each_return(struct up_agent *a,
			      void (*fn)(void *arg, uint64_t slot, uint64_t orig), void *arg);

/*
 * Thread naming: the agent records %fs:0 where every thread has a TLS block, else the
 * stack pointer, which the tracer finds in a thread's stack [lo, hi).
 */
void up_agent_thread(struct up_agent *a, uint64_t key, pid_t tid);
void up_agent_stack(struct up_agent *a, uint64_t lo, uint64_t hi, pid_t tid);
/* The thread last named by key, 0 if none. */
pid_t up_agent_thread_tid(struct up_agent *a, uint64_t key);
/* Is addr in the agent's code (its entry, its return trampoline)? */
bool up_agent_has_code(const struct up_agent *a, uint64_t addr);
void up_agent_no_fs0(struct up_agent *a); /* some thread has no TLS: record rsp */
/* Every thread has one now: %fs:0 (and the rseq area's cpu) again; true if it was off. */
bool up_agent_fs0(struct up_agent *a);
/* Records take each thread's cpu from glibc's rseq area, found through the
   process's __rseq_offset and __rseq_size at these addresses, not with lsl. */
void up_agent_rseq(struct up_agent *a, uint64_t offset_at, uint64_t size_at);
/* Where they are; false when unknown, or once some thread was found without one. */
bool up_agent_rseq_at(const struct up_agent *a, uint64_t *offset_at, uint64_t *size_at);
void up_agent_no_rseq(struct up_agent *a); /* some thread has no such area: for good */

/*
 * A probe's descriptor: d (its id and ctl are filled here), then its fetches and
 * conditions, then, for an aggregating probe (agg non-NULL: UPA_P_AGG is set here),
 * agg with its tables made in the heap (agg->order, nkeys, key, nvals, val and at_entry
 * given; the rest is filled here).  *addr is where the trampoline finds it.  -ENOSPC
 * when the heap is full, -E2BIG when one record could not fit the ring.
 */
int up_agent_probe_add(struct up_agent *a, struct upa_probe *d, const struct upa_fetch *f,
		       const struct upa_cond *c, const struct upa_agg *agg, uint64_t *addr,
		       uint32_t *id);
/*
 * An aggregating descriptor's tables as they are: fn gets each published entry (key
 * words, then hits and the vals), every table's in turn; then *dropped.  A thread may
 * be updating an entry meanwhile: its hit is in this read or the next.
 */
void up_agent_agg_read(const struct up_agent *a, uint64_t addr,
		       void (*fn)(void *arg, const uint64_t *key, unsigned nkey,
				  const uint64_t *val, unsigned nval),
		       void *arg, uint64_t *dropped);
/* Switches a descriptor's records (and counts) on or off. */
void up_agent_probe_enable(struct up_agent *a, uint64_t addr, bool on);
/*
 * A counter for a counting site, in the shared region (so it can be read after the
 * process exec'd or exited): its address in the target.  -ENOSPC when the heap is full.
 */
int up_agent_counter(struct up_agent *a, uint64_t *addr);
/*
 * Makes present, written from t's process (upa_touch), the ctl page (once), the heap's
 * pages that probes and counters have taken since the last call, and the return tables
 * once a return probe has been placed -- for probes that run agent code (a counter's
 * page is left to its first hit): best effort (a page not made present costs its first writer a
 * fault).  0, or the up_task_call error.
 */
int up_agent_heap_ready(struct up_agent *a, struct up_task *t);
uint64_t up_agent_read(const struct up_agent *a, uint64_t addr);

/* Counters of a descriptor. */
void up_agent_probe_counts(const struct up_agent *a, uint64_t addr, uint64_t *filtered,
			   uint64_t *lost);

/* Every complete record, oldest first, to fn; returns how many. */
unsigned up_agent_drain(struct up_agent *a, void (*fn)(void *arg, const struct up_agent_rec *r),
			void *arg);
/*
 * The same records raw: each copied out of the ring with its header rewritten as a
 * struct uprobe_raw_rec (probe_of turns the record's probe id into the caller's,
 * UPROBE_RAW_SKIP: the record is left out; pid is the process), handed to fn in
 * spans of whole records (the caller's to read: nothing the target can change).
 * Returns how many records.
 */
unsigned up_agent_drain_raw(struct up_agent *a, pid_t pid,
			    uint32_t (*probe_of)(void *arg, uint32_t id),
			    void (*fn)(void *arg, const void *recs, size_t len), void *arg);
/*
 * The same raw records for the tracer's spool: every ring's, merged oldest first (so
 * lines come out in time order), no more than budget bytes of them (the rest wait in
 * the rings), in spans to fn.  probe_of as above; pid goes into each header as is.
 * Each record was checked once here (design.md section 8): the spool is the tracer's
 * own memory, read afterwards without a second check.  Returns the bytes copied.
 */
size_t up_agent_drain_copy(struct up_agent *a, pid_t pid, size_t budget,
			   uint32_t (*probe_of)(void *arg, uint32_t id),
			   void (*fn)(void *arg, const void *recs, size_t len), void *arg);
/* A spooled record (copied by up_agent_drain_copy, its probe field the agent's id) as
   the drain hands a record out; the record's probe must still be a's. */
void up_agent_rec_of_raw(const struct up_agent *a, const struct uprobe_raw_rec *raw,
			 uint32_t id, struct up_agent_rec *v);
/* --when-full=block: a record that finds its ring full waits for room (abi.h
   UPA_F_BLOCK) while the tracer moves the ring's tail; off at up_agent_free, and when
   a ring is found corrupt. */
void up_agent_set_block(struct up_agent *a, bool on);
/* The trace ends: the threads write no more records (nor count them lost), and wake
   from a wait for room; what the rings hold stays to be drained. */
void up_agent_quiet(struct up_agent *a);
/* The tracer drains again: threads that stopped waiting for it (ctl.gone) wait again. */
void up_agent_heartbeat(struct up_agent *a);
/* CLOCK_MONOTONIC in ns: the clock records are stamped with. */
uint64_t up_mono_ns(void);
/* How much the drains since the last call took from the ring they took most from, in
   256ths of a ring (what the agent says is in a ring is not trusted for it: a target
   could make a ring look full forever and the tracer drain it without rest). */
unsigned up_agent_fill(struct up_agent *a);
/* Records dropped because the ring was full, in all. */
uint64_t up_agent_lost(const struct up_agent *a);

/*
 * Memory as the record saw it: 0 when every byte of [addr, addr + len) was read by the
 * agent (a string's bytes past its NUL read as 0), -EFAULT when its read faulted or the
 * record has no such bytes.
 */
int up_agent_rec_read(const struct up_agent_rec *r, uint64_t addr, void *buf, size_t len);

/* The largest record a probe with these fetches can write (header included). */
uint32_t up_agent_record_size(uint64_t regs, const struct upa_fetch *f, unsigned nfetch);

#endif
