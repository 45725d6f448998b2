/* SPDX-License-Identifier: MIT */
/*
 * Fetch arguments: evaluates a parsed FETCHARG (spec.h) against one hit, given the
 * thread's registers and a way to read the traced process's memory, and prints the
 * value the way the kernel's uprobe tracer does (trace_probe.c print functions):
 *
 *   u8/u16/u32 "%u", u64 "%llu", s8/s16/s32 "%d", s64 "%lld",
 *   x8/x16/x32 "0x%x", x64 "0x%llx" (no padding), bitfields as the unsigned type of
 *   their container, strings "\"%s\"" and a string that could not be read "(fault)".
 *
 * One deliberate difference: a number whose memory read failed also prints "(fault)"
 * (the kernel leaves whatever the per-cpu buffer held; $stackN gives 0).  Values are
 * what the thread would see: in a 32-bit process addresses wrap at 4 GiB, pointers and
 * stack slots are 4 bytes, $argN comes from the stack and the default type is x32.
 *
 * Nothing here uses ptrace: memory comes through env->read.  Never prints, never exits.
 */
#ifndef UPROBE_TRACE_FETCH_H
#define UPROBE_TRACE_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

#include "trace/spec.h"

#define UP_FETCH_STRING_MAX 4096 /* the kernel's MAX_STRING_SIZE, with the NUL */

struct up_fetch_env {
	/* of the thread that hit the probe; at a return (has_retval) the words from
	   fs_base on hold the entry's arguments, $arg1..$arg6 (UPROBE_ENTRY_ARG_WORD) */
	const struct user_regs_struct *regs;
	bool is32;			     /* a 32-bit (i386) process */
	/* Read len bytes at addr: 0 when all were read, else a negative errno. */
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
	uint64_t retval;  /* $retval when has_retval, else the ax register is used */
	bool has_retval;
	const char *comm; /* $comm; NULL reads as "" */
	uint64_t file_bias; /* @+OFFSET reads at file_bias + OFFSET: probe vaddr - file offset */
	bool at_entry; /* $ustack: the hit is a function's first instruction, [sp] its caller */
	/* $ustack: the process's files, to walk by their unwind tables (up_stack_unwind);
	   NULL: frame pointers (a record's memory holds only what the agent's walk read) */
	struct up_stack_syms *syms;
};

struct up_fetch_value {
	struct up_type type; /* resolved: the default is x64, or x32 in a 32-bit process */
	int err;	     /* 0, or -EFAULT when a read failed: prints "(fault)" */
	uint64_t fault_addr; /* where, when err */
	uint64_t u;	     /* numbers: the type.size bytes zero-extended (bitfield extracted) */
	const char *str;     /* strings: NUL-terminated, in the caller's buffer */
	size_t str_len;	     /* without the NUL */
	bool truncated;	     /* the string did not fit the buffer (the kernel cuts it too) */
	/* $ustack: the walk's return addresses (in the caller's buffer, innermost first),
	   and once a tracer has named them, str holds one name a line (up_fetch_name_stack) */
	const uint64_t *frames;
	unsigned nframes;
};

/*
 * Evaluate one argument.  Strings go into strbuf (strsize bytes, at most
 * UP_FETCH_STRING_MAX are used), cut at strsize - 1 as the kernel cuts at its maximum.
 * Returns 0 with *out filled -- a memory fault is a value (out->err), not a failure --
 * or -EINVAL when the argument cannot be evaluated here: a 64-bit-only register in a
 * 32-bit process, no read callback, no string buffer for a string.
 */
int up_fetch_eval(const struct up_fetch_arg *arg, const struct up_fetch_env *env,
		  struct up_fetch_value *out, char *strbuf, size_t strsize);

/*
 * Evaluate every argument of an event spec into vals[0..spec->nargs), sharing arena
 * between the strings and the stacks.  Returns 0 or the first negative errno.
 */
int up_fetch_eval_all(const struct up_spec *spec, const struct up_fetch_env *env,
		      struct up_fetch_value *vals, char *arena, size_t arena_size);

/* -EINVAL if the argument names a register a 32-bit process does not have, else 0. */
int up_fetch_arg_check(const struct up_fetch_arg *arg, bool is32);

/*
 * The Nth (from 1) integer argument at function entry, by the ABI: x86-64 rdi, rsi,
 * rdx, rcx, r8, r9, then the stack above the return address; i386 all on the stack.
 * Returns 0, -EINVAL for n == 0, or the read's error (-EFAULT).
 */
int up_fetch_abi_arg(const struct up_fetch_env *env, unsigned int n, uint64_t *val);

/*
 * A $ustack value's frames named by name() into buf, one a line (no '\n' after the
 * last); the walk's garbage tail is cut where name() returns a negative number (a frame
 * in no executable mapping: code without frame pointers).  str then holds the text.
 */
void up_fetch_name_stack(struct up_fetch_value *v, char *buf, size_t size,
			 int (*name)(void *ctx, unsigned i, uint64_t addr, char *buf, size_t size),
			 void *ctx);

/* A $ustack value's frames in turn: the text of the next one (its name, a line of str,
   or its address in hex while it has no names) and its length; NULL past the last.
   it starts zeroed. */
struct up_fetch_frames {
	size_t at;
	unsigned i;
	char hex[24];
};
const char *up_fetch_next_frame(const struct up_fetch_value *v, struct up_fetch_frames *it,
				size_t *len);

/* The value as the kernel's trace file shows it (a $ustack: its frames in hex, or its
   names, joined by ' ').  snprintf semantics. */
int up_fetch_format(const struct up_fetch_value *v, char *buf, size_t size);

#endif /* UPROBE_TRACE_FETCH_H */
