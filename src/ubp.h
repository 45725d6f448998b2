/* SPDX-License-Identifier: MIT */
/*
 * UBP, the user-space breakpoint layer (seed 002): find out whether an address of a
 * traced process can take a breakpoint, analyse the instruction there, and insert,
 * remove and verify the int3 while keeping the original byte.  Callers change text
 * only with the process quiesced.  Prefix: up_ubp_.
 */
#ifndef UPROBE_UBP_H
#define UPROBE_UBP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch/x86/insn.h"
#include "task/task.h"

struct up_sym_elf;

/* The instruction starts of the last function checked (ubp.c). */
struct up_ubp_fn {
	struct up_sym_elf *elf;
	uint64_t start, size, limit;
	uint8_t *starts;
};

/* ELF files opened to check instruction boundaries, kept across calls. */
struct up_ubp_files {
	struct {
		char path[256];
		uint64_t ino;
		struct up_sym_elf *elf;
	} f[16];
	unsigned n, next;
	struct up_ubp_fn fn;
	/* the mapping found last, reused within one batch (gen: bumped by the caller per
	   batch, as mappings may change between batches) */
	struct up_map map;
	struct up_proc *map_proc;
	unsigned gen, map_gen;
	/* regions of a file found free (up_ubp_region_free): every process that maps the
	   file asks again for the same site, and a scan costs ~0.25 ms of each process
	   followed; forgotten with the file */
	struct {
		struct up_sym_elf *elf;
		uint64_t flo, fhi;
	} free_seen[8];
	unsigned free_next;
};
void up_ubp_files_clear(struct up_ubp_files *files);
/*
 * The opened ELF file that p maps at m (kept in files, by path and inode), or NULL when
 * it cannot be read or is refused (up_sym_elf_open_map: /proc/PID/map_files, never a
 * FIFO or device that now sits at the mapping's path).
 */
struct up_sym_elf *up_ubp_file(struct up_ubp_files *files, struct up_proc *p,
			       const struct up_map *m);

struct up_ubp {
	uint64_t vaddr;
	uint8_t orig; /* the byte the int3 replaced */
	bool inserted;
	bool fresh; /* orig was read by up_ubp_prepare and not written since: insert uses it */
	struct up_insn insn;
};

/*
 * Checks that vaddr is in an executable mapping of p and on an instruction boundary
 * (decoding from the enclosing function's start where the mapped file has symbols),
 * and analyses the instruction there into b->insn.  Returns 0; -EINVAL (not
 * executable, not mapped, or inside an instruction), -ENOTSUP (cannot be probed),
 * -EEXIST (an int3 that is not ours is there), with the explanation in msg.
 */
int up_ubp_prepare(struct up_proc *p, struct up_ubp_files *files, uint64_t vaddr,
		   struct up_ubp *b, char *msg, size_t msglen);

/*
 * Can a jmp cover [lo, hi), several instructions, without anything arriving inside?
 * Only where the mapped file has a symbol for the enclosing function: it is decoded
 * whole, and no direct branch of it (or of its ".cold" part) may target (lo, hi), nor
 * any entry of its jump tables (tables of 4-byte offsets from a rip-relative base, or
 * of absolute 8-byte addresses).  An indirect jmp whose table cannot be found makes it
 * unsafe.  0 when safe, -ENOTSUP with why.
 */
int up_ubp_region_free(struct up_proc *p, struct up_ubp_files *files, uint64_t lo, uint64_t hi,
		       char *why, size_t whylen);

/* The same over the file's own addresses (no process: jump tables read from the file). */
int up_ubp_region_free_file(struct up_sym_elf *elf, uint64_t lo, uint64_t hi, char *why,
			    size_t whylen);

/* Writes the int3; -EEXIST when an int3 is already there. */
int up_ubp_insert(struct up_proc *p, struct up_ubp *b);
/* Restores the original byte; -EINVAL when the int3 there is not ours (it is gone). */
int up_ubp_remove(struct up_proc *p, struct up_ubp *b);
/* 1 when our int3 is in place, 0 when not, or -errno. */
int up_ubp_verify(struct up_proc *p, const struct up_ubp *b);

#endif
