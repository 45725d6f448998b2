// SPDX-License-Identifier: MIT
/*
 * bpftrace's grammar, the part `uprobe run` takes (bt.h): a recursive-descent parser
 * with C's precedence, and the checks that follow it (maps' kinds and key counts,
 * functions' arguments, types).  Errors are bpftrace's: "stdin:1:28-29: ERROR: ..."
 * then the line and '~' under the place.
 *
 * An attach point is lexed as bpftrace lexes it: raw text up to a blank, ',' or '{'
 * (so "uprobe:/bin/bash:readline" needs no quoting); a predicate is an expression
 * between '/' and '/', where a '/' outside parentheses ends it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bt/bt.h"
#include "bt/tokens.h"


static const char *const tok_text[] = {
	[T_EOF] = "end of file", [T_LP] = "(", [T_RP] = ")", [T_LB] = "{", [T_RB] = "}",
	[T_LBR] = "[", [T_RBR] = "]", [T_COMMA] = ",", [T_SEMI] = ";", [T_COLON] = ":",
	[T_QUEST] = "?", [T_DOT] = ".", [T_PLUS] = "+", [T_MINUS] = "-", [T_STAR] = "*",
	[T_SLASH] = "/", [T_PCT] = "%", [T_AMP] = "&", [T_PIPE] = "|", [T_CARET] = "^",
	[T_SHL] = "<<", [T_SHR] = ">>", [T_EQ] = "==", [T_NE] = "!=", [T_LT] = "<",
	[T_LE] = "<=", [T_GT] = ">", [T_GE] = ">=", [T_LAND] = "&&", [T_LOR] = "||",
	[T_NOT] = "!", [T_TILDE] = "~", [T_ASSIGN] = "=", [T_ADDEQ] = "+=", [T_SUBEQ] = "-=",
	[T_MULEQ] = "*=", [T_DIVEQ] = "/=", [T_MODEQ] = "%=", [T_ANDEQ] = "&=",
	[T_OREQ] = "|=", [T_XOREQ] = "^=", [T_SHLEQ] = "<<=", [T_SHREQ] = ">>=",
	[T_INC] = "++", [T_DEC] = "--", [T_ARROW] = "->",
};

struct parser {
	struct bt_prog *p;
	const char *s;
	size_t pos;
	int line, col; /* of pos */
	/* the current token */
	enum tok t;
	int64_t ival;
	char *text;
	int tline, tcol, tlen;
	int pred_depth; /* in a predicate: parentheses open (-1: not in one) */
	char *err;
	size_t errlen;
	int failed;
};


static const char *const fn_names[F_NFN] = {
	"count", "sum", "avg", "min", "max", "stats", "hist", "lhist", "printf", "print",
	"time", "exit", "delete", "clear", "zero", "str", "usym", "ustack", "strftime", "ntop",
};

static const char *const fn_refused[] = {
	"kstack", "ksym", "kaddr", "uaddr", "join", "signal", "system", "cat",
	"override", "reg", "sizeof", "buf", "strncmp", "cgroupid", "cgroup_path", "macaddr",
	"strerror", "path", "skboutput", "printf_ns", "unwatch", "offsetof",
	"bswap", "pton", "strcontains", "has_key", "len", "percpu_kaddr", "errorf", "debugf",
	"print_mem", "kptr", "uptr", "nsecs_ns", NULL,
};

static const char *const kernel_probes[] = {
	"kprobe", "k", "kretprobe", "kr", "tracepoint", "t", "rawtracepoint", "rt", "kfunc",
	"f", "kretfunc", "fr", "fentry", "fexit", "profile", "p", "software", "s", "hardware",
	"h", "watchpoint", "w", "asyncwatchpoint", "aw", "iter", "it", NULL,
};

int bt_errf(const struct bt_prog *p, int line, int col, int len, char *err, size_t errlen,
	    const char *fmt, ...)
{
	const char *ls = p->src;
	size_t n = 0;
	va_list ap;
	int l;

	if (len < 1)
		len = 1;
	for (l = 1; l < line && *ls; ls++)
		if (*ls == '\n')
			l++;
	n += (size_t)snprintf(err + n, errlen - n, "%s:%d:%d-%d: ERROR: ", p->name, line, col,
			      col + len);
	if (n >= errlen)
		return -EINVAL;
	va_start(ap, fmt);
	n += (size_t)vsnprintf(err + n, errlen - n, fmt, ap);
	va_end(ap);
	if (n >= errlen)
		return -EINVAL;
	n += (size_t)snprintf(err + n, errlen - n, "\n%.*s\n", (int)strcspn(ls, "\n"), ls);
	for (int i = 1; i < col && n + 1 < errlen; i++)
		err[n++] = ' ';
	for (int i = 0; i < len && n + 1 < errlen; i++)
		err[n++] = '~';
	if (n + 1 < errlen)
		err[n++] = '\n';
	err[n < errlen ? n : errlen - 1] = '\0';
	return -EINVAL;
}

static void fail(struct parser *ps, int line, int col, int len, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void fail(struct parser *ps, int line, int col, int len, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (ps->failed)
		return;
	ps->failed = -EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bt_errf(ps->p, line, col, len, ps->err, ps->errlen, "%s", msg);
}

static char peekc(struct parser *ps, size_t ahead)
{
	size_t i;

	for (i = 0; i < ahead && ps->s[ps->pos + i]; i++)
		;
	return ps->s[ps->pos + i];
}

static void adv(struct parser *ps, size_t n)
{
	for (; n && ps->s[ps->pos]; n--, ps->pos++) {
		if (ps->s[ps->pos] == '\n')
			ps->line++, ps->col = 1;
		else
			ps->col++;
	}
}

/* Blanks, comments, and a first line "#!..." */
static void skip_blank(struct parser *ps)
{
	for (;;) {
		char c = peekc(ps, 0);

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
			adv(ps, 1);
		} else if (c == '/' && peekc(ps, 1) == '/') {
			while (peekc(ps, 0) && peekc(ps, 0) != '\n')
				adv(ps, 1);
		} else if (c == '/' && peekc(ps, 1) == '*') {
			adv(ps, 2);
			while (peekc(ps, 0) && !(peekc(ps, 0) == '*' && peekc(ps, 1) == '/'))
				adv(ps, 1);
			adv(ps, 2);
		} else if (c == '#' && ps->pos == 0 && peekc(ps, 1) == '!') {
			while (peekc(ps, 0) && peekc(ps, 0) != '\n')
				adv(ps, 1);
		} else {
			return;
		}
	}
}

static char *dupn(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static void lex_string(struct parser *ps)
{
	char buf[4096];
	size_t n = 0;

	adv(ps, 1);
	for (;;) {
		char c = peekc(ps, 0);

		if (!c || c == '\n') {
			fail(ps, ps->tline, ps->tcol, 1, "unterminated string");
			break;
		}
		adv(ps, 1);
		if (c == '"')
			break;
		if (c == '\\') {
			char e = peekc(ps, 0);

			adv(ps, 1);
			switch (e) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case '\\': c = '\\'; break;
			case '"': c = '"'; break;
			case 'x': {
				int v = 0, k;

				for (k = 0; k < 2 && isxdigit((unsigned char)peekc(ps, 0)); k++) {
					char h = peekc(ps, 0);

					v = v * 16 + (isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
					adv(ps, 1);
				}
				c = (char)v;
				break;
			}
			default:
				if (e >= '0' && e <= '7') {
					int v = e - '0';

					for (int k = 0; k < 2 && peekc(ps, 0) >= '0' && peekc(ps, 0) <= '7'; k++) {
						v = v * 8 + peekc(ps, 0) - '0';
						adv(ps, 1);
					}
					c = (char)v;
				} else {
					fail(ps, ps->line, ps->col - 2, 2, "invalid escape character '\\%c'", e);
				}
			}
		}
		if (n + 1 < sizeof(buf))
			buf[n++] = c;
	}
	ps->text = dupn(buf, n);
	ps->t = T_STR;
}

static void next(struct parser *ps)
{
	static const struct { const char *s; enum tok t; } ops[] = {
		{ "<<=", T_SHLEQ }, { ">>=", T_SHREQ }, { "==", T_EQ }, { "!=", T_NE },
		{ "<=", T_LE }, { ">=", T_GE }, { "&&", T_LAND }, { "||", T_LOR }, { "<<", T_SHL },
		{ ">>", T_SHR }, { "+=", T_ADDEQ }, { "-=", T_SUBEQ }, { "*=", T_MULEQ },
		{ "/=", T_DIVEQ }, { "%=", T_MODEQ }, { "&=", T_ANDEQ }, { "|=", T_OREQ },
		{ "^=", T_XOREQ }, { "++", T_INC }, { "--", T_DEC }, { "->", T_ARROW },
		{ "(", T_LP }, { ")", T_RP }, { "{", T_LB }, { "}", T_RB }, { "[", T_LBR },
		{ "]", T_RBR }, { ",", T_COMMA }, { ";", T_SEMI }, { ":", T_COLON },
		{ "?", T_QUEST }, { ".", T_DOT }, { "+", T_PLUS }, { "-", T_MINUS },
		{ "*", T_STAR }, { "/", T_SLASH }, { "%", T_PCT }, { "&", T_AMP },
		{ "|", T_PIPE }, { "^", T_CARET }, { "<", T_LT }, { ">", T_GT }, { "!", T_NOT },
		{ "~", T_TILDE }, { "=", T_ASSIGN },
	};
	const char *s;
	size_t st;
	char c;

	free(ps->text);
	ps->text = NULL;
	skip_blank(ps);
	ps->tline = ps->line;
	ps->tcol = ps->col;
	st = ps->pos;
	s = ps->s + ps->pos;
	c = *s;
	if (!c) {
		ps->t = T_EOF;
		ps->tlen = 1;
		return;
	}
	if (isdigit((unsigned char)c)) {
		char *end;
		unsigned long long v = strtoull(s, &end, 0);

		/* 1e6, 5_000: bpftrace's integer forms */
		if (*end == 'e' && isdigit((unsigned char)end[1])) {
			unsigned long e = strtoul(end + 1, &end, 10);

			while (e--)
				v *= 10;
		}
		while (*end == '_' && isdigit((unsigned char)end[1])) {
			char *e2;
			unsigned long long more = strtoull(end + 1, &e2, 10);
			unsigned long long mul = 1;

			for (char *q = end + 1; q < e2; q++)
				mul *= 10;
			v = v * mul + more;
			end = e2;
		}
		if (isalnum((unsigned char)*end) || *end == '_') {
			fail(ps, ps->tline, ps->tcol, (int)(end - s) + 1, "syntax error, invalid integer");
		}
		adv(ps, (size_t)(end - s));
		ps->t = T_INT;
		ps->ival = (int64_t)v;
	} else if (c == '"') {
		lex_string(ps);
	} else if (isalpha((unsigned char)c) || c == '_' || c == '@' || c == '$') {
		size_t n = 1;

		while (isalnum((unsigned char)s[n]) || s[n] == '_')
			n++;
		adv(ps, n);
		ps->text = dupn(s, n);
		if (c == '@')
			ps->t = T_MAP;
		else if (c == '$' && n > 1 && isdigit((unsigned char)s[1]))
			ps->t = T_POS, ps->ival = atoi(s + 1);
		else if (c == '$')
			ps->t = n > 1 ? T_VAR : T_EOF;
		else
			ps->t = T_IDENT;
		if (c == '$' && n == 1)
			fail(ps, ps->tline, ps->tcol, 1, "syntax error, unexpected $");
	} else {
		unsigned i;

		for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
			if (!strncmp(s, ops[i].s, strlen(ops[i].s)))
				break;
		if (i == sizeof(ops) / sizeof(ops[0])) {
			fail(ps, ps->tline, ps->tcol, 1, "syntax error, unexpected %c", c);
			ps->t = T_EOF;
			adv(ps, 1);
		} else {
			ps->t = ops[i].t;
			adv(ps, strlen(ops[i].s));
		}
	}
	ps->tlen = (int)(ps->pos - st);
}

static const char *tok_name(struct parser *ps)
{
	static char b[80];

	switch (ps->t) {
	case T_INT: snprintf(b, sizeof(b), "integer"); return b;
	case T_STR: return "string";
	case T_IDENT: case T_MAP: case T_VAR:
		snprintf(b, sizeof(b), "%s", ps->text ? ps->text : "?");
		return b;
	case T_POS: return "positional parameter";
	default: return tok_text[ps->t] ? tok_text[ps->t] : "?";
	}
}

static void unexpected(struct parser *ps)
{
	if (ps->t == T_EOF)
		fail(ps, ps->tline, ps->tcol, 1, "syntax error, unexpected end of file");
	else
		fail(ps, ps->tline, ps->tcol, ps->tlen, "syntax error, unexpected %s", tok_name(ps));
}

static bool expect(struct parser *ps, enum tok t)
{
	if (ps->failed)
		return false;
	if (ps->t != t) {
		if (ps->t == T_EOF)
			fail(ps, ps->tline, ps->tcol, 1, "syntax error, unexpected end of file, "
							   "expecting %s", tok_text[t]);
		else
			fail(ps, ps->tline, ps->tcol, ps->tlen, "syntax error, unexpected %s, "
								  "expecting %s", tok_name(ps), tok_text[t]);
		return false;
	}
	next(ps);
	return true;
}

static struct bt_node *node(struct parser *ps, enum bt_nk k)
{
	struct bt_node *n = calloc(1, sizeof(*n));

	if (!n) {
		ps->failed = -ENOMEM;
		snprintf(ps->err, ps->errlen, "out of memory");
		return NULL;
	}
	n->k = k;
	n->line = ps->tline;
	n->col = ps->tcol;
	n->len = ps->tlen;
	return n;
}

static void push(struct parser *ps, struct bt_node *parent, struct bt_node *child)
{
	struct bt_node **v = realloc(parent->v, (parent->n + 1) * sizeof(*v));

	if (!v) {
		ps->failed = -ENOMEM;
		return;
	}
	v[parent->n++] = child;
	parent->v = v;
}

static void node_free(struct bt_node *n)
{
	if (!n)
		return;
	node_free(n->a);
	node_free(n->b);
	node_free(n->c);
	for (unsigned i = 0; i < n->n; i++)
		node_free(n->v[i]);
	free(n->v);
	free(n->s);
	free(n);
}

static struct bt_node *expr(struct parser *ps);
static struct bt_node *block(struct parser *ps);

static int map_id(struct parser *ps, const char *name)
{
	struct bt_prog *p = ps->p;
	struct bt_map *m;

	for (unsigned i = 0; i < p->nmaps; i++)
		if (!strcmp(p->maps[i].name, name))
			return (int)i;
	m = realloc(p->maps, (p->nmaps + 1) * sizeof(*m));
	if (!m) {
		ps->failed = -ENOMEM;
		return 0;
	}
	p->maps = m;
	memset(&m[p->nmaps], 0, sizeof(*m));
	m[p->nmaps].name = strdup(name);
	m[p->nmaps].nkeys = (unsigned)-1;
	return (int)p->nmaps++;
}

static int var_id(struct parser *ps, const char *name)
{
	struct bt_prog *p = ps->p;
	char **v;

	for (unsigned i = 0; i < p->nvars; i++)
		if (!strcmp(p->vars[i], name))
			return (int)i;
	v = realloc(p->vars, (p->nvars + 1) * sizeof(*v));
	if (!v) {
		ps->failed = -ENOMEM;
		return 0;
	}
	p->vars = v;
	v[p->nvars] = strdup(name);
	return (int)p->nvars++;
}

static const struct { const char *name; int id; } builtins[] = {
	{ "pid", BT_B_PID }, { "tid", BT_B_TID }, { "comm", BT_B_COMM },
	{ "nsecs", BT_B_NSECS }, { "elapsed", BT_B_ELAPSED }, { "cpu", BT_B_CPU },
	{ "retval", BT_B_RETVAL }, { "arg0", BT_B_ARG0 }, { "arg1", BT_B_ARG0 + 1 },
	{ "arg2", BT_B_ARG0 + 2 }, { "arg3", BT_B_ARG0 + 3 }, { "arg4", BT_B_ARG0 + 4 },
	{ "arg5", BT_B_ARG0 + 5 }, { "func", BT_B_FUNC }, { "probe", BT_B_PROBE },
	{ "ustack", BT_B_USTACK }, { "uid", BT_B_UID }, { "gid", BT_B_GID },
};

static const char *const builtins_refused[] = {
	"kstack", "curtask", "rand", "cgroup", "username", "sarg0", "sarg1", "sarg2",
	"sarg3", "sarg4", "sarg5", "args", "ctx", "jiffies", "numaid", "usermode", "cpid",
	"arg6", "arg7", "arg8", "arg9", "__builtin_ustack", NULL,
};

static struct bt_node *primary(struct parser *ps)
{
	struct bt_node *n = NULL;

	if (ps->failed)
		return NULL;
	switch (ps->t) {
	case T_INT:
		n = node(ps, BT_N_INT);
		if (n)
			n->ival = ps->ival;
		next(ps);
		return n;
	case T_STR:
		n = node(ps, BT_N_STR);
		if (n) {
			n->s = ps->text;
			ps->text = NULL;
		}
		next(ps);
		return n;
	case T_POS:
		n = node(ps, BT_N_BUILTIN);
		if (n) {
			n->ival = BT_B_POS;
			n->id = (int)ps->ival;
			if ((unsigned)ps->ival > ps->p->max_pos)
				ps->p->max_pos = (unsigned)ps->ival;
		}
		next(ps);
		return n;
	case T_LP:
		next(ps);
		if (ps->pred_depth >= 0)
			ps->pred_depth++;
		n = expr(ps);
		if (ps->pred_depth > 0)
			ps->pred_depth--;
		expect(ps, T_RP);
		return n;
	case T_MAP:
		n = node(ps, BT_N_MAP);
		if (!n)
			return NULL;
		n->s = ps->text;
		ps->text = NULL;
		n->id = map_id(ps, n->s);
		next(ps);
		if (ps->t == T_LBR) {
			int save = ps->pred_depth;

			next(ps);
			if (ps->pred_depth >= 0)
				ps->pred_depth = 1;
			for (;;) {
				struct bt_node *k = expr(ps);

				if (!k)
					break;
				push(ps, n, k);
				if (ps->t != T_COMMA)
					break;
				next(ps);
			}
			ps->pred_depth = save;
			expect(ps, T_RBR);
			if (!n->n && !ps->failed)
				fail(ps, n->line, n->col, n->len, "syntax error, unexpected ]");
		}
		return n;
	case T_VAR:
		n = node(ps, BT_N_VAR);
		if (!n)
			return NULL;
		n->s = ps->text;
		ps->text = NULL;
		n->id = var_id(ps, n->s);
		next(ps);
		return n;
	case T_IDENT: {
		int line = ps->tline, col = ps->tcol, len = ps->tlen;
		char *name = ps->text;

		ps->text = NULL;
		if (!strcmp(name, "while") || !strcmp(name, "unroll") || !strcmp(name, "for") ||
		    !strcmp(name, "return") || !strcmp(name, "struct") || !strcmp(name, "let") ||
		    !strcmp(name, "macro") || !strcmp(name, "import")) {
			fail(ps, line, col, len, "uprobe run does not take '%s' (bpftrace's, not "
			     "implemented here yet)", name);
			free(name);
			return NULL;
		}
		next(ps);
		if (ps->t == T_LP) {
			int f;

			for (f = 0; f < F_NFN; f++)
				if (!strcmp(fn_names[f], name))
					break;
			if (f == F_NFN) {
				for (int i = 0; fn_refused[i]; i++)
					if (!strcmp(fn_refused[i], name)) {
						fail(ps, line, col, len, "uprobe run does not take %s() "
							 "(bpftrace's, not implemented here yet)", name);
						free(name);
						return NULL;
					}
				fail(ps, line, col, len, "Unknown function: %s", name);
				free(name);
				return NULL;
			}
			n = node(ps, BT_N_CALL);
			if (!n) {
				free(name);
				return NULL;
			}
			n->line = line, n->col = col, n->len = len;
			n->s = name;
			n->op = f;
			next(ps);
			if (ps->t != T_RP) {
				int save = ps->pred_depth;

				if (ps->pred_depth >= 0)
					ps->pred_depth = 1;
				for (;;) {
					struct bt_node *a = expr(ps);

					if (!a)
						break;
					push(ps, n, a);
					if (ps->t != T_COMMA)
						break;
					next(ps);
				}
				ps->pred_depth = save;
			}
			/* a call's errors underline it whole, as bpftrace's: name to ')' */
			if (ps->t == T_RP && ps->tline == line)
				n->len = ps->tcol + ps->tlen - col;
			expect(ps, T_RP);
			return n;
		}
		for (unsigned i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
			if (!strcmp(builtins[i].name, name)) {
				n = node(ps, BT_N_BUILTIN);
				if (n) {
					n->line = line, n->col = col, n->len = len;
					n->ival = builtins[i].id;
					n->s = name;
				}
				return n;
			}
		for (int i = 0; builtins_refused[i]; i++)
			if (!strcmp(builtins_refused[i], name)) {
				fail(ps, line, col, len, "uprobe run does not take the builtin '%s' "
					 "(bpftrace's, not implemented here)", name);
				free(name);
				return NULL;
			}
		if (!strcmp(name, "while") || !strcmp(name, "unroll") || !strcmp(name, "for") ||
		    !strcmp(name, "return") || !strcmp(name, "struct") || !strcmp(name, "let"))
			fail(ps, line, col, len, "uprobe run does not take '%s' (bpftrace's, not "
				 "implemented here yet)", name);
		else
			fail(ps, line, col, len, "Unknown identifier: '%s'", name);
		free(name);
		return NULL;
	}
	default:
		unexpected(ps);
		return NULL;
	}
}

static const char *const cast_types[] = { "int8", "int16", "int32", "int64", "uint8",
					  "uint16", "uint32", "uint64", NULL };

static struct bt_node *unary(struct parser *ps)
{
	struct bt_node *n;

	if (ps->failed)
		return NULL;
	if (ps->t == T_NOT || ps->t == T_MINUS || ps->t == T_TILDE || ps->t == T_PLUS) {
		n = node(ps, BT_N_UN);
		if (!n)
			return NULL;
		n->op = ps->t;
		next(ps);
		n->a = unary(ps);
		if (n->op == T_PLUS) {
			struct bt_node *a = n->a;

			n->a = NULL;
			node_free(n);
			return a;
		}
		return n;
	}
	if (ps->t == T_STAR || ps->t == T_AMP) {
		fail(ps, ps->tline, ps->tcol, ps->tlen, "uprobe run does not take pointer %s "
			 "(bpftrace's, not implemented here yet: use str() for strings)",
			 ps->t == T_STAR ? "dereferences" : "address-of");
		return NULL;
	}
	if (ps->t == T_INC || ps->t == T_DEC) {
		n = node(ps, BT_N_INCDEC);
		if (!n)
			return NULL;
		n->op = ps->t;
		n->sign = true; /* prefix */
		next(ps);
		n->a = unary(ps);
		return n;
	}
	if (ps->t == T_LP) {
		/* a cast? "(" TYPE ")" */
		size_t save = ps->pos;
		int sl = ps->line, sc = ps->col;
		int tl = ps->tline, tc = ps->tcol, tn = ps->tlen;

		next(ps);
		if (ps->t == T_IDENT) {
			for (int i = 0; cast_types[i]; i++)
				if (!strcmp(ps->text, cast_types[i])) {
					n = node(ps, BT_N_CAST);
					if (!n)
						return NULL;
					n->line = tl, n->col = tc;
					n->sign = cast_types[i][0] == 'i';
					n->ival = atoi(cast_types[i] + (n->sign ? 3 : 4));
					next(ps);
					if (!expect(ps, T_RP))
						return n;
					n->a = unary(ps);
					return n;
				}
			if (!strcmp(ps->text, "struct") || !strcmp(ps->text, "char") ||
			    !strcmp(ps->text, "int") || !strcmp(ps->text, "unsigned")) {
				fail(ps, ps->tline, ps->tcol, ps->tlen, "uprobe run does not take "
					 "casts to C types (bpftrace's, not implemented here): "
					 "(int8) .. (uint64) only");
				return NULL;
			}
		}
		/* not a cast: back to the '(' */
		free(ps->text);
		ps->text = NULL;
		ps->pos = save;
		ps->line = sl, ps->col = sc;
		ps->t = T_LP, ps->tline = tl, ps->tcol = tc, ps->tlen = tn;
	}
	n = primary(ps);
	while (!ps->failed && (ps->t == T_INC || ps->t == T_DEC || ps->t == T_DOT ||
			       ps->t == T_ARROW || ps->t == T_LBR)) {
		struct bt_node *o;

		if (ps->t != T_INC && ps->t != T_DEC) {
			fail(ps, ps->tline, ps->tcol, ps->tlen, "uprobe run does not take '%s' "
				 "(fields, arrays: bpftrace's, not implemented here)", tok_text[ps->t]);
			break;
		}
		o = node(ps, BT_N_INCDEC);
		if (!o)
			break;
		o->op = ps->t;
		o->a = n;
		n = o;
		next(ps);
	}
	return n;
}

static int prec(struct parser *ps, enum tok t)
{
	switch (t) {
	case T_STAR: case T_PCT: return 10;
	case T_SLASH: return ps->pred_depth == 0 ? -1 : 10; /* ends a predicate */
	case T_PLUS: case T_MINUS: return 9;
	case T_SHL: case T_SHR: return 8;
	case T_LT: case T_LE: case T_GT: case T_GE: return 7;
	case T_EQ: case T_NE: return 6;
	case T_AMP: return 5;
	case T_CARET: return 4;
	case T_PIPE: return 3;
	case T_LAND: return 2;
	case T_LOR: return 1;
	default: return -1;
	}
}

static struct bt_node *binary(struct parser *ps, int min)
{
	struct bt_node *l = unary(ps);

	while (!ps->failed && prec(ps, ps->t) >= min) {
		int p = prec(ps, ps->t);
		struct bt_node *n = node(ps, BT_N_BIN);

		if (!n)
			break;
		n->op = ps->t;
		next(ps);
		n->a = l;
		n->b = binary(ps, p + 1);
		l = n;
	}
	return l;
}

static struct bt_node *expr(struct parser *ps)
{
	struct bt_node *c = binary(ps, 1), *n;

	if (ps->failed || ps->t != T_QUEST)
		return c;
	n = node(ps, BT_N_TERN);
	if (!n)
		return c;
	next(ps);
	n->a = c;
	n->b = expr(ps);
	expect(ps, T_COLON);
	n->c = expr(ps);
	return n;
}

static bool is_assign(enum tok t)
{
	return t == T_ASSIGN || (t >= T_ADDEQ && t <= T_SHREQ);
}

static struct bt_node *statement(struct parser *ps)
{
	struct bt_node *n, *e;

	if (ps->t == T_IDENT && !strcmp(ps->text, "if")) {
		n = node(ps, BT_N_IF);
		if (!n)
			return NULL;
		next(ps);
		expect(ps, T_LP);
		n->a = expr(ps);
		expect(ps, T_RP);
		n->b = block(ps);
		if (ps->t == T_IDENT && !strcmp(ps->text, "else")) {
			next(ps);
			if (ps->t == T_IDENT && !strcmp(ps->text, "if")) {
				struct bt_node *b = node(ps, BT_N_BLOCK);

				if (!b)
					return n;
				n->c = b;
				push(ps, b, statement(ps));
			} else {
				n->c = block(ps);
			}
		}
		return n;
	}
	if (ps->t == T_LB)
		return block(ps);
	e = expr(ps);
	if (ps->failed || !e)
		return e;
	if (is_assign(ps->t)) {
		if (e->k != BT_N_MAP && e->k != BT_N_VAR) {
			fail(ps, ps->tline, ps->tcol, ps->tlen, "syntax error, unexpected %s",
			     tok_text[ps->t]);
			return e;
		}
		n = node(ps, BT_N_ASSIGN);
		if (!n)
			return e;
		n->line = e->line, n->col = e->col, n->len = e->len;
		n->op = ps->t;
		next(ps);
		n->a = e;
		n->b = expr(ps);
		return n;
	}
	return e;
}

static struct bt_node *block(struct parser *ps)
{
	struct bt_node *b;

	if (!expect(ps, T_LB))
		return NULL;
	b = node(ps, BT_N_BLOCK);
	while (b && !ps->failed && ps->t != T_RB && ps->t != T_EOF) {
		struct bt_node *s = statement(ps);
		bool needs_semi;

		if (!s)
			break;
		push(ps, b, s);
		needs_semi = s->k != BT_N_IF && s->k != BT_N_BLOCK;
		if (ps->t == T_SEMI) {
			while (ps->t == T_SEMI)
				next(ps);
		} else if (needs_semi && ps->t != T_RB) {
			unexpected(ps);
		}
	}
	expect(ps, T_RB);
	return b;
}

/* One attach point's raw text, from here to a blank, ',' or '{'. */
static char *attach_text(struct parser *ps, int *line, int *col, int *len)
{
	size_t st;

	skip_blank(ps);
	*line = ps->line;
	*col = ps->col;
	st = ps->pos;
	while (peekc(ps, 0) && !strchr(" \t\r\n,{", peekc(ps, 0)) &&
	       !(peekc(ps, 0) == '/' && (peekc(ps, 1) == '/' || peekc(ps, 1) == '*') &&
		 ps->pos > st && ps->s[ps->pos - 1] != ':'))
		adv(ps, 1);
	*len = (int)(ps->pos - st);
	return dupn(ps->s + st, ps->pos - st);
}

static bool parse_attach(struct parser *ps, struct bt_attach *a)
{
	char *t = a->text, *c1 = strchr(t, ':'), *type;
	size_t tl = c1 ? (size_t)(c1 - t) : strlen(t);

	type = dupn(t, tl);
	if (!type)
		return false;
	if (!strcmp(type, "BEGIN") || !strcmp(type, "END")) {
		a->kind = type[0] == 'B' ? BT_P_BEGIN : BT_P_END;
		if (c1)
			fail(ps, a->line, a->col, a->len, "%s probe type takes no arguments", type);
	} else if (!strcmp(type, "uprobe") || !strcmp(type, "u") || !strcmp(type, "uretprobe") ||
		   !strcmp(type, "ur")) {
		char *c2 = c1 ? strrchr(c1 + 1, ':') : NULL;

		a->kind = (!strcmp(type, "uretprobe") || !strcmp(type, "ur")) ? BT_P_URETPROBE
									      : BT_P_UPROBE;
		if (!c1 || !c2 || c2 == c1 || !c2[1] || c2 == c1 + 1) {
			fail(ps, a->line, a->col, a->len, "%s probe type requires 2 arguments "
				 "(%s:BINARY:FUNCTION)", type, type);
		} else {
			a->target = dupn(c1 + 1, (size_t)(c2 - c1 - 1));
			a->func = strdup(c2 + 1);
			if (strchr(a->func, '+') || (a->func[0] >= '0' && a->func[0] <= '9'))
				fail(ps, a->line, a->col, a->len, "uprobe run does not take probe "
					 "offsets or addresses (bpftrace's, not implemented here): "
					 "%s:BINARY:FUNCTION", type);
		}
	} else if (!strcmp(type, "usdt") || !strcmp(type, "U")) {
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		a->kind = BT_P_USDT;
		if (!c1 || !c2 || !c2[1]) {
			fail(ps, a->line, a->col, a->len, "%s probe type requires 2 or 3 arguments "
				 "(usdt:BINARY:[PROVIDER:]NAME)", type);
		} else {
			a->target = dupn(c1 + 1, (size_t)(c2 - c1 - 1));
			a->func = strdup(c2 + 1);
		}
	} else if (!strcmp(type, "interval") || !strcmp(type, "i")) {
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		char *end;
		unsigned long long v;

		a->kind = BT_P_INTERVAL;
		if (!c2) {
			fail(ps, a->line, a->col, a->len, "interval probe type requires 2 arguments "
				 "(interval:s:N, interval:ms:N)");
		} else {
			size_t ul = (size_t)(c2 - c1 - 1);
			uint64_t mul = ul == 1 && c1[1] == 's' ? 1000000000ull :
				       ul == 2 && !strncmp(c1 + 1, "ms", 2) ? 1000000ull :
				       ul == 2 && !strncmp(c1 + 1, "us", 2) ? 1000ull :
				       ul == 2 && !strncmp(c1 + 1, "hz", 2) ? 1 : 0;

			v = strtoull(c2 + 1, &end, 10);
			if (!mul || *end || !v)
				fail(ps, a->line, a->col, a->len, "interval: the unit is s, ms, us "
					 "or hz, then a positive count (interval:s:1)");
			else
				a->period_ns = mul == 1 ? 1000000000ull / v : v * mul;
			if (a->period_ns && a->period_ns < 1000000)
				fail(ps, a->line, a->col, a->len, "uprobe run takes intervals of "
					 "1 ms or more");
		}
	} else {
		bool kern = false;

		for (int i = 0; kernel_probes[i]; i++)
			kern |= !strcmp(kernel_probes[i], type);
		if (kern)
			fail(ps, a->line, a->col, (int)tl, "%s probes are the kernel's: uprobe run "
				 "traces user space only, through ptrace, with no privilege (run "
				 "this under bpftrace, as root)", type);
		else
			fail(ps, a->line, a->col, (int)tl, "Invalid probe type: %s", type);
	}
	free(type);
	return !ps->failed;
}

/* --- the checks --- */

struct checker {
	struct parser *ps;
	struct bt_probe *probe;
	enum bt_ty *vty; /* scratch variables' types (per program) */
	bool *vset;
	bool *vsign; /* their values signed */
};

static void check(struct checker *ck, struct bt_node *n);

static bool is_agg(int f)
{
	return f <= F_LHIST;
}

static void set_map_kind(struct checker *ck, struct bt_node *mapn, enum bt_mk k,
			 enum bt_ty vty, struct bt_node *at)
{
	struct bt_map *m = &ck->ps->p->maps[mapn->id];

	if (m->kind == BT_M_NONE) {
		m->kind = k;
		m->vty = vty;
		return;
	}
	if (m->kind == k && (k != BT_M_STR || m->vty == vty))
		return;
	if ((m->kind == BT_M_INT && k == BT_M_INT))
		return;
	fail(ck->ps, at->line, at->col, at->len, "Type mismatch for %s: trying to assign a "
	     "value of another type (%s) to a map that holds another", m->name,
	     k == BT_M_STR ? "string" : k == BT_M_INT ? "integer" : "an aggregation");
}

static void check_map_keys(struct checker *ck, struct bt_node *n)
{
	struct bt_map *m = &ck->ps->p->maps[n->id];

	if (n->n > BT_MAX_KEYS) {
		fail(ck->ps, n->line, n->col, n->len, "a map key of more than %d values",
		     BT_MAX_KEYS);
		return;
	}
	if (m->nkeys == (unsigned)-1)
		m->nkeys = n->n;
	else if (m->nkeys != n->n)
		fail(ck->ps, n->line, n->col, n->len, "Argument mismatch for %s: trying to "
		     "access with %u arguments when map expects %u arguments", m->name, n->n,
		     m->nkeys);
	for (unsigned i = 0; i < n->n; i++)
		check(ck, n->v[i]);
}

static void check_call(struct checker *ck, struct bt_node *n, struct bt_node *assign_to)
{
	static const signed char nargs[F_NFN][2] = {
		[F_COUNT] = { 0, 0 }, [F_SUM] = { 1, 1 }, [F_AVG] = { 1, 1 }, [F_MIN] = { 1, 1 },
		[F_MAX] = { 1, 1 }, [F_STATS] = { 1, 1 }, [F_HIST] = { 1, 1 },
		[F_LHIST] = { 4, 4 }, [F_PRINTF] = { 1, BT_MAX_ARGS }, [F_PRINT] = { 1, 3 },
		[F_TIME] = { 0, 1 }, [F_EXIT] = { 0, 0 }, [F_DELETE] = { 1, 1 },
		[F_CLEAR] = { 1, 1 }, [F_ZERO] = { 1, 1 }, [F_STR] = { 1, 2 }, [F_USYM] = { 1, 1 },
		[F_USTACK] = { 0, 2 }, [F_STRFTIME] = { 2, 2 }, [F_NTOP] = { 1, 2 },
	};
	int f = n->op;

	if ((int)n->n < nargs[f][0] || (int)n->n > nargs[f][1]) {
		char want[32];

		/* bpftrace's words: "no arguments", "one argument", "4 arguments" */
		if (nargs[f][0] == 0)
			snprintf(want, sizeof(want), "no arguments");
		else if (nargs[f][0] == 1)
			snprintf(want, sizeof(want), "one argument");
		else
			snprintf(want, sizeof(want), "%d arguments", nargs[f][0]);
		if (nargs[f][0] == nargs[f][1])
			fail(ck->ps, n->line, n->col, n->len, "%s() requires %s (%u provided)",
			     n->s, want, n->n);
		else
			fail(ck->ps, n->line, n->col, n->len, "%s() takes %d to %d arguments (%u "
			     "provided)", n->s, nargs[f][0], nargs[f][1], n->n);
		return;
	}
	if (is_agg(f) && !assign_to) {
		fail(ck->ps, n->line, n->col, n->len, "%s() should be directly assigned to a map",
		     n->s);
		return;
	}
	n->ty = BT_T_NONE;
	switch (f) {
	case F_DELETE:
		if (n->v[0]->k != BT_N_MAP || !n->v[0]->n)
			fail(ck->ps, n->line, n->col, n->len, "delete() expects a map with a key "
			     "to be provided");
		else
			check_map_keys(ck, n->v[0]);
		return;
	case F_CLEAR:
	case F_ZERO:
		if (n->v[0]->k != BT_N_MAP || n->v[0]->n)
			fail(ck->ps, n->line, n->col, n->len, "%s() expects a map to be provided",
			     n->s);
		return;
	case F_PRINT:
		if (n->v[0]->k == BT_N_MAP && !n->v[0]->n) {
			/* print(@m, top, div): integer literals, as bpftrace takes them */
			for (unsigned i = 1; i < n->n; i++)
				if (n->v[i]->k != BT_N_INT || n->v[i]->ival < 0 ||
				    n->v[i]->ival > UINT32_MAX) {
					fail(ck->ps, n->line, n->col, n->len, "print() expects a "
					     "integer literal (%s provided)",
					     n->v[i]->k == BT_N_STR ? "string" : "integer");
					return;
				}
			return;
		}
		check(ck, n->v[0]);
		return;
	case F_PRINTF:
	case F_TIME:
		if (n->v && n->v[0]->k != BT_N_STR) {
			fail(ck->ps, n->v[0]->line, n->v[0]->col, n->v[0]->len, "%s() expects a "
			     "string literal as its format", n->s);
			return;
		}
		for (unsigned i = 1; i < n->n; i++)
			check(ck, n->v[i]);
		return;
	case F_STR:
	case F_NTOP: /* ntop([af, ]addr): an IPv4 or IPv6 address from an integer */
		n->ty = BT_T_STR;
		break;
	case F_STRFTIME:
		/* strftime(fmt, nsecs): a string (bpftrace's timestamp, as printf shows it) */
		n->ty = BT_T_STR;
		if (n->v[0]->k != BT_N_STR) {
			fail(ck->ps, n->v[0]->line, n->v[0]->col, n->v[0]->len, "strftime() "
			     "expects a string literal as its format");
			return;
		}
		check(ck, n->v[1]);
		if (n->v[1]->ty != BT_T_INT)
			fail(ck->ps, n->v[1]->line, n->v[1]->col, n->v[1]->len, "strftime() "
			     "expects an integer argument");
		return;
	case F_USYM:
		n->ty = BT_T_SYM;
		break;
	case F_USTACK:
		n->ty = BT_T_STACK;
		if (n->n && (n->v[0]->k != BT_N_INT || n->n > 1))
			fail(ck->ps, n->line, n->col, n->len, "uprobe run takes ustack() and "
			     "ustack(N), N an integer (not the perf mode)");
		return;
	case F_LHIST:
		for (unsigned i = 1; i < 4; i++)
			if (n->v[i]->k != BT_N_INT && !(n->v[i]->k == BT_N_UN &&
							n->v[i]->op == T_MINUS &&
							n->v[i]->a->k == BT_N_INT)) {
				fail(ck->ps, n->v[i]->line, n->v[i]->col, n->v[i]->len,
				     "lhist() expects integer literals for min, max and step");
				return;
			}
		break;
	default:
		break;
	}
	for (unsigned i = 0; i < n->n; i++) {
		check(ck, n->v[i]);
		if (n->v[i]->ty != BT_T_INT && f != F_PRINT)
			fail(ck->ps, n->v[i]->line, n->v[i]->col, n->v[i]->len,
			     "%s() expects an integer argument", n->s);
	}
}

/* Whether bpftrace gives the value a signed type: casts say, literals are, the
   builtins (u64) are not; arithmetic is when both sides are. */
static bool expr_signed(struct checker *ck, const struct bt_node *n)
{
	switch (n->k) {
	case BT_N_CAST: return n->sign;
	case BT_N_INT: return true;
	case BT_N_UN: return n->op == T_MINUS || expr_signed(ck, n->a);
	case BT_N_BIN: return expr_signed(ck, n->a) && expr_signed(ck, n->b);
	case BT_N_TERN: return expr_signed(ck, n->b) && expr_signed(ck, n->c);
	case BT_N_VAR: return ck->vsign[n->id];
	case BT_N_MAP: return ck->ps->p->maps[n->id].vsign;
	default: return false;
	}
}

static int64_t lit(const struct bt_node *n)
{
	return n->k == BT_N_INT ? n->ival : -n->a->ival;
}

static void check(struct checker *ck, struct bt_node *n)
{
	struct parser *ps = ck->ps;

	if (!n || ps->failed)
		return;
	n->ty = BT_T_INT;
	switch (n->k) {
	case BT_N_INT:
		return;
	case BT_N_STR:
		n->ty = BT_T_STR;
		return;
	case BT_N_BUILTIN:
		switch (n->ival) {
		case BT_B_COMM: case BT_B_FUNC: case BT_B_PROBE:
			n->ty = BT_T_STR;
			break;
		case BT_B_USTACK:
			n->ty = BT_T_STACK;
			break;
		case BT_B_RETVAL:
			for (unsigned i = 0; i < ck->probe->nap; i++)
				if (ck->probe->ap[i].kind != BT_P_URETPROBE)
					fail(ps, n->line, n->col, n->len, "The retval builtin can "
					     "only be used with 'kretprobe' and 'uretprobe' and "
					     "'kfunc' probes");
			break;
		case BT_B_POS:
			n->ty = BT_T_INT; /* decided at run: a number or a string */
			break;
		default:
			if (n->ival >= BT_B_ARG0 && n->ival < BT_B_ARG0 + 6)
				for (unsigned i = 0; i < ck->probe->nap; i++) {
					enum bt_pk k = ck->probe->ap[i].kind;

					if (k == BT_P_URETPROBE || k == BT_P_BEGIN || k == BT_P_END ||
					    k == BT_P_INTERVAL)
						fail(ps, n->line, n->col, n->len, "The %s builtin can "
						     "only be used with 'kprobes', 'uprobes' and 'usdt' "
						     "probes", n->s);
				}
			break;
		}
		if ((n->ival == BT_B_USTACK || n->ival == BT_B_FUNC))
			for (unsigned i = 0; i < ck->probe->nap; i++) {
				enum bt_pk k = ck->probe->ap[i].kind;

				if (k == BT_P_BEGIN || k == BT_P_END || k == BT_P_INTERVAL)
					fail(ps, n->line, n->col, n->len, "%s is not available in a "
					     "%s probe (no thread stopped there)", n->s,
					     ck->probe->ap[i].text);
			}
		return;
	case BT_N_MAP: {
		struct bt_map *m = &ps->p->maps[n->id];

		check_map_keys(ck, n);
		n->ty = m->kind == BT_M_STR ? m->vty : BT_T_INT;
		if (m->kind == BT_M_HIST || m->kind == BT_M_LHIST || m->kind == BT_M_STATS)
			fail(ps, n->line, n->col, n->len, "%s is a %s map: its value can be printed, "
			     "not read", m->name, m->kind == BT_M_STATS ? "stats" : "histogram");
		return;
	}
	case BT_N_VAR:
		if (!ck->vset[n->id])
			fail(ps, n->line, n->col, n->len, "Undefined or undeclared variable: %s",
			     n->s);
		n->ty = ck->vty[n->id];
		return;
	case BT_N_CALL:
		check_call(ck, n, NULL);
		if (!ps->failed && n->op == F_USTACK && !n->n)
			n->ty = BT_T_STACK;
		return;
	case BT_N_UN:
		check(ck, n->a);
		if (n->a && n->a->ty != BT_T_INT)
			fail(ps, n->line, n->col, n->len, "The %s operator can only be used on "
			     "integers", tok_text[n->op]);
		return;
	case BT_N_CAST:
		check(ck, n->a);
		if (n->a && n->a->ty != BT_T_INT)
			fail(ps, n->line, n->col, n->len, "Cannot cast from a string to an integer");
		return;
	case BT_N_BIN:
		check(ck, n->a);
		check(ck, n->b);
		if (ps->failed)
			return;
		for (int side = 0; side < 2; side++) {
			/* bpftrace: an aggregation's value is printed, not computed with */
			static const char *const agg_names[] = {
				[BT_M_COUNT] = "count", [BT_M_SUM] = "sum", [BT_M_AVG] = "avg",
				[BT_M_MIN] = "min", [BT_M_MAX] = "max",
			};
			struct bt_node *o = side ? n->b : n->a;
			enum bt_mk k = o->k == BT_N_MAP ? ps->p->maps[o->id].kind : BT_M_NONE;

			if (k >= BT_M_COUNT && k <= BT_M_MAX) {
				fail(ps, n->line, n->col, n->len, "Type mismatch for '%s': comparing "
				     "'%s' with '%s'", tok_text[n->op], side ? "int64" : agg_names[k],
				     side ? agg_names[k] : "int64");
				return;
			}
		}
		if (n->a->ty != BT_T_INT || n->b->ty != BT_T_INT) {
			bool strcmp_ok = (n->op == T_EQ || n->op == T_NE) && n->a->ty == BT_T_STR &&
					 n->b->ty == BT_T_STR;

			if (!strcmp_ok)
				fail(ps, n->line, n->col, n->len, "Type mismatch for '%s': comparing "
				     "'%s' with '%s'", tok_text[n->op],
				     n->a->ty == BT_T_INT ? "int64" : "string",
				     n->b->ty == BT_T_INT ? "int64" : "string");
		}
		return;
	case BT_N_TERN:
		check(ck, n->a);
		check(ck, n->b);
		check(ck, n->c);
		if (!ps->failed && n->b->ty != n->c->ty)
			fail(ps, n->line, n->col, n->len, "Ternary operator must return the same "
			     "type: have '%s' and '%s'", n->b->ty == BT_T_INT ? "int64" : "string",
			     n->c->ty == BT_T_INT ? "int64" : "string");
		if (!ps->failed)
			n->ty = n->b->ty;
		return;
	case BT_N_INCDEC:
		if (n->a->k != BT_N_MAP && n->a->k != BT_N_VAR) {
			fail(ps, n->line, n->col, n->len, "The %s operator must be applied to a "
			     "map or variable", tok_text[n->op]);
			return;
		}
		if (n->a->k == BT_N_MAP) {
			check_map_keys(ck, n->a);
			set_map_kind(ck, n->a, BT_M_INT, BT_T_INT, n);
		} else if (!ck->vset[n->a->id]) {
			fail(ps, n->line, n->col, n->len, "Undefined or undeclared variable: %s",
			     n->a->s);
		}
		return;
	case BT_N_ASSIGN: {
		struct bt_node *l = n->a, *r = n->b;

		n->ty = BT_T_NONE;
		if (l->k == BT_N_MAP && r->k == BT_N_CALL && is_agg(r->op)) {
			static const enum bt_mk kinds[] = {
				[F_COUNT] = BT_M_COUNT, [F_SUM] = BT_M_SUM, [F_AVG] = BT_M_AVG,
				[F_MIN] = BT_M_MIN, [F_MAX] = BT_M_MAX, [F_STATS] = BT_M_STATS,
				[F_HIST] = BT_M_HIST, [F_LHIST] = BT_M_LHIST,
			};
			struct bt_map *m = &ps->p->maps[l->id];

			if (n->op != T_ASSIGN) {
				fail(ps, n->line, n->col, n->len, "%s() should be directly assigned "
				     "to a map (with '=')", r->s);
				return;
			}
			check_map_keys(ck, l);
			check_call(ck, r, l);
			if (ps->failed)
				return;
			if (r->op == F_LHIST) {
				int64_t mn = lit(r->v[1]), mx = lit(r->v[2]), st = lit(r->v[3]);

				if (st <= 0 || mx <= mn || (mx - mn) / st > 1000) {
					fail(ps, r->line, r->col, r->len, "lhist() step must be >= 1, max "
					     "above min, and (max - min) / step <= 1000");
					return;
				}
				if (m->kind == BT_M_LHIST && (m->lmin != mn || m->lmax != mx ||
							      m->lstep != st)) {
					fail(ps, r->line, r->col, r->len, "Different lhist bounds in a "
					     "single map are unsupported");
					return;
				}
				m->lmin = mn, m->lmax = mx, m->lstep = st;
			}
			set_map_kind(ck, l, kinds[r->op], BT_T_INT, n);
			/* bpftrace: sum, min and max of a signed value print signed; of the
			   builtins (arg0, retval: u64), unsigned */
			if (r->n && (r->op == F_SUM || r->op == F_MIN || r->op == F_MAX))
				m->vsign = m->vsign || expr_signed(ck, r->v[0]);
			return;
		}
		check(ck, r);
		if (ps->failed)
			return;
		if (r->ty == BT_T_NONE) {
			fail(ps, r->line, r->col, r->len, "%s() returns no value", r->s ? r->s : "");
			return;
		}
		if (n->op != T_ASSIGN && r->ty != BT_T_INT) {
			fail(ps, n->line, n->col, n->len, "%s on a string", tok_text[n->op]);
			return;
		}
		if (l->k == BT_N_MAP) {
			check_map_keys(ck, l);
			set_map_kind(ck, l, r->ty == BT_T_INT ? BT_M_INT : BT_M_STR, r->ty, n);
			if (r->ty == BT_T_INT && !ps->failed) {
				struct bt_map *m = &ps->p->maps[l->id];

				if (r->k == BT_N_CAST)
					m->vbits = (unsigned)r->ival, m->vsign = r->sign;
				else if (!m->vbits)
					m->vbits = 64, m->vsign = expr_signed(ck, r);
			}
		} else {
			if (n->op != T_ASSIGN && !ck->vset[l->id]) {
				fail(ps, l->line, l->col, l->len, "Undefined or undeclared variable: %s",
				     l->s);
				return;
			}
			if (ck->vset[l->id] && ck->vty[l->id] != r->ty) {
				fail(ps, n->line, n->col, n->len, "Type mismatch for %s: trying to "
				     "assign value of another type", l->s);
				return;
			}
			ck->vset[l->id] = true;
			ck->vty[l->id] = r->ty;
			ck->vsign[l->id] = r->ty == BT_T_INT && expr_signed(ck, r);
		}
		return;
	}
	case BT_N_IF:
		n->ty = BT_T_NONE;
		check(ck, n->a);
		check(ck, n->b);
		check(ck, n->c);
		return;
	case BT_N_BLOCK:
		n->ty = BT_T_NONE;
		for (unsigned i = 0; i < n->n; i++) {
			check(ck, n->v[i]);
			if (n->v[i]->k == BT_N_CALL && is_agg(n->v[i]->op) && !ps->failed)
				fail(ps, n->v[i]->line, n->v[i]->col, n->v[i]->len, "%s() should "
				     "be directly assigned to a map", n->v[i]->s);
		}
		return;
	}
}

/* $N read as a number (not under str()) whose text is not one: bpftrace's error. */
static int pos_check(const struct bt_prog *p, const struct bt_node *n, bool in_str,
		     const char *const *pos, unsigned npos, char *err, size_t errlen)
{
	if (!n)
		return 0;
	if (n->k == BT_N_BUILTIN && n->ival == BT_B_POS && !in_str && n->id >= 1 &&
	    (unsigned)n->id <= npos) {
		const char *s = pos[n->id - 1];
		char *end;

		errno = 0;
		strtoll(s, &end, 0);
		if (*end)
			return bt_errf(p, n->line, n->col, n->len, err, errlen, "$%d used "
				       "numerically but given \"%s\". Try using str($%d).", n->id,
				       s, n->id);
	}
	in_str = n->k == BT_N_CALL && n->op == F_STR;
	if (pos_check(p, n->a, false, pos, npos, err, errlen) ||
	    pos_check(p, n->b, false, pos, npos, err, errlen) ||
	    pos_check(p, n->c, false, pos, npos, err, errlen))
		return -EINVAL;
	for (unsigned i = 0; i < n->n; i++)
		if (pos_check(p, n->v[i], in_str && i == 0, pos, npos, err, errlen))
			return -EINVAL;
	return 0;
}

int bt_check_pos(const struct bt_prog *p, const char *const *pos, unsigned npos, char *err,
		 size_t errlen)
{
	for (unsigned i = 0; i < p->nprobes; i++)
		if (pos_check(p, p->probes[i].pred, false, pos, npos, err, errlen) ||
		    pos_check(p, p->probes[i].body, false, pos, npos, err, errlen))
			return -EINVAL;
	return 0;
}

void bt_prog_free(struct bt_prog *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->nprobes; i++) {
		for (unsigned j = 0; j < p->probes[i].nap; j++) {
			free(p->probes[i].ap[j].text);
			free(p->probes[i].ap[j].target);
			free(p->probes[i].ap[j].func);
		}
		free(p->probes[i].ap);
		bt_pred_free(&p->probes[i]);
		node_free(p->probes[i].pred);
		node_free(p->probes[i].body);
	}
	free(p->probes);
	for (unsigned i = 0; i < p->nmaps; i++) {
		free(p->maps[i].name);
		bt_table_free(p->maps[i].t);
	}
	free(p->maps);
	for (unsigned i = 0; i < p->nvars; i++)
		free(p->vars[i]);
	free(p->vars);
	free(p);
}

int bt_parse(const char *src, const char *name, struct bt_prog **out, char *err, size_t errlen)
{
	struct parser ps = { .s = src, .line = 1, .col = 1, .err = err, .errlen = errlen,
			     .pred_depth = -1 };
	struct bt_prog *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->src = src;
	p->name = name;
	ps.p = p;
	skip_blank(&ps);
	while (!ps.failed && peekc(&ps, 0)) {
		struct bt_probe *pr = realloc(p->probes, (p->nprobes + 1) * sizeof(*pr));

		if (!pr) {
			ps.failed = -ENOMEM;
			break;
		}
		p->probes = pr;
		pr = &p->probes[p->nprobes++];
		memset(pr, 0, sizeof(*pr));
		for (;;) {
			struct bt_attach *a = realloc(pr->ap, (pr->nap + 1) * sizeof(*a));

			if (!a) {
				ps.failed = -ENOMEM;
				break;
			}
			pr->ap = a;
			a = &pr->ap[pr->nap++];
			memset(a, 0, sizeof(*a));
			a->text = attach_text(&ps, &a->line, &a->col, &a->len);
			if (!a->len) {
				next(&ps);
				unexpected(&ps);
				break;
			}
			if (!parse_attach(&ps, a))
				break;
			skip_blank(&ps);
			if (peekc(&ps, 0) != ',')
				break;
			adv(&ps, 1);
		}
		if (ps.failed)
			break;
		next(&ps);
		if (ps.t == T_SLASH) {
			ps.pred_depth = 0;
			next(&ps);
			pr->pred = expr(&ps);
			ps.pred_depth = -1;
			if (!ps.failed && ps.t != T_SLASH)
				unexpected(&ps);
			else if (!ps.failed)
				next(&ps);
		}
		if (ps.failed)
			break;
		if (ps.t != T_LB) {
			unexpected(&ps);
			break;
		}
		pr->body = block(&ps);
		/* the lexer read one token past '}': give its text back */
		if (!ps.failed && ps.t != T_EOF) {
			ps.pos -= (size_t)ps.tlen;
			ps.line = ps.tline;
			ps.col = ps.tcol;
		}
		free(ps.text);
		ps.text = NULL;
		skip_blank(&ps);
	}
	if (!ps.failed && !p->nprobes)
		fail(&ps, 1, 1, 1, "No probes to attach");
	if (!ps.failed) {
		struct checker ck = { .ps = &ps };

		ck.vty = calloc(p->nvars + 1, sizeof(*ck.vty));
		ck.vset = calloc(p->nvars + 1, sizeof(*ck.vset));
		ck.vsign = calloc(p->nvars + 1, sizeof(*ck.vsign));
		for (unsigned i = 0; i < p->nprobes && !ps.failed && ck.vty && ck.vset && ck.vsign;
		     i++) {
			ck.probe = &p->probes[i];
			memset(ck.vset, 0, (p->nvars + 1) * sizeof(*ck.vset));
			check(&ck, ck.probe->pred);
			check(&ck, ck.probe->body);
		}
		free(ck.vty);
		free(ck.vset);
		free(ck.vsign);
		for (unsigned i = 0; i < p->nmaps && !ps.failed; i++) {
			if (p->maps[i].kind == BT_M_NONE)
				fail(&ps, 1, 1, 1, "Undefined map: %s", p->maps[i].name);
			if (p->maps[i].nkeys == (unsigned)-1)
				p->maps[i].nkeys = 0;
			p->maps[i].t = bt_table_new();
			if (!p->maps[i].t && !ps.failed) {
				ps.failed = -ENOMEM;
				snprintf(err, errlen, "out of memory");
			}
		}
	}
	free(ps.text);
	if (ps.failed) {
		bt_prog_free(p);
		return ps.failed;
	}
	for (unsigned i = 0; i < p->nprobes; i++)
		if (bt_pred_compile(&p->probes[i])) {
			snprintf(err, errlen, "%s", strerror(ENOMEM));
			bt_prog_free(p);
			return -ENOMEM;
		}
	*out = p;
	return 0;
}
