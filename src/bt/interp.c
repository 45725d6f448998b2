// SPDX-License-Identifier: MIT
/*
 * A bpftrace program's bodies, interpreted in the tracer at each hit (the trap path:
 * the thread waits, stopped, while its body runs).  The hit gives the registers and a
 * reader of the process's memory (trace/session.h); strings a body makes live in an
 * arena emptied at each run; maps copy what they keep.  Integers are 64-bit, with a
 * sign each (casts narrow them); division by zero gives 0, as BPF's does.  Memory
 * that cannot be read gives 0s and an empty string, as bpftrace's probe_read does.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bt/bt.h"
#include "trace/filter.h"
#include "bt/tokens.h"
#include "trace/session.h"

#define ARENA (256 * 1024)

struct bt_rt {
	struct bt_prog *p;
	FILE *out;
	FILE *sep_out;
	bool json;
	const char *const *pos;
	unsigned npos;
	bool exiting;
	uint64_t errors;
	uint64_t start_ns;
	int64_t boot_ns; /* CLOCK_REALTIME - CLOCK_BOOTTIME at the start: strftime's */
	const struct bt_ctx *c;
	struct bt_val *vars;
	char *arena;
	size_t used;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int bt_rt_new(struct bt_prog *p, const struct bt_rt_opts *o, struct bt_rt **out)
{
	struct bt_rt *rt = calloc(1, sizeof(*rt));

	if (!rt)
		return -ENOMEM;
	rt->p = p;
	rt->out = o->out;
	rt->sep_out = o->sep_out ? o->sep_out : o->out;
	rt->json = o->json;
	rt->pos = o->pos;
	rt->npos = o->npos;
	rt->start_ns = mono_ns();
	{
		struct timespec r, b;

		/* bpftrace's: strftime's nsecs are taken as time since boot */
		clock_gettime(CLOCK_REALTIME, &r);
		clock_gettime(CLOCK_BOOTTIME, &b);
		rt->boot_ns = ((int64_t)r.tv_sec - b.tv_sec) * 1000000000 + (r.tv_nsec - b.tv_nsec);
	}
	rt->vars = calloc(p->nvars + 1, sizeof(*rt->vars));
	rt->arena = malloc(ARENA);
	if (!rt->vars || !rt->arena) {
		bt_rt_free(rt);
		return -ENOMEM;
	}
	*out = rt;
	return 0;
}

void bt_rt_free(struct bt_rt *rt)
{
	if (!rt)
		return;
	free(rt->vars);
	free(rt->arena);
	free(rt);
}

bool bt_rt_exiting(const struct bt_rt *rt)
{
	return rt->exiting;
}

uint64_t bt_rt_errors(const struct bt_rt *rt)
{
	return rt->errors;
}

/* Room for n bytes in the arena; NULL when full (the run's strings are too many). */
static char *arena(struct bt_rt *rt, size_t n)
{
	char *s;

	if (n > ARENA - rt->used) {
		rt->errors++;
		return NULL;
	}
	s = rt->arena + rt->used;
	rt->used += n;
	return s;
}

static const char *arena_str(struct bt_rt *rt, const char *s, size_t n)
{
	char *d = arena(rt, n + 1);

	if (!d)
		return "";
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

static void set_int(struct bt_val *v, int64_t i, bool sign)
{
	v->t = BT_T_INT;
	v->i = i;
	v->sign = sign;
	v->bits = 64;
	v->s = NULL;
}

/* A NUL-terminated string of the process, at most max - 1 bytes. */
static const char *read_str(struct bt_rt *rt, uint64_t addr, size_t max)
{
	const struct up_trace_hit *h = rt->c->hit;
	char buf[BT_STRLEN];
	size_t n = 0;

	if (max > sizeof(buf))
		max = sizeof(buf);
	while (h && n + 1 < max) {
		/* up to the page's end at a time: the next page may not be mapped */
		size_t chunk = 4096 - ((addr + n) & 4095);

		if (chunk > max - 1 - n)
			chunk = max - 1 - n;
		if (h->read(h->read_ctx, addr + n, buf + n, chunk)) {
			rt->errors++;
			break;
		}
		{
			void *z = memchr(buf + n, '\0', chunk);

			if (z) {
				n = (size_t)((char *)z - buf);
				return arena_str(rt, buf, n);
			}
		}
		n += chunk;
	}
	return arena_str(rt, buf, n);
}

/* A frame as bpftrace names it: "func+OFF" (decimal), else the address in hex. */
static int frame_name(const struct up_trace_hit *h, uint64_t addr, bool offset, char *buf,
		      size_t size)
{
	char name[256];
	uint64_t off;

	if (up_trace_hit_sym(h, addr, name, sizeof(name), &off))
		/* bpftrace's: the address as C++ prints a void *, so 0 is "0" */
		return addr ? snprintf(buf, size, "0x%" PRIx64, addr) : snprintf(buf, size, "0");
	if (offset)
		return snprintf(buf, size, "%s+%" PRIu64, name, off);
	return snprintf(buf, size, "%s", name);
}

static const char *ustack_text(struct bt_rt *rt, unsigned max)
{
	const struct up_trace_hit *h = rt->c->hit;
	uint64_t addr[128];
	char buf[16384];
	size_t n = 0;
	unsigned k;

	if (!h)
		return "";
	if (!max || max > 127)
		max = 127;
	k = up_trace_hit_ustack(h, addr, max);
	for (unsigned i = 0; i < k && n < sizeof(buf); i++) {
		int l = frame_name(h, addr[i], true, buf + n, sizeof(buf) - n);

		if (l < 0)
			break;
		n += (size_t)l;
		if (n + 1 < sizeof(buf))
			buf[n++] = '\n';
	}
	if (n >= sizeof(buf))
		n = sizeof(buf) - 1;
	return arena_str(rt, buf, n);
}

static uint64_t arg_reg(const struct user_regs_struct *r, int i)
{
	switch (i) {
	case 0: return r->rdi;
	case 1: return r->rsi;
	case 2: return r->rdx;
	case 3: return r->rcx;
	case 4: return r->r8;
	default: return r->r9;
	}
}

static int64_t proc_id(pid_t pid, const char *field)
{
	char path[64], line[256];
	FILE *f;
	int64_t v = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, strlen(field))) {
			v = strtoll(line + strlen(field), NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static void eval(struct bt_rt *rt, struct bt_node *n, struct bt_val *v);

static void builtin(struct bt_rt *rt, struct bt_node *n, struct bt_val *v)
{
	const struct bt_ctx *c = rt->c;
	const struct up_trace_hit *h = c->hit;

	set_int(v, 0, false);
	switch (n->ival) {
	case BT_B_PID: v->i = h ? h->pid : getpid(); break;
	case BT_B_TID: v->i = h ? h->tid : gettid(); break;
	case BT_B_COMM:
		v->t = BT_T_STR;
		v->s = h && h->comm ? h->comm : "uprobe";
		break;
	case BT_B_NSECS: v->i = (int64_t)(h ? h->time_ns : mono_ns()); break;
	case BT_B_ELAPSED: v->i = (int64_t)((h ? h->time_ns : mono_ns()) - rt->start_ns); break;
	case BT_B_CPU: {
		int cpu = h ? up_trace_hit_cpu(h) : sched_getcpu();

		v->i = cpu < 0 ? 0 : cpu;
		break;
	}
	case BT_B_RETVAL: v->i = h ? (int64_t)h->regs->rax : 0; break;
	case BT_B_FUNC: v->t = BT_T_STR; v->s = c->func ? c->func : ""; break;
	case BT_B_PROBE: v->t = BT_T_STR; v->s = c->probe ? c->probe : ""; break;
	case BT_B_USTACK: v->t = BT_T_STACK; v->s = ustack_text(rt, 0); break;
	case BT_B_UID: v->i = proc_id(h ? h->pid : getpid(), "Uid:"); break;
	case BT_B_GID: v->i = proc_id(h ? h->pid : getpid(), "Gid:"); break;
	case BT_B_POS: {
		const char *s = n->id >= 1 && (unsigned)n->id <= rt->npos ? rt->pos[n->id - 1] : "0";
		char *end;
		long long x = strtoll(s, &end, 0);

		v->i = *end ? 0 : x;
		v->sign = true;
		break;
	}
	default:
		if (n->ival >= BT_B_ARG0 && n->ival < BT_B_ARG0 + 6) {
			int i = (int)(n->ival - BT_B_ARG0);

			if (c->usdt_args)
				v->i = (unsigned)i < c->nusdt ? (int64_t)c->usdt_args[i] : 0;
			else
				v->i = h ? (int64_t)arg_reg(h->regs, i) : 0;
		}
		break;
	}
}

static int64_t cast(int64_t x, unsigned bits, bool sign)
{
	switch (bits) {
	case 8: return sign ? (int64_t)(int8_t)x : (int64_t)(uint8_t)x;
	case 16: return sign ? (int64_t)(int16_t)x : (int64_t)(uint16_t)x;
	case 32: return sign ? (int64_t)(int32_t)x : (int64_t)(uint32_t)x;
	default: return x;
	}
}

static int64_t arith(int op, const struct bt_val *a, const struct bt_val *b, bool *sign)
{
	uint64_t x = (uint64_t)a->i, y = (uint64_t)b->i;
	bool s = a->sign && b->sign;
	bool cmp_signed = a->sign || b->sign; /* a literal's sign does not make u64 huge */

	*sign = s;
	switch (op) {
	case T_PLUS: return (int64_t)(x + y);
	case T_MINUS: *sign = true; return (int64_t)(x - y);
	case T_STAR: return (int64_t)(x * y);
	case T_SLASH:
		if (!y)
			return 0;
		return s ? (a->i == INT64_MIN && b->i == -1 ? a->i : a->i / b->i) : (int64_t)(x / y);
	case T_PCT:
		if (!y)
			return 0;
		return s ? (b->i == -1 ? 0 : a->i % b->i) : (int64_t)(x % y);
	case T_AMP: return (int64_t)(x & y);
	case T_PIPE: return (int64_t)(x | y);
	case T_CARET: return (int64_t)(x ^ y);
	case T_SHL: return y >= 64 ? 0 : (int64_t)(x << y);
	case T_SHR: return y >= 64 ? 0 : s ? a->i >> y : (int64_t)(x >> y);
	}
	*sign = false;
	switch (op) {
	case T_EQ: return x == y;
	case T_NE: return x != y;
	case T_LT: return cmp_signed ? a->i < b->i : x < y;
	case T_LE: return cmp_signed ? a->i <= b->i : x <= y;
	case T_GT: return cmp_signed ? a->i > b->i : x > y;
	case T_GE: return cmp_signed ? a->i >= b->i : x >= y;
	}
	return 0;
}

static bool truth(const struct bt_val *v)
{
	return v->t == BT_T_INT ? v->i != 0 : v->s && *v->s;
}

static unsigned eval_key(struct bt_rt *rt, struct bt_node *mapn, struct bt_val *key)
{
	for (unsigned i = 0; i < mapn->n; i++) {
		eval(rt, mapn->v[i], &key[i]);
		if (key[i].t != BT_T_INT && !key[i].s)
			key[i].s = "";
	}
	return mapn->n;
}

/* printf's format with the values: each conversion given the value's C type.  The
   spec passed to fprintf is made here, of flags, width and precision and one
   conversion whose argument type matches it: not a format the program controls. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void format(struct bt_rt *rt, FILE *out, const char *fmt, struct bt_node **args,
		   unsigned nargs)
{
	unsigned ai = 0;

	for (const char *p = fmt; *p; p++) {
		char spec[32], conv;
		size_t sl = 0;
		struct bt_val v;

		if (*p != '%') {
			fputc(*p, out);
			continue;
		}
		if (p[1] == '%') {
			fputc('%', out);
			p++;
			continue;
		}
		spec[sl++] = '%';
		p++;
		while (*p && strchr("-+ #0", *p) && sl < 20)
			spec[sl++] = *p++;
		while (*p && ((*p >= '0' && *p <= '9') || *p == '.') && sl < 28)
			spec[sl++] = *p++;
		/* the length, as C's printf reads it (bpftrace hands the value to printf):
		   %d is an int's 32 bits, %ld the 64 */
		int bits = 32;

		if (*p == 'h')
			bits = p[1] == 'h' ? 8 : 16;
		else if (*p && strchr("lLqjzt", *p))
			bits = 64;
		while (*p && strchr("hlLqjzt", *p))
			p++;
		conv = *p;
		if (!conv)
			break;
		if (ai < nargs)
			eval(rt, args[ai++], &v);
		else
			set_int(&v, 0, true);
		switch (conv) {
		case 'd': case 'i':
			if (v.t != BT_T_INT)
				set_int(&v, 0, true);
			memcpy(spec + sl, "lld", 4);
			fprintf(out, spec, (long long)cast(v.i, (unsigned)bits, true));
			break;
		case 'u': case 'x': case 'X': case 'o':
			if (v.t != BT_T_INT)
				set_int(&v, 0, false);
			spec[sl] = 'l', spec[sl + 1] = 'l', spec[sl + 2] = conv, spec[sl + 3] = '\0';
			fprintf(out, spec, (unsigned long long)cast(v.i, (unsigned)bits, false));
			break;
		case 'p':
			fprintf(out, "0x%llx", (unsigned long long)v.i);
			break;
		case 'c':
			spec[sl] = 'c', spec[sl + 1] = '\0';
			fprintf(out, spec, (int)(char)v.i);
			break;
		case 's': {
			char num[32];
			const char *s = v.s;

			if (v.t == BT_T_INT) {
				snprintf(num, sizeof(num), v.sign ? "%lld" : "%llu", (long long)v.i);
				s = num;
			}
			spec[sl] = 's', spec[sl + 1] = '\0';
			if (v.t == BT_T_STACK) {
				/* a stack printed as bpftrace does: a newline, frames indented 8 */
				fputc('\n', out);
				for (const char *q = s; q && *q;) {
					size_t l = strcspn(q, "\n");

					fprintf(out, "        %.*s\n", (int)l, q);
					q += l + (q[l] == '\n');
				}
			} else {
				fprintf(out, spec, s ? s : "");
			}
			break;
		}
		default:
			fputs(spec, out);
			fputc(conv, out);
			break;
		}
	}
}

#pragma GCC diagnostic pop

/* A message: as it is, or with -f json {"type": TYPE, "data": "TEXT"}. */
static void message(struct bt_rt *rt, const char *type, const char *text, size_t len)
{
	if (!rt->json) {
		fwrite(text, 1, len, rt->out);
		return;
	}
	fprintf(rt->out, "{\"type\": \"%s\", \"data\": ", type);
	bt_json_str(rt->out, text, len);
	fputs("}\n", rt->out);
}

static void do_print(struct bt_rt *rt, struct bt_node *n)
{
	struct bt_node *a = n->v[0];
	struct bt_val v;

	if (a->k == BT_N_MAP && !a->n) {
		/* top and div: integer literals (parse.c) */
		uint32_t top = n->n > 1 ? (uint32_t)n->v[1]->ival : 0;
		uint32_t div = n->n > 2 ? (uint32_t)n->v[2]->ival : 0;

		if (rt->json)
			bt_map_print_json_top(rt->out, &rt->p->maps[a->id], top, div);
		else
			bt_map_print_top(rt->out, &rt->p->maps[a->id], top, div);
		return;
	}
	eval(rt, a, &v);
	if (rt->json) {
		fputs("{\"type\": \"value\", \"data\": ", rt->out);
		if (v.t == BT_T_INT && v.sign)
			fprintf(rt->out, "%" PRId64, v.i);
		else if (v.t == BT_T_INT)
			fprintf(rt->out, "%" PRIu64, (uint64_t)v.i);
		else
			bt_json_str(rt->out, v.s ? v.s : "", strlen(v.s ? v.s : ""));
		fputs("}\n", rt->out);
		return;
	}
	if (v.t == BT_T_INT && v.sign)
		fprintf(rt->out, "%" PRId64 "\n", v.i);
	else if (v.t == BT_T_INT)
		fprintf(rt->out, "%" PRIu64 "\n", (uint64_t)v.i);
	else if (v.t == BT_T_STACK)
		format(rt, rt->out, "%s\n", n->v, 1);
	else
		fprintf(rt->out, "%s\n", v.s ? v.s : "");
}

/* strftime(fmt, ns): ns after boot as the wall clock's local time, bpftrace's "%f"
   (the microseconds) included: each "%f" of the text replaced first, as bpftrace
   replaces it ("%%f" too), and "(?)" where strftime gives nothing. */
static const char *strftime_text(struct bt_rt *rt, const char *fmt, int64_t ns)
{
	int64_t t = rt->boot_ns + ns;
	time_t sec = (time_t)(t / 1000000000);
	char f[512], buf[512];
	size_t k = 0;
	struct tm tm;

	if (t < 0 && t % 1000000000)
		sec--;
	for (const char *s = fmt; *s && k + 8 < sizeof(f); s++) {
		if (s[0] == '%' && s[1] == 'f') {
			k += (size_t)snprintf(f + k, sizeof(f) - k, "%06u",
					      (unsigned)(((t % 1000000000) + 1000000000) %
							 1000000000 / 1000));
			s++;
		} else {
			f[k++] = *s;
		}
	}
	f[k] = '\0';
	localtime_r(&sec, &tm);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	if (!strftime(buf, sizeof(buf), f, &tm))
		snprintf(buf, sizeof(buf), "(?)");
#pragma GCC diagnostic pop
	return arena_str(rt, buf, strlen(buf));
}

static void call(struct bt_rt *rt, struct bt_node *n, struct bt_val *v)
{
	struct bt_val a;

	set_int(v, 0, false);
	switch (n->op) {
	case F_PRINTF: {
		char *buf = NULL;
		size_t len = 0;
		FILE *m = rt->json ? open_memstream(&buf, &len) : NULL;

		if (!rt->json) {
			format(rt, rt->out, n->v[0]->s, n->v + 1, n->n - 1);
			break;
		}
		if (!m) {
			rt->errors++;
			break;
		}
		format(rt, m, n->v[0]->s, n->v + 1, n->n - 1);
		fclose(m);
		message(rt, "printf", buf, len);
		free(buf);
		break;
	}
	case F_PRINT:
		do_print(rt, n);
		break;
	case F_TIME: {
		char buf[256];
		time_t now = time(NULL);
		struct tm tm;

		localtime_r(&now, &tm);
		/* the program's format, as bpftrace's time() takes it */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		if (!strftime(buf, sizeof(buf), n->n ? n->v[0]->s : "%H:%M:%S\n", &tm))
			buf[0] = '\0';
#pragma GCC diagnostic pop
		message(rt, "time", buf, strlen(buf));
		break;
	}
	case F_EXIT:
		rt->exiting = true;
		break;
	case F_DELETE: {
		struct bt_val key[BT_MAX_KEYS];
		struct bt_node *m = n->v[0];

		bt_table_delete(&rt->p->maps[m->id], key, eval_key(rt, m, key));
		break;
	}
	case F_CLEAR:
		bt_table_clear(&rt->p->maps[n->v[0]->id]);
		break;
	case F_ZERO:
		bt_table_zero(&rt->p->maps[n->v[0]->id]);
		break;
	case F_STR: {
		size_t max = BT_STRLEN;

		eval(rt, n->v[0], &a);
		if (n->n > 1) {
			struct bt_val l;

			eval(rt, n->v[1], &l);
			if (l.i >= 0 && (uint64_t)l.i + 1 < max)
				max = (size_t)l.i + 1;
		}
		v->t = BT_T_STR;
		if (n->v[0]->k == BT_N_BUILTIN && n->v[0]->ival == BT_B_POS) {
			/* str($1): the parameter's text, as bpftrace gives it */
			int k = n->v[0]->id;
			const char *t = k >= 1 && (unsigned)k <= rt->npos ? rt->pos[k - 1] : "";
			size_t l = strlen(t);

			v->s = arena_str(rt, t, l < max - 1 ? l : max - 1);
			break;
		}
		v->s = a.t == BT_T_INT ? read_str(rt, (uint64_t)a.i, max) : a.s;
		break;
	}
	case F_USYM: {
		char buf[256];

		eval(rt, n->v[0], &a);
		v->t = BT_T_SYM;
		if (rt->c->hit)
			frame_name(rt->c->hit, (uint64_t)a.i, false, buf, sizeof(buf));
		else if (a.i)
			snprintf(buf, sizeof(buf), "0x%" PRIx64, (uint64_t)a.i);
		else
			snprintf(buf, sizeof(buf), "0");
		v->s = arena_str(rt, buf, strlen(buf));
		break;
	}
	case F_USTACK:
		v->t = BT_T_STACK;
		v->s = ustack_text(rt, n->n ? (unsigned)n->v[0]->ival : 0);
		break;
	case F_STRFTIME:
		eval(rt, n->v[1], &a);
		v->t = BT_T_STR;
		v->s = strftime_text(rt, n->v[0]->s, a.i);
		break;
	case F_NTOP: {
		/* bpftrace's: the integer's bytes as they lie in memory, 4 of them for
		   AF_INET (2, the default), 16 for AF_INET6 (10: its 8, then zeros) */
		unsigned char b[16] = { 0 };
		char buf[INET6_ADDRSTRLEN];
		int64_t af = AF_INET;

		if (n->n > 1) {
			eval(rt, n->v[0], &a);
			af = a.i;
		}
		eval(rt, n->v[n->n - 1], &a);
		memcpy(b, &a.i, sizeof(a.i));
		if (!inet_ntop(af == AF_INET6 ? AF_INET6 : AF_INET, b, buf, sizeof(buf)))
			buf[0] = '\0';
		v->t = BT_T_STR;
		v->s = arena_str(rt, buf, strlen(buf));
		break;
	}
	default:
		break;
	}
}

static void assign(struct bt_rt *rt, struct bt_node *n)
{
	struct bt_node *l = n->a, *r = n->b;
	struct bt_val v, cur;

	if (l->k == BT_N_MAP && r->k == BT_N_CALL && r->op <= F_LHIST) {
		struct bt_map *m = &rt->p->maps[l->id];
		struct bt_val key[BT_MAX_KEYS];
		unsigned nk = eval_key(rt, l, key);
		struct bt_val x;
		struct bt_entry *e;

		set_int(&x, 0, true);
		if (r->n)
			eval(rt, r->v[0], &x);
		e = bt_table_get(m, key, nk, true);
		if (e)
			bt_entry_agg(m, e, x.i);
		else
			rt->errors++;
		return;
	}
	eval(rt, r, &v);
	if (n->op != T_ASSIGN) {
		static const int ops[] = {
			[T_ADDEQ - T_ADDEQ] = T_PLUS, [T_SUBEQ - T_ADDEQ] = T_MINUS,
			[T_MULEQ - T_ADDEQ] = T_STAR, [T_DIVEQ - T_ADDEQ] = T_SLASH,
			[T_MODEQ - T_ADDEQ] = T_PCT, [T_ANDEQ - T_ADDEQ] = T_AMP,
			[T_OREQ - T_ADDEQ] = T_PIPE, [T_XOREQ - T_ADDEQ] = T_CARET,
			[T_SHLEQ - T_ADDEQ] = T_SHL, [T_SHREQ - T_ADDEQ] = T_SHR,
		};
		bool sign;

		eval(rt, l, &cur);
		v.i = arith(ops[n->op - T_ADDEQ], &cur, &v, &sign);
		v.sign = sign;
	}
	if (l->k == BT_N_VAR) {
		rt->vars[l->id] = v;
	} else {
		struct bt_map *m = &rt->p->maps[l->id];
		struct bt_val key[BT_MAX_KEYS];
		unsigned nk = eval_key(rt, l, key);
		struct bt_entry *e = bt_table_get(m, key, nk, true);

		if (e)
			bt_entry_set(m, e, &v);
		else
			rt->errors++;
	}
}

static void incdec(struct bt_rt *rt, struct bt_node *n, struct bt_val *out)
{
	struct bt_node *l = n->a;
	struct bt_val cur;
	int64_t d = n->op == T_INC ? 1 : -1;

	eval(rt, l, &cur);
	*out = cur;
	cur.i += d;
	if (n->sign)
		*out = cur;
	if (l->k == BT_N_VAR) {
		rt->vars[l->id] = cur;
	} else {
		struct bt_map *m = &rt->p->maps[l->id];
		struct bt_val key[BT_MAX_KEYS];
		unsigned nk = eval_key(rt, l, key);
		struct bt_entry *e = bt_table_get(m, key, nk, true);

		if (e)
			bt_entry_set(m, e, &cur);
	}
}

static void eval(struct bt_rt *rt, struct bt_node *n, struct bt_val *v)
{
	struct bt_val a, b;

	set_int(v, 0, true);
	if (!n || rt->exiting)
		return;
	switch (n->k) {
	case BT_N_INT:
		v->i = n->ival;
		return;
	case BT_N_STR:
		v->t = BT_T_STR;
		v->s = n->s;
		return;
	case BT_N_BUILTIN:
		builtin(rt, n, v);
		return;
	case BT_N_VAR:
		*v = rt->vars[n->id];
		if (v->t != BT_T_INT && !v->s)
			v->s = "";
		return;
	case BT_N_MAP: {
		struct bt_map *m = &rt->p->maps[n->id];
		struct bt_val key[BT_MAX_KEYS];
		unsigned nk = eval_key(rt, n, key);

		bt_entry_value(m, bt_table_get(m, key, nk, false), v);
		return;
	}
	case BT_N_CALL:
		call(rt, n, v);
		return;
	case BT_N_UN:
		eval(rt, n->a, &a);
		if (n->op == T_NOT)
			set_int(v, !truth(&a), false);
		else if (n->op == T_MINUS)
			set_int(v, (int64_t)(0 - (uint64_t)a.i), true);
		else
			set_int(v, (int64_t)~(uint64_t)a.i, a.sign);
		return;
	case BT_N_CAST:
		eval(rt, n->a, &a);
		set_int(v, cast(a.i, (unsigned)n->ival, n->sign), n->sign);
		v->bits = (uint8_t)n->ival;
		return;
	case BT_N_BIN:
		if (n->op == T_LAND || n->op == T_LOR) {
			eval(rt, n->a, &a);
			if (truth(&a) == (n->op == T_LOR)) {
				set_int(v, n->op == T_LOR, false);
				return;
			}
			eval(rt, n->b, &b);
			set_int(v, truth(&b), false);
			return;
		}
		eval(rt, n->a, &a);
		eval(rt, n->b, &b);
		if (a.t != BT_T_INT || b.t != BT_T_INT) {
			int eq = !strcmp(a.s ? a.s : "", b.s ? b.s : "");

			set_int(v, n->op == T_EQ ? eq : !eq, false);
			return;
		}
		{
			bool sign;

			v->i = arith(n->op, &a, &b, &sign);
			v->sign = sign;
		}
		return;
	case BT_N_TERN:
		eval(rt, n->a, &a);
		eval(rt, truth(&a) ? n->b : n->c, v);
		return;
	case BT_N_ASSIGN:
		assign(rt, n);
		return;
	case BT_N_INCDEC:
		incdec(rt, n, v);
		return;
	case BT_N_IF:
		eval(rt, n->a, &a);
		if (truth(&a))
			eval(rt, n->b, v);
		else if (n->c)
			eval(rt, n->c, v);
		return;
	case BT_N_BLOCK:
		for (unsigned i = 0; i < n->n && !rt->exiting; i++) {
			rt->used = rt->used; /* strings live until the run ends */
			eval(rt, n->v[i], v);
		}
		return;
	}
}

/* The predicate's fields (bt/pred.c): its operands, evaluated as the evaluator asks. */
struct pred_ctx {
	struct bt_rt *rt;
	const struct bt_probe *p;
};

static void pred_field(void *ctx, uint32_t i, struct up_pred_val *out)
{
	const struct pred_ctx *pc = ctx;
	struct bt_val v;

	eval(pc->rt, pc->p->pleaf[i], &v);
	if (v.t == BT_T_INT) {
		out->u = (uint64_t)v.i;
		out->is_signed = v.sign;
		return;
	}
	out->is_str = true;
	out->s = v.s ? v.s : "";
	out->len = strlen(out->s);
}

void bt_rt_run(struct bt_rt *rt, unsigned probe, const struct bt_ctx *c)
{
	struct bt_probe *p = &rt->p->probes[probe];
	struct bt_val v;

	if (rt->exiting)
		return;
	rt->c = c;
	rt->used = 0;
	memset(rt->vars, 0, (rt->p->nvars + 1) * sizeof(*rt->vars));
	if (p->cpred) {
		struct pred_ctx pc = { rt, p };

		if (!up_filter_eval_fn(p->cpred, pred_field, &pc))
			return;
	}
	eval(rt, p->body, &v);
	rt->c = NULL;
}

void bt_rt_print_all(struct bt_rt *rt)
{
	struct bt_prog *p = rt->p;
	unsigned *order = malloc((p->nmaps ? p->nmaps : 1) * sizeof(*order));

	fputs("\n\n", rt->sep_out);
	fflush(rt->sep_out);
	if (!order)
		return;
	for (unsigned i = 0; i < p->nmaps; i++)
		order[i] = i;
	/* by name, as bpftrace's std::map of them */
	for (unsigned i = 1; i < p->nmaps; i++)
		for (unsigned j = i; j > 0 && strcmp(p->maps[order[j - 1]].name,
						     p->maps[order[j]].name) > 0; j--) {
			unsigned t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (unsigned i = 0; i < p->nmaps; i++)
		if (rt->json)
			bt_map_print_json(rt->out, &p->maps[order[i]]);
		else
			bt_map_print(rt->out, &p->maps[order[i]]);
	free(order);
}
