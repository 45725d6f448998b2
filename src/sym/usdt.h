/* SPDX-License-Identifier: MIT */
/*
 * USDT probes: the SystemTap SDT notes (<sys/sdt.h>, DTRACE_PROBE / STAP_PROBE) a file
 * carries in .note.stapsdt, read with libelf.  Each note names a probe site
 * (provider:name), its address, its semaphore (a 16-bit counter the program reads to
 * decide whether to compute the probe's arguments; 0 when there is none) and its
 * arguments as assembler operands, "SIZE@OPERAND": "-4@%edi", "8@-8(%rbp)",
 * "8@%rax", "4@$5", "-4@counter(%rip)".  The size is in bytes, negative when signed.
 *
 * Addresses are adjusted for prelinking as the notes ask (the .stapsdt.base section's
 * address against the note's base), and given as file offsets too: the kernel's
 * uprobe_events take PATH:0xOFFSET(0xREF_CTR_OFFSET), both file offsets.
 *
 * Only x86-64 operands are understood.  Nothing here prints or exits.  Prefix: up_usdt_.
 */
#ifndef UPROBE_SYM_USDT_H
#define UPROBE_SYM_USDT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UP_USDT_ARGS_MAX 12 /* <sys/sdt.h> goes up to STAP_PROBE12 */

enum up_usdt_arg_kind {
	UP_USDT_ARG_CONST, /* $IMM: value */
	UP_USDT_ARG_REG,   /* %REG: reg */
	UP_USDT_ARG_MEM,   /* OFF(%REG): value is the offset */
	UP_USDT_ARG_FOFFS, /* SYM+OFF(%rip): the data at @+value (see up_usdt_arg_parse) */
};

struct up_usdt_arg {
	enum up_usdt_arg_kind kind;
	uint8_t size; /* bytes: 1, 2, 4 or 8 */
	bool is_signed;
	char reg[6]; /* the kernel's name of the whole register: "di", "r8", "ip" */
	int64_t value;
};

struct up_usdt_probe {
	const char *provider; /* these point into the handle: valid until it is closed */
	const char *name;
	const char *args_text; /* the note's operand string, as written */
	uint64_t vaddr;	       /* the probe site */
	uint64_t offset;       /* its file offset */
	uint64_t sema_vaddr;   /* the semaphore, 0 when the probe has none */
	uint64_t sema_offset;  /* its file offset (the kernel's ref_ctr_offset) */
	int nargs;	       /* -1 when an operand could not be parsed: args_text says */
	struct up_usdt_arg args[UP_USDT_ARGS_MAX];
};

struct up_usdt_file;

/*
 * Reads every SDT note of path.  0 and *out (possibly with no probe), or a negative
 * errno: -ENOENT and the others of open(2), -ENOEXEC (not an ELF file), -ENOMEM.
 */
int up_usdt_open(const char *path, struct up_usdt_file **out);
void up_usdt_close(struct up_usdt_file *f);

size_t up_usdt_count(const struct up_usdt_file *f);
/* Probe i, in note order. */
const struct up_usdt_probe *up_usdt_probe(const struct up_usdt_file *f, size_t i);

/*
 * Parses one operand ("-4@%edi").  0, or -EINVAL for a form this reader does not take
 * (an index register, an unknown register, a bad size), -ENOENT when it names a symbol
 * that resolve (may be NULL) cannot find.  resolve maps a symbol's name to what the
 * kernel's @+OFFSET takes for its address: the offset from the probed instruction's
 * mapping (trace_uprobe.c's translate_user_vaddr), vaddr - site vaddr + site offset.
 */
typedef int (*up_usdt_resolve_fn)(void *ctx, const char *sym, uint64_t *file_offset);
int up_usdt_arg_parse(const char *text, size_t len, struct up_usdt_arg *arg,
		      up_usdt_resolve_fn resolve, void *ctx);

/*
 * The argument as a fetch of the kernel's uprobe_events ("%di", "-8(%bp)", "\5",
 * "@+0x4010"), without a type; and its type ("s32", "u64").  snprintf semantics.
 */
int up_usdt_arg_fetch(const struct up_usdt_arg *arg, char *buf, size_t size);
int up_usdt_arg_type(const struct up_usdt_arg *arg, char *buf, size_t size);

#endif
