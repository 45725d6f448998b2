// SPDX-License-Identifier: MIT
/*
 * Event filters: parse, resolve against a spec, evaluate.  The in-process agent
 * evaluates the conjunctions among them (src/agent/blob/agent.c, holds(); here
 * up_filter_holds): the two must agree.
 *
 * The grammar, as the kernel's (kernel/trace/trace_events_filter.c):
 *   expr := and ( "||" and )*        and := unary ( "&&" unary )*
 *   unary := "!" unary | "(" expr ")" | FIELD OP VALUE
 * VALUE is a number (C syntax, a leading -) or a string in "" or ''.  FIELD comm (or
 * COMM, or common_comm as uprobe took it before) is the thread's name.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/filter.h"

struct pstate {
	const char *text, *s;
	struct up_filter *f;
	struct up_spec_err *err;
	int depth;
};

static int fail(struct pstate *ps, const char *at, int len, const char *msg)
{
	if (ps->err) {
		ps->err->pos = (int)(at - ps->text);
		ps->err->len = len > 0 ? len : 1;
		snprintf(ps->err->msg, sizeof(ps->err->msg), "%s", msg);
	}
	return -EINVAL;
}

static void blank(struct pstate *ps)
{
	while (isspace((unsigned char)*ps->s))
		ps->s++;
}

static int new_node(struct pstate *ps, const char *at, int kind)
{
	struct up_filter_node *n;

	if (ps->f->n == UP_FILTER_NODES) {
		fail(ps, at, 1, "the filter is too long (at most 48 predicates and operators)");
		return -1;
	}
	n = &ps->f->node[ps->f->n];
	memset(n, 0, sizeof(*n));
	n->kind = (uint8_t)kind;
	n->pos = (int)(at - ps->text);
	n->l = n->r = -1;
	return (int)ps->f->n++;
}

/* A character that ends a bare word value */
static bool word_end(char c)
{
	return !c || isspace((unsigned char)c) || strchr("()&|!=<>~\"'", c);
}

static int parse_expr(struct pstate *ps);

static int parse_pred(struct pstate *ps)
{
	const char *start = ps->s, *v;
	struct up_filter_node *n;
	size_t len;
	int i;

	if (*ps->s == '$') /* $duration */
		ps->s++;
	while (isalnum((unsigned char)*ps->s) || *ps->s == '_')
		ps->s++;
	len = (size_t)(ps->s - start);
	if (!len || isdigit((unsigned char)*start))
		return fail(ps, start, 1, "expected a field name, ! or (");
	if (len > UP_SPEC_ARG_NAME_MAX)
		return fail(ps, start, (int)len, "field name too long");
	i = new_node(ps, start, UP_FILTER_PRED);
	if (i < 0)
		return -EINVAL;
	n = &ps->f->node[i];
	memcpy(n->name, start, len);
	blank(ps);
	v = ps->s;
	if (!strncmp(v, "==", 2))
		n->op = UPROBE_EQ, ps->s += 2;
	else if (!strncmp(v, "!=", 2))
		n->op = UPROBE_NE, ps->s += 2;
	else if (!strncmp(v, "<=", 2))
		n->op = UPROBE_LE, ps->s += 2;
	else if (!strncmp(v, ">=", 2))
		n->op = UPROBE_GE, ps->s += 2;
	else if (*v == '<')
		n->op = UPROBE_LT, ps->s++;
	else if (*v == '>')
		n->op = UPROBE_GT, ps->s++;
	else if (*v == '~')
		n->op = UP_FILTER_GLOB, ps->s++;
	else if (*v == '&' && v[1] != '&')
		n->op = UPROBE_AND, ps->s++;
	else
		return fail(ps, v, 1, "expected one of == != < <= > >= & ~");
	blank(ps);
	v = ps->s;
	n->vpos = (int)(v - ps->text);
	if (*v == '"' || *v == '\'') {
		const char *q = strchr(v + 1, *v);

		if (!q)
			return fail(ps, v, 1, "the string is not closed");
		if ((size_t)(q - v - 1) > UP_FILTER_STR_MAX)
			return fail(ps, v, (int)(q - v + 1), "the string is too long (at most 63)");
		memcpy(n->str, v + 1, (size_t)(q - v - 1));
		ps->s = q + 1;
		return i;
	}
	while (!word_end(*ps->s))
		ps->s++;
	len = (size_t)(ps->s - v);
	if (!len)
		return fail(ps, v, 1, "expected a number or a string");
	if (len > UP_FILTER_STR_MAX)
		return fail(ps, v, (int)len, "the value is too long (at most 63)");
	memcpy(n->str, v, len);
	{
		char *end;

		errno = 0;
		if (*v == '-')
			n->value = strtoll(n->str, &end, 0);
		else
			n->value = (int64_t)strtoull(n->str, &end, 0);
		n->is_num = end != n->str && !*end && !errno;
		if (!n->is_num)
			/* the kernel's words: strings are quoted */
			return fail(ps, v, (int)len,
				    isdigit((unsigned char)*v) || *v == '-' ?
					    "expected a number" :
					    "invalid value (did you forget quotes?)");
	}
	return i;
}

static int parse_unary(struct pstate *ps)
{
	const char *at;
	int i, c;

	blank(ps);
	at = ps->s;
	if (++ps->depth > UP_FILTER_DEPTH)
		return fail(ps, at, 1, "nested too deep (at most 16)");
	if (*at == '!' && at[1] != '=') {
		ps->s++;
		c = parse_unary(ps);
		if (c < 0)
			return -EINVAL;
		i = new_node(ps, at, UP_FILTER_NOT);
		if (i < 0)
			return -EINVAL;
		ps->f->node[i].l = (int16_t)c;
	} else if (*at == '(') {
		ps->s++;
		i = parse_expr(ps);
		if (i < 0)
			return -EINVAL;
		blank(ps);
		if (*ps->s != ')')
			return fail(ps, ps->s, 1, "expected ) to close the ( here");
		ps->s++;
	} else {
		i = parse_pred(ps);
	}
	ps->depth--;
	return i;
}

static int parse_binary(struct pstate *ps, bool is_or)
{
	int l = is_or ? parse_binary(ps, false) : parse_unary(ps);

	for (;;) {
		const char *at;
		int r, i;

		if (l < 0)
			return -EINVAL;
		blank(ps);
		at = ps->s;
		if (strncmp(at, is_or ? "||" : "&&", 2))
			return l;
		ps->s += 2;
		r = is_or ? parse_binary(ps, false) : parse_unary(ps);
		if (r < 0)
			return -EINVAL;
		i = new_node(ps, at, is_or ? UP_FILTER_OR : UP_FILTER_AND);
		if (i < 0)
			return -EINVAL;
		ps->f->node[i].l = (int16_t)l;
		ps->f->node[i].r = (int16_t)r;
		l = i;
	}
}

static int parse_expr(struct pstate *ps)
{
	return parse_binary(ps, true);
}

int up_filter_parse(const char *text, struct up_filter *out, struct up_spec_err *err)
{
	struct pstate ps = { .text = text, .s = text, .f = out, .err = err };
	int root;

	memset(out, 0, sizeof(*out));
	root = parse_expr(&ps);
	if (root >= 0) {
		blank(&ps);
		if (!*ps.s) {
			out->root = root;
			return 0;
		}
		fail(&ps, ps.s, 1, "expected && || ) or the end of the filter");
	}
	memset(out, 0, sizeof(*out));
	return -EINVAL;
}

int up_filter_resolve(struct up_filter *f, const struct up_spec *spec, char *msg, size_t msglen)
{
	for (unsigned i = 0; i < f->n; i++) {
		struct up_filter_node *n = &f->node[i];
		bool str_field = false;
		int k;

		if (n->kind != UP_FILTER_PRED)
			continue;
		for (k = 0; k < spec->nargs; k++)
			if (!strcmp(spec->args[k].name, n->name))
				break;
		if (k < spec->nargs) {
			if (spec->args[k].type.kind == UP_TYPE_STACK) {
				snprintf(msg, msglen,
					 "the filter's '%s' is a stack: filters compare "
					 "numbers and strings",
					 n->name);
				return -ENOENT;
			}
			n->fetch = (uint32_t)k;
			str_field = spec->args[k].type.kind == UP_TYPE_STRING;
		} else if (!strcmp(n->name, "$duration")) {
			if (!spec->is_return) {
				snprintf(msg, msglen,
					 "the filter's $duration is a return probe's "
					 "(an r: event)");
				return -ENOENT;
			}
			n->fetch = UPROBE_COND_DURATION;
		} else if (!strcmp(n->name, "comm") || !strcmp(n->name, "COMM") ||
			   !strcmp(n->name, "common_comm")) {
			n->fetch = UP_FILTER_COMM;
			str_field = true;
		} else {
			snprintf(msg, msglen, "the filter's '%s' is not an argument of %s/%s",
				 n->name, spec->group, spec->event);
			return -ENOENT;
		}
		n->is_str = str_field;
		if (str_field && n->op != UPROBE_EQ && n->op != UPROBE_NE &&
		    n->op != UP_FILTER_GLOB) {
			snprintf(msg, msglen,
				 "the filter's '%s' is a string: it takes == != ~ only", n->name);
			return -ENOENT;
		}
		if (!str_field && n->op == UP_FILTER_GLOB) {
			snprintf(msg, msglen, "the filter's '%s' is a number: ~ is for strings",
				 n->name);
			return -ENOENT;
		}
		if (!str_field && !n->is_num) {
			snprintf(msg, msglen, "the filter's '%s' is a number: '%s' is not one",
				 n->name, n->str);
			return -ENOENT;
		}
	}
	return 0;
}

/* The conjunction under node i into conds; false when it is not one the agent takes. */
static bool and_conds(const struct up_filter *f, int i, struct uprobe_cond *conds, unsigned max,
		      unsigned *n)
{
	const struct up_filter_node *nd = &f->node[i];

	if (nd->kind == UP_FILTER_AND)
		return and_conds(f, nd->l, conds, max, n) && and_conds(f, nd->r, conds, max, n);
	if (nd->kind != UP_FILTER_PRED || nd->is_str || nd->op == UP_FILTER_GLOB ||
	    nd->fetch == UP_FILTER_COMM || *n == max)
		return false;
	conds[*n].fetch = nd->fetch;
	conds[*n].op = (enum uprobe_cmp)nd->op;
	conds[*n].value = nd->value;
	(*n)++;
	return true;
}

int up_filter_conds(const struct up_filter *f, struct uprobe_cond *conds, unsigned max)
{
	unsigned n = 0;

	if (!f->n)
		return 0;
	return and_conds(f, f->root, conds, max, &n) ? (int)n : -1;
}

bool up_filter_uses(const struct up_filter *f, uint32_t fetch)
{
	for (unsigned i = 0; i < f->n; i++)
		if (f->node[i].kind == UP_FILTER_PRED && f->node[i].fetch == fetch)
			return true;
	return false;
}

/* A comparison (or TRUTH) of a and, where the node names one, b (else its value). */
static bool pred_holds(const struct up_filter_node *n, const struct up_pred_val *a,
		       const struct up_pred_val *b)
{
	uint64_t x, y;
	bool sg;

	if (a->err || (b && b->err))
		return false;
	if (n->op == UP_FILTER_TRUTH)
		return a->is_str ? a->s && a->len && a->s[0] : a->u != 0;
	if (a->is_str || (b ? b->is_str : !n->is_num)) {
		const char *as = a->is_str && a->s ? a->s : "", *bs;
		size_t al = a->is_str && a->s ? a->len : 0, bl;
		bool eq;

		if (b) {
			bs = b->is_str && b->s ? b->s : "";
			bl = b->is_str && b->s ? b->len : 0;
		} else {
			bs = n->str;
			bl = strlen(n->str);
		}
		if (n->op == UP_FILTER_GLOB)
			/* the kernel's glob_match: * ? [...] with ranges and [!...], no escapes */
			return fnmatch(bs, as, FNM_NOESCAPE) == 0;
		eq = al == bl && !memcmp(as, bs, al);
		return n->op == UPROBE_EQ ? eq : n->op == UPROBE_NE ? !eq : false;
	}
	x = a->u;
	y = b ? b->u : (uint64_t)n->value;
	sg = a->is_signed || (b ? b->is_signed : n->const_signed);
	switch (n->op) {
	case UPROBE_EQ:
		return x == y;
	case UPROBE_NE:
		return x != y;
	case UPROBE_LT:
		return sg ? (int64_t)x < (int64_t)y : x < y;
	case UPROBE_LE:
		return sg ? (int64_t)x <= (int64_t)y : x <= y;
	case UPROBE_GT:
		return sg ? (int64_t)x > (int64_t)y : x > y;
	case UPROBE_GE:
		return sg ? (int64_t)x >= (int64_t)y : x >= y;
	case UPROBE_AND:
		return (x & y) != 0;
	}
	return false;
}

static bool eval(const struct up_filter *f, int i, up_pred_field_fn fn, void *ctx)
{
	const struct up_filter_node *n = &f->node[i];
	struct up_pred_val a, b;

	switch (n->kind) {
	case UP_FILTER_AND:
		return eval(f, n->l, fn, ctx) && eval(f, n->r, fn, ctx);
	case UP_FILTER_OR:
		return eval(f, n->l, fn, ctx) || eval(f, n->r, fn, ctx);
	case UP_FILTER_NOT:
		return !eval(f, n->l, fn, ctx);
	default:
		break;
	}
	memset(&a, 0, sizeof(a));
	fn(ctx, n->fetch, &a);
	if (!n->rfield)
		return pred_holds(n, &a, NULL);
	memset(&b, 0, sizeof(b));
	fn(ctx, n->rfetch, &b);
	return pred_holds(n, &a, &b);
}

bool up_filter_eval_fn(const struct up_filter *f, up_pred_field_fn fn, void *ctx)
{
	return !f->n || eval(f, f->root, fn, ctx);
}

/* The event's fields: its fetched values, the return's duration, the thread's name. */
struct event_fields {
	const struct up_fetch_value *vals;
	uint64_t duration;
	const char *comm;
};

static void event_field(void *ctx, uint32_t field, struct up_pred_val *out)
{
	const struct event_fields *ef = ctx;
	const struct up_fetch_value *v;
	unsigned size;

	if (field == UP_FILTER_COMM) {
		out->is_str = true;
		out->s = ef->comm ? ef->comm : "";
		out->len = strlen(out->s);
		return;
	}
	if (field == UPROBE_COND_DURATION) {
		out->u = ef->duration;
		return;
	}
	v = &ef->vals[field];
	if (v->err) {
		out->err = true;
		return;
	}
	if (v->type.kind == UP_TYPE_STRING) {
		out->is_str = true;
		out->err = !v->str;
		out->s = v->str;
		out->len = v->str ? strnlen(v->str, v->str_len) : 0;
		return;
	}
	out->u = v->u;
	out->is_signed = v->type.kind == UP_TYPE_S;
	size = v->type.size ? v->type.size : 8;
	if (out->is_signed && size < 8 && (out->u >> (size * 8 - 1) & 1))
		out->u |= ~0ull << (size * 8);
}

bool up_filter_eval(const struct up_filter *f, const struct up_fetch_value *vals, uint64_t duration,
		    const char *comm)
{
	struct event_fields ef = { vals, duration, comm };

	return up_filter_eval_fn(f, event_field, &ef);
}

bool up_filter_holds(const struct uprobe_cond *conds, unsigned n, const struct up_fetch_value *vals,
		     uint64_t duration)
{
	for (unsigned i = 0; i < n; i++) {
		static const struct up_fetch_value dur_type = { .type = { UP_TYPE_U, 8 } };
		const struct up_fetch_value *v =
			conds[i].fetch == UPROBE_COND_DURATION ? &dur_type : &vals[conds[i].fetch];
		uint64_t u = conds[i].fetch == UPROBE_COND_DURATION ? duration : v->u;
		uint64_t k = (uint64_t)conds[i].value;
		bool sgn = v->type.kind == UP_TYPE_S;
		unsigned size = v->type.size ? v->type.size : 8;
		int64_t s;
		bool ok;

		if (v->err || v->type.kind == UP_TYPE_STRING)
			return false;
		if (sgn && size < 8 && (u >> (size * 8 - 1) & 1))
			u |= ~0ull << (size * 8);
		s = (int64_t)u;
		switch (conds[i].op) {
		case UPROBE_EQ:
			ok = u == k;
			break;
		case UPROBE_NE:
			ok = u != k;
			break;
		case UPROBE_LT:
			ok = sgn ? s < (int64_t)k : u < k;
			break;
		case UPROBE_LE:
			ok = sgn ? s <= (int64_t)k : u <= k;
			break;
		case UPROBE_GT:
			ok = sgn ? s > (int64_t)k : u > k;
			break;
		case UPROBE_GE:
			ok = sgn ? s >= (int64_t)k : u >= k;
			break;
		case UPROBE_AND:
			ok = (u & k) != 0;
			break;
		default:
			ok = false;
			break;
		}
		if (!ok)
			return false;
	}
	return true;
}
