// SPDX-License-Identifier: MIT
/*
 * Probe spec parser: turns "up PID ADDR D|S|A ..." and "p|r[:[GRP/]EVENT] TARGET ARGS"
 * into a struct up_spec.  It follows the kernel's trace_probe.c/trace_uprobe.c rules
 * and error texts so that a spec that works with uprobe_events works here and a wrong
 * one is refused for the same reason, at the same place.  It never touches a process,
 * never prints, never exits: errors come back as an up_spec_err (position + message).
 */
#include "trace/spec.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>

#define MAX_TOKENS (2 + UP_SPEC_MAX_ARGS + 1)
#define ARG_NUM_MAX 2048 /* PARAM_MAX_STACK on x86-64 (THREAD_SIZE / sizeof(long)) */

/* ---- text buffer ------------------------------------------------------------------- */

void up_spec_buf_put(struct up_spec_buf *b, const char *s, size_t n)
{
	if (b->len + 1 < b->size) {
		size_t room = b->size - 1 - b->len;

		memcpy(b->buf + b->len, s, n < room ? n : room);
		b->buf[b->len + (n < room ? n : room)] = '\0';
	}
	b->len += n;
}

void up_spec_buf_putc(struct up_spec_buf *b, char c)
{
	up_spec_buf_put(b, &c, 1);
}

void up_spec_buf_printf(struct up_spec_buf *b, const char *fmt, ...)
{
	char *dst = NULL;
	size_t room = 0;
	va_list ap;
	int n;

	if (b->len < b->size) {
		dst = b->buf + b->len;
		room = b->size - b->len;
	}
	va_start(ap, fmt);
	n = vsnprintf(dst, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->len += (size_t)n;
}

int up_spec_buf_result(const struct up_spec_buf *b)
{
	return b->len > INT32_MAX ? -EOVERFLOW : (int)b->len;
}

/* ---- parser state ------------------------------------------------------------------ */

struct tok {
	int pos;
	int len;
};

struct parser {
	const char *text;
	struct up_spec_err *err;
	struct up_spec *spec;
};

int up_spec_fail(struct up_spec_err *err, int pos, int len, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -EINVAL;
	err->pos = pos;
	err->len = len > 0 ? len : 1;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

#define fail(p, pos, len, ...) up_spec_fail((p)->err, pos, len, __VA_ARGS__)

bool up_spec_is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

#define is_blank up_spec_is_blank

/* Split at blanks, up to a '#' (the kernel strips comments the same way). */
static int tokenize(struct parser *p, struct tok *toks, int *ntoks)
{
	const char *t = p->text;
	int i = 0, n = 0;

	for (;;) {
		while (t[i] && t[i] != '#' && is_blank(t[i]))
			i++;
		if (!t[i] || t[i] == '#')
			break;
		if (n == MAX_TOKENS)
			return fail(p, i, 1, "Too many arguments (at most %d)", UP_SPEC_MAX_ARGS);
		toks[n].pos = i;
		while (t[i] && t[i] != '#' && !is_blank(t[i]))
			i++;
		toks[n].len = i - toks[n].pos;
		n++;
	}
	*ntoks = n;
	return 0;
}

static int text_end(const struct parser *p)
{
	int i = (int)strlen(p->text);

	while (i > 0 && is_blank(p->text[i - 1]))
		i--;
	return i;
}

/*
 * Strict unsigned number over s[0..n): base 0 is the kernel's kstrtoul (0x hex, 0
 * octal, else decimal); base 16 takes an optional 0x.  No sign, no blanks, no rest.
 */
static bool parse_u64(const char *s, size_t n, int base, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (n && s[0] == '+') {
		i++;
	}
	if (base == 0) {
		if (n - i > 1 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
			base = 16;
			i += 2;
		} else if (n - i > 1 && s[i] == '0') {
			base = 8;
			i++;
		} else {
			base = 10;
		}
	} else if (base == 16 && n - i > 1 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
		i += 2;
	}
	if (i >= n)
		return false;
	for (; i < n; i++) {
		int d;

		if (isdigit((unsigned char)s[i]))
			d = s[i] - '0';
		else if (isxdigit((unsigned char)s[i]))
			d = tolower((unsigned char)s[i]) - 'a' + 10;
		else
			return false;
		if (d >= base)
			return false;
		if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return false;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*out = v;
	return true;
}

/* kstrtol(base 0): an optional sign, then parse_u64. */
static bool parse_s64(const char *s, size_t n, int64_t *out)
{
	uint64_t v;
	bool neg = false;

	if (n && (s[0] == '-' || s[0] == '+')) {
		neg = s[0] == '-';
		s++;
		n--;
	}
	if (!n || s[0] == '+' || !parse_u64(s, n, 0, &v))
		return false;
	if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return true;
}

static bool is_good_name(const char *s, size_t n)
{
	if (!n || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return false;
	return true;
}

static bool tok_is(const struct parser *p, const struct tok *t, const char *s)
{
	return (size_t)t->len == strlen(s) && !memcmp(p->text + t->pos, s, (size_t)t->len);
}

/* ---- the seed form ----------------------------------------------------------------- */

static const char seed_usage[] = "up PID ADDR D DADDR SIZE | up PID ADDR S SIZE | up PID ADDR A NARGS";

static int parse_seed(struct parser *p, const struct tok *toks, int n)
{
	const char *t = p->text;
	struct up_spec *s = p->spec;
	int end = text_end(p);
	uint64_t v;
	int want;
	char c;

	s->kind = UP_SPEC_SEED;
	if (n < 2)
		return fail(p, end, 1, "Expected PID (decimal; 0 for the launched process): %s",
			    seed_usage);
	if (!parse_u64(t + toks[1].pos, (size_t)toks[1].len, 10, &v) || v > INT32_MAX)
		return fail(p, toks[1].pos, toks[1].len,
			    "Invalid PID: expected a decimal process id (0 for the launched process)");
	s->pid = (pid_t)v;
	if (n < 3)
		return fail(p, end, 1, "Expected ADDR, the address to probe (hex)");
	if (!parse_u64(t + toks[2].pos, (size_t)toks[2].len, 16, &s->addr))
		return fail(p, toks[2].pos, toks[2].len,
			    "Invalid probe address: expected a hex address, with or without 0x");
	if (n < 4)
		return fail(p, end, 1, "Expected the dump type: D (data), S (stack) or A (arguments)");
	c = (char)toupper((unsigned char)t[toks[3].pos]);
	if (toks[3].len != 1 || (c != 'D' && c != 'S' && c != 'A'))
		return fail(p, toks[3].pos, toks[3].len,
			    "Invalid dump type: expected D (data), S (stack) or A (arguments)");
	s->seed_type = (enum up_spec_seed_type)c;
	want = c == 'D' ? 6 : 5;
	if (c == 'D') {
		if (n < 5)
			return fail(p, end, 1, "Expected DADDR, the data address to dump (hex)");
		if (!parse_u64(t + toks[4].pos, (size_t)toks[4].len, 16, &s->daddr))
			return fail(p, toks[4].pos, toks[4].len,
				    "Invalid data address: expected a hex address, with or without 0x");
	}
	if (n < want)
		return fail(p, end, 1,
			    c == 'A' ? "Expected NARGS, the number of arguments to dump (1..%d)"
				     : "Expected SIZE, the number of bytes to dump (1..%d)",
			    c == 'A' ? UP_SPEC_SEED_NARGS_MAX : UP_SPEC_SEED_SIZE_MAX);
	{
		const struct tok *st = &toks[want - 1];
		uint64_t max = c == 'A' ? UP_SPEC_SEED_NARGS_MAX : UP_SPEC_SEED_SIZE_MAX;

		if (!parse_u64(t + st->pos, (size_t)st->len, 10, &s->size) || !s->size ||
		    s->size > max)
			return fail(p, st->pos, st->len,
				    c == 'A' ? "Invalid NARGS: expected a decimal number from 1 to %" PRIu64
					     : "Invalid SIZE: expected a decimal number of bytes from 1 to %" PRIu64,
				    max);
	}
	if (n > want)
		return fail(p, toks[want].pos, toks[want].len,
			    "Unexpected argument: 'up PID ADDR %c %s' takes nothing more", c,
			    c == 'D' ? "DADDR SIZE" : c == 'S' ? "SIZE" : "NARGS");
	return 0;
}

/* ---- registers --------------------------------------------------------------------- */

#define R(field) offsetof(struct user_regs_struct, field)

static const struct reg_name {
	const char *name;
	uint16_t offset;
	uint8_t size, shift;
	bool only64, whole;
} reg_names[] = {
	/* the kernel's names (regoffset_table): the whole register */
	{ "ax", R(rax), 8, 0, false, true },	  { "bx", R(rbx), 8, 0, false, true },
	{ "cx", R(rcx), 8, 0, false, true },	  { "dx", R(rdx), 8, 0, false, true },
	{ "si", R(rsi), 8, 0, false, true },	  { "di", R(rdi), 8, 0, false, true },
	{ "bp", R(rbp), 8, 0, false, true },	  { "sp", R(rsp), 8, 0, false, true },
	{ "ip", R(rip), 8, 0, false, true },	  { "flags", R(eflags), 8, 0, false, true },
	{ "orig_ax", R(orig_rax), 8, 0, false, true },
	{ "cs", R(cs), 8, 0, false, true },	  { "ss", R(ss), 8, 0, false, true },
	{ "ds", R(ds), 8, 0, false, true },	  { "es", R(es), 8, 0, false, true },
	{ "fs", R(fs), 8, 0, false, true },	  { "gs", R(gs), 8, 0, false, true },
	{ "r8", R(r8), 8, 0, true, true },	  { "r9", R(r9), 8, 0, true, true },
	{ "r10", R(r10), 8, 0, true, true },	  { "r11", R(r11), 8, 0, true, true },
	{ "r12", R(r12), 8, 0, true, true },	  { "r13", R(r13), 8, 0, true, true },
	{ "r14", R(r14), 8, 0, true, true },	  { "r15", R(r15), 8, 0, true, true },
	/* 64-bit names */
	{ "rax", R(rax), 8, 0, true, false },	  { "rbx", R(rbx), 8, 0, true, false },
	{ "rcx", R(rcx), 8, 0, true, false },	  { "rdx", R(rdx), 8, 0, true, false },
	{ "rsi", R(rsi), 8, 0, true, false },	  { "rdi", R(rdi), 8, 0, true, false },
	{ "rbp", R(rbp), 8, 0, true, false },	  { "rsp", R(rsp), 8, 0, true, false },
	{ "rip", R(rip), 8, 0, true, false },	  { "rflags", R(eflags), 8, 0, true, false },
	/* 32-bit names */
	{ "eax", R(rax), 4, 0, false, false },	  { "ebx", R(rbx), 4, 0, false, false },
	{ "ecx", R(rcx), 4, 0, false, false },	  { "edx", R(rdx), 4, 0, false, false },
	{ "esi", R(rsi), 4, 0, false, false },	  { "edi", R(rdi), 4, 0, false, false },
	{ "ebp", R(rbp), 4, 0, false, false },	  { "esp", R(rsp), 4, 0, false, false },
	{ "eip", R(rip), 4, 0, false, false },	  { "eflags", R(eflags), 4, 0, false, false },
	{ "r8d", R(r8), 4, 0, true, false },	  { "r9d", R(r9), 4, 0, true, false },
	{ "r10d", R(r10), 4, 0, true, false },	  { "r11d", R(r11), 4, 0, true, false },
	{ "r12d", R(r12), 4, 0, true, false },	  { "r13d", R(r13), 4, 0, true, false },
	{ "r14d", R(r14), 4, 0, true, false },	  { "r15d", R(r15), 4, 0, true, false },
	/* 16-bit names that do not clash with the kernel's */
	{ "r8w", R(r8), 2, 0, true, false },	  { "r9w", R(r9), 2, 0, true, false },
	{ "r10w", R(r10), 2, 0, true, false },	  { "r11w", R(r11), 2, 0, true, false },
	{ "r12w", R(r12), 2, 0, true, false },	  { "r13w", R(r13), 2, 0, true, false },
	{ "r14w", R(r14), 2, 0, true, false },	  { "r15w", R(r15), 2, 0, true, false },
	/* 8-bit names */
	{ "al", R(rax), 1, 0, false, false },	  { "bl", R(rbx), 1, 0, false, false },
	{ "cl", R(rcx), 1, 0, false, false },	  { "dl", R(rdx), 1, 0, false, false },
	{ "ah", R(rax), 1, 8, false, false },	  { "bh", R(rbx), 1, 8, false, false },
	{ "ch", R(rcx), 1, 8, false, false },	  { "dh", R(rdx), 1, 8, false, false },
	{ "sil", R(rsi), 1, 0, true, false },	  { "dil", R(rdi), 1, 0, true, false },
	{ "bpl", R(rbp), 1, 0, true, false },	  { "spl", R(rsp), 1, 0, true, false },
	{ "r8b", R(r8), 1, 0, true, false },	  { "r9b", R(r9), 1, 0, true, false },
	{ "r10b", R(r10), 1, 0, true, false },	  { "r11b", R(r11), 1, 0, true, false },
	{ "r12b", R(r12), 1, 0, true, false },	  { "r13b", R(r13), 1, 0, true, false },
	{ "r14b", R(r14), 1, 0, true, false },	  { "r15b", R(r15), 1, 0, true, false },
};

static bool lookup_reg(const char *s, size_t n, struct up_reg *out)
{
	for (size_t i = 0; i < sizeof(reg_names) / sizeof(reg_names[0]); i++) {
		const struct reg_name *r = &reg_names[i];

		if (strlen(r->name) == n && !strncasecmp(r->name, s, n)) {
			out->offset = r->offset;
			out->size = r->size;
			out->shift = r->shift;
			out->only64 = r->only64;
			out->whole = r->whole;
			return true;
		}
	}
	return false;
}

/* ---- fetch arguments --------------------------------------------------------------- */

static int push_op(struct parser *p, struct up_fetch_arg *a, int pos, int len,
		   const struct up_fetch_insn *insn)
{
	if (a->nops == UP_SPEC_FETCH_OPS_MAX)
		return fail(p, pos, len, "Dereference is too much nested");
	a->ops[a->nops++] = *insn;
	return 0;
}

/* FETCH over text[s, e): appends ops to a. */
static int parse_fetch(struct parser *p, struct up_fetch_arg *a, int s, int e)
{
	const char *t = p->text;
	struct up_fetch_insn insn = { 0 };
	int n = e - s;
	int ret;

	if (n <= 0)
		return fail(p, s, 1, "Invalid fetch argument: expected %%REG, @ADDR, @+OFFSET, "
				     "$stackN, $stack, $retval, $comm, $argN, \\IMM or +|-OFFS(FETCH)");
	switch (t[s]) {
	case '$': {
		const char *v = t + s + 1;
		size_t vn = (size_t)n - 1;
		uint64_t num;

		if (vn == 6 && !memcmp(v, "retval", 6)) {
			if (!p->spec->is_return)
				return fail(p, s, n, "$retval is not available on probe "
						     "(only on return probes, 'r:')");
			insn.op = UP_FOP_RETVAL;
		} else if (vn == 5 && !memcmp(v, "stack", 5)) {
			insn.op = UP_FOP_STACKP;
		} else if (vn == 6 && !memcmp(v, "ustack", 6)) {
			insn.op = UP_FOP_USTACK;
			insn.param = UP_SPEC_USTACK_MAX;
		} else if (vn > 5 && !memcmp(v, "stack", 5) && isdigit((unsigned char)v[5])) {
			if (!parse_u64(v + 5, vn - 5, 10, &num) || num > UINT32_MAX)
				return fail(p, s, n, "Invalid $-variable specified: expected "
						     "$stackN with N a decimal number");
			insn.op = UP_FOP_STACK;
			insn.param = (uint32_t)num;
		} else if (vn == 4 && (!memcmp(v, "comm", 4) || !memcmp(v, "COMM", 4))) {
			insn.op = UP_FOP_COMM;
		} else if (vn > 3 && !memcmp(v, "arg", 3) && isdigit((unsigned char)v[3])) {
			if (!parse_u64(v + 3, vn - 3, 10, &num) || num == 0 || num > ARG_NUM_MAX)
				return fail(p, s, n, "Invalid argument number: expected $argN with "
						     "N from 1 to %d", ARG_NUM_MAX);
			if (p->spec->is_return && num > 6)
				return fail(p, s, n, "At a return, $argN is the argument the entry "
						     "had: $arg1 to $arg6 (the registers)");
			insn.op = UP_FOP_ARG;
			insn.param = (uint32_t)num;
		} else {
			return fail(p, s, n, "Invalid $-variable specified: expected $stackN, "
					     "$stack, $retval, $comm, $argN or $ustack");
		}
		return push_op(p, a, s, n, &insn);
	}
	case '%':
		if (!lookup_reg(t + s + 1, (size_t)n - 1, &insn.reg))
			return fail(p, s, n, "Invalid register name: expected e.g. %%di, %%rax, "
					     "%%eax, %%al, %%r8, %%ip, %%sp, %%flags");
		insn.op = UP_FOP_REG;
		return push_op(p, a, s, n, &insn);
	case '@':
		if (n > 1 && isdigit((unsigned char)t[s + 1])) {
			if (!parse_u64(t + s + 1, (size_t)n - 1, 0, &insn.imm))
				return fail(p, s, n, "Invalid memory address: expected @ADDR "
						     "(e.g. @0x601040)");
			insn.op = UP_FOP_IMM;
		} else if (n > 1 && t[s + 1] == '+') {
			int64_t off;

			if (!parse_s64(t + s + 2, (size_t)n - 2, &off))
				return fail(p, s, n, "Invalid file offset value: expected @+OFFSET "
						     "(e.g. @+0x1040)");
			insn.op = UP_FOP_FOFFS;
			insn.imm = (uint64_t)off;
		} else {
			return fail(p, s, n, "Symbol is not available with uprobe: expected @ADDR "
					     "or @+OFFSET");
		}
		ret = push_op(p, a, s, n, &insn);
		if (ret)
			return ret;
		insn = (struct up_fetch_insn){ .op = UP_FOP_DEREF };
		return push_op(p, a, s, n, &insn);
	case '+':
	case '-': {
		int i = s, open, close;
		int64_t off;

		if (n > 1 && t[s + 1] == 'u') /* user dereference: all of ours are */
			i++;
		for (open = i + 1; open < e && t[open] != '('; open++)
			;
		if (open == e)
			return fail(p, s, n, "Dereference needs a brace: expected +|-OFFS(FETCH)");
		/* the sign is part of the offset; skip the 'u' */
		{
			char num[32];
			int nl = open - i;

			if (nl <= 1 || nl >= (int)sizeof(num))
				return fail(p, s, open - s, "Invalid dereference offset: expected "
							    "+|-OFFS( with OFFS a number");
			num[0] = t[s];
			memcpy(num + 1, t + i + 1, (size_t)nl - 1);
			if (!parse_s64(num, (size_t)nl, &off))
				return fail(p, s, open - s, "Invalid dereference offset: expected "
							    "+|-OFFS( with OFFS a number");
		}
		for (close = e - 1; close > open && t[close] != ')'; close--)
			;
		if (close == open)
			return fail(p, e, 1, "Dereference brace is not closed: expected ')'");
		if (close != e - 1)
			return fail(p, close + 1, e - close - 1,
				    "Unexpected text after the dereference's ')'");
		ret = parse_fetch(p, a, open + 1, close);
		if (ret)
			return ret;
		if (a->ops[a->nops - 1].op == UP_FOP_COMM || a->ops[a->nops - 1].op == UP_FOP_DATA)
			return fail(p, open + 1, close - open - 1, "$comm can not be dereferenced");
		if (a->ops[a->nops - 1].op == UP_FOP_USTACK)
			return fail(p, open + 1, close - open - 1, "$ustack can not be dereferenced "
								   "(it is a list of return addresses)");
		insn.op = UP_FOP_DEREF;
		insn.offset = off;
		return push_op(p, a, s, n, &insn);
	}
	case '\\':
		if (n > 1 && t[s + 1] == '"') {
			if (n < 3 || t[e - 1] != '"')
				return fail(p, e, 1, "String is not closed with '\"'");
			insn.op = UP_FOP_DATA;
			return push_op(p, a, s, n, &insn);
		} else {
			int64_t sv;
			const char *v = t + s + 1;
			size_t vn = (size_t)n - 1;
			bool ok;

			if (vn && isdigit((unsigned char)v[0]))
				ok = parse_u64(v, vn, 0, &insn.imm);
			else if (vn && (v[0] == '-' || v[0] == '+'))
				ok = parse_s64(v, vn, &sv), insn.imm = ok ? (uint64_t)sv : 0;
			else
				ok = false;
			if (!ok)
				return fail(p, s + 1, n - 1, "Invalid immediate value: expected \\IMM "
							     "(a number) or \\\"STRING\"");
			insn.op = UP_FOP_IMM;
			return push_op(p, a, s, n, &insn);
		}
	default:
		return fail(p, s, n, "Invalid fetch argument: expected %%REG, @ADDR, @+OFFSET, "
				     "$stackN, $stack, $retval, $comm, $argN, \\IMM or +|-OFFS(FETCH)");
	}
}

static const struct {
	const char *name;
	enum up_type_kind kind;
	uint8_t size;
} type_names[] = {
	{ "u8", UP_TYPE_U, 1 },	 { "u16", UP_TYPE_U, 2 }, { "u32", UP_TYPE_U, 4 },
	{ "u64", UP_TYPE_U, 8 }, { "s8", UP_TYPE_S, 1 },  { "s16", UP_TYPE_S, 2 },
	{ "s32", UP_TYPE_S, 4 }, { "s64", UP_TYPE_S, 8 }, { "x8", UP_TYPE_X, 1 },
	{ "x16", UP_TYPE_X, 2 }, { "x32", UP_TYPE_X, 4 }, { "x64", UP_TYPE_X, 8 },
	{ "string", UP_TYPE_STRING, 0 }, { "ustring", UP_TYPE_STRING, 0 },
};

static const char type_usage[] = "expected u8/u16/u32/u64, s8..s64, x8..x64, string, "
				 "ustring or b<width>@<offset>/<8|16|32|64>";

/* TYPE over text[s, e). */
static int parse_type(struct parser *p, struct up_type *ty, int s, int e)
{
	const char *t = p->text;
	size_t n = (size_t)(e - s);

	memset(ty, 0, sizeof(*ty));
	for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++) {
		if (strlen(type_names[i].name) == n && !memcmp(type_names[i].name, t + s, n)) {
			ty->kind = type_names[i].kind;
			ty->size = type_names[i].size;
			ty->is_ustring = n == 7;
			return 0;
		}
	}
	if (memchr(t + s, '[', n))
		return fail(p, s, (int)n, "Array types (TYPE[N]) are not supported");
	if (n == 6 && !memcmp(t + s, "symbol", 6))
		return fail(p, s, (int)n, "The symbol type is not supported for user-space probes");
	if (n && t[s] == 'b') {
		const char *at = memchr(t + s, '@', n), *slash = memchr(t + s, '/', n);
		uint64_t bw, bo, bs;

		/* find_fetch_type: the container size decides the type, else "unknown" */
		if (!slash || !parse_u64(slash + 1, (size_t)(t + e - slash - 1), 0, &bs) ||
		    (bs != 8 && bs != 16 && bs != 32 && bs != 64))
			return fail(p, s, (int)n, "Unknown type is specified: %s", type_usage);
		if (!at || at > slash || !parse_u64(t + s + 1, (size_t)(at - t - s - 1), 0, &bw) ||
		    !bw || !parse_u64(at + 1, (size_t)(slash - at - 1), 0, &bo) || bw + bo > bs)
			return fail(p, s, (int)n, "Invalid bitfield: expected b<width>@<offset>/%" PRIu64
						  " with width >= 1 and width + offset <= %" PRIu64,
				    bs, bs);
		ty->kind = UP_TYPE_U;
		ty->size = (uint8_t)(bs / 8);
		ty->is_bitfield = true;
		ty->bf_width = (uint8_t)bw;
		ty->bf_offset = (uint8_t)bo;
		return 0;
	}
	return fail(p, s, (int)n, "Unknown type is specified: %s", type_usage);
}

static const char *const reserved_names[] = {
	"common_type", "common_flags", "common_preempt_count", "common_pid", "common_tgid",
	"__probe_ip", "__probe_ret_ip", "__probe_func",
};

static int parse_arg(struct parser *p, int idx, const struct tok *tk)
{
	const char *t = p->text;
	struct up_fetch_arg *a = &p->spec->args[idx];
	int s = tk->pos, e = tk->pos + tk->len, body = s, colon, ret;
	const char *eq = memchr(t + s, '=', (size_t)tk->len);

	memset(a, 0, sizeof(*a));
	if (eq) {
		int nl = (int)(eq - t) - s;

		if (nl > UP_SPEC_ARG_NAME_MAX)
			return fail(p, s, nl, "Argument name is too long (at most %d characters)",
				    UP_SPEC_ARG_NAME_MAX);
		if (nl == 0)
			return fail(p, s, 1, "Argument name is not specified: expected NAME=FETCH");
		if (!is_good_name(t + s, (size_t)nl))
			return fail(p, s, nl, "Argument name must follow the same rules as C "
					      "identifiers");
		memcpy(a->name, t + s, (size_t)nl);
		body = s + nl + 1;
	} else {
		snprintf(a->name, sizeof(a->name), "arg%d", idx + 1);
	}
	for (size_t i = 0; i < sizeof(reserved_names) / sizeof(reserved_names[0]); i++)
		if (!strcmp(a->name, reserved_names[i]))
			return fail(p, s, eq ? (int)strlen(a->name) : tk->len,
				    "This argument name is already used (reserved: %s)", a->name);
	for (int i = 0; i < idx; i++)
		if (!strcmp(a->name, p->spec->args[i].name))
			return fail(p, s, eq ? (int)strlen(a->name) : tk->len,
				    "This argument name is already used: %s", a->name);
	if (body == e)
		return fail(p, body, 1, "No argument expression: expected NAME=FETCH[:TYPE]");
	if (e - body > UP_SPEC_ARG_TEXT_MAX)
		return fail(p, body, e - body, "Argument expression is too long (at most %d "
					       "characters)", UP_SPEC_ARG_TEXT_MAX);
	memcpy(a->comm, t + body, (size_t)(e - body));

	for (colon = body; colon < e && t[colon] != ':'; colon++)
		;
	/* $comm and an immediate string are strings, and only strings */
	if ((colon - body == 5 && !memcmp(t + body, "$comm", 5)) ||
	    (colon - body >= 2 && !memcmp(t + body, "\\\"", 2))) {
		if (colon < e && !(e - colon - 1 == 6 && !memcmp(t + colon + 1, "string", 6)))
			return fail(p, colon + 1, e - colon - 1,
				    "%s accepts only the string type",
				    t[body] == '$' ? "$comm" : "An immediate string");
		a->type = (struct up_type){ .kind = UP_TYPE_STRING };
	} else if (colon - body == 7 && !memcmp(t + body, "$ustack", 7)) {
		if (colon < e)
			return fail(p, colon + 1, e - colon - 1,
				    "$ustack takes no type: it prints as named frames");
		a->type = (struct up_type){ .kind = UP_TYPE_STACK };
	} else if (colon < e) {
		ret = parse_type(p, &a->type, colon + 1, e);
		if (ret)
			return ret;
	} else {
		a->type = (struct up_type){ .kind = UP_TYPE_X, .size = 8, .is_default = true };
	}

	ret = parse_fetch(p, a, body, colon);
	if (ret)
		return ret;
	if (a->ops[0].op == UP_FOP_DATA) {
		a->data_pos = 2;
		a->data_len = (uint16_t)(colon - body - 3);
	}

	{
		enum up_fetch_op last = a->ops[a->nops - 1].op;

		if (a->type.kind == UP_TYPE_STRING) {
			if (last != UP_FOP_DEREF && last != UP_FOP_IMM && last != UP_FOP_COMM &&
			    last != UP_FOP_DATA)
				return fail(p, colon < e ? colon + 1 : body,
					    colon < e ? e - colon - 1 : colon - body,
					    "String accepts only memory argument: expected "
					    "+0(FETCH):string, @ADDR:string or $comm");
		} else if (a->type.is_default && a->nops == 1 && last == UP_FOP_REG &&
			   !a->ops[0].reg.whole) {
			/* a sized register name implies its width */
			a->type.size = a->ops[0].reg.size;
		}
	}
	return 0;
}

/* ---- the event form ---------------------------------------------------------------- */

static int parse_event_name(struct parser *p, const struct tok *tk)
{
	const char *t = p->text;
	struct up_spec *s = p->spec;
	int i = tk->pos + 2, e = tk->pos + tk->len, slash;

	for (slash = i; slash < e && t[slash] != '/'; slash++)
		;
	if (slash == e)
		for (slash = i; slash < e && t[slash] != '.'; slash++)
			;
	if (slash < e) {
		int gl = slash - i;

		if (gl == 0)
			return fail(p, i, 1, "Group name is not specified: expected p:GRP/EVENT");
		if (gl + 1 > UP_SPEC_NAME_MAX)
			return fail(p, i, gl, "Group name is too long (at most %d characters)",
				    UP_SPEC_NAME_MAX - 1);
		if (!is_good_name(t + i, (size_t)gl))
			return fail(p, i, gl, "Group name must follow the same rules as C identifiers");
		memcpy(s->group, t + i, (size_t)gl);
		s->group[gl] = '\0';
		i = slash + 1;
	}
	if (i == e)
		return fail(p, i, 1, "Event name is not specified: expected p:[GRP/]EVENT");
	if (e - i > UP_SPEC_NAME_MAX)
		return fail(p, i, e - i, "Event name is too long (at most %d characters)",
			    UP_SPEC_NAME_MAX);
	if (!is_good_name(t + i, (size_t)(e - i)))
		return fail(p, i, e - i, "Event name must follow the same rules as C identifiers");
	memcpy(s->event, t + i, (size_t)(e - i));
	s->event[e - i] = '\0';
	return 0;
}

static void sanitize_name(char *s)
{
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			*s = '_';
}

/* trace_uprobe.c: "%c_%s_0x%lx", 'p' even for return probes, basename cut at .-_ */
static void default_event_name(struct up_spec *s)
{
	char tail[UP_SPEC_NAME_MAX + 1] = "";

	if (s->path) {
		const char *base = strrchr(s->path, '/');

		base = base ? base + 1 : s->path;
		snprintf(tail, sizeof(tail), "%.*s", (int)strcspn(base, ".-_"), base);
	}
	/* MAX_EVENT_NAME_LEN with the NUL, as the kernel's snprintf cuts it */
	struct up_spec_buf b = { s->event, UP_SPEC_NAME_MAX, 0 };

	switch (s->target) {
	case UP_TARGET_OFFSET:
		up_spec_buf_printf(&b, "p_%s_0x%" PRIx64, tail, s->offset);
		break;
	case UP_TARGET_SYMBOL:
		up_spec_buf_printf(&b, "p_%s_%s", tail, s->symbol);
		if (s->offset)
			up_spec_buf_printf(&b, "_0x%" PRIx64, s->offset);
		break;
	case UP_TARGET_VADDR:
		up_spec_buf_printf(&b, "p_0x%" PRIx64, s->vaddr);
		break;
	}
	sanitize_name(s->event);
}

static const char target_usage[] = "expected PATH:0xOFFSET, PATH:SYMBOL[+OFFSET] or 0xVADDR";

static int parse_target(struct parser *p, const struct tok *tk)
{
	const char *t = p->text;
	struct up_spec *s = p->spec;
	int b = tk->pos, e = tk->pos + tk->len, colon, i;

	for (colon = e - 1; colon >= b && t[colon] != ':'; colon--)
		;
	if (colon < b) {
		if (!isdigit((unsigned char)t[b]))
			return fail(p, b, tk->len, "Invalid probe target: %s", target_usage);
		s->target = UP_TARGET_VADDR;
		i = b;
	} else {
		if (colon == b)
			return fail(p, b, 1, "The file path is missing: %s", target_usage);
		if (colon + 1 == e)
			return fail(p, e, 1, "Expected the offset or the symbol after ':': %s",
				    target_usage);
		s->path = strndup(t + b, (size_t)(colon - b));
		if (!s->path)
			return -ENOMEM;
		i = colon + 1;
		s->target = isdigit((unsigned char)t[i]) ? UP_TARGET_OFFSET : UP_TARGET_SYMBOL;
	}

	/* (REF_CTR_OFFSET) */
	{
		const char *rc = memchr(t + i, '(', (size_t)(e - i));

		if (rc) {
			int ro = (int)(rc - t), rclose;

			for (rclose = ro; rclose < e && t[rclose] != ')'; rclose++)
				;
			if (rclose == e)
				return fail(p, e, 1, "Reference counter brace is not closed: "
						     "expected ')'");
			if (rclose != e - 1)
				return fail(p, rclose + 1, e - rclose - 1,
					    "Reference counter has wrong suffix");
			if (!parse_u64(t + ro + 1, (size_t)(rclose - ro - 1), 0, &s->ref_ctr_offset))
				return fail(p, ro + 1, rclose - ro - 1 > 0 ? rclose - ro - 1 : 1,
					    "Invalid reference counter offset: expected (0xOFFSET)");
			e = ro;
		}
	}
	/* %return */
	{
		const char *pc = memchr(t + i, '%', (size_t)(e - i));

		if (pc) {
			int po = (int)(pc - t);

			if (e - po != 7 || memcmp(pc, "%return", 7))
				return fail(p, po, e - po, "Invalid probed address suffix: expected "
							   "%%return");
			s->is_return = true;
			e = po;
		}
	}

	switch (s->target) {
	case UP_TARGET_VADDR:
		if (!parse_u64(t + i, (size_t)(e - i), 0, &s->vaddr))
			return fail(p, i, e - i, "Invalid probe address: %s", target_usage);
		break;
	case UP_TARGET_OFFSET:
		if (!parse_u64(t + i, (size_t)(e - i), 0, &s->offset))
			return fail(p, i, e - i, "Invalid uprobe offset: %s", target_usage);
		break;
	case UP_TARGET_SYMBOL: {
		const char *plus = memchr(t + i, '+', (size_t)(e - i));
		int se = plus ? (int)(plus - t) : e;

		if (se == i)
			return fail(p, i, 1, "The symbol name is missing: %s", target_usage);
		if (plus && !parse_u64(plus + 1, (size_t)(e - se - 1), 0, &s->offset))
			return fail(p, se, e - se, "Invalid offset after the symbol: expected "
						   "SYMBOL+OFFSET (e.g. main+0x10)");
		s->symbol = strndup(t + i, (size_t)(se - i));
		if (!s->symbol)
			return -ENOMEM;
		break;
	}
	}
	return 0;
}

static int parse_event(struct parser *p, const struct tok *toks, int n)
{
	const char *t = p->text;
	struct up_spec *s = p->spec;
	int ret;

	s->kind = UP_SPEC_EVENT;
	s->is_return = t[toks[0].pos] == 'r';
	snprintf(s->group, sizeof(s->group), "%s", UP_SPEC_DEFAULT_GROUP);
	if (toks[0].len > 1) {
		if (t[toks[0].pos + 1] != ':')
			return fail(p, toks[0].pos, toks[0].len,
				    "Unknown probe command: expected 'up', 'p', 'r', "
				    "'p:[GRP/]EVENT' or 'r:[GRP/]EVENT'");
		ret = parse_event_name(p, &toks[0]);
		if (ret)
			return ret;
	}
	if (n < 2)
		return fail(p, text_end(p), 1, "Expected the probe target: %s", target_usage);
	ret = parse_target(p, &toks[1]);
	if (ret)
		return ret;
	if (!s->event[0])
		default_event_name(s);
	if (n - 2 > UP_SPEC_MAX_ARGS)
		return fail(p, toks[2 + UP_SPEC_MAX_ARGS].pos, toks[2 + UP_SPEC_MAX_ARGS].len,
			    "Too many arguments (at most %d)", UP_SPEC_MAX_ARGS);
	if (n > 2) {
		s->args = calloc((size_t)(n - 2), sizeof(*s->args));
		if (!s->args)
			return -ENOMEM;
	}
	for (int i = 2; i < n; i++) {
		ret = parse_arg(p, i - 2, &toks[i]);
		if (ret)
			return ret;
		s->nargs++;
	}
	return 0;
}

int up_spec_parse(const char *text, struct up_spec *out, struct up_spec_err *err)
{
	struct tok toks[MAX_TOKENS];
	struct parser p = { .text = text, .err = err, .spec = out };
	int n = 0, ret;

	if (!text || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (err)
		memset(err, 0, sizeof(*err));
	ret = tokenize(&p, toks, &n);
	if (ret)
		return ret;
	if (n == 0) {
		ret = fail(&p, -1, 1, "Empty probe spec: expected 'up PID ADDR D|S|A ...' or "
				      "'p|r[:[GRP/]EVENT] TARGET [FETCHARGS]'");
		goto out;
	}
	if (tok_is(&p, &toks[0], "up"))
		ret = parse_seed(&p, toks, n);
	else if (text[toks[0].pos] == 'p' || text[toks[0].pos] == 'r')
		ret = parse_event(&p, toks, n);
	else
		ret = fail(&p, toks[0].pos, toks[0].len, "Unknown probe command: expected 'up', "
							 "'p', 'r', 'p:[GRP/]EVENT' or 'r:[GRP/]EVENT'");
out:
	if (ret) {
		if (ret == -ENOMEM && err)
			fail(&p, -1, 1, "Out of memory");
		up_spec_free(out);
		memset(out, 0, sizeof(*out));
	}
	return ret;
}

bool up_spec_at_function_entry(const struct up_spec *spec)
{
	return spec->kind == UP_SPEC_EVENT && !spec->is_return &&
	       spec->target == UP_TARGET_SYMBOL && spec->offset == 0;
}

void up_spec_free(struct up_spec *spec)
{
	if (!spec)
		return;
	free(spec->path);
	free(spec->symbol);
	free(spec->args);
	spec->path = NULL;
	spec->symbol = NULL;
	spec->args = NULL;
	spec->nargs = 0;
}

/* ---- printing ---------------------------------------------------------------------- */

int up_spec_err_format(const char *text, const struct up_spec_err *err, char *buf,
		       size_t size)
{
	struct up_spec_buf b = { buf, size, 0 };
	size_t tl;

	if (size)
		buf[0] = '\0';
	if (!text || !err)
		return -EINVAL;
	tl = strlen(text);
	while (tl && (text[tl - 1] == '\n' || text[tl - 1] == '\r'))
		tl--;
	up_spec_buf_put(&b, text, tl);
	up_spec_buf_putc(&b, '\n');
	if (err->pos >= 0) {
		/* keep tabs so the caret lines up under a tab-indented spec */
		for (int i = 0; i < err->pos; i++)
			up_spec_buf_putc(&b, (size_t)i < tl && text[i] == '\t' ? '\t' : ' ');
		up_spec_buf_putc(&b, '^');
		for (int i = 1; i < err->len; i++)
			up_spec_buf_putc(&b, '~');
		up_spec_buf_putc(&b, '\n');
	}
	up_spec_buf_printf(&b, "%s\n", err->msg);
	return up_spec_buf_result(&b);
}

int up_spec_type_name(const struct up_type *ty, bool is32, char *buf, size_t size)
{
	static const char prefix[] = { [UP_TYPE_U] = 'u', [UP_TYPE_S] = 's', [UP_TYPE_X] = 'x' };

	if (ty->kind == UP_TYPE_STRING)
		return snprintf(buf, size, "%s", ty->is_ustring ? "ustring" : "string");
	if (ty->is_bitfield)
		return snprintf(buf, size, "b%u@%u/%u", ty->bf_width, ty->bf_offset, ty->size * 8u);
	if (ty->is_default && ty->size == 8 && is32)
		return snprintf(buf, size, "x32");
	return snprintf(buf, size, "%c%u", prefix[ty->kind], ty->size * 8u);
}

int up_spec_format(const struct up_spec *s, char *buf, size_t size)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	if (!s)
		return -EINVAL;
	if (s->kind == UP_SPEC_SEED) {
		if (s->seed_type == UP_SEED_DATA)
			up_spec_buf_printf(&b, "%-3s%d 0x%" PRIx64 " D 0x%" PRIx64 " %" PRIu64, "up",
					   (int)s->pid, s->addr, s->daddr, s->size);
		else
			up_spec_buf_printf(&b, "%-3s%d 0x%" PRIx64 " %c %" PRIu64, "up", (int)s->pid,
					   s->addr, (char)s->seed_type, s->size);
		return up_spec_buf_result(&b);
	}
	up_spec_buf_printf(&b, "%c:%s/%s ", s->is_return ? 'r' : 'p', s->group, s->event);
	switch (s->target) {
	case UP_TARGET_OFFSET:
		up_spec_buf_printf(&b, "%s:0x%016" PRIx64, s->path, s->offset);
		break;
	case UP_TARGET_SYMBOL:
		up_spec_buf_printf(&b, "%s:%s", s->path, s->symbol);
		if (s->offset)
			up_spec_buf_printf(&b, "+0x%" PRIx64, s->offset);
		break;
	case UP_TARGET_VADDR:
		up_spec_buf_printf(&b, "0x%" PRIx64, s->vaddr);
		break;
	}
	if (s->ref_ctr_offset)
		up_spec_buf_printf(&b, "(0x%" PRIx64 ")", s->ref_ctr_offset);
	for (int i = 0; i < s->nargs; i++)
		up_spec_buf_printf(&b, " %s=%s", s->args[i].name, s->args[i].comm);
	return up_spec_buf_result(&b);
}
