// SPDX-License-Identifier: MIT
/*
 * rseq: where glibc keeps each thread's rseq area, so that the agent reads the cpu
 * there (two loads) instead of with lsl; and where it keeps each thread's tid (the
 * aggregation key tid, and comm's cache check).  It only reads the process's mappings,
 * symbols and memory; it never writes the process.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agg_thr.h"
#include "sym/sym.h"

#include "site/internal.h"

struct rseq_find {
	struct up_sites *mm;
	bool exe_seen;	  /* the first file mapped, the executable, was looked at */
	uint64_t addr[2]; /* __rseq_offset's and __rseq_size's in the process */
	/* the maps, read once (each find_map a read of /proc/PID/maps: 8 a process was
	   ~0.4 ms of every followed exec) */
	struct up_map *maps;
	unsigned nmaps, cap;
};

static int rseq_collect(void *arg, const struct up_map *m)
{
	struct rseq_find *rf = arg;
	const struct up_xol *x = &rf->mm->xol;

	/* ours are not the program's files: the agent's memfd, below the executable, was
	   taken for it (opened as an ELF file at every process's agent, and a static
	   executable's rseq variables went unseen) */
	for (unsigned i = 0; i < x->nmaps; i++)
		if (m->start >= x->maps[i].start && m->start - x->maps[i].start < x->maps[i].len)
			return 0;
	if (rf->nmaps == rf->cap) {
		unsigned cap = rf->cap ? 2 * rf->cap : 64;
		struct up_map *n = realloc(rf->maps, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		rf->maps = n;
		rf->cap = cap;
	}
	rf->maps[rf->nmaps++] = *m;
	return 0;
}

/* In glibc's dynamic linker (or a static executable: the first file mapped), where
   the two are: maps[at] the file's first mapping. */
static int rseq_map_fn(struct rseq_find *rf, unsigned at)
{
	static const char *const names[2] = { "__rseq_offset", "__rseq_size" };
	const struct up_map *m = &rf->maps[at];
	const char *base = strrchr(m->path, '/');
	struct up_sym_elf *elf;
	uint64_t off[2];
	struct up_sym s;
	bool glibc;

	if (!base || m->offset)
		return 0;
	glibc = !strncmp(base, "/ld-linux", 9) || !strncmp(base, "/libc.so", 8);
	if (!glibc && rf->exe_seen)
		return 0;
	rf->exe_seen = true;
	if (!(elf = up_ubp_file(&rf->mm->ctx->files, rf->mm->p, m)))
		return 0;
	for (int i = 0; i < 2; i++)
		if (up_sym_elf_lookup_object(elf, names[i], &s) ||
		    up_sym_elf_vaddr_to_offset(elf, s.value, &off[i]))
			return 0;
	/* each at the mapping of the file that holds its offset: the file's mappings
	   from its first on, while they follow each other */
	for (int i = 0; i < 2; i++)
		for (unsigned j = at;
		     !rf->addr[i] && j < rf->nmaps && !strcmp(rf->maps[j].path, m->path) &&
		     (j == at || rf->maps[j].start == rf->maps[j - 1].end);
		     j++) {
			const struct up_map *n = &rf->maps[j];

			if (off[i] >= n->offset && off[i] - n->offset < n->end - n->start)
				rf->addr[i] = n->start + (off[i] - n->offset);
		}
	return rf->addr[0] && rf->addr[1] ? 1 : -ENOENT;
}

/*
 * glibc (2.35 on) registers every thread it starts with rseq, and the kernel keeps the
 * thread's cpu in that area, at %fs:__rseq_offset + 4: the agent reads it there (two
 * loads) instead of with lsl (~12 ns a record).  The two variables are in ld.so (set
 * by the time main runs: a process caught at its exec has zeros there), so the agent
 * reads them itself; each thread named afterwards is checked to have the area.
 */
void agent_find_rseq(struct up_sites *mm)
{
	struct rseq_find rf = { .mm = mm };
	int r = 0;

	if (up_proc_for_each_map(mm->p, rseq_collect, &rf) < 0) {
		free(rf.maps);
		return;
	}
	for (unsigned i = 0; i < rf.nmaps && !r; i++)
		r = rseq_map_fn(&rf, i);
	free(rf.maps);
	if (r != 1)
		return;
	up_agent_rseq(mm->agent, rf.addr[0], rf.addr[1]);
	if (mm->ctx->opts->verbose)
		site_log(mm->ctx, "process %d: records take the cpu from glibc's rseq area",
			 (int)mm->pid);
}

struct tid_find {
	struct up_sites *mm;
	bool exe_seen;	/* the first file mapped, the executable, was looked at */
	uint64_t addr;	/* _thread_db_pthread_tid in the process */
};

/* In glibc's libc.so (or a static executable: the first file mapped): the descriptor
   libthread_db reads, { bits, count, offset } of struct pthread's tid. */
static int tid_map_fn(void *arg, const struct up_map *m)
{
	struct tid_find *tf = arg;
	const char *base = strrchr(m->path, '/');
	struct up_sym_elf *elf;
	struct up_map n = *m;
	uint64_t off, at = m->start;
	struct up_sym s;
	bool libc;

	if (!base || m->offset)
		return 0;
	libc = !strncmp(base, "/libc.so", 8);
	if (!libc && tf->exe_seen)
		return 0;
	tf->exe_seen = true;
	if (!(elf = up_ubp_file(&tf->mm->ctx->files, tf->mm->p, m)) ||
	    up_sym_elf_lookup_object(elf, "_thread_db_pthread_tid", &s) ||
	    up_sym_elf_vaddr_to_offset(elf, s.value, &off))
		return libc ? -ENOENT : 0;
	for (; !up_proc_find_map(tf->mm->p, at, &n) && !strcmp(n.path, m->path); at = n.end)
		if (off >= n.offset && off - n.offset < n.end - n.start) {
			tf->addr = n.start + (off - n.offset);
			return 1;
		}
	return -ENOENT;
}

/*
 * glibc keeps each thread's tid in its struct pthread, at the offset its
 * _thread_db_pthread_tid says (720 on x86-64 glibc 2.36); the kernel writes it at the
 * clone (CLONE_PARENT_SETTID) and clears it when the thread is gone
 * (CLONE_CHILD_CLEARTID), so a load at %fs:off is the thread's id with no syscall.
 * Each thread named afterwards is checked to have its tid there (up_site_name_thread).
 */
void agent_find_tid(struct up_sites *mm)
{
	struct tid_find tf = { .mm = mm };
	uint32_t d[3];

	if (up_proc_for_each_map(mm->p, tid_map_fn, &tf) != 1 ||
	    up_proc_read(mm->p, tf.addr, d, sizeof(d)) || d[0] != 32 || d[1] != 1 || !d[2] ||
	    d[2] > 4096 - 4)
		return;
	up_agent_tid_off(mm->agent, d[2]);
	if (mm->ctx->opts->verbose)
		site_log(mm->ctx, "process %d: tid keys read glibc's thread descriptor at %%fs:%u",
			 (int)mm->pid, d[2]);
}
