// SPDX-License-Identifier: MIT
/*
 * src/trace/stack.c: the frame-pointer walk over a fake stack (the same cases as the
 * agent's walk in test_agent), the table walk (sym/unwind_walk.h) where no lookup finds
 * a row, and the names of addresses in this very process: one of its functions, a libc
 * function, an address in no file.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/abi.h"
#include "agent/unwind.h"
#include "sym/unwind_walk.h"
#include "trace/stack.h"

static int read_self(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < 4096)
		return -EFAULT; /* what process_vm_readv would say */
	memcpy(buf, (const void *)(uintptr_t)addr, len);
	return 0;
}

static void test_walk(void **state)
{
	uint64_t stack[16] = { 0 }, out[6];
	struct user_regs_struct r = { 0 };

	(void)state;
	stack[0] = 0x4444;
	stack[4] = (uint64_t)(uintptr_t)&stack[8], stack[5] = 0x1111;
	stack[8] = (uint64_t)(uintptr_t)&stack[12], stack[9] = 0x2222;
	stack[12] = 0, stack[13] = 0x3333;
	r.rsp = (uint64_t)(uintptr_t)&stack[0];
	r.rbp = (uint64_t)(uintptr_t)&stack[4];
	assert_int_equal(up_stack_walk(&r, 0x401000, true, read_self, NULL, out, 6), 5);
	assert_int_equal(out[0], 0x401000);
	assert_int_equal(out[1], 0x4444);
	assert_int_equal(out[2], 0x1111);
	assert_int_equal(out[3], 0x2222);
	assert_int_equal(out[4], 0x3333);
	assert_int_equal(out[5], 0);
	/* bounded */
	assert_int_equal(up_stack_walk(&r, 0x401000, true, read_self, NULL, out, 2), 2);
	/* a frame that points down: cut after it */
	stack[8] = (uint64_t)(uintptr_t)&stack[2];
	assert_int_equal(up_stack_walk(&r, 0x401000, false, read_self, NULL, out, 6), 3);
	assert_int_equal(out[1], 0x1111);
	assert_int_equal(out[2], 0x2222);
	/* garbage in rbp: the read fails, the walk ends */
	r.rbp = 0x10;
	assert_int_equal(up_stack_walk(&r, 0x401000, false, read_self, NULL, out, 6), 1);
	r.rbp = 0x1001; /* unaligned */
	assert_int_equal(up_stack_walk(&r, 0x401000, false, read_self, NULL, out, 6), 1);
}

/* A lookup that finds no row: it says so (0) and sets the row's cfa to NONE only; its
   other fields are whatever the walk's stack held (trace/stack.c's and the agent's
   lookups): here garbage with the agent's UP_UW_RBP_OURS bit among it. */
static int lookup_none(void *ctx, uint64_t pc, struct up_unwind_row *row)
{
	(void)pc;
	memset(row, *(int *)ctx, sizeof(*row));
	row->cfa = UP_UW_NONE;
	return 0;
}

static void test_walk_no_row(void **state)
{
	uint64_t stack[16] = { 0 }, out[6];

	(void)state;
	stack[4] = (uint64_t)(uintptr_t)&stack[8], stack[5] = 0x1111;
	stack[8] = 0, stack[9] = 0x2222;
	for (int junk = 0; junk < 256; junk += 0x51) {
		assert_int_equal(up_unwind_walk(0x401000, (uint64_t)(uintptr_t)&stack[0],
						(uint64_t)(uintptr_t)&stack[4], 0, lookup_none,
						&junk, read_self, NULL, NULL, out, 6),
				 4);
		assert_int_equal(out[0], 0x401000); /* the hit's own pc, never [unknown] */
		assert_int_equal(out[1], 0x1111);
		assert_int_equal(out[2], 0x2222);
		assert_int_equal(out[3], UP_UNWIND_UNKNOWN); /* bp 0: the walk cannot go on */
	}
}

/* The agent's blob at a made-up address: its own rows (the blob's CFI) for its pcs. */
#define BLOB_AT 0x7e0000000000ull
extern const uint8_t up_agent_blob[];
extern const size_t up_agent_blob_size;

static int lookup_blob(void *ctx, uint64_t pc, struct up_unwind_row *row)
{
	(void)ctx;
	row->cfa = UP_UW_NONE;
	if (pc < BLOB_AT || pc - BLOB_AT >= up_agent_blob_size)
		return 0; /* the program's code, without tables */
	return up_unwind_row_at(up_uwarea_blob_table(), pc - BLOB_AT, row);
}

/* The real return of a hijacked slot: a stub's address or its table's number there. */
static uint64_t ret_hijacked(void *ctx, uint64_t slot, uint64_t value)
{
	const uint64_t *s = ctx;

	return slot == (uint64_t)(uintptr_t)s && (value < 0x100 || value + 1 == 0 ||
						  value - BLOB_AT < up_agent_blob_size)
		       ? 0x401234
		       : value;
}

/* A signal in a unit of the return trampoline (a call site, then its stub): the
   program's frames, as at the real return; the unit's own frame never shown. */
static void test_walk_return_units(void **state)
{
	uint64_t stack[16] = { 0 }, out[6], ret_off, unit;
	uint64_t *slot = &stack[8];
	const struct {
		unsigned at; /* in the unit */
		int above;   /* rsp: at the slot (0) or just above it (1) */
		uint64_t in_slot; /* 0 the real return, 1 the stub, 2 the table's number */
	} c[] = {
		{ 0, 0, 0 },		     /* lea 8(%rsp),%rsp: entered by a jump */
		{ 5, 1, 0 },		     /* call *-16(%rsp) */
		{ UPA_RT_CALL_LEN, 1, 1 },     /* the stub's push $n: the function returned */
		{ UPA_RT_CALL_LEN + 2, 0, 2 }, /* its jmp */
	};

	(void)state;
	assert_non_null(up_uwarea_blob_table());
	memcpy(&ret_off, up_agent_blob + UPA_RET_LAHF_AT, sizeof(ret_off));
	stack[12] = 0, stack[13] = 0x2222; /* the caller's frame, by its rbp */
	for (unsigned row = 0; row < 2; row++)
		for (unsigned k = 0; k <= UPA_RT_OWNERS; k += UPA_RT_OWNERS / 2)
			for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
				unit = BLOB_AT + ret_off - UPA_RT_CALL_LEN + row * UPA_RT_LEAN +
				       k * UPA_RT_STUB;
				*slot = c[i].in_slot == 0   ? 0x401234
					: c[i].in_slot == 1 ? unit + UPA_RT_CALL_LEN
							    : (uint64_t)k - 1;
				memset(out, 0, sizeof(out));
				assert_int_equal(
					up_unwind_walk(unit + c[i].at,
						       (uint64_t)(uintptr_t)(slot + c[i].above),
						       (uint64_t)(uintptr_t)&stack[12], 0,
						       lookup_blob, NULL, read_self, ret_hijacked,
						       slot, out, 6),
					3);
				assert_int_equal(out[0], 0x401234);
				assert_int_equal(out[1], 0x2222);
				assert_int_equal(out[2], UP_UNWIND_UNKNOWN);
			}
}

__attribute__((noinline)) int stack_test_target(int x)
{
	return x * 3;
}

static void test_names(void **state)
{
	struct up_stack_syms *s = up_stack_syms_new(getpid());
	char buf[512];
	void *anon = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)state;
	assert_non_null(s);
	up_stack_name(s, (uint64_t)(uintptr_t)stack_test_target + 1, buf, sizeof(buf));
	assert_string_equal(buf, "stack_test_target+0x1 [test_trace_stack]");
	/* getppid: a libc function no sanitizer replaces (ASan's strlen is libasan's) */
	up_stack_name(s, (uint64_t)(uintptr_t)getppid, buf, sizeof(buf));
	assert_non_null(strstr(buf, " [libc.so.6]"));
	up_stack_name(s, (uint64_t)(uintptr_t)anon, buf, sizeof(buf));
	assert_int_equal(strtoull(buf, NULL, 16), (uint64_t)(uintptr_t)anon);
	assert_true(!strncmp(buf, "0x", 2));
	assert_false(up_stack_mapped(s, (uint64_t)(uintptr_t)anon));
	assert_false(up_stack_mapped(s, 0x2d656c676f6f672full)); /* text read as a frame */
	assert_true(up_stack_mapped(s, (uint64_t)(uintptr_t)getppid));
	/* stale: read again at a miss, and the names stay right */
	up_stack_syms_stale(s);
	up_stack_name(s, (uint64_t)(uintptr_t)stack_test_target, buf, sizeof(buf));
	assert_string_equal(buf, "stack_test_target+0x0 [test_trace_stack]");
	up_stack_syms_free(s);
	munmap(anon, 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk),
		cmocka_unit_test(test_walk_no_row),
		cmocka_unit_test(test_walk_return_units),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
