// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the probe-spec parser (src/trace/spec.c) and what consumes a parsed
 * spec (fetch.c, format.c).
 *
 * The input is the spec text (NUL-terminated here).  A spec that parses must format
 * back to text that parses again and formats to the same text; snprintf semantics
 * must hold for short buffers.  A spec that is refused must give an error whose
 * position lies inside the text and whose formatted form has the caret line.  A
 * parsed spec is also evaluated against a fake register set and a small fake memory
 * window, and its hit is formatted in text and JSON, as the tracer would.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>

#include "trace/fetch.h"
#include "trace/format.h"
#include "trace/spec.h"

#define FMT_MAX 16384
#define MEM_BASE 0x10000ULL
#define MEM_SIZE 4096

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "fuzz_spec: check failed: %s (%s:%d)\n", #cond, \
				__FILE__, __LINE__);                                   \
			abort();                                                       \
		}                                                                      \
	} while (0)

struct fake_mem {
	uint8_t bytes[MEM_SIZE];
};

static int fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct fake_mem *m = ctx;

	if (addr < MEM_BASE || addr - MEM_BASE > MEM_SIZE || len > MEM_SIZE - (addr - MEM_BASE))
		return -14; /* -EFAULT */
	memcpy(buf, m->bytes + (addr - MEM_BASE), len);
	return 0;
}

/* Registers pointing into (and around) the fake window, derived from the text. */
static void fake_regs(struct user_regs_struct *r, uint32_t seed)
{
	uint64_t *w = (uint64_t *)r;

	for (size_t i = 0; i < sizeof(*r) / sizeof(uint64_t); i++) {
		seed = seed * 1103515245u + 12345u;
		w[i] = MEM_BASE + (seed >> 8) % (MEM_SIZE + 64);
	}
	r->rsp = MEM_BASE + 256;
}

static void exercise_fetch(const struct up_spec *spec, uint32_t seed)
{
	static struct fake_mem mem;
	static char arena[8192];
	static char out[FMT_MAX];
	struct user_regs_struct regs;
	struct up_fetch_env env = { 0 };
	struct up_fmt_ctx ctx = { .comm = "fuzz", .pid = 42, .tid = 43, .cpu = 1,
				  .time_ns = 1234567890123ULL };
	struct up_fetch_value *vals;
	int n;

	for (size_t i = 0; i < MEM_SIZE; i++)
		mem.bytes[i] = (uint8_t)(i % 97 == 96 ? 0 : ' ' + (i * 7 + seed) % 95);
	fake_regs(&regs, seed);
	env.regs = &regs;
	env.is32 = seed & 1;
	env.read = fake_read;
	env.ctx = &mem;
	env.retval = MEM_BASE + 16;
	env.has_retval = spec->kind == UP_SPEC_EVENT && spec->is_return;
	env.comm = (seed & 2) ? "fuzzcomm" : NULL;
	env.file_bias = MEM_BASE;

	if (spec->kind == UP_SPEC_SEED) {
		n = up_fmt_seed_hit(out, sizeof(out), &ctx, spec, &env);
		CHECK(n < 0 || strlen(out) == ((size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1));
		n = up_fmt_seed_hit_json(out, sizeof(out), &ctx, spec, &env);
		CHECK(n < 0 || strlen(out) == ((size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1));
		return;
	}

	vals = calloc((size_t)spec->nargs + 1, sizeof(*vals));
	CHECK(vals);
	for (int i = 0; i < spec->nargs; i++) {
		char buf[256];

		(void)up_fetch_arg_check(&spec->args[i], env.is32);
		if (up_fetch_eval(&spec->args[i], &env, &vals[i], arena, sizeof(arena)) == 0) {
			n = up_fetch_format(&vals[i], buf, sizeof(buf));
			CHECK(n >= 0);
			CHECK(strlen(buf) == ((size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1));
		}
	}
	if (up_fetch_eval_all(spec, &env, vals, arena, sizeof(arena)) == 0) {
		struct up_fmt_event ev = { .addr = 0x401000, .ret_addr = 0x401234, .vals = vals };

		n = up_fmt_event_text(out, sizeof(out), &ctx, spec, &ev);
		CHECK(n >= 0);
		CHECK(strlen(out) == ((size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1));
		n = up_fmt_event_json(out, sizeof(out), &ctx, spec, &ev);
		CHECK(n >= 0);
		CHECK(strlen(out) == ((size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1));
	}
	free(vals);
}

/* up_spec_format with snprintf semantics: the same length for every buffer size. */
static int format_checked(const struct up_spec *spec, char *buf, size_t size)
{
	char small[8];
	int n = up_spec_format(spec, buf, size);

	CHECK(n >= 0);
	CHECK(up_spec_format(spec, NULL, 0) == n);
	memset(small, 'X', sizeof(small));
	CHECK(up_spec_format(spec, small, sizeof(small)) == n);
	CHECK(strlen(small) == ((size_t)n < sizeof(small) ? (size_t)n : sizeof(small) - 1));
	CHECK(!strncmp(small, buf, strlen(small)));
	return n;
}

static void check_error(const char *text, const struct up_spec_err *err)
{
	size_t tl = strlen(text), need;
	char *out;
	int n;

	CHECK(memchr(err->msg, '\0', sizeof(err->msg)));
	CHECK(err->msg[0] != '\0');
	CHECK(err->len >= 1);
	CHECK(err->pos >= -1);
	CHECK(err->pos < 0 || (size_t)err->pos <= tl);

	n = up_spec_err_format(text, err, NULL, 0);
	CHECK(n > 0);
	need = (size_t)n + 1;
	out = malloc(need);
	CHECK(out);
	CHECK(up_spec_err_format(text, err, out, need) == n);
	CHECK(strlen(out) == (size_t)n);
	CHECK(out[n - 1] == '\n');
	if (err->pos >= 0) {
		/* the caret line follows the text line: blanks (tabs kept) up to pos, then ^~~~ */
		size_t shown = tl, at;

		while (shown && (text[shown - 1] == '\n' || text[shown - 1] == '\r'))
			shown--;
		CHECK((size_t)n > shown + 1 + (size_t)err->pos + (size_t)err->len);
		CHECK(!memcmp(out, text, shown) && out[shown] == '\n');
		at = shown + 1;
		for (int i = 0; i < err->pos; i++, at++)
			CHECK(out[at] == ((size_t)i < shown && text[i] == '\t' ? '\t' : ' '));
		CHECK(out[at++] == '^');
		for (int i = 1; i < err->len; i++)
			CHECK(out[at++] == '~');
		CHECK(out[at] == '\n');
	}
	/* truncation keeps a prefix */
	if (n > 4) {
		char small[5];

		CHECK(up_spec_err_format(text, err, small, sizeof(small)) == n);
		CHECK(!strncmp(small, out, 4) && small[4] == '\0');
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct up_spec spec, again;
	struct up_spec_err err;
	char *text, *fmt1, *fmt2;
	uint32_t seed = 2166136261u;
	int n1, n2;

	if (size > 4096)
		return 0;
	/* exactly sized: a read past the NUL is caught */
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for (size_t i = 0; i < size; i++)
		seed = (seed ^ data[i]) * 16777619u;

	if (up_spec_parse(text, &spec, &err) != 0) {
		/* nothing to free, but freeing must be harmless */
		up_spec_free(&spec);
		check_error(text, &err);
		free(text);
		return 0;
	}

	fmt1 = malloc(FMT_MAX);
	fmt2 = malloc(FMT_MAX);
	CHECK(fmt1 && fmt2);
	n1 = format_checked(&spec, fmt1, FMT_MAX);
	if ((size_t)n1 < FMT_MAX) {
		if (up_spec_parse(fmt1, &again, &err) != 0) {
			fprintf(stderr, "fuzz_spec: input  \"%s\"\nformats as \"%s\"\nwhich does not "
				"parse: pos %d: %s\n", text, fmt1, err.pos, err.msg);
			abort();
		}
		n2 = format_checked(&again, fmt2, FMT_MAX);
		if (n1 != n2 || strcmp(fmt1, fmt2)) {
			fprintf(stderr, "fuzz_spec: input \"%s\"\nformats as \"%s\"\nreparsed as "
				"\"%s\"\n", text, fmt1, fmt2);
			abort();
		}
		up_spec_free(&again);
	}
	exercise_fetch(&spec, seed);
	up_spec_free(&spec);
	free(fmt1);
	free(fmt2);
	free(text);
	return 0;
}
