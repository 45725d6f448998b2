// SPDX-License-Identifier: MIT
/*
 * The XOL area: pages of 64 slots, mapped a few at a time (more as there are more),
 * placed by remote mmap in the gap of the address space nearest to the code that needs
 * it, so that rip-relative operands and the jump back keep 32-bit displacements.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "xol.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define REACH (1ULL << 31)
#define LOW_LIMIT 0x10000ULL		 /* mmap_min_addr */
#define HIGH_LIMIT 0x7ffffffff000ULL	 /* the top of user space (4-level paging) */
#define PAGE 4096ULL

struct gap_search {
	uint64_t near, size, prev_end, best;
	uint64_t best_dist;
};

static uint64_t dist(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

static void consider_gap(struct gap_search *g, uint64_t start, uint64_t end)
{
	uint64_t lo = g->near > REACH - PAGE ? g->near - (REACH - PAGE) : 0;
	uint64_t hi = g->near + (REACH - 2 * PAGE);
	uint64_t cand;

	start = (start + PAGE - 1) & ~(PAGE - 1);
	end &= ~(PAGE - 1);
	if (start < LOW_LIMIT)
		start = LOW_LIMIT;
	if (end > HIGH_LIMIT)
		end = HIGH_LIMIT;
	/* keep off the edges of the gap: a page of distance from each neighbour */
	if (end <= start || end - start < 2 * PAGE + g->size)
		return;
	start += PAGE;
	end -= PAGE;
	if (start < lo)
		start = lo;
	if (end > hi)
		end = hi;
	if (end <= start || end - start < g->size)
		return;
	cand = start >= g->near ? start : end - g->size;
	if (cand < g->near && cand + g->size > g->near)
		return;
	if (!g->best || dist(cand, g->near) < g->best_dist) {
		g->best = cand;
		g->best_dist = dist(cand, g->near);
	}
}

static int gap_fn(void *arg, const struct up_map *m)
{
	struct gap_search *g = arg;

	/* the gap below the stack is where it grows: leave it */
	if (strcmp(m->path, "[stack]") && m->start > g->prev_end)
		consider_gap(g, g->prev_end, m->start);
	g->prev_end = m->end;
	return 0;
}

static int map_at(struct up_xol *x, struct up_task *t, uint64_t at, uint64_t size, uint64_t *base,
		  int prot);

static int map_area(struct up_xol *x, struct up_task *t, uint64_t near, uint64_t size,
		    uint64_t *base, int prot)
{
	struct up_proc *p = up_task_proc(t);
	struct gap_search g = { .near = near, .size = size };
	int rc;

	if (up_proc_mode(p) != 32) {
		rc = up_proc_for_each_map(p, gap_fn, &g);
		if (rc < 0)
			return rc;
		consider_gap(&g, g.prev_end, HIGH_LIMIT);
		if (!g.best)
			return -ENOMEM;
	}
	return map_at(x, t, g.best, size, base, prot);
}

int up_xol_note_map(struct up_xol *x, uint64_t start, uint64_t len, bool exec)
{
	if (x->nmaps == x->capmaps) {
		unsigned cap = x->capmaps ? x->capmaps * 2 : 8;
		struct up_xol_map *v = realloc(x->maps, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		x->maps = v;
		x->capmaps = cap;
	}
	x->maps[x->nmaps++] = (struct up_xol_map){ start, len, exec };
	return 0;
}

uint64_t up_xol_mapped(const struct up_xol *x)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < x->nmaps; i++)
		n += x->maps[i].len;
	return n;
}

bool up_xol_ours(const struct up_xol *x, uint64_t addr)
{
	for (unsigned i = 0; i < x->nmaps; i++)
		if (addr - x->maps[i].start < x->maps[i].len)
			return true;
	return up_xol_contains(x, addr);
}

/* size bytes mapped at exactly at (MAP_FIXED_NOREPLACE; a 32-bit process: anywhere,
   at 0), never inherited by fork, and listed in x's mappings (unmapped again if it
   cannot be: what is not listed is never left behind). */
static int map_at(struct up_xol *x, struct up_task *t, uint64_t at, uint64_t size, uint64_t *base,
		  int prot)
{
	struct up_proc *p = up_task_proc(t);
	const bool m32 = up_proc_mode(p) == 32;
	uint64_t args[6] = { at, size, (uint64_t)prot,
			     MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0 };
	int64_t ret;
	int rc;

	if (!m32)
		args[3] |= MAP_FIXED_NOREPLACE;
	else
		args[0] = 0, args[4] = 0xffffffffULL;
	rc = up_task_syscall(t, m32 ? 192 /* mmap2 */ : 9 /* mmap */, args, &ret);
	if (rc)
		return rc;
	if (m32) {
		/* an address above 2 GiB is not an error: only -4095..-1 are */
		if ((uint32_t)ret >= 0xfffff001u)
			return (int)(int32_t)ret;
		ret = (int64_t)(uint32_t)ret;
	}
	if (ret < 0 && ret > -4096)
		return (int)ret;
	if (!m32 && (uint64_t)ret != at) {
		/* an old kernel ignoring MAP_FIXED_NOREPLACE put it elsewhere: give it back */
		uint64_t un[6] = { (uint64_t)ret, size };

		up_task_syscall(t, 11, un, &ret);
		return -ENOMEM;
	}
	*base = (uint64_t)ret;
	{
		uint64_t adv[6] = { *base, size, MADV_DONTFORK };

		rc = up_task_syscall(t, m32 ? 219 : 28 /* madvise */, adv, &ret);
		if (!rc)
			rc = up_xol_note_map(x, *base, size, prot & PROT_EXEC);
		if (rc) {
			uint64_t un[6] = { *base, size };

			up_task_syscall(t, m32 ? 91 : 11 /* munmap */, un, &ret);
			return rc;
		}
	}
	return 0;
}

int up_xol_find_gap(struct up_proc *p, uint64_t near, uint64_t size, uint64_t *addr)
{
	struct gap_search g = { .near = near, .size = (size + PAGE - 1) & ~(PAGE - 1) };
	int rc = up_proc_for_each_map(p, gap_fn, &g);

	if (rc < 0)
		return rc;
	consider_gap(&g, g.prev_end, HIGH_LIMIT);
	if (!g.best)
		return -ENOMEM;
	*addr = g.best;
	return 0;
}

/*
 * Maps `pages` areas at once, in one mmap and one madvise (each a remote system call):
 * they become areas of their own, in ascending order at the head of the list.
 */
static int map_areas(struct up_xol *x, struct up_task *t, uint64_t near, unsigned pages)
{
	uint64_t base = 0;
	int rc = map_area(x, t, near, (uint64_t)pages * UP_XOL_AREA_SIZE, &base,
			  PROT_READ | PROT_EXEC);

	if (rc)
		return rc;
	for (unsigned i = pages; i-- > 0;) {
		struct up_xol_area *a = calloc(1, sizeof(*a));

		if (!a)
			return x->nareas ? 0 : -ENOMEM; /* the rest stays mapped, unused */
		a->base = base + (uint64_t)i * UP_XOL_AREA_SIZE;
		a->next = x->areas;
		x->areas = a;
		x->nareas++;
	}
	return 0;
}

static bool reaches(const struct up_task *t, uint64_t base, uint64_t near)
{
	if (up_proc_mode(up_task_proc(t)) == 32)
		return true;
	return dist(base, near) < REACH - 2 * UP_XOL_AREA_SIZE;
}

int up_xol_alloc(struct up_xol *x, struct up_task *t, uint64_t near, uint64_t *slot)
{
	struct up_xol_area *a;
	int rc;

	for (a = x->areas; a; a = a->next) {
		if (a->used == ~0ULL || !reaches(t, a->base, near))
			continue;
		for (unsigned i = 0; i < UP_XOL_SLOTS; i++) {
			if (!(a->used & (1ULL << i))) {
				a->used |= 1ULL << i;
				*slot = a->base + i * 64u;
				return 0;
			}
		}
	}
	/*
	 * As many pages as there are areas already (1, 1, 2, 4 ... 64): a batch of 10,000
	 * probes maps 9 times instead of 157, a probe or two still costs one page.
	 */
	rc = map_areas(x, t, near, x->nareas < 1 ? 1 : x->nareas > 64 ? 64 : x->nareas);
	if (rc)
		return rc;
	a = x->areas;
	a->used = 1;
	*slot = a->base;
	return 0;
}

int up_xol_alloc_n(struct up_xol *x, struct up_task *t, uint64_t near, unsigned n,
		   uint64_t *slot)
{
	uint64_t want = (n >= 64 ? ~0ULL : (1ULL << n) - 1), base = 0;
	struct up_xol_area *a;
	int rc;

	if (!n || n > UP_XOL_SLOTS)
		return -EINVAL;
	for (int round = 0; round < 2; round++) {
		for (a = x->areas; a; a = a->next) {
			if (!reaches(t, a->base, near))
				continue;
			for (unsigned i = 0; i + n <= UP_XOL_SLOTS; i++) {
				if (!(a->used & (want << i))) {
					a->used |= want << i;
					*slot = a->base + i * 64u;
					return 0;
				}
			}
		}
		if (round)
			break;
		/* a fresh area, then the search finds room in it */
		rc = map_area(x, t, near, UP_XOL_AREA_SIZE, &base, PROT_READ | PROT_EXEC);
		if (rc)
			return rc;
		a = calloc(1, sizeof(*a));
		if (!a)
			return -ENOMEM;
		a->base = base;
		a->next = x->areas;
		x->areas = a;
		x->nareas++;
	}
	return -ENOMEM;
}

/* The slots of a covering [at, at + bytes), in *mask; all free? */
static bool span_free(const struct up_xol_area *a, uint64_t at, uint64_t bytes, uint64_t *mask)
{
	uint64_t first, n;

	if (at < a->base || at + bytes > a->base + UP_XOL_AREA_SIZE)
		return false;
	first = (at - a->base) / 64u;
	n = (at + bytes - 1 - a->base) / 64u - first + 1;
	*mask = (n >= 64 ? ~0ULL : (1ULL << n) - 1) << first;
	return !(a->used & *mask);
}

/* In area a, a start in [lo, hi] whose span is free: the first slot boundary that
   fits, else lo itself (which leaves part of a slot unused: a window of one address,
   a 1-byte instruction's, may need just that slot).  0 when none. */
static uint64_t start_in(const struct up_xol_area *a, uint64_t lo, uint64_t hi, uint64_t bytes,
			 uint64_t *mask)
{
	uint64_t end = a->base + UP_XOL_AREA_SIZE;

	if (lo >= end || hi < a->base)
		return 0;
	for (uint64_t c = (lo > a->base ? lo + 63 : a->base) & ~63ULL; c <= hi && c < end; c += 64)
		if (span_free(a, c, bytes, mask))
			return c;
	if (lo >= a->base && span_free(a, lo, bytes, mask))
		return lo;
	return 0;
}

bool up_xol_span_free(const struct up_xol *x, uint64_t at, uint64_t bytes)
{
	uint64_t mask;

	for (const struct up_xol_area *a = x->areas; a; a = a->next)
		if (at >= a->base && at < a->base + UP_XOL_AREA_SIZE)
			return span_free(a, at, bytes, &mask);
	return false;
}

static int heap_fn(void *arg, const struct up_map *m)
{
	if (!strcmp(m->path, "[heap]"))
		*(uint64_t *)arg = m->end;
	return 0;
}

#define HEAP_ROOM (256ULL << 20) /* above the program break: where brk grows */

int up_xol_alloc_in(struct up_xol *x, struct up_task *t, uint64_t lo, uint64_t hi,
		    uint64_t bytes, uint64_t *at, unsigned *nslots)
{
	struct up_proc *p = up_task_proc(t);
	struct up_xol_area *a;
	uint64_t mask, c, page, heap_end = 0;
	unsigned tries = 0, looked = 0;
	struct up_map m;

	if (up_proc_mode(p) == 32 || lo > hi || !bytes || bytes > UP_XOL_AREA_SIZE)
		return -EINVAL;
	for (a = x->areas; a; a = a->next) {
		c = start_in(a, lo, hi, bytes, &mask);
		if (c) {
			a->used |= mask;
			*at = c;
			*nslots = (unsigned)__builtin_popcountll(mask);
			return 0;
		}
	}
	/* a page of its own: the window's pages in turn, a few, those not mapped and not
	   where the heap would grow (a page there would stop brk: malloc would go on, by
	   mmap, but the program's memory would not be laid out as without probes) */
	up_proc_for_each_map(p, heap_fn, &heap_end);
	for (page = lo & ~(PAGE - 1); page <= hi && tries < 8 && looked++ < 64; page += PAGE) {
		struct up_xol_area fresh = { .base = page };
		uint64_t base = 0, mask2 = 0;
		unsigned pages = 1;

		if (page < LOW_LIMIT || page + 2 * PAGE > HIGH_LIMIT ||
		    (heap_end && page >= heap_end && page - heap_end < HEAP_ROOM))
			continue;
		c = start_in(&fresh, lo, hi, bytes, &mask);
		if (!c && lo >= page && lo < page + PAGE) {
			/* it starts here and runs on into the next page: two pages */
			struct up_xol_area next = { .base = page + PAGE };

			c = lo;
			pages = 2;
			span_free(&fresh, c, page + PAGE - c, &mask);
			span_free(&next, page + PAGE, c + bytes - (page + PAGE), &mask2);
		}
		if (!c || !up_proc_find_map(p, page, &m) ||
		    (pages == 2 && !up_proc_find_map(p, page + PAGE, &m)))
			continue; /* it does not fit there, or a page is taken */
		tries++;
		if (map_at(x, t, page, pages * PAGE, &base, PROT_READ | PROT_EXEC))
			continue;
		for (unsigned k = pages; k-- > 0;) {
			a = calloc(1, sizeof(*a));
			if (!a)
				return -ENOMEM; /* the pages stay mapped, unused */
			a->base = base + k * PAGE;
			a->used = k ? mask2 : mask;
			a->next = x->areas;
			x->areas = a;
			x->nareas++;
		}
		*at = c;
		*nslots = (unsigned)(__builtin_popcountll(mask) + __builtin_popcountll(mask2));
		return 0;
	}
	return -ENOMEM;
}

int up_xol_map_data(struct up_xol *x, struct up_task *t, uint64_t near, uint64_t *addr)
{
	return map_area(x, t, near, UP_XOL_AREA_SIZE, addr, PROT_READ | PROT_WRITE);
}

int up_xol_write(struct up_proc *p, uint64_t slot, const void *code, size_t len)
{
	return up_proc_write_text(p, slot, code, len);
}

void up_xol_free(struct up_xol *x, uint64_t slot)
{
	up_xol_free_n(x, slot, 1);
}

void up_xol_free_n(struct up_xol *x, uint64_t slot, unsigned n)
{
	/* slot by slot: a punned jmp's trampoline may run on into the next area */
	for (unsigned i = 0; i < n; i++) {
		uint64_t at = slot + 64ull * i;

		for (struct up_xol_area *a = x->areas; a; a = a->next)
			if (at >= a->base && at < a->base + UP_XOL_AREA_SIZE)
				a->used &= ~(1ULL << ((at - a->base) / 64u));
	}
}

bool up_xol_contains(const struct up_xol *x, uint64_t addr)
{
	for (const struct up_xol_area *a = x->areas; a; a = a->next)
		if (addr >= a->base && addr < a->base + UP_XOL_AREA_SIZE)
			return true;
	return false;
}

void up_xol_drop(struct up_xol *x)
{
	while (x->areas) {
		struct up_xol_area *a = x->areas;

		x->areas = a->next;
		free(a);
	}
	x->nareas = 0;
	free(x->maps);
	x->maps = NULL;
	x->nmaps = x->capmaps = 0;
}

int up_xol_unmap(struct up_xol *x, struct up_task *t)
{
	const bool m32 = up_proc_mode(up_task_proc(t)) == 32;
	int first = 0;

	for (unsigned i = 0; i < x->nmaps; i++) {
		uint64_t args[6] = { x->maps[i].start, x->maps[i].len };
		int64_t ret = 0;
		int rc = up_task_syscall(t, m32 ? 91 : 11 /* munmap */, args, &ret);

		if (!rc && ret < 0 && ret > -4096)
			rc = (int)ret;
		if (rc && !first)
			first = rc;
	}
	up_xol_drop(x);
	return first;
}
