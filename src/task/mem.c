/* SPDX-License-Identifier: MIT */
/*
 * Memory of a traced process: data through process_vm_readv/writev (one syscall, no
 * stop needed), falling back to /proc/PID/mem; text through a forced /proc/PID/mem
 * write (the page becomes the process's private copy), falling back to
 * PTRACE_POKETEXT read-modify-write where the kernel refuses forced writes.  The
 * /proc/PID/mem descriptor belongs to one address space: reopened after exec.
 */
#include "task/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

int up_proc_read(struct up_proc *p, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t r;

	if (!len)
		return 0;
	if (p->gone)
		return -ESRCH;
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
