// SPDX-License-Identifier: MIT
/*
 * User stacks: the frame-pointer walk and the names of its addresses (stack.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sym/file.h"
#include "sym/sym.h"
#include "sym/unwind.h"
#include "sym/unwind_walk.h"
#include "trace/stack.h"

unsigned up_stack_walk(const struct user_regs_struct *regs, uint64_t ip, bool at_entry,
		       int (*read)(void *ctx, uint64_t addr, void *buf, size_t len), void *ctx,
		       uint64_t *out, unsigned max)
{
	uint64_t fp = regs->rbp, pair[2];
	unsigned n = 0;

	if (!max)
		return 0;
	out[n++] = ip;
	if (at_entry && n < max && !read(ctx, regs->rsp, &pair[1], 8) && pair[1])
		out[n++] = pair[1];
	while (n < max && fp && !(fp & 7) && !read(ctx, fp, pair, 16) && pair[1]) {
		out[n++] = pair[1];
		if (pair[0] <= fp)
			break;
		fp = pair[0];
	}
	for (unsigned i = n; i < max; i++)
		out[i] = 0;
	return n;
}

struct smap {
	uint64_t start, end, offset, ino;
	char *path;
	struct up_sym_elf *elf; /* opened at the first lookup; NULL: not ELF, or not yet */
	bool tried;
	const struct up_unwind_table *uw; /* the file's unwind table, at the first walk */
	bool uw_tried;
};

struct up_stack_syms {
	pid_t pid;
	bool loaded, stale;
	uint64_t (*ret)(void *ctx, uint64_t slot, uint64_t value); /* up_stack_syms_returns */
	void *ret_ctx;
	int (*code)(void *ctx, uint64_t pc, struct up_unwind_row *row); /* up_stack_syms_code */
	void *code_ctx;
	struct smap *maps;
	unsigned n;
};

struct up_stack_syms *up_stack_syms_new(pid_t pid)
{
	struct up_stack_syms *s = calloc(1, sizeof(*s));

	if (s)
		s->pid = pid;
	return s;
}

static void drop_maps(struct up_stack_syms *s)
{
	for (unsigned i = 0; i < s->n; i++) {
		up_sym_elf_close(s->maps[i].elf);
		free(s->maps[i].path);
	}
	free(s->maps);
	s->maps = NULL;
	s->n = 0;
}

void up_stack_syms_free(struct up_stack_syms *s)
{
	if (!s)
		return;
	drop_maps(s);
	free(s);
}

void up_stack_syms_stale(struct up_stack_syms *s)
{
	if (s)
		s->stale = true;
}

/* The executable file mappings of the process, as they are now; the old ones stay
   when none can be read (a process that is gone). */
static void load_maps(struct up_stack_syms *s)
{
	char path[64], line[PATH_MAX + 128];
	struct up_stack_syms fresh = { .pid = s->pid };
	FILE *f;

	s->loaded = true;
	s->stale = false;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)s->pid);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end, off, ino;
		char perms[8], *p;
		int pos = 0;
		struct smap *v;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %" SCNu64 " %n",
			   &start, &end, perms, &off, &ino, &pos) < 5 ||
		    !pos || perms[2] != 'x' || line[pos] != '/')
			continue;
		p = line + pos;
		p[strcspn(p, "\n")] = '\0';
		v = realloc(fresh.maps, (fresh.n + 1) * sizeof(*v));
		if (!v)
			break;
		fresh.maps = v;
		v[fresh.n] = (struct smap){
			.start = start, .end = end, .offset = off, .ino = ino, .path = strdup(p)
		};
		if (v[fresh.n].path)
			fresh.n++;
	}
	fclose(f);
	if (!fresh.n) {
		free(fresh.maps);
		return;
	}
	drop_maps(s);
	s->maps = fresh.maps;
	s->n = fresh.n;
}

int up_stack_syms_add(struct up_stack_syms *s, uint64_t start, uint64_t end, uint64_t offset,
		      uint64_t ino, const char *path)
{
	struct smap *v;
	unsigned j = 0;

	if (!s || end <= start || path[0] != '/')
		return -EINVAL;
	s->loaded = true; /* a process of a file: its maps are these, never /proc's */
	s->pid = 0;
	for (unsigned i = 0; i < s->n; i++) { /* what the new one covers is gone */
		if (s->maps[i].start < end && s->maps[i].end > start) {
			up_sym_elf_close(s->maps[i].elf);
			free(s->maps[i].path);
			continue;
		}
		s->maps[j++] = s->maps[i];
	}
	s->n = j;
	v = realloc(s->maps, (s->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->maps = v;
	for (j = s->n; j > 0 && v[j - 1].start > start; j--)
		v[j] = v[j - 1];
	v[j] = (struct smap){ .start = start, .end = end, .offset = offset, .ino = ino,
			      .path = strdup(path) };
	if (!v[j].path) {
		memmove(&v[j], &v[j + 1], (s->n - j) * sizeof(*v));
		return -ENOMEM;
	}
	s->n++;
	return 0;
}

void up_stack_syms_each(struct up_stack_syms *s,
			void (*fn)(void *arg, uint64_t start, uint64_t end, uint64_t offset,
				   uint64_t ino, const char *path),
			void *arg)
{
	for (unsigned i = 0; s && i < s->n; i++)
		fn(arg, s->maps[i].start, s->maps[i].end, s->maps[i].offset, s->maps[i].ino,
		   s->maps[i].path);
}

void up_stack_syms_load(struct up_stack_syms *s)
{
	if (s && (!s->loaded || s->stale))
		load_maps(s);
}

static struct smap *map_of(struct up_stack_syms *s, uint64_t addr)
{
	for (int pass = 0; pass < 2; pass++) {
		if (!s->loaded || (pass && s->stale))
			load_maps(s);
		for (unsigned i = 0; i < s->n; i++)
			if (addr >= s->maps[i].start && addr < s->maps[i].end)
				return &s->maps[i];
		if (!s->stale)
			break;
	}
	return NULL;
}

/* A file offset back to the file's own vaddr, through the executable section at it. */
struct sec_find {
	uint64_t off, vaddr;
};

static int sec_find_fn(const struct up_sym_section *sec, void *ctx)
{
	struct sec_find *sf = ctx;

	if (sf->off < sec->offset || sf->off - sec->offset >= sec->size)
		return 0;
	sf->vaddr = sec->vaddr + (sf->off - sec->offset);
	return 1;
}

/* The walk's lookup (unwind_walk.h): the row of the file mapped at pc. */
static int uw_lookup(void *ctx, uint64_t pc, struct up_unwind_row *row)
{
	struct up_stack_syms *s = ctx;
	struct smap *m = map_of(s, pc);
	uint64_t vaddr;

	/* the library's own code: an anonymous page of trampolines, the agent's memfd */
	if (s->code && (!m || !strncmp(m->path, "/memfd:uprobe-", 14)))
		return s->code(s->code_ctx, pc, row);
	if (!m)
		return -1;
	if (!m->uw_tried) {
		m->uw_tried = true;
		m->uw = up_unwind_get(
			m->path, &(struct up_file_map){ (int)s->pid, m->start, m->end, m->ino });
	}
	row->cfa = UP_UW_NONE;
	if (!m->uw || up_unwind_vaddr(m->uw, pc - m->start + m->offset, &vaddr) ||
	    !up_unwind_row_at(m->uw, vaddr, row))
		return 0;
	return 1;
}

void up_stack_syms_code(struct up_stack_syms *s,
			int (*code)(void *ctx, uint64_t pc, struct up_unwind_row *row), void *ctx)
{
	s->code = code;
	s->code_ctx = ctx;
}

void up_stack_syms_returns(struct up_stack_syms *s,
			   uint64_t (*ret)(void *ctx, uint64_t slot, uint64_t value), void *ctx)
{
	s->ret = ret;
	s->ret_ctx = ctx;
}

/* The walk's reads through the caller's, its return addresses through s->ret. */
struct uw_read {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
	struct up_stack_syms *s;
};

static int uw_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct uw_read *r = ctx;

	return r->read(r->ctx, addr, buf, len);
}

static uint64_t uw_ret(void *ctx, uint64_t slot, uint64_t value)
{
	struct uw_read *r = ctx;

	return r->s->ret(r->s->ret_ctx, slot, value);
}

unsigned up_stack_unwind(struct up_stack_syms *s, const struct user_regs_struct *regs, uint64_t ip,
			 bool at_entry,
			 int (*read)(void *ctx, uint64_t addr, void *buf, size_t len), void *ctx,
			 uint64_t *out, unsigned max)
{
	struct uw_read r = { read, ctx, s };
	unsigned n;

	if (!s)
		return up_stack_walk(regs, ip, at_entry, read, ctx, out, max);
	n = up_unwind_walk(ip, regs->rsp, regs->rbp, at_entry, uw_lookup, s, uw_read,
			   s->ret ? uw_ret : NULL, &r, out, max);
	for (unsigned i = n; i < max; i++)
		out[i] = 0;
	return n;
}

bool up_stack_mapped(struct up_stack_syms *s, uint64_t addr)
{
	return map_of(s, addr) != NULL;
}

int up_stack_name(struct up_stack_syms *s, uint64_t addr, char *buf, size_t size)
{
	struct smap *m = map_of(s, addr);
	struct sec_find sf;
	const char *base;
	struct up_sym sym;

	if (addr == UP_UNWIND_UNKNOWN)
		return snprintf(buf, size, "[unknown]");
	if (!m)
		return snprintf(buf, size, "0x%" PRIx64, addr);
	base = strrchr(m->path, '/');
	base = base ? base + 1 : m->path;
	sf.off = addr - m->start + m->offset;
	if (!m->tried) {
		struct up_file_map where = { (int)s->pid, m->start, m->end, m->ino };

		m->tried = true;
		if (up_sym_elf_open_map(m->path, &where, &m->elf))
			m->elf = NULL;
	}
	if (m->elf && up_sym_elf_for_each_exec_section(m->elf, sec_find_fn, &sf) == 1 &&
	    !up_sym_elf_enclosing_func(m->elf, sf.vaddr, &sym))
		return snprintf(buf, size, "%s+0x%" PRIx64 " [%s]", sym.name, sf.vaddr - sym.value,
				base);
	return snprintf(buf, size, "[%s]+0x%" PRIx64, base, sf.off);
}
