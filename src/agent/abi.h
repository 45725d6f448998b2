/* SPDX-License-Identifier: MIT */
/*
 * What the in-process agent (src/agent/blob/agent.c, freestanding, running inside the
 * traced program) and the tracer (src/agent/ring.c) agree on: the layout of the shared
 * region, the per-probe descriptors the agent executes, and the records it writes.
 * Both sides are built from this one header; it holds nothing but fixed-width types.
 *
 * The shared region is one memfd mapped into both processes:
 *
 *   [ctl: one page][agent code][descriptor heap][ring]
 *
 * The target maps the code part read+exec and the rest read+write; the tracer maps all
 * of it read+write.  Prefix: upa_ / UPA_.
 */
#ifndef UPROBE_AGENT_ABI_H
#define UPROBE_AGENT_ABI_H

#include <stdint.h>

#define UPA_MAGIC 0x746e656761707575ull /* "uupagent" */
#define UPA_VERSION 8

/* ctl.flags */
#define UPA_F_FS0 1u /* %fs:0 names the thread (every thread has a TLS block); else its rsp */
#define UPA_F_RSEQ 2u /* glibc's rseq area holds each thread's cpu (rseq_offset_at); else lsl */
#define UPA_F_RTOWN 4u /* threads hijack returns into tables of their own (the lahf
			  trampoline's stubs say which at the return) */
#define UPA_F_BLOCK 8u /* a record that finds its ring full waits for room (--when-full=block)
			  while the tracer shows life (ctl.alive), instead of being dropped */
#define UPA_F_QUIET 16u /* the tracer is ending: a hit writes no record, and loses none
			   (what the rings hold is read while the process runs on) */

/* UPA_F_BLOCK: a wait for room sleeps this long at a time (a futex on the ring's wseq,
   which the tracer wakes when it moves a tail a waiter waits on), and gives up once
   ctl.alive stood still this long: the tracer is dead or stuck, and the program must
   not wait for it (ctl.gone: no record waits until a tracer that drains clears it). */
#define UPA_WAIT_NS 10000000ull
#define UPA_GONE_NS 1000000000ull

/*
 * A ring of records.  Ring 0 is shared: any thread reserves in it with a locked
 * compare-and-swap on head.  Ring k + 1 is the thread's in slot k of ctl->rt_owner (the
 * slot that names its tables of returns and aggregations), written by that thread
 * alone: a plain cmpxchg, which a signal handler's hit on the same thread cannot split,
 * reserves in it.  One consumer (the tracer) moves each tail.
 */
struct upa_ring {
	uint64_t base;	/* its address in the target */
	uint32_t order;	/* 1 << order bytes */
	uint32_t pad0;
	uint64_t lost;	/* records dropped because it was full */
	uint32_t wseq;	  /* UPA_F_BLOCK: bumped (and futex-woken) by the tracer for waiters */
	uint32_t waiters; /* threads waiting for room in it */
	uint64_t pad1[4];
	uint64_t head;	/* producers reserve here, bytes ever reserved */
	uint64_t pad2[7];
	uint64_t tail;	/* the tracer has consumed up to here */
	uint64_t pad3[7];
};

#define UPA_RT_OWNERS_ 16 /* UPA_RT_OWNERS, defined below */
#define UPA_RINGS (1 + UPA_RT_OWNERS_) /* the shared one, and one a thread slot (UPA_RT_OWNERS) */

/*
 * What the thread in slot k of ctl->rt_owner knows of itself, for the aggregation keys
 * tid and comm (UPA_AGG_TID, UPA_AGG_COMM), written by that thread alone: its tid when
 * it cached comm (the kernel's word in its TLS block, ctl->tid_off: a new thread on a
 * dead one's TLS block has another), ctl->comm_gen then, and its comm as
 * prctl(PR_GET_NAME) gave it.  tid 0: nothing cached (written first when it is
 * refreshed, last when it is done, so that a signal handler's hit between the two
 * refreshes again rather than key by half a name).
 */
struct upa_thr {
	uint32_t tid;
	uint32_t gen;
	uint64_t comm[2]; /* TASK_COMM_LEN bytes, NUL-padded */
};

struct upa_ctl {
	uint64_t magic;
	uint32_t version;
	uint32_t flags;
	int32_t pid;	     /* the process, for reads of its own memory (process_vm_readv) */
	uint32_t pad0;
	uint64_t rtab;	     /* return probes: the table of hijacked returns */
	uint32_t rtab_order; /* 1 << rtab_order entries */
	uint32_t pad1;
	uint64_t ret_tramp;  /* where a hijacked function returns to: the agent's trampoline */
	/* UPA_F_RSEQ: where glibc's __rseq_offset and __rseq_size are (in ld.so), set by
	   the time main runs; while the size is 0, lsl */
	uint64_t rseq_offset_at, rseq_size_at;
	/* TSC ticks to ns: ns = ticks * ns_mult >> 32 ($duration) */
	uint64_t ns_mult;
	/* UPA_F_RTOWN: a table of hijacked returns per thread, written without a lock:
	   rt_owner holds UPA_RT_OWNERS %fs:0 words (0: free), rt_own their tables; a
	   return into table j goes to ret_tramp + UPA_RT_STUB * (j + 1) (+ UPA_RT_LEAN) */
	uint64_t rt_owner, rt_own;
	/* stacks: the directory of the unwind tables (struct upa_uw_dir, in the unwind
	   area, src/agent/unwind.c), 0 none; swapped whole when the maps change */
	uint64_t uw_dir;
	/* stacks: the threads' caches of rows by pc (struct upa_uw_cache, one a thread slot,
	   read-write beside the tables), 0 none */
	uint64_t uw_cache;
	/* stacks: pages of the stack of the thread in slot k found readable, read with
	   plain loads while the thread's rsp is in them (written by that thread alone, in
	   one store: UPA_STK) */
	uint64_t stk[UPA_RT_OWNERS_];
	/* UPA_F_BLOCK: the tracer's heartbeat, bumped at each of its drains; gone: a
	   waiter saw it stand still for UPA_GONE_NS, and no record waits until the
	   tracer, draining again, clears it */
	uint64_t alive;
	uint32_t gone;
	/* tid and comm keys: where each thread's tid is in its TLS block (glibc's struct
	   pthread tid, _thread_db_pthread_tid; the kernel writes it at clone and clears it
	   at exit), 0 unknown (a gettid a hit); comm_gen is bumped by the tracer whenever a
	   thread's comm may have changed (a prctl or pthread_setname_np returned), and a
	   thread whose cache is older asks the kernel again */
	uint32_t tid_off;
	uint32_t comm_gen;
	uint32_t pad2;
	struct upa_thr thr[UPA_RT_OWNERS_];
	_Alignas(64) struct upa_ring ring[UPA_RINGS]; /* a cache line for each head, tail */
};

/* A register frame: struct user_regs_struct's layout, word by word. */
enum upa_reg {
	UPA_R15, UPA_R14, UPA_R13, UPA_R12, UPA_RBP, UPA_RBX, UPA_R11, UPA_R10,
	UPA_R9, UPA_R8, UPA_RAX, UPA_RCX, UPA_RDX, UPA_RSI, UPA_RDI, UPA_ORIG_RAX,
	UPA_RIP, UPA_CS, UPA_EFLAGS, UPA_RSP, UPA_SS, UPA_FS_BASE, UPA_GS_BASE,
	UPA_DS, UPA_ES, UPA_FS, UPA_GS,
	UPA_NREGS
};

/* One value to capture: a base, then reads through it (each step reads len bytes at
   value + off into the value), then optionally a string or a block of bytes. */
#define UPA_STEPS 16

enum upa_base { UPA_BASE_REG, UPA_BASE_IMM };
enum upa_final { UPA_FINAL_NONE, UPA_FINAL_STRING, UPA_FINAL_BYTES, UPA_FINAL_STACK };

struct upa_fetch {
	uint8_t base;	   /* enum upa_base */
	uint8_t reg;	   /* UPA_BASE_REG: the frame word */
	uint8_t reg_size;  /* bytes of it (1, 2, 4, 8) */
	uint8_t reg_shift; /* 8 for ah..dh */
	uint8_t nsteps;
	uint8_t final;	   /* enum upa_final */
	uint8_t size;	   /* the value's type size (1..8): masking, for conditions */
	uint8_t is_signed;
	uint8_t bf_width, bf_offset; /* a bitfield (bf_width > 0) */
	uint8_t at_entry;  /* STACK: the probe is a function's first instruction */
	uint8_t pad;
	uint32_t final_len; /* STRING: at most this many bytes; BYTES: this many; STACK:
			       frames, the walk from the value (bp), every read logged */
	int64_t imm;
	int64_t final_off; /* the string or bytes are at value + final_off */
	struct {
		int64_t off;
		uint64_t len; /* 1..8 */
	} step[UPA_STEPS];
};

/* A condition on a fetched value: the record is written only if every one holds. */
enum upa_cmp { UPA_EQ, UPA_NE, UPA_LT, UPA_LE, UPA_GT, UPA_GE, UPA_AND };

#define UPA_COND_DURATION 0xffffffffu /* cond.fetch: a return's duration in ns */

struct upa_cond {
	uint32_t fetch; /* index into the probe's fetches, or UPA_COND_DURATION */
	uint32_t op;	/* enum upa_cmp */
	int64_t value;
};

/* desc.flags */
#define UPA_P_ENABLED 1u
#define UPA_P_RETURN 2u /* a return probe: the entry hijacks the return, the return records */
#define UPA_P_AGG 4u	/* aggregate into the tables of the struct upa_agg after the conds */
#define UPA_P_ENTRY_ARGS 16u /* a return probe: the entry's argument registers are kept,
				and at the return are frame words UPA_ENTRY_ARG.. */
#define UPA_ENTRY_ARG UPA_FS_BASE /* 6 words the return trampolines never restore */
#define UPA_P_AGG1 8u	/* ... and it is the common case: no condition, one key (the tid, the comm) from a
			   register or the duration (log2, buckets or raw), no val */

/*
 * A hijacked return: the stack slot that held the return address (the key; 0 free,
 * 1 a tombstone), the address, and the probe's descriptor.  Only the thread that owns
 * the slot inserts or takes its key, so in the shared table the compare-and-swap on
 * key is all the locking; in a thread's own table (claimed once by its fs base, while
 * every thread has a TLS block of its own) plain stores do: nothing else writes it,
 * and a signal handler's hits on that thread are over before it resumes.
 */
#define UPA_RT_FREE 0
#define UPA_RT_TOMB 1
#define UPA_RT_PROBES 64 /* entries tried before the table counts as full */
#define UPA_RT_OWNERS 16 /* threads with a table (and a ring) of their own */
#define UPA_RT_OWN_ORDER 10 /* 1024 entries each: deeper, the shared table */
/*
 * The return trampoline without popfq (lahf CPUs) is two rows of UPA_RT_OWNERS + 1
 * units of UPA_RT_STUB bytes, each a call site and the stub its call returns to:
 *
 *   lea 8(%rsp),%rsp; call *-16(%rsp)  |  stub: push $table; jmp to its row's code
 *
 * ctl->ret_tramp is the first stub: the shared table's; the thread in slot j has the
 * stub UPA_RT_STUB * (j + 1) on; the second row (UPA_RT_LEAN on) the same for returns
 * that only count their duration (UPA_P_AGG1 with a $duration key), which no register
 * frame serves.  A return probe's entry trampoline (up_patch_tramp_rec) goes on into
 * the function through its unit's call site: the call writes the stub's address as the
 * return address, and the CPU's return predictor expects it there (~10 ns a return
 * mispredicted otherwise).  Its stack at the jump: [slot] the return address, [slot - 8]
 * where the function goes on (the relocated instructions), [slot - 16] where the jump
 * goes: a call site, or the function straight on when nothing was hijacked.
 */
#define UPA_RT_STUB	16 /* bytes of each unit */
#define UPA_RT_CALL_LEN 9  /* the call site before each stub */
#define UPA_RT_LEAN	(UPA_RT_STUB * (UPA_RT_OWNERS + 1))
/* Is addr one of the return trampoline's stubs (ret_tramp the first)? */
#define UPA_RT_IS_STUB(addr, ret_tramp) ((uint64_t)(addr) - (uint64_t)(ret_tramp) < 2 * UPA_RT_LEAN)

struct upa_rt {
	uint64_t key;
	uint64_t orig;
	uint64_t desc;
	uint64_t tsc; /* at the entry: the return's duration */
	uint64_t args[6]; /* UPA_P_ENTRY_ARGS: rdi rsi rdx rcx r8 r9 at the entry */
};

/* The blob: the ctl's address (a word the tracer writes), the return trampoline at
   UPA_RET_OFF, the page toucher at UPA_TOUCH_OFF (its int3 UPA_TOUCH_LEN - 1 bytes
   on, then a jmp back to it: a thread whose trap a tracer's death took goes on into
   it again, for the safety net), the entry at UPA_ENTRY_OFF. */
#define UPA_RET_OFF 16
#define UPA_RET_LAHF_AT 8 /* a word: the offset of the return trampoline without popfq */
#define UPA_TOUCH_OFF 224
#define UPA_TOUCH_LEN 16
/* A word: the offset of upa_hijack(desc, slot), which a return probe's entry trampoline
   calls (lahf CPUs); it saves every register it uses.  With UPA_P_ENTRY_ARGS the
   trampoline pushed rdi rsi rdx rcx rax r8 r9 below the red zone: frame words
   UPA_R9..UPA_RDI of a frame at slot - UPA_HIJACK_FRAME. */
#define UPA_HIJACK_AT	 248
#define UPA_HIJACK_FRAME (128 + 7 * 8 + UPA_R9 * 8)
#define UPA_ENTRY_OFF 256
#define UPA_CODE_SIZE 32768 /* the blob's mapping: it must fit */

/*
 * Aggregation (UPA_P_AGG): a hit updates the entry of its key in a table, instead of
 * writing a record.  There are ntables tables: the first ntables - 1 are private, table
 * i the thread's in slot i of ctl->rt_owner (its %fs:0, claimed at its first hit, the
 * same slot as its table of returns; two live threads never share one, and a new
 * thread that inherits a dead one's TLS block inherits its tables too), updated with
 * plain read-modify-write instructions, which a signal
 * handler on the same thread cannot split; the last is shared by every other thread
 * (no TLS, or every private table taken) and updated with atomics.  An entry is
 * entry_words words:
 *
 *   [state][key: key_words][hits][val: nvals]
 *
 * state 0 is free, 1 claimed (its key and initial vals being written), else the key's
 * hash (agent/agg.h), published last.  A thread that finds a slot claimed moves on, so
 * a key may sit in two slots of one table: the reader merges.  A hit that finds no slot
 * within UPA_AGG_PROBES is counted in dropped.
 */
#define UPA_AGG_PROBES 32
#define UPA_AGG_OWNERS 16 /* private tables at most */
#define UPA_AGG_KEYS 3
#define UPA_AGG_VALS 6
#define UPA_AGG_KEY_WORDS 96 /* in all: three 256-byte strings, or a 32-frame stack */

/* TID: the thread's id (1 word); COMM: its comm (2 words, TASK_COMM_LEN bytes) */
enum upa_agg_src { UPA_AGG_FETCH, UPA_AGG_DURATION, UPA_AGG_STACK, UPA_AGG_TID, UPA_AGG_COMM };
enum upa_agg_xform { UPA_AGG_RAW, UPA_AGG_LOG2, UPA_AGG_BUCKETS };
enum upa_agg_op { UPA_AGG_SUM, UPA_AGG_MIN, UPA_AGG_MAX };

struct upa_agg_key {
	uint8_t src;   /* enum upa_agg_src */
	uint8_t xform; /* enum upa_agg_xform */
	uint8_t words; /* 1; a string's bytes / 8; a stack's frames */
	uint8_t pad;
	uint32_t fetch;
	uint64_t buckets;
};

struct upa_agg_val {
	uint8_t src; /* FETCH or DURATION */
	uint8_t op;  /* enum upa_agg_op */
	uint8_t is_signed;
	uint8_t pad;
	uint32_t fetch;
};

struct upa_agg {
	uint64_t tables;      /* their address in the target */
	uint32_t ntables;     /* private ones and the shared one: 1 to UPA_AGG_OWNERS + 1 */
	uint32_t order;	      /* 1 << order entries a table */
	uint32_t nkeys, nvals;
	uint32_t key_words, entry_words;
	uint32_t at_entry;    /* stacks: a function's first instruction ([rsp] is the caller) */
	uint32_t pad;
	uint64_t dropped;     /* hits that found no room */
	struct upa_agg_key key[UPA_AGG_KEYS];
	struct upa_agg_val val[UPA_AGG_VALS];
};

/* A probe's descriptor, in the heap; fetches, conditions and (UPA_P_AGG) a struct
   upa_agg follow it. */
struct upa_probe {
	uint64_t ctl;	/* the ctl's address in the target */
	uint32_t id;	/* the records' probe id */
	uint32_t flags; /* UPA_P_* */
	uint64_t vaddr; /* the probed address: the frame's rip */
	uint64_t regs;	/* bit i: frame word i goes into the record */
	uint32_t nfetch, ncond;
	uint32_t max_record; /* bytes reserved per record: the largest it can be */
	uint32_t pad;
	uint64_t filtered; /* hits a condition dropped */
	uint64_t lost;	   /* records of this probe dropped: the ring was full */
	/* struct upa_fetch fetch[nfetch]; struct upa_cond cond[ncond]; */
};

/*
 * A record: a header, the chosen frame words in order, then one memory entry per read
 * the fetches made.  Records are 8-byte aligned; slot is what was reserved (the next
 * record starts slot bytes on), len what was written.  The header is written last: its
 * first word turns nonzero when the record is complete.  A record reserves the most it
 * can take and gives back what it did not use when nothing was reserved after it.  A
 * pad fills the ring's end.
 */
#define UPA_REC_ALIGN 32u /* records start at multiples of it; slots are multiples */
#define UPA_REC_PAD 0xffffffffu /* hdr.id of a pad */
#define UPA_REC_SP 0x80000000u
#define UPA_REC_RET 0x40000000u /* a return: the frame's rip is where it returned to */
#define UPA_REC_CPU 0x0fffffffu

struct upa_rec {
	uint32_t slot; /* nonzero: complete */
	uint32_t id;
	uint32_t len;
	uint32_t cpu;	 /* | UPA_REC_SP: thread is the stack pointer */
	uint64_t thread; /* %fs:0 (UPA_F_FS0), or rsp: the tracer knows whose stack it is in */
	uint64_t tsc;
	/* uint64_t regs[popcount(desc.regs)]; struct upa_mem entries... */
};

/* A memory entry: what was read (len bytes follow, padded to 8), or that it faulted. */
#define UPA_MEM_FAULT 1u
#define UPA_MEM_STRING 2u /* a string, read until its NUL (included) or final_len */

struct upa_mem {
	uint64_t addr;
	uint32_t len;
	uint32_t flags;
};

#define UPA_ALIGN8(x) (((x) + 7u) & ~(uint64_t)7u)

/*
 * The unwind area (src/agent/unwind.c): a memfd of its own, mapped read-only in the
 * target, holding the unwind tables (sym/unwind.h struct up_unwind_table, each one
 * block copied as it is) of the files the process maps, and directories of them.  A
 * directory lists the process's executable file mappings sorted by start: the file
 * offset at start and its table's address (0: the file has none).  A pc in no entry is
 * in no file's code.  The tracer writes a new directory after the last and swaps
 * ctl->uw_dir; it never rewrites one a walk may be reading.
 */
/* ctl.stk's word: the range's end (a page) and its pages, so that a signal handler's
   walk on the same thread never leaves half a range */
#define UPA_STK(hi, pages) ((hi) >> 12 << 24 | (pages))
#define UPA_STK_HI(w) ((w) >> 24 << 12)
#define UPA_STK_LO(w) (UPA_STK_HI(w) - ((w) & 0xffffff) * 4096)

struct upa_uw_map {
	uint64_t start, end; /* [start, end) of the process */
	uint64_t offset;     /* the file offset at start */
	uint64_t table;	     /* the file's table in the area, 0 none */
};

struct upa_uw_dir {
	uint64_t n;
	uint64_t pad;
	struct upa_uw_map map[];
};

/*
 * A thread's cache of rows by pc (the pc looked up, its row and the lookup's result),
 * direct-mapped, for the directory dir (another: the entries are stale).  Written by
 * its thread alone; busy while a walk uses it, so that a signal handler's walk on the
 * same thread passes it by rather than tear an entry.
 */
#define UPA_UW_CACHE_N 256
struct upa_uw_cent {
	uint64_t pc;	 /* 0: free */
	uint32_t row[3]; /* a struct up_unwind_row */
	int32_t k;	 /* the lookup's: 1 a row, 0 code without one, -1 no code */
};

/*
 * The thread's last stack key walked, by its inputs: a walk is a function of the
 * directory, (pc, rsp, rbp, at_entry, max) and the words it read, so where those are
 * the same the frames are too.  A walk whose reads were all plain loads of the
 * thread's stack pages (and that met no return stub) is kept; the next with the same
 * inputs loads those words again, all at once rather than a frame after another, and
 * takes the frames when every one is unchanged.  n 0: none kept.  A thread has
 * UPA_UW_MEMOS of them, by (rsp, pc): a few hot call sites each keep theirs.  Where
 * stacks do not repeat so, keeping costs a store a word read: it is then kept only now
 * and then.
 */
#define UPA_UW_MEMOS 8
#define UPA_UW_MEMO_FRAMES 32
#define UPA_UW_MEMO_READS 64
struct upa_uw_memo {
	uint64_t dir, pc, sp, bp;
	uint32_t at_entry, max;
	uint32_t n, nrd; /* frames, words read */
	uint32_t miss;	 /* walks since one was taken from the memo: past 8, kept 1 in 16 */
	uint32_t pad;
	uint64_t out[UPA_UW_MEMO_FRAMES];
	struct {
		uint64_t addr, v;
	} rd[UPA_UW_MEMO_READS];
};

struct upa_uw_cache {
	uint64_t dir;
	uint32_t busy;
	uint32_t pad;
	struct upa_uw_cent e[UPA_UW_CACHE_N];
	struct upa_uw_memo memo[UPA_UW_MEMOS];
};

#define UPA_UW_CACHES_SIZE (((sizeof(struct upa_uw_cache) * UPA_RT_OWNERS_) + 4095) & ~4095ul)

_Static_assert(UPA_RINGS == 1 + UPA_RT_OWNERS, "a ring a thread slot");
_Static_assert(UPA_RT_OWNERS_ == UPA_RT_OWNERS, "one count of thread slots");
_Static_assert(sizeof(struct upa_ctl) <= 4096, "the ctl is one page");

#endif
