// SPDX-License-Identifier: MIT
/*
 * Where a file is mapped in a traced process (/proc/PID/maps, by device and inode),
 * and the dynamic linker's rendezvous function (_dl_debug_state), probed as debuggers
 * do so that libraries mapped later are armed before the thread that mapped them runs
 * on.
 *
 * It only reads /proc; the one probe it places is the rendezvous's.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "sym/file.h"
#include "sym/sym.h"
#include "trace/session_int.h"

/* Can an address of a process be named (printed, a stack, a key, a caller's hook)?
   Not when every probe only counts (-c with no trace: arm.c's UPROBE_F_COUNT). */
static bool names_addrs(const struct up_trace *tr)
{
	if (tr->opts.out)
		return true;
	for (unsigned i = 0; i < tr->nspecs; i++)
		if (tr->specs[i]->hist || tr->specs[i]->hit_fn)
			return true;
	return false;
}

static void on_ldso(struct uprobe *u, uprobe_regs_t *regs)
{
	struct tproc *tp = u->data;
	struct tproc *cur = tr_proc_of(tp->tr, uprobe_current_pid(tp->tr->ctx));

	(void)regs;
	/*
	 * The link map changed: arm what is mapped now, before the thread goes on (the
	 * registrations are queued and done before it resumes).
	 */
	if (cur) {
		tr_arm_proc(tp->tr, cur);
		/* the fast path's stacks walk the new files' tables too, and their frames
		   are named by the maps of now (a process gone keeps the last it had); a
		   session that names no address (counts alone) reads no maps for it */
		uprobe_stacks_sync(tp->tr->ctx, cur->pid);
		if (names_addrs(tp->tr))
			up_stack_syms_load(tr_syms_of(cur));
		tr_raw_maps(tp->tr, cur);
	}
}

struct maps_line {
	uint64_t start, end, offset;
	bool x;
	dev_t dev;
	ino_t ino;
	char path[PATH_MAX];
};

/* Past this, a process's maps are read line by line as before (65,530 mappings with
   long paths would be a few hundred MiB held). */
#define MAPS_HOLD_MAX (8u << 20)

bool tr_maps_hold(struct up_trace *tr, pid_t pid)
{
	char path[64], *text;
	size_t len;

	if (tr->maps.text)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (up_file_read_whole(path, MAPS_HOLD_MAX, &text, &len))
		return false;
	if (!len) { /* nothing to hold: a zombie's */
		free(text);
		return false;
	}
	tr->maps.pid = pid;
	tr->maps.text = text;
	tr->maps.len = len;
	return true;
}

void tr_maps_release(struct up_trace *tr)
{
	free(tr->maps.text);
	memset(&tr->maps, 0, sizeof(tr->maps));
}

/* Calls fn for each line of /proc/PID/maps (as held, if they are) until it returns
   nonzero. */
static int for_each_map(struct up_trace *tr, pid_t pid,
			int (*fn)(void *arg, const struct maps_line *m), void *arg)
{
	char path[64], line[PATH_MAX + 128];
	FILE *f;
	int rc = 0;

	if (tr->maps.text && tr->maps.pid == pid) {
		f = fmemopen(tr->maps.text, tr->maps.len, "r");
	} else {
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
		f = fopen(path, "re");
	}
	if (!f)
		return -errno;
	while (!rc && fgets(line, sizeof(line), f)) {
		struct maps_line m = { 0 };
		unsigned maj, min;
		unsigned long long ino;
		char perms[8];
		int pos = 0;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %llu %n", &m.start,
			   &m.end, perms, &m.offset, &maj, &min, &ino, &pos) < 7)
			continue;
		m.x = perms[2] == 'x';
		m.dev = makedev(maj, min);
		m.ino = (ino_t)ino;
		if (pos) {
			size_t l;

			snprintf(m.path, sizeof(m.path), "%s", line + pos);
			l = strlen(m.path);
			if (l && m.path[l - 1] == '\n')
				m.path[l - 1] = '\0';
		}
		rc = fn(arg, &m);
	}
	fclose(f);
	return rc;
}

struct file_find {
	dev_t dev;
	ino_t ino;
	uint64_t start, end, offset; /* the mapping found (find_ldso_fn) */
	uint64_t off;
	uint64_t vaddr;
	char path[PATH_MAX];
};

static int find_file_fn(void *arg, const struct maps_line *m)
{
	struct file_find *ff = arg;

	if (!m->x || m->dev != ff->dev || m->ino != ff->ino)
		return 0;
	if (ff->off < m->offset || ff->off - m->offset >= m->end - m->start)
		return 0;
	ff->vaddr = m->start + (ff->off - m->offset);
	return 1;
}

static int find_ldso_fn(void *arg, const struct maps_line *m)
{
	struct file_find *ff = arg;
	const char *base = strrchr(m->path, '/');

	if (!m->x || !base || strncmp(base + 1, "ld-", 3))
		return 0;
	snprintf(ff->path, sizeof(ff->path), "%s", m->path);
	ff->dev = m->dev;
	ff->ino = m->ino;
	ff->start = m->start;
	ff->end = m->end;
	ff->offset = m->offset;
	return 1;
}

/* The address of file offset off of (dev, ino) in process pid, or 0 when not mapped. */
uint64_t tr_vaddr_of(struct up_trace *tr, pid_t pid, dev_t dev, ino_t ino, uint64_t off)
{
	struct file_find ff = { .dev = dev, .ino = ino, .off = off };

	return for_each_map(tr, pid, find_file_fn, &ff) == 1 ? ff.vaddr : 0;
}

/*
 * _dl_debug_state's file offset in the dynamic linker ff found: from its symbols (its
 * debug file's, if that is where they are) the first time, then by the mapped file's
 * identity -- every exec followed maps the same ld.so, and reading its symbols again
 * was an open of the file and of its debug file and ~25 KiB read each time.
 */
static int ldso_rendezvous_off(struct up_trace *tr, pid_t pid, const struct file_find *ff,
			       uint64_t *off)
{
	char path[96];
	struct stat st;
	struct up_sym_elf *elf;
	struct up_sym sym;
	bool known;
	int rc;

	/* the inode mapped (map_files: what the name leads to now may be another) */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, ff->start,
		 ff->end);
	known = !stat(path, &st);
	if (known && tr->ldso.valid && st.st_dev == tr->ldso.dev && st.st_ino == tr->ldso.ino &&
	    st.st_size == tr->ldso.size && st.st_mtim.tv_sec == tr->ldso.mtime.tv_sec &&
	    st.st_mtim.tv_nsec == tr->ldso.mtime.tv_nsec) {
		*off = tr->ldso.off;
		return 0;
	}
	if (up_sym_elf_open_map(ff->path,
				&(struct up_file_map){ pid, ff->start, ff->end, (uint64_t)ff->ino },
				&elf))
		return -ENOENT;
	rc = up_sym_elf_lookup(elf, "_dl_debug_state", &sym);
	if (!rc)
		rc = up_sym_elf_vaddr_to_offset(elf, sym.value, off);
	up_sym_elf_close(elf);
	if (rc)
		return rc;
	if (known) {
		tr->ldso.dev = st.st_dev;
		tr->ldso.ino = st.st_ino;
		tr->ldso.size = st.st_size;
		tr->ldso.mtime = st.st_mtim;
		tr->ldso.off = *off;
		tr->ldso.valid = true;
	}
	return 0;
}

/* Probes the dynamic linker's rendezvous so files mapped later are found. */
void tr_hook_ldso(struct up_trace *tr, struct tproc *tp)
{
	struct file_find ff = { 0 };
	uint64_t off, vaddr;
	int rc;

	if (tp->ldso.kimg || for_each_map(tr, tp->pid, find_ldso_fn, &ff) != 1)
		return;
	if (ldso_rendezvous_off(tr, tp->pid, &ff, &off))
		return;
	/* in the mapping found, as a rule (ld.so has one of code); else where it is */
	if (off >= ff.offset && off - ff.offset < ff.end - ff.start)
		vaddr = ff.start + (off - ff.offset);
	else
		vaddr = tr_vaddr_of(tr, tp->pid, ff.dev, ff.ino, off);
	if (!vaddr)
		return;
	memset(&tp->ldso, 0, sizeof(tp->ldso));
	tp->ldso.pid = tp->pid;
	tp->ldso.vaddr = vaddr;
	tp->ldso.handler = on_ldso;
	tp->ldso.data = tp;
	rc = register_uprobe(tr->ctx, &tp->ldso);
	if (rc && rc != -EINPROGRESS)
		tr_log(tr,
		       "process %d: cannot follow the dynamic linker (%s): libraries loaded "
		       "later are not probed",
		       (int)tp->pid, strerror(-rc));
}

struct vaddr_find {
	uint64_t vaddr;
	struct maps_line m;
};

static int find_vaddr_fn(void *arg, const struct maps_line *m)
{
	struct vaddr_find *vf = arg;

	if (vf->vaddr < m->start || vf->vaddr >= m->end)
		return 0;
	vf->m = *m;
	return 1;
}

/*
 * A return probe by address (0xVADDR) in process pid is judged as a file's is
 * (sym/place.c): the mapping's file must say a function begins there.  The file is
 * the one mapped (up_file_open: the mapped inode, never a FIFO or device put there).  0, or -EINVAL with why; 0 when there is no file to ask (anonymous
 * code: nothing says where its functions begin).
 */
int tr_check_return_vaddr(struct up_trace *tr, pid_t pid, uint64_t vaddr, char *why,
			  size_t whylen)
{
	struct vaddr_find vf = { .vaddr = vaddr };
	struct up_sym_elf *elf = NULL;
	uint64_t fv;
	int rc;

	if (for_each_map(tr, pid, find_vaddr_fn, &vf) != 1 || vf.m.path[0] != '/')
		return 0;
	if (up_sym_elf_open_map(vf.m.path,
				&(struct up_file_map){ pid, vf.m.start, vf.m.end, (uint64_t)vf.m.ino },
				&elf))
		return 0;
	rc = up_sym_elf_offset_to_vaddr(elf, vaddr - vf.m.start + vf.m.offset, &fv);
	if (!rc)
		rc = up_sym_elf_check_place(elf, fv, true, why, whylen);
	else
		rc = 0;
	up_sym_elf_close(elf);
	return rc;
}
