// SPDX-License-Identifier: MIT
/*
 * up_insn_emulate against the CPU.  Each emulated instruction runs natively (the
 * trampoline in emu_native_x86_64.S loads a full register set, jumps to it, and
 * captures the full register set at the landing pad it reaches) and through the
 * emulator from the same registers, with a private copy of the stack and data the
 * instruction may touch; rip, every GPR, the flags and that memory must come out the
 * same.  The instruction sits at a fixed low address, with landing pads at its
 * fall-through and branch targets and int3 everywhere else, so a wrong landing shows
 * up as a trap, not a crash.
 *
 * 32-bit emulation is checked against hand-computed results (4-byte stack slots, esp
 * wrapping, rip masked to 32 bits), and a failing memory callback must leave the
 * registers untouched and return its errno.
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
#include <sys/mman.h>

#include <cmocka.h>

#include "arch/x86/insn.h"
#include "insn_test_util.h"

/* Low fixed addresses, so that absolute disp32 memory operands reach the data. */
#define CODE_BASE 0x30000000ULL
#define CODE_SIZE 0x100000ULL
#define INSN_AT (CODE_BASE + 0x80000)
#define STACK_BASE 0x31000000ULL
#define STACK_SIZE 0x4000ULL
#define STACK_TOP (STACK_BASE + 0x2000) /* rsp on entry: room above and below */
#define DATA_BASE 0x31100000ULL
#define DATA_SIZE 0x1000ULL

static uint8_t *code, *stack, *data;
static uint8_t stack_shadow[STACK_SIZE], data_shadow[DATA_SIZE];

/* ---- one case ---------------------------------------------------------------------- */

struct ecase {
	char name[96];
	uint8_t bytes[UP_INSN_MAX];
	unsigned n;
	struct user_regs_struct in;
	uint64_t pads[8];
	unsigned npads;
	bool optional; /* compared only when the analyzer plans it emulate */
};

static unsigned failures, compared, skipped_optional;

#define MAX_REPORTS 40

static void report(const struct ecase *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void report(const struct ecase *c, const char *fmt, ...)
{
	char hex[64], msg[256];
	va_list ap;

	failures++;
	if (failures > MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	print_error("FAIL %s [%s]: %s\n", c->name, itu_hex(c->bytes, c->n, hex, sizeof(hex)), msg);
}

static void code_clear(struct ecase *c)
{
	unsigned i;

	memset(code + (INSN_AT - CODE_BASE), 0xcc, UP_INSN_MAX + ITU_PAD_LEN);
	for (i = 0; i < c->npads; i++)
		memset(code + (c->pads[i] - CODE_BASE), 0xcc, ITU_PAD_LEN);
}

static uint64_t default_reg(unsigned i)
{
	return 0x0101010101010101ULL * (i + 1) ^ 0x8040201008040201ULL;
}

static void ec_begin(struct ecase *c, const void *bytes, unsigned n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Starts a case: instruction at INSN_AT, a pad at its fall-through, default state. */
static void ec_begin(struct ecase *c, const void *bytes, unsigned n, const char *fmt, ...)
{
	struct user_regs_struct *r = &c->in;
	va_list ap;
	size_t i;

	memset(c, 0, sizeof(*c));
	va_start(ap, fmt);
	vsnprintf(c->name, sizeof(c->name), fmt, ap);
	va_end(ap);
	assert_true(n <= UP_INSN_MAX);
	memcpy(c->bytes, bytes, n);
	c->n = n;
	for (i = 0; i < STACK_SIZE / 8; i++) {
		uint64_t v = 0x5a5a000000000000ULL | (STACK_BASE + i * 8);

		memcpy(stack + i * 8, &v, 8);
	}
	for (i = 0; i < DATA_SIZE / 8; i++) {
		uint64_t v = 0xdada000000000000ULL | (DATA_BASE + i * 8);

		memcpy(data + i * 8, &v, 8);
	}
	r->rax = default_reg(0), r->rbx = default_reg(1), r->rcx = default_reg(2);
	r->rdx = default_reg(3), r->rsi = default_reg(4), r->rdi = default_reg(5);
	r->rbp = default_reg(6), r->r8 = default_reg(7), r->r9 = default_reg(8);
	r->r10 = default_reg(9), r->r11 = default_reg(10), r->r12 = default_reg(11);
	r->r13 = default_reg(12), r->r14 = default_reg(13), r->r15 = default_reg(14);
	r->rsp = STACK_TOP;
	r->rip = INSN_AT;
	r->eflags = ITU_FLAGS_FIXED;
	r->cs = 0x33, r->ss = 0x2b;
	r->fs_base = 0x7f0000001000ULL, r->gs_base = 0;
	r->orig_rax = (uint64_t)-1;
	c->pads[c->npads++] = INSN_AT + n;
}

static void ec_pad(struct ecase *c, uint64_t at)
{
	assert_true(c->npads < sizeof(c->pads) / sizeof(c->pads[0]));
	assert_true(at >= CODE_BASE && at + ITU_PAD_LEN <= CODE_BASE + CODE_SIZE);
	c->pads[c->npads++] = at;
}

static void put64(uint64_t at, uint64_t v)
{
	if (at >= STACK_BASE && at + 8 <= STACK_BASE + STACK_SIZE)
		memcpy(stack + (at - STACK_BASE), &v, 8);
	else if (at >= DATA_BASE && at + 8 <= DATA_BASE + DATA_SIZE)
		memcpy(data + (at - DATA_BASE), &v, 8);
	else
		fail_msg("put64 at 0x%" PRIx64 " outside the test's stack and data", at);
}

static unsigned long long *gpr(struct user_regs_struct *r, unsigned i)
{
	unsigned long long *regs[16] = { &r->rax, &r->rcx, &r->rdx, &r->rbx, &r->rsp, &r->rbp,
			       &r->rsi, &r->rdi, &r->r8,  &r->r9,  &r->r10, &r->r11,
			       &r->r12, &r->r13, &r->r14, &r->r15 };
	return regs[i];
}

static const char *const gpr_name[16] = { "rax", "rcx", "rdx", "rbx", "rsp", "rbp",
					  "rsi", "rdi", "r8",  "r9",  "r10", "r11",
					  "r12", "r13", "r14", "r15" };

/*
 * Runs the case natively and emulated and compares.  Returns 1 when it ended at a pad
 * other than the fall-through (a taken branch), 0 at the fall-through, -1 when it was
 * not compared.
 */
static int ec_run(struct ecase *c)
{
	struct user_regs_struct native, emu;
	struct itu_native_fault fault;
	struct itu_mem mem = { 0 };
	struct up_insn insn;
	unsigned i;
	int sig, rc, taken = -1;

	for (i = 0; i < c->npads; i++)
		itu_pad_write(code + (c->pads[i] - CODE_BASE));
	memcpy(code + (INSN_AT - CODE_BASE), c->bytes, c->n);

	rc = up_insn_analyze(&insn, c->bytes, c->n, INSN_AT, UP_MODE_64);
	if (rc) {
		report(c, "up_insn_analyze returned %d", rc);
		goto out;
	}
	if (insn.plan != UP_PLAN_EMULATE || insn.length != c->n) {
		if (c->optional && insn.length == c->n) {
			skipped_optional++;
			print_message("note: %s is planned %s (%s), not emulate: not compared\n",
				      c->name, up_insn_plan_str(insn.plan),
				      up_insn_reason_name(insn.reason));
			goto out;
		}
		report(c, "planned %s/%s length %u, expected emulate length %u",
		       up_insn_plan_str(insn.plan), up_insn_reason_name(insn.reason),
		       insn.length, c->n);
		goto out;
	}

	memcpy(stack_shadow, stack, STACK_SIZE);
	memcpy(data_shadow, data, DATA_SIZE);
	sig = itu_native_run(&c->in, &native, &fault);
	if (sig) {
		report(c, "native run got signal %d at rip 0x%" PRIx64 " (addr 0x%" PRIx64
			  "): the case is wrong",
		       sig, fault.rip, fault.addr);
		goto out;
	}

	emu = c->in;
	itu_mem_add(&mem, STACK_BASE, stack_shadow, STACK_SIZE);
	itu_mem_add(&mem, DATA_BASE, data_shadow, DATA_SIZE);
	rc = up_insn_emulate(&insn, &emu, itu_mem_fn, &mem);
	compared++;
	if (rc) {
		report(c, "up_insn_emulate returned %d (last access 0x%" PRIx64 "+%zu %s)", rc,
		       mem.last_addr, mem.last_len, mem.last_write ? "write" : "read");
		goto out;
	}
	if (emu.rip != native.rip)
		report(c, "rip: emulated 0x%" PRIx64 ", native 0x%" PRIx64, (uint64_t)emu.rip,
		       (uint64_t)native.rip);
	for (i = 0; i < 16; i++)
		if (*gpr(&emu, i) != *gpr(&native, i))
			report(c, "%s: emulated 0x%llx, native 0x%llx", gpr_name[i], *gpr(&emu, i),
			       *gpr(&native, i));
	if ((emu.eflags & ITU_FLAGS_MASK) != (native.eflags & ITU_FLAGS_MASK))
		report(c, "eflags: emulated 0x%" PRIx64 ", native 0x%" PRIx64,
		       (uint64_t)emu.eflags, (uint64_t)native.eflags);
	if (emu.cs != c->in.cs || emu.ss != c->in.ss || emu.fs_base != c->in.fs_base ||
	    emu.gs_base != c->in.gs_base || emu.ds != c->in.ds || emu.es != c->in.es ||
	    emu.fs != c->in.fs || emu.gs != c->in.gs || emu.orig_rax != c->in.orig_rax)
		report(c, "a segment, base or orig_rax field changed");
	for (i = 0; i < STACK_SIZE; i += 8)
		if (memcmp(stack + i, stack_shadow + i, 8)) {
			uint64_t a, b;

			memcpy(&a, stack_shadow + i, 8);
			memcpy(&b, stack + i, 8);
			report(c, "stack at 0x%" PRIx64 " (rsp%+" PRId64 "): emulated 0x%" PRIx64
				  ", native 0x%" PRIx64,
			       (uint64_t)(STACK_BASE + i), (int64_t)(STACK_BASE + i - c->in.rsp), a, b);
		}
	if (memcmp(data, data_shadow, DATA_SIZE))
		report(c, "data memory differs");
	taken = native.rip != INSN_AT + c->n;
out:
	code_clear(c);
	return taken;
}

/* ---- setup ------------------------------------------------------------------------- */

static int setup(void **state)
{
	code = itu_map_at(CODE_BASE, CODE_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC);
	stack = itu_map_at(STACK_BASE, STACK_SIZE, PROT_READ | PROT_WRITE);
	data = itu_map_at(DATA_BASE, DATA_SIZE, PROT_READ | PROT_WRITE);
	if (!code || !stack || !data) {
		print_error("cannot map the test's code/stack/data at 0x%llx/0x%llx/0x%llx: %s\n",
			    CODE_BASE, STACK_BASE, DATA_BASE, strerror(errno));
		return -1;
	}
	memset(code, 0xcc, CODE_SIZE);
	return 0;
}

static int teardown(void **state)
{
	if (code)
		munmap(code, CODE_SIZE);
	if (stack)
		munmap(stack, STACK_SIZE);
	if (data)
		munmap(data, DATA_SIZE);
	return 0;
}

static void check_clean(void)
{
	if (failures > MAX_REPORTS)
		print_error("... %u failures in all\n", failures);
	assert_int_equal(failures, 0);
}

static void reset_counts(void)
{
	failures = compared = skipped_optional = 0;
}

/* ---- direct branches --------------------------------------------------------------- */

static void put_rel(uint8_t *at, int64_t rel, unsigned size)
{
	int8_t r8 = (int8_t)rel;
	int32_t r32 = (int32_t)rel;

	if (size == 1)
		memcpy(at, &r8, 1);
	else
		memcpy(at, &r32, 4);
}

static void test_jmp_call_rel(void **state)
{
	static const int64_t rel8s[] = { 0x40, 0x7f, -0x60, -0x80 };
	static const int64_t rel32s[] = { 0x1000, 0x7ff00, -0x2000, -0x7ff00 };
	struct ecase c;
	uint8_t b[8];
	size_t i;

	reset_counts();
	for (i = 0; i < 4; i++) {
		b[0] = 0xeb;
		put_rel(b + 1, rel8s[i], 1);
		ec_begin(&c, b, 2, "jmp rel8 %+" PRId64, rel8s[i]);
		ec_pad(&c, INSN_AT + 2 + rel8s[i]);
		assert_int_equal(ec_run(&c), 1);
	}
	for (i = 0; i < 4; i++) {
		b[0] = 0xe9;
		put_rel(b + 1, rel32s[i], 4);
		ec_begin(&c, b, 5, "jmp rel32 %+" PRId64, rel32s[i]);
		ec_pad(&c, INSN_AT + 5 + rel32s[i]);
		assert_int_equal(ec_run(&c), 1);

		b[0] = 0xe8;
		ec_begin(&c, b, 5, "call rel32 %+" PRId64, rel32s[i]);
		ec_pad(&c, INSN_AT + 5 + rel32s[i]);
		assert_int_equal(ec_run(&c), 1);
	}
	/* the stack pointer at odd places: the push goes wherever rsp is */
	b[0] = 0xe8;
	put_rel(b + 1, 0x1000, 4);
	ec_begin(&c, b, 5, "call rel32, rsp unaligned");
	c.in.rsp = STACK_TOP - 3;
	ec_pad(&c, INSN_AT + 5 + 0x1000);
	ec_run(&c);
	check_clean();
}

/* every condition, rel8 and rel32, under every combination of CF PF ZF SF OF */
static void test_jcc(void **state)
{
	static const uint64_t bits[] = { 0x001, 0x004, 0x040, 0x080, 0x800 };
	unsigned cc, combo, form, taken[16][2] = { { 0 } }, runs = 0;
	struct ecase c;
	uint8_t b[8];

	reset_counts();
	for (cc = 0; cc < 16; cc++)
		for (form = 0; form < 2; form++)
			for (combo = 0; combo < 32; combo++) {
				uint64_t flags = ITU_FLAGS_FIXED;
				unsigned n, k;
				int64_t rel;
				int t;

				for (k = 0; k < 5; k++)
					if (combo & (1u << k))
						flags |= bits[k];
				if (form == 0) {
					b[0] = (uint8_t)(0x70 + cc);
					rel = combo & 1 ? 0x40 : -0x70;
					put_rel(b + 1, rel, 1);
					n = 2;
				} else {
					b[0] = 0x0f;
					b[1] = (uint8_t)(0x80 + cc);
					rel = combo & 1 ? -0x2000 : 0x3000;
					put_rel(b + 2, rel, 4);
					n = 6;
				}
				ec_begin(&c, b, n, "j%x %s flags 0x%03" PRIx64, cc,
					 form ? "rel32" : "rel8", flags);
				c.in.eflags = flags;
				ec_pad(&c, INSN_AT + n + rel);
				t = ec_run(&c);
				if (t > 0)
					taken[cc][form]++;
				runs++;
			}
	check_clean();
	/* the oracle really exercised both outcomes of every condition */
	for (cc = 0; cc < 16; cc++)
		for (form = 0; form < 2; form++) {
			if (taken[cc][form] == 0 || taken[cc][form] == 32)
				fail_msg("j%x %s: taken %u of 32 flag combinations", cc,
					 form ? "rel32" : "rel8", taken[cc][form]);
		}
	assert_int_equal(compared, runs);
}

/* loop, loope, loopne, jrcxz, and their 67-prefixed (ecx) forms */
static void test_loop(void **state)
{
	static const uint64_t rcxs[] = { 0, 1, 2, 0x123, 0x100000000ULL, 0x100000001ULL,
					 0xffffffffULL, (uint64_t)-1 };
	static const uint8_t ops[] = { 0xe0, 0xe1, 0xe2, 0xe3 };
	static const char *const names[] = { "loopne", "loope", "loop", "jrcxz" };
	unsigned taken[4][2] = { { 0 } }, not_taken[4][2] = { { 0 } };
	unsigned o, a, z, i;
	struct ecase c;

	reset_counts();
	for (o = 0; o < 4; o++)
		for (a = 0; a < 2; a++)
			for (z = 0; z < 2; z++)
				for (i = 0; i < sizeof(rcxs) / sizeof(rcxs[0]); i++) {
					uint8_t b[3];
					unsigned n = 0;
					int64_t rel = i & 1 ? 0x50 : -0x58;
					int t;

					if (a)
						b[n++] = 0x67;
					b[n++] = ops[o];
					b[n++] = (uint8_t)(int8_t)rel;
					ec_begin(&c, b, n, "%s%s rcx 0x%" PRIx64 " zf %u",
						 a ? "addr32 " : "", names[o], rcxs[i], z);
					c.in.rcx = rcxs[i];
					c.in.eflags = ITU_FLAGS_FIXED | (z ? 0x40 : 0);
					ec_pad(&c, INSN_AT + n + rel);
					t = ec_run(&c);
					if (t > 0)
						taken[o][a]++;
					else if (t == 0)
						not_taken[o][a]++;
				}
	check_clean();
	for (o = 0; o < 4; o++)
		for (a = 0; a < 2; a++)
			if (!taken[o][a] || !not_taken[o][a])
				fail_msg("%s (addr32 %u): taken %u, not taken %u: the cases do not "
					 "cover both outcomes", names[o], a, taken[o][a], not_taken[o][a]);
}

/* ---- ret --------------------------------------------------------------------------- */

static void test_ret(void **state)
{
	static const struct {
		const char *name;
		uint8_t b[4];
		unsigned n;
	} rets[] = {
		{ "ret", { 0xc3 }, 1 },
		{ "rep ret", { 0xf3, 0xc3 }, 2 },
		{ "ret $0", { 0xc2, 0x00, 0x00 }, 3 },
		{ "ret $8", { 0xc2, 0x08, 0x00 }, 3 },
		{ "ret $0x10", { 0xc2, 0x10, 0x00 }, 3 },
		{ "ret $0x1003", { 0xc2, 0x03, 0x10 }, 3 },
		{ "ret $0xfff8", { 0xc2, 0xf8, 0xff }, 3 }, /* imm16 is unsigned */
	};
	struct ecase c;
	size_t i;

	reset_counts();
	for (i = 0; i < sizeof(rets) / sizeof(rets[0]); i++) {
		uint64_t back = INSN_AT - 0x3000 + i * 0x40;

		ec_begin(&c, rets[i].b, rets[i].n, "%s", rets[i].name);
		ec_pad(&c, back);
		put64(STACK_TOP, back);
		assert_int_equal(ec_run(&c), 1);

		/* and from an unaligned stack */
		ec_begin(&c, rets[i].b, rets[i].n, "%s, rsp unaligned", rets[i].name);
		c.in.rsp = STACK_TOP - 0x805;
		ec_pad(&c, back);
		memcpy(stack + (c.in.rsp - STACK_BASE), &back, 8);
		ec_run(&c);
	}
	check_clean();
}

/* ---- indirect jmp and call ----------------------------------------------------------- */

/* the modrm byte's reg field: 4 is jmp, 2 is call */
static void indirect_reg(unsigned ext, const char *what)
{
	struct ecase c;
	unsigned r;

	for (r = 0; r < 16; r++) {
		uint8_t b[3];
		unsigned n = 0;
		uint64_t target = INSN_AT + 0x1000 + r * 0x100;

		if (r == 4) /* through rsp: into the stack */
			continue;
		if (r >= 8)
			b[n++] = 0x41;
		b[n++] = 0xff;
		b[n++] = (uint8_t)(0xc0 | ext << 3 | (r & 7));
		ec_begin(&c, b, n, "%s *%%%s", what, gpr_name[r]);
		*gpr(&c.in, r) = target;
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	/* rex.w is allowed and changes nothing */
	{
		uint8_t b[3] = { 0x48, 0xff, (uint8_t)(0xc0 | ext << 3) };

		ec_begin(&c, b, 3, "rex.w %s *%%rax", what);
		c.in.rax = INSN_AT - 0x4000;
		ec_pad(&c, c.in.rax);
		assert_int_equal(ec_run(&c), 1);
	}
}

static void indirect_mem(unsigned ext, const char *what)
{
	const uint8_t m = (uint8_t)(ext << 3);
	uint64_t target = INSN_AT + 0x2000;
	struct ecase c;
	int32_t d32;

	/* (%rax) */
	{
		uint8_t b[2] = { 0xff, (uint8_t)(0x00 | m) };

		ec_begin(&c, b, 2, "%s *(%%rax)", what);
		c.in.rax = DATA_BASE + 0x100;
		put64(DATA_BASE + 0x100, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	/* absolute: *disp32 (SIB without base or index) */
	{
		uint8_t b[7] = { 0xff, (uint8_t)(0x04 | m), 0x25 };

		d32 = (int32_t)(DATA_BASE + 0x208);
		memcpy(b + 3, &d32, 4);
		ec_begin(&c, b, 7, "%s *0x%x (absolute)", what, (unsigned)d32);
		put64(DATA_BASE + 0x208, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	/* rip-relative */
	{
		uint8_t b[6] = { 0xff, (uint8_t)(0x05 | m) };

		d32 = (int32_t)(DATA_BASE + 0x310 - (INSN_AT + 6));
		memcpy(b + 2, &d32, 4);
		ec_begin(&c, b, 6, "%s *disp(%%rip)", what);
		put64(DATA_BASE + 0x310, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	/* 8(%rbx,%rax,8) */
	{
		uint8_t b[4] = { 0xff, (uint8_t)(0x44 | m), 0xc3, 0x08 };

		ec_begin(&c, b, 4, "%s *8(%%rbx,%%rax,8)", what);
		c.in.rbx = DATA_BASE + 0x400;
		c.in.rax = 3;
		put64(DATA_BASE + 0x400 + 8 + 3 * 8, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	/* -0x10(%rbx,%rcx,4): negative displacement, scale 4 */
	{
		uint8_t b[4] = { 0xff, (uint8_t)(0x44 | m), 0x8b, 0xf0 };

		ec_begin(&c, b, 4, "%s *-0x10(%%rbx,%%rcx,4)", what);
		c.in.rbx = DATA_BASE + 0x500;
		c.in.rcx = 6;
		put64(DATA_BASE + 0x500 - 0x10 + 6 * 4, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	/* (%r12) needs a SIB, 0(%r13) a disp8 */
	{
		uint8_t b[4] = { 0x41, 0xff, (uint8_t)(0x04 | m), 0x24 };

		ec_begin(&c, b, 4, "%s *(%%r12)", what);
		c.in.r12 = DATA_BASE + 0x600;
		put64(DATA_BASE + 0x600, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	{
		uint8_t b[4] = { 0x41, 0xff, (uint8_t)(0x45 | m), 0x00 };

		ec_begin(&c, b, 4, "%s *0(%%r13)", what);
		c.in.r13 = DATA_BASE + 0x608;
		put64(DATA_BASE + 0x608, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	/* 0x18(%r9,%r10,2): rex.xb */
	{
		uint8_t b[5] = { 0x43, 0xff, (uint8_t)(0x44 | m), 0x51, 0x18 };

		ec_begin(&c, b, 5, "%s *0x18(%%r9,%%r10,2)", what);
		c.in.r9 = DATA_BASE + 0x700;
		c.in.r10 = 4;
		put64(DATA_BASE + 0x700 + 0x18 + 8, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	/* (%rsp) and 8(%rsp): the target is read before a call pushes */
	{
		uint8_t b[3] = { 0xff, (uint8_t)(0x04 | m), 0x24 };

		ec_begin(&c, b, 3, "%s *(%%rsp)", what);
		put64(STACK_TOP, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
	{
		uint8_t b[4] = { 0xff, (uint8_t)(0x44 | m), 0x24, 0xf8 };

		ec_begin(&c, b, 4, "%s *-8(%%rsp)", what);
		put64(STACK_TOP - 8, target);
		ec_pad(&c, target);
		assert_int_equal(ec_run(&c), 1);
	}
}

static void test_jmp_indirect(void **state)
{
	struct ecase c;
	const uint8_t notrack[3] = { 0x3e, 0xff, 0xe0 };

	reset_counts();
	indirect_reg(4, "jmp");
	indirect_mem(4, "jmp");
	/* notrack (IBT) changes nothing without CET: emulated when the analyzer says so */
	ec_begin(&c, notrack, 3, "notrack jmp *%%rax");
	c.optional = true;
	c.in.rax = INSN_AT + 0x1234;
	ec_pad(&c, c.in.rax);
	ec_run(&c);
	check_clean();
}

static void test_call_indirect(void **state)
{
	reset_counts();
	indirect_reg(2, "call");
	indirect_mem(2, "call");
	check_clean();
}

/* ---- push and pop ------------------------------------------------------------------ */

static void test_push(void **state)
{
	struct ecase c;
	unsigned r;

	reset_counts();
	for (r = 0; r < 16; r++) {
		uint8_t b[3];
		unsigned n = 0;

		if (r >= 8)
			b[n++] = 0x41;
		b[n++] = (uint8_t)(0x50 + (r & 7));
		ec_begin(&c, b, n, "push %%%s", gpr_name[r]);
		assert_int_equal(ec_run(&c), 0);

		/* 16-bit push */
		n = 0;
		b[n++] = 0x66;
		if (r >= 8)
			b[n++] = 0x41;
		b[n++] = (uint8_t)(0x50 + (r & 7));
		ec_begin(&c, b, n, "pushw %%%s", gpr_name[r]);
		assert_int_equal(ec_run(&c), 0);
	}
	{
		static const uint8_t b[] = { 0x48, 0x53 }; /* rex.w push %rbx */

		ec_begin(&c, b, 2, "rex.w push %%rbx");
		ec_run(&c);
	}
	{
		static const uint8_t b[] = { 0x54 };

		ec_begin(&c, b, 1, "push %%rsp, rsp unaligned");
		c.in.rsp = STACK_TOP - 1;
		ec_run(&c);
	}
	{
		static const uint8_t b[] = { 0xff, 0xf0 }; /* push %rax, the ff /6 form */

		ec_begin(&c, b, 2, "push %%rax (ff /6)");
		c.optional = true;
		ec_run(&c);
	}
	check_clean();
}

static void test_push_imm(void **state)
{
	static const struct {
		const char *name;
		uint8_t b[6];
		unsigned n;
	} pushes[] = {
		{ "push $0x7f", { 0x6a, 0x7f }, 2 },
		{ "push $-0x80", { 0x6a, 0x80 }, 2 },
		{ "push $-1", { 0x6a, 0xff }, 2 },
		{ "push $0", { 0x6a, 0x00 }, 2 },
		{ "push $0x12345678", { 0x68, 0x78, 0x56, 0x34, 0x12 }, 5 },
		{ "push $-0x80000000", { 0x68, 0x00, 0x00, 0x00, 0x80 }, 5 },
		{ "push $0x7fffffff", { 0x68, 0xff, 0xff, 0xff, 0x7f }, 5 },
		{ "pushw $-0x80", { 0x66, 0x6a, 0x80 }, 3 },
		{ "pushw $0x1234", { 0x66, 0x68, 0x34, 0x12 }, 4 },
		{ "pushw $0x8001", { 0x66, 0x68, 0x01, 0x80 }, 4 },
	};
	struct ecase c;
	size_t i;

	reset_counts();
	for (i = 0; i < sizeof(pushes) / sizeof(pushes[0]); i++) {
		ec_begin(&c, pushes[i].b, pushes[i].n, "%s", pushes[i].name);
		assert_int_equal(ec_run(&c), 0);
	}
	check_clean();
}

static void test_pop(void **state)
{
	struct ecase c;
	unsigned r;

	reset_counts();
	for (r = 0; r < 16; r++) {
		uint8_t b[3];
		unsigned n = 0;

		if (r >= 8)
			b[n++] = 0x41;
		b[n++] = (uint8_t)(0x58 + (r & 7));
		ec_begin(&c, b, n, "pop %%%s", gpr_name[r]);
		put64(STACK_TOP, 0xfeedface00000000ULL | r);
		assert_int_equal(ec_run(&c), 0);

		n = 0;
		b[n++] = 0x66;
		if (r >= 8)
			b[n++] = 0x41;
		b[n++] = (uint8_t)(0x58 + (r & 7));
		ec_begin(&c, b, n, "popw %%%s", gpr_name[r]);
		put64(STACK_TOP, 0xfeedface0000beefULL + r);
		ec_run(&c);
	}
	{
		static const uint8_t b[] = { 0x5c };

		ec_begin(&c, b, 1, "pop %%rsp, a value elsewhere in the stack");
		put64(STACK_TOP, STACK_BASE + 0x123);
		ec_run(&c);
	}
	{
		static const uint8_t b[] = { 0x8f, 0xc1 }; /* pop %rcx, the 8f /0 form */

		ec_begin(&c, b, 2, "pop %%rcx (8f /0)");
		c.optional = true;
		put64(STACK_TOP, 0x1122334455667788ULL);
		ec_run(&c);
	}
	check_clean();
}

/* ---- nops -------------------------------------------------------------------------- */

static void test_nops(void **state)
{
	static const struct {
		const char *name;
		uint8_t b[12];
		unsigned n;
	} nops[] = {
		{ "nop", { 0x90 }, 1 },
		{ "xchg %ax,%ax", { 0x66, 0x90 }, 2 },
		{ "nopl (%rax)", { 0x0f, 0x1f, 0x00 }, 3 },
		{ "nopl 0(%rax)", { 0x0f, 0x1f, 0x40, 0x00 }, 4 },
		{ "nopl 0(%rax,%rax,1)", { 0x0f, 0x1f, 0x44, 0x00, 0x00 }, 5 },
		{ "nopw 0(%rax,%rax,1)", { 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00 }, 6 },
		{ "nopl 0(%rax) disp32", { 0x0f, 0x1f, 0x80, 0, 0, 0, 0 }, 7 },
		{ "nopl 0(%rax,%rax,1) disp32", { 0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0 }, 8 },
		{ "nopw 0(%rax,%rax,1) disp32", { 0x66, 0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0 }, 9 },
		{ "cs nopw", { 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0 }, 10 },
		{ "data16 cs nopw", { 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0 }, 11 },
		{ "endbr64", { 0xf3, 0x0f, 0x1e, 0xfa }, 4 },
		{ "endbr32", { 0xf3, 0x0f, 0x1e, 0xfb }, 4 },
		{ "pause", { 0xf3, 0x90 }, 2 },
	};
	struct ecase c;
	size_t i;

	reset_counts();
	for (i = 0; i < sizeof(nops) / sizeof(nops[0]); i++) {
		ec_begin(&c, nops[i].b, nops[i].n, "%s", nops[i].name);
		c.in.eflags = ITU_FLAGS_FIXED | 0x8d5;
		assert_int_equal(ec_run(&c), 0);
	}
	check_clean();
}

/* The oracle itself: the trampoline reports what the CPU did, not what we assume. */
static void test_native_reference(void **state)
{
	static const uint8_t push[] = { 0x53 }; /* push %rbx */
	struct user_regs_struct out;
	struct ecase c;
	uint64_t top;

	ec_begin(&c, push, 1, "reference");
	c.in.eflags = ITU_FLAGS_FIXED | 0x8c5;
	itu_pad_write(code + (INSN_AT + 1 - CODE_BASE));
	memcpy(code + (INSN_AT - CODE_BASE), push, 1);
	assert_int_equal(itu_native_run(&c.in, &out, NULL), 0);
	assert_int_equal(out.rip, INSN_AT + 1);
	assert_int_equal(out.rsp, STACK_TOP - 8);
	memcpy(&top, stack + (STACK_TOP - 8 - STACK_BASE), 8);
	assert_int_equal(top, c.in.rbx);
	assert_int_equal(out.rbx, c.in.rbx);
	assert_int_equal(out.rax, c.in.rax);
	assert_int_equal(out.rdi, c.in.rdi);
	assert_int_equal(out.r15, c.in.r15);
	assert_int_equal(out.eflags & ITU_FLAGS_MASK, 0x8c5);
	code_clear(&c);

	/* an int3 where no pad is: reported as SIGTRAP, not a crash */
	{
		static const uint8_t jmp[] = { 0xeb, 0x40 };
		struct itu_native_fault f;

		ec_begin(&c, jmp, 2, "no pad");
		memcpy(code + (INSN_AT - CODE_BASE), jmp, 2);
		assert_int_equal(itu_native_run(&c.in, &out, &f), SIGTRAP);
		assert_int_equal(f.rip, INSN_AT + 2 + 0x40 + 1);
		code_clear(&c);
	}
}

/* ---- failing memory ----------------------------------------------------------------- */

static void expect_mem_failure(const uint8_t *b, unsigned n, const char *name,
			       int fail_read, int fail_write, struct user_regs_struct *regs)
{
	struct user_regs_struct before = *regs;
	struct itu_mem mem = { 0 };
	struct up_insn insn;
	char hex[64];
	int rc;

	itu_mem_add(&mem, STACK_BASE, stack_shadow, STACK_SIZE);
	itu_mem_add(&mem, DATA_BASE, data_shadow, DATA_SIZE);
	itu_mem_add(&mem, CODE_BASE, code, CODE_SIZE); /* for *disp(%rip): int3s, read only */
	memset(stack_shadow, 0x11, sizeof(stack_shadow));
	memset(data_shadow, 0x22, sizeof(data_shadow));
	mem.fail_read = fail_read;
	mem.fail_write = fail_write;
	assert_int_equal(up_insn_analyze(&insn, b, n, regs->rip, UP_MODE_64), 0);
	assert_int_equal(insn.plan, UP_PLAN_EMULATE);
	rc = up_insn_emulate(&insn, regs, itu_mem_fn, &mem);
	if (rc != (fail_read ? fail_read : fail_write) || memcmp(&before, regs, sizeof(before)))
		fail_msg("%s [%s] with a failing %s: returned %d (expected %d), registers %s",
			 name, itu_hex(b, n, hex, sizeof(hex)), fail_read ? "read" : "write", rc,
			 fail_read ? fail_read : fail_write,
			 memcmp(&before, regs, sizeof(before)) ? "CHANGED" : "unchanged");
	assert_true(mem.calls > 0);
}

static void test_mem_failure(void **state)
{
	static const struct {
		const char *name;
		uint8_t b[8];
		unsigned n;
		bool reads, writes;
	} cases[] = {
		{ "call rel32", { 0xe8, 0x00, 0x10, 0x00, 0x00 }, 5, false, true },
		{ "ret", { 0xc3 }, 1, true, false },
		{ "ret $8", { 0xc2, 0x08, 0x00 }, 3, true, false },
		{ "push %rbx", { 0x53 }, 1, false, true },
		{ "push %r12", { 0x41, 0x54 }, 2, false, true },
		{ "pushw %ax", { 0x66, 0x50 }, 2, false, true },
		{ "push $0x12345678", { 0x68, 0x78, 0x56, 0x34, 0x12 }, 5, false, true },
		{ "pop %rbx", { 0x5b }, 1, true, false },
		{ "pop %rsp", { 0x5c }, 1, true, false },
		{ "jmp *(%rax)", { 0xff, 0x20 }, 2, true, false },
		{ "jmp *disp(%rip)", { 0xff, 0x25, 0x00, 0x01, 0x00, 0x00 }, 6, true, false },
		{ "call *(%rax)", { 0xff, 0x10 }, 2, true, true },
		{ "call *disp(%rip)", { 0xff, 0x15, 0x00, 0x01, 0x00, 0x00 }, 6, true, true },
		{ "call *%rcx", { 0xff, 0xd1 }, 2, false, true },
	};
	struct user_regs_struct regs;
	struct ecase c;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ec_begin(&c, cases[i].b, cases[i].n, "%s", cases[i].name);
		c.in.rax = DATA_BASE + 0x40;
		c.in.rcx = INSN_AT + 0x4000;
		if (cases[i].reads) {
			regs = c.in;
			expect_mem_failure(cases[i].b, cases[i].n, cases[i].name, -EFAULT, 0, &regs);
			regs = c.in;
			expect_mem_failure(cases[i].b, cases[i].n, cases[i].name, -EIO, 0, &regs);
		}
		if (cases[i].writes) {
			regs = c.in;
			expect_mem_failure(cases[i].b, cases[i].n, cases[i].name, 0, -EFAULT, &regs);
			regs = c.in;
			expect_mem_failure(cases[i].b, cases[i].n, cases[i].name, 0, -ENOMEM, &regs);
		}
	}
}

/* not emulate-planned: -ENOTSUP, registers untouched, no memory access */
static void test_not_emulated(void **state)
{
	static const struct {
		const char *name;
		uint8_t b[8];
		unsigned n;
	} cases[] = {
		{ "mov %rsp,%rbp", { 0x48, 0x89, 0xe5 }, 3 },
		{ "lea disp(%rip),%rax", { 0x48, 0x8d, 0x05, 0x10, 0, 0, 0 }, 7 },
		{ "syscall", { 0x0f, 0x05 }, 2 },
		{ "int3", { 0xcc }, 1 },
	};
	struct user_regs_struct regs, before;
	struct itu_mem mem = { 0 };
	struct up_insn insn;
	struct ecase c;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ec_begin(&c, cases[i].b, cases[i].n, "%s", cases[i].name);
		regs = before = c.in;
		assert_int_equal(
			up_insn_analyze(&insn, cases[i].b, cases[i].n, INSN_AT, UP_MODE_64), 0);
		assert_int_not_equal(insn.plan, UP_PLAN_EMULATE);
		assert_int_equal(up_insn_emulate(&insn, &regs, itu_mem_fn, &mem), -ENOTSUP);
		assert_memory_equal(&regs, &before, sizeof(regs));
		assert_int_equal(mem.reads + mem.writes, 0);
	}
}

/* ---- 32-bit, by hand ----------------------------------------------------------------- */

struct emu32 {
	struct user_regs_struct regs;
	struct itu_mem mem;
	uint8_t lo[0x100]; /* at LO32 */
	uint8_t hi[0x100]; /* at HI32, up to 2^32 */
	struct up_insn insn;
};

#define LO32 0x0804a000ULL
#define HI32 0xffffff00ULL

static void emu32_init(struct emu32 *e)
{
	memset(e, 0, sizeof(*e));
	memset(e->lo, 0xa5, sizeof(e->lo));
	memset(e->hi, 0xa5, sizeof(e->hi));
	itu_mem_add(&e->mem, LO32, e->lo, sizeof(e->lo));
	itu_mem_add(&e->mem, HI32, e->hi, sizeof(e->hi));
	/* as PTRACE_GETREGS gives them for a 32-bit tracee: zero-extended */
	e->regs.rax = 0x11111111, e->regs.rbx = 0x22222222, e->regs.rcx = 0x33333333;
	e->regs.rdx = 0x44444444, e->regs.rsi = 0x55555555, e->regs.rdi = 0x66666666;
	e->regs.rbp = 0x77777777, e->regs.rsp = LO32 + 0x80;
	e->regs.eflags = ITU_FLAGS_FIXED;
	e->regs.cs = 0x23, e->regs.ss = 0x2b;
}

/* emulates bytes at rip in 32-bit mode; returns the emulator's result */
static int emu32_run(struct emu32 *e, const void *b, unsigned n, uint64_t rip)
{
	char hex[64];

	e->regs.rip = rip;
	assert_int_equal(up_insn_analyze(&e->insn, b, n, rip, UP_MODE_32), 0);
	if (e->insn.plan != UP_PLAN_EMULATE || e->insn.length != n)
		fail_msg("32-bit [%s] planned %s/%s length %u, expected emulate length %u",
			 itu_hex(b, n, hex, sizeof(hex)), up_insn_plan_str(e->insn.plan),
			 up_insn_reason_name(e->insn.reason), e->insn.length, n);
	return up_insn_emulate(&e->insn, &e->regs, itu_mem_fn, &e->mem);
}

static uint32_t lo32_at(struct emu32 *e, uint64_t addr)
{
	uint32_t v;

	assert_true(addr >= LO32 && addr + 4 <= LO32 + sizeof(e->lo));
	memcpy(&v, e->lo + (addr - LO32), 4);
	return v;
}

static void test_emulate32(void **state)
{
	struct emu32 e;

	/* push %eax: 4 bytes, esp - 4 */
	emu32_init(&e);
	assert_int_equal(emu32_run(&e, "\x50", 1, LO32 + 0x10), 0);
	assert_int_equal(e.regs.rsp, LO32 + 0x7c);
	assert_int_equal(lo32_at(&e, LO32 + 0x7c), 0x11111111);
	assert_int_equal(lo32_at(&e, LO32 + 0x80), 0xa5a5a5a5); /* nothing more written */
	assert_int_equal(lo32_at(&e, LO32 + 0x78), 0xa5a5a5a5);
	assert_int_equal(e.regs.rip, LO32 + 0x11);

	/* pushw %ax: 2 bytes */
	emu32_init(&e);
	assert_int_equal(emu32_run(&e, "\x66\x50", 2, LO32), 0);
	assert_int_equal(e.regs.rsp, LO32 + 0x7e);
	assert_int_equal(lo32_at(&e, LO32 + 0x7c), 0x1111a5a5);

	/* push $-1 (imm8, sign-extended to 32 bits, 4 bytes) */
	emu32_init(&e);
	assert_int_equal(emu32_run(&e, "\x6a\xff", 2, LO32), 0);
	assert_int_equal(e.regs.rsp, LO32 + 0x7c);
	assert_int_equal(lo32_at(&e, LO32 + 0x7c), 0xffffffff);
	assert_int_equal(lo32_at(&e, LO32 + 0x78), 0xa5a5a5a5);

	/* push with esp 0 wraps to 0xfffffffc, not to 2^64 - 4 */
	emu32_init(&e);
	e.regs.rsp = 0;
	assert_int_equal(emu32_run(&e, "\x53", 1, LO32), 0);
	assert_int_equal(e.regs.rsp, 0xfffffffcULL);
	assert_memory_equal(e.hi + 0xfc, "\x22\x22\x22\x22", 4);

	/* call rel32 pushes the 4-byte return address */
	emu32_init(&e);
	assert_int_equal(emu32_run(&e, "\xe8\x00\x01\x00\x00", 5, LO32 + 0x20), 0);
	assert_int_equal(e.regs.rip, LO32 + 0x125);
	assert_int_equal(e.regs.rsp, LO32 + 0x7c);
	assert_int_equal(lo32_at(&e, LO32 + 0x7c), LO32 + 0x25);
	assert_int_equal(lo32_at(&e, LO32 + 0x78), 0xa5a5a5a5);

	/* ret pops 4 bytes */
	emu32_init(&e);
	memcpy(e.lo + 0x80, "\x78\x56\x34\x12\xff\xff\xff\xff", 8);
	assert_int_equal(emu32_run(&e, "\xc3", 1, LO32), 0);
	assert_int_equal(e.regs.rip, 0x12345678);
	assert_int_equal(e.regs.rsp, LO32 + 0x84);

	/* ret $8: 4 + 8 */
	emu32_init(&e);
	memcpy(e.lo + 0x80, "\x78\x56\x34\x12", 4);
	assert_int_equal(emu32_run(&e, "\xc2\x08\x00", 3, LO32), 0);
	assert_int_equal(e.regs.rip, 0x12345678);
	assert_int_equal(e.regs.rsp, LO32 + 0x8c);

	/* pop %ebx: 4 bytes, zero-extended in the 64-bit register set */
	emu32_init(&e);
	memcpy(e.lo + 0x80, "\xef\xbe\xad\xde\xff\xff\xff\xff", 8);
	assert_int_equal(emu32_run(&e, "\x5b", 1, LO32), 0);
	assert_int_equal(e.regs.rbx, 0xdeadbeefULL);
	assert_int_equal(e.regs.rsp, LO32 + 0x84);

	/* pop %esp */
	emu32_init(&e);
	memcpy(e.lo + 0x80, "\x10\x20\x30\x40", 4);
	assert_int_equal(emu32_run(&e, "\x5c", 1, LO32), 0);
	assert_int_equal(e.regs.rsp, 0x40302010ULL);

	/* jmp rel32 across 2^32 wraps: rip stays a 32-bit address */
	emu32_init(&e);
	assert_int_equal(emu32_run(&e, "\xe9\x00\x01\x00\x00", 5, 0xfffffff0ULL), 0);
	assert_int_equal(e.regs.rip, 0xf5);
	emu32_init(&e);
	assert_int_equal(emu32_run(&e, "\xeb\xf0", 2, 0x8ULL), 0); /* jmp -0x10 from 0xa */
	assert_int_equal(e.regs.rip, 0xfffffffaULL);

	/* call rel32 near 2^32: the return address and the target both wrap */
	emu32_init(&e);
	assert_int_equal(emu32_run(&e, "\xe8\x10\x00\x00\x00", 5, 0xfffffffbULL), 0);
	assert_int_equal(e.regs.rip, 0x10);
	assert_int_equal(lo32_at(&e, LO32 + 0x7c), 0);

	/* jcc taken and not */
	emu32_init(&e);
	e.regs.eflags |= 0x40; /* ZF */
	assert_int_equal(emu32_run(&e, "\x74\x10", 2, LO32), 0); /* je */
	assert_int_equal(e.regs.rip, LO32 + 0x12);
	emu32_init(&e);
	assert_int_equal(emu32_run(&e, "\x0f\x84\x00\x10\x00\x00", 6, LO32), 0);
	assert_int_equal(e.regs.rip, LO32 + 6);

	/* loop counts in ecx: 0 - 1 is 0xffffffff, not 2^64 - 1 */
	emu32_init(&e);
	e.regs.rcx = 0;
	assert_int_equal(emu32_run(&e, "\xe2\x10", 2, LO32), 0);
	assert_int_equal(e.regs.rcx, 0xffffffffULL);
	assert_int_equal(e.regs.rip, LO32 + 0x12);
	emu32_init(&e);
	e.regs.rcx = 1;
	assert_int_equal(emu32_run(&e, "\xe2\x10", 2, LO32), 0);
	assert_int_equal(e.regs.rcx, 0);
	assert_int_equal(e.regs.rip, LO32 + 2);
	/* jecxz */
	emu32_init(&e);
	e.regs.rcx = 0;
	assert_int_equal(emu32_run(&e, "\xe3\x10", 2, LO32), 0);
	assert_int_equal(e.regs.rip, LO32 + 0x12);
	/* addr16 jcxz tests cx only */
	emu32_init(&e);
	e.regs.rcx = 0x10000;
	assert_int_equal(emu32_run(&e, "\x67\xe3\x10", 3, LO32), 0);
	assert_int_equal(e.regs.rip, LO32 + 0x13);

	/* jmp *%eax, call *(%ebx): 4-byte pointers */
	emu32_init(&e);
	e.regs.rax = 0x0badf00d;
	assert_int_equal(emu32_run(&e, "\xff\xe0", 2, LO32), 0);
	assert_int_equal(e.regs.rip, 0x0badf00d);
	emu32_init(&e);
	e.regs.rbx = LO32 + 0x40;
	memcpy(e.lo + 0x40, "\x44\x33\x22\x11\x99\x99\x99\x99", 8);
	assert_int_equal(emu32_run(&e, "\xff\x13", 2, LO32 + 0x8), 0);
	assert_int_equal(e.regs.rip, 0x11223344);
	assert_int_equal(e.regs.rsp, LO32 + 0x7c);
	assert_int_equal(lo32_at(&e, LO32 + 0x7c), LO32 + 0xa);
	/* jmp *abs32 */
	emu32_init(&e);
	memcpy(e.lo + 0x48, "\x01\x00\x00\x08", 4);
	assert_int_equal(emu32_run(&e, "\xff\x25\x48\xa0\x04\x08", 6, LO32), 0);
	assert_int_equal(e.regs.rip, 0x08000001);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_native_reference),
		cmocka_unit_test(test_jmp_call_rel),
		cmocka_unit_test(test_jcc),
		cmocka_unit_test(test_loop),
		cmocka_unit_test(test_ret),
		cmocka_unit_test(test_jmp_indirect),
		cmocka_unit_test(test_call_indirect),
		cmocka_unit_test(test_push),
		cmocka_unit_test(test_push_imm),
		cmocka_unit_test(test_pop),
		cmocka_unit_test(test_nops),
		cmocka_unit_test(test_mem_failure),
		cmocka_unit_test(test_not_emulated),
		cmocka_unit_test(test_emulate32),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
