// SPDX-License-Identifier: MIT
/*
 * Event filters: parse, resolve against a spec, evaluate.  The in-process agent
 * evaluates the same conditions (src/agent/blob/agent.c, holds()): the two must agree.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/filter.h"

static void fail(struct up_spec_err *err, int pos, int len, const char *msg)
{
	if (!err)
		return;
	err->pos = pos;
	err->len = len > 0 ? len : 1;
	snprintf(err->msg, sizeof(err->msg), "%s", msg);
}

int up_filter_parse(const char *text, struct up_filter *out, struct up_spec_err *err)
{
	const char *s = text;

	memset(out, 0, sizeof(*out));
	for (;;) {
		const char *start;
		size_t n;
		char *end;

		while (isspace((unsigned char)*s))
			s++;
		if (out->n == UP_FILTER_MAX) {
			fail(err, (int)(s - text), 1, "too many terms (at most 8)");
			return -EINVAL;
		}
		start = s;
		if (*s == '$') /* $duration */
			s++;
		while (isalnum((unsigned char)*s) || *s == '_')
			s++;
		n = (size_t)(s - start);
		if (!n || isdigit((unsigned char)*start)) {
			fail(err, (int)(start - text), 1, "expected an argument name");
			return -EINVAL;
		}
		if (n > UP_SPEC_ARG_NAME_MAX) {
			fail(err, (int)(start - text), (int)n, "argument name too long");
			return -EINVAL;
		}
		if ((n == 4 && !memcmp(start, "comm", 4)) ||
		    (n == 11 && !memcmp(start, "common_comm", 11))) {
			const char *q;

			if (out->has_comm) {
				fail(err, (int)(start - text), (int)n, "one comm term only");
				return -EINVAL;
			}
			out->comm_pos = (int)(start - text);
			while (isspace((unsigned char)*s))
				s++;
			if (!strncmp(s, "==", 2) || !strncmp(s, "!=", 2)) {
				out->comm_ne = *s == '!';
				s += 2;
			} else if (*s == '~') {
				s++;
			} else {
				fail(err, (int)(s - text), 1, "expected == != or ~ after comm");
				return -EINVAL;
			}
			while (isspace((unsigned char)*s))
				s++;
			q = (*s == '"' || *s == '\'') ? strchr(s + 1, *s) : NULL;
			if (!q) {
				fail(err, (int)(s - text), 1,
				     "expected a quoted string after comm's operator");
				return -EINVAL;
			}
			if ((size_t)(q - s - 1) > UP_FILTER_COMM_MAX) {
				fail(err, (int)(s - text), (int)(q - s + 1),
				     "the string is too long");
				return -EINVAL;
			}
			memcpy(out->comm, s + 1, (size_t)(q - s - 1));
			out->comm[q - s - 1] = '\0';
			out->has_comm = true;
			s = q + 1;
			goto next;
		}
		memcpy(out->term[out->n].name, start, n);
		out->term[out->n].pos = (int)(start - text);
		while (isspace((unsigned char)*s))
			s++;
		if (!strncmp(s, "==", 2))
			out->term[out->n].op = UPROBE_EQ, s += 2;
		else if (!strncmp(s, "!=", 2))
			out->term[out->n].op = UPROBE_NE, s += 2;
		else if (!strncmp(s, "<=", 2))
			out->term[out->n].op = UPROBE_LE, s += 2;
		else if (!strncmp(s, ">=", 2))
			out->term[out->n].op = UPROBE_GE, s += 2;
		else if (*s == '<')
			out->term[out->n].op = UPROBE_LT, s++;
		else if (*s == '>')
			out->term[out->n].op = UPROBE_GT, s++;
		else if (*s == '&' && s[1] != '&')
			out->term[out->n].op = UPROBE_AND, s++;
		else {
			fail(err, (int)(s - text), 1, "expected one of == != < <= > >= &");
			return -EINVAL;
		}
		while (isspace((unsigned char)*s))
			s++;
		errno = 0;
		if (*s == '-')
			out->term[out->n].value = strtoll(s, &end, 0);
		else
			out->term[out->n].value = (int64_t)strtoull(s, &end, 0);
		if (end == s || errno) {
			fail(err, (int)(s - text), 1, "expected a number");
			return -EINVAL;
		}
		s = end;
		out->n++;
next:
		while (isspace((unsigned char)*s))
			s++;
		if (!*s)
			return 0;
		if (strncmp(s, "&&", 2)) {
			fail(err, (int)(s - text), 1, "expected && or the end of the filter");
			return -EINVAL;
		}
		s += 2;
	}
}

int up_filter_resolve(const struct up_filter *f, const struct up_spec *spec,
		      struct uprobe_cond *conds, char *msg, size_t msglen)
{
	for (unsigned i = 0; i < f->n; i++) {
		int k;

		conds[i].op = f->term[i].op;
		conds[i].value = f->term[i].value;
		if (!strcmp(f->term[i].name, "$duration")) {
			if (!spec->is_return) {
				snprintf(msg, msglen, "the filter's $duration is a return probe's "
						      "(an r: event)");
				return -ENOENT;
			}
			conds[i].fetch = UPROBE_COND_DURATION;
			continue;
		}
		for (k = 0; k < spec->nargs; k++)
			if (!strcmp(spec->args[k].name, f->term[i].name))
				break;
		if (k == spec->nargs) {
			snprintf(msg, msglen, "the filter's '%s' is not an argument of %s/%s",
				 f->term[i].name, spec->group, spec->event);
			return -ENOENT;
		}
		if (spec->args[k].type.kind == UP_TYPE_STRING ||
		    spec->args[k].type.kind == UP_TYPE_STACK) {
			snprintf(msg, msglen, "the filter's '%s' is a %s: filters compare numbers",
				 f->term[i].name,
				 spec->args[k].type.kind == UP_TYPE_STRING ? "string" : "stack");
			return -ENOENT;
		}
		conds[i].fetch = (unsigned)k;
		conds[i].op = f->term[i].op;
		conds[i].value = f->term[i].value;
	}
	return 0;
}

bool up_filter_holds(const struct uprobe_cond *conds, unsigned n,
		     const struct up_fetch_value *vals, uint64_t duration)
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
		case UPROBE_EQ: ok = u == k; break;
		case UPROBE_NE: ok = u != k; break;
		case UPROBE_LT: ok = sgn ? s < (int64_t)k : u < k; break;
		case UPROBE_LE: ok = sgn ? s <= (int64_t)k : u <= k; break;
		case UPROBE_GT: ok = sgn ? s > (int64_t)k : u > k; break;
		case UPROBE_GE: ok = sgn ? s >= (int64_t)k : u >= k; break;
		case UPROBE_AND: ok = (u & k) != 0; break;
		default: ok = false; break;
		}
		if (!ok)
			return false;
	}
	return true;
}

bool up_filter_comm_holds(const struct up_filter *f, const char *name)
{
	if (!f->has_comm)
		return true;
	return (fnmatch(f->comm, name ? name : "", 0) == 0) != f->comm_ne;
}
