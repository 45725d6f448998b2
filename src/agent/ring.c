// SPDX-License-Identifier: MIT
/*
 * The shared region of the fast path, from the tracer's side.  The target makes the
 * memfd itself (remote memfd_create), so nothing of the tracer's is ever opened by the
 * target; the tracer reaches the file through /proc/PID/fd with the ptrace rights it
 * already has, maps it, and the target's descriptor is closed again: the program sees
 * two mappings and no new file descriptor.
 *
 * The rings (abi.h struct upa_ring): the shared one is multi-producer (the agent
 * reserves with a compare-and-swap on head), a thread's own has one producer; each has
 * one consumer (here).  A record is complete when its first word turns nonzero; the
 * drain zeroes what it consumed before it moves the tail, so a producer always finds
 * zeroes ahead of it.  The live drain merges the rings by time; the raw one copies each
 * ring's records out in its order (a thread's records stay in order, and each carries
 * its time).
 *
 * A ring's pages are made present before its writer needs them (up_agent_rings_ready):
 * the next RING_POOL thread slots' rings whenever a recording probe is placed (the
 * process is stopped for it anyway), so that threads born later, up to that many, find
 * theirs present and wait for nothing; past them, a new thread's own as it is made, once
 * the slots before it are claimed (1 MiB of it: it waits while its process writes them,
 * 4 MiB took ~65 ms under a load of 7 here).  8 MiB of a ring at most; the memory is
 * that of the rings of threads that record plus RING_POOL (a thread writes the shared
 * one past UPA_RT_OWNERS threads, made present once they are all claimed, or where
 * threads have no TLS: it comes in as written).  A page
 * first touched by the writer costs it a fault, and on a shadow-paged guest a fill of
 * the hypervisor's tables (10-40 us a page under load here, 85-116 ns a record of the
 * first lap against 15-20 ns); the kernel's populating (MAP_POPULATE,
 * MADV_POPULATE_WRITE) leaves the second.  Threads made in a burst before the first of
 * them records still fault their rings in.  Paging a ring in from here once it is first
 * seen written was measured worse: the drain stops for the tens of milliseconds it
 * takes while the writer fills the ring (of 4,000,000 raw records 0.9-2.0 million lost,
 * against 0-0.5 million).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <uprobe/uprobe.h>

#include "agent/patch.h"
#include "agent/rec.h"
#include "agent/ring.h"
#include "xol.h"

extern const uint8_t up_agent_blob[];
extern const size_t up_agent_blob_size;

#define PAGE 4096u
#define CTL_SIZE PAGE
#define CODE_SIZE UPA_CODE_SIZE
#define HEAP_SIZE (8u << 20)
#define RTAB_ORDER 14 /* 16384 hijacked returns at a time */
#define RTAB_SIZE ((size_t)sizeof(struct upa_rt) << RTAB_ORDER)
/* the threads' own return tables: the owners' page, then the tables */
#define RT_OWN_SIZE (PAGE + ((size_t)sizeof(struct upa_rt) * UPA_RT_OWNERS << UPA_RT_OWN_ORDER))
#define DEFAULT_RING (4u << 20)
/* a ring made present before its writer needs it: no more than this of it (the default
   ring whole; of --format raw's 128 MiB, the first 87,000 six-argument records), and at
   a new thread, which waits meanwhile, no more than PREFAULT_NEW (~11,000 records) */
#define PREFAULT_MAX (8u << 20)
#define PREFAULT_NEW (1u << 20)
/* rings made present ahead of the threads that record, when a recording probe is placed
   (the process is stopped for it anyway): the next RING_POOL slots' rings, so that that
   many threads made later record at full speed from their first record, none of them
   waiting at its birth (issue 30 item 3) */
#define RING_POOL 2
/* Far from the program's heap, mmap area and stacks, so that the program's own
   mappings land where they would without us (32 TiB: nothing is there on x86-64). */
#define AGENT_NEAR 0x200000000000ull
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#define REC_ALIGN UPA_REC_ALIGN

#define NR_CLOSE 3
#define NR_MMAP 9
#define NR_MUNMAP 11
#define NR_MADVISE 28
#define NR_FTRUNCATE 77
#define NR_MEMFD_CREATE 319

struct key {
	uint64_t key;
	pid_t tid;
};

#define PAST_KEYS 128

/*
 * What the tracer wrote into the region for a probe, kept here: the region is the
 * target's to write, so nothing of its layout is ever read back from it (design.md,
 * "The trust boundary").
 */
struct agent_probe {
	size_t desc_off;     /* the descriptor, in the region */
	uint32_t max_record; /* the most a record of it takes; 0: it aggregates */
	uint8_t nregs;	     /* frame words its records carry */
	bool agg;
	/* aggregating: its struct upa_agg (for dropped), the tables' place and geometry */
	size_t agg_off, tab_off;
	uint32_t ntables, order, key_words, entry_words, nvals;
};

/* A ring as the tracer knows it: where it has consumed to, and whether it gave up. */
struct agent_ring {
	uint64_t tail;
	uint64_t taken; /* bytes consumed since up_agent_fill last asked */
	bool dead;	/* found corrupt: never read again */
};

struct up_agent {
	uint8_t *map; /* the tracer's mapping of the whole region */
	size_t size;
	struct upa_ctl *ctl;
	uint64_t data_addr, code_addr; /* the target's mappings */
	size_t rtab_off, heap_off, heap_used, ring_off, ring_size, code_off;
	size_t heap_touched; /* of heap_used, the bytes made present (up_agent_heap_ready) */
	bool rt_wanted, rt_touched; /* a return probe placed; its tables made present */
	bool owner_touched; /* the thread slots' page (rt_owner: rings, tables, returns) */
	bool ctl_touched;   /* the ctl page, by the process (up_agent_heap_ready) */
	uint32_t tid_off;   /* what ctl->tid_off was set to: the tracer's, never read back */
	struct agent_probe *probes; /* by record id */
	uint32_t max_record;	    /* the largest of any probe's */
	struct agent_ring rings[UPA_RINGS];
	uint8_t *rec_copy; /* a record, copied out of the ring before it is read */
	uint8_t *raw_buf;  /* raw spans, copied out likewise */
	size_t raw_cap;
	void (*on_corrupt)(void *arg, uint32_t id, const char *why);
	void *corrupt_arg;
	bool corrupt_told; /* the one message is out */
	struct stack { uint64_t lo, hi; pid_t tid; } *stacks;
	unsigned nstacks, capstacks;
	uint32_t nids, capids;
	struct key *keys; /* open addressing, capkeys a power of two */
	unsigned nkeys, capkeys;
	/* keys a new thread took over (its TLS block or its stack a dead one's, glibc
	   reusing them): the dead one's records, in each ring before where its head was
	   at the new one's birth (until[k]), still name it -- by place, not by time: the
	   TSC of this guest's CPUs need not agree (tsc=unstable), and a record stamped on
	   one was seen to postdate a birth stamped on another.  Forgotten once a drain
	   found every ring empty.  A ring of them, the oldest overwritten.  hi: a stack's
	   end (0: a TLS block's key) */
	struct past_key {
		uint64_t key, hi, until[UPA_RINGS];
		pid_t tid;
	} past[PAST_KEYS];
	unsigned npast, past_next;
	uint64_t tsc0, mono0;
	uint64_t ret_off; /* the return trampoline's offset in the blob */
	uint32_t flags;	  /* ctl->flags as the tracer last set them */
	uint64_t rseq_offset_at, rseq_size_at;
	bool rseq_bad; /* a thread was found without glibc's rseq area: lsl for good */
	bool recording; /* a recording probe was placed: rings are made present */
	uint32_t ready; /* bit k: ring k's pages are present in both mappings */
	uint64_t beat;	/* UPA_F_BLOCK: the heartbeat last written to ctl.alive */
};

uint64_t up_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* Nanoseconds per TSC tick, measured once over 2 ms. */
static double ns_per_tick(void)
{
	static double r;

	if (r == 0) {
		uint64_t m0 = up_mono_ns(), t0 = rdtsc(), m1, t1;

		do
			m1 = up_mono_ns();
		while (m1 - m0 < 2000000);
		t1 = rdtsc();
		r = t1 > t0 ? (double)(m1 - m0) / (double)(t1 - t0) : 1.0;
	}
	return r;
}


/* An agent's layout for rings of ring bytes; nothing mapped yet. */
static struct up_agent *agent_alloc(size_t ring)
{
	struct up_agent *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->rtab_off = CTL_SIZE;
	a->heap_off = CTL_SIZE + RTAB_SIZE + RT_OWN_SIZE;
	a->ring_off = a->heap_off + HEAP_SIZE;
	a->ring_size = ring;
	a->code_off = a->ring_off + (size_t)UPA_RINGS * ring;
	a->size = a->code_off + CODE_SIZE;
	return a;
}

/* The ctl and the code, written into the fresh region (map, data_addr and code_addr
   set). */
static void ctl_init(struct up_agent *a, pid_t pid)
{
	a->ctl = (struct upa_ctl *)a->map;
	a->ctl->magic = UPA_MAGIC;
	a->ctl->version = UPA_VERSION;
	a->flags = UPA_F_FS0;
	a->ctl->pid = pid;
	for (unsigned k = 0; k < UPA_RINGS; k++) {
		a->ctl->ring[k].order = (uint32_t)__builtin_ctzll(a->ring_size);
		a->ctl->ring[k].base = a->data_addr + a->ring_off + k * a->ring_size;
	}
	a->ctl->rtab = a->data_addr + a->rtab_off;
	a->ctl->rtab_order = RTAB_ORDER;
	a->ctl->rt_owner = a->ctl->rtab + RTAB_SIZE;
	a->ctl->rt_own = a->ctl->rt_owner + PAGE;
	if (up_patch_have_lahf()) /* the return trampoline without popfq */
		memcpy(&a->ret_off, up_agent_blob + UPA_RET_LAHF_AT, sizeof(a->ret_off));
	if (a->ret_off && a->ret_off < up_agent_blob_size)
		a->flags |= UPA_F_RTOWN; /* its stubs name the threads' own tables */
	else
		a->ret_off = UPA_RET_OFF;
	a->ctl->flags = a->flags;
	a->ctl->ret_tramp = a->code_addr + a->ret_off;
	a->ctl->ns_mult = (uint64_t)(ns_per_tick() * 4294967296.0);
	memcpy(a->map + a->code_off, up_agent_blob, up_agent_blob_size);
	memcpy(a->map + a->code_off, &a->data_addr, 8); /* the blob's first word: the ctl */
	a->tsc0 = rdtsc();
	a->mono0 = up_mono_ns();
}

int up_agent_new_local(size_t ring_bytes, struct up_agent **out)
{
	size_t ring = PAGE;
	struct up_agent *a;

	while (ring < ring_bytes)
		ring <<= 1;
	a = agent_alloc(ring);
	if (!a)
		return -ENOMEM;
	a->map = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (a->map == MAP_FAILED) {
		free(a);
		return -ENOMEM;
	}
	a->data_addr = (uint64_t)(uintptr_t)a->map;
	a->code_addr = a->data_addr + a->code_off;
	ctl_init(a, getpid());
	*out = a;
	return 0;
}

void *up_agent_region(const struct up_agent *a)
{
	return a->map;
}

/* Is fd the region's memfd, as the process made it: a memfd of ours by its name, of the
   region's size, linked nowhere? */
static bool is_our_memfd(int fd, size_t size)
{
	char p[32], name[64];
	struct stat st;
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, name, sizeof(name) - 1);
	if (n < 0 || fstat(fd, &st) < 0)
		return false;
	name[n] = 0;
	return S_ISREG(st.st_mode) && st.st_nlink == 0 && (uint64_t)st.st_size == size &&
	       !strncmp(name, "/memfd:uprobe-agent", 19);
}

/* Can this tracer open a traced process's mapping through /proc/PID/map_files (the
   kernel asks for CAP_SYS_ADMIN)?  Learned at the first agent that tries. */
static bool map_files_usable = true;

int up_agent_new(struct up_task *t, uint64_t scratch, size_t ring_bytes, struct up_agent **out,
		 char *why, size_t whylen)
{
	static const char name[] = "uprobe-agent";
	struct up_proc *p = up_task_proc(t);
	struct up_agent *a;
	size_t ring = PAGE, data_len;
	int64_t fd = -1, r;
	uint64_t at = 0, flags = MAP_SHARED;
	char path[64];
	int rc, lfd;

	if (!ring_bytes)
		ring_bytes = DEFAULT_RING;
	while (ring < ring_bytes)
		ring <<= 1;
	a = agent_alloc(ring);
	if (!a)
		return -ENOMEM;
	data_len = a->code_off;
	if (up_agent_blob_size > CODE_SIZE) {
		snprintf(why, whylen, "the agent is larger than its mapping");
		rc = -E2BIG;
		goto fail;
	}
	if (!up_xol_find_gap(p, AGENT_NEAR, a->size, &at))
		flags |= MAP_FIXED_NOREPLACE;
	/* the memfd made, sized, mapped twice, kept from children and closed in one remote
	   run (one stop of the process, not seven: up_task_syscalls), its code before the
	   name; the tracer opens the mapping (/proc/PID/map_files, which needs
	   CAP_SYS_ADMIN).  Where it cannot, the descriptor stays open for the tracer's open
	   of /proc/PID/fd/N and is closed by a remote call of its own (a second stop). */
again:
	{
		uint64_t name_at = scratch + UP_TASK_SYSCALLS_CODE;
		struct up_task_rsys c[7] = {
			{ .nr = NR_MEMFD_CREATE, .args = { name_at, MFD_CLOEXEC } },
			{ .nr = NR_FTRUNCATE, .args = { 0, a->size }, .from = { 1 } },
			{ .nr = NR_MMAP,
			  .args = { at, data_len, PROT_READ | PROT_WRITE, flags, 0, 0 },
			  .from = { [4] = 1 } },
			{ .nr = NR_MMAP,
			  .args = { at ? at + data_len : 0, CODE_SIZE, PROT_READ | PROT_EXEC,
				    flags, 0, a->code_off },
			  .from = { [4] = 1 } },
			{ .nr = NR_MADVISE, .args = { 0, data_len, MADV_DONTFORK }, .from = { 3 } },
			{ .nr = NR_MADVISE, .args = { 0, CODE_SIZE, MADV_DONTFORK }, .from = { 4 } },
			{ .nr = NR_CLOSE, .from = { 1 } },
		};
		unsigned n = map_files_usable ? 7 : 6;
		bool bad[7];

		rc = up_proc_write_text(p, name_at, name, sizeof(name));
		if (!rc)
			rc = up_task_syscalls(t, scratch, c, n);
		for (unsigned k = 0; k < n; k++)
			bad[k] = (uint64_t)c[k].ret >= (uint64_t)-4095;
		if (!rc && !bad[0])
			fd = c[0].ret;
		if (!rc && n == 7 && !bad[6])
			fd = -1; /* closed */
		if (!rc && !bad[2])
			a->data_addr = (uint64_t)c[2].ret;
		if (!rc && !bad[3])
			a->code_addr = (uint64_t)c[3].ret;
		if (!rc && bad[0])
			rc = (int)c[0].ret;
		if (rc) {
			snprintf(why, whylen, "memfd_create in the process failed (%s)",
				 strerror(-rc));
			goto fail;
		}
		for (unsigned k = 1; k < 6 && !rc; k++)
			if (bad[k])
				rc = (int)c[k].ret;
	}
	if (rc) {
		snprintf(why, whylen, "cannot map the shared ring in the process (%s)",
			 strerror(-rc));
		goto unmap;
	}
	if (fd < 0) {
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
			 (int)up_proc_pid(p), a->data_addr, a->data_addr + data_len);
		lfd = open(path, O_RDWR | O_CLOEXEC);
		if (lfd < 0 && (errno == EPERM || errno == EACCES)) {
			/* not ours to open: the mappings go, and again the other way */
			map_files_usable = false;
			up_task_rsys(t, NR_MUNMAP, a->data_addr, data_len, 0, 0, 0, 0, &r);
			up_task_rsys(t, NR_MUNMAP, a->code_addr, CODE_SIZE, 0, 0, 0, 0, &r);
			a->data_addr = a->code_addr = 0;
			goto again;
		}
	} else {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)up_proc_pid(p), (int)fd);
		lfd = open(path, O_RDWR | O_CLOEXEC);
	}
	if (lfd >= 0 && !is_our_memfd(lfd, a->size)) {
		/* the addresses or the descriptor came back from the process's registers:
		   what they name is the process's to choose, and not ours to map */
		close(lfd);
		lfd = -1;
		errno = EPERM;
	}
	if (lfd < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot open %s (%s)", path, strerror(errno));
		goto unmap;
	}
	a->map = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
	close(lfd);
	if (a->map == MAP_FAILED) {
		rc = -errno;
		a->map = NULL;
		snprintf(why, whylen, "cannot map the shared ring (%s)", strerror(errno));
		goto unmap;
	}
	if (fd >= 0) {
		rc = up_task_rsys(t, NR_CLOSE, (uint64_t)fd, 0, 0, 0, 0, 0, &r);
		if (rc == -ESRCH) {
			snprintf(why, whylen, "the process is gone");
			munmap(a->map, a->size);
			free(a);
			return rc;
		}
	}
	ctl_init(a, up_proc_pid(p));
	/* nothing touched from the process yet: the ctl page, the return tables and the
	   heap as they come into use (up_agent_heap_ready, for what runs the agent's
	   code), so that a process that lives a millisecond (an exec'd /bin/true) is made
	   to fault in nothing it never uses, nor to stop for it (a counter's page is
	   faulted in by its first hit) */
	a->tsc0 = rdtsc();
	a->mono0 = up_mono_ns();
	*out = a;
	return 0;
unmap:
	if (a->data_addr && a->data_addr < (uint64_t)-4096)
		up_task_rsys(t, NR_MUNMAP, a->data_addr, data_len, 0, 0, 0, 0, &r);
	if (a->code_addr && a->code_addr < (uint64_t)-4096)
		up_task_rsys(t, NR_MUNMAP, a->code_addr, CODE_SIZE, 0, 0, 0, 0, &r);
	if (fd >= 0)
		up_task_rsys(t, NR_CLOSE, (uint64_t)fd, 0, 0, 0, 0, 0, &r);
fail:
	free(a);
	return rc;
}

static void ring_wake(struct up_agent *a, unsigned k, bool always);
static void flags_set(struct up_agent *a, uint32_t flags);

void up_agent_free(struct up_agent *a)
{
	if (!a)
		return;
	if (a->map) {
		/* nobody waits for a tracer that is going: the threads waiting for room
		   drop their records and no record waits again */
		flags_set(a, a->flags & ~UPA_F_BLOCK);
		for (unsigned k = 0; k < UPA_RINGS; k++)
			ring_wake(a, k, true);
		/* the ring's pages go back (the memfd's hole is the target's too): a process
		   that lives on keeps the mapping, but not 4 to 128 MiB of records nobody
		   reads; a thread still writing one gets zero pages, never a fault */
		madvise(a->map + a->ring_off, (size_t)UPA_RINGS * a->ring_size, MADV_REMOVE);
		munmap(a->map, a->size);
	}
	free(a->probes);
	free(a->rec_copy);
	free(a->raw_buf);
	free(a->keys);
	free(a->stacks);
	free(a);
}

/* Ring k's first max bytes present in the process (written there by t, from user mode)
   and in the tracer's mapping, once.  The writes are locked or-s of 0: a thread that
   claims the ring's slot meanwhile loses nothing. */
static int ring_ready(struct up_agent *a, struct up_task *t, unsigned k, size_t max)
{
	uint64_t lo = a->data_addr + a->ring_off + (uint64_t)k * a->ring_size; /* ours */
	uint8_t *m = a->map + a->ring_off + (size_t)k * a->ring_size;
	size_t len = a->ring_size < max ? a->ring_size : max;
	int rc;

	if (a->ready & 1u << k)
		return 0;
	rc = up_task_call(t, a->code_addr + UPA_TOUCH_OFF,
			  a->code_addr + UPA_TOUCH_OFF + UPA_TOUCH_LEN, lo, len / PAGE);
	if (rc)
		return rc;
	for (size_t i = 0; i < len; i += PAGE)
		__atomic_fetch_or(m + i, 0, __ATOMIC_RELAXED);
	a->ready |= 1u << k;
	return 0;
}

int up_agent_rings_ready(struct up_agent *a, struct up_task *t, bool recording)
{
	/* where the tracer put the owners' words (its layout, never read back from the
	   region: the process may have rewritten ctl->rt_owner) */
	const uint64_t *owner = (const uint64_t *)(a->map + a->rtab_off + RTAB_SIZE);
	unsigned claimed = 0, want;
	int rc = 0;

	if (recording)
		a->recording = true;
	if (!a->recording)
		return 0;
	while (claimed < UPA_RT_OWNERS && __atomic_load_n(&owner[claimed], __ATOMIC_RELAXED))
		claimed++;
	/* the threads past the last slot write the shared ring (and so do all of them while
	   some thread has no TLS block, which a process caught at its exec has not yet: not
	   known here, that ring comes in as written) */
	if (claimed == UPA_RT_OWNERS)
		return ring_ready(a, t, 0, recording ? PREFAULT_MAX : PREFAULT_NEW);
	/* the slots the next threads to record claim: at a placement the pool's, at a new
	   thread its own if the pool ran out (it waits meanwhile) */
	want = claimed + (recording ? RING_POOL : 1);
	if (want > UPA_RT_OWNERS)
		want = UPA_RT_OWNERS;
	for (unsigned s = 0; s < want && !rc; s++)
		rc = ring_ready(a, t, s + 1, recording ? PREFAULT_MAX : PREFAULT_NEW);
	return rc;
}

void up_agent_maps(const struct up_agent *a, uint64_t start[2], uint64_t len[2])
{
	start[0] = a->data_addr;
	len[0] = a->code_off;
	start[1] = a->code_addr;
	len[1] = CODE_SIZE;
}

void up_agent_set_unwind(struct up_agent *a, uint64_t dir, uint64_t caches)
{
	__atomic_store_n(&a->ctl->uw_cache, caches, __ATOMIC_RELAXED);
	__atomic_store_n(&a->ctl->uw_dir, dir, __ATOMIC_RELEASE);
}

uint64_t up_agent_entry(const struct up_agent *a)
{
	return a->code_addr + UPA_ENTRY_OFF;
}

uint64_t up_agent_ret_tramp(const struct up_agent *a)
{
	return a->code_addr + a->ret_off;
}

static void for_each_return_in(struct upa_rt *t, size_t n,
			       void (*fn)(void *arg, uint64_t slot, uint64_t orig), void *arg)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t k = __atomic_load_n(&t[i].key, __ATOMIC_ACQUIRE);

		if (k == UPA_RT_FREE || k == UPA_RT_TOMB)
			continue;
		fn(arg, k, t[i].orig);
	}
}

void up_agent_for_each_return(struct up_agent *a,
			      void (*fn)(void *arg, uint64_t slot, uint64_t orig), void *arg)
{
	/* the threads' own tables (after the owners' page), then the shared one */
	for_each_return_in((struct upa_rt *)(a->map + a->rtab_off + RTAB_SIZE + PAGE),
			   (size_t)UPA_RT_OWNERS << UPA_RT_OWN_ORDER, fn, arg);
	for_each_return_in((struct upa_rt *)(a->map + a->rtab_off), (size_t)1 << RTAB_ORDER, fn,
			   arg);
}

/* ---- threads --------------------------------------------------------------------------- */

static struct key *key_slot(struct up_agent *a, uint64_t key)
{
	unsigned m = a->capkeys - 1, i = (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 40) & m;

	while (a->keys[i].tid && a->keys[i].key != key)
		i = (i + 1) & m;
	return &a->keys[i];
}

/* key (a stack: [key, hi)) was tid's until now: its records keep its name */
static void past_owner(struct up_agent *a, uint64_t key, uint64_t hi, pid_t tid)
{
	struct past_key *p = &a->past[a->past_next++ % PAST_KEYS];

	p->key = key;
	p->hi = hi;
	p->tid = tid;
	for (unsigned k = 0; k < UPA_RINGS; k++)
		p->until[k] = __atomic_load_n(&a->ctl->ring[k].head, __ATOMIC_ACQUIRE);
	if (a->npast < PAST_KEYS)
		a->npast++;
}

void up_agent_thread(struct up_agent *a, uint64_t key, pid_t tid)
{
	struct key *k;

	if (!key)
		return;
	if ((a->nkeys + 1) * 2 > a->capkeys) {
		struct key *old = a->keys;
		unsigned n = a->capkeys;
		struct key *nk = calloc(n ? n * 2 : 64, sizeof(*nk));

		if (!nk)
			return;
		a->keys = nk;
		a->capkeys = n ? n * 2 : 64;
		a->nkeys = 0;
		for (unsigned i = 0; i < n; i++) {
			if (old[i].tid) {
				*key_slot(a, old[i].key) = old[i];
				a->nkeys++;
			}
		}
		free(old);
	}
	k = key_slot(a, key);
	if (!k->tid) {
		a->nkeys++;
	} else if (k->tid != tid) {
		past_owner(a, key, 0, k->tid); /* a dead thread's block, taken over */
	}
	k->key = key;
	k->tid = tid;
}

void up_agent_stack(struct up_agent *a, uint64_t lo, uint64_t hi, pid_t tid)
{
	for (unsigned i = 0; i < a->nstacks; i++) {
		if (a->stacks[i].lo == lo && a->stacks[i].hi == hi) {
			/* a stack reused by a new thread */
			if (a->stacks[i].tid != tid)
				past_owner(a, lo, hi, a->stacks[i].tid);
			a->stacks[i].tid = tid;
			return;
		}
	}
	if (a->nstacks == a->capstacks) {
		unsigned n = a->capstacks ? a->capstacks * 2 : 16;
		struct stack *s = realloc(a->stacks, n * sizeof(*s));

		if (!s)
			return;
		a->stacks = s;
		a->capstacks = n;
	}
	a->stacks[a->nstacks].lo = lo;
	a->stacks[a->nstacks].hi = hi;
	a->stacks[a->nstacks++].tid = tid;
}

bool up_agent_has_code(const struct up_agent *a, uint64_t addr)
{
	return a->code_addr && addr >= a->code_addr && addr - a->code_addr < CODE_SIZE;
}

/* The flags as the tracer keeps them, written whole: the agent reads them, the
   tracer never reads them back. */
static void flags_set(struct up_agent *a, uint32_t flags)
{
	a->flags = flags;
	__atomic_store_n(&a->ctl->flags, flags, __ATOMIC_RELEASE);
}

void up_agent_set_block(struct up_agent *a, bool on)
{
	if (on)
		__atomic_store_n(&a->ctl->gone, 0, __ATOMIC_RELAXED);
	flags_set(a, on ? a->flags | UPA_F_BLOCK : a->flags & ~UPA_F_BLOCK);
	if (!on) /* the waiters drop their records */
		for (unsigned k = 0; k < UPA_RINGS; k++)
			ring_wake(a, k, true);
}

void up_agent_tid_off(struct up_agent *a, uint32_t off)
{
	a->tid_off = off;
	__atomic_store_n(&a->ctl->tid_off, off, __ATOMIC_RELEASE);
}

uint32_t up_agent_tid_off_get(const struct up_agent *a)
{
	return a->tid_off;
}

void up_agent_quiet(struct up_agent *a)
{
	flags_set(a, a->flags | UPA_F_QUIET);
	for (unsigned k = 0; k < UPA_RINGS; k++) /* a waiter for room looks again */
		ring_wake(a, k, true);
}

void up_agent_heartbeat(struct up_agent *a)
{
	if (!(a->flags & UPA_F_BLOCK))
		return;
	__atomic_store_n(&a->ctl->alive, ++a->beat, __ATOMIC_RELAXED);
	/* words the target writes, read only to choose what to store: threads that gave
	   up on a stuck tracer wait again; a ring with waiters gets its tail again (the
	   tracer's own: a tail the process rewrote must not hold them), and a wake */
	if (__atomic_load_n(&a->ctl->gone, __ATOMIC_RELAXED))
		__atomic_store_n(&a->ctl->gone, 0, __ATOMIC_RELAXED);
	for (unsigned k = 0; k < UPA_RINGS; k++)
		if (!a->rings[k].dead &&
		    __atomic_load_n(&a->ctl->ring[k].waiters, __ATOMIC_RELAXED)) {
			__atomic_store_n(&a->ctl->ring[k].tail, a->rings[k].tail, __ATOMIC_RELEASE);
			ring_wake(a, k, true);
		}
}

void up_agent_no_fs0(struct up_agent *a)
{
	flags_set(a, a->flags & ~(UPA_F_FS0 | UPA_F_RSEQ));
}

/* glibc's rseq area known, and no thread found without one */
static bool rseq_usable(const struct up_agent *a)
{
	return a->rseq_offset_at && !a->rseq_bad;
}

bool up_agent_fs0(struct up_agent *a)
{
	bool was = a->flags & UPA_F_FS0;

	flags_set(a, a->flags | UPA_F_FS0 | (rseq_usable(a) ? UPA_F_RSEQ : 0));
	return !was;
}

void up_agent_rseq(struct up_agent *a, uint64_t offset_at, uint64_t size_at)
{
	a->rseq_offset_at = offset_at;
	a->rseq_size_at = size_at;
	a->ctl->rseq_offset_at = offset_at;
	a->ctl->rseq_size_at = size_at;
	if (a->flags & UPA_F_FS0)
		up_agent_fs0(a);
}

bool up_agent_rseq_at(const struct up_agent *a, uint64_t *offset_at, uint64_t *size_at)
{
	*offset_at = a->rseq_offset_at;
	*size_at = a->rseq_size_at;
	return rseq_usable(a);
}

void up_agent_no_rseq(struct up_agent *a)
{
	a->rseq_bad = true;
	flags_set(a, a->flags & ~UPA_F_RSEQ);
}

/* The thread whose record, at position pos of ring r, has key: a past owner of the
   key if the record is before where the ring's head was when the key was taken over. */
static pid_t tid_of(struct up_agent *a, uint64_t key, bool sp, unsigned r, uint64_t pos)
{
	const struct past_key *best = NULL;
	struct key *k;

	for (unsigned i = 0; r < UPA_RINGS && i < a->npast; i++) {
		const struct past_key *p = &a->past[i];
		bool mine = sp ? p->hi && key >= p->key && key < p->hi : !p->hi && p->key == key;

		if (mine && pos < p->until[r] && (!best || p->until[r] < best->until[r]))
			best = p;
	}
	if (best)
		return best->tid;
	if (sp) {
		for (unsigned i = a->nstacks; i-- > 0;)
			if (key >= a->stacks[i].lo && key < a->stacks[i].hi)
				return a->stacks[i].tid;
		return 0;
	}
	if (!a->capkeys)
		return 0;
	k = key_slot(a, key);
	return k->tid;
}

pid_t up_agent_thread_tid(struct up_agent *a, uint64_t key)
{
	return key ? tid_of(a, key, false, UPA_RINGS, 0) : 0;
}

/* ---- probes ---------------------------------------------------------------------------- */

uint32_t up_agent_record_size(uint64_t regs, const struct upa_fetch *f, unsigned nfetch)
{
	uint64_t n = sizeof(struct upa_rec) + 8u * (unsigned)__builtin_popcountll(regs);

	for (unsigned i = 0; i < nfetch; i++) {
		n += (sizeof(struct upa_mem) + 8) * f[i].nsteps;
		if (f[i].final == UPA_FINAL_STRING)
			n += 2 * sizeof(struct upa_mem) + UPA_ALIGN8(f[i].final_len);
		else if (f[i].final == UPA_FINAL_BYTES)
			n += sizeof(struct upa_mem) + UPA_ALIGN8(f[i].final_len);
		else if (f[i].final == UPA_FINAL_STACK) /* [sp], then a frame's reads: 16
							   bytes, or three words (CFI) */
			n += sizeof(struct upa_mem) + 8 +
			     (uint64_t)f[i].final_len * 3 * (sizeof(struct upa_mem) + 8);
	}
	n = (n + REC_ALIGN - 1) & ~(uint64_t)(REC_ALIGN - 1);
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* an aggregation's private table i is the thread's in slot i of the return tables' owners */
_Static_assert(UPA_AGG_OWNERS <= UPA_RT_OWNERS, "a private table a thread slot");

/* Private tables for up to UPA_AGG_OWNERS threads, as many as 512 KiB holds (so that
   a few dozen histograms fit the heap), and the shared one. */
static unsigned agg_ntables(size_t table_bytes)
{
	size_t n = table_bytes ? (512u << 10) / table_bytes : 0;

	return (unsigned)(n > UPA_AGG_OWNERS ? UPA_AGG_OWNERS : n) + 1;
}

int up_agent_probe_add(struct up_agent *a, struct upa_probe *d, const struct upa_fetch *f,
		       const struct upa_cond *c, const struct upa_agg *agg, uint64_t *addr,
		       uint32_t *id)
{
	size_t len = sizeof(*d) + d->nfetch * sizeof(*f) + d->ncond * sizeof(*c);
	size_t tables = 0, tab_off = 0;
	struct agent_probe *pr;
	struct upa_agg g;
	uint8_t *at;

	if (agg) {
		g = *agg;
		g.key_words = 0;
		for (unsigned i = 0; i < g.nkeys; i++)
			g.key_words += g.key[i].words;
		if (g.nkeys > UPA_AGG_KEYS || g.nvals > UPA_AGG_VALS ||
		    g.key_words > UPA_AGG_KEY_WORDS || g.order > 20)
			return -EINVAL;
		g.entry_words = 1 + g.key_words + 1 + g.nvals;
		g.ntables = agg_ntables((size_t)g.entry_words * 8u << g.order);
		g.dropped = 0;
		d->flags |= UPA_P_AGG;
		if (!d->ncond && g.nkeys == 1 && !g.nvals &&
		    ((g.key[0].src == UPA_AGG_DURATION && (d->flags & UPA_P_RETURN)) ||
		     g.key[0].src == UPA_AGG_TID || g.key[0].src == UPA_AGG_COMM))
			d->flags |= UPA_P_AGG1;
		if (!d->ncond && g.nkeys == 1 && !g.nvals && g.key[0].src == UPA_AGG_FETCH &&
		    g.key[0].fetch < d->nfetch) {
			const struct upa_fetch *k = &f[g.key[0].fetch];

			if (k->base == UPA_BASE_REG && !k->nsteps && k->final == UPA_FINAL_NONE)
				d->flags |= UPA_P_AGG1;
		}
		d->max_record = 0;
		len += sizeof(g);
		tables = (size_t)g.ntables * g.entry_words * 8u << g.order;
	} else {
		d->max_record = up_agent_record_size(d->regs, f, d->nfetch);
		if (d->max_record > a->ring_size / 4)
			return -E2BIG;
	}
	len = UPA_ALIGN8(len);
	if (tables) {
		tab_off = (a->heap_used + len + 63) & ~(size_t)63; /* a cache line each */
		len = tab_off + tables - a->heap_used;
	}
	if (a->heap_used + len > HEAP_SIZE)
		return -ENOSPC;
	if (a->nids == a->capids) {
		uint32_t n = a->capids ? a->capids * 2 : 64;
		struct agent_probe *r = realloc(a->probes, n * sizeof(*r));

		if (!r)
			return -ENOMEM;
		a->probes = r;
		a->capids = n;
	}
	if (d->max_record > a->max_record) {
		uint8_t *b = realloc(a->rec_copy, d->max_record);

		if (!b)
			return -ENOMEM;
		a->rec_copy = b;
		a->max_record = d->max_record;
	}
	d->id = a->nids;
	d->ctl = a->data_addr;
	if (d->flags & UPA_P_RETURN)
		a->rt_wanted = true; /* its tables are made present with the heap's */
	pr = &a->probes[a->nids++];
	*pr = (struct agent_probe){
		.desc_off = a->heap_off + a->heap_used,
		.max_record = d->max_record,
		.nregs = (uint8_t)__builtin_popcountll(d->regs),
		.agg = agg != NULL,
	};
	if (agg) {
		pr->agg_off =
			pr->desc_off + sizeof(*d) + d->nfetch * sizeof(*f) + d->ncond * sizeof(*c);
		pr->tab_off = a->heap_off + tab_off;
		pr->ntables = g.ntables;
		pr->order = g.order;
		pr->key_words = g.key_words;
		pr->entry_words = g.entry_words;
		pr->nvals = g.nvals;
	}
	at = a->map + a->heap_off + a->heap_used;
	memcpy(at, d, sizeof(*d));
	memcpy(at + sizeof(*d), f, d->nfetch * sizeof(*f));
	memcpy(at + sizeof(*d) + d->nfetch * sizeof(*f), c, d->ncond * sizeof(*c));
	if (agg) {
		/* tables come zeroed: the heap is a fresh memfd's, used once */
		g.tables = a->data_addr + a->heap_off + tab_off;
		memcpy(at + sizeof(*d) + d->nfetch * sizeof(*f) + d->ncond * sizeof(*c), &g,
		       sizeof(g));
	}
	*addr = a->data_addr + a->heap_off + a->heap_used;
	*id = d->id;
	a->heap_used += len;
	return 0;
}

int up_agent_heap_ready(struct up_agent *a, struct up_task *t)
{
	size_t lo = a->heap_touched & ~(size_t)(PAGE - 1), hi = a->heap_used;
	int rc = 0;

	if (!a->ctl_touched) { /* every hit of the agent's code reads it */
		rc = up_task_call(t, a->code_addr + UPA_TOUCH_OFF,
				  a->code_addr + UPA_TOUCH_OFF + UPA_TOUCH_LEN, a->data_addr,
				  CTL_SIZE / PAGE);
		if (rc)
			return rc;
		a->ctl_touched = true;
	}
	if (a->rt_wanted && !a->rt_touched) {
		rc = up_task_call(t, a->code_addr + UPA_TOUCH_OFF,
				  a->code_addr + UPA_TOUCH_OFF + UPA_TOUCH_LEN,
				  a->data_addr + a->rtab_off, (RTAB_SIZE + RT_OWN_SIZE) / PAGE);
		if (rc)
			return rc;
		a->rt_touched = a->owner_touched = true;
	}
	if (!a->owner_touched) { /* every probe's first hit looks its thread up there */
		rc = up_task_call(t, a->code_addr + UPA_TOUCH_OFF,
				  a->code_addr + UPA_TOUCH_OFF + UPA_TOUCH_LEN,
				  a->data_addr + a->rtab_off + RTAB_SIZE, 1);
		if (rc)
			return rc;
		a->owner_touched = true;
	}
	if (hi <= a->heap_touched)
		return 0;
	rc = up_task_call(t, a->code_addr + UPA_TOUCH_OFF,
			  a->code_addr + UPA_TOUCH_OFF + UPA_TOUCH_LEN,
			  a->data_addr + a->heap_off + lo, (hi - lo + PAGE - 1) / PAGE);
	if (!rc)
		a->heap_touched = hi;
	return rc;
}

int up_agent_counter(struct up_agent *a, uint64_t *addr)
{
	if (a->heap_used + 8 > HEAP_SIZE)
		return -ENOSPC;
	*addr = a->data_addr + a->heap_off + a->heap_used;
	a->heap_used += 8;
	return 0;
}

uint64_t up_agent_read(const struct up_agent *a, uint64_t addr)
{
	return __atomic_load_n((const uint64_t *)(a->map + (addr - a->data_addr)), __ATOMIC_RELAXED);
}

/* The probe whose descriptor the tracer placed at addr (ids go up with addresses). */
static const struct agent_probe *probe_at(const struct up_agent *a, uint64_t addr)
{
	size_t off = addr - a->data_addr;
	uint32_t lo = 0, hi = a->nids;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (a->probes[mid].desc_off == off)
			return &a->probes[mid];
		if (a->probes[mid].desc_off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct upa_probe *desc_at(const struct up_agent *a, uint64_t addr)
{
	return (struct upa_probe *)(a->map + (addr - a->data_addr));
}

/*
 * The tables' geometry is the tracer's own (agent_probe), never the copy in the
 * region: the target may rewrite that at will, and only the entries' words are
 * read from it, each once, the key copied out before fn sees it.
 */
void up_agent_agg_read(const struct up_agent *a, uint64_t addr,
		       void (*fn)(void *arg, const uint64_t *key, unsigned nkey,
				  const uint64_t *val, unsigned nval),
		       void *arg, uint64_t *dropped)
{
	const struct agent_probe *pr = probe_at(a, addr);
	const struct upa_agg *g;
	const uint64_t *t;
	size_t n;

	*dropped = 0;
	if (!pr || !pr->agg)
		return;
	g = (const struct upa_agg *)(a->map + pr->agg_off);
	t = (const uint64_t *)(a->map + pr->tab_off);
	n = (size_t)pr->ntables << pr->order;
	for (size_t i = 0; i < n; i++, t += pr->entry_words) {
		uint64_t st = __atomic_load_n(&t[0], __ATOMIC_ACQUIRE);
		uint64_t key[UPA_AGG_KEY_WORDS], v[1 + UPA_AGG_VALS];

		if (st <= 1)
			continue; /* free, or its first hit is still being set up */
		for (unsigned j = 0; j < pr->key_words; j++)
			key[j] = __atomic_load_n(&t[1 + j], __ATOMIC_RELAXED);
		for (unsigned j = 0; j <= pr->nvals; j++)
			v[j] = __atomic_load_n(&t[1 + pr->key_words + j], __ATOMIC_RELAXED);
		fn(arg, key, pr->key_words, v, 1 + pr->nvals);
	}
	*dropped = __atomic_load_n(&g->dropped, __ATOMIC_RELAXED);
}

void up_agent_probe_enable(struct up_agent *a, uint64_t addr, bool on)
{
	struct upa_probe *d = desc_at(a, addr);

	if (on)
		__atomic_or_fetch(&d->flags, UPA_P_ENABLED, __ATOMIC_RELEASE);
	else
		__atomic_and_fetch(&d->flags, ~UPA_P_ENABLED, __ATOMIC_RELEASE);
}

void up_agent_probe_counts(const struct up_agent *a, uint64_t addr, uint64_t *filtered,
			   uint64_t *lost)
{
	struct upa_probe *d = desc_at(a, addr);

	*filtered = __atomic_load_n(&d->filtered, __ATOMIC_RELAXED);
	*lost = __atomic_load_n(&d->lost, __ATOMIC_RELAXED);
}

uint64_t up_agent_lost(const struct up_agent *a)
{
	uint64_t n = 0;

	for (unsigned k = 0; k < UPA_RINGS; k++)
		n += __atomic_load_n(&a->ctl->ring[k].lost, __ATOMIC_RELAXED);
	return n;
}

/* ---- records --------------------------------------------------------------------------- */

/*
 * Everything below reads memory the target can write while it is read: a record's
 * header is copied once (rec_header) and checked on the copy (rec_check) against what
 * the tracer knows of the probe (struct agent_probe); its bytes are copied out before
 * anything reads them; a head is taken once per drain and must be within a ring of
 * the tracer's own tail.  A ring that breaks any of it is abandoned (ring_abandon):
 * the tracer never reads it again, and says so once per process.
 */

/* A record's TSC as CLOCK_MONOTONIC ns (a forged TSC gives a wrong time, nothing worse). */
static uint64_t rec_time_ns(const struct up_agent *a, uint64_t tsc, double tick)
{
	double d = (double)(int64_t)(tsc - a->tsc0) * tick;

	if (!(d > -9.0e18 && d < 9.0e18))
		d = 0;
	return a->mono0 + (uint64_t)(int64_t)d;
}

/* Ring k as the tracer maps it. */
static uint8_t *ring_map(const struct up_agent *a, unsigned k)
{
	return a->map + a->ring_off + (size_t)k * a->ring_size;
}

void up_agent_on_corrupt(struct up_agent *a, void (*fn)(void *arg, uint32_t id, const char *why),
			 void *arg)
{
	a->on_corrupt = fn;
	a->corrupt_arg = arg;
}

/* Ring k is given up for good: the first time in this process, with a message naming
   the probe whose record it was (id, or UINT32_MAX: none). */
static void ring_abandon(struct up_agent *a, unsigned k, uint32_t id, const char *why)
{
	char msg[160];

	a->rings[k].dead = true;
	/* nothing waits on a ring nobody reads: a corrupt process drops, as it may */
	if (a->flags & UPA_F_BLOCK) {
		flags_set(a, a->flags & ~UPA_F_BLOCK);
		for (unsigned j = 0; j < UPA_RINGS; j++)
			ring_wake(a, j, true);
	}
	if (a->corrupt_told)
		return;
	a->corrupt_told = true;
	snprintf(msg, sizeof(msg),
		 "the traced process corrupted its record ring %u (%s): the ring is abandoned", k,
		 why);
	if (a->on_corrupt)
		a->on_corrupt(a->corrupt_arg, id < a->nids ? id : UINT32_MAX, msg);
}

/* A record's header, each field loaded once: slot first, the rest after it. */
static struct upa_rec rec_header(const struct upa_rec *r)
{
	struct upa_rec h;

	h.slot = __atomic_load_n(&r->slot, __ATOMIC_ACQUIRE);
	h.id = __atomic_load_n(&r->id, __ATOMIC_RELAXED);
	h.len = __atomic_load_n(&r->len, __ATOMIC_RELAXED);
	h.cpu = __atomic_load_n(&r->cpu, __ATOMIC_RELAXED);
	h.thread = __atomic_load_n(&r->thread, __ATOMIC_RELAXED);
	h.tsc = __atomic_load_n(&r->tsc, __ATOMIC_RELAXED);
	return h;
}

enum rec_kind { REC_INCOMPLETE, REC_PAD, REC_OK, REC_BAD };

/* What the header h, copied from ring offset off, is; *why when it is no header the
   agent writes. */
static enum rec_kind rec_check(const struct up_agent *a, const struct upa_rec *h, uint64_t off,
			       const char **why)
{
	const struct agent_probe *pr;

	if (!h->slot)
		return REC_INCOMPLETE;
	if (h->slot % REC_ALIGN || h->slot > a->ring_size - off) {
		*why = "a record's slot is off the ring";
		return REC_BAD;
	}
	if (h->id == UPA_REC_PAD) {
		if (h->slot != a->ring_size - off) {
			*why = "a pad short of the ring's end";
			return REC_BAD;
		}
		return REC_PAD;
	}
	if (h->id >= a->nids) {
		*why = "a record of no probe";
		return REC_BAD;
	}
	pr = &a->probes[h->id];
	if (!pr->max_record || h->slot > pr->max_record) {
		*why = "a record larger than its probe's";
		return REC_BAD;
	}
	if (h->len > h->slot || h->len < sizeof(*h) + 8u * pr->nregs) {
		*why = "a record's length is not its probe's";
		return REC_BAD;
	}
	return REC_OK;
}

/* A drain's place in one ring: from tail to end (head when the drain began, no more:
   threads that keep writing must not keep the tracer here forever). */
struct cursor {
	unsigned k;
	uint8_t *ring;
	uint64_t tail, end, told;
	bool have;	  /* h and rec are the next complete record */
	struct upa_rec h; /* its header, copied and checked */
	uint8_t *rec;	  /* where it is in the ring */
};

/* Ring k opened for a drain: false when it has nothing, or its head is out of reach
   (corrupt: abandoned).  Every record consumed advances the tail by 32 bytes or more,
   so a drain reads at most a ring's size / 32 headers. */
static bool cursor_open(struct up_agent *a, unsigned k, struct cursor *c)
{
	const struct agent_ring *r = &a->rings[k];
	uint64_t head;

	if (r->dead)
		return false;
	head = __atomic_load_n(&a->ctl->ring[k].head, __ATOMIC_ACQUIRE);
	if (head == r->tail)
		return false;
	if (head - r->tail > a->ring_size) { /* past a full ring, or behind the tail */
		ring_abandon(a, k, UINT32_MAX, "its head is out of the ring's reach");
		return false;
	}
	c->k = k;
	c->ring = ring_map(a, k);
	c->tail = c->told = r->tail;
	c->end = head;
	c->have = false;
	return true;
}

/* The cursor's next complete record (pads consumed on the way); none at a record
   still being written, or one that is corrupt (the ring is abandoned). */
static void cursor_next(struct up_agent *a, struct cursor *c)
{
	uint64_t cap = a->ring_size;

	c->have = false;
	while (c->tail < c->end && !a->rings[c->k].dead) {
		uint64_t off = c->tail & (cap - 1);
		struct upa_rec *rec = (struct upa_rec *)(c->ring + off);
		struct upa_rec h = rec_header(rec);
		const char *why = "";

		switch (rec_check(a, &h, off, &why)) {
		case REC_INCOMPLETE:
			return;
		case REC_BAD:
			ring_abandon(a, c->k, h.id, why);
			return;
		case REC_OK:
			c->h = h;
			c->rec = (uint8_t *)rec;
			c->have = true;
			return;
		case REC_PAD:
			memset(rec, 0, h.slot);
			c->tail += h.slot;
			break;
		}
	}
}

/* The cursor's record consumed; the writers read tail at every record: it moves a 32nd
   of the ring at a time, not at every record (its cache line bounced between CPUs). */
static void cursor_pop(struct up_agent *a, struct cursor *c)
{
	memset(c->rec, 0, c->h.slot);
	c->tail += c->h.slot;
	if (c->tail - c->told >= a->ring_size / 32) {
		__atomic_store_n(&a->ctl->ring[c->k].tail, c->tail, __ATOMIC_RELEASE);
		c->told = c->tail;
	}
	cursor_next(a, c);
}

/*
 * Threads waiting for room in ring k (UPA_F_BLOCK) are woken: wseq moves, then a
 * futex wake on it (the memfd is the same file in both processes).  Only when the
 * ring says it has waiters, unless always: a target that lies about them costs its
 * tracer one system call a drain of that ring, no more.
 */
static void ring_wake(struct up_agent *a, unsigned k, bool always)
{
	struct upa_ring *rg = &a->ctl->ring[k];

	/* the tail's store before the load of waiters: a waiter says so before it looks
	   at the tail for the last time (agent.c wait_room) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!always && !__atomic_load_n(&rg->waiters, __ATOMIC_RELAXED))
		return;
	__atomic_fetch_add(&rg->wseq, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &rg->wseq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* The drain of c is over: the tracer's tail, and the agent's copy of it. */
static void cursor_close(struct up_agent *a, struct cursor *c)
{
	struct agent_ring *r = &a->rings[c->k];
	bool moved = c->tail != r->tail;

	r->taken += c->tail - r->tail;
	r->tail = c->tail;
	if (c->tail != c->told && !r->dead)
		__atomic_store_n(&a->ctl->ring[c->k].tail, c->tail, __ATOMIC_RELEASE);
	if (moved && (a->flags & UPA_F_BLOCK))
		ring_wake(a, c->k, false);
}

unsigned up_agent_drain(struct up_agent *a, void (*fn)(void *arg, const struct up_agent_rec *r),
			void *arg)
{
	struct cursor c[UPA_RINGS];
	unsigned nc = 0, n = 0;
	double tick = ns_per_tick();

	for (unsigned k = 0; k < UPA_RINGS; k++) {
		if (!cursor_open(a, k, &c[nc]))
			continue;
		cursor_next(a, &c[nc]);
		nc++;
	}
	for (;;) {
		struct cursor *m = NULL;

		/* the oldest record of all the rings: they come out in time order */
		for (unsigned i = 0; i < nc; i++)
			if (c[i].have && (!m || (int64_t)(c[i].h.tsc - m->h.tsc) < 0))
				m = &c[i];
		if (!m) {
			a->npast = a->past_next = 0; /* every ring read to its end */
			break;
		}

		/* the record copied out: what fn reads cannot change under it */
		const struct upa_rec *h = &m->h;
		unsigned nregs = a->probes[h->id].nregs;
		size_t head = sizeof(*h) + 8u * nregs;

		memcpy(a->rec_copy, m->rec, h->len);
		memcpy(a->rec_copy, h, sizeof(*h));

		struct up_agent_rec v = {
			.id = h->id,
			.cpu = h->cpu & UPA_REC_CPU,
			.is_return = !!(h->cpu & UPA_REC_RET),
			.tid = tid_of(a, h->thread, h->cpu & UPA_REC_SP, m->k, m->tail),
			.time_ns = rec_time_ns(a, h->tsc, tick),
			.regs = (const uint64_t *)(a->rec_copy + sizeof(*h)),
			.nregs = nregs,
			.mem = a->rec_copy + head,
			.memlen = h->len - head,
		};

		fn(arg, &v);
		n++;
		cursor_pop(a, m);
	}
	for (unsigned i = 0; i < nc; i++)
		cursor_close(a, &c[i]);
	return n;
}

/* The raw form is the ring's, headers rewritten (uprobe.h). */
_Static_assert(sizeof(struct uprobe_raw_rec) == sizeof(struct upa_rec), "raw header");
_Static_assert(offsetof(struct uprobe_raw_rec, time_ns) == offsetof(struct upa_rec, tsc),
	       "raw time");
_Static_assert(sizeof(struct uprobe_raw_mem) == sizeof(struct upa_mem), "raw memory entry");
_Static_assert(UPROBE_RAW_FAULT == UPA_MEM_FAULT && UPROBE_RAW_STRING == UPA_MEM_STRING &&
		       UPROBE_RAW_RET == UPA_REC_RET && UPROBE_RAW_CPU == UPA_REC_CPU,
	       "raw flags");

#define RAW_SPAN (256u << 10) /* raw records go out in spans of up to this much */

/* Ring k's records raw, copied out of the ring span by span (up_agent_drain_raw). */
static unsigned drain_raw_ring(struct up_agent *a, unsigned k, pid_t pid,
			       uint32_t (*probe_of)(void *arg, uint32_t id),
			       void (*fn)(void *arg, const void *recs, size_t len), void *arg)
{
	double tick = ns_per_tick();
	uint64_t last_key = 0;
	bool last_sp = false;
	pid_t last_tid = 0;
	unsigned n = 0;
	size_t used = 0;
	struct cursor c;

	if (!cursor_open(a, k, &c))
		return 0;
	for (cursor_next(a, &c); c.have; cursor_pop(a, &c)) {
		const struct upa_rec *h = &c.h;
		struct uprobe_raw_rec r = {
			.size = h->slot,
			.probe = probe_of(arg, h->id),
			.len = h->len,
			.flags = h->cpu & (UPA_REC_CPU | UPA_REC_RET),
			.pid = pid,
		};
		bool sp = h->cpu & UPA_REC_SP;

		if (r.probe == UPROBE_RAW_SKIP)
			continue; /* a probe gone */
		if (used + h->slot > a->raw_cap) {
			fn(arg, a->raw_buf, used);
			used = 0;
		}
		if (h->thread != last_key || sp != last_sp || !last_tid || a->npast) {
			last_tid = tid_of(a, h->thread, sp, c.k, c.tail);
			last_key = h->thread;
			last_sp = sp;
		}
		r.tid = last_tid;
		r.time_ns = rec_time_ns(a, h->tsc, tick);
		memcpy(a->raw_buf + used, c.rec, h->len);
		memcpy(a->raw_buf + used, &r, sizeof(r));
		memset(a->raw_buf + used + h->len, 0, h->slot - h->len);
		used += h->slot;
		n++;
	}
	if (used)
		fn(arg, a->raw_buf, used);
	cursor_close(a, &c);
	return n;
}

unsigned up_agent_drain_raw(struct up_agent *a, pid_t pid,
			    uint32_t (*probe_of)(void *arg, uint32_t id),
			    void (*fn)(void *arg, const void *recs, size_t len), void *arg)
{
	size_t want = a->max_record > RAW_SPAN ? a->max_record : RAW_SPAN;
	unsigned n = 0;

	if (a->raw_cap < want) {
		uint8_t *b = realloc(a->raw_buf, want);

		if (!b)
			return 0; /* the records wait for the next drain */
		a->raw_buf = b;
		a->raw_cap = want;
	}
	for (unsigned k = 0; k < UPA_RINGS; k++)
		n += drain_raw_ring(a, k, pid, probe_of, fn, arg);
	a->npast = a->past_next = 0; /* every ring read to its end: no dead thread's record is left */
	return n;
}

/* The raw header of the cursor's record (its probe already known: probe). */
static struct uprobe_raw_rec raw_header(struct up_agent *a, const struct cursor *c, pid_t pid,
					uint32_t probe, double tick)
{
	const struct upa_rec *h = &c->h;
	struct uprobe_raw_rec r = {
		.size = h->slot,
		.probe = probe,
		.len = h->len,
		.flags = h->cpu & (UPA_REC_CPU | UPA_REC_RET),
		.pid = pid,
		.tid = tid_of(a, h->thread, h->cpu & UPA_REC_SP, c->k, c->tail),
		.time_ns = rec_time_ns(a, h->tsc, tick),
	};

	return r;
}

size_t up_agent_drain_copy(struct up_agent *a, pid_t pid, size_t budget,
			   uint32_t (*probe_of)(void *arg, uint32_t id),
			   void (*fn)(void *arg, const void *recs, size_t len), void *arg)
{
	size_t want = a->max_record > RAW_SPAN ? a->max_record : RAW_SPAN;
	struct cursor c[UPA_RINGS];
	unsigned nc = 0;
	size_t used = 0, took = 0;
	double tick = ns_per_tick();

	if (a->raw_cap < want) {
		uint8_t *b = realloc(a->raw_buf, want);

		if (!b)
			return 0; /* the records wait for the next drain */
		a->raw_buf = b;
		a->raw_cap = want;
	}
	for (unsigned k = 0; k < UPA_RINGS; k++) {
		if (!cursor_open(a, k, &c[nc]))
			continue;
		cursor_next(a, &c[nc]);
		nc++;
	}
	for (;;) {
		struct cursor *m = NULL;

		/* the oldest record of all the rings: they go out in time order */
		for (unsigned i = 0; i < nc; i++)
			if (c[i].have && (!m || (int64_t)(c[i].h.tsc - m->h.tsc) < 0))
				m = &c[i];
		if (!m)
			a->npast = a->past_next = 0; /* every ring read to its end */
		if (!m || took + m->h.slot > budget)
			break;

		const struct upa_rec *h = &m->h;
		uint32_t probe = probe_of(arg, h->id);

		if (probe != UPROBE_RAW_SKIP) { /* else a probe gone */
			struct uprobe_raw_rec r;

			if (used + h->slot > a->raw_cap) {
				fn(arg, a->raw_buf, used);
				used = 0;
			}
			r = raw_header(a, m, pid, probe, tick);
			memcpy(a->raw_buf + used, m->rec, h->len);
			memcpy(a->raw_buf + used, &r, sizeof(r));
			memset(a->raw_buf + used + h->len, 0, h->slot - h->len);
			used += h->slot;
			took += h->slot;
		}
		cursor_pop(a, m);
	}
	if (used)
		fn(arg, a->raw_buf, used);
	for (unsigned i = 0; i < nc; i++)
		cursor_close(a, &c[i]);
	return took;
}

void up_agent_rec_of_raw(const struct up_agent *a, const struct uprobe_raw_rec *raw,
			 uint32_t id, struct up_agent_rec *v)
{
	unsigned nregs = id < a->nids ? a->probes[id].nregs : 0;
	size_t head = sizeof(*raw) + 8u * nregs;

	*v = (struct up_agent_rec){
		.id = id,
		.cpu = raw->flags & UPA_REC_CPU,
		.is_return = !!(raw->flags & UPA_REC_RET),
		.tid = raw->tid,
		.time_ns = raw->time_ns,
		.regs = (const uint64_t *)(raw + 1),
		.nregs = nregs,
		.mem = (const uint8_t *)raw + head,
		.memlen = raw->len > head ? raw->len - head : 0,
	};
}

unsigned up_agent_fill(struct up_agent *a)
{
	unsigned most = 0;

	for (unsigned k = 0; k < UPA_RINGS; k++) {
		uint64_t t = a->rings[k].taken;
		unsigned f = t >= a->ring_size ? 256 : (unsigned)(t * 256 / a->ring_size);

		a->rings[k].taken = 0;
		most = f > most ? f : most;
	}
	return most;
}

int up_agent_rec_read(const struct up_agent_rec *r, uint64_t addr, void *buf, size_t len)
{
	return up_rec_mem_read(r->mem, r->memlen, addr, buf, len);
}
