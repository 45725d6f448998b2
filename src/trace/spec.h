/* SPDX-License-Identifier: MIT */
/*
 * Probe specs: the text a user writes to ask for a probe, parsed into a struct the
 * tracer acts on.  Two forms are understood:
 *
 *   the seed's (seeds/008):   up PID ADDR D DADDR SIZE
 *                             up PID ADDR S SIZE
 *                             up PID ADDR A NARGS
 *   the kernel's uprobe_events form (Documentation/trace/uprobetracer.rst):
 *                             p[:[GRP/]EVENT] TARGET [FETCHARGS]
 *                             r[:[GRP/]EVENT] TARGET [FETCHARGS]
 *     TARGET    = PATH:OFFSET[%return][(REF_CTR_OFFSET)] | PATH:SYMBOL[+OFFSET][%return]
 *               | 0xVADDR[%return]
 *     FETCHARGS = [NAME=]FETCH[:TYPE] ...
 *     FETCH     = %REG | @ADDR | @+OFFSET | $stackN | $stack | $retval | $comm | $argN
 *               | $ustack | \IMM | \"STRING" | +|-[u]OFFS(FETCH)
 *     TYPE      = u8..u64 | s8..s64 | x8..x64 | string | ustring | b<W>@<O>/<C>
 *
 * The rules are the kernel's (trace_probe.c, trace_uprobe.c): default group "uprobes",
 * default event "p_<basename up to the first .-_>_0x<offset>" (also for return probes),
 * default argument names arg1, arg2 ..., default type x64 (x32 for a 32-bit process),
 * string types only on memory ($comm, @ADDR, +OFFS(..), \IMM, \"..."), the same limits
 * and the same error texts where the kernel has one.  Extensions over the kernel:
 * symbol and absolute targets, $argN, $ustack (the user stack: up to UP_SPEC_USTACK_MAX
 * return addresses by the frame-pointer walk, printed as named frames under the event
 * line; no type, no dereference), and sized register names (eax, r8d, al ...), which
 * read that part of the register and default to the x type of that width.  The
 * kernel's own names (ax, bx, cx, dx, si, di, bp, sp, ip, flags, r8..r15, cs, ss, ds,
 * es, fs, gs, orig_ax) mean the whole register, as they do in uprobe_events.
 *
 * This module only parses: it never reads a process, never prints, never exits.
 */
#ifndef UPROBE_TRACE_SPEC_H
#define UPROBE_TRACE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define UP_SPEC_MAX_ARGS 128	    /* MAX_TRACE_ARGS */
#define UP_SPEC_NAME_MAX 64	    /* MAX_EVENT_NAME_LEN, without the NUL */
#define UP_SPEC_ARG_NAME_MAX 32	    /* MAX_ARG_NAME_LEN, without the NUL */
#define UP_SPEC_ARG_TEXT_MAX 63	    /* MAX_ARGSTR_LEN, without the NUL */
#define UP_SPEC_FETCH_OPS_MAX 15    /* FETCH_INSN_MAX - 1 */
#define UP_SPEC_SEED_NARGS_MAX 6
#define UP_SPEC_SEED_SIZE_MAX 65536 /* bytes one D or S probe may dump */
#define UP_SPEC_DEFAULT_GROUP "uprobes"
#define UP_SPEC_USTACK_MAX 32	    /* frames of a $ustack */

enum up_spec_kind {
	UP_SPEC_SEED,  /* up PID ADDR D|S|A ... */
	UP_SPEC_EVENT, /* p:/r: */
};

enum up_spec_seed_type {
	UP_SEED_DATA = 'D',
	UP_SEED_STACK = 'S',
	UP_SEED_ARGS = 'A',
};

enum up_spec_target {
	UP_TARGET_OFFSET, /* PATH:OFFSET, a file offset as uprobe_events takes it */
	UP_TARGET_SYMBOL, /* PATH:SYMBOL[+OFFSET] */
	UP_TARGET_VADDR,  /* 0xVADDR, an absolute address in the traced process */
};

/* What a fetch argument's value is printed as. */
enum up_type_kind {
	UP_TYPE_U,	/* unsigned decimal */
	UP_TYPE_S,	/* signed decimal */
	UP_TYPE_X,	/* hexadecimal */
	UP_TYPE_STRING, /* NUL-terminated string, "string" and "ustring" */
	UP_TYPE_STACK,	/* $ustack's: return addresses, innermost first */
};

struct up_type {
	enum up_type_kind kind;
	uint8_t size;	  /* bytes: 1, 2, 4, 8; 0 for strings */
	bool is_default;  /* no :TYPE and nothing implied it: x64, or x32 in a 32-bit process */
	bool is_ustring;  /* written "ustring" (same behaviour here: all memory is user) */
	bool is_bitfield; /* b<bw>@<bo>/<size*8>: kind is UP_TYPE_U */
	uint8_t bf_width;
	uint8_t bf_offset;
};

/* A register as a slice of struct user_regs_struct. */
struct up_reg {
	uint16_t offset; /* offsetof(struct user_regs_struct, field) */
	uint8_t size;	 /* bytes read: 8, 4, 2 or 1 */
	uint8_t shift;	 /* 8 for ah/bh/ch/dh, else 0 */
	bool only64;	 /* r8..r15 and the r*x names: not in a 32-bit process */
	bool whole;	 /* a kernel name: the full register, any process */
};

enum up_fetch_op {
	UP_FOP_REG,    /* reg */
	UP_FOP_STACK,  /* $stackN: the Nth word above sp; param = N */
	UP_FOP_STACKP, /* $stack: sp */
	UP_FOP_RETVAL, /* $retval: return probes only */
	UP_FOP_COMM,   /* $comm */
	UP_FOP_ARG,    /* $argN: param = N (from 1), by the ABI at function entry */
	UP_FOP_IMM,    /* @ADDR (followed by a DEREF) or \IMM: imm */
	UP_FOP_FOFFS,  /* @+OFFSET: imm is a file offset, turned into an address */
	UP_FOP_DATA,   /* \"STRING": the arg's own text, data_pos/data_len into comm */
	UP_FOP_DEREF,  /* read memory at value + offset */
	UP_FOP_USTACK, /* $ustack: the frame-pointer walk of the user stack (trace/stack.h) */
};

struct up_fetch_insn {
	enum up_fetch_op op;
	struct up_reg reg;
	uint64_t imm;
	int64_t offset;
	uint32_t param;
};

/*
 * One fetch argument: ops[0] produces a value, each later op is a DEREF of it.  As in
 * the kernel, every DEREF but the last reads a pointer; the last reads the type's size,
 * or, for string types, is where the string starts (so "+0(%di):string" is the string
 * %di points to, and "@0x601040:string" the string stored at 0x601040).
 */
struct up_fetch_arg {
	char name[UP_SPEC_ARG_NAME_MAX + 1];
	char comm[UP_SPEC_ARG_TEXT_MAX + 1]; /* the FETCH[:TYPE] text, as the kernel keeps it */
	struct up_type type;
	struct up_fetch_insn ops[UP_SPEC_FETCH_OPS_MAX];
	int nops;
	uint16_t data_pos, data_len; /* UP_FOP_DATA: the string in comm */
};

struct up_spec {
	enum up_spec_kind kind;

	/* UP_SPEC_SEED */
	pid_t pid;		      /* 0: the process the tool launches */
	uint64_t addr;		      /* the probed address */
	enum up_spec_seed_type seed_type;
	uint64_t daddr;		      /* D: where to dump from */
	uint64_t size;		      /* D, S: bytes; A: number of arguments */

	/* UP_SPEC_EVENT */
	bool is_return;
	char group[UP_SPEC_NAME_MAX + 1];
	char event[UP_SPEC_NAME_MAX + 1];
	enum up_spec_target target;
	char *path;	    /* OFFSET, SYMBOL: the file (allocated) */
	char *symbol;	    /* SYMBOL (allocated) */
	uint64_t offset;    /* OFFSET: file offset; SYMBOL: offset from the symbol */
	uint64_t vaddr;	    /* VADDR */
	uint64_t ref_ctr_offset; /* (REF_CTR_OFFSET), 0 when absent */
	struct up_fetch_arg *args; /* allocated, nargs of them */
	int nargs;
};

/* Where and why a spec was refused: pos/len index the text given to up_spec_parse. */
struct up_spec_err {
	int pos; /* -1 when the error is not at a place in the text */
	int len; /* >= 1 */
	char msg[128];
};

/*
 * Parse one spec.  Leading/trailing blanks and a '#' comment are ignored.  On success
 * returns 0 and fills *out, which the caller releases with up_spec_free(); on failure
 * returns -EINVAL (or -ENOMEM), leaves nothing to free in *out and, if err is not
 * NULL, says where and why.
 */
int up_spec_parse(const char *text, struct up_spec *out, struct up_spec_err *err);

/* Is the probe a function's first instruction (a symbol, no offset, not a return)?
   There [sp] holds its caller's return address and bp is still the caller's frame. */
bool up_spec_at_function_entry(const struct up_spec *spec);

/* Release what up_spec_parse allocated; accepts NULL and a zeroed struct. */
void up_spec_free(struct up_spec *spec);

/*
 * The error as two or three lines, each ending in '\n':
 *     the spec text
 *     a caret line, "^~~~" under the offending token   (left out when err->pos < 0)
 *     the message
 * snprintf semantics: returns the length the whole text needs (truncating to size).
 */
/* Fills err (when not NULL) with where and why; returns -EINVAL.  For the parsers of
   spec-like text (specs, hist triggers). */
__attribute__((format(printf, 4, 5))) int up_spec_fail(struct up_spec_err *err, int pos,
							int len, const char *fmt, ...);
/* A blank as the kernel's parsers take it (isspace in the C locale). */
bool up_spec_is_blank(char c);

int up_spec_err_format(const char *text, const struct up_spec_err *err, char *buf,
		       size_t size);

/*
 * The spec back as text, the way the kernel lists it: "up 3906 0x400498 D 0x600960 15"
 * (seed 008's uprobes_seq_show) or "p:uprobes/ev /bin/zsh:0x0000000000046420 arg1=%ip"
 * (trace_uprobe_show).  snprintf semantics.
 */
int up_spec_format(const struct up_spec *spec, char *buf, size_t size);

/*
 * Append-only text buffer with snprintf semantics, shared by src/trace/: len counts
 * every byte asked for, buf keeps what fits and stays NUL-terminated.
 */
struct up_spec_buf {
	char *buf;
	size_t size;
	size_t len;
};

__attribute__((format(printf, 2, 3))) void up_spec_buf_printf(struct up_spec_buf *b,
							       const char *fmt, ...);
void up_spec_buf_putc(struct up_spec_buf *b, char c);
void up_spec_buf_put(struct up_spec_buf *b, const char *s, size_t n);
/* The result for a function returning int with snprintf semantics. */
int up_spec_buf_result(const struct up_spec_buf *b);

/* Name of a type as written ("u32", "string", "b4@3/32"); for the default, "x64". */
int up_spec_type_name(const struct up_type *type, bool is32, char *buf, size_t size);

#endif /* UPROBE_TRACE_SPEC_H */
