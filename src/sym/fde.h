/* SPDX-License-Identifier: MIT */
/*
 * The ranges of a file's .eh_frame FDEs (src/sym/fde.c): where the functions the
 * compiler described for unwinding begin and end.  Prefix: up_fde_.
 */
#ifndef UPROBE_SYM_FDE_H
#define UPROBE_SYM_FDE_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

struct up_fde {
	uint64_t start, end; /* [initial_location, + address_range) */
};

/* Every FDE of elf's .eh_frame, sorted by start, in a malloc'd array the caller frees
   (NULL and 0 where there is none).  0, or -ENOMEM. */
int up_fde_table(Elf *elf, struct up_fde **out, size_t *n);

/* The same of elf's .debug_frame (a separate debug file's, or a file's own where it was
   built without .eh_frame): its pointers are absolute, as its CIEs say nothing else. */
int up_fde_table_debug(Elf *elf, struct up_fde **out, size_t *n);

/* The FDE of v[0..n) that holds vaddr, or NULL. */
const struct up_fde *up_fde_find(const struct up_fde *v, size_t n, uint64_t vaddr);

#endif
