// SPDX-License-Identifier: MIT
/*
 * Hist triggers (src/trace/hist.c): parsing (fields, modifiers, sort, size, name, the
 * filter, with and without the event in front), every refusal at the right column,
 * binding to an event's arguments, the key arithmetic shared with the agent, tables
 * (merge, drop, clone, a full table, sums, extremes, averages, signed extremes), and the
 * three outputs: the kernel's hist file byte for byte, JSON, and bpftrace's bars.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trace/hist.h"

static struct up_spec spec_of(const char *text)
{
	struct up_spec s;
	struct up_spec_err e;

	assert_int_equal(up_spec_parse(text, &s, &e), 0);
	return s;
}

static void parse_ok(const char *text, bool with_event, struct up_hist *h)
{
	struct up_spec_err e = { 0 };
	int rc = up_hist_parse(text, with_event, h, &e);

	if (rc)
		print_error("'%s': %s at %d\n", text, e.msg, e.pos);
	assert_int_equal(rc, 0);
}

/* refused, at column pos, with a message containing msg */
static void parse_bad(const char *text, int pos, const char *msg)
{
	struct up_hist h;
	struct up_spec_err e = { 0 };

	if (up_hist_parse(text, true, &h, &e) != -EINVAL)
		print_error("'%s' was taken\n", text);
	assert_int_equal(up_hist_parse(text, true, &h, &e), -EINVAL);
	if (e.pos != pos || !strstr(e.msg, msg))
		print_error("'%s': at %d '%s', expected %d '%s'\n", text, e.pos, e.msg, pos, msg);
	assert_int_equal(e.pos, pos);
	assert_non_null(strstr(e.msg, msg));
}

static char *printed(const struct up_hist *h, const struct up_hist_table *t, enum up_hist_style s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(up_hist_print(h, t, s, f), 0);
	fclose(f);
	return buf;
}

static void test_parse(void **state)
{
	struct up_hist h;
	char info[256];

	(void)state;
	parse_ok("libc/malloc:hist:keys=size.log2", true, &h);
	assert_string_equal(h.group, "libc");
	assert_string_equal(h.event, "malloc");
	assert_int_equal(h.nkeys, 1);
	assert_string_equal(h.key[0].name, "size");
	assert_int_equal(h.key[0].mod, UP_HIST_MOD_LOG2);
	assert_int_equal(h.size, 2048);
	assert_int_equal(h.nsort, 1);
	assert_int_equal(h.sort[0].src, UP_HIST_SRC_HITCOUNT);
	up_hist_trigger_info(&h, info, sizeof(info));
	assert_string_equal(info, "hist:keys=size.log2:vals=hitcount:sort=hitcount:size=2048 [active]");
	up_hist_free(&h);

	parse_ok("hist:name=big:key=a.buckets=100,common_pid:values=hitcount,b,b.max,c.avg:"
		 "sort=b.descending,a:size=1000 if b > 10 && a < 5",
		 false, &h);
	assert_string_equal(h.event, "");
	assert_string_equal(h.name, "big");
	assert_int_equal(h.nkeys, 2);
	assert_int_equal(h.key[0].buckets, 100);
	assert_int_equal(h.key[1].src, UP_HIST_SRC_PID);
	assert_int_equal(h.nvals, 3); /* hitcount is always there, not a val of its own */
	assert_int_equal(h.val[0].op, UP_HIST_OP_SUM);
	assert_int_equal(h.val[1].op, UP_HIST_OP_MAX);
	assert_int_equal(h.val[2].op, UP_HIST_OP_AVG);
	assert_int_equal(h.nsort, 2);
	assert_true(h.sort[0].is_val && h.sort[0].descending);
	assert_int_equal(h.sort[0].field, 0);
	assert_false(h.sort[1].is_val);
	assert_int_equal(h.size, 1024); /* a power of two */
	assert_string_equal(h.filter, "b > 10 && a < 5");
	up_hist_trigger_info(&h, info, sizeof(info));
	/* the kernel keeps "name=big" whole, and lists a sort key with its modifier */
	assert_string_equal(info, "hist:name=big:keys=a.buckets=100,common_pid:vals=hitcount,b,"
				  "b.max,c.avg:sort=b.descending,a.buckets=100:size=1024 if b > 10 "
				  "&& a < 5 [active]");
	up_hist_free(&h);

	parse_ok("ev:hist:keys=stacktrace,$duration.log2", true, &h);
	assert_int_equal(h.key[0].src, UP_HIST_SRC_STACK);
	assert_int_equal(h.key[1].src, UP_HIST_SRC_DURATION);
	assert_string_equal(h.group, "");
	up_hist_free(&h);
}

static void test_parse_errors(void **state)
{
	(void)state;
	/*          0         1         2         3
	            0123456789012345678901234567890123456789 */
	parse_bad("ev:hist:keys=size.log3", 18, "Invalid field modifier");
	parse_bad("ev:hist:keys=a,b,c,d", 19, "Too many keys");
	parse_bad("ev:hist:keys=a:size=0", 20, "Invalid size");
	parse_bad("ev:hist:keys=a:size=x", 20, "Invalid size");
	parse_bad("ev:hist:keys=", 8, "Empty assignment");
	parse_bad("ev:hist:vals=a", 3, "needs keys=");
	parse_bad("ev:hist:keys=a,a", 15, "Duplicate field");
	parse_bad("ev:hist:keys=a:sort=b", 20, "Sort field must be a key or a val");
	parse_bad("ev:hist:keys=a:sort=a.up", 22, "Invalid sort modifier");
	parse_bad("ev:hist:keys=a:pause", 15, "Unknown or unsupported hist attribute");
	parse_bad("ev:snapshot", 3, "Unknown trigger command");
	parse_bad("ev:hist:keys=a:vals=stacktrace", 20, "A stack trace can only be a key");
	parse_bad("ev:hist:keys=a.buckets=0", 15, "Invalid field modifier");
	parse_bad("ev:hist:keys=$foo", 13, "Couldn't find variable");
	parse_bad("e-v:hist:keys=a", 0, "Event name must follow the same rules as C identifiers");
	parse_bad("ev:hist:keys=a if ", 15, "The filter is missing after 'if'");
	parse_bad("ev:hist:keys=a:sort=a,a,a", 24, "Too many sort fields");
	parse_bad("ev:hist:keys=a:name=1x", 20, "Histogram name must follow");
}

static void test_resolve(void **state)
{
	struct up_spec p = spec_of("p:g/ev /bin/true:0x10 size=%di:u64 name=+0(%si):string d=%dx:s32");
	struct up_spec r = spec_of("r:g/ret /bin/true:0x10 rv=$retval:s64");
	static const struct {
		const char *trig;
		int pos;
		const char *msg;
	} bad[] = {
		{ "ev:hist:keys=nosuch", 13, "Couldn't find field" },
		{ "ev:hist:keys=size:vals=name", 23, "String type can not be a val" },
		{ "ev:hist:keys=name.log2", 18, "Invalid field modifier: 'name' is a string" },
		{ "ev:hist:keys=$duration", 13, "$duration needs a return probe" },
		{ "ev:hist:keys=hitcount", 13, "Couldn't find field" },
	};
	struct up_spec_err e;
	struct up_hist h;

	(void)state;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		parse_ok(bad[i].trig, true, &h);
		assert_int_equal(up_hist_resolve(&h, &p, &e), -EINVAL);
		assert_int_equal(e.pos, bad[i].pos);
		assert_non_null(strstr(e.msg, bad[i].msg));
		up_hist_free(&h);
	}
	parse_ok("ev:hist:keys=name,size.log2:vals=d.min", true, &h);
	assert_int_equal(up_hist_resolve(&h, &p, &e), 0);
	assert_int_equal(h.key[0].arg, 1);
	assert_true(h.key[0].is_string);
	assert_int_equal(h.key[1].arg, 0);
	assert_true(h.val[0].is_signed);
	assert_non_null(h.base);
	up_hist_free(&h);
	parse_ok("ret:hist:keys=$duration.log2:vals=rv.max", true, &h);
	assert_int_equal(up_hist_resolve(&h, &r, &e), 0);
	up_hist_free(&h);
	parse_ok("ret:hist:keys=$duration.log2floor:vals=$duration", true, &h);
	assert_int_equal(up_hist_resolve(&h, &r, &e), 0);
	assert_int_equal(h.key[0].mod, UP_HIST_MOD_LOG2FLOOR);
	up_hist_free(&h);
	up_spec_free(&p);
	up_spec_free(&r);
}

static void test_key_value(void **state)
{
	static const uint64_t v[] = { 0, 1, 2, 3, 4, 5, 1023, 1024, 1025, UINT64_MAX };
	static const uint64_t log2[] = { 0, 0, 1, 2, 2, 3, 10, 10, 11, 64 };
	struct up_hist_field f = { .mod = UP_HIST_MOD_LOG2 };

	(void)state;
	for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_int_equal(up_hist_key_value(&f, v[i]), log2[i]);
	/* ours, bpftrace's hist buckets: the bit length */
	f.mod = UP_HIST_MOD_LOG2FLOOR;
	assert_int_equal(up_hist_key_value(&f, 0), 0);
	assert_int_equal(up_hist_key_value(&f, 1), 1);
	assert_int_equal(up_hist_key_value(&f, 3), 2);
	assert_int_equal(up_hist_key_value(&f, 1023), 10);
	assert_int_equal(up_hist_key_value(&f, 1024), 11);
	assert_int_equal(up_hist_key_value(&f, UINT64_MAX), 64);
	f.mod = UP_HIST_MOD_BUCKETS;
	f.buckets = 10;
	assert_int_equal(up_hist_key_value(&f, 0), 0);
	assert_int_equal(up_hist_key_value(&f, 9), 0);
	assert_int_equal(up_hist_key_value(&f, 10), 10);
	assert_int_equal(up_hist_key_value(&f, 1234), 1230);
	f.mod = UP_HIST_MOD_HEX;
	assert_int_equal(up_hist_key_value(&f, 1234), 1234);
}

/* a two-key table with a sum, a signed min, a max and an average */
static void test_tables(void **state)
{
	struct up_spec p = spec_of("p:g/ev /bin/true:0x10 a=%di:u64 b=%si:s64");
	struct up_hist h;
	struct up_spec_err e;
	struct up_hist_table *t, *c;
	struct up_hist_key k = { { 0 }, { NULL } };
	uint64_t v[4];
	char *out;

	(void)state;
	parse_ok("ev:hist:keys=a:vals=b,b.min,b.max,b.avg:size=2", true, &h);
	assert_int_equal(up_hist_resolve(&h, &p, &e), 0);
	t = h.base;
	k.num[0] = 7;
	v[0] = v[1] = v[2] = v[3] = (uint64_t)-5;
	assert_int_equal(up_hist_table_add(t, &k, 1, v), 0);
	v[0] = v[1] = v[2] = v[3] = 11;
	assert_int_equal(up_hist_table_add(t, &k, 1, v), 0);
	/* an agent's entry: 3 hits at once, sum 30, min 2, max 20, sum for the average 30 */
	v[0] = 30, v[1] = 2, v[2] = 20, v[3] = 30;
	assert_int_equal(up_hist_table_add(t, &k, 3, v), 0);
	k.num[0] = 1;
	v[0] = v[1] = v[2] = v[3] = 4;
	assert_int_equal(up_hist_table_add(t, &k, 1, v), 0);
	k.num[0] = 99; /* no room: size=2 */
	assert_int_equal(up_hist_table_add(t, &k, 2, v), 0);
	up_hist_table_drop(t, 3);
	assert_int_equal(up_hist_table_entries(t), 2);
	/* as the kernel's Totals: hits that found an entry; the rest are Dropped */
	assert_int_equal(up_hist_table_hits(t), 5 + 1);
	out = printed(&h, t, UP_HIST_TEXT);
	assert_string_equal(out,
			    "# event histogram\n"
			    "#\n"
			    "# trigger info: hist:keys=a:vals=hitcount,b,b.min,b.max,b.avg:sort=hitcount:size=2 [active]\n"
			    "#\n"
			    "\n"
			    "{ a:          1 } hitcount:          1  b:          4  b.min:          4  b.max:          4  b.avg:          4\n"
			    "{ a:          7 } hitcount:          5  b:         36  b.min:         -5  b.max:         20  b.avg:          7\n"
			    "\n"
			    "Totals:\n"
			    "    Hits: 6\n"
			    "    Entries: 2\n"
			    "    Dropped: 5\n");
	free(out);
	/* clone and merge: everything twice */
	c = up_hist_table_clone(t);
	assert_non_null(c);
	assert_int_equal(up_hist_table_merge(c, t), 0);
	assert_int_equal(up_hist_table_hits(c), 12);
	out = printed(&h, c, UP_HIST_JSON);
	assert_non_null(strstr(out, "{\"key\":{\"a\":7},\"hitcount\":10,\"vals\":{\"b\":72,\"b.min\":-5,"
				    "\"b.max\":20,\"b.avg\":7}}"));
	assert_non_null(strstr(out, "\"totals\":{\"hits\":12,\"entries\":2,\"dropped\":10}}\n"));
	free(out);
	up_hist_table_free(c);
	up_hist_free(&h);
	up_spec_free(&p);
}

static void test_text_keys(void **state)
{
	struct up_spec p = spec_of("p:g/ev /bin/true:0x10 size=%di:u64 s=+0(%si):string ip=%ip");
	struct up_hist h;
	struct up_spec_err e;
	struct up_hist_key k = { { 0 }, { NULL } };
	char *out;

	(void)state;
	/* log2, sorted by hitcount ascending, ties by key */
	parse_ok("ev:hist:keys=size.log2", true, &h);
	assert_int_equal(up_hist_resolve(&h, &p, &e), 0);
	for (uint64_t v = 0; v < 40; v++) {
		struct up_hist_key kk = { { up_hist_key_value(&h.key[0], v) }, { NULL } };

		up_hist_table_add(h.base, &kk, 1, NULL);
	}
	out = printed(&h, h.base, UP_HIST_TEXT);
	assert_non_null(strstr(out, "\n\n{ size: ~ 2^1  } hitcount:          1\n"
				    "{ size: ~ 2^0  } hitcount:          2\n"
				    "{ size: ~ 2^2  } hitcount:          2\n"
				    "{ size: ~ 2^3  } hitcount:          4\n"
				    "{ size: ~ 2^6  } hitcount:          7\n"
				    "{ size: ~ 2^4  } hitcount:          8\n"
				    "{ size: ~ 2^5  } hitcount:         16\n"
				    "\nTotals:\n    Hits: 40\n    Entries: 7\n    Dropped: 0\n"));
	free(out);
	out = printed(&h, h.base, UP_HIST_BARS);
	assert_string_equal(out, "@ev:\n"
				 "[0, 1]                 2 |@@@@@@                                              |\n"
				 "(1, 2]                 1 |@@@                                                 |\n"
				 "(2, 4]                 2 |@@@@@@                                              |\n"
				 "(4, 8]                 4 |@@@@@@@@@@@@@                                       |\n"
				 "(8, 16]                8 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n"
				 "(16, 32]              16 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
				 "(32, 64]               7 |@@@@@@@@@@@@@@@@@@@@@@                              |\n"
				 "\n");
	free(out);
	up_hist_free(&h);

	/* a string key and a symbol key; a stack key */
	parse_ok("ev:hist:keys=s,ip.sym", true, &h);
	assert_int_equal(up_hist_resolve(&h, &p, &e), 0);
	k.str[0] = "LANG";
	k.num[1] = 0x401000;
	k.str[1] = "main";
	up_hist_table_add(h.base, &k, 3, NULL);
	out = printed(&h, h.base, UP_HIST_TEXT);
	{
		char want[256];

		/* the kernel's "%s: %-50s" and "%s: [%llx] %-45pS" */
		snprintf(want, sizeof(want), "\n{ s: %-50s, ip: [401000] %-45s } hitcount: %10d\n",
			 "LANG", "main", 3);
		assert_non_null(strstr(out, want));
	}
	free(out);
	up_hist_free(&h);

	parse_ok("ev:hist:keys=stacktrace", true, &h);
	assert_int_equal(up_hist_resolve(&h, &p, &e), 0);
	k.str[0] = "leaf+0x0 [prog]\nvia_a+0x9 [prog]";
	up_hist_table_add(h.base, &k, 2, NULL);
	out = printed(&h, h.base, UP_HIST_TEXT);
	assert_non_null(strstr(out, "\n\n{ common_stacktrace:\n"
				    "         leaf+0x0 [prog]\n"
				    "         via_a+0x9 [prog]\n"
				    "} hitcount:          2\n"));
	free(out);
	out = printed(&h, h.base, UP_HIST_JSON);
	assert_non_null(strstr(out, "\"key\":{\"common_stacktrace\":[\"leaf+0x0 [prog]\",\"via_a+0x9 [prog]\"]}"));
	free(out);
	up_hist_free(&h);
	up_spec_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),	   cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_resolve),	   cmocka_unit_test(test_key_value),
		cmocka_unit_test(test_tables),	   cmocka_unit_test(test_text_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
