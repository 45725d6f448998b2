// SPDX-License-Identifier: MIT
/*
 * The unwind area of a traced process (agent/unwind.h).  Laid out as a bump heap: the
 * tables, each copied once, and the directories, each written once and never again
 * (a walk in the process may be reading the last one), the ctl swapped to the newest.
 * Nothing is ever read back from the area: what the tracer placed it keeps here.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/abi.h"
#include "agent/unwind.h"
#include "sym/file.h"
#include "sym/unwind.h"
#include "task/task.h"
#include "xol.h"

#define AREA_SIZE (64u << 20) /* a memfd's pages are there only once written */
/* the threads' caches first (read-write in the process), then the tables (read-only) */
#define CACHES UPA_UW_CACHES_SIZE
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#define NR_CLOSE 3
#define NR_MMAP 9
#define NR_MUNMAP 11
#define NR_MADVISE 28
#define NR_FTRUNCATE 77
#define NR_MEMFD_CREATE 319

struct placed {
	const struct up_unwind_table *t; /* up_unwind_get's, for the life of the tracer */
	uint64_t at;			 /* its copy, in the process */
};

/* Code of ours in the process with rows of its own (a page of trampolines, the agent's
   blob): a directory entry of its own, its table in the area. */
struct code {
	uint64_t start, len;
	uint64_t at;  /* the table's offset in the area */
	unsigned cap; /* rows it has room for (a live table, rewritten in place) */
	const struct up_unwind_table *t; /* a static table (the blob's), else NULL */
};

struct up_uwarea {
	struct code *code;
	size_t ncode;
	uint8_t *map; /* ours, read-write */
	uint64_t addr; /* the process's: the caches read-write, the rest read-only */
	size_t used;
	struct placed *placed;
	size_t nplaced;
	struct upa_uw_map *last; /* the last directory written (ours), nlast entries */
	size_t nlast;
	uint64_t last_at;
};

int up_uwarea_new(struct up_task *t, uint64_t scratch, uint64_t near, struct up_uwarea **out,
		  char *why, size_t whylen)
{
	static const char name[] = "uprobe-unwind";
	struct up_proc *p = up_task_proc(t);
	struct up_uwarea *w = calloc(1, sizeof(*w));
	uint64_t at = 0, flags = MAP_SHARED;
	int64_t fd = -1, r;
	char path[64];
	int rc, lfd;

	if (!w)
		return -ENOMEM;
	rc = up_proc_write_text(p, scratch, name, sizeof(name));
	if (!rc)
		rc = up_task_rsys(t, NR_MEMFD_CREATE, scratch, MFD_CLOEXEC, 0, 0, 0, 0, &fd);
	if (rc) {
		snprintf(why, whylen, "memfd_create in the process failed (%s)", strerror(-rc));
		free(w);
		return rc;
	}
	if (!up_xol_find_gap(p, near, AREA_SIZE, &at))
		flags |= MAP_FIXED_NOREPLACE;
	rc = up_task_rsys(t, NR_FTRUNCATE, (uint64_t)fd, AREA_SIZE, 0, 0, 0, 0, &r);
	if (!rc)
		rc = up_task_rsys(t, NR_MMAP, at, AREA_SIZE, PROT_READ, flags, (uint64_t)fd, 0,
				  (int64_t *)&w->addr);
	if (!rc && w->addr >= (uint64_t)-4096)
		rc = (int)(int64_t)w->addr;
	if (!rc) /* its first pages writable: the caches */
		rc = up_task_rsys(t, NR_MMAP, w->addr, CACHES, PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_FIXED, (uint64_t)fd, 0, &r);
	if (!rc)
		rc = up_task_rsys(t, NR_MADVISE, w->addr, AREA_SIZE, MADV_DONTFORK, 0, 0, 0, &r);
	if (rc) {
		snprintf(why, whylen, "cannot map the unwind tables in the process (%s)",
			 strerror(-rc));
		goto unmap;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)up_proc_pid(p), (int)fd);
	lfd = open(path, O_RDWR | O_CLOEXEC);
	if (lfd < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot open %s (%s)", path, strerror(errno));
		goto unmap;
	}
	w->map = mmap(NULL, AREA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
	w->used = CACHES;
	close(lfd);
	if (w->map == MAP_FAILED) {
		rc = -errno;
		w->map = NULL;
		snprintf(why, whylen, "cannot map the unwind tables (%s)", strerror(-rc));
		goto unmap;
	}
	up_task_rsys(t, NR_CLOSE, (uint64_t)fd, 0, 0, 0, 0, 0, &r);
	*out = w;
	return 0;
unmap:
	if (w->addr && w->addr < (uint64_t)-4096)
		up_task_rsys(t, NR_MUNMAP, w->addr, AREA_SIZE, 0, 0, 0, 0, &r);
	up_task_rsys(t, NR_CLOSE, (uint64_t)fd, 0, 0, 0, 0, 0, &r);
	free(w);
	return rc;
}

void up_uwarea_free(struct up_uwarea *w)
{
	if (!w)
		return;
	if (w->map)
		munmap(w->map, AREA_SIZE);
	free(w->placed);
	free(w->last);
	free(w->code);
	free(w);
}

void up_uwarea_map(const struct up_uwarea *w, uint64_t *start, uint64_t *len)
{
	*start = w->addr;
	*len = AREA_SIZE;
}

uint64_t up_uwarea_caches(const struct up_uwarea *w)
{
	return w->addr;
}

size_t up_uwarea_used(const struct up_uwarea *w)
{
	return w ? w->used : 0;
}

/* n bytes of the area, 16-aligned: their offset, or (size_t)-1. */
static size_t take(struct up_uwarea *w, size_t n)
{
	size_t at = (w->used + 15) & ~(size_t)15;

	if (at > AREA_SIZE || n > AREA_SIZE - at)
		return (size_t)-1;
	w->used = at + n;
	return at;
}

/* t's copy in the area (placed once): its address in the process, 0 when it has none. */
static uint64_t place(struct up_uwarea *w, const struct up_unwind_table *t)
{
	struct placed *v;
	size_t at;

	for (size_t i = 0; i < w->nplaced; i++)
		if (w->placed[i].t == t)
			return w->placed[i].at;
	at = take(w, t->size);
	if (at == (size_t)-1)
		return 0;
	v = realloc(w->placed, (w->nplaced + 1) * sizeof(*v));
	if (!v)
		return 0;
	w->placed = v;
	memcpy(w->map + at, t, t->size);
	v[w->nplaced++] = (struct placed){ t, w->addr + at };
	return w->addr + at;
}

extern const uint8_t up_agent_blob_elf[];
extern const size_t up_agent_blob_elf_size;

static const struct up_unwind_table *blob_table;
static pthread_once_t blob_once = PTHREAD_ONCE_INIT;

static void blob_build(void)
{
	char *img = malloc(up_agent_blob_elf_size);
	struct up_unwind_table *t = NULL;
	Elf *e;

	if (!img)
		return;
	memcpy(img, up_agent_blob_elf, up_agent_blob_elf_size);
	elf_version(EV_CURRENT);
	e = elf_memory(img, up_agent_blob_elf_size);
	if (e && !up_unwind_build(e, &t) && t && t->nrows && t->nsegs) {
		t->flags |= UP_UNWIND_OURS;
		blob_table = t;
	} else {
		free(t);
	}
	if (e)
		elf_end(e);
	free(img); /* the table keeps nothing of the image */
}

const struct up_unwind_table *up_uwarea_blob_table(void)
{
	pthread_once(&blob_once, blob_build);
	return blob_table;
}

static struct code *code_of(struct up_uwarea *w, uint64_t start)
{
	struct code *v;

	for (size_t i = 0; i < w->ncode; i++)
		if (w->code[i].start == start)
			return &w->code[i];
	v = realloc(w->code, (w->ncode + 1) * sizeof(*v));
	if (!v)
		return NULL;
	w->code = v;
	v[w->ncode] = (struct code){ .start = start };
	return &v[w->ncode++];
}

int up_uwarea_blob(struct up_uwarea *w, uint64_t start, uint64_t len)
{
	const struct up_unwind_table *t = up_uwarea_blob_table();
	struct code *c;
	uint64_t at;

	if (!t)
		return -ENOENT;
	c = code_of(w, start);
	if (!c)
		return -ENOMEM;
	if (c->t == t && c->len == len)
		return 0;
	at = place(w, t);
	if (!at)
		return -ENOSPC;
	*c = (struct code){ start, len, at - w->addr, 0, t };
	return 1;
}

int up_uwarea_code(struct up_uwarea *w, uint64_t start, uint64_t len,
		   const struct up_unwind_row *rows, unsigned n)
{
	struct code *c = code_of(w, start);
	struct up_unwind_table *t;
	int fresh = 0;

	if (!c)
		return -ENOMEM;
	if (c->t || !c->cap || c->cap < n || c->len != len) {
		unsigned cap = n < 64 ? 64 : n * 2;
		size_t at = take(w, sizeof(*t) + (size_t)cap * sizeof(*rows));

		if (at == (size_t)-1)
			return -ENOSPC;
		*c = (struct code){ start, len, at, cap, NULL };
		fresh = 1;
	}
	/* in place: the process is quiesced, and a walk takes no row of it into a cache */
	t = (struct up_unwind_table *)(w->map + c->at);
	memset(t, 0, sizeof(*t));
	t->base = start;
	t->nsegs = 1;
	t->seg[0].offset = start;
	t->seg[0].vaddr = start;
	t->seg[0].filesz = len;
	t->flags = UP_UNWIND_LIVE;
	if (n)
		memcpy(t->rows, rows, n * sizeof(*rows));
	t->nrows = n;
	t->size = sizeof(*t) + (uint64_t)c->cap * sizeof(*rows);
	return fresh;
}

/* The code entries into the file mappings m[0..n) (sorted by start), in order. */
static struct upa_uw_map *with_code(struct up_uwarea *w, struct upa_uw_map *m, size_t *n)
{
	struct upa_uw_map *v = realloc(m, (*n + w->ncode + 1) * sizeof(*v));

	if (!v)
		return m;
	for (size_t i = 0; i < w->ncode; i++) {
		const struct code *c = &w->code[i];
		const struct up_unwind_table *t = c->t;
		struct upa_uw_map e = { c->start, c->start + c->len,
					t ? t->seg[0].offset - t->seg[0].vaddr : c->start,
					w->addr + c->at };
		size_t j = 0;

		while (j < *n && v[j].start < e.start)
			j++;
		if ((j > 0 && v[j - 1].end > e.start) || (j < *n && v[j].start < e.end))
			continue; /* overlaps another entry: not ours to describe */
		memmove(&v[j + 1], &v[j], (*n - j) * sizeof(*v));
		v[j] = e;
		(*n)++;
	}
	return v;
}

int up_uwarea_sync(struct up_uwarea *w, pid_t pid, uint64_t *dir)
{
	char path[64], line[PATH_MAX + 128];
	struct upa_uw_map *m = NULL;
	size_t n = 0, at;
	FILE *f;
	int rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end, off, ino;
		const struct up_unwind_table *t;
		struct upa_uw_map *v;
		char perms[8], *p;
		int pos = 0;

		/* the maps trace/stack.c's walk knows: executable, of a file (not our own
		   memfds: the agent's code has an entry of its own) */
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %" SCNu64 " %n",
			   &start, &end, perms, &off, &ino, &pos) < 5 ||
		    !pos || perms[2] != 'x' || line[pos] != '/' ||
		    !strncmp(line + pos, "/memfd:uprobe-", 14))
			continue;
		p = line + pos;
		p[strcspn(p, "\n")] = '\0';
		v = realloc(m, (n + 1) * sizeof(*v));
		if (!v) {
			rc = -ENOMEM;
			break;
		}
		m = v;
		t = up_unwind_get(p, &(struct up_file_map){ (int)pid, start, end, ino });
		m[n++] = (struct upa_uw_map){ start, end, off, t && t->nrows ? place(w, t) : 0 };
	}
	fclose(f);
	if (rc) {
		free(m);
		return rc;
	}
	m = with_code(w, m, &n);
	if (w->last && n == w->nlast && !memcmp(m, w->last, n * sizeof(*m))) {
		free(m);
		*dir = w->last_at;
		return 0;
	}
	at = take(w, sizeof(struct upa_uw_dir) + n * sizeof(*m));
	if (at == (size_t)-1) {
		free(m);
		*dir = w->last_at;
		return -ENOSPC;
	}
	((struct upa_uw_dir *)(w->map + at))->n = n;
	if (n)
		memcpy(w->map + at + sizeof(struct upa_uw_dir), m, n * sizeof(*m));
	free(w->last);
	w->last = m;
	w->nlast = n;
	w->last_at = w->addr + at;
	*dir = w->last_at;
	return 0;
}
