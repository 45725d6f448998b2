// SPDX-License-Identifier: MIT
/*
 * USDT operand strings (src/sym/usdt.c) against what the kernel's uprobe_events
 * fetch for them: every form gcc and clang emit for the "nor" constraint of
 * <sys/sdt.h>, and the refusals.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sym/usdt.h"

static int resolve(void *ctx, const char *sym, uint64_t *off)
{
	(void)ctx;
	if (strcmp(sym, "counter"))
		return -ENOENT;
	*off = 0x4030;
	return 0;
}

/* text -> "FETCH:TYPE", or NULL when it must be refused with rc */
static void check(const char *text, const char *want, int want_rc)
{
	struct up_usdt_arg a;
	char fetch[64], type[8], got[80];
	int rc = up_usdt_arg_parse(text, strlen(text), &a, resolve, NULL);

	if (!want) {
		if (rc != want_rc)
			fail_msg("'%s': rc %d, want %d", text, rc, want_rc);
		return;
	}
	if (rc)
		fail_msg("'%s': refused (%d), want %s", text, rc, want);
	up_usdt_arg_fetch(&a, fetch, sizeof(fetch));
	up_usdt_arg_type(&a, type, sizeof(type));
	snprintf(got, sizeof(got), "%s:%s", fetch, type);
	if (strcmp(got, want))
		fail_msg("'%s': got %s, want %s", text, got, want);
}

struct vector {
	const char *text;
	const char *want; /* "FETCH:TYPE", or NULL: refused with rc */
	int rc;
};

static void check_all(const struct vector *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		check(v[i].text, v[i].want, v[i].rc);
}

static void test_registers(void **state)
{
	static const struct vector v[] = {
		{ "-4@%edi", "%di:s32", 0 }, { "8@%rax", "%ax:u64", 0 },
		{ "-2@%ax", "%ax:s16", 0 },  { "1@%al", "%ax:u8", 0 },
		{ "-1@%sil", "%si:s8", 0 },  { "8@%r15", "%r15:u64", 0 },
		{ "-4@%r8d", "%r8:s32", 0 }, { "2@%r12w", "%r12:u16", 0 },
		{ "1@%r9b", "%r9:u8", 0 },   { "%rbx", "%bx:u64", 0 }, /* no size: the register's */
		{ "%ecx", "%cx:u32", 0 },
	};

	(void)state;
	check_all(v, sizeof(v) / sizeof(v[0]));
}

static void test_memory(void **state)
{
	static const struct vector v[] = {
		{ "8@-8(%rbp)", "-8(%bp):u64", 0 },
		{ "-4@112(%rsp)", "+112(%sp):s32", 0 },
		{ "-8@(%rsi)", "+0(%si):s64", 0 },
		{ "8@0x10(%r13)", "+16(%r13):u64", 0 },
		{ "-4@counter(%rip)", "@+0x4030:s32", 0 },
		{ "4@counter+8(%rip)", "@+0x4038:u32", 0 },
		{ "4@counter-4(%rip)", "@+0x402c:u32", 0 },
	};

	(void)state;
	check_all(v, sizeof(v) / sizeof(v[0]));
}

static void test_constants(void **state)
{
	static const struct vector v[] = {
		{ "4@$5", "\\5:u32", 0 },
		{ "-4@$-1", "\\-1:s32", 0 },
		{ "8@$0x10", "\\16:u64", 0 },
	};

	(void)state;
	check_all(v, sizeof(v) / sizeof(v[0]));
}

static void test_refused(void **state)
{
	static const struct vector v[] = {
		{ "8@(%rax,%rdx,8)", NULL, -EINVAL }, /* index register */
		{ "3@%eax", NULL, -EINVAL },	      /* no such size */
		{ "4@%xmm0", NULL, -EINVAL },
		{ "4@%ah", NULL, -EINVAL }, /* uprobe_events cannot shift */
		{ "4@nosuch(%rip)", NULL, -ENOENT },
		{ "4@8(%eax)", NULL, -EINVAL }, /* a 32-bit base in a 64-bit file */
		{ "4@", NULL, -EINVAL },
		{ "x@%eax", NULL, -EINVAL },
	};

	(void)state;
	check_all(v, sizeof(v) / sizeof(v[0]));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registers),
		cmocka_unit_test(test_memory),
		cmocka_unit_test(test_constants),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
