// SPDX-License-Identifier: MIT
/*
 * Thread naming: how the agent tells threads apart in the process -- the word at
 * the thread's TLS block (%fs:0), or its stack while some thread has no TLS block yet
 * (notls) -- and where the program's thread gets its block, for the one-shot trap
 * probe the arbiter places there (the TLS watch).  It never changes a thread's
 * registers or the program's memory, and never places a probe itself.
 */
#include <elf.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sym/sym.h"

#include "agent/agg_thr.h"
#include "site/internal.h"

/* Is thread t counted among those without TLS?  (NULL, or no memory to list it: a
   thread counted for good.) */
static void set_notls(struct up_sites *mm, struct up_task *t, bool notls)
{
	unsigned i = 0;

	while (t && i < mm->nnotls && mm->notls_task[i] != t)
		i++;
	if (t && (i < mm->nnotls) == notls)
		return;
	if (t && !notls) {
		mm->notls_task[i] = mm->notls_task[--mm->nnotls];
		if (mm->notls)
			mm->notls--;
		return;
	}
	if (!notls)
		return;
	if (t && mm->nnotls == mm->capnotls) {
		unsigned cap = mm->capnotls ? mm->capnotls * 2 : 8;
		struct up_task **v = realloc(mm->notls_task, cap * sizeof(*v));

		if (v) {
			mm->notls_task = v;
			mm->capnotls = cap;
		}
	}
	if (t && mm->nnotls < mm->capnotls)
		mm->notls_task[mm->nnotls++] = t;
	mm->notls++; /* unlisted: never taken back, lsl for good, which is safe */
}

static bool is_notls(const struct up_sites *mm, const struct up_task *t)
{
	for (unsigned i = 0; i < mm->nnotls; i++)
		if (mm->notls_task[i] == t)
			return true;
	return false;
}

/* No thread without TLS left: records name threads by %fs:0 again. */
static void agent_all_tls(struct up_sites *mm)
{
	if (mm->agent && !mm->notls && up_agent_fs0(mm->agent) && mm->ctx->opts->verbose)
		site_log(mm->ctx, "process %d: every thread has its TLS block: records name "
			       "threads by %%fs:0", (int)mm->pid);
}

/* Is key (a TLS block's first word) another live thread's of mm's than tid's?  One
   past its exit stop is not (glibc gives its block to a new thread once the kernel
   cleared its tid, after that stop): its records keep its name (up_agent_thread). */
static bool shares_tls(struct up_sites *mm, uint64_t key, pid_t tid)
{
	pid_t prev = up_agent_thread_tid(mm->agent, key);
	struct up_proc *p;
	struct up_task *t;

	if (!prev || prev == tid)
		return false;
	for (unsigned i = 0; (p = sites_proc(mm, i)); i++)
		if ((t = up_proc_find_task(p, prev)) && !up_task_exited(t))
			return true;
	return false;
}

/*
 * The agent's name for thread t: the word at its TLS block (%fs:0), or, while any
 * thread has none (a process caught at its exec, before its dynamic linker ran), its
 * stack pointer for every thread, and the cpu from lsl.  Named again once it has one.
 */
void up_site_name_thread(struct up_sites *mm, struct up_task *t)
{
	struct user_regs_struct r;
	struct up_map m;
	uint64_t key = 0, offset_at, size_at;
	int64_t offset = 0;
	uint32_t size = 0;
	int32_t cpu, tid = 0;
	uint32_t off;
	bool tls;

	if (!mm->agent || up_task_get_regs(t, &r))
		return;
	if (!up_proc_find_map(up_task_proc(t), r.rsp, &m)) {
		/* the main thread's stack grows down as it goes */
		uint64_t lo = !strcmp(m.path, "[stack]") && m.start > (64u << 20) ? m.start - (64u << 20)
									      : m.start;

		up_agent_stack(mm->agent, lo, m.end, up_task_tid(t));
	}
	tls = r.fs_base && !up_task_read(t, r.fs_base, &key, sizeof(key)) && key;
	if (tls && shares_tls(mm, key, up_task_tid(t))) {
		/* two live threads on one TLS block (a clone without CLONE_SETTLS): %fs:0
		   and the fs base name neither, and a return table of its own would be
		   written by both; for good */
		set_notls(mm, NULL, true);
		tls = false;
	}
	set_notls(mm, t, !tls);
	if (!tls) {
		up_agent_no_fs0(mm->agent);
		return;
	}
	/* once glibc has set its rseq area up, every thread must have one where it says */
	if (up_agent_rseq_at(mm->agent, &offset_at, &size_at) &&
	    !up_task_read(t, size_at, &size, sizeof(size)) && size >= 20 &&
	    (up_task_read(t, offset_at, &offset, sizeof(offset)) ||
	     up_task_read(t, r.fs_base + (uint64_t)offset + 4, &cpu, sizeof(cpu))))
		up_agent_no_rseq(mm->agent); /* lsl, then */
	/* and, once glibc has set it, its tid where glibc's descriptor says (else a
	   gettid a hit); libc is mapped once a thread has TLS */
	if (!mm->tid_looked) {
		mm->tid_looked = true;
		agent_find_tid(mm);
	}
	if ((off = up_agent_tid_off_get(mm->agent)) &&
	    !up_task_read(t, r.fs_base + off, &tid, sizeof(tid)) && tid &&
	    tid != up_task_tid(t)) {
		up_agent_tid_off(mm->agent, 0);
		if (mm->ctx->opts->verbose)
			site_log(mm->ctx, "process %d: thread %d has %d where glibc keeps its tid: "
					  "tid keys take a gettid a hit",
				 (int)mm->pid, (int)up_task_tid(t), (int)tid);
	}
	up_agent_thread(mm->agent, key, up_task_tid(t));
	agent_all_tls(mm);
}

/* A thread the agent names by its stack has its TLS block by now, perhaps. */
void up_site_hit_name(struct up_sites *mm, struct up_task *t, const struct user_regs_struct *r)
{
	if (mm->nnotls && r->fs_base && mm->agent && is_notls(mm, t))
		up_site_name_thread(mm, t);
}

/* Thread t is gone (exit, exec): it no longer counts. */
void up_site_thread_gone(struct up_sites *mm, struct up_task *t)
{
	if (is_notls(mm, t)) {
		set_notls(mm, t, false);
		agent_all_tls(mm);
	}
}

/*
 * Where the program's thread has its TLS block at last, 0: unknown.  A dynamic program's
 * entry point (its dynamic linker set the block up); a static one's main, its start
 * code having done it -- relocated as _start is (a static PIE), from the auxiliary
 * vector's AT_ENTRY (AT_BASE, the interpreter's, is 0 there).
 */
static uint64_t tls_point(struct up_sites *mm)
{
	char path[64];
	uint64_t av[2], entry = 0, interp = 0;
	struct up_sym_elf *elf;
	struct up_sym start, main_;
	struct up_map m;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)mm->pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fread(av, sizeof(av), 1, f) == 1 && av[0] != AT_NULL) {
		if (av[0] == AT_ENTRY)
			entry = av[1];
		else if (av[0] == AT_BASE)
			interp = av[1];
	}
	fclose(f);
	if (interp || !entry)
		return entry;
	/* the program's file is the one mapped at its entry point */
	if (up_proc_find_map(mm->p, entry, &m) || m.path[0] != '/' ||
	    !(elf = up_ubp_file(&mm->ctx->files, mm->p, &m)) ||
	    up_sym_elf_lookup(elf, "main", &main_) || up_sym_elf_lookup(elf, "_start", &start))
		return 0;
	return main_.value + (entry - start.value);
}

/*
 * A process with threads the agent names by their stack gets a one-shot trap probe
 * (the arbiter places it, the process quiesced) where its thread has a TLS block: the
 * trap names it again (up_site_hit_name).  Other threads without one are named again
 * at their next trap hit.
 */
uint64_t up_site_tls_point(struct up_sites *mm)
{
	uint64_t entry;

	if (!mm->agent || !mm->notls)
		return 0;
	entry = tls_point(mm);
	/* a jmp over it would be broken by the int3 */
	if (!entry || fast_overlapping(mm, entry, entry + 1))
		return 0;
	return entry;
}

void up_site_comm_changed(struct up_sites *mm)
{
	if (mm && mm->agent)
		up_agent_comm_changed(mm->agent);
}
