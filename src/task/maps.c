/* SPDX-License-Identifier: MIT */
/* /proc/PID/maps of a traced process, one line at a time; no caching (maps change). */
#include "task/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int parse_line(const char *line, struct up_map *m)
{
	char perms[8] = "";
	int pos = 0;
	unsigned long long start, end, off, inode;
	unsigned dmaj, dmin;
	const char *path;
	size_t n;

	if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off, &dmaj,
		   &dmin, &inode, &pos) < 7)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->offset = off;
	m->ino = inode;
	m->r = perms[0] == 'r';
	m->w = perms[1] == 'w';
	m->x = perms[2] == 'x';
	m->shared = perms[3] == 's';
	path = line + pos;
	n = strcspn(path, "\n");
	if (n >= sizeof(m->path))
		n = sizeof(m->path) - 1;
	memcpy(m->path, path, n);
	m->path[n] = 0;
	return 0;
}

int up_proc_for_each_map(struct up_proc *p, int (*fn)(void *arg, const struct up_map *m),
			 void *arg)
{
	char path[64], line[4096 + 128];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", p->pid);
	f = fopen(path, "re");
	if (!f) {
		struct up_task *t = up__live_task(p);

		/* a zombie leader has no maps; a live thread has the same */
		if (t) {
			snprintf(path, sizeof(path), "/proc/%d/task/%d/maps", p->pid, t->tid);
			f = fopen(path, "re");
		}
		if (!f)
			return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		struct up_map m;

		if (parse_line(line, &m) < 0)
			continue;
		ret = fn(arg, &m);
		if (ret)
			break;
	}
	fclose(f);
	return ret;
}

struct find_arg {
	uint64_t addr;
	struct up_map *out;
	unsigned nmaps;
};

static int find_fn(void *arg, const struct up_map *m)
{
	struct find_arg *a = arg;

	a->nmaps++;
	if (a->addr >= m->start && a->addr < m->end) {
		*a->out = *m;
		return 1;
	}
	return 0;
}

int up_proc_find_map(struct up_proc *p, uint64_t addr, struct up_map *out)
{
	struct find_arg a = { addr, out, 0 };
	int r = up_proc_for_each_map(p, find_fn, &a);

	/* no maps at all (or none to read): the address space is gone (killed, exiting) */
	if (r < 0 || !a.nmaps)
		return -ESRCH;
	return r == 1 ? 0 : -ENOENT;
}
