// SPDX-License-Identifier: MIT
/*
 * Output formatting for the tracer: the seed's D/S/A lines, the kernel's uprobe event
 * lines and JSON lines (the schema is in format.h).  Pure text work into caller
 * buffers; the only memory it reads is through the up_fetch_env it is handed.
 */
#include "trace/format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEED_HEX_COLS (UP_FMT_SEED_BYTES_PER_LINE * 3 + 1) /* HEXBUFSIZE */

static void put_time(struct up_spec_buf *b, uint64_t ns)
{
	up_spec_buf_printf(b, " %5" PRIu64 ".%06" PRIu64, ns / 1000000000u,
			   ns % 1000000000u / 1000u);
}

static void put_seed_prefix(struct up_spec_buf *b, const struct up_fmt_ctx *ctx)
{
	up_spec_buf_printf(b, "%16s-%-5d [%03d]", ctx->comm ? ctx->comm : "<...>", ctx->tid,
			   ctx->cpu);
	put_time(b, ctx->time_ns);
	up_spec_buf_put(b, ": : ", 4);
}

static void put_event_prefix(struct up_spec_buf *b, const struct up_fmt_ctx *ctx)
{
	up_spec_buf_printf(b, "%16s-%-7d [%03d]", ctx->comm ? ctx->comm : "<...>", ctx->tid,
			   ctx->cpu);
	put_time(b, ctx->time_ns);
	up_spec_buf_put(b, ": ", 2);
}

int up_fmt_seed_header(char *buf, size_t size)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	up_spec_buf_printf(&b, "# tracer: nop\n"
			       "#\n"
			       "#           TASK-PID    CPU#    TIMESTAMP  FUNCTION\n"
			       "#              | |       |          |         |\n");
	return up_spec_buf_result(&b);
}

int up_fmt_event_header(char *buf, size_t size)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	up_spec_buf_printf(&b, "# tracer: nop\n"
			       "#\n"
			       "#           TASK-PID     CPU#     TIMESTAMP  FUNCTION\n"
			       "#              | |         |         |         |\n");
	return up_spec_buf_result(&b);
}

int up_fmt_seed_prefix(char *buf, size_t size, const struct up_fmt_ctx *ctx)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	if (!ctx)
		return -EINVAL;
	put_seed_prefix(&b, ctx);
	return up_spec_buf_result(&b);
}

int up_fmt_event_prefix(char *buf, size_t size, const struct up_fmt_ctx *ctx)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	if (!ctx)
		return -EINVAL;
	put_event_prefix(&b, ctx);
	return up_spec_buf_result(&b);
}

int up_fmt_seed_dump(char *buf, size_t size, const struct up_fmt_ctx *ctx, uint64_t addr,
		     char type, uint64_t daddr, const uint8_t *data, size_t len)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	if (!ctx || (type != 'D' && type != 'S'))
		return -EINVAL;
	if (!data) {
		put_seed_prefix(&b, ctx);
		up_spec_buf_printf(&b, "0x%" PRIx64 ": %c 0x%" PRIx64
				       ": Data capture failed. Invalid address\n",
				   addr, type, daddr);
		return up_spec_buf_result(&b);
	}
	for (size_t pos = 0; pos < len; pos += UP_FMT_SEED_BYTES_PER_LINE) {
		size_t n = len - pos < UP_FMT_SEED_BYTES_PER_LINE ? len - pos
								 : UP_FMT_SEED_BYTES_PER_LINE;
		char hex[SEED_HEX_COLS + 1];
		char asc[UP_FMT_SEED_BYTES_PER_LINE];

		memset(hex, ' ', SEED_HEX_COLS);
		hex[SEED_HEX_COLS] = '\0';
		for (size_t i = 0; i < n; i++) {
			static const char digits[] = "0123456789abcdef";
			uint8_t c = data[pos + i];

			hex[i * 3] = digits[c >> 4];
			hex[i * 3 + 1] = digits[c & 15];
			asc[i] = c >= ' ' && c <= '~' ? (char)c : '.';
		}
		put_seed_prefix(&b, ctx);
		up_spec_buf_printf(&b, "0x%" PRIx64 ": %c 0x%" PRIx64 ": %s", addr, type,
				   daddr + pos, hex);
		up_spec_buf_put(&b, asc, n);
		up_spec_buf_putc(&b, '\n');
	}
	return up_spec_buf_result(&b);
}

int up_fmt_seed_args(char *buf, size_t size, const struct up_fmt_ctx *ctx, uint64_t addr,
		     const uint64_t *args, unsigned int n)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	if (!ctx || (n && !args))
		return -EINVAL;
	for (unsigned int i = 0; i < n; i++) {
		put_seed_prefix(&b, ctx);
		up_spec_buf_printf(&b, "0x%" PRIx64 ": A ARG %u: %016" PRIx64 "\n", addr, i + 1,
				   args[i]);
	}
	return up_spec_buf_result(&b);
}

/* What a seed hit reads: data (malloc'ed, NULL on a failed read) or the arguments. */
struct seed_capture {
	uint64_t daddr;
	uint8_t *data;
	int read_err;
	uint64_t args[UP_SPEC_SEED_NARGS_MAX];
	unsigned int nargs;
};

static int seed_capture(const struct up_spec *spec, const struct up_fetch_env *env,
			struct seed_capture *c)
{
	memset(c, 0, sizeof(*c));
	if (!spec || spec->kind != UP_SPEC_SEED || !env || !env->regs)
		return -EINVAL;
	if (spec->seed_type == UP_SEED_ARGS) {
		if (spec->size > UP_SPEC_SEED_NARGS_MAX)
			return -EINVAL;
		for (unsigned int i = 0; i < spec->size; i++) {
			int ret = up_fetch_abi_arg(env, i + 1, &c->args[i]);

			if (ret == -EINVAL)
				return ret;
			if (ret) /* an i386 argument on an unreadable stack */
				c->args[i] = 0;
		}
		c->nargs = (unsigned int)spec->size;
		return 0;
	}
	if (!env->read || spec->size > UP_SPEC_SEED_SIZE_MAX)
		return -EINVAL;
	c->daddr = spec->seed_type == UP_SEED_STACK
			   ? (env->is32 ? env->regs->rsp & 0xffffffffu : env->regs->rsp)
			   : spec->daddr;
	c->data = malloc(spec->size ? spec->size : 1);
	if (!c->data)
		return -ENOMEM;
	c->read_err = env->read(env->ctx, c->daddr, c->data, spec->size);
	if (c->read_err) {
		free(c->data);
		c->data = NULL;
	}
	return 0;
}

int up_fmt_seed_hit(char *buf, size_t size, const struct up_fmt_ctx *ctx,
		    const struct up_spec *spec, const struct up_fetch_env *env)
{
	struct seed_capture c;
	int ret;

	if (size)
		buf[0] = '\0';
	if (!ctx)
		return -EINVAL;
	ret = seed_capture(spec, env, &c);
	if (ret)
		return ret;
	if (spec->seed_type == UP_SEED_ARGS)
		return up_fmt_seed_args(buf, size, ctx, spec->addr, c.args, c.nargs);
	ret = up_fmt_seed_dump(buf, size, ctx, spec->addr, (char)spec->seed_type, c.daddr,
			       c.data, spec->size);
	free(c.data);
	return ret;
}

/* ---- JSON -------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s[0..n), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned char lo = 0x80, hi = 0xbf;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

static void put_json_string(struct up_spec_buf *b, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;

	up_spec_buf_putc(b, '"');
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t l;

		switch (c) {
		case '"': up_spec_buf_put(b, "\\\"", 2); i++; continue;
		case '\\': up_spec_buf_put(b, "\\\\", 2); i++; continue;
		case '\n': up_spec_buf_put(b, "\\n", 2); i++; continue;
		case '\r': up_spec_buf_put(b, "\\r", 2); i++; continue;
		case '\t': up_spec_buf_put(b, "\\t", 2); i++; continue;
		case '\b': up_spec_buf_put(b, "\\b", 2); i++; continue;
		case '\f': up_spec_buf_put(b, "\\f", 2); i++; continue;
		default: break;
		}
		if (c < 0x20) {
			up_spec_buf_printf(b, "\\u%04x", c);
			i++;
			continue;
		}
		l = utf8_len(s + i, n - i);
		if (!l) {
			up_spec_buf_printf(b, "\\u%04x", c);
			i++;
			continue;
		}
		up_spec_buf_put(b, str + i, l);
		i += l;
	}
	up_spec_buf_putc(b, '"');
}

int up_fmt_json_string(char *buf, size_t size, const char *s, size_t n)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	if (!s && n)
		return -EINVAL;
	put_json_string(&b, s ? s : "", n);
	return up_spec_buf_result(&b);
}

static void put_json_head(struct up_spec_buf *b, const struct up_fmt_ctx *ctx)
{
	const char *comm = ctx->comm ? ctx->comm : "";

	up_spec_buf_printf(b, "{\"time_ns\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"cpu\":%d,\"comm\":",
			   ctx->time_ns, ctx->pid, ctx->tid, ctx->cpu);
	put_json_string(b, comm, strlen(comm));
}

/* A stack's frames, one a line as the kernel's stacktrace trigger prints them:
   " => NAME", the names the tracer gave them, else the addresses. */
static void put_stack_lines(struct up_spec_buf *b, const struct up_fetch_value *v)
{
	struct up_fetch_frames it = { 0 };
	const char *f;
	size_t n;

	while ((f = up_fetch_next_frame(v, &it, &n))) {
		up_spec_buf_put(b, " => ", 4);
		up_spec_buf_put(b, f, n);
		up_spec_buf_putc(b, '\n');
	}
}

/* A stack in JSON: an array of its frames' names, or of their addresses. */
static void put_json_stack(struct up_spec_buf *b, const struct up_fetch_value *v)
{
	struct up_fetch_frames it = { 0 };
	const char *f;
	size_t n;

	up_spec_buf_putc(b, '[');
	for (bool first = true; (f = up_fetch_next_frame(v, &it, &n)); first = false) {
		if (!first)
			up_spec_buf_putc(b, ',');
		put_json_string(b, f, n);
	}
	up_spec_buf_putc(b, ']');
}

static void put_json_value(struct up_spec_buf *b, const struct up_fetch_value *v)
{
	if (v->err) {
		up_spec_buf_put(b, "null", 4);
		return;
	}
	switch (v->type.kind) {
	case UP_TYPE_STRING:
		put_json_string(b, v->str ? v->str : "", v->str ? v->str_len : 0);
		return;
	case UP_TYPE_X:
		up_spec_buf_printf(b, "\"0x%" PRIx64 "\"", v->u);
		return;
	case UP_TYPE_STACK:
		put_json_stack(b, v);
		return;
	case UP_TYPE_U:
	case UP_TYPE_S: {
		char num[32];

		up_fetch_format(v, num, sizeof(num));
		up_spec_buf_printf(b, "%s", num);
		return;
	}
	}
}

int up_fmt_seed_hit_json(char *buf, size_t size, const struct up_fmt_ctx *ctx,
			 const struct up_spec *spec, const struct up_fetch_env *env)
{
	struct up_spec_buf b = { buf, size, 0 };
	struct seed_capture c;
	int ret;

	if (size)
		buf[0] = '\0';
	if (!ctx)
		return -EINVAL;
	ret = seed_capture(spec, env, &c);
	if (ret)
		return ret;
	put_json_head(&b, ctx);
	up_spec_buf_printf(&b, ",\"event\":\"up/%c\",\"addr\":\"0x%" PRIx64 "\",\"type\":\"%c\"",
			   (char)spec->seed_type, spec->addr, (char)spec->seed_type);
	if (spec->seed_type == UP_SEED_ARGS) {
		up_spec_buf_put(&b, ",\"args\":[", 9);
		for (unsigned int i = 0; i < c.nargs; i++)
			up_spec_buf_printf(&b, "%s\"0x%016" PRIx64 "\"", i ? "," : "", c.args[i]);
		up_spec_buf_put(&b, "]}\n", 3);
		return up_spec_buf_result(&b);
	}
	up_spec_buf_printf(&b, ",\"data_addr\":\"0x%" PRIx64 "\",\"data\":", c.daddr);
	if (c.data) {
		up_spec_buf_putc(&b, '"');
		for (uint64_t i = 0; i < spec->size; i++)
			up_spec_buf_printf(&b, "%02x", c.data[i]);
		up_spec_buf_putc(&b, '"');
	} else {
		up_spec_buf_put(&b, "null", 4);
	}
	up_spec_buf_put(&b, "}\n", 2);
	free(c.data);
	return up_spec_buf_result(&b);
}

int up_fmt_event_text(char *buf, size_t size, const struct up_fmt_ctx *ctx,
		      const struct up_spec *spec, const struct up_fmt_event *ev)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	if (!ctx || !spec || !ev || spec->kind != UP_SPEC_EVENT || (spec->nargs && !ev->vals))
		return -EINVAL;
	put_event_prefix(&b, ctx);
	if (spec->is_return)
		up_spec_buf_printf(&b, "%s: (0x%" PRIx64 " <- 0x%" PRIx64 ")", spec->event,
				   ev->ret_addr, ev->addr);
	else
		up_spec_buf_printf(&b, "%s: (0x%" PRIx64 ")", spec->event, ev->addr);
	for (int i = 0; i < spec->nargs; i++) {
		const struct up_fetch_value *v = &ev->vals[i];
		char small[64];
		int n;

		if (v->type.kind == UP_TYPE_STACK)
			continue; /* under the line */
		up_spec_buf_printf(&b, " %s=", spec->args[i].name);
		n = up_fetch_format(v, small, sizeof(small));
		if (n < 0)
			return n;
		if ((size_t)n < sizeof(small)) {
			up_spec_buf_put(&b, small, (size_t)n);
		} else { /* a long string */
			up_spec_buf_putc(&b, '"');
			up_spec_buf_put(&b, v->str, v->str_len);
			up_spec_buf_putc(&b, '"');
		}
	}
	up_spec_buf_putc(&b, '\n');
	for (int i = 0; i < spec->nargs; i++)
		if (ev->vals[i].type.kind == UP_TYPE_STACK)
			put_stack_lines(&b, &ev->vals[i]);
	return up_spec_buf_result(&b);
}

int up_fmt_event_json(char *buf, size_t size, const struct up_fmt_ctx *ctx,
		      const struct up_spec *spec, const struct up_fmt_event *ev)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	if (!ctx || !spec || !ev || spec->kind != UP_SPEC_EVENT || (spec->nargs && !ev->vals))
		return -EINVAL;
	put_json_head(&b, ctx);
	up_spec_buf_put(&b, ",\"event\":", 9);
	{
		char name[2 * UP_SPEC_NAME_MAX + 2];
		int n = snprintf(name, sizeof(name), "%s/%s", spec->group, spec->event);

		put_json_string(&b, name, (size_t)n);
	}
	up_spec_buf_printf(&b, ",\"addr\":\"0x%" PRIx64 "\"", ev->addr);
	if (spec->is_return)
		up_spec_buf_printf(&b, ",\"ret_addr\":\"0x%" PRIx64 "\"", ev->ret_addr);
	up_spec_buf_put(&b, ",\"args\":{", 9);
	for (int i = 0; i < spec->nargs; i++) {
		if (i)
			up_spec_buf_putc(&b, ',');
		put_json_string(&b, spec->args[i].name, strlen(spec->args[i].name));
		up_spec_buf_putc(&b, ':');
		put_json_value(&b, &ev->vals[i]);
	}
	up_spec_buf_put(&b, "}}\n", 3);
	return up_spec_buf_result(&b);
}

int up_fmt_count_row(char *buf, size_t size, const char *where, const char *label,
		     uint64_t hits)
{
	return snprintf(buf, size, "  %-40s %-40s %15" PRIu64 "\n", where, label, hits);
}

int up_fmt_count_json(char *buf, size_t size, const char *where, const char *label, uint64_t hits)
{
	struct up_spec_buf b = { buf, size, 0 };

	if (size)
		buf[0] = '\0';
	up_spec_buf_printf(&b, "{\"type\":\"count\",\"where\":");
	put_json_string(&b, where, strlen(where));
	up_spec_buf_printf(&b, ",\"event\":");
	put_json_string(&b, label, strlen(label));
	up_spec_buf_printf(&b, ",\"hits\":%" PRIu64 "}\n", hits);
	return up_spec_buf_result(&b);
}
