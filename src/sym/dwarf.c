// SPDX-License-Identifier: MIT
/*
 * The DWARF reader for probe specs (see dwarf.h).  It owns the open debug
 * information and the main file's ELF handle (for its .eh_frame, the call frame
 * information a frame base may need, and its segments, for file offsets).  It turns
 * variables into text only -- fetch arguments of the kernel's uprobe_events -- and
 * never reads a process, never prints, never exits.
 */
#include "sym/dwarf.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sym/file.h"
#include "sym/sym.h"

struct up_dwarf {
	struct up_sym_elf *sym; /* the main file: offsets, and where its debug file is */
	int fd, dbg_fd;
	Elf *elf; /* the main file, for .eh_frame */
	Dwarf *dbg;
	Dwarf_CFI *cfi_elf; /* the main file's .eh_frame, read on first need (ours) */
	bool cfi_tried;
	char *source;
};

/* The DWARF register numbers of x86-64 (the psABI's table) as uprobe_events names them. */
static const char *const reg_names[17] = { "ax",  "dx",	 "cx",	"bx",  "si",  "di",
					   "bp",  "sp",	 "r8",	"r9",  "r10", "r11",
					   "r12", "r13", "r14", "r15", "ip" };

int up_dwarf_open(const char *path, struct up_dwarf **out)
{
	struct up_dwarf *d = calloc(1, sizeof(*d));
	const char *dbg_path;
	int rc;

	if (!d)
		return -ENOMEM;
	d->fd = d->dbg_fd = -1;
	rc = up_sym_elf_open(path, &d->sym);
	if (rc)
		goto fail;
	d->fd = up_file_open(path, NULL, true);
	if (d->fd < 0) {
		rc = d->fd;
		goto fail;
	}
	d->elf = elf_begin(d->fd, ELF_C_READ, NULL);
	d->dbg = dwarf_begin(d->fd, DWARF_C_READ);
	dbg_path = path;
	if (!d->dbg && (dbg_path = up_sym_elf_debug_path(d->sym))) {
		d->dbg_fd = up_file_open(dbg_path, NULL, true);
		if (d->dbg_fd >= 0)
			d->dbg = dwarf_begin(d->dbg_fd, DWARF_C_READ);
	}
	if (!d->dbg) {
		rc = -ENODATA;
		goto fail;
	}
	d->source = strdup(dbg_path);
	if (!d->source) {
		rc = -ENOMEM;
		goto fail;
	}
	*out = d;
	return 0;
fail:
	up_dwarf_close(d);
	return rc;
}

void up_dwarf_close(struct up_dwarf *d)
{
	if (!d)
		return;
	if (d->cfi_elf)
		dwarf_cfi_end(d->cfi_elf);
	if (d->dbg)
		dwarf_end(d->dbg);
	if (d->elf)
		elf_end(d->elf);
	if (d->fd >= 0)
		close(d->fd);
	if (d->dbg_fd >= 0)
		close(d->dbg_fd);
	up_sym_elf_close(d->sym);
	free(d->source);
	free(d);
}

const char *up_dwarf_source(const struct up_dwarf *d)
{
	return d->source;
}

/* ---- functions and lines -------------------------------------------------------------------- */

struct func_find {
	const char *name;
	Dwarf_Die die;
	bool found;
};

static int func_cb(Dwarf_Die *die, void *arg)
{
	struct func_find *ff = arg;
	const char *n = dwarf_diename(die);
	Dwarf_Addr lo;

	if (!n || strcmp(n, ff->name) || dwarf_func_inline(die) == DW_INL_inlined ||
	    dwarf_entrypc(die, &lo))
		return DWARF_CB_OK;
	ff->die = *die;
	ff->found = true;
	return DWARF_CB_ABORT;
}

static bool find_func(struct up_dwarf *d, const char *name, Dwarf_Die *out, Dwarf_Die *cu_out)
{
	Dwarf_Off off = 0, next;
	size_t hsize;

	while (dwarf_nextcu(d->dbg, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		struct func_find ff = { .name = name };

		if (dwarf_offdie(d->dbg, off + hsize, &cu)) {
			dwarf_getfuncs(&cu, func_cb, &ff, 0);
			if (ff.found) {
				*out = ff.die;
				*cu_out = cu;
				return true;
			}
		}
		off = next;
	}
	return false;
}

/* Built without optimization: gcc and clang name their flags in DW_AT_producer. */
static bool cu_optimized(Dwarf_Die *cu)
{
	Dwarf_Attribute a;
	const char *p = dwarf_formstring(dwarf_attr(cu, DW_AT_producer, &a)), *last = NULL;

	if (!p)
		return true; /* unknown: take the entry, where locations lists are exact */
	for (const char *o = strstr(p, " -O"); o; o = strstr(o + 1, " -O"))
		last = o; /* the last one given is the one in force */
	return last && last[3] != '0';
}

static void site_fill(struct up_dwarf *d, uint64_t vaddr, const char *func, struct up_dwarf_site *s)
{
	Dwarf_Die cu;
	Dwarf_Line *l;

	memset(s, 0, sizeof(*s));
	s->vaddr = vaddr;
	if (up_sym_elf_vaddr_to_offset(d->sym, vaddr, &s->offset))
		s->offset = vaddr;
	snprintf(s->func, sizeof(s->func), "%s", func ? func : "?");
	if (dwarf_addrdie(d->dbg, vaddr, &cu) && (l = dwarf_getsrc_die(&cu, vaddr))) {
		const char *f = dwarf_linesrc(l, NULL, NULL);

		snprintf(s->file, sizeof(s->file), "%s", f ? f : "?");
		dwarf_lineno(l, &s->line);
	}
}

int up_dwarf_func_site(struct up_dwarf *d, const char *func, struct up_dwarf_site *out)
{
	Dwarf_Die fd, cu;
	Dwarf_Addr entry, lo, hi, best = 0;
	Dwarf_Lines *lines;
	size_t n;

	if (!find_func(d, func, &fd, &cu))
		return -ENOENT;
	dwarf_entrypc(&fd, &entry);
	if (!cu_optimized(&cu) && dwarf_lowpc(&fd, &lo) == 0 && dwarf_highpc(&fd, &hi) == 0 &&
	    dwarf_getsrclines(&cu, &lines, &n) == 0) {
		/* past the prologue: the first line-table address after the entry */
		for (size_t i = 0; i < n; i++) {
			Dwarf_Addr a;

			if (dwarf_lineaddr(dwarf_onesrcline(lines, i), &a) == 0 && a > entry &&
			    a < hi && (!best || a < best))
				best = a;
		}
	}
	site_fill(d, best ? best : entry, func, out);
	return 0;
}

/* The outermost function of the scopes at pc: the one that holds the code. */
static const char *func_at(struct up_dwarf *d, uint64_t pc, Dwarf_Addr *lo, Dwarf_Addr *hi)
{
	Dwarf_Die cu, *scopes = NULL;
	const char *name = NULL;
	int n;

	if (!dwarf_addrdie(d->dbg, pc, &cu))
		return NULL;
	n = dwarf_getscopes(&cu, pc, &scopes);
	for (int i = n - 1; i >= 0; i--)
		if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram) {
			name = dwarf_diename(&scopes[i]);
			if (lo && dwarf_lowpc(&scopes[i], lo))
				*lo = 0;
			if (hi && dwarf_highpc(&scopes[i], hi))
				*hi = 0;
			break;
		}
	free(scopes);
	return name;
}

int up_dwarf_line_sites(struct up_dwarf *d, const char *file, const char *func, int line,
			up_dwarf_site_fn fn, void *ctx)
{
	Dwarf_Line **srcs = NULL;
	size_t nsrcs = 0;
	Dwarf_Addr flo = 0, fhi = 0;
	struct {
		const char *func;
		Dwarf_Addr addr;
	} best[64];
	size_t nbest = 0;
	int rc = 0;

	if (func) {
		Dwarf_Die fd, cu;
		int decl;

		if (!find_func(d, func, &fd, &cu) || dwarf_decl_line(&fd, &decl))
			return -ENOENT;
		file = dwarf_decl_file(&fd);
		if (!file || dwarf_lowpc(&fd, &flo) || dwarf_highpc(&fd, &fhi))
			return -ENOENT;
		line += decl;
	}
	if (dwarf_getsrc_file(d->dbg, file, line, 0, &srcs, &nsrcs) || !nsrcs)
		return -ENOENT;
	for (size_t i = 0; i < nsrcs; i++) {
		Dwarf_Addr a;
		const char *f;
		int ln;
		size_t k;

		if (dwarf_lineaddr(srcs[i], &a) || dwarf_lineno(srcs[i], &ln) || ln != line)
			continue;
		if (func && (a < flo || a >= fhi))
			continue;
		f = func_at(d, a, NULL, NULL);
		if (!f)
			continue;
		for (k = 0; k < nbest && strcmp(best[k].func, f); k++)
			;
		if (k == nbest) {
			if (nbest == sizeof(best) / sizeof(best[0]))
				continue;
			best[nbest].func = f;
			best[nbest++].addr = a;
		} else if (a < best[k].addr) {
			best[k].addr = a;
		}
	}
	free(srcs);
	if (!nbest)
		return -ENOENT;
	for (size_t k = 0; k < nbest && !rc; k++) {
		struct up_dwarf_site s;

		site_fill(d, best[k].addr, best[k].func, &s);
		rc = fn(ctx, &s);
	}
	return rc;
}

/* ---- types ---------------------------------------------------------------------------------- */

static bool type_of(Dwarf_Die *die, Dwarf_Die *out)
{
	Dwarf_Attribute a;

	return dwarf_attr_integrate(die, DW_AT_type, &a) && dwarf_formref_die(&a, out);
}

/* typedefs and qualifiers peeled off; false for void */
static bool peeled_type_of(Dwarf_Die *die, Dwarf_Die *out)
{
	Dwarf_Die t;

	return type_of(die, &t) && dwarf_peel_type(&t, out) == 0;
}

static void type_name(Dwarf_Die *t, char *buf, size_t size, int depth)
{
	const char *n = dwarf_diename(t);
	Dwarf_Die sub;
	char inner[120];

	if (depth > 8) {
		snprintf(buf, size, "...");
		return;
	}
	switch (dwarf_tag(t)) {
	case DW_TAG_pointer_type:
		if (type_of(t, &sub))
			type_name(&sub, inner, sizeof(inner), depth + 1);
		else
			snprintf(inner, sizeof(inner), "void");
		snprintf(buf, size, "%s%s*", inner, inner[strlen(inner) - 1] == '*' ? "" : " ");
		return;
	case DW_TAG_const_type:
	case DW_TAG_volatile_type:
		if (type_of(t, &sub))
			type_name(&sub, inner, sizeof(inner), depth + 1);
		else
			snprintf(inner, sizeof(inner), "void");
		snprintf(buf, size, "%s %s",
			 dwarf_tag(t) == DW_TAG_const_type ? "const" : "volatile", inner);
		return;
	case DW_TAG_structure_type:
		snprintf(buf, size, "struct %s", n ? n : "{...}");
		return;
	case DW_TAG_union_type:
		snprintf(buf, size, "union %s", n ? n : "{...}");
		return;
	case DW_TAG_enumeration_type:
		snprintf(buf, size, "enum %s", n ? n : "{...}");
		return;
	case DW_TAG_array_type:
		if (type_of(t, &sub))
			type_name(&sub, inner, sizeof(inner), depth + 1);
		else
			snprintf(inner, sizeof(inner), "?");
		snprintf(buf, size, "%s[]", inner);
		return;
	case DW_TAG_subroutine_type:
		snprintf(buf, size, "function");
		return;
	default:
		snprintf(buf, size, "%s", n ? n : "?");
	}
}

static bool is_char(Dwarf_Die *t)
{
	Dwarf_Attribute a;
	Dwarf_Word enc, sz;

	if (dwarf_tag(t) != DW_TAG_base_type ||
	    dwarf_formudata(dwarf_attr(t, DW_AT_encoding, &a), &enc) ||
	    dwarf_formudata(dwarf_attr(t, DW_AT_byte_size, &a), &sz))
		return false;
	return sz == 1 && (enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char);
}

/* ---- locations ------------------------------------------------------------------------------ */

/* Where a value is: in a register, in memory at BASE + off (BASE a fetch giving an
   address), in memory at a fixed place (@+off), or a constant. */
struct vloc {
	enum { VL_REG, VL_MEM, VL_ABS, VL_CONST } kind;
	char base[192];
	int64_t off;
};

static int value_fetch(const struct vloc *l, char *buf, size_t size)
{
	switch (l->kind) {
	case VL_REG:
		return snprintf(buf, size, "%s", l->base);
	case VL_MEM:
		return snprintf(buf, size, "%+" PRId64 "(%s)", l->off, l->base);
	case VL_ABS:
		return snprintf(buf, size, "@+0x%" PRIx64, (uint64_t)l->off);
	case VL_CONST:
		return snprintf(buf, size, "\\%" PRId64, l->off);
	}
	return snprintf(buf, size, "?");
}

struct ctx {
	struct up_dwarf *d;
	uint64_t pc;
	uint64_t site_delta; /* the probe's vaddr - its file offset: @+ addresses */
	Dwarf_Die *scopes;
	int nscopes;
	char *why;
	size_t whylen;
};

static bool reg_of(unsigned dw, char *buf, size_t size)
{
	if (dw >= sizeof(reg_names) / sizeof(reg_names[0]))
		return false;
	snprintf(buf, size, "%%%s", reg_names[dw]);
	return true;
}

/* The frame base of the function in scope i and outward, as a register + offset. */
static int frame_base(struct ctx *c, int i, struct vloc *fb)
{
	Dwarf_Attribute a;
	Dwarf_Op *ops;
	size_t nops;

	for (; i < c->nscopes; i++)
		if (dwarf_tag(&c->scopes[i]) == DW_TAG_subprogram)
			break;
	if (i == c->nscopes || !dwarf_attr_integrate(&c->scopes[i], DW_AT_frame_base, &a) ||
	    dwarf_getlocation_addr(&a, c->pc, &ops, &nops, 1) != 1 || nops != 1) {
		snprintf(c->why, c->whylen, "no frame base at this address");
		return -EINVAL;
	}
	if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		fb->kind = VL_MEM;
		fb->off = (int64_t)ops[0].number;
		return reg_of(ops[0].atom - DW_OP_breg0, fb->base, sizeof(fb->base)) ? 0 : -EINVAL;
	}
	if (ops[0].atom == DW_OP_call_frame_cfa) {
		Dwarf_CFI *cfi;
		Dwarf_Frame *fr = NULL;
		Dwarf_Op *cops;
		size_t cn;
		int rc = -EINVAL;

		if (!c->d->cfi_tried) {
			c->d->cfi_tried = true;
			c->d->cfi_elf = c->d->elf ? dwarf_getcfi_elf(c->d->elf) : NULL;
		}
		/* else .debug_frame, which the Dwarf owns */
		cfi = c->d->cfi_elf ? c->d->cfi_elf : dwarf_getcfi(c->d->dbg);
		if (cfi && dwarf_cfi_addrframe(cfi, c->pc, &fr) == 0 &&
		    dwarf_frame_cfa(fr, &cops, &cn) == 0 && cn == 1) {
			unsigned r = 99;

			if (cops[0].atom == DW_OP_bregx)
				r = (unsigned)cops[0].number;
			else if (cops[0].atom >= DW_OP_breg0 && cops[0].atom <= DW_OP_breg31)
				r = (unsigned)(cops[0].atom - DW_OP_breg0);
			int64_t o = cops[0].atom == DW_OP_bregx ? (int64_t)cops[0].number2 :
								  (int64_t)cops[0].number;

			if (reg_of(r, fb->base, sizeof(fb->base))) {
				fb->kind = VL_MEM;
				fb->off = o;
				rc = 0;
			}
		}
		free(fr);
		if (rc)
			snprintf(c->why, c->whylen,
				 "the frame address (CFA) at this address is not "
				 "a register plus an offset");
		return rc;
	}
	snprintf(c->why, c->whylen, "frame base DW_OP 0x%x not understood", ops[0].atom);
	return -EINVAL;
}

/* The location of variable var (found in scope si) at the probe address. */
static int var_loc(struct ctx *c, Dwarf_Die *var, int si, struct vloc *l)
{
	Dwarf_Attribute a;
	Dwarf_Op *ops;
	size_t nops;
	int n;

	memset(l, 0, sizeof(*l));
	if (!dwarf_attr_integrate(var, DW_AT_location, &a)) {
		Dwarf_Sword sv;

		if (dwarf_attr_integrate(var, DW_AT_const_value, &a) &&
		    dwarf_formsdata(&a, &sv) == 0) {
			l->kind = VL_CONST;
			l->off = sv;
			return 0;
		}
		snprintf(c->why, c->whylen, "optimized out (no location)");
		return -ENODATA;
	}
	n = dwarf_getlocation_addr(&a, c->pc, &ops, &nops, 1);
	if (n == 0 || (n == 1 && nops == 0)) {
		snprintf(c->why, c->whylen, "optimized out at this address");
		return -ENODATA;
	}
	if (n < 0) {
		snprintf(c->why, c->whylen, "unreadable location: %s", dwarf_errmsg(-1));
		return -EINVAL;
	}
	/* DW_OP_bregN 0; DW_OP_stack_value: the register's value itself */
	if (nops == 2 && ops[1].atom == DW_OP_stack_value && ops[0].atom >= DW_OP_breg0 &&
	    ops[0].atom <= DW_OP_breg31 && ops[0].number == 0) {
		l->kind = VL_REG;
		return reg_of(ops[0].atom - DW_OP_breg0, l->base, sizeof(l->base)) ? 0 : -EINVAL;
	}
	if (nops == 2 && ops[1].atom == DW_OP_stack_value &&
	    ((ops[0].atom >= DW_OP_lit0 && ops[0].atom <= DW_OP_lit31) ||
	     ops[0].atom == DW_OP_consts || ops[0].atom == DW_OP_constu)) {
		l->kind = VL_CONST;
		l->off = ops[0].atom <= DW_OP_lit31 && ops[0].atom >= DW_OP_lit0 ?
				 (int64_t)(ops[0].atom - DW_OP_lit0) :
				 (int64_t)ops[0].number;
		return 0;
	}
	if (nops != 1)
		goto complex;
	if (ops[0].atom >= DW_OP_reg0 && ops[0].atom <= DW_OP_reg31) {
		l->kind = VL_REG;
		if (reg_of(ops[0].atom - DW_OP_reg0, l->base, sizeof(l->base)))
			return 0;
	} else if (ops[0].atom == DW_OP_regx) {
		l->kind = VL_REG;
		if (reg_of((unsigned)ops[0].number, l->base, sizeof(l->base)))
			return 0;
	} else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		l->kind = VL_MEM;
		l->off = (int64_t)ops[0].number;
		if (reg_of(ops[0].atom - DW_OP_breg0, l->base, sizeof(l->base)))
			return 0;
	} else if (ops[0].atom == DW_OP_fbreg) {
		int rc = frame_base(c, si, l);

		l->off += (int64_t)ops[0].number;
		return rc;
	} else if (ops[0].atom == DW_OP_addr) {
		l->kind = VL_ABS;
		l->off = (int64_t)(ops[0].number - c->site_delta);
		return 0;
	}
complex:
	if (ops[0].atom == DW_OP_entry_value || ops[0].atom == DW_OP_GNU_entry_value) {
		snprintf(c->why, c->whylen,
			 "optimized out here: only its value at the "
			 "function's entry is known (DW_OP_entry_value)");
		return -ENODATA;
	}
	snprintf(c->why, c->whylen,
		 "its location here (DW_OP 0x%x%s) is computed, not a "
		 "register or memory: not fetched",
		 ops[0].atom, nops > 1 ? ", ..." : "");
	return -EINVAL;
}

static bool find_member(Dwarf_Die *st, const char *name, size_t len, Dwarf_Die *m, int64_t *off)
{
	Dwarf_Die child;

	if (dwarf_child(st, &child))
		return false;
	do {
		const char *n = dwarf_diename(&child);
		Dwarf_Attribute a;
		Dwarf_Word w = 0;

		if (dwarf_tag(&child) != DW_TAG_member)
			continue;
		if (dwarf_attr(&child, DW_AT_data_member_location, &a) && dwarf_formudata(&a, &w))
			continue;
		if (n && strlen(n) == len && !memcmp(n, name, len)) {
			*m = child;
			*off = (int64_t)w;
			return true;
		}
		if (!n) { /* an anonymous struct or union: its members are the parent's */
			Dwarf_Die t;
			int64_t o2;

			if (peeled_type_of(&child, &t) && find_member(&t, name, len, m, &o2)) {
				*off = (int64_t)w + o2;
				return true;
			}
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

/* The fetch (with its type) of a value at l of type die's type. */
static int final_fetch(struct ctx *c, Dwarf_Die *holder, const struct vloc *l, char *out,
		       size_t size)
{
	Dwarf_Die t, sub;
	Dwarf_Attribute a;
	Dwarf_Word enc = DW_ATE_unsigned, sz = 8;
	char v[256];
	int tag;

	value_fetch(l, v, sizeof(v));
	if (!peeled_type_of(holder, &t)) {
		snprintf(c->why, c->whylen, "it has no type (void)");
		return -EINVAL;
	}
	tag = dwarf_tag(&t);
	if (dwarf_attr(holder, DW_AT_bit_size, &a)) {
		snprintf(c->why, c->whylen, "a bit-field: not fetched by name");
		return -EINVAL;
	}
	switch (tag) {
	case DW_TAG_pointer_type:
		if (peeled_type_of(&t, &sub) && is_char(&sub)) {
			if (l->kind == VL_CONST)
				return snprintf(out, size, "%s:x64", v), 0;
			snprintf(out, size, "+0(%s):string", v);
			return 0;
		}
		snprintf(out, size, "%s:x64", v);
		return 0;
	case DW_TAG_array_type:
		if (!peeled_type_of(&t, &sub) || !is_char(&sub)) {
			snprintf(c->why, c->whylen, "an array: not fetched whole");
			return -EINVAL;
		}
		if (l->kind == VL_MEM) /* the characters are where the array is */
			snprintf(out, size, "%+" PRId64 "(%s):string", l->off, l->base);
		else if (l->kind == VL_ABS)
			snprintf(out, size, "%s:string", v);
		else {
			snprintf(c->why, c->whylen, "a char array not in memory");
			return -EINVAL;
		}
		return 0;
	case DW_TAG_structure_type:
	case DW_TAG_union_type:
	case DW_TAG_class_type:
		snprintf(c->why, c->whylen, "a %s: name one of its fields (x.field, p->field)",
			 tag == DW_TAG_union_type ? "union" : "struct");
		return -EINVAL;
	case DW_TAG_enumeration_type:
		dwarf_formudata(dwarf_attr(&t, DW_AT_byte_size, &a), &sz);
		enc = DW_ATE_unsigned;
		break;
	case DW_TAG_base_type:
		dwarf_formudata(dwarf_attr(&t, DW_AT_encoding, &a), &enc);
		dwarf_formudata(dwarf_attr(&t, DW_AT_byte_size, &a), &sz);
		break;
	default:
		snprintf(c->why, c->whylen, "a type it cannot fetch (DW_TAG 0x%x)", tag);
		return -EINVAL;
	}
	if (sz != 1 && sz != 2 && sz != 4 && sz != 8) {
		snprintf(c->why, c->whylen, "a %u-byte value: not fetched", (unsigned)sz);
		return -EINVAL;
	}
	snprintf(out, size, "%s:%c%u", v,
		 enc == DW_ATE_signed || enc == DW_ATE_signed_char ? 's' :
		 enc == DW_ATE_float				   ? 'x' :
								     'u',
		 (unsigned)sz * 8);
	return 0;
}

static int scopes_at(struct up_dwarf *d, uint64_t pc, struct ctx *c)
{
	Dwarf_Die cu;
	uint64_t off;

	memset(c, 0, sizeof(*c));
	c->d = d;
	c->pc = pc;
	c->site_delta = up_sym_elf_vaddr_to_offset(d->sym, pc, &off) ? 0 : pc - off;
	if (!dwarf_addrdie(d->dbg, pc, &cu))
		return -ENOENT;
	c->nscopes = dwarf_getscopes(&cu, pc, &c->scopes);
	return c->nscopes > 0 ? 0 : -ENOENT;
}

static bool ident(char ch, bool first)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
	       (!first && ch >= '0' && ch <= '9');
}

int up_dwarf_fetch(struct up_dwarf *d, uint64_t vaddr, const char *expr, char *fetch, size_t size,
		   char *why, size_t whylen, int *errpos)
{
	struct ctx c;
	Dwarf_Die var, holder;
	struct vloc l;
	char name[128];
	size_t i = 0, n;
	int si, rc;

	*errpos = 0;
	while (ident(expr[i], i == 0))
		i++;
	if (!i || i >= sizeof(name)) {
		snprintf(why, whylen, "expected a variable name");
		return -EINVAL;
	}
	memcpy(name, expr, i);
	name[i] = '\0';
	rc = scopes_at(d, vaddr, &c);
	c.why = why;
	c.whylen = whylen;
	if (rc) {
		snprintf(why, whylen, "no debug information for address 0x%" PRIx64, vaddr);
		free(c.scopes);
		return rc;
	}
	si = dwarf_getscopevar(c.scopes, c.nscopes, name, 0, NULL, 0, 0, &var);
	if (si < 0) {
		snprintf(why, whylen,
			 "no variable '%s' in scope here (uprobe list --vars shows "
			 "what is)",
			 name);
		free(c.scopes);
		return -ENOENT;
	}
	rc = var_loc(&c, &var, si, &l);
	holder = var;
	while (!rc && expr[i]) {
		bool arrow = expr[i] == '-' && expr[i + 1] == '>';
		Dwarf_Die t, st, m;
		int64_t moff;
		size_t s;

		*errpos = (int)i;
		if (!arrow && expr[i] != '.') {
			snprintf(why, whylen, "expected ->FIELD or .FIELD");
			rc = -EINVAL;
			break;
		}
		s = i + (arrow ? 2 : 1);
		for (n = s; ident(expr[n], n == s); n++)
			;
		if (n == s) {
			snprintf(why, whylen, "expected a field name");
			rc = -EINVAL;
			break;
		}
		if (!peeled_type_of(&holder, &t)) {
			snprintf(why, whylen, "void has no fields");
			rc = -EINVAL;
			break;
		}
		if (arrow) {
			if (dwarf_tag(&t) != DW_TAG_pointer_type || !peeled_type_of(&t, &st)) {
				snprintf(why, whylen, "'->' needs a pointer to a struct here");
				rc = -EINVAL;
				break;
			}
		} else {
			st = t;
			if (l.kind != VL_MEM && l.kind != VL_ABS) {
				snprintf(why, whylen,
					 "'.' on a struct that is not in memory here "
					 "(in a register)");
				rc = -EINVAL;
				break;
			}
		}
		if (!find_member(&st, expr + s, n - s, &m, &moff)) {
			char tn[160];

			type_name(&st, tn, sizeof(tn), 0);
			snprintf(why, whylen, "%s has no field '%.*s'", tn, (int)(n - s), expr + s);
			*errpos = (int)s;
			rc = -ENOENT;
			break;
		}
		if (arrow) {
			char base[192];

			value_fetch(&l, base, sizeof(base));
			if (strlen(base) + 1 >= sizeof(l.base)) {
				snprintf(why, whylen, "too deep");
				rc = -EINVAL;
				break;
			}
			snprintf(l.base, sizeof(l.base), "%s", base);
			l.kind = VL_MEM;
			l.off = moff;
		} else {
			l.off += moff;
		}
		holder = m;
		i = n;
	}
	if (!rc)
		rc = final_fetch(&c, &holder, &l, fetch, size);
	free(c.scopes);
	return rc;
}

int up_dwarf_for_each_var(struct up_dwarf *d, uint64_t vaddr, up_dwarf_var_fn fn, void *ctx)
{
	struct ctx c;
	int rc = scopes_at(d, vaddr, &c);
	char why[160];

	c.why = why;
	c.whylen = sizeof(why);
	for (int i = 0; !rc && i < c.nscopes; i++) {
		Dwarf_Die child;
		int tag = dwarf_tag(&c.scopes[i]);

		if (tag == DW_TAG_compile_unit)
			break;
		if (dwarf_child(&c.scopes[i], &child) == 0) {
			do {
				int ct = dwarf_tag(&child);
				const char *name = dwarf_diename(&child);
				char tn[160], fetch[256];
				struct vloc l;
				Dwarf_Die t;

				if ((ct != DW_TAG_formal_parameter && ct != DW_TAG_variable) ||
				    !name)
					continue;
				if (type_of(&child, &t))
					type_name(&t, tn, sizeof(tn), 0);
				else
					snprintf(tn, sizeof(tn), "void");
				why[0] = '\0';
				if (var_loc(&c, &child, i, &l) == 0 &&
				    final_fetch(&c, &child, &l, fetch, sizeof(fetch)) == 0)
					rc = fn(ctx, tn, name, fetch, NULL);
				else
					rc = fn(ctx, tn, name, NULL, why);
			} while (!rc && dwarf_siblingof(&child, &child) == 0);
		}
		if (tag == DW_TAG_subprogram)
			break; /* its caller's variables are not in scope */
	}
	free(c.scopes);
	return rc;
}
