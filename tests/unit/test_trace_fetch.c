// SPDX-License-Identifier: MIT
/*
 * Fetch arguments (src/trace/fetch.c) over a fake thread: a register set and a memory
 * made of a few mapped regions, everything else faulting.  Specs are parsed by the
 * real parser, evaluated, and printed; the expected texts follow the kernel's print
 * functions (trace_probe.c), including "(fault)", nested dereferences, strings,
 * bitfields, the ABI arguments and a 32-bit process.
 */
#include <errno.h>
#include <inttypes.h>
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
#include "trace/spec.h"

struct region {
	uint64_t addr;
	const void *bytes;
	size_t len;
};

struct fake_mem {
	struct region r[8];
	int n;
	int reads;
};

static int fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct fake_mem *m = ctx;

	m->reads++;
	for (int i = 0; i < m->n; i++) {
		const struct region *r = &m->r[i];

		if (addr >= r->addr && len <= r->len && addr - r->addr <= r->len - len) {
			memcpy(buf, (const char *)r->bytes + (addr - r->addr), len);
			return 0;
		}
	}
	return -EFAULT;
}

/* memory of the fake 64-bit thread */
#define STACK 0x7ffc0000f000ull
#define DATA 0x601000ull
#define PAGE_END 0x700000ull /* a string that runs into an unmapped page */

static uint64_t stack64[16];
static uint8_t data[64];
static const char tail_page[] = "abc"; /* no NUL before the page ends */
static struct fake_mem mem;
static struct user_regs_struct regs;
static struct up_fetch_env env;

static void setup64(void)
{
	memset(&regs, 0, sizeof(regs));
	regs.rax = 0x1122334455667788ull;
	regs.rbx = DATA + 16;
	regs.rcx = 4;
	regs.rdx = 3;
	regs.rdi = DATA;	     /* -> "hello" */
	regs.rsi = STACK;
	regs.r8 = 5;
	regs.r9 = 0xffffffffffffffffull;
	regs.rsp = STACK;
	regs.rip = 0x401136;
	regs.eflags = 0x246;
	for (int i = 0; i < 16; i++)
		stack64[i] = 0x1000 + (uint64_t)i;
	stack64[0] = 0x401200;	     /* return address */
	stack64[1] = DATA + 32;	     /* a pointer to a pointer */
	memset(data, 0, sizeof(data));
	memcpy(data, "hello", 6);
	memcpy(data + 16, "\xef\xbe\xad\xde\xff\xff\xff\xff", 8); /* 0xffffffffdeadbeef */
	uint64_t p = DATA;	     /* data+32: a pointer to "hello" */
	memcpy(data + 32, &p, 8);
	memcpy(data + 40, "", 1);    /* an empty string at data+40 */
	memset(&mem, 0, sizeof(mem));
	mem.r[0] = (struct region){ STACK, stack64, sizeof(stack64) };
	mem.r[1] = (struct region){ DATA, data, sizeof(data) };
	mem.r[2] = (struct region){ PAGE_END - 3, tail_page, 3 };
	mem.n = 3;
	env = (struct up_fetch_env){ .regs = &regs, .read = fake_read, .ctx = &mem,
				     .comm = "sample", .file_bias = DATA - 0x1000 };
}

/* Parse "p /bin/x:0 ARGS" (or r:), evaluate argument i, return its text. */
static const char *eval_text(bool ret_probe, const char *arg, struct up_fetch_value *out)
{
	static char text[8192];
	static char strbuf[UP_FETCH_STRING_MAX];
	char spec_text[256];
	struct up_spec s;
	struct up_spec_err err;
	struct up_fetch_value v;
	int rc;

	snprintf(spec_text, sizeof(spec_text), "%s /bin/x:0 %s", ret_probe ? "r" : "p", arg);
	rc = up_spec_parse(spec_text, &s, &err);
	if (rc)
		print_error("'%s': %s\n", spec_text, err.msg);
	assert_int_equal(rc, 0);
	rc = up_fetch_eval(&s.args[0], &env, &v, strbuf, sizeof(strbuf));
	assert_int_equal(rc, 0);
	rc = up_fetch_format(&v, text, sizeof(text));
	assert_int_equal(rc, strlen(text));
	if (out)
		*out = v;
	up_spec_free(&s);
	return text;
}

static void check(const char *arg, const char *want)
{
	const char *got = eval_text(strstr(arg, "$retval") != NULL, arg, NULL);

	if (strcmp(got, want))
		print_error("%s: got %s, want %s\n", arg, got, want);
	assert_string_equal(got, want);
}

static void test_registers(void **state)
{
	setup64();
	check("%ax", "0x1122334455667788");
	check("%rax", "0x1122334455667788");
	check("%eax", "0x55667788");
	check("%al", "0x88");
	check("%ah", "0x77");
	check("%ax:u16", "30600");
	check("%ax:x16", "0x7788");
	check("%ax:u8", "136");
	check("%ax:s8", "-120");
	check("%ax:u64", "1234605616436508552");
	check("%r9", "0xffffffffffffffff");
	check("%r9:s64", "-1");
	check("%r9:u64", "18446744073709551615");
	check("%r9d:s32", "-1");
	check("%r9d", "0xffffffff");
	check("%r9:s16", "-1");
	check("%cx:s32", "4");
	check("%ip", "0x401136");
	check("%flags:x32", "0x246");
	check("%sp", "0x7ffc0000f000");
	check("%ax:b4@4/8", "8");  /* 0x88: bits 4..7 */
	check("%ax:b16@48/64", "4386"); /* 0x1122 */
}

static void test_memory(void **state)
{
	struct up_fetch_value v;

	setup64();
	check("+0(%di):u8", "104"); /* 'h' */
	check("+1(%di):x8", "0x65");
	check("+0(%di):x32", "0x6c6c6568");
	check("+16(%di):s32", "-559038737");
	check("+16(%di):u32", "3735928559");
	check("+16(%di):s64", "-559038737");
	check("+16(%di)", "0xffffffffdeadbeef");
	check("+16(+32(%di)):x16", "0xbeef");  /* +32(%di) reads the pointer at DATA+32 */
	check("-16(+32(%di)):x16", "(fault)"); /* DATA - 16 is not mapped */
	check("+0(+8(%sp)):x64", "0x601000");  /* the pointer at [sp+8] -> DATA+32 -> DATA */
	check("+0(+0(+8(%sp))):string", "\"hello\"");
	check("@0x601010:x32", "0xdeadbeef");
	check("@6295568:x16", "0xbeef");
	check("@+0x1010:u8", "239"); /* file_bias + 0x1010 = DATA + 16 */
	check("+u0(%bx):x8", "0xef");
	/* faults, at each level */
	check("+0(%ax)", "(fault)");
	check("+0(+0(%di))", "(fault)"); /* "hello" read as a pointer */
	check("@0x10:u32", "(fault)");
	check("+60(%di):u64", "(fault)"); /* straddles the region's end */
	check("+60(%di):u32", "0");
	eval_text(false, "+8(%ax):u32", &v);
	assert_int_equal(v.err, -EFAULT);
	assert_int_equal(v.fault_addr, 0x1122334455667790ull);
	/* bitfields over memory, as the kernel's shifts within the container */
	check("+16(%di):b4@4/32", "14");	  /* 0xdeadbeef >> 4 & 0xf */
	check("+16(%di):b1@31/32", "1");
	check("+16(%di):b8@24/32", "222");	  /* 0xde */
	check("+16(%di):b3@0/8", "7");		  /* 0xef & 7 */
	check("+16(%di):b32@32/64", "4294967295");
	check("+16(%di):b64@0/64", "18446744073150512879");
	check("+0(%ax):b4@4/32", "(fault)");
}

static void test_strings(void **state)
{
	struct up_fetch_value v;
	char small[4];
	char spec_text[] = "p /bin/x:0 +0(%di):string";
	struct up_spec s;

	setup64();
	check("+0(%di):string", "\"hello\"");
	check("+1(%di):ustring", "\"ello\"");
	check("@0x601000:string", "\"hello\"");
	check("+40(%di):string", "\"\"");
	check("\\0x601000:string", "\"hello\"");
	check("$comm", "\"sample\"");
	check("$comm:string", "\"sample\"");
	check("\\\"lit\"", "\"lit\"");
	check("+0(%ax):string", "(fault)");
	check("@0x6ffffd:string", "(fault)"); /* "abc" then an unmapped page */
	eval_text(false, "@0x6ffffd:string", &v);
	assert_int_equal(v.err, -EFAULT);
	assert_int_equal(v.fault_addr, PAGE_END);
	/* a string longer than the buffer is cut like the kernel's, at size - 1 */
	assert_int_equal(up_spec_parse(spec_text, &s, NULL), 0);
	assert_int_equal(up_fetch_eval(&s.args[0], &env, &v, small, sizeof(small)), 0);
	assert_string_equal(v.str, "hel");
	assert_int_equal(v.str_len, 3);
	assert_true(v.truncated);
	/* no buffer for a string is a misuse */
	assert_int_equal(up_fetch_eval(&s.args[0], &env, &v, NULL, 0), -EINVAL);
	up_spec_free(&s);
	/* NULL comm reads as "" */
	env.comm = NULL;
	check("$comm", "\"\"");
}

static void test_variables(void **state)
{
	setup64();
	check("$stack", "0x7ffc0000f000");
	check("$stack0", "0x401200");
	check("$stack2", "0x1002");
	check("$stack15", "0x100f");
	check("$stack16", "(fault)");
	check("$arg1", "0x601000");
	check("$arg2", "0x7ffc0000f000");
	check("$arg3", "0x3");
	check("$arg4", "0x4");
	check("$arg5", "0x5");
	check("$arg6", "0xffffffffffffffff");
	check("$arg7", "0x601020"); /* [sp + 8]: above the return address */
	check("$arg8", "0x1002");
	check("$arg16:u32", "4106"); /* [sp + 80] */
	check("+0($arg1):string", "\"hello\"");
}

static void test_retval(void **state)
{
	setup64();
	check("$retval", "0x1122334455667788");
	check("$retval:s32", "1432778632");
	env.has_retval = true;
	env.retval = (uint64_t)-2;
	check("$retval:s64", "-2");
	check("$retval:s8", "-2");
	check("$retval:u8", "254");
}

static void test_32bit(void **state)
{
	static uint32_t stack32[8] = { 0x8049000, 11, 0x804a000, 33, 0xffffffff, 0, 0, 0 };
	static const char str32[] = "i386";
	struct up_spec s;
	struct up_fetch_value v;
	char buf[64];

	setup64();
	memset(&regs, 0, sizeof(regs));
	regs.rax = 0xfffffffffffffffeull; /* a sign-extended -2 from a syscall return */
	regs.rbx = 0x804a000;
	regs.rsp = 0xffffd000;
	regs.rip = 0x8049100;
	mem.r[0] = (struct region){ 0xffffd000, stack32, sizeof(stack32) };
	mem.r[1] = (struct region){ 0x804a000, str32, sizeof(str32) };
	mem.n = 2;
	env.is32 = true;

	check("%ax", "0xfffffffe");	/* the default is x32 */
	check("%eax", "0xfffffffe");
	check("%ax:s32", "-2");
	check("%ax:u64", "4294967294");
	check("%sp", "0xffffd000");
	check("$stack", "0xffffd000");
	check("$stack0", "0x8049000");	/* 4-byte slots */
	check("$stack1", "0xb");
	check("$arg1", "0xb");		/* cdecl: [esp+4] */
	check("$arg2", "0x804a000");
	check("$arg3", "0x21");
	check("$arg8", "(fault)");
	check("+0($arg2):string", "\"i386\"");
	check("+0(+8(%sp)):string", "\"i386\""); /* a 4-byte pointer at [esp+8] */
	check("+8(%sp):x64", "0x210804a000"); /* a u64 is still 8 bytes */
	/* addresses wrap at 4 GiB: 0xffffffff + 0xffffd001 is 0xffffd000 */
	check("+0xffffd001(+16(%sp)):x32", "0x8049000");

	/* a 64-bit-only register cannot be read in a 32-bit process */
	assert_int_equal(up_spec_parse("p /bin/x:0 %r8 %rax %sil", &s, NULL), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(up_fetch_arg_check(&s.args[i], true), -EINVAL);
		assert_int_equal(up_fetch_arg_check(&s.args[i], false), 0);
		assert_int_equal(up_fetch_eval(&s.args[i], &env, &v, buf, sizeof(buf)), -EINVAL);
	}
	up_spec_free(&s);
}

static void test_eval_all(void **state)
{
	struct up_spec s;
	struct up_fetch_value vals[4];
	char arena[16];
	char buf[64];

	setup64();
	assert_int_equal(up_spec_parse("p /bin/x:0 a=+0(%di):string b=%cx:u8 c=$comm "
				       "d=+0(%ax):u32", &s, NULL), 0);
	assert_int_equal(up_fetch_eval_all(&s, &env, vals, arena, sizeof(arena)), 0);
	up_fetch_format(&vals[0], buf, sizeof(buf));
	assert_string_equal(buf, "\"hello\"");
	up_fetch_format(&vals[1], buf, sizeof(buf));
	assert_string_equal(buf, "4");
	up_fetch_format(&vals[2], buf, sizeof(buf));
	assert_string_equal(buf, "\"sample\"");
	assert_ptr_equal(vals[2].str, arena + 6); /* after "hello\0" */
	up_fetch_format(&vals[3], buf, sizeof(buf));
	assert_string_equal(buf, "(fault)");
	/* an arena too small cuts the later string */
	assert_int_equal(up_fetch_eval_all(&s, &env, vals, arena, 8), 0);
	assert_string_equal(vals[2].str, "s");
	assert_true(vals[2].truncated);
	assert_int_equal(up_fetch_eval_all(&s, &env, vals, arena, 6), -ENOBUFS);
	up_spec_free(&s);
	/* a seed spec has no fetch arguments */
	assert_int_equal(up_spec_parse("up 1 0x10 A 2", &s, NULL), 0);
	assert_int_equal(up_fetch_eval_all(&s, &env, vals, arena, sizeof(arena)), -EINVAL);
	up_spec_free(&s);
}

/* $ustack: the walk over a fake chain of frames, at an entry and inside, its frames
   in the arena after a string, named by a callback that cuts the garbage tail. */
static int name_frame(void *ctx, unsigned i, uint64_t addr, char *buf, size_t size)
{
	(void)ctx;
	if (i && addr >= 0x7f0000000000ull) /* "no executable mapping" */
		return -1;
	return snprintf(buf, size, "f%u@%" PRIx64, i, addr);
}

static void test_ustack(void **state)
{
	/* three frames: [bp] -> next bp, [bp + 8] -> return address; the last bp is 0 */
	uint64_t frames[8] = {
		STACK + 0x100 + 16, 0x401300, /* frame 0 at STACK + 0x100 */
		STACK + 0x100 + 32, 0x401400, /* frame 1 */
		0, 0x7f1234567890ull,	      /* frame 2: a return into "no mapping" */
	};
	struct up_spec s;
	struct up_fetch_value vals[3];
	char arena[256], names[256], buf[256];
	struct fake_mem m2;

	setup64();
	m2 = mem;
	m2.r[m2.n++] = (struct region){ STACK + 0x100, frames, sizeof(frames) };
	env.ctx = &m2;
	regs.rbp = STACK + 0x100;
	assert_int_equal(up_spec_parse("p /bin/x:0 a=+0(%di):string st=$ustack n=%cx", &s, NULL),
			 0);
	assert_int_equal(s.args[1].type.kind, UP_TYPE_STACK);
	/* inside a function: ip, then [bp + 8] up the chain until bp is 0 */
	assert_int_equal(up_fetch_eval_all(&s, &env, vals, arena + 1, sizeof(arena) - 1), 0);
	assert_int_equal(vals[1].nframes, 4);
	assert_int_equal((uintptr_t)vals[1].frames % 8, 0);
	assert_true((const char *)vals[1].frames >= arena + 1 + 6); /* after "hello\0" */
	assert_int_equal(vals[1].frames[0], 0x401136);
	assert_int_equal(vals[1].frames[1], 0x401300);
	assert_int_equal(vals[1].frames[2], 0x401400);
	assert_int_equal(vals[1].frames[3], 0x7f1234567890ull);
	up_fetch_format(&vals[1], buf, sizeof(buf));
	assert_string_equal(buf, "0x401136 0x401300 0x401400 0x7f1234567890");
	up_fetch_name_stack(&vals[1], names, sizeof(names), name_frame, NULL);
	assert_string_equal(vals[1].str, "f0@401136\nf1@401300\nf2@401400");
	up_fetch_format(&vals[1], buf, sizeof(buf));
	assert_string_equal(buf, "f0@401136 f1@401300 f2@401400");
	/* at a function's entry [sp] is the caller's return address, frame 1 */
	env.at_entry = true;
	assert_int_equal(up_fetch_eval_all(&s, &env, vals, arena, sizeof(arena)), 0);
	assert_int_equal(vals[1].nframes, 5);
	assert_int_equal(vals[1].frames[1], 0x401200);
	assert_int_equal(vals[1].frames[2], 0x401300);
	/* a frame pointer into nothing: the hit's address and the caller alone */
	regs.rbp = 0x10;
	assert_int_equal(up_fetch_eval_all(&s, &env, vals, arena, sizeof(arena)), 0);
	assert_int_equal(vals[1].nframes, 2);
	/* no room for a frame: the arena is refused, as for a string */
	assert_int_equal(up_fetch_eval_all(&s, &env, vals, arena, 6), -ENOBUFS);
	/* a 32-bit process has no 8-byte frames */
	assert_int_equal(up_fetch_arg_check(&s.args[1], true), -EINVAL);
	up_spec_free(&s);
}

static void test_abi_args(void **state)
{
	uint64_t v;

	setup64();
	assert_int_equal(up_fetch_abi_arg(&env, 0, &v), -EINVAL);
	assert_int_equal(up_fetch_abi_arg(&env, 1, &v), 0);
	assert_int_equal(v, DATA);
	assert_int_equal(up_fetch_abi_arg(&env, 6, &v), 0);
	assert_int_equal(v, UINT64_MAX);
	assert_int_equal(up_fetch_abi_arg(&env, 7, &v), 0);
	assert_int_equal(v, DATA + 32);
	assert_int_equal(up_fetch_abi_arg(&env, 22, &v), -EFAULT); /* [sp + 128]: past the stack */
	mem.reads = 0;
	env.read = NULL;
	assert_int_equal(up_fetch_abi_arg(&env, 5, &v), 0); /* registers need no reader */
	assert_int_equal(up_fetch_abi_arg(&env, 7, &v), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registers), cmocka_unit_test(test_memory),
		cmocka_unit_test(test_strings),	  cmocka_unit_test(test_variables),
		cmocka_unit_test(test_retval),	  cmocka_unit_test(test_32bit),
		cmocka_unit_test(test_eval_all),  cmocka_unit_test(test_abi_args),
		cmocka_unit_test(test_ustack),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
