/* SPDX-License-Identifier: MIT */
/*
 * Memory of a traced process: data through process_vm_readv/writev (one syscall, no
 * stop needed), falling back to /proc/PID/mem; text through a forced /proc/PID/mem
 * write (the page becomes the process's private copy), falling back to
 * PTRACE_POKETEXT read-modify-write where the kernel refuses forced writes.  The
 * /proc/PID/mem descriptor belongs to one address space: reopened after exec.
 *
 * While every thread of a process is stopped (quiesced), its memory is read and written
 * through whole cached pages: a batch of probes reads each page of text once and writes
 * each page it changed once, before any thread runs again, instead of a read and a write
 * per probe and per slot (10,000 probes: 40,000 system calls -> a few hundred).  Nothing
 * else changes the memory meanwhile.  Every resume writes the cache back first
 * (up__mem_flush); the outermost unquiesce ends it; an exec or exit drops it unwritten.
 */
#include "task/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <unistd.h>

int up__proc_open_mem(struct up_proc *p)
{
	char path[64];

	if (p->memfd >= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
	p->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (p->memfd < 0)
		p->memfd = open(path, O_RDONLY | O_CLOEXEC);
	return p->memfd < 0 ? -errno : 0;
}

void up__proc_close_mem(struct up_proc *p)
{
	up__mem_drop(p);
	if (p->memfd >= 0)
		close(p->memfd);
	p->memfd = -1;
}

static pid_t mem_pid(struct up_proc *p)
{
	struct up_task *t = up__live_task(p);

	return t ? t->tid : p->pid;
}

static int mem_pio(struct up_proc *p, uint64_t addr, void *buf, size_t len, bool wr)
{
	size_t done = 0;

	if (p->memfd < 0 && up__proc_open_mem(p) < 0)
		return -EIO;
	while (done < len) {
		ssize_t r = wr ? pwrite(p->memfd, (const char *)buf + done, len - done,
					(off_t)(addr + done))
			       : pread(p->memfd, (char *)buf + done, len - done,
				       (off_t)(addr + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EFAULT;
		done += (size_t)r;
	}
	return 0;
}

/* ---- the page cache of a quiesced process ---------------------------------------- */

#define TC_PAGE 4096u
#define TC_MAX 512 /* pages (2 MiB); when full, written back and started anew */
#define TC_HASH 1024

struct up_tpage {
	uint64_t addr;
	uint32_t lo, hi; /* the bytes written since the last flush: [lo, hi); clean: equal */
	uint8_t data[TC_PAGE];
};

struct up_tcache {
	unsigned n;
	int16_t hash[TC_HASH]; /* 1 + index into pages, 0: free (open addressing) */
	struct up_tpage *pages[TC_MAX];
};

static int poke_text(struct up_task *t, uint64_t addr, const uint8_t *buf, size_t len);

static bool tc_on(const struct up_proc *p)
{
	return p->quiesce > 0 && !p->gone;
}

static void tc_clear(struct up_tcache *tc)
{
	for (unsigned i = 0; i < tc->n; i++)
		free(tc->pages[i]);
	tc->n = 0;
	memset(tc->hash, 0, sizeof(tc->hash));
}

void up__mem_flush(struct up_proc *p)
{
	struct up_tcache *tc = p->tc;

	for (unsigned i = 0; tc && i < tc->n; i++) {
		struct up_tpage *pg = tc->pages[i];
		uint64_t at = pg->addr + pg->lo;
		size_t len = pg->hi - pg->lo;
		struct up_task *t;
		int err;

		if (!len)
			continue;
		pg->lo = pg->hi = 0;
		err = mem_pio(p, at, pg->data + (at - pg->addr), len, true);
		if (err && (t = up__stopped_task(p)))
			err = poke_text(t, at, pg->data + (at - pg->addr), len);
		if (err)
			up__log(p->e, "process %d: cannot write memory at 0x%llx: %s", p->pid,
				(unsigned long long)at, strerror(-err));
	}
}

void up_proc_flush(struct up_proc *p)
{
	up__mem_flush(p);
}

void up__mem_drop(struct up_proc *p)
{
	if (!p->tc)
		return;
	tc_clear(p->tc);
	free(p->tc);
	p->tc = NULL;
}

void up__mem_release(struct up_proc *p)
{
	up__mem_flush(p);
	up__mem_drop(p);
}

/* The cached page at pa (loaded on first use), or NULL when it cannot be read. */
static struct up_tpage *tc_page(struct up_proc *p, uint64_t pa)
{
	struct up_tcache *tc = p->tc;
	struct up_tpage *pg;
	unsigned h;

	if (!tc) {
		tc = calloc(1, sizeof(*tc));
		if (!tc)
			return NULL;
		p->tc = tc;
	}
	for (h = (unsigned)(pa / TC_PAGE) % TC_HASH; tc->hash[h]; h = (h + 1) % TC_HASH)
		if (tc->pages[tc->hash[h] - 1]->addr == pa)
			return tc->pages[tc->hash[h] - 1];
	if (tc->n == TC_MAX) {
		up__mem_flush(p);
		tc_clear(tc);
		h = (unsigned)(pa / TC_PAGE) % TC_HASH;
	}
	pg = malloc(sizeof(*pg));
	if (!pg)
		return NULL;
	if (mem_pio(p, pa, pg->data, TC_PAGE, false) < 0) {
		free(pg);
		return NULL;
	}
	pg->addr = pa;
	pg->lo = pg->hi = 0;
	tc->pages[tc->n++] = pg;
	tc->hash[h] = (int16_t)tc->n;
	return pg;
}

/*
 * Through the cache: 0, or -ENOENT when a page cannot be loaded; then the cache is
 * written back (and for a write forgotten) and the caller goes the direct way.
 */
static int tc_access(struct up_proc *p, uint64_t addr, void *buf, size_t len, bool wr)
{
	uint8_t *b = buf;

	for (size_t done = 0; done < len;) {
		uint64_t at = addr + done, pa = at & ~(uint64_t)(TC_PAGE - 1);
		uint32_t off = (uint32_t)(at - pa);
		size_t n = TC_PAGE - off < len - done ? TC_PAGE - off : len - done;
		struct up_tpage *pg = tc_page(p, pa);

		if (!pg) {
			up__mem_flush(p);
			if (wr && p->tc)
				tc_clear(p->tc);
			return -ENOENT;
		}
		if (wr) {
			memcpy(pg->data + off, b + done, n);
			if (pg->lo == pg->hi) {
				pg->lo = off;
				pg->hi = off + (uint32_t)n;
			} else {
				pg->lo = off < pg->lo ? off : pg->lo;
				pg->hi = off + n > pg->hi ? off + (uint32_t)n : pg->hi;
			}
		} else {
			memcpy(b + done, pg->data + off, n);
		}
		done += n;
	}
	return 0;
}

/* ---- reads and writes ------------------------------------------------------------ */

int up_proc_read(struct up_proc *p, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t r;

	if (!len)
		return 0;
	if (p->gone)
		return -ESRCH;
	if (tc_on(p) && !tc_access(p, addr, buf, len, false))
		return 0;
	r = process_vm_readv(mem_pid(p), &local, 1, &remote, 1, 0);
	if (r == (ssize_t)len)
		return 0;
	return mem_pio(p, addr, buf, len, false);
}

int up_task_read(struct up_task *t, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	if (!len)
		return 0;
	if (tc_on(t->proc) && !tc_access(t->proc, addr, buf, len, false))
		return 0;
	return process_vm_readv(t->tid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

int up_proc_write(struct up_proc *p, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t r;

	if (!len)
		return 0;
	if (p->gone)
		return -ESRCH;
	if (tc_on(p) && !tc_access(p, addr, (void *)buf, len, true))
		return 0;
	r = process_vm_writev(mem_pid(p), &local, 1, &remote, 1, 0);
	if (r == (ssize_t)len)
		return 0;
	return mem_pio(p, addr, (void *)buf, len, true);
}

/* PTRACE_POKETEXT, word by word, through a stopped thread. */
static int poke_text(struct up_task *t, uint64_t addr, const uint8_t *buf, size_t len)
{
	uint64_t a = addr & ~(uint64_t)7;

	while (a < addr + len) {
		long word;
		uint8_t *w = (uint8_t *)&word;

		errno = 0;
		word = up__ptrace(PTRACE_PEEKTEXT, t->tid, (void *)(uintptr_t)a, 0);
		if (errno)
			return -errno;
		for (unsigned i = 0; i < 8; i++)
			if (a + i >= addr && a + i < addr + len)
				w[i] = buf[a + i - addr];
		if (up__ptrace(PTRACE_POKETEXT, t->tid, (void *)(uintptr_t)a, (void *)word) < 0)
			return -errno;
		a += 8;
	}
	return 0;
}

int up_proc_write_text(struct up_proc *p, uint64_t addr, const void *buf, size_t len)
{
	struct up_task *t;
	int err;

	if (!len)
		return 0;
	if (p->gone)
		return -ESRCH;
	if (tc_on(p) && !tc_access(p, addr, (void *)buf, len, true))
		return 0;
	err = mem_pio(p, addr, (void *)buf, len, true);
	if (err == 0)
		return 0;
	/*
	 * PTRACE_POKETEXT only where the kernel refuses the forced write but the address
	 * space is still there: after an exec the descriptor's memory is gone while a tid
	 * already names the new image, and a poke would leave our bytes in it.
	 */
	{
		uint8_t b;

		if (mem_pio(p, addr, &b, 1, false) < 0)
			return -ESRCH;
	}
	t = up__stopped_task(p);
	if (t)
		return poke_text(t, addr, buf, len);
	err = up_proc_quiesce(p);
	if (err == 0) {
		t = up__stopped_task(p);
		err = t ? poke_text(t, addr, buf, len) : -ESRCH;
	}
	up_proc_unquiesce(p);
	if (err < 0)
		up__log(p->e, "process %d: cannot write text at 0x%llx: %s", p->pid,
			(unsigned long long)addr, strerror(-err));
	return err;
}
