// SPDX-License-Identifier: MIT
/*
 * Output formats (src/trace/format.c).  The seed's D/S/A lines are checked byte for
 * byte against the sample trace in seeds/008's documentation, given the sample
 * program's memory and registers (its stack, global_str, global_str_p, foo's five
 * arguments); the kernel's event lines against trace_output.c/trace_uprobe.c's
 * layout; JSON against exact strings.  With "--json-out FILE" the program writes a
 * set of JSON lines instead, which ctest then hands to python3 -m json.tool and to a
 * content check (tests/trace.cmake).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>

#include <cmocka.h>

#include "trace/fetch.h"
#include "trace/format.h"
#include "trace/spec.h"

struct region {
	uint64_t addr;
	const void *bytes;
	size_t len;
};

struct fake_mem {
	struct region r[8];
	int n;
};

static int fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct fake_mem *m = ctx;

	for (int i = 0; i < m->n; i++) {
		const struct region *r = &m->r[i];

		if (addr >= r->addr && len <= r->len && addr - r->addr <= r->len - len) {
			memcpy(buf, (const char *)r->bytes + (addr - r->addr), len);
			return 0;
		}
	}
	return -EFAULT;
}

/* ---- the sample program of seeds/008, stopped at foo() ----------------------------- */

#define SAMPLE_SP 0x7fffd934eba8ull

/* main's frame as the seed's trace dumps it: return address, str[], a..e, ... */
static const uint8_t sample_stack[100] = {
	0x38, 0x05, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x54, 0x68, 0x69, 0x73, 0x20, 0x73,
	0x74, 0x72, 0x69, 0x6e, 0x67, 0x20, 0x69, 0x73, 0x20, 0x6f, 0x6e, 0x20, 0x74, 0x68,
	0x65, 0x20, 0x73, 0x74, 0x61, 0x63, 0x6b, 0x20, 0x69, 0x6e, 0x20, 0x6d, 0x61, 0x69,
	0x6e, 0x00, 0x00, 0x00, 0x00, 0x01, 0xc0, 0xbb, 0xc1, 0x4a, 0x3b, 0x00, 0x00, 0x00,
	0x04, 0x00, 0x00, 0x00, 0xc8, 0x00, 0x00, 0x00, 0xed, 0x00, 0x00, 0xff, 0x00, 0x00,
	0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x48, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x74, 0xd9,
	0xe1, 0x4a,
};
static const char global_str[16] = "Global String";	      /* at 0x600960, then zeros */
static const uint8_t global_str_p[8] = { 0x48, 0x06, 0x40 }; /* at 0x600958: 0x400648 */
static const char rodata[24] = "Global String pointer";      /* at 0x400648 */

static struct fake_mem sample_mem;
static struct user_regs_struct sample_regs;
static struct up_fetch_env sample_env;

static void sample_setup(void)
{
	sample_mem = (struct fake_mem){
		.r = { { SAMPLE_SP, sample_stack, sizeof(sample_stack) },
		       { 0x600960, global_str, sizeof(global_str) },
		       { 0x600958, global_str_p, sizeof(global_str_p) },
		       { 0x400648, rodata, sizeof(rodata) } },
		.n = 4,
	};
	memset(&sample_regs, 0, sizeof(sample_regs));
	/* foo(a, b, c, d, e) with a = 4, b = 200, c = 0xff0000ed, d = -1, e = 'H' */
	sample_regs.rdi = 4;
	sample_regs.rsi = 200;
	sample_regs.rdx = 0xff0000ed;
	sample_regs.rcx = UINT64_MAX;
	sample_regs.r8 = 'H';
	sample_regs.rsp = SAMPLE_SP;
	sample_regs.rip = 0x400498;
	sample_env = (struct up_fetch_env){ .regs = &sample_regs, .read = fake_read,
					    .ctx = &sample_mem };
}

/* The seed's documented trace, in order: S 100, D 0x600960 15, D 0x600958 8, A 5,
 * and, after the probes were replaced, D 0x400648 24. */
static const char *const seed_trace[] = {
	"           <...>-3906  [001]   391.531431: : 0x400498: S 0x7fffd934eba8: 38 05 40 00 00 00 00 00  8.@.....\n",
	"           <...>-3906  [001]   391.531436: : 0x400498: S 0x7fffd934ebb0: 54 68 69 73 20 73 74 72  This str\n",
	"           <...>-3906  [001]   391.531438: : 0x400498: S 0x7fffd934ebb8: 69 6e 67 20 69 73 20 6f  ing is o\n",
	"           <...>-3906  [001]   391.531439: : 0x400498: S 0x7fffd934ebc0: 6e 20 74 68 65 20 73 74  n the st\n",
	"           <...>-3906  [001]   391.531441: : 0x400498: S 0x7fffd934ebc8: 61 63 6b 20 69 6e 20 6d  ack in m\n",
	"           <...>-3906  [001]   391.531443: : 0x400498: S 0x7fffd934ebd0: 61 69 6e 00 00 00 00 01  ain.....\n",
	"           <...>-3906  [001]   391.531445: : 0x400498: S 0x7fffd934ebd8: c0 bb c1 4a 3b 00 00 00  ...J;...\n",
	"           <...>-3906  [001]   391.531446: : 0x400498: S 0x7fffd934ebe0: 04 00 00 00 c8 00 00 00  ........\n",
	"           <...>-3906  [001]   391.531448: : 0x400498: S 0x7fffd934ebe8: ed 00 00 ff 00 00 00 00  ........\n",
	"           <...>-3906  [001]   391.531450: : 0x400498: S 0x7fffd934ebf0: ff ff ff ff ff ff ff ff  ........\n",
	"           <...>-3906  [001]   391.531452: : 0x400498: S 0x7fffd934ebf8: 00 00 00 00 00 00 00 48  .......H\n",
	"           <...>-3906  [001]   391.531453: : 0x400498: S 0x7fffd934ec00: 00 00 00 00 00 00 00 00  ........\n",
	"           <...>-3906  [001]   391.531455: : 0x400498: S 0x7fffd934ec08: 74 d9 e1 4a              t..J\n",
	"           <...>-3906  [001]   391.531489: : 0x400498: D 0x600960: 47 6c 6f 62 61 6c 20 53  Global S\n",
	"           <...>-3906  [001]   391.531491: : 0x400498: D 0x600968: 74 72 69 6e 67 00 00     tring..\n",
	"           <...>-3906  [001]   391.531500: : 0x400498: D 0x600958: 48 06 40 00 00 00 00 00  H.@.....\n",
	"           <...>-3906  [001]   391.531504: : 0x400498: A ARG 1: 0000000000000004\n",
	"           <...>-3906  [001]   391.531505: : 0x400498: A ARG 2: 00000000000000c8\n",
	"           <...>-3906  [001]   391.531505: : 0x400498: A ARG 3: 00000000ff0000ed\n",
	"           <...>-3906  [001]   391.531506: : 0x400498: A ARG 4: ffffffffffffffff\n",
	"           <...>-3906  [001]   391.531507: : 0x400498: A ARG 5: 0000000000000048\n",
	"           <...>-3906  [001]   442.537669: : 0x400498: D 0x400648: 47 6c 6f 62 61 6c 20 53  Global S\n",
	"           <...>-3906  [001]   442.537674: : 0x400498: D 0x400650: 74 72 69 6e 67 20 70 6f  tring po\n",
	"           <...>-3906  [001]   442.537676: : 0x400498: D 0x400658: 69 6e 74 65 72 00 00 00  inter...\n",
};

/* "391.531431" in a line -> ns */
static uint64_t line_time(const char *line)
{
	unsigned long s, us;

	assert_int_equal(sscanf(strchr(line, ']') + 1, "%lu.%lu", &s, &us), 2);
	return s * 1000000000ull + us * 1000ull;
}

static struct up_fmt_ctx sample_ctx(uint64_t ns)
{
	return (struct up_fmt_ctx){ .comm = NULL, .pid = 3906, .tid = 3906, .cpu = 1,
				    .time_ns = ns };
}

/* Each probe of the seed's example, as its spec, and where its lines start. */
static const struct {
	const char *spec;
	int first, count;
} seed_probes[] = {
	{ "up 3906 0x0000000000400498 S 100", 0, 13 },
	{ "up 3906 0x0000000000400498 D 0000000000600960 15", 13, 2 },
	{ "up 3906 0x0000000000400498 D 0000000000600958 8", 15, 1 },
	{ "up 3906 0x0000000000400498 A 5", 16, 5 },
	{ "up 3906 0x0000000000400498 D 0x0000000000400648 24", 21, 3 },
};

static void test_seed_sample_lines(void **state)
{
	char buf[256];

	sample_setup();
	/* line by line, each with the timestamp the seed's trace shows */
	for (int p = 0; p < 5; p++) {
		struct up_spec s;

		assert_int_equal(up_spec_parse(seed_probes[p].spec, &s, NULL), 0);
		for (int i = 0; i < seed_probes[p].count; i++) {
			const char *want = seed_trace[seed_probes[p].first + i];
			struct up_fmt_ctx ctx = sample_ctx(line_time(want));
			int n;

			if (s.seed_type == UP_SEED_ARGS) {
				uint64_t v;

				assert_int_equal(up_fetch_abi_arg(&sample_env, (unsigned)i + 1, &v), 0);
				n = up_fmt_seed_args(buf, sizeof(buf), &ctx, s.addr, &v, 1);
				/* one argument: it says ARG 1; renumber as the seed's line */
				char *num = strstr(buf, "ARG 1:");

				assert_non_null(num);
				num[4] = (char)('1' + i);
			} else {
				uint64_t base = s.seed_type == UP_SEED_STACK ? SAMPLE_SP : s.daddr;
				uint8_t bytes[8];
				size_t len = s.size - (size_t)i * 8 < 8 ? s.size - (size_t)i * 8 : 8;

				assert_int_equal(fake_read(&sample_mem, base + (uint64_t)i * 8, bytes, len), 0);
				n = up_fmt_seed_dump(buf, sizeof(buf), &ctx, s.addr, (char)s.seed_type,
						     base + (uint64_t)i * 8, bytes, len);
			}
			assert_string_equal(buf, want);
			assert_int_equal(n, strlen(want));
		}
		up_spec_free(&s);
	}
}

static void test_seed_sample_hits(void **state)
{
	/* a whole hit at once: the same lines, with the hit's one timestamp */
	sample_setup();
	for (int p = 0; p < 5; p++) {
		struct up_spec s;
		char buf[4096], want[4096] = "";
		uint64_t t0 = line_time(seed_trace[seed_probes[p].first]);
		struct up_fmt_ctx ctx = sample_ctx(t0);
		char stamp[32];
		int n;

		snprintf(stamp, sizeof(stamp), "%5lu.%06lu", (unsigned long)(t0 / 1000000000u),
			 (unsigned long)(t0 % 1000000000u / 1000u));
		for (int i = 0; i < seed_probes[p].count; i++) {
			const char *line = seed_trace[seed_probes[p].first + i];
			const char *ts = strchr(line, ']') + 2;

			strncat(want, line, (size_t)(ts - line));
			strcat(want, stamp);
			strcat(want, ts + strlen(stamp));
		}
		assert_int_equal(up_spec_parse(seed_probes[p].spec, &s, NULL), 0);
		n = up_fmt_seed_hit(buf, sizeof(buf), &ctx, &s, &sample_env);
		assert_string_equal(buf, want);
		assert_int_equal(n, strlen(want));
		/* cut short: same length, a prefix, terminated */
		assert_int_equal(up_fmt_seed_hit(buf, 50, &ctx, &s, &sample_env), n);
		assert_int_equal(strlen(buf), 49);
		assert_memory_equal(buf, want, 49);
		up_spec_free(&s);
	}
}

static void test_seed_failures(void **state)
{
	struct up_spec s;
	char buf[512];
	struct up_fmt_ctx ctx = sample_ctx(391531500000ull);

	sample_setup();
	/* an unreadable data address: one line, the handler's message */
	assert_int_equal(up_spec_parse("up 3906 400498 D 0 8", &s, NULL), 0);
	up_fmt_seed_hit(buf, sizeof(buf), &ctx, &s, &sample_env);
	assert_string_equal(buf, "           <...>-3906  [001]   391.531500: : 0x400498: D 0x0: "
				 "Data capture failed. Invalid address\n");
	up_spec_free(&s);
	/* partly readable is unreadable: copy_from_user of the whole length failed */
	assert_int_equal(up_spec_parse("up 3906 400498 S 101", &s, NULL), 0);
	up_fmt_seed_hit(buf, sizeof(buf), &ctx, &s, &sample_env);
	assert_string_equal(buf, "           <...>-3906  [001]   391.531500: : 0x400498: S 0x7fffd934eba8: "
				 "Data capture failed. Invalid address\n");
	up_spec_free(&s);
	/* a known comm, a long pid, a big cpu number and time */
	ctx = (struct up_fmt_ctx){ .comm = "sample", .pid = 123456, .tid = 123457, .cpu = 12,
				   .time_ns = 123456789012345678ull };
	up_fmt_seed_prefix(buf, sizeof(buf), &ctx);
	assert_string_equal(buf, "          sample-123457 [012] 123456789.012345: : ");
	/* the event form is not a seed spec, and the reverse */
	assert_int_equal(up_spec_parse("p /bin/x:0", &s, NULL), 0);
	assert_int_equal(up_fmt_seed_hit(buf, sizeof(buf), &ctx, &s, &sample_env), -EINVAL);
	up_spec_free(&s);
	assert_int_equal(up_fmt_seed_dump(buf, sizeof(buf), &ctx, 1, 'A', 2, NULL, 0), -EINVAL);
	up_fmt_seed_header(buf, sizeof(buf));
	assert_string_equal(buf, "# tracer: nop\n#\n"
				 "#           TASK-PID    CPU#    TIMESTAMP  FUNCTION\n"
				 "#              | |       |          |         |\n");
}

static void test_seed_args_32bit(void **state)
{
	/* i386: the seed refused A for 32-bit processes; here they come from the stack */
	static const uint32_t stack32[4] = { 0x8049000, 4, 200, 0xffffffff };
	struct fake_mem m = { .r = { { 0xffffd000, stack32, sizeof(stack32) } }, .n = 1 };
	struct user_regs_struct r = { .rsp = 0xffffd000 };
	struct up_fetch_env env = { .regs = &r, .is32 = true, .read = fake_read, .ctx = &m };
	struct up_fmt_ctx ctx = { .comm = "t32", .tid = 77, .cpu = 0, .time_ns = 5000 };
	struct up_spec s;
	char buf[512];

	assert_int_equal(up_spec_parse("up 77 0x8049100 A 4", &s, NULL), 0);
	up_fmt_seed_hit(buf, sizeof(buf), &ctx, &s, &env);
	assert_string_equal(buf,
			    "             t32-77    [000]     0.000005: : 0x8049100: A ARG 1: 0000000000000004\n"
			    "             t32-77    [000]     0.000005: : 0x8049100: A ARG 2: 00000000000000c8\n"
			    "             t32-77    [000]     0.000005: : 0x8049100: A ARG 3: 00000000ffffffff\n"
			    "             t32-77    [000]     0.000005: : 0x8049100: A ARG 4: 0000000000000000\n");
	up_spec_free(&s);
}

/* ---- the kernel's event lines ------------------------------------------------------ */

static void event_line(const char *spec_text, const struct up_fmt_ctx *ctx, uint64_t addr,
		       uint64_t ret_addr, const struct up_fetch_env *env, char *buf, size_t size,
		       bool json)
{
	struct up_spec s;
	struct up_fetch_value vals[8];
	char arena[256];
	struct up_fmt_event ev = { .addr = addr, .ret_addr = ret_addr, .vals = vals };
	int n;

	assert_int_equal(up_spec_parse(spec_text, &s, NULL), 0);
	assert_int_equal(up_fetch_eval_all(&s, env, vals, arena, sizeof(arena)), 0);
	n = json ? up_fmt_event_json(buf, size, ctx, &s, &ev)
		 : up_fmt_event_text(buf, size, ctx, &s, &ev);
	assert_int_equal(n, strlen(buf));
	up_spec_free(&s);
}

static void test_event_text(void **state)
{
	struct user_regs_struct r = { .rip = 0x446420, .rax = 0x79 };
	struct fake_mem nothing = { .n = 0 };
	struct up_fetch_env env = { .regs = &r, .read = fake_read, .ctx = &nothing, .comm = "zsh" };
	struct up_fmt_ctx ctx = { .comm = "zsh", .pid = 24842, .tid = 24842, .cpu = 6,
				  .time_ns = 258544995456000ull };
	char buf[512];

	/* uprobetracer.rst's zfree example, in today's layout */
	event_line("p:zfree_entry /bin/zsh:0x46420 %ip %ax", &ctx, 0x446420, 0, &env, buf,
		   sizeof(buf), false);
	assert_string_equal(buf, "             zsh-24842   [006] 258544.995456: zfree_entry: "
				 "(0x446420) arg1=0x446420 arg2=0x79\n");
	r.rip = 0x446540;
	r.rax = 0;
	ctx.cpu = 7;
	ctx.time_ns = 258545000270000ull;
	event_line("r:zfree_exit /bin/zsh:0x46420 %ip %ax", &ctx, 0x446420, 0x446540, &env, buf,
		   sizeof(buf), false);
	assert_string_equal(buf, "             zsh-24842   [007] 258545.000270: zfree_exit: "
				 "(0x446540 <- 0x446420) arg1=0x446540 arg2=0x0\n");

	/* typed values, a fault, $comm; a NULL comm prints as the kernel's "<...>" */
	r.rdi = 0;
	r.rax = (uint64_t)-3;
	ctx = (struct up_fmt_ctx){ .comm = NULL, .pid = 1, .tid = 1, .cpu = 0, .time_ns = 999 };
	event_line("r:g/ev 0x401000 rv=$retval:s32 u=%ax:u8 p=+0(%di):u64 s=+0(%di):string c=$comm",
		   &ctx, 0x401000, 0x401234, &env, buf, sizeof(buf), false);
	assert_string_equal(buf, "           <...>-1       [000]     0.000000: ev: (0x401234 <- 0x401000) "
				 "rv=-3 u=253 p=(fault) s=(fault) c=\"zsh\"\n");
	assert_int_equal(up_fmt_event_prefix(buf, sizeof(buf), &ctx), 45);
	up_fmt_event_header(buf, sizeof(buf));
	assert_non_null(strstr(buf, "TASK-PID"));
}

/* ---- JSON -------------------------------------------------------------------------- */

static void test_json_string(void **state)
{
	static const struct {
		const char *in;
		size_t n;
		const char *want;
	} cases[] = {
		{ "plain", 5, "\"plain\"" },
		{ "q\"b\\s/", 6, "\"q\\\"b\\\\s/\"" },
		{ "\n\r\t\b\f\x01\x1f\x7f", 8, "\"\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\"" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
		{ "\xff\xc3(\xe0\x80\x80\xed\xa0\x80\xf4\x90\x80\x80", 13,
		  "\"\\u00ff\\u00c3(\\u00e0\\u0080\\u0080\\u00ed\\u00a0\\u0080\\u00f4\\u0090\\u0080\\u0080\"" },
		{ "\xe2\x82", 2, "\"\\u00e2\\u0082\"" }, /* cut short */
		{ "a\0b", 3, "\"a\\u0000b\"" },
		{ "", 0, "\"\"" },
	};
	char buf[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = up_fmt_json_string(buf, sizeof(buf), cases[i].in, cases[i].n);

		assert_string_equal(buf, cases[i].want);
		assert_int_equal(n, strlen(cases[i].want));
	}
}

static void test_event_json(void **state)
{
	static const char str[] = "say \"hi\"\n";
	struct fake_mem m = { .r = { { 0x601000, str, sizeof(str) } }, .n = 1 };
	struct user_regs_struct r = { .rdi = 0x601000, .rsi = (uint64_t)-7, .rax = 42 };
	struct up_fetch_env env = { .regs = &r, .read = fake_read, .ctx = &m, .comm = "a\"b" };
	struct up_fmt_ctx ctx = { .comm = "a\"b", .pid = 10, .tid = 11, .cpu = 1,
				  .time_ns = 1234567890123ull };
	char buf[1024];

	event_line("p:grp/ev /bin/x:0x10 s=+0(%di):string n=%si:s64 u=%si:u8 x=%di "
		   "f=+0(%ax):u32 b=+0(%di):b4@4/8 c=$comm",
		   &ctx, 0x401010, 0, &env, buf, sizeof(buf), true);
	assert_string_equal(buf, "{\"time_ns\":1234567890123,\"pid\":10,\"tid\":11,\"cpu\":1,"
				 "\"comm\":\"a\\\"b\",\"event\":\"grp/ev\",\"addr\":\"0x401010\","
				 "\"args\":{\"s\":\"say \\\"hi\\\"\\n\",\"n\":-7,\"u\":249,"
				 "\"x\":\"0x601000\",\"f\":null,\"b\":7,\"c\":\"a\\\"b\"}}\n");
	ctx.comm = NULL;
	event_line("r /bin/x:0x10", &ctx, 0x401010, 0x401500, &env, buf, sizeof(buf), true);
	assert_string_equal(buf, "{\"time_ns\":1234567890123,\"pid\":10,\"tid\":11,\"cpu\":1,"
				 "\"comm\":\"\",\"event\":\"uprobes/p_x_0x10\",\"addr\":\"0x401010\","
				 "\"ret_addr\":\"0x401500\",\"args\":{}}\n");
}

/* $ustack: its frames under the line (" => "), named or in hex; in JSON an array. */
static void test_event_stack(void **state)
{
	uint64_t chain[2] = { 0, 0x401777 }; /* one frame: [bp] = 0, [bp + 8] */
	struct fake_mem m = { .r = { { 0x7ff000, chain, sizeof(chain) } }, .n = 1 };
	struct user_regs_struct r = { .rip = 0x401010, .rbp = 0x7ff000, .rdi = 5 };
	struct up_fetch_env env = { .regs = &r, .read = fake_read, .ctx = &m };
	struct up_fmt_ctx ctx = { .comm = "x", .pid = 3, .tid = 3, .cpu = 0, .time_ns = 0 };
	struct up_spec s;
	struct up_fetch_value vals[2];
	uint64_t arena[16];
	char buf[512];
	struct up_fmt_event ev = { .addr = 0x401010, .vals = vals };

	event_line("p:g/ev /bin/x:0x10 st=$ustack n=%di:u32", &ctx, 0x401010, 0, &env, buf,
		   sizeof(buf), false);
	assert_string_equal(buf, "               x-3       [000]     0.000000: ev: (0x401010) n=5\n"
				 " => 0x401010\n => 0x401777\n");
	event_line("p:g/ev /bin/x:0x10 st=$ustack n=%di:u32", &ctx, 0x401010, 0, &env, buf,
		   sizeof(buf), true);
	assert_non_null(strstr(buf, "\"args\":{\"st\":[\"0x401010\",\"0x401777\"],\"n\":5}}"));
	/* named by the tracer */
	assert_int_equal(up_spec_parse("p:g/ev /bin/x:0x10 st=$ustack", &s, NULL), 0);
	assert_int_equal(up_fetch_eval_all(&s, &env, vals, (char *)arena, sizeof(arena)), 0);
	vals[0].str = "main+0x0 [x]\nstart+0x9 [x]";
	vals[0].str_len = strlen(vals[0].str);
	up_fmt_event_text(buf, sizeof(buf), &ctx, &s, &ev);
	assert_string_equal(buf, "               x-3       [000]     0.000000: ev: (0x401010)\n"
				 " => main+0x0 [x]\n => start+0x9 [x]\n");
	up_fmt_event_json(buf, sizeof(buf), &ctx, &s, &ev);
	assert_non_null(strstr(buf, "\"st\":[\"main+0x0 [x]\",\"start+0x9 [x]\"]"));
	up_spec_free(&s);
}

static void test_seed_json(void **state)
{
	struct up_spec s;
	char buf[1024];
	struct up_fmt_ctx ctx = sample_ctx(391531489000ull);

	sample_setup();
	assert_int_equal(up_spec_parse("up 3906 400498 D 600960 15", &s, NULL), 0);
	up_fmt_seed_hit_json(buf, sizeof(buf), &ctx, &s, &sample_env);
	assert_string_equal(buf, "{\"time_ns\":391531489000,\"pid\":3906,\"tid\":3906,\"cpu\":1,"
				 "\"comm\":\"\",\"event\":\"up/D\",\"addr\":\"0x400498\",\"type\":\"D\","
				 "\"data_addr\":\"0x600960\",\"data\":\"476c6f62616c20537472696e670000\"}\n");
	up_spec_free(&s);
	assert_int_equal(up_spec_parse("up 3906 400498 S 200", &s, NULL), 0);
	up_fmt_seed_hit_json(buf, sizeof(buf), &ctx, &s, &sample_env);
	assert_non_null(strstr(buf, "\"type\":\"S\",\"data_addr\":\"0x7fffd934eba8\",\"data\":null}\n"));
	up_spec_free(&s);
	assert_int_equal(up_spec_parse("up 3906 400498 A 2", &s, NULL), 0);
	up_fmt_seed_hit_json(buf, sizeof(buf), &ctx, &s, &sample_env);
	assert_non_null(strstr(buf, "\"type\":\"A\",\"args\":[\"0x0000000000000004\","
				    "\"0x00000000000000c8\"]}\n"));
	up_spec_free(&s);
}

/* ---- --json-out: lines for python3 -m json.tool ------------------------------------ */

static int json_out(const char *path)
{
	static const char str[] = "tab\there \"quoted\" back\\slash \x01 caf\xc3\xa9 \xff";
	struct fake_mem m = { .r = { { 0x601000, str, sizeof(str) } }, .n = 1 };
	struct user_regs_struct r = { .rdi = 0x601000, .rsi = (uint64_t)-7, .rax = UINT64_MAX };
	struct up_fetch_env env = { .regs = &r, .read = fake_read, .ctx = &m, .comm = "json\"test" };
	struct up_fmt_ctx ctx = { .comm = "json\"test", .pid = 100, .tid = 101, .cpu = 3,
				  .time_ns = 42 };
	static const char *const specs[] = {
		"p:trace/entry /bin/x:0x10 s=+0(%di):string n=%si:s64 u=%ax:u64 x=%di f=+0(%si):u8 "
		"c=$comm b=+0(%di):b3@1/8 e=+0(%si):string",
		"r:trace/exit /bin/x:0x10 rv=$retval:s32 rvx=$retval",
		"p 0x401000",
	};
	FILE *f = fopen(path, "w");
	char buf[2048];
	struct up_spec s;

	if (!f)
		return 1;
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct up_fetch_value vals[16];
		char arena[512];
		struct up_fmt_event ev = { .addr = 0x401010, .ret_addr = 0x401800, .vals = vals };

		if (up_spec_parse(specs[i], &s, NULL) ||
		    up_fetch_eval_all(&s, &env, vals, arena, sizeof(arena)) ||
		    up_fmt_event_json(buf, sizeof(buf), &ctx, &s, &ev) < 0)
			return 1;
		fputs(buf, f);
		up_spec_free(&s);
	}
	sample_setup();
	static const char *const seeds[] = { "up 3906 400498 S 16", "up 3906 400498 D 0 8",
					     "up 3906 400498 A 5" };
	for (size_t i = 0; i < 3; i++) {
		if (up_spec_parse(seeds[i], &s, NULL) ||
		    up_fmt_seed_hit_json(buf, sizeof(buf), &ctx, &s, &sample_env) < 0)
			return 1;
		fputs(buf, f);
		up_spec_free(&s);
	}
	return fclose(f) ? 1 : 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seed_sample_lines), cmocka_unit_test(test_seed_sample_hits),
		cmocka_unit_test(test_seed_failures),	  cmocka_unit_test(test_seed_args_32bit),
		cmocka_unit_test(test_event_text),	  cmocka_unit_test(test_json_string),
		cmocka_unit_test(test_event_json),	  cmocka_unit_test(test_seed_json),
		cmocka_unit_test(test_event_stack),
	};

	if (argc == 3 && !strcmp(argv[1], "--json-out"))
		return json_out(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
