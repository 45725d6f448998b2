// SPDX-License-Identifier: MIT
/*
 * USDT semaphores in traced processes (see refctr.h).  It writes 2 bytes of a
 * process's data through /proc/PID/mem and nothing else; it never touches code.
 */
#include "trace/refctr.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

uint64_t up_refctr_vaddr(pid_t pid, dev_t dev, ino_t ino, uint64_t off)
{
	char path[64], line[4096 + 128];
	uint64_t found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		uint64_t start, end, moff;
		unsigned maj, min;
		unsigned long long mino;
		char perms[8];

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %llu", &start, &end,
			   perms, &moff, &maj, &min, &mino) < 7)
			continue;
		if (makedev(maj, min) != dev || (ino_t)mino != ino || perms[1] != 'w')
			continue;
		if (off >= moff && off - moff + 2 <= end - start)
			found = start + (off - moff);
	}
	fclose(f);
	return found;
}

static int adjust(pid_t pid, uint64_t addr, int d)
{
	char path[64];
	int16_t v;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (pread(fd, &v, sizeof(v), (off_t)addr) != (ssize_t)sizeof(v)) {
		rc = -EIO;
	} else if (v + d < 0) {
		rc = -EINVAL; /* someone else's count went wrong: leave it (the kernel does) */
	} else {
		v = (int16_t)(v + d);
		if (pwrite(fd, &v, sizeof(v), (off_t)addr) != (ssize_t)sizeof(v))
			rc = -EIO;
	}
	close(fd);
	return rc;
}

static struct up_refctr *find(struct up_refctr_set *s, uint64_t addr)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].addr == addr)
			return &s->v[i];
	return NULL;
}

int up_refctr_get(struct up_refctr_set *s, pid_t pid, uint64_t addr)
{
	struct up_refctr *r = find(s, addr);
	int rc;

	if (!r) {
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 8;
			struct up_refctr *nv = realloc(s->v, cap * sizeof(*nv));

			if (!nv)
				return -ENOMEM;
			s->v = nv;
			s->cap = cap;
		}
		r = &s->v[s->n];
		r->addr = addr;
		r->n = 0;
	}
	rc = adjust(pid, addr, 1);
	if (rc)
		return rc;
	if (r == &s->v[s->n])
		s->n++;
	r->n++;
	return 0;
}

int up_refctr_put(struct up_refctr_set *s, pid_t pid, uint64_t addr)
{
	struct up_refctr *r = find(s, addr);

	if (!r || !r->n)
		return -ENOENT;
	r->n--;
	if (!r->n)
		*r = s->v[--s->n];
	return adjust(pid, addr, -1);
}

void up_refctr_put_all(struct up_refctr_set *s, pid_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		adjust(pid, s->v[i].addr, -(int)s->v[i].n);
	s->n = 0;
}

void up_refctr_forget(struct up_refctr_set *s, uint64_t addr)
{
	struct up_refctr *r;

	if (!addr) {
		s->n = 0;
		return;
	}
	r = find(s, addr);
	if (r)
		*r = s->v[--s->n];
}

int up_refctr_copy(struct up_refctr_set *dst, const struct up_refctr_set *src)
{
	if (!src->n)
		return 0;
	dst->v = malloc(src->n * sizeof(*dst->v));
	if (!dst->v)
		return -ENOMEM;
	memcpy(dst->v, src->v, src->n * sizeof(*dst->v));
	dst->n = dst->cap = src->n;
	return 0;
}

void up_refctr_free(struct up_refctr_set *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}
