// SPDX-License-Identifier: MIT
/*
 * Fetch-argument evaluation over an abstract register set and memory reader: the
 * kernel's process_fetch_insn() for uprobes, in user space.  It owns the meaning of
 * each FETCH form and of each TYPE; it must never call ptrace, print or exit.
 */
#include "trace/fetch.h"
#include "trace/stack.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static uint64_t mask_bytes(uint64_t v, unsigned int size)
{
	return size >= 8 ? v : v & ((UINT64_C(1) << (size * 8)) - 1);
}

static unsigned int word_size(const struct up_fetch_env *env)
{
	return env->is32 ? 4 : 8;
}

static uint64_t addr_wrap(const struct up_fetch_env *env, uint64_t a)
{
	return env->is32 ? a & 0xffffffffu : a;
}

static uint64_t reg_value(const struct up_fetch_env *env, const struct up_reg *r)
{
	uint64_t v;

	memcpy(&v, (const char *)env->regs + r->offset, sizeof(v));
	v >>= r->shift;
	v = mask_bytes(v, r->size);
	return env->is32 ? v & 0xffffffffu : v;
}

/* Little-endian read of size (1..8) bytes into a zero-extended number. */
static int read_uint(const struct up_fetch_env *env, uint64_t addr, unsigned int size,
		     uint64_t *out)
{
	uint8_t b[8] = { 0 };
	uint64_t v = 0;
	int ret;

	ret = env->read(env->ctx, addr, b, size);
	if (ret)
		return ret < 0 ? ret : -EFAULT;
	for (unsigned int i = size; i-- > 0;)
		v = (v << 8) | b[i];
	*out = v;
	return 0;
}

int up_fetch_abi_arg(const struct up_fetch_env *env, unsigned int n, uint64_t *val)
{
	const struct user_regs_struct *r;

	if (!env || !env->regs || !val || n == 0)
		return -EINVAL;
	r = env->regs;
	if (env->has_retval) {
		/* a return: the entry's arguments, which the tracers put in the frame words
		   from fs_base on (UPROBE_ENTRY_ARG_WORD) */
		const uint64_t *w = (const uint64_t *)r;

		if (n > 6)
			return -EINVAL;
		*val = w[offsetof(struct user_regs_struct, fs_base) / 8 + n - 1];
		return 0;
	}
	if (env->is32) {
		/* cdecl: [esp] is the return address, then the arguments */
		if (!env->read)
			return -EINVAL;
		return read_uint(env, (r->rsp + 4ull * n) & 0xffffffffu, 4, val);
	}
	switch (n) {
	case 1: *val = r->rdi; return 0;
	case 2: *val = r->rsi; return 0;
	case 3: *val = r->rdx; return 0;
	case 4: *val = r->rcx; return 0;
	case 5: *val = r->r8; return 0;
	case 6: *val = r->r9; return 0;
	default:
		if (!env->read)
			return -EINVAL;
		return read_uint(env, r->rsp + 8ull * (n - 6), 8, val);
	}
}

int up_fetch_arg_check(const struct up_fetch_arg *arg, bool is32)
{
	if (!arg)
		return -EINVAL;
	for (int i = 0; i < arg->nops; i++)
		if ((arg->ops[i].op == UP_FOP_REG && arg->ops[i].reg.only64 && is32) ||
		    (arg->ops[i].op == UP_FOP_USTACK && is32)) /* a walk of 8-byte frames */
			return -EINVAL;
	return 0;
}

/* strncpy_from_user() into dst, at most size - 1 bytes, page by page. */
static int read_string(const struct up_fetch_env *env, uint64_t addr, char *dst, size_t size,
		       struct up_fetch_value *out)
{
	size_t got = 0, max = size - 1;

	while (got < max) {
		uint64_t a = addr_wrap(env, addr + got);
		size_t chunk = 4096 - (size_t)(a & 4095);
		char *nul;
		int ret;

		if (chunk > max - got)
			chunk = max - got;
		ret = env->read(env->ctx, a, dst + got, chunk);
		if (ret) {
			/* a page may be readable only in part: go on byte by byte */
			for (size_t i = 0; i < chunk; i++) {
				if (env->read(env->ctx, addr_wrap(env, a + i), dst + got + i, 1)) {
					out->err = -EFAULT;
					out->fault_addr = addr_wrap(env, a + i);
					dst[0] = '\0';
					return 0;
				}
				if (!dst[got + i]) {
					out->str_len = got + i;
					return 0;
				}
			}
			got += chunk;
			continue;
		}
		nul = memchr(dst + got, '\0', chunk);
		if (nul) {
			out->str_len = (size_t)(nul - dst);
			return 0;
		}
		got += chunk;
	}
	dst[max] = '\0';
	out->str_len = max;
	out->truncated = true;
	return 0;
}

static void copy_string(const char *src, size_t n, char *dst, size_t size,
			struct up_fetch_value *out)
{
	if (n > size - 1) {
		n = size - 1;
		out->truncated = true;
	}
	memcpy(dst, src, n);
	dst[n] = '\0';
	out->str_len = n;
}

int up_fetch_eval(const struct up_fetch_arg *arg, const struct up_fetch_env *env,
		  struct up_fetch_value *out, char *strbuf, size_t strsize)
{
	const struct user_regs_struct *r;
	bool is_string;
	uint64_t val = 0;
	int ret;

	if (!arg || !env || !env->regs || !out || arg->nops < 1)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->type = arg->type;
	if (out->type.is_default && out->type.size == 8 && env->is32)
		out->type.size = 4;
	is_string = arg->type.kind == UP_TYPE_STRING;
	if (is_string) {
		if (!strbuf || !strsize)
			return -EINVAL;
		if (strsize > UP_FETCH_STRING_MAX)
			strsize = UP_FETCH_STRING_MAX;
		strbuf[0] = '\0';
		out->str = strbuf;
	}
	ret = up_fetch_arg_check(arg, env->is32);
	if (ret)
		return ret;
	r = env->regs;

	const struct up_fetch_insn *op = &arg->ops[0];

	switch (op->op) {
	case UP_FOP_REG:
		val = reg_value(env, &op->reg);
		break;
	case UP_FOP_STACK:
		if (!env->read)
			return -EINVAL;
		ret = read_uint(env, addr_wrap(env, r->rsp + (uint64_t)op->param * word_size(env)),
				word_size(env), &val);
		if (ret) {
			out->err = -EFAULT;
			out->fault_addr = addr_wrap(env, r->rsp + (uint64_t)op->param * word_size(env));
			return 0;
		}
		break;
	case UP_FOP_STACKP:
		val = addr_wrap(env, r->rsp);
		break;
	case UP_FOP_RETVAL:
		val = env->has_retval ? env->retval : r->rax;
		if (env->is32)
			val &= 0xffffffffu;
		break;
	case UP_FOP_COMM: {
		const char *c = env->comm ? env->comm : "";

		copy_string(c, strlen(c), strbuf, strsize, out);
		return 0;
	}
	case UP_FOP_DATA:
		copy_string(arg->comm + arg->data_pos, arg->data_len, strbuf, strsize, out);
		return 0;
	case UP_FOP_ARG:
		ret = up_fetch_abi_arg(env, op->param, &val);
		if (ret == -EINVAL)
			return ret;
		if (ret) {
			out->err = -EFAULT;
			out->fault_addr = addr_wrap(env, env->is32 ? r->rsp + 4ull * op->param
								   : r->rsp + 8ull * (op->param - 6));
			return 0;
		}
		if (env->is32)
			val &= 0xffffffffu;
		break;
	case UP_FOP_IMM:
		val = op->imm;
		break;
	case UP_FOP_FOFFS:
		val = addr_wrap(env, env->file_bias + op->imm);
		break;
	case UP_FOP_USTACK: {
		/* the frames go into strbuf, aligned: the caller's arena is bytes */
		uintptr_t at = ((uintptr_t)strbuf + 7) & ~(uintptr_t)7;
		size_t room = strbuf ? strsize - (size_t)(at - (uintptr_t)strbuf) : 0;
		unsigned max = op->param;

		if (!env->read || !strbuf || strsize < 8 || room > strsize)
			return -EINVAL;
		if (max > room / 8)
			max = (unsigned)(room / 8);
		out->frames = (const uint64_t *)at;
		out->nframes = up_stack_unwind(env->syms, r, r->rip, env->at_entry, env->read,
					       env->ctx, (uint64_t *)at, max);
		return 0;
	}
	case UP_FOP_DEREF:
		return -EINVAL; /* never first */
	}

	for (int i = 1; i < arg->nops; i++) {
		uint64_t addr = addr_wrap(env, val + (uint64_t)arg->ops[i].offset);
		bool last = i == arg->nops - 1;
		unsigned int size = last ? out->type.size : word_size(env);

		if (arg->ops[i].op != UP_FOP_DEREF)
			return -EINVAL;
		if (!env->read)
			return -EINVAL;
		if (last && is_string)
			return read_string(env, addr, strbuf, strsize, out);
		ret = read_uint(env, addr, size, &val);
		if (ret) {
			out->err = -EFAULT;
			out->fault_addr = addr;
			return 0;
		}
	}

	if (is_string) /* \IMM:string: the string at that address */
		return read_string(env, addr_wrap(env, val), strbuf, strsize, out);

	val = mask_bytes(val, out->type.size);
	if (out->type.is_bitfield) {
		val >>= out->type.bf_offset;
		val = mask_bytes(val, 8) & (out->type.bf_width >= 64
						    ? UINT64_MAX
						    : (UINT64_C(1) << out->type.bf_width) - 1);
	}
	out->u = val;
	return 0;
}

int up_fetch_eval_all(const struct up_spec *spec, const struct up_fetch_env *env,
		      struct up_fetch_value *vals, char *arena, size_t arena_size)
{
	size_t used = 0;

	if (!spec || !vals || spec->kind != UP_SPEC_EVENT)
		return -EINVAL;
	for (int i = 0; i < spec->nargs; i++) {
		const struct up_fetch_arg *a = &spec->args[i];
		size_t room = arena_size - used;
		int ret;

		if ((a->type.kind == UP_TYPE_STRING || a->type.kind == UP_TYPE_STACK) && room == 0)
			return -ENOBUFS;
		ret = up_fetch_eval(a, env, &vals[i], arena ? arena + used : NULL, room);
		if (ret)
			return ret;
		if (a->type.kind == UP_TYPE_STRING)
			used += vals[i].str_len + 1;
		else if (a->type.kind == UP_TYPE_STACK) /* alignment, then the frames */
			used = (size_t)((const char *)(vals[i].frames + vals[i].nframes) - arena);
	}
	return 0;
}

void up_fetch_name_stack(struct up_fetch_value *v, char *buf, size_t size,
			 int (*name)(void *ctx, unsigned i, uint64_t addr, char *buf, size_t size),
			 void *ctx)
{
	size_t len = 0;

	if (!size)
		return;
	buf[0] = '\0';
	for (unsigned i = 0; i < v->nframes && len + 1 < size; i++) {
		int n = name(ctx, i, v->frames[i], buf + len + !!i, size - len - !!i);

		if (n < 0)
			break;
		if (i)
			buf[len++] = '\n';
		len += (size_t)n < size - len ? (size_t)n : size - len - 1;
	}
	buf[len] = '\0';
	v->str = buf;
	v->str_len = len;
}

const char *up_fetch_next_frame(const struct up_fetch_value *v, struct up_fetch_frames *it,
				size_t *len)
{
	const char *l, *nl;

	if (!v->str) {
		if (it->i >= v->nframes)
			return NULL;
		*len = (size_t)snprintf(it->hex, sizeof(it->hex), "0x%" PRIx64, v->frames[it->i++]);
		return it->hex;
	}
	if (it->at >= v->str_len)
		return NULL;
	l = v->str + it->at;
	nl = memchr(l, '\n', v->str_len - it->at);
	*len = nl ? (size_t)(nl - l) : v->str_len - it->at;
	it->at += *len + 1;
	return l;
}

/* A stack on one line: its frames joined by ' '. */
static int format_stack(const struct up_fetch_value *v, char *buf, size_t size)
{
	struct up_spec_buf b = { buf, size, 0 };
	struct up_fetch_frames it = { 0 };
	const char *f;
	size_t n;

	if (size)
		buf[0] = '\0';
	for (bool first = true; (f = up_fetch_next_frame(v, &it, &n)); first = false) {
		if (!first)
			up_spec_buf_putc(&b, ' ');
		up_spec_buf_put(&b, f, n);
	}
	return up_spec_buf_result(&b);
}

int up_fetch_format(const struct up_fetch_value *v, char *buf, size_t size)
{
	uint64_t u;

	if (!v)
		return -EINVAL;
	if (v->err)
		return snprintf(buf, size, "(fault)");
	if (v->type.kind == UP_TYPE_STRING)
		return snprintf(buf, size, "\"%s\"", v->str ? v->str : "");
	if (v->type.kind == UP_TYPE_STACK)
		return format_stack(v, buf, size);
	u = v->u;
	switch (v->type.kind) {
	case UP_TYPE_U:
		return snprintf(buf, size, "%" PRIu64, u);
	case UP_TYPE_S:
		switch (v->type.size) {
		case 1: return snprintf(buf, size, "%d", (int)(int8_t)u);
		case 2: return snprintf(buf, size, "%d", (int)(int16_t)u);
		case 4: return snprintf(buf, size, "%d", (int)(int32_t)u);
		default: return snprintf(buf, size, "%" PRId64, (int64_t)u);
		}
	case UP_TYPE_X:
		return snprintf(buf, size, "0x%" PRIx64, u);
	default:
		return -EINVAL;
	}
}
