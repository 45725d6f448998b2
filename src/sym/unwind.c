// SPDX-License-Identifier: MIT
/*
 * Unwind tables built from a file's .eh_frame (unwind.h), and for the code it does not
 * cover from the .debug_frame of the file's separate debug file (found as sym/elf.c
 * finds one for symbols) or of the file itself.  The FDEs are listed by
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
#include "sym/sym.h"
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

/* An FDE and the CFI it is in: .eh_frame's (0) or .debug_frame's (1). */
struct src_fde {
	uint64_t start, end;
	int src;
};

static int cmp_src(const void *a, const void *b)
{
	const struct src_fde *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * The FDEs to build rows from: .eh_frame's, then .debug_frame's where no .eh_frame FDE
 * overlaps them (the code built without unwind tables, whose CFI -g put in
 * .debug_frame), sorted.  0 with a malloc'd array (maybe empty), or -ENOMEM.
 */
static int merge_fdes(Elf *elf, Elf *debug, struct src_fde **out, size_t *n)
{
	struct up_fde *eh = NULL, *dbg = NULL;
	size_t neh = 0, ndbg = 0, k = 0;
	struct src_fde *v;

	*out = NULL;
	*n = 0;
	if (up_fde_table(elf, &eh, &neh) || (debug && up_fde_table_debug(debug, &dbg, &ndbg))) {
		free(eh);
		return -ENOMEM;
	}
	v = malloc((neh + ndbg + 1) * sizeof(*v));
	if (!v) {
		free(eh);
		free(dbg);
		return -ENOMEM;
	}
	for (size_t i = 0; i < neh; i++)
		v[k++] = (struct src_fde){ eh[i].start, eh[i].end, 0 };
	for (size_t i = 0; i < ndbg; i++) {
		const struct up_fde *f = up_fde_find(eh, neh, dbg[i].start);
		size_t lo = 0, hi = neh;

		if (f && f->end > dbg[i].start)
			continue; /* inside one of .eh_frame's */
		while (lo < hi) { /* the first .eh_frame FDE starting after it starts */
			size_t mid = lo + (hi - lo) / 2;

			if (eh[mid].start <= dbg[i].start)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < neh && eh[lo].start < dbg[i].end)
			continue;
		v[k++] = (struct src_fde){ dbg[i].start, dbg[i].end, 1 };
	}
	free(eh);
	free(dbg);
	if (k)
		qsort(v, k, sizeof(*v), cmp_src);
	/* FDEs that overlap each other (a broken .debug_frame): the later ones go */
	for (size_t i = 1, j = 1; i <= k; i++) {
		if (i == k) {
			k = j;
			break;
		}
		if (v[i].start >= v[j - 1].end)
			v[j++] = v[i];
	}
	*out = v;
	*n = k;
	return 0;
}

int up_unwind_build(void *e, struct up_unwind_table **out)
{
	return up_unwind_build_debug(e, NULL, out);
}

int up_unwind_build_debug(void *e, void *debug_elf, struct up_unwind_table **out)
{
	Elf *elf = e;
	struct up_unwind_table *t;
	struct rows r = { 0 };
	struct src_fde *fde = NULL;
	size_t nfde = 0;
	Dwarf_CFI *cfi[2] = { NULL, NULL };
	Dwarf *dw = NULL;
	uint64_t base;
	size_t nidx;
	int err = 0;

	*out = NULL;
	if (merge_fdes(elf, debug_elf, &fde, &nfde))
		return -ENOMEM;
	for (size_t i = 0; i < nfde; i++) {
		if (fde[i].src == 0 && !cfi[0])
			cfi[0] = dwarf_getcfi_elf(elf);
		if (fde[i].src == 1 && !dw) {
			dw = dwarf_begin_elf(debug_elf, DWARF_C_READ, NULL);
			cfi[1] = dw ? dwarf_getcfi(dw) : NULL;
		}
	}
	if (!cfi[0] && !cfi[1]) {
		free(fde);
		if (dw)
			dwarf_end(dw);
		return -ENOENT;
	}
	base = fde[0].start;
	for (size_t i = 0; i < nfde && !err; i++) {
		uint64_t pc = fde[i].start, end = fde[i].end;
		Dwarf_CFI *c = cfi[fde[i].src];

		if (end - base > 0xffffffffu || pc < base)
			break; /* rows hold 32-bit pcs: a file of 4 GiB of code is not ours */
		while (pc < end && !err) {
			struct up_unwind_row row = { .pc = (uint32_t)(pc - base) };
			Dwarf_Frame *frame = NULL;
			Dwarf_Addr s, e2;
			bool signal = false;

			if (!c || dwarf_cfi_addrframe(c, pc, &frame) ||
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
	if (cfi[0])
		dwarf_cfi_end(cfi[0]);
	if (dw)
		dwarf_end(dw); /* cfi[1] is the Dwarf's */
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

/* The separate debug file of path, as sym/elf.c finds one (gdb's places: by build-id,
   by .gnu_debuglink), opened into *fd; NULL where there is none. */
static Elf *debug_file(const char *path, const struct up_file_map *map, int *fd)
{
	struct up_sym_elf *se;
	const char *dp;
	Elf *d = NULL;

	*fd = -1;
	if (up_sym_elf_open_map(path, map, &se))
		return NULL;
	dp = up_sym_elf_debug_path(se);
	if (dp)
		*fd = up_file_open(dp, NULL, false);
	up_sym_elf_close(se);
	if (*fd >= 0) {
		d = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
		if (d && elf_kind(d) != ELF_K_ELF) {
			elf_end(d);
			d = NULL;
		}
		if (!d) {
			close(*fd);
			*fd = -1;
		}
	}
	return d;
}

/* fd's table: its .eh_frame, and for the code that has none the .debug_frame of its
   separate debug file, else its own (a program built -g without unwind tables). */
static struct up_unwind_table *build_fd(int fd, const char *path, const struct up_file_map *map)
{
	struct up_unwind_table *t = NULL;
	Elf *elf, *debug;
	int dfd;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return NULL;
	}
	debug = debug_file(path, map, &dfd);
	if (up_unwind_build_debug(elf, debug ? debug : elf, &t))
		t = NULL;
	if (debug) {
		elf_end(debug);
		close(dfd);
	}
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
			e->t = build_fd(fd, path, map);
			e->next = cache;
			cache = e;
		}
	}
	t = e ? e->t : NULL;
	pthread_mutex_unlock(&cache_lock);
	close(fd);
	return t;
}
