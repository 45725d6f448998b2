// SPDX-License-Identifier: MIT
/*
 * Unwind tables built from a file's .eh_frame (unwind.h).  The FDEs are listed by
 * sym/fde.c; libdw evaluates the CFI (dwarf_cfi_addrframe at each row's start, whose
 * dwarf_frame_info gives the row's [start, end)); each row's rules are then judged
 * against the few forms the walk knows, the rest being UNKNOWN.  Rows that say the
 * same as the one before are merged; a gap between FDEs gets a NONE row.
 *
 * The file is input from anyone: libdw bounds its reads; a row whose range does not
 * advance ends its FDE.  Prefix: up_unwind_.
 */
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdw.h>

#include "sym/fde.h"
#include "sym/file.h"
#include "sym/unwind.h"

#define REG_RBP 6
#define REG_RSP 7
#define REG_RA	16

struct rows {
	struct up_unwind_row *v;
	size_t n, cap;
};

static int push(struct rows *r, const struct up_unwind_row *row)
{
	if (r->n) {
		struct up_unwind_row *last = &r->v[r->n - 1];

		if (last->pc == row->pc) { /* an empty range before: this one wins */
			*last = *row;
			if (r->n > 1 &&
			    !memcmp((char *)&r->v[r->n - 2] + 4, (char *)row + 4, sizeof(*row) - 4))
				r->n--;
			return 0;
		}
		if (!memcmp((char *)last + 4, (char *)row + 4, sizeof(*row) - 4))
			return 0; /* the same rules go on */
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 1024;
		struct up_unwind_row *v = realloc(r->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = *row;
	return 0;
}

static bool fits32(int64_t v)
{
	return v >= INT32_MIN && v <= INT32_MAX;
}

/* The CFA rule: rsp/rbp + off, the PLT's expression, [rbp + off]. */
static void judge_cfa(Dwarf_Frame *frame, struct up_unwind_row *row)
{
	Dwarf_Op *ops;
	size_t n;

	row->cfa = UP_UW_UNKNOWN;
	if (dwarf_frame_cfa(frame, &ops, &n) || !n)
		return;
	if (n == 1 && ops[0].atom == DW_OP_bregx &&
	    (ops[0].number == REG_RSP || ops[0].number == REG_RBP) &&
	    fits32((int64_t)ops[0].number2)) { /* libdw's form of DW_CFA_def_cfa */
		row->cfa = ops[0].number == REG_RSP ? UP_UW_CFA_RSP : UP_UW_CFA_RBP;
		row->cfa_off = (int32_t)(int64_t)ops[0].number2;
	} else if (n == 1 && (ops[0].atom == DW_OP_breg7 || ops[0].atom == DW_OP_breg6) &&
		   fits32((int64_t)ops[0].number)) {
		row->cfa = ops[0].atom == DW_OP_breg7 ? UP_UW_CFA_RSP : UP_UW_CFA_RBP;
		row->cfa_off = (int32_t)(int64_t)ops[0].number;
	} else if (n == 2 && ops[0].atom == DW_OP_breg6 && ops[1].atom == DW_OP_deref &&
		   fits32((int64_t)ops[0].number)) {
		row->cfa = UP_UW_CFA_DEREF;
		row->cfa_off = (int32_t)(int64_t)ops[0].number;
	} else if (n == 9 && ops[0].atom == DW_OP_breg7 && ops[1].atom == DW_OP_breg16 &&
		   ops[1].number == 0 && ops[2].atom == DW_OP_lit15 && ops[3].atom == DW_OP_and &&
		   ops[4].atom >= DW_OP_lit0 && ops[4].atom <= DW_OP_lit15 &&
		   ops[5].atom == DW_OP_ge && ops[6].atom == DW_OP_lit3 &&
		   ops[7].atom == DW_OP_shl && ops[8].atom == DW_OP_plus &&
		   fits32((int64_t)ops[0].number)) {
		/* ld's lazy PLT: rsp + 8 + (((rip & 15) >= 11) << 3) */
		row->cfa = UP_UW_CFA_PLT;
		row->cfa_off = (int32_t)(int64_t)ops[0].number;
		row->rbp_off = (int16_t)(ops[4].atom - DW_OP_lit0);
	}
}

/* A register saved at CFA + off: [call_frame_cfa (plus_uconst off)]; 1 and off if so. */
static int at_cfa(const Dwarf_Op *ops, size_t n, int64_t *off)
{
	if (n < 1 || ops[0].atom != DW_OP_call_frame_cfa)
		return 0;
	if (n == 1) {
		*off = 0;
		return 1;
	}
	if (n == 2 && (ops[1].atom == DW_OP_plus_uconst || ops[1].atom == DW_OP_consts)) {
		*off = (int64_t)ops[1].number;
		return 1;
	}
	if (n == 3 && ops[1].atom == DW_OP_consts && ops[2].atom == DW_OP_plus) {
		*off = (int64_t)ops[1].number;
		return 1;
	}
	return 0;
}

static void judge(Dwarf_Frame *frame, bool signal, struct up_unwind_row *row)
{
	Dwarf_Op mem[3], *ops;
	size_t n;
	int64_t off;

	if (signal) {
		row->cfa = UP_UW_SIGNAL;
		return;
	}
	if (dwarf_frame_register(frame, REG_RA, mem, &ops, &n)) {
		row->cfa = UP_UW_UNKNOWN;
		return;
	}
	if (!n && ops == mem) {
		row->cfa = UP_UW_END;
		return;
	}
	judge_cfa(frame, row);
	if (row->cfa == UP_UW_UNKNOWN)
		return;
	if (!at_cfa(ops, n, &off) || off != -8) {
		row->cfa = UP_UW_UNKNOWN;
		row->cfa_off = 0;
		row->rbp_off = 0;
		return;
	}
	if (dwarf_frame_register(frame, REG_RBP, mem, &ops, &n))
		row->rbp = UP_UW_RBP_UNDEF;
	else if (!n)
		row->rbp = ops == mem ? UP_UW_RBP_UNDEF : UP_UW_RBP_SAME;
	else if (at_cfa(ops, n, &off) && off >= INT16_MIN && off <= INT16_MAX &&
		 row->cfa != UP_UW_CFA_PLT) {
		row->rbp = UP_UW_RBP_AT_CFA;
		row->rbp_off = (int16_t)off;
	} else {
		row->rbp = UP_UW_RBP_UNDEF;
	}
}

static void segments(Elf *elf, struct up_unwind_table *t)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return;
	for (size_t i = 0; i < n && t->nsegs < UP_UNWIND_SEGS; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			t->seg[t->nsegs].offset = ph.p_offset;
			t->seg[t->nsegs].vaddr = ph.p_vaddr;
			t->seg[t->nsegs].filesz = ph.p_filesz;
			t->nsegs++;
		}
	}
}

int up_unwind_build(void *e, struct up_unwind_table **out)
{
	Elf *elf = e;
	struct up_unwind_table *t;
	struct rows r = { 0 };
	struct up_fde *fde = NULL;
	size_t nfde = 0;
	Dwarf_CFI *cfi;
	uint64_t base;
	size_t nidx;
	int err = 0;

	*out = NULL;
	if (up_fde_table(elf, &fde, &nfde))
		return -ENOMEM;
	cfi = nfde ? dwarf_getcfi_elf(elf) : NULL;
	if (!cfi) {
		free(fde);
		return -ENOENT;
	}
	base = fde[0].start;
	for (size_t i = 0; i < nfde && !err; i++) {
		uint64_t pc = fde[i].start, end = fde[i].end;

		if (end - base > 0xffffffffu || pc < base)
			break; /* rows hold 32-bit pcs: a file of 4 GiB of code is not ours */
		while (pc < end && !err) {
			struct up_unwind_row row = { .pc = (uint32_t)(pc - base) };
			Dwarf_Frame *frame = NULL;
			Dwarf_Addr s, e2;
			bool signal = false;

			if (dwarf_cfi_addrframe(cfi, pc, &frame) ||
			    dwarf_frame_info(frame, &s, &e2, &signal) < 0) {
				row.cfa = UP_UW_UNKNOWN;
				e2 = end;
			} else {
				judge(frame, signal, &row);
			}
			free(frame);
			err = push(&r, &row);
			pc = e2 > pc && e2 < end ? e2 : end;
		}
		if (!err && (i + 1 == nfde || fde[i + 1].start > end))
			err = push(&r, &(struct up_unwind_row){ .pc = (uint32_t)(end - base) });
	}
	free(fde);
	dwarf_cfi_end(cfi);
	if (err) {
		free(r.v);
		return err;
	}
	nidx = r.n ? ((size_t)r.v[r.n - 1].pc >> UP_UNWIND_IDX_SHIFT) + 1 : 0;
	t = calloc(1, sizeof(*t) + r.n * sizeof(r.v[0]) + nidx * sizeof(uint32_t));
	if (!t) {
		free(r.v);
		return -ENOMEM;
	}
	t->size = sizeof(*t) + r.n * sizeof(r.v[0]) + nidx * sizeof(uint32_t);
	t->base = base;
	t->nrows = (uint32_t)r.n;
	t->nidx = (uint32_t)nidx;
	if (r.n)
		memcpy(t->rows, r.v, r.n * sizeof(r.v[0]));
	{
		/* idx[k]: the last row at or before KiB k's first byte (0 when none is) */
		uint32_t *idx = (uint32_t *)(t->rows + t->nrows);
		size_t i = 0;

		for (size_t k = 0; k < nidx; k++) {
			uint64_t at = (uint64_t)k << UP_UNWIND_IDX_SHIFT;

			while (i + 1 < r.n && r.v[i + 1].pc <= at)
				i++;
			idx[k] = (uint32_t)i;
		}
	}
	free(r.v);
	segments(elf, t);
	*out = t;
	return 0;
}

/* The tables built, one per file (dev, ino), for the life of the process. */
struct entry {
	struct entry *next;
	dev_t dev;
	ino_t ino;
	struct up_unwind_table *t; /* NULL: none could be built */
};

static struct entry *cache;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static struct up_unwind_table *build_fd(int fd)
{
	struct up_unwind_table *t = NULL;
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF && up_unwind_build(elf, &t))
		t = NULL;
	elf_end(elf);
	return t;
}

const struct up_unwind_table *up_unwind_get(const char *path, const struct up_file_map *map)
{
	struct up_unwind_table *t;
	struct entry *e;
	struct stat st;
	int fd = up_file_open(path, map, false);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	pthread_mutex_lock(&cache_lock);
	for (e = cache; e; e = e->next)
		if (e->dev == st.st_dev && e->ino == st.st_ino)
			break;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->dev = st.st_dev;
			e->ino = st.st_ino;
			e->t = build_fd(fd);
			e->next = cache;
			cache = e;
		}
	}
	t = e ? e->t : NULL;
	pthread_mutex_unlock(&cache_lock);
	close(fd);
	return t;
}
