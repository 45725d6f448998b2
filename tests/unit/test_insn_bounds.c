// SPDX-License-Identifier: MIT
/*
 * Random bytes against the analyzer (the kernel's insn_sanity idea).  Each buffer, of
 * 0 to 15 random bytes, ends exactly at a page followed by a PROT_NONE page, so a read
 * past it faults; the up_insn and up_reloc the calls fill end at a guard page too, so a
 * write past them faults.  For every buffer, in both modes:
 *
 *  - up_insn_analyze returns 0, length <= the buffer, up_insn_length agrees;
 *  - length 0 exactly when the plan is reject with reason invalid or truncated, and
 *    Zydis (the decoder of record) agrees on the length and on truncated vs invalid;
 *  - plan and reason belong together (emulate reasons with emulate, ...);
 *  - a non-rejected instruction relocates to a near slot or says -ERANGE, never
 *    writes code[] past len, and its relocated form decodes to the same mnemonic;
 *  - up_insn_format stays inside a small buffer;
 *  - every proper prefix of a decodable instruction is truncated, not invalid.
 *
 * A failure prints the seed, iteration, mode and bytes; a crash prints them from a
 * signal handler first.  UPROBE_INSN_SEED and UPROBE_INSN_ITERS override the defaults
 * to reproduce or to run longer.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "arch/x86/insn.h"
#include "insn_test_util.h"

#define DEFAULT_SEED 0x75b0c0deULL
#define DEFAULT_ITERS 40000u

/* ---- guarded memory ----------------------------------------------------------------- */

struct guarded {
	uint8_t *page; /* readable and writable */
	size_t size;   /* of page */
};

static int guarded_map(struct guarded *g)
{
	long ps = sysconf(_SC_PAGESIZE);
	uint8_t *p = mmap(NULL, 2 * (size_t)ps, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -errno;
	if (mprotect(p + ps, (size_t)ps, PROT_NONE))
		return -errno;
	g->page = p;
	g->size = (size_t)ps;
	return 0;
}

/* n bytes ending at the guard page */
static void *guarded_end(struct guarded *g, size_t n)
{
	return g->page + g->size - n;
}

static struct guarded g_buf, g_insn, g_reloc, g_text;

/* ---- the reproducer --------------------------------------------------------------- */

static volatile uint64_t cur_seed;
static volatile unsigned cur_iter, cur_mode, cur_len;
static volatile const char *cur_phase = "";
static uint8_t cur_bytes[UP_INSN_MAX];
static struct sigaction old_actions[NSIG];

static void put_str(const char *s)
{
	ssize_t r = write(2, s, strlen(s));

	(void)r;
}

static void put_hex(uint64_t v, unsigned digits)
{
	char b[17];
	unsigned i;

	for (i = 0; i < digits; i++)
		b[i] = "0123456789abcdef"[(v >> (4 * (digits - 1 - i))) & 0xf];
	b[digits] = '\0';
	put_str(b);
}

static void put_dec(unsigned v)
{
	char b[12];
	int i = 11;

	b[i] = '\0';
	do
		b[--i] = (char)('0' + v % 10);
	while ((v /= 10) && i > 0);
	put_str(b + i);
}

static void print_reproducer(void)
{
	unsigned i;

	put_str("reproducer: UPROBE_INSN_SEED=0x");
	put_hex(cur_seed, 16);
	put_str(" iteration ");
	put_dec(cur_iter);
	put_str(" mode ");
	put_dec(cur_mode);
	put_str(" phase ");
	put_str((const char *)cur_phase);
	put_str(" bytes [");
	for (i = 0; i < cur_len && i < UP_INSN_MAX; i++) {
		if (i)
			put_str(" ");
		put_hex(cur_bytes[i], 2);
	}
	put_str("]\n");
}

/* prints the reproducer, then lets the previous handler (cmocka's) have the signal */
static void crash_handler(int sig)
{
	put_str("\ntest_insn_bounds: caught signal ");
	put_dec((unsigned)sig);
	put_str("\n");
	print_reproducer();
	sigaction(sig, &old_actions[sig], NULL);
	if (old_actions[sig].sa_handler == SIG_DFL || old_actions[sig].sa_handler == SIG_IGN)
		raise(sig);
	/* returning re-executes the fault, now under the previous handler */
}

static const int crash_sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };

static void install_crash_handler(void)
{
	struct sigaction sa;
	unsigned i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = crash_handler;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(crash_sigs) / sizeof(crash_sigs[0]); i++)
		sigaction(crash_sigs[i], &sa, &old_actions[crash_sigs[i]]);
}

static void remove_crash_handler(void)
{
	unsigned i;

	for (i = 0; i < sizeof(crash_sigs) / sizeof(crash_sigs[0]); i++)
		sigaction(crash_sigs[i], &old_actions[crash_sigs[i]], NULL);
}

static unsigned failures;

static void bfail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void bfail(const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	failures++;
	if (failures > 30)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	print_error("FAIL: %s\n", msg);
	print_reproducer();
}

/* ---- random input -------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* random bytes, half of the time shaped like an instruction to reach deeper paths */
static unsigned gen(uint8_t *b, unsigned mode)
{
	static const uint8_t prefixes[] = { 0x66, 0x67, 0xf0, 0xf2, 0xf3, 0x2e,
					    0x3e, 0x26, 0x36, 0x64, 0x65 };
	unsigned n = (unsigned)(rng() % (UP_INSN_MAX + 1)), at = 0, i, k;

	for (i = 0; i < n; i++)
		b[i] = (uint8_t)rng();
	if (n == 0 || rng() % 2)
		return n;
	k = (unsigned)(rng() % 4);
	for (i = 0; i < k && at < n; i++)
		b[at++] = prefixes[rng() % sizeof(prefixes)];
	if (mode == 64 && at < n && rng() % 3 == 0)
		b[at++] = (uint8_t)(0x40 | (rng() & 0xf));
	if (at < n) {
		switch (rng() % 8) {
		case 0:
			b[at++] = 0x0f;
			break;
		case 1:
			b[at++] = 0x0f;
			if (at < n)
				b[at++] = rng() % 2 ? 0x38 : 0x3a;
			break;
		case 2:
			b[at++] = 0xc4;
			break;
		case 3:
			b[at++] = 0xc5;
			break;
		case 4:
			b[at++] = 0x62;
			break;
		case 5:
			b[at++] = 0x8f;
			break;
		case 6: /* the branch and stack opcodes the analyzer special-cases */
		{
			static const uint8_t ops[] = { 0xe8, 0xe9, 0xeb, 0xe0, 0xe1, 0xe2, 0xe3,
						       0xc2, 0xc3, 0xff, 0x50, 0x58, 0x6a, 0x68,
						       0x70, 0x7f, 0x9a, 0xea, 0xcd, 0xcc };
			b[at++] = ops[rng() % sizeof(ops)];
			break;
		}
		default:
			break;
		}
	}
	/* a rip-relative modrm now and then */
	if (at + 1 < n && rng() % 4 == 0)
		b[at + 1] = (uint8_t)((rng() & 0x38) | 0x05);
	return n;
}

/* ---- the properties -------------------------------------------------------------------- */

static bool reason_matches_plan(enum up_insn_plan plan, enum up_insn_reason why)
{
	switch (plan) {
	case UP_PLAN_EMULATE:
		return why >= UP_WHY_EMU_NOP && why <= UP_WHY_EMU_POP;
	case UP_PLAN_XOL:
		return why == UP_WHY_XOL_PLAIN || why == UP_WHY_XOL_RIPREL;
	case UP_PLAN_STEP:
		return why >= UP_WHY_STEP_SYSCALL && why <= UP_WHY_STEP_RIPREL_FAR;
	case UP_PLAN_REJECT:
		return why >= UP_WHY_REJECT_FIRST && why < UP_WHY_COUNT;
	}
	return false;
}

static ZydisDecoder zdec64, zdec32;

static void check_one(const uint8_t *src, unsigned n, unsigned mode, uint64_t vaddr,
		      unsigned *decodable)
{
	enum up_insn_mode m = mode == 64 ? UP_MODE_64 : UP_MODE_32;
	ZydisDecoder *zd = mode == 64 ? &zdec64 : &zdec32;
	struct up_insn *insn = guarded_end(&g_insn, sizeof(*insn));
	struct up_reloc *rel = guarded_end(&g_reloc, sizeof(*rel));
	uint8_t *buf = guarded_end(&g_buf, n);
	ZydisDecodedInstruction zi, zr;
	ZyanStatus zs;
	unsigned len, k;
	int rc;

	memcpy(cur_bytes, src, n);
	cur_len = n;
	cur_mode = mode;
	memmove(buf, src, n);

	cur_phase = "analyze";
	rc = up_insn_analyze(insn, buf, n, vaddr, m);
	if (rc) {
		bfail("up_insn_analyze returned %d", rc);
		return;
	}
	cur_phase = "length";
	len = up_insn_length(buf, n, m);
	if (insn->length > n)
		bfail("length %u > buffer %u", insn->length, n);
	if (len != insn->length)
		bfail("up_insn_length %u, up_insn_analyze %u", len, insn->length);
	if ((unsigned)insn->plan > UP_PLAN_REJECT || (unsigned)insn->reason >= UP_WHY_COUNT ||
	    insn->reason == UP_WHY_NONE || !reason_matches_plan(insn->plan, insn->reason))
		bfail("plan %d with reason %d", insn->plan, insn->reason);
	if ((insn->length == 0) != (insn->plan == UP_PLAN_REJECT &&
				    (insn->reason == UP_WHY_REJECT_INVALID ||
				     insn->reason == UP_WHY_REJECT_TRUNCATED)))
		bfail("length %u with plan %s reason %s", insn->length,
		      up_insn_plan_str(insn->plan), up_insn_reason_name(insn->reason));

	cur_phase = "zydis";
	zs = ZydisDecoderDecodeInstruction(zd, NULL, buf, n, &zi);
	if (ZYAN_SUCCESS(zs)) {
		if (insn->length != zi.length)
			bfail("length %u, Zydis decodes %u bytes", insn->length, zi.length);
	} else if (zs == ZYDIS_STATUS_NO_MORE_DATA) {
		if (insn->reason != UP_WHY_REJECT_TRUNCATED)
			bfail("Zydis: truncated, the analyzer says %s",
			      up_insn_reason_name(insn->reason));
	} else if (insn->reason != UP_WHY_REJECT_INVALID) {
		bfail("Zydis: invalid (status 0x%x), the analyzer says %s", zs,
		      up_insn_reason_name(insn->reason));
	}
	if (insn->length == 0)
		return;
	++*decodable;

	cur_phase = "format";
	{
		char *text = guarded_end(&g_text, 24);

		if (up_insn_format(insn, text, 24) != text || !memchr(text, '\0', 24))
			bfail("up_insn_format did not terminate its buffer");
	}

	if (insn->plan != UP_PLAN_REJECT) {
		uint64_t slot = vaddr + 0x100000;

		if (mode == 32)
			slot &= 0xffffffffULL;
		cur_phase = "reloc";
		memset(rel, 0xa5, sizeof(*rel));
		rc = up_reloc_build(insn, slot, rel);
		if (rc == 0) {
			if (rel->len > UP_SLOT_MAX || rel->insn_len == 0 || rel->insn_len > rel->len ||
			    rel->insn_len > UP_INSN_MAX)
				bfail("up_reloc_build: len %u insn_len %u", rel->len, rel->insn_len);
			/* past len: untouched, or cleared with the whole struct, never code */
			for (k = rel->len; k < UP_SLOT_MAX; k++)
				if (rel->code[k] != rel->code[rel->len < UP_SLOT_MAX ? rel->len : 0] ||
				    (rel->code[k] != 0xa5 && rel->code[k] != 0)) {
					bfail("up_reloc_build wrote code[%u] past len %u", k, rel->len);
					break;
				}
			zs = ZydisDecoderDecodeInstruction(zd, NULL, rel->code, rel->insn_len, &zr);
			if (!ZYAN_SUCCESS(zs) || zr.length != rel->insn_len ||
			    zr.mnemonic != zi.mnemonic) {
				char hex[3 * UP_SLOT_MAX];

				bfail("relocated code [%s] decodes to %s (status 0x%x), not %s",
				      itu_hex(rel->code, rel->insn_len, hex, sizeof(hex)),
				      ZYAN_SUCCESS(zs) ? ZydisMnemonicGetString(zr.mnemonic) : "-", zs,
				      ZydisMnemonicGetString(zi.mnemonic));
			}
		} else if (rc != -ERANGE) {
			bfail("up_reloc_build returned %d for a %s instruction", rc,
			      up_insn_plan_str(insn->plan));
		}
	}

	/* every proper prefix is truncated */
	cur_phase = "prefixes";
	len = insn->length;
	for (k = 1; k < len; k++) {
		uint8_t *p = guarded_end(&g_buf, k);

		memmove(p, src, k);
		cur_len = k;
		rc = up_insn_analyze(insn, p, k, vaddr, m);
		if (rc || insn->length != 0 || insn->plan != UP_PLAN_REJECT ||
		    insn->reason != UP_WHY_REJECT_TRUNCATED) {
			bfail("the first %u of %u bytes: length %u reason %s, expected truncated", k,
			      len, insn->length, up_insn_reason_name(insn->reason));
			break;
		}
		if (up_insn_length(p, k, m) != 0)
			bfail("up_insn_length of the first %u of %u bytes is not 0", k, len);
	}
	cur_len = n;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : dflt;
}

static void test_random(void **state)
{
	uint64_t seed = env_u64("UPROBE_INSN_SEED", DEFAULT_SEED);
	unsigned iters = (unsigned)env_u64("UPROBE_INSN_ITERS", DEFAULT_ITERS);
	unsigned only = (unsigned)env_u64("UPROBE_INSN_ITER", ~0u);
	unsigned i, decodable = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	failures = 0;
	cur_seed = seed;
	rng_state = seed;
	install_crash_handler();
	for (i = 0; i < iters && failures <= 30; i++) {
		uint8_t b64[UP_INSN_MAX], b32[UP_INSN_MAX];
		unsigned n64, n32;
		uint64_t va64, va32;

		/* everything drawn for one iteration comes from the seed and i alone */
		rng_state = seed ^ (0x9e3779b97f4a7c15ULL * (i + 1));
		n64 = gen(b64, 64);
		n32 = gen(b32, 32);
		va64 = rng() & 0x00007fffffffffffULL;
		va32 = rng() & 0xffffffffULL;
		if (only != ~0u && i != only)
			continue;
		cur_iter = i;
		check_one(b64, n64, 64, va64, &decodable);
		check_one(b32, n32, 32, va32, &decodable);
		/* the same bytes in the other mode too */
		check_one(b64, n64, 32, va32, &decodable);
		check_one(b32, n32, 64, va64, &decodable);
	}
	remove_crash_handler();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	print_message("seed 0x%" PRIx64 ": %u iterations, %u decodable of %u buffers, %.2f s\n",
		      seed, i, decodable, 4 * i,
		      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	if (failures)
		fail_msg("%u failures (rerun one with UPROBE_INSN_SEED=0x%" PRIx64
			 " UPROBE_INSN_ITER=<iteration>)",
			 failures, seed);
	/* the generator really reaches decodable instructions, not only garbage */
	assert_true(only != ~0u || decodable > i);
}

/* Every valid instruction of a fixed list, cut at every length. */
static void test_known_prefixes(void **state)
{
	static const struct {
		const char *b;
		unsigned n;
	} k[] = {
		{ "\x48\x81\x3d\x10\x00\x00\x00\x78\x56\x34\x12", 11 },
		{ "\x62\xf1\x7d\x48\x70\x0d\x10\x00\x00\x00\x1b", 11 },
		{ "\xc4\xe3\x79\x0f\x05\x10\x00\x00\x00\x08", 10 },
		{ "\x66\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00", 11 },
		{ "\xf0\x48\x0f\xb1\x0d\x10\x00\x00\x00", 9 },
		{ "\x48\xa1\x88\x77\x66\x55\x44\x33\x22\x11", 10 },
		{ "\xe8\x00\x00\x00\x00", 5 },
		{ "\x0f\x84\x00\x10\x00\x00", 6 },
		{ "\xc7\xf8\x00\x00\x00\x00", 6 },
		{ "\xf3\x0f\x1e\xfa", 4 },
	};
	unsigned i, decodable = 0;

	failures = 0;
	cur_seed = 0;
	install_crash_handler();
	for (i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		cur_iter = i;
		check_one((const uint8_t *)k[i].b, k[i].n, 64, 0x7f0000001000ULL, &decodable);
	}
	remove_crash_handler();
	assert_int_equal(failures, 0);
	assert_int_equal(decodable, sizeof(k) / sizeof(k[0]));
}

static int setup(void **state)
{
	if (guarded_map(&g_buf) || guarded_map(&g_insn) || guarded_map(&g_reloc) ||
	    guarded_map(&g_text)) {
		print_error("cannot map guarded pages: %s\n", strerror(errno));
		return -1;
	}
	ZydisDecoderInit(&zdec64, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ZydisDecoderInit(&zdec32, ZYDIS_MACHINE_MODE_LONG_COMPAT_32, ZYDIS_STACK_WIDTH_32);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_prefixes),
		cmocka_unit_test(test_random),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
