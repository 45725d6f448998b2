// SPDX-License-Identifier: MIT
/*
 * Is any thread inside these bytes: the checks a patch or a trampoline's reclaim
 * makes on every stopped thread of the address space (its rip, where it resumes, the
 * words on its stack).  It only reads registers and memory; it never changes them.
 */
#include <stdlib.h>

#include "site/internal.h"

void where_range(struct where *w, struct up_sites *mm, uint64_t lo, uint64_t hi)
{
	w->mm = mm;
	w->lo[w->n] = lo;
	w->hi[w->n++] = hi;
}

void where_out_of_line(struct where *w, struct up_sites *mm)
{
	w->mm = mm;
	w->out_of_line = true;
	w->hull_lo = UINT64_MAX;
	w->hull_hi = 0;
	for (const struct up_xol_area *a = mm->xol.areas; a; a = a->next) {
		w->hull_lo = a->base < w->hull_lo ? a->base : w->hull_lo;
		w->hull_hi = a->base + UP_XOL_AREA_SIZE > w->hull_hi ? a->base + UP_XOL_AREA_SIZE
								    : w->hull_hi;
	}
	if (mm->agent) {
		uint64_t code = up_agent_entry(mm->agent) - UPA_ENTRY_OFF;

		w->hull_lo = code < w->hull_lo ? code : w->hull_lo;
		w->hull_hi = code + UPA_CODE_SIZE > w->hull_hi ? code + UPA_CODE_SIZE : w->hull_hi;
	}
}

static bool points(const struct where *w, uint64_t a)
{
	if (w->out_of_line)
		return a >= w->hull_lo && a < w->hull_hi &&
		       (up_xol_contains(&w->mm->xol, a) ||
			(w->mm->agent && up_agent_has_code(w->mm->agent, a)));
	for (unsigned i = 0; i < w->n; i++)
		if (a > w->lo[i] && a < w->hi[i])
			return true;
	return false;
}

/*
 * Where a stopped thread goes on from: its rip; but a thread stopped just past an int3
 * of ours (its trap not yet dispatched, or still pending behind our interrupt) is
 * really at the int3, and goes back there to run the original should the probe be gone
 * by then; and one in a system call goes back to its syscall instruction if the call
 * restarts.  Either may sit right after the bytes a jmp would cover and return inside.
 */
static bool resumes_in(struct up_sites *mm, const struct where *w, const struct user_regs_struct *r)
{
	if (points(w, r->rip))
		return true;
	if (up_site_written_orig(mm, r->rip - 1) >= 0 && points(w, r->rip - 1))
		return true;
	return (int64_t)r->orig_rax >= 0 && points(w, r->rip - 2);
}

bool any_rip(struct up_sites *mm, const struct where *w)
{
	struct up_proc *p;

	for (unsigned i = 0; (p = sites_proc(mm, i)); i++) {
		for (struct up_task *t = up_proc_first_task(p); t; t = up_proc_next_task(t)) {
			struct user_regs_struct r;

			if (!up_task_stopped(t) || up_task_get_regs(t, &r))
				return true;
			if (resumes_in(mm, w, &r))
				return true;
		}
	}
	return false;
}

bool any_rip_in(struct up_sites *mm, uint64_t lo, uint64_t hi)
{
	struct where w = { .n = 0 };

	where_range(&w, mm, lo, hi);
	return any_rip(mm, &w);
}

#define STACK_SCAN (16u << 10)

/*
 * Does a word on any thread's stack point into (lo, hi)?  A thread interrupted there
 * by a signal would return into the middle of the jmp.  Calls are never covered, so no
 * return address can: any such word is a saved context, or a coincidence (then the
 * probe only stays on the trap path).  The top STACK_SCAN bytes above rsp are read.
 */
bool any_stack_word(struct up_sites *mm, const struct where *w)
{
	uint64_t *buf = malloc(STACK_SCAN);
	bool found = false;
	struct up_proc *p;

	if (!buf)
		return true;
	for (unsigned k = 0; !found && (p = sites_proc(mm, k)); k++) {
		for (struct up_task *t = up_proc_first_task(p); t && !found;
		     t = up_proc_next_task(t)) {
			struct user_regs_struct r;
			size_t n = 0;

			if (up_task_get_regs(t, &r)) {
				found = true;
				break;
			}
			/* page by page: the stack ends somewhere above */
			for (uint64_t a = r.rsp & ~7ull; n < STACK_SCAN;) {
				size_t chunk = 4096 - (size_t)(a & 4095);

				if (chunk > STACK_SCAN - n)
					chunk = STACK_SCAN - n;
				if (up_task_read(t, a, (uint8_t *)buf + n, chunk))
					break;
				n += chunk;
				a += chunk;
			}
			for (size_t i = 0; i < n / 8; i++)
				if (points(w, buf[i]))
					found = true;
		}
	}
	free(buf);
	return found;
}

bool stack_points_in(struct up_sites *mm, uint64_t lo, uint64_t hi)
{
	struct where w = { .n = 0 };

	where_range(&w, mm, lo, hi);
	return any_stack_word(mm, &w);
}
