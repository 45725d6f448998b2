// SPDX-License-Identifier: MIT
/*
 * Probe spec parsing (src/trace/spec.c): good specs of both forms give the fields the
 * kernel's uprobe_events would give them (names, defaults, types, fetch programs);
 * every refusal points at the offending token with the kernel's reason; the caret
 * rendering and the canonical listing are checked byte for byte.
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

#include "trace/spec.h"

#define REG(f) offsetof(struct user_regs_struct, f)

static void parse_ok(const char *text, struct up_spec *s)
{
	struct up_spec_err err;
	int ret = up_spec_parse(text, s, &err);

	if (ret) {
		char buf[512];

		up_spec_err_format(text, &err, buf, sizeof(buf));
		print_error("unexpected error for '%s':\n%s", text, buf);
	}
	assert_int_equal(ret, 0);
}

/* ---- the seed form ----------------------------------------------------------------- */

static void test_seed_forms(void **state)
{
	static const struct {
		const char *text;
		int pid;
		uint64_t addr;
		char type;
		uint64_t daddr, size;
		const char *listing; /* seed 008's uprobes_seq_show */
	} cases[] = {
		{ "up 6424 0x4004d8 S 100", 6424, 0x4004d8, 'S', 0, 100, "up 6424 0x4004d8 S 100" },
		{ "up 6424 0x4004d8 D 0x7fff6bf587d0 35", 6424, 0x4004d8, 'D', 0x7fff6bf587d0, 35,
		  "up 6424 0x4004d8 D 0x7fff6bf587d0 35" },
		{ "up 6424 4004d8 D 7fff6bf587d0 35", 6424, 0x4004d8, 'D', 0x7fff6bf587d0, 35,
		  "up 6424 0x4004d8 D 0x7fff6bf587d0 35" },
		{ "up 3906 0x0000000000400498 D 0000000000600960 15", 3906, 0x400498, 'D', 0x600960,
		  15, "up 3906 0x400498 D 0x600960 15" },
		{ "up 3906 0x0000000000400498 A 5", 3906, 0x400498, 'A', 0, 5, "up 3906 0x400498 A 5" },
		{ "  up 0 400498 a 6  # all six", 0, 0x400498, 'A', 0, 6, "up 0 0x400498 A 6" },
		{ "up\t1\t0X7F\ts\t1\n", 1, 0x7f, 'S', 0, 1, "up 1 0x7f S 1" },
		{ "up 2 ffffffffffffffff d 0 65536", 2, UINT64_MAX, 'D', 0, 65536,
		  "up 2 0xffffffffffffffff D 0x0 65536" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct up_spec s;
		char buf[128];

		parse_ok(cases[i].text, &s);
		assert_int_equal(s.kind, UP_SPEC_SEED);
		assert_int_equal(s.pid, cases[i].pid);
		assert_int_equal(s.addr, cases[i].addr);
		assert_int_equal(s.seed_type, cases[i].type);
		assert_int_equal(s.daddr, cases[i].daddr);
		assert_int_equal(s.size, cases[i].size);
		assert_int_equal(up_spec_format(&s, buf, sizeof(buf)), strlen(cases[i].listing));
		assert_string_equal(buf, cases[i].listing);
		up_spec_free(&s);
	}
}

/* ---- the event form ---------------------------------------------------------------- */

static void test_event_defaults(void **state)
{
	static const struct {
		const char *text, *group, *event;
		bool ret;
		enum up_spec_target target;
		const char *path, *symbol;
		uint64_t offset, vaddr, ref;
		const char *listing; /* trace_uprobe_show */
	} cases[] = {
		{ "p /bin/bash:0x4245c0", "uprobes", "p_bash_0x4245c0", false, UP_TARGET_OFFSET,
		  "/bin/bash", NULL, 0x4245c0, 0, 0, "p:uprobes/p_bash_0x4245c0 /bin/bash:0x00000000004245c0" },
		/* trace_uprobe.c names return probes 'p_' too */
		{ "r /bin/bash:0x4245c0", "uprobes", "p_bash_0x4245c0", true, UP_TARGET_OFFSET,
		  "/bin/bash", NULL, 0x4245c0, 0, 0, "r:uprobes/p_bash_0x4245c0 /bin/bash:0x00000000004245c0" },
		{ "p:zfree_entry /bin/zsh:0x46420", "uprobes", "zfree_entry", false, UP_TARGET_OFFSET,
		  "/bin/zsh", NULL, 0x46420, 0, 0, "p:uprobes/zfree_entry /bin/zsh:0x0000000000046420" },
		{ "r:grp/ev /lib/x86_64-linux-gnu/libc.so.6:4096", "grp", "ev", true, UP_TARGET_OFFSET,
		  "/lib/x86_64-linux-gnu/libc.so.6", NULL, 4096, 0, 0,
		  "r:grp/ev /lib/x86_64-linux-gnu/libc.so.6:0x0000000000001000" },
		{ "p:grp.ev ./ld-linux-x86-64.so.2:010", "grp", "ev", false, UP_TARGET_OFFSET,
		  "./ld-linux-x86-64.so.2", NULL, 8, 0, 0, "p:grp/ev ./ld-linux-x86-64.so.2:0x0000000000000008" },
		{ "p ld-linux_x86-64.so.2:0x10", "uprobes", "p_ld_0x10", false, UP_TARGET_OFFSET,
		  "ld-linux_x86-64.so.2", NULL, 0x10, 0, 0, "p:uprobes/p_ld_0x10 ld-linux_x86-64.so.2:0x0000000000000010" },
		{ "p /bin/x:0x10%return", "uprobes", "p_x_0x10", true, UP_TARGET_OFFSET, "/bin/x",
		  NULL, 0x10, 0, 0, "r:uprobes/p_x_0x10 /bin/x:0x0000000000000010" },
		{ "p /bin/x:0x10(0x2040)", "uprobes", "p_x_0x10", false, UP_TARGET_OFFSET, "/bin/x",
		  NULL, 0x10, 0, 0x2040, "p:uprobes/p_x_0x10 /bin/x:0x0000000000000010(0x2040)" },
		{ "p /bin/x:0x10%return(0x8)", "uprobes", "p_x_0x10", true, UP_TARGET_OFFSET, "/bin/x",
		  NULL, 0x10, 0, 8, "r:uprobes/p_x_0x10 /bin/x:0x0000000000000010(0x8)" },
		{ "p /usr/lib/libc.so.6:malloc", "uprobes", "p_libc_malloc", false, UP_TARGET_SYMBOL,
		  "/usr/lib/libc.so.6", "malloc", 0, 0, 0, "p:uprobes/p_libc_malloc /usr/lib/libc.so.6:malloc" },
		{ "r /usr/lib/libc.so.6:malloc+0x10", "uprobes", "p_libc_malloc_0x10", true,
		  UP_TARGET_SYMBOL, "/usr/lib/libc.so.6", "malloc", 0x10, 0, 0,
		  "r:uprobes/p_libc_malloc_0x10 /usr/lib/libc.so.6:malloc+0x10" },
		{ "p ./sample:foo.cold", "uprobes", "p_sample_foo_cold", false, UP_TARGET_SYMBOL,
		  "./sample", "foo.cold", 0, 0, 0, "p:uprobes/p_sample_foo_cold ./sample:foo.cold" },
		{ "p 0x401000", "uprobes", "p_0x401000", false, UP_TARGET_VADDR, NULL, NULL, 0,
		  0x401000, 0, "p:uprobes/p_0x401000 0x401000" },
		{ "r:ret 4198400%return", "uprobes", "ret", true, UP_TARGET_VADDR, NULL, NULL, 0,
		  0x401000, 0, "r:uprobes/ret 0x401000" },
		/* the last ':' ends the path; a name char the kernel would refuse becomes '_' */
		{ "p C:/weird:path:0x20  # comment %bogus", "uprobes", "p_weird_path_0x20", false,
		  UP_TARGET_OFFSET, "C:/weird:path", NULL, 0x20, 0, 0,
		  "p:uprobes/p_weird_path_0x20 C:/weird:path:0x0000000000000020" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct up_spec s;
		char buf[256];

		parse_ok(cases[i].text, &s);
		assert_int_equal(s.kind, UP_SPEC_EVENT);
		assert_string_equal(s.group, cases[i].group);
		assert_string_equal(s.event, cases[i].event);
		assert_int_equal(s.is_return, cases[i].ret);
		assert_int_equal(s.target, cases[i].target);
		if (cases[i].path)
			assert_string_equal(s.path, cases[i].path);
		else
			assert_null(s.path);
		if (cases[i].symbol)
			assert_string_equal(s.symbol, cases[i].symbol);
		else
			assert_null(s.symbol);
		assert_int_equal(s.offset, cases[i].offset);
		assert_int_equal(s.vaddr, cases[i].vaddr);
		assert_int_equal(s.ref_ctr_offset, cases[i].ref);
		assert_int_equal(s.nargs, 0);
		up_spec_format(&s, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].listing);
		up_spec_free(&s);
	}
}

static void test_event_doc_listing(void **state)
{
	/* uprobetracer.rst: what uprobe_events lists after these two writes */
	struct up_spec s;
	char buf[256];

	parse_ok("p:zfree_entry /bin/zsh:0x46420 %ip %ax", &s);
	up_spec_format(&s, buf, sizeof(buf));
	assert_string_equal(buf, "p:uprobes/zfree_entry /bin/zsh:0x0000000000046420 arg1=%ip arg2=%ax");
	up_spec_free(&s);
	parse_ok("r:zfree_exit /bin/zsh:0x46420 %ip %ax", &s);
	up_spec_format(&s, buf, sizeof(buf));
	assert_string_equal(buf, "r:uprobes/zfree_exit /bin/zsh:0x0000000000046420 arg1=%ip arg2=%ax");
	/* snprintf semantics: the needed length, the output cut and terminated */
	assert_int_equal(up_spec_format(&s, buf, 10), strlen("r:uprobes/zfree_exit /bin/zsh:0x0000000000046420 arg1=%ip arg2=%ax"));
	assert_string_equal(buf, "r:uprobes");
	up_spec_free(&s);
}

static const struct up_fetch_arg *arg_of(const struct up_spec *s, int i)
{
	assert_true(i < s->nargs);
	return &s->args[i];
}

static void test_event_args(void **state)
{
	struct up_spec s;
	const struct up_fetch_arg *a;
	char tn[32];

	parse_ok("r:g/e /bin/x:0x10 %ip %ax cnt=+8(%di):u32 neg=-16(%sp):s16 bf=+0(%sp):b4@3/32 "
		 "str=+0(+8(%si)):string u=@0x601040:ustring f=@+0x1040:x16 i=\\-5 "
		 "lit=\\\"hi_there\" a7=$arg6 e=%eax l=%al h=%AH r=%r9d st=$stack st3=$stack3 "
		 "rv=$retval c=$comm c2=$comm:string ud=+u4(%bx):x8 im=\\0x40:string",
		 &s);
	assert_int_equal(s.nargs, 22);

	a = arg_of(&s, 0);
	assert_string_equal(a->name, "arg1");
	assert_string_equal(a->comm, "%ip");
	assert_int_equal(a->nops, 1);
	assert_int_equal(a->ops[0].op, UP_FOP_REG);
	assert_int_equal(a->ops[0].reg.offset, REG(rip));
	assert_int_equal(a->ops[0].reg.size, 8);
	assert_true(a->type.is_default);
	assert_int_equal(a->type.kind, UP_TYPE_X);
	assert_int_equal(a->type.size, 8);
	up_spec_type_name(&a->type, false, tn, sizeof(tn));
	assert_string_equal(tn, "x64");
	up_spec_type_name(&a->type, true, tn, sizeof(tn));
	assert_string_equal(tn, "x32");

	a = arg_of(&s, 1);
	assert_string_equal(a->name, "arg2");
	assert_int_equal(a->ops[0].reg.offset, REG(rax));
	assert_true(a->ops[0].reg.whole);

	a = arg_of(&s, 2);
	assert_string_equal(a->name, "cnt");
	assert_string_equal(a->comm, "+8(%di):u32");
	assert_int_equal(a->nops, 2);
	assert_int_equal(a->ops[0].op, UP_FOP_REG);
	assert_int_equal(a->ops[0].reg.offset, REG(rdi));
	assert_int_equal(a->ops[1].op, UP_FOP_DEREF);
	assert_int_equal(a->ops[1].offset, 8);
	assert_int_equal(a->type.kind, UP_TYPE_U);
	assert_int_equal(a->type.size, 4);
	assert_false(a->type.is_default);

	a = arg_of(&s, 3);
	assert_int_equal(a->ops[1].offset, -16);
	assert_int_equal(a->type.kind, UP_TYPE_S);
	assert_int_equal(a->type.size, 2);

	a = arg_of(&s, 4);
	assert_true(a->type.is_bitfield);
	assert_int_equal(a->type.kind, UP_TYPE_U);
	assert_int_equal(a->type.size, 4);
	assert_int_equal(a->type.bf_width, 4);
	assert_int_equal(a->type.bf_offset, 3);
	up_spec_type_name(&a->type, false, tn, sizeof(tn));
	assert_string_equal(tn, "b4@3/32");

	a = arg_of(&s, 5);
	assert_int_equal(a->nops, 3);
	assert_int_equal(a->ops[0].reg.offset, REG(rsi));
	assert_int_equal(a->ops[1].offset, 8);
	assert_int_equal(a->ops[2].offset, 0);
	assert_int_equal(a->type.kind, UP_TYPE_STRING);
	assert_false(a->type.is_ustring);

	a = arg_of(&s, 6);
	assert_int_equal(a->nops, 2);
	assert_int_equal(a->ops[0].op, UP_FOP_IMM);
	assert_int_equal(a->ops[0].imm, 0x601040);
	assert_int_equal(a->ops[1].op, UP_FOP_DEREF);
	assert_true(a->type.is_ustring);
	up_spec_type_name(&a->type, false, tn, sizeof(tn));
	assert_string_equal(tn, "ustring");

	a = arg_of(&s, 7);
	assert_int_equal(a->ops[0].op, UP_FOP_FOFFS);
	assert_int_equal(a->ops[0].imm, 0x1040);
	assert_int_equal(a->ops[1].op, UP_FOP_DEREF);
	assert_int_equal(a->type.kind, UP_TYPE_X);
	assert_int_equal(a->type.size, 2);

	a = arg_of(&s, 8);
	assert_int_equal(a->ops[0].op, UP_FOP_IMM);
	assert_int_equal((int64_t)a->ops[0].imm, -5);
	assert_int_equal(a->nops, 1);

	a = arg_of(&s, 9);
	assert_int_equal(a->ops[0].op, UP_FOP_DATA);
	assert_int_equal(a->type.kind, UP_TYPE_STRING);
	assert_int_equal(a->data_len, strlen("hi_there"));
	assert_memory_equal(a->comm + a->data_pos, "hi_there", 8);

	a = arg_of(&s, 10);
	assert_int_equal(a->ops[0].op, UP_FOP_ARG);
	assert_int_equal(a->ops[0].param, 6); /* at a return: the entry's, 1 to 6 */

	a = arg_of(&s, 11); /* a sized register implies its width */
	assert_int_equal(a->ops[0].reg.size, 4);
	assert_false(a->ops[0].reg.only64);
	assert_true(a->type.is_default);
	assert_int_equal(a->type.size, 4);
	a = arg_of(&s, 12);
	assert_int_equal(a->ops[0].reg.size, 1);
	assert_int_equal(a->type.size, 1);
	a = arg_of(&s, 13);
	assert_int_equal(a->ops[0].reg.shift, 8);
	assert_int_equal(a->ops[0].reg.offset, REG(rax));
	a = arg_of(&s, 14);
	assert_int_equal(a->ops[0].reg.offset, REG(r9));
	assert_true(a->ops[0].reg.only64);

	assert_int_equal(arg_of(&s, 15)->ops[0].op, UP_FOP_STACKP);
	assert_int_equal(arg_of(&s, 16)->ops[0].op, UP_FOP_STACK);
	assert_int_equal(arg_of(&s, 16)->ops[0].param, 3);
	assert_int_equal(arg_of(&s, 17)->ops[0].op, UP_FOP_RETVAL);
	assert_int_equal(arg_of(&s, 18)->ops[0].op, UP_FOP_COMM);
	assert_int_equal(arg_of(&s, 18)->type.kind, UP_TYPE_STRING);
	assert_int_equal(arg_of(&s, 19)->type.kind, UP_TYPE_STRING);
	a = arg_of(&s, 20);
	assert_int_equal(a->ops[1].offset, 4);
	assert_int_equal(a->ops[0].reg.offset, REG(rbx));
	a = arg_of(&s, 21);
	assert_int_equal(a->nops, 1);
	assert_int_equal(a->ops[0].imm, 0x40);
	assert_int_equal(a->type.kind, UP_TYPE_STRING);
	up_spec_free(&s);
}

static void test_event_limits(void **state)
{
	char text[4096];
	struct up_spec s;
	int n;

	/* 128 arguments, the kernel's MAX_TRACE_ARGS */
	n = snprintf(text, sizeof(text), "p /bin/x:0");
	for (int i = 0; i < UP_SPEC_MAX_ARGS; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, " %%di");
	parse_ok(text, &s);
	assert_int_equal(s.nargs, UP_SPEC_MAX_ARGS);
	assert_string_equal(s.args[127].name, "arg128");
	up_spec_free(&s);

	/* 15 fetch operations deep (FETCH_INSN_MAX less the store) */
	n = snprintf(text, sizeof(text), "p /bin/x:0 ");
	for (int i = 0; i < 14; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "+0(");
	n += snprintf(text + n, sizeof(text) - (size_t)n, "%%ax");
	for (int i = 0; i < 14; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, ")");
	parse_ok(text, &s);
	assert_int_equal(s.args[0].nops, 15);
	up_spec_free(&s);

	/* names at their maximum lengths */
	parse_ok("p:g23456789012345678901234567890123456789012345678901234567890123/"
		 "e234567890123456789012345678901234567890123456789012345678901234 /bin/x:0 "
		 "n2345678901234567890123456789012=%ax",
		 &s);
	assert_int_equal(strlen(s.group), 63);
	assert_int_equal(strlen(s.event), 64);
	assert_int_equal(strlen(s.args[0].name), 32);
	up_spec_free(&s);

	/* the default name is cut as the kernel's snprintf into MAX_EVENT_NAME_LEN cuts it */
	parse_ok("p /bin/averyveryveryveryveryveryveryveryveryverylongbinaryname:0x123456789abc", &s);
	assert_int_equal(strlen(s.event), 63);
	assert_string_equal(s.event, "p_averyveryveryveryveryveryveryveryveryverylongbinaryname_0x123");
	up_spec_free(&s);

	/* free is idempotent and takes NULL */
	up_spec_free(NULL);
	memset(&s, 0, sizeof(s));
	up_spec_free(&s);
	assert_int_equal(up_spec_parse(NULL, &s, NULL), -EINVAL);
	assert_int_equal(up_spec_parse("up 1 2 S 3", NULL, NULL), -EINVAL);
}

/* ---- refusals ---------------------------------------------------------------------- */

#define AT_END ((const char *)1)  /* the error is just past the last token */
#define NOWHERE ((const char *)2) /* pos == -1 */

struct bad {
	const char *text;
	const char *at; /* the offending token: its first occurrence in text */
	int nth;	/* 0: first occurrence of at; n: the nth */
	const char *msg;
};

static const struct bad bad_cases[] = {
	{ "", NOWHERE, 0, "Empty probe spec" },
	{ "   # only a comment", NOWHERE, 0, "Empty probe spec" },
	{ "x 1 2", "x", 0, "Unknown probe command" },
	{ "upx 1 2 S 3", "upx", 0, "Unknown probe command" },
	{ "px /bin/x:0", "px", 0, "Unknown probe command" },
	/* seed form */
	{ "up", AT_END, 0, "Expected PID" },
	{ "up abc 0x10 S 8", "abc", 0, "Invalid PID" },
	{ "up -1 0x10 S 8", "-1", 0, "Invalid PID" },
	{ "up 99999999999 0x10 S 8", "99999999999", 0, "Invalid PID" },
	{ "up 12", AT_END, 0, "Expected ADDR" },
	{ "up 12 xyz S 8", "xyz", 0, "Invalid probe address" },
	{ "up 12 0x S 8", "0x", 0, "Invalid probe address" },
	{ "up 12 10000000000000000 S 8", "10000000000000000", 0, "Invalid probe address" },
	{ "up 12 0x10", AT_END, 0, "Expected the dump type" },
	{ "up 12 0x10 Q 8", "Q", 0, "Invalid dump type" },
	{ "up 12 0x10 SS 8", "SS", 0, "Invalid dump type" },
	{ "up 12 0x10 D", AT_END, 0, "Expected DADDR" },
	{ "up 12 0x10 D zz 8", "zz", 0, "Invalid data address" },
	{ "up 12 0x10 D 0x20", AT_END, 0, "Expected SIZE" },
	{ "up 12 0x10 S", AT_END, 0, "Expected SIZE" },
	{ "up 12 0x10 A", AT_END, 0, "Expected NARGS" },
	{ "up 12 0x10 S 0", "0", 2, "Invalid SIZE" },
	{ "up 12 0x10 S 65537", "65537", 0, "Invalid SIZE" },
	{ "up 12 0x10 S 0x10", "0x10", 1, "Invalid SIZE" },
	{ "up 12 0x10 D 0x20 1x", "1x", 0, "Invalid SIZE" },
	{ "up 12 0x10 A 7", "7", 0, "Invalid NARGS" },
	{ "up 12 0x10 A 0", "0", 2, "Invalid NARGS" },
	{ "up 12 0x10 S 8 9", "9", 0, "Unexpected argument" },
	{ "up 12 0x10 A 2 extra", "extra", 0, "Unexpected argument" },
	{ "up 12 0x10 D 0x20 8 9", "9", 0, "Unexpected argument" },
	/* event header and target */
	{ "p", AT_END, 0, "Expected the probe target" },
	{ "r:ev", AT_END, 0, "Expected the probe target" },
	{ "p: /bin/x:0", " ", 0, "Event name is not specified" },
	{ "p:/ev /bin/x:0", "/", 0, "Group name is not specified" },
	{ "p:1grp/ev /bin/x:0", "1grp", 0, "Group name must follow the same rules as C identifiers" },
	{ "p:grp/1ev /bin/x:0", "1ev", 0, "Event name must follow the same rules as C identifiers" },
	{ "p:grp/ev-1 /bin/x:0", "ev-1", 0, "Event name must follow" },
	{ "p:grp/ /bin/x:0", " ", 0, "Event name is not specified" },
	{ "p:g234567890123456789012345678901234567890123456789012345678901234/e /bin/x:0",
	  "g234567890123456789012345678901234567890123456789012345678901234", 0, "Group name is too long" },
	{ "p:e2345678901234567890123456789012345678901234567890123456789012345 /bin/x:0",
	  "e2345678901234567890123456789012345678901234567890123456789012345", 0, "Event name is too long" },
	{ "p foo", "foo", 0, "Invalid probe target" },
	{ "p :0x10", ":", 0, "The file path is missing" },
	{ "p /bin/x:", AT_END, 0, "Expected the offset or the symbol" },
	{ "p /bin/x:0x1g", "0x1g", 0, "Invalid uprobe offset" },
	{ "p /bin/x:0x", "0x", 0, "Invalid uprobe offset" },
	{ "p 0x10zz", "0x10zz", 0, "Invalid probe address" },
	{ "p /bin/x:main+zz", "+zz", 0, "Invalid offset after the symbol" },
	{ "p /bin/x:+0x10", "+", 0, "The symbol name is missing" },
	{ "p /bin/x:0x10%ret", "%ret", 0, "Invalid probed address suffix" },
	{ "p /bin/x:0x10%returnx", "%returnx", 0, "Invalid probed address suffix" },
	{ "p /bin/x:0x10(0x20", AT_END, 0, "Reference counter brace is not closed" },
	{ "p /bin/x:0x10(0x20)x", "x", 3, "Reference counter has wrong suffix" },
	{ "p /bin/x:0x10(zz)", "zz", 0, "Invalid reference counter offset" },
	{ "p /bin/x:0x10()", ")", 0, "Invalid reference counter offset" },
	/* argument names */
	{ "p /bin/x:0 =%di", "=", 0, "Argument name is not specified" },
	{ "p /bin/x:0 1a=%di", "1a", 0, "Argument name must follow the same rules as C identifiers" },
	{ "p /bin/x:0 a.b=%di", "a.b", 0, "Argument name must follow" },
	{ "p /bin/x:0 n23456789012345678901234567890123=%di", "n23456789012345678901234567890123", 0,
	  "Argument name is too long" },
	{ "p /bin/x:0 a=%di a=%si", "a", 1, "This argument name is already used" },
	{ "p /bin/x:0 %di arg1=%si", "arg1", 0, "This argument name is already used" },
	{ "p /bin/x:0 common_pid=%di", "common_pid", 0, "This argument name is already used" },
	{ "p /bin/x:0 __probe_ip=%di", "__probe_ip", 0, "This argument name is already used" },
	{ "p /bin/x:0 a=", AT_END, 0, "No argument expression" },
	{ "p /bin/x:0 a=+0x1000000000000000(+0x1000000000000000(+0x1000000000000000(%di)))",
	  "+0x1000000000000000(+0x1000000000000000(+0x1000000000000000(%di)))", 0,
	  "Argument expression is too long" },
	/* fetch expressions */
	{ "p /bin/x:0 %foo", "%foo", 0, "Invalid register name" },
	{ "p /bin/x:0 %", "%", 0, "Invalid register name" },
	{ "p /bin/x:0 @sym", "@sym", 0, "Symbol is not available with uprobe" },
	{ "p /bin/x:0 @", "@", 0, "Symbol is not available with uprobe" },
	{ "p /bin/x:0 @0xzz", "@0xzz", 0, "Invalid memory address" },
	{ "p /bin/x:0 @+zz", "@+zz", 0, "Invalid file offset value" },
	{ "p /bin/x:0 @+", "@+", 0, "Invalid file offset value" },
	{ "p /bin/x:0 $foo", "$foo", 0, "Invalid $-variable specified" },
	{ "p /bin/x:0 $", "$", 0, "Invalid $-variable specified" },
	{ "p /bin/x:0 $stackx", "$stackx", 0, "Invalid $-variable specified" },
	{ "p /bin/x:0 $stack1x", "$stack1x", 0, "Invalid $-variable specified" },
	{ "p /bin/x:0 $retval", "$retval", 0, "$retval is not available on probe" },
	{ "p /bin/x:0 $arg0", "$arg0", 0, "Invalid argument number" },
	{ "p /bin/x:0 $arg9999", "$arg9999", 0, "Invalid argument number" },
	{ "r /bin/x:0 $arg7", "$arg7", 0, "At a return, $argN is the argument the entry had" },
	{ "p /bin/x:0 $argx", "$argx", 0, "Invalid $-variable specified" },
	{ "p /bin/x:0 +8%di", "+8%di", 0, "Dereference needs a brace" },
	{ "p /bin/x:0 +zz(%di)", "+zz", 0, "Invalid dereference offset" },
	{ "p /bin/x:0 +(%di)", "+", 0, "Invalid dereference offset" },
	{ "p /bin/x:0 -u(%di)", "-u", 0, "Invalid dereference offset" },
	{ "p /bin/x:0 +8(%di", AT_END, 0, "Dereference brace is not closed" },
	{ "p /bin/x:0 +8(%di)x", "x", 1, "Unexpected text after the dereference's ')'" },
	{ "p /bin/x:0 +0($comm):string", "$comm", 0, "$comm can not be dereferenced" },
	{ "p /bin/x:0 +8($ustack)", "$ustack", 0, "$ustack can not be dereferenced" },
	{ "p /bin/x:0 st=$ustack:x64", "x64", 0, "$ustack takes no type" },
	{ "p /bin/x:0 $ustacks", "$ustacks", 0, "Invalid $-variable specified" },
	{ "p /bin/x:0 +0(\\\"s\"):string", "\\\"s\"", 0, "$comm can not be dereferenced" },
	{ "p /bin/x:0 +8()", ")", 0, "Invalid fetch argument" },
	{ "p /bin/x:0 \\zz", "zz", 0, "Invalid immediate value" },
	{ "p /bin/x:0 \\", AT_END, 0, "Invalid immediate value" },
	{ "p /bin/x:0 \\-", "-", 0, "Invalid immediate value" },
	{ "p /bin/x:0 \\\"abc", AT_END, 0, "String is not closed with '\"'" },
	{ "p /bin/x:0 \\\"", AT_END, 0, "String is not closed with '\"'" },
	{ "p /bin/x:0 foo", "foo", 0, "Invalid fetch argument" },
	/* types */
	{ "p /bin/x:0 %di:u128", "u128", 0, "Unknown type is specified" },
	{ "p /bin/x:0 %di:", AT_END, 0, "Unknown type is specified" },
	{ "p /bin/x:0 %di:b0@0/32", "b0@0/32", 0, "Invalid bitfield" },
	{ "p /bin/x:0 %di:b4@30/32", "b4@30/32", 0, "Invalid bitfield" },
	{ "p /bin/x:0 %di:b4x0/32", "b4x0/32", 0, "Invalid bitfield" },
	{ "p /bin/x:0 %di:b4@/32", "b4@/32", 0, "Invalid bitfield" },
	{ "p /bin/x:0 %di:b4@0/24", "b4@0/24", 0, "Unknown type is specified" },
	{ "p /bin/x:0 %di:b4@0", "b4@0", 0, "Unknown type is specified" },
	{ "p /bin/x:0 %di:string", "string", 0, "String accepts only memory argument" },
	{ "p /bin/x:0 $stack:ustring", "ustring", 0, "String accepts only memory argument" },
	{ "p /bin/x:0 $comm:u32", "u32", 0, "$comm accepts only the string type" },
	{ "p /bin/x:0 \\\"x\":u8", "u8", 0, "An immediate string accepts only the string type" },
	{ "p /bin/x:0 +0(%di):u32[4]", "u32[4]", 0, "Array types (TYPE[N]) are not supported" },
	{ "p /bin/x:0 %di:symbol", "symbol", 0, "The symbol type is not supported" },
	/* the error is reported for the first bad argument, after good ones */
	{ "p /bin/x:0 %di +8(%si):u32 %bogus", "%bogus", 0, "Invalid register name" },
};

static int nth_pos(const char *text, const char *at, int nth)
{
	const char *p = text;

	for (int i = 0;; i++) {
		p = strstr(p, at);
		if (!p)
			return -2;
		if (i == nth)
			return (int)(p - text);
		p++;
	}
}

static void test_bad_specs(void **state)
{
	char text[4096];
	int failures = 0;

	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad *c = &bad_cases[i];
		struct up_spec s;
		struct up_spec_err err;
		int pos, len, ret;

		memset(&s, 0x5a, sizeof(s));
		ret = up_spec_parse(c->text, &s, &err);
		if (c->at == NOWHERE) {
			pos = -1;
			len = 1;
		} else if (c->at == AT_END) {
			pos = (int)strlen(c->text);
			len = 1;
		} else {
			pos = nth_pos(c->text, c->at, c->nth);
			len = (int)strlen(c->at);
		}
		if (ret != -EINVAL || !strstr(err.msg, c->msg) || err.pos != pos || err.len != len ||
		    s.path || s.symbol || s.args || up_spec_parse(c->text, &s, NULL) != -EINVAL) {
			print_error("case %zu '%s': ret %d at %d+%d '%s'; want at %d+%d '%s'\n", i,
				    c->text, ret, err.pos, err.len, ret ? err.msg : "", pos, len,
				    c->msg);
			failures++;
		}
	}
	assert_int_equal(failures, 0);

	/* 129 arguments, and one token too many for the tokenizer */
	for (int extra = 1; extra <= 2; extra++) {
		struct up_spec s;
		struct up_spec_err err;
		int n = snprintf(text, sizeof(text), "p /bin/x:0"), last = 0;

		for (int i = 0; i < UP_SPEC_MAX_ARGS + extra; i++) {
			last = n + 1;
			n += snprintf(text + n, sizeof(text) - (size_t)n, " %%di");
		}
		assert_int_equal(up_spec_parse(text, &s, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "Too many arguments"));
		/* the 129th argument, or the token past the most there can be */
		assert_int_equal(err.pos, last);
		assert_int_equal(err.len, extra == 1 ? 3 : 1);
	}

	/* 16 fetch operations deep */
	{
		struct up_spec s;
		struct up_spec_err err;
		int n = snprintf(text, sizeof(text), "p /bin/x:0 ");

		for (int i = 0; i < 15; i++)
			n += snprintf(text + n, sizeof(text) - (size_t)n, "+0(");
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%%ax");
		for (int i = 0; i < 15; i++)
			n += snprintf(text + n, sizeof(text) - (size_t)n, ")");
		assert_true(n - 11 == UP_SPEC_ARG_TEXT_MAX);
		assert_int_equal(up_spec_parse(text, &s, &err), -EINVAL);
		assert_string_equal(err.msg, "Dereference is too much nested");
		assert_int_equal(err.pos, 11);
		/* @ADDR takes two operations: 14 derefs of it is 16 */
		n = snprintf(text, sizeof(text), "p /bin/x:0 ");
		for (int i = 0; i < 14; i++)
			n += snprintf(text + n, sizeof(text) - (size_t)n, "+0(");
		n += snprintf(text + n, sizeof(text) - (size_t)n, "@1");
		for (int i = 0; i < 14; i++)
			n += snprintf(text + n, sizeof(text) - (size_t)n, ")");
		assert_true(n - 11 <= UP_SPEC_ARG_TEXT_MAX);
		assert_int_equal(up_spec_parse(text, &s, &err), -EINVAL);
		assert_string_equal(err.msg, "Dereference is too much nested");
		assert_int_equal(err.pos, 11);
	}
}

/* ---- caret rendering --------------------------------------------------------------- */

static void test_err_format(void **state)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "p:zfree_entry /bin/zsh:0x46420 %bogus",
		  "p:zfree_entry /bin/zsh:0x46420 %bogus\n"
		  "                               ^~~~~~\n"
		  "Invalid register name: expected e.g. %di, %rax, %eax, %al, %r8, %ip, %sp, %flags\n" },
		{ "up 3906 0x400498 S",
		  "up 3906 0x400498 S\n"
		  "                  ^\n"
		  "Expected SIZE, the number of bytes to dump (1..65536)\n" },
		{ "\tup 3906 zz S 1\n",
		  "\tup 3906 zz S 1\n"
		  "\t        ^~\n"
		  "Invalid probe address: expected a hex address, with or without 0x\n" },
		{ "",
		  "\n"
		  "Empty probe spec: expected 'up PID ADDR D|S|A ...' or "
		  "'p|r[:[GRP/]EVENT] TARGET [FETCHARGS]'\n" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct up_spec s;
		struct up_spec_err err;
		char buf[512];
		int n;

		assert_int_equal(up_spec_parse(cases[i].text, &s, &err), -EINVAL);
		n = up_spec_err_format(cases[i].text, &err, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].want);
		assert_int_equal(n, strlen(cases[i].want));
		/* truncation keeps the length and the terminator */
		assert_int_equal(up_spec_err_format(cases[i].text, &err, buf, 5), n);
		assert_int_equal(strlen(buf), n < 4 ? n : 4);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seed_forms),     cmocka_unit_test(test_event_defaults),
		cmocka_unit_test(test_event_doc_listing), cmocka_unit_test(test_event_args),
		cmocka_unit_test(test_event_limits),   cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_err_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
