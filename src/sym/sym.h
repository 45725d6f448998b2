/* SPDX-License-Identifier: MIT */
/*
 * ELF files as the probe layers see them (over elfutils' libelf): the executable
 * sections and their bytes, function symbols with their bounds, and the vaddr -> file
 * offset mapping that file-based probes (and the kernel's uprobe_events) are written in.
 *
 * Only x86 files (EM_X86_64, EM_386) open; everything else is -ENOEXEC.  The handle
 * keeps the file mapped: section bytes and symbol names stay valid until it is closed.
 * Nothing here prints or exits.  Prefix: up_sym_.
 *
 * A file without .symtab (stripped) takes its function symbols from a separate debug
 * file when one is found, the way gdb finds it, at open time:
 *   1. by build-id (NT_GNU_BUILD_ID): <root>/.build-id/XX/YYYY....debug, XX the first
 *      byte in hex and the rest after; the debug file must carry the same build-id;
 *   2. by .gnu_debuglink (name + CRC32): DIR/name, DIR/.debug/name, <root>/DIR/name, DIR
 *      the file's directory (and, when a symlink leads elsewhere, the real one's); the
 *      CRC32 of the whole debug file must match, and so must the build-ids when both
 *      files have one.
 * The roots are /usr/lib/debug, or the colon-separated list in UPROBE_DEBUG_DIRS when
 * that is set (empty: no roots).  A debug file must be of the same class and machine
 * and have a .symtab.  Code bytes and segments always come from the file itself.
 */
#ifndef UPROBE_SYM_SYM_H
#define UPROBE_SYM_SYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct up_sym_elf;
struct up_file_map;

/*
 * Opens path.  Returns 0 and the handle in *out, or a negative errno: -ENOENT when the
 * file does not exist (and the other errnos of open(2)), -EISDIR for a directory,
 * -ENOEXEC when it is not an ELF file, not an x86 one, or its section table is cut off
 * (a truncated file), -ENOMEM, or a refusal of up_file_open() (sym/file.h: not a
 * regular file, too big; up_file_strerror() says why).  Files are opened as
 * up_file_open() does, the debug files too: never a FIFO or a device, never blocking.
 */
int up_sym_elf_open(const char *path, struct up_sym_elf **out);
/*
 * The same for the file a process maps (map: where), as /proc/PID/maps names it (path):
 * the inode mapped, through /proc/PID/map_files where the caller may, else path, not
 * followed if a symlink, and held to the inode maps gives.
 */
int up_sym_elf_open_map(const char *path, const struct up_file_map *map, struct up_sym_elf **out);
void up_sym_elf_close(struct up_sym_elf *elf);

/*
 * Tells what kind of ELF file path is, without the x86 restriction, so that a caller
 * can explain a -ENOEXEC from up_sym_elf_open: 0 with the class (32 or 64) and e_machine,
 * -ENOEXEC when it is not ELF at all, or another negative errno from open(2).
 * Either out pointer may be NULL.
 */
int up_sym_elf_identify(const char *path, int *elf_class, unsigned *machine);

/*
 * A library named without a path ("libc", "libssl"), as bpftrace resolves it
 * (libpath.c): a file NAME.so* or NAME-*.so that process pid maps (pid > 0), else the
 * linker's search path (LD_LIBRARY_PATH, then the multiarch and the usual directories:
 * NAME.so.N before NAME.so).  true with the path in out.
 */
bool up_sym_find_lib(const char *name, pid_t pid, char *out, size_t size);

const char *up_sym_elf_path(const struct up_sym_elf *elf);
int up_sym_elf_class(const struct up_sym_elf *elf);	   /* 32 or 64 */
unsigned up_sym_elf_machine(const struct up_sym_elf *elf); /* EM_X86_64 or EM_386 */
unsigned up_sym_elf_type(const struct up_sym_elf *elf);	   /* ET_EXEC, ET_DYN, ET_REL, ... */

/* The separate debug file the symbols also come from (see above), or NULL. */
const char *up_sym_elf_debug_path(const struct up_sym_elf *elf);

/* An executable (SHF_EXECINSTR) section with its bytes in the file. */
struct up_sym_section {
	const char *name;
	uint64_t vaddr;	 /* sh_addr */
	uint64_t size;	 /* bytes at data */
	uint64_t offset; /* sh_offset */
	const uint8_t *data;
};

/*
 * Calls fn for every executable section that has bytes in the file (SHT_NOBITS ones
 * are skipped), in section header order.  A non-zero return from fn stops the walk and
 * is returned.  Returns 0, or a negative errno when the section table is unreadable.
 */
typedef int (*up_sym_section_fn)(const struct up_sym_section *sec, void *ctx);
int up_sym_elf_for_each_exec_section(struct up_sym_elf *elf, up_sym_section_fn fn, void *ctx);

/*
 * The bytes at [vaddr, vaddr + size) of an executable section.  Returns 0 with *data
 * pointing into the file's mapping, -ENOENT when vaddr is in no executable section,
 * -ERANGE when the range runs past the end of the section that holds vaddr.
 */
int up_sym_elf_code(struct up_sym_elf *elf, uint64_t vaddr, uint64_t size, const uint8_t **data);

/* A function symbol (STT_FUNC or STT_GNU_IFUNC, defined in the file). */
struct up_sym {
	const char *name;
	uint64_t value; /* st_value: the function's vaddr */
	uint64_t size;	/* st_size; 0 when the symbol does not say */
	bool global;	/* STB_GLOBAL or STB_WEAK */
	bool ifunc;	/* STT_GNU_IFUNC: value is the resolver */
	bool dynamic;	/* found in .dynsym rather than .symtab */
	bool debug_file; /* found in the separate debug file's .symtab */
	bool unnamed;	 /* no symbol: the range of an .eh_frame FDE */
};

/*
 * Looks name up among the function symbols, in .symtab first, then in the debug file's
 * .symtab, then in .dynsym; the first match in table order wins.  Returns 0 and fills
 * *out, or -ENOENT.
 */
int up_sym_elf_lookup(struct up_sym_elf *elf, const char *name, struct up_sym *out);
/* The same among the data symbols (STT_OBJECT): a variable's vaddr and size. */
int up_sym_elf_lookup_object(struct up_sym_elf *elf, const char *name, struct up_sym *out);

/*
 * Calls fn for every function symbol, sorted by address (then by name).  A symbol that
 * is in both a .symtab (the file's or the debug file's) and .dynsym with the same name
 * and value is reported once, as the .symtab one.  A non-zero return from fn stops the walk and is returned.
 */
typedef int (*up_sym_fn)(const struct up_sym *sym, void *ctx);
int up_sym_elf_for_each_func(struct up_sym_elf *elf, up_sym_fn fn, void *ctx);

/*
 * The function whose [value, value + size) holds vaddr; among several (aliases,
 * nested ranges) the one with the highest start, then a global one.  Returns 0 and
 * fills *out, or -ENOENT.
 */
int up_sym_elf_enclosing_func(struct up_sym_elf *elf, uint64_t vaddr, struct up_sym *out);

/*
 * The same, or where no symbol holds vaddr (a stripped file's static functions), the
 * range of the .eh_frame FDE that does: a function the compiler described for
 * unwinding, named "a function without a symbol".  For code analysis (where a
 * function begins and ends), not for naming.
 */
int up_sym_elf_enclosing_code(struct up_sym_elf *elf, uint64_t vaddr, struct up_sym *out);

/*
 * Whether vaddr is where a function begins: the start of a function symbol (one of no
 * size included: glibc's __restore_rt), or where no symbol starts there, of an .eh_frame
 * FDE.  Returns 0 and fills *out (the global symbol among aliases), or -ENOENT.
 */
int up_sym_elf_func_entry(struct up_sym_elf *elf, uint64_t vaddr, struct up_sym *out);

/* Whether the file, or its debug file, has a .symtab: every function named, static ones
   too, so that code no symbol or FDE covers is no function's. */
bool up_sym_elf_full_symbols(const struct up_sym_elf *elf);

/*
 * Whether a probe may be placed at vaddr of the file, judged from the file alone, before
 * anything is written into a process: vaddr must lie in an executable section, inside a
 * function the file describes (a symbol or an unwind table's FDE; in a stripped file,
 * whose static functions without CFI -- crt's frame_dummy -- nothing describes, any code
 * passes), and for a return probe
 * (is_return) at the function's very entry -- a return probe elsewhere would take a word
 * that is not a return address for one.  Returns 0, or -EINVAL with the reason in why
 * (naming the place as SYMBOL+OFFSET where a symbol holds it).
 */
int up_sym_elf_check_place(struct up_sym_elf *elf, uint64_t vaddr, bool is_return, char *why,
			   size_t whylen);

/*
 * Maps vaddr to its offset in the file through the PT_LOAD segment that holds it in
 * its file image (p_vaddr <= vaddr < p_vaddr + p_filesz): offset = vaddr - p_vaddr +
 * p_offset.  Returns 0, or -ENOENT when no such segment exists (a relocatable object,
 * or a vaddr in .bss).
 */
int up_sym_elf_vaddr_to_offset(struct up_sym_elf *elf, uint64_t vaddr, uint64_t *offset);

/* The inverse: the vaddr of a file offset inside a PT_LOAD's file image, or -ENOENT. */
int up_sym_elf_offset_to_vaddr(struct up_sym_elf *elf, uint64_t offset, uint64_t *vaddr);

/* One pointer of data a user derives from the file (ubp.c: its branch targets), kept
   with it and released by release when the file is closed or the data replaced. */
void *up_sym_elf_cache(const struct up_sym_elf *elf);
void up_sym_elf_set_cache(struct up_sym_elf *elf, void *data, void (*release)(void *));

/* len bytes of the file's image at vaddr (a loaded segment's bytes from the file, any
   section: jump tables in .rodata too).  0, -ENOENT (not in the file's bytes), -EIO. */
int up_sym_elf_read(struct up_sym_elf *elf, uint64_t vaddr, void *buf, size_t len);

/*
 * Calls fn with the path of each shared library the file needs (DT_NEEDED), found
 * where the dynamic linker looks first: its DT_RUNPATH (or DT_RPATH) directories,
 * $ORIGIN expanded, then the system's library directories for its class (the
 * multiarch ones, lib64/lib32, lib, /usr/local/lib).  A library found nowhere is
 * skipped.  Direct dependencies only, in DT_NEEDED order; a non-zero return from fn
 * stops the walk and is returned.  0, or a negative errno for an unreadable file.
 */
typedef int (*up_sym_path_fn)(void *ctx, const char *path);
int up_sym_elf_for_each_needed(struct up_sym_elf *elf, up_sym_path_fn fn, void *ctx);

#endif
