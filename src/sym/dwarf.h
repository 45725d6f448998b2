/* SPDX-License-Identifier: MIT */
/*
 * Debug information (DWARF, through elfutils' libdw) as probe specs use it, perf
 * probe's way: where a function or a source line is, and how to fetch a parameter or
 * local variable, or a field of one, at a probe address -- written as a fetch
 * argument of the kernel's uprobe_events ("+8(%di)", "+0(+16(%di)):string"), typed
 * by the variable's C type, so that both backends read it alike.
 *
 * The DWARF comes from the file itself or from its separate debug file, found as the
 * symbol reader finds it (build-id, then .gnu_debuglink: sym.h).  Locations handled:
 * a register (DW_OP_regN), memory at a register plus an offset (DW_OP_bregN), the
 * frame base plus an offset (DW_OP_fbreg, the frame base a register or the CFA from
 * the call frame information), a static address (DW_OP_addr), a constant
 * (DW_AT_const_value).  Anything else (DW_OP_entry_value, pieces, computed values) is
 * refused with the reason.
 *
 * Only x86-64.  Nothing here prints or exits.  Prefix: up_dwarf_.
 */
#ifndef UPROBE_SYM_DWARF_H
#define UPROBE_SYM_DWARF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct up_dwarf;

/*
 * Opens path's debug information.  0 and *out, -ENOENT (and open(2)'s errnos) for the
 * file, -ENOEXEC (not ELF), -ENODATA (no DWARF in it or a debug file), -ENOMEM.
 */
int up_dwarf_open(const char *path, struct up_dwarf **out);
void up_dwarf_close(struct up_dwarf *d);
/* The file the DWARF was read from (path, or its debug file). */
const char *up_dwarf_source(const struct up_dwarf *d);

/* A probe address and where it is in the source. */
struct up_dwarf_site {
	uint64_t vaddr;
	uint64_t offset; /* file offset (what PATH:0xOFFSET takes) */
	char func[128];	 /* the enclosing function (the outermost, for inlined code) */
	char file[256];
	int line;
};

/*
 * The place to probe function func, as perf probe chooses it: its entry, or, in a
 * compilation unit built without optimization (its variables are valid only once the
 * prologue stored them), the first line-table address after the entry.  0,
 * -ENOENT (no such function with code), -ENOMEM.
 */
int up_dwarf_func_site(struct up_dwarf *d, const char *func, struct up_dwarf_site *out);

/*
 * Every address where source line `line` of file begins (the lowest of each
 * function that has code of it), file matched by its base name or a path suffix
 * ("prog.c", "src/prog.c"); or, with func set, line lines after func's declaration
 * line (perf's FUNC:RELLINE) in that function.  fn is called for each; returns 0,
 * -ENOENT (no code for that line), or fn's non-zero return.
 */
typedef int (*up_dwarf_site_fn)(void *ctx, const struct up_dwarf_site *site);
int up_dwarf_line_sites(struct up_dwarf *d, const char *file, const char *func, int line,
			up_dwarf_site_fn fn, void *ctx);

/*
 * Compiles expr, a variable with optional fields ("n", "req->name", "st.count",
 * "a->b->c"), into a fetch argument for the probe at vaddr: fetch gets "FETCH:TYPE"
 * (the type the C type implies: s32, u8, x64 for pointers, string for char * and char
 * arrays).  0, or -ENOENT (no such variable in scope / no such field), -ENODATA
 * (optimized out at that address), -EINVAL (a type or location it cannot fetch), with
 * why[] saying so and *errpos the offset in expr where it went wrong.
 */
int up_dwarf_fetch(struct up_dwarf *d, uint64_t vaddr, const char *expr, char *fetch, size_t size,
		   char *why, size_t whylen, int *errpos);

/*
 * Calls fn for each parameter and local variable in scope at vaddr, innermost
 * scope first: its C type ("struct req *"), name, and the fetch that reads it (NULL
 * when it cannot be read there, why then says why: "optimized out").  Returns 0,
 * -ENOENT (no function at vaddr) or fn's non-zero return.
 */
typedef int (*up_dwarf_var_fn)(void *ctx, const char *type, const char *name, const char *fetch,
			       const char *why);
int up_dwarf_for_each_var(struct up_dwarf *d, uint64_t vaddr, up_dwarf_var_fn fn, void *ctx);

#endif
