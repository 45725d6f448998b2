// SPDX-License-Identifier: MIT
/*
 * Is any thread inside these bytes: the checks a patch or a trampoline's reclaim
 * makes on every stopped thread of the address space (its rip, where it resumes, the
 * words on its stack).  It only reads registers and memory; it never changes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static bool resumes_in(struct up_sites *mm, const struct where *w, struct up_task *t,
		       const struct user_regs_struct *r)
{
	if (up_site_written_orig(mm, r->rip - 1) >= 0) {
		/* its int3's trap not handled yet: it goes on from the int3 itself (a
		   promotion patches a jmp over the int3 such threads wait on) */
		if (up_task_trap_pending(t))
			return points(w, r->rip - 1);
		if (points(w, r->rip - 1))
			return true;
	}
	if (points(w, r->rip))
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
			if (resumes_in(mm, w, t, &r))
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

/* ---- the mappings of ours: may any thread still use them? ------------------------- */

static bool in_our_code(const struct up_sites *mm, uint64_t a)
{
	for (unsigned i = 0; i < mm->xol.nmaps; i++) {
		const struct up_xol_map *m = &mm->xol.maps[i];

		if (m->exec && a >= m->start && a < m->start + m->len)
			return true;
	}
	return false;
}

#define STACK_DEEP (1u << 20)
#define FRAME_RIP 176 /* x86-64 rt_sigframe: pretcode, uc_flags, uc_link, uc_stack, then
			 the saved registers r8..r15 rdi rsi rbp rbx rdx rax rcx rsp rip */

/* Is code an rt_sigreturn (mov $15,%rax; syscall), as every restorer is? */
static bool is_restorer(struct up_task *t, uint64_t code)
{
	static const uint8_t ret[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05 };
	uint8_t b[9];

	return !up_task_read(t, code, b, sizeof(b)) && !memcmp(b, ret, sizeof(b));
}

/*
 * A signal frame on t's stack, from rsp up to the end of the mapping rsp is in (at
 * most STACK_DEEP bytes), whose saved rip is in code of ours: its address, or 0.
 *
 * That, and a rip of ours, is all that can bring a thread back: code of ours never
 * calls the program's (its calls stay in the agent; a relocated call pushes the
 * original return address), the returns it hijacked are put back first, and the
 * program's code only gets there through the kernel's signal delivery, whose frame's
 * pretcode is the restorer.  Other words that point there are left over from code of
 * ours that ran deeper before (a hijack's call site, a trampoline's return address in
 * a frame the program has not written since) and nothing returns to them.  A handler
 * on an alternate stack has its frame there, with the interrupted rip.
 */
static uint64_t frame_in_code(struct up_sites *mm, struct up_task *t, uint64_t rsp)
{
	static uint64_t buf[8192];
	struct up_map m;
	uint64_t a = rsp & ~7ull, end, base = a;

	if (up_proc_find_map(up_task_proc(t), a, &m))
		return 0; /* no stack there: nothing to come back through */
	end = m.end - a > STACK_DEEP ? a + STACK_DEEP : m.end;
	while (a < end) {
		size_t n = end - a < sizeof(buf) ? (size_t)(end - a) : sizeof(buf);

		if (up_task_read(t, a, buf, n))
			return a; /* unreadable: cannot tell, so it may */
		for (size_t i = 0; i < n / 8; i++) {
			uint64_t at = a + 8 * i, pret = 0;

			if (!in_our_code(mm, buf[i]) || at - base < FRAME_RIP)
				continue;
			if (i >= FRAME_RIP / 8)
				pret = buf[i - FRAME_RIP / 8];
			else if (up_task_read(t, at - FRAME_RIP, &pret, sizeof(pret)))
				continue;
			if (is_restorer(t, pret))
				return at - FRAME_RIP;
		}
		a += n;
	}
	return 0;
}

bool maps_in_use(struct up_sites *mm, char *why, size_t whylen)
{
	struct up_proc *p;

	for (unsigned i = 0; (p = sites_proc(mm, i)); i++) {
		for (struct up_task *t = up_proc_first_task(p); t; t = up_proc_next_task(t)) {
			struct user_regs_struct r;
			uint64_t at;

			if (!up_task_stopped(t) || up_task_get_regs(t, &r)) {
				snprintf(why, whylen, "thread %d could not be stopped and looked at",
					 (int)up_task_tid(t));
				return true;
			}
			if (in_our_code(mm, r.rip) ||
			    ((int64_t)r.orig_rax >= 0 && in_our_code(mm, r.rip - 2))) {
				snprintf(why, whylen, "thread %d runs there (rip 0x%llx)",
					 (int)up_task_tid(t), (unsigned long long)r.rip);
				return true;
			}
			at = frame_in_code(mm, t, r.rsp);
			if (at) {
				uint64_t w = 0;

				up_task_read(t, at + FRAME_RIP, &w, sizeof(w));
				snprintf(why, whylen, "thread %d is in a signal handler that "
					 "interrupted code of ours (its frame at 0x%llx returns to "
					 "0x%llx)", (int)up_task_tid(t), (unsigned long long)at,
					 (unsigned long long)w);
				return true;
			}
		}
	}
	return false;
}
