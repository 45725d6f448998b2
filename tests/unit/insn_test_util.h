/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers of the x86 analyzer's unit tests (test_insn_*.c): hex formatting,
 * a test memory of a few windows behind an up_insn_mem_fn, fixed low mappings, and the
 * native reference (emu_native_x86_64.S): run code on the CPU from a full register set
 * and capture the full register set at a landing pad.  Header-only: each test is one
 * executable and uses what it needs.
 */
#ifndef UPROBE_TESTS_INSN_TEST_UTIL_H
#define UPROBE_TESTS_INSN_TEST_UTIL_H

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/user.h>
#include <ucontext.h>
#include <unistd.h>

#include "arch/x86/insn.h"

#define ITU_UNUSED __attribute__((unused))

/* "0f 1f 44 00 00" into buf; returns buf. */
static ITU_UNUSED char *itu_hex(const void *bytes, size_t n, char *buf, size_t size)
{
	const uint8_t *b = bytes;
	size_t i, at = 0;

	if (!size)
		return buf;
	buf[0] = '\0';
	for (i = 0; i < n && at + 4 <= size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%02x", i ? " " : "", b[i]);
	return buf;
}

/* ---- test memory: a few windows of bytes at given addresses ----------------------- */

#define ITU_MEM_WINDOWS 4

struct itu_mem {
	struct {
		uint64_t base;
		size_t size;
		uint8_t *buf;
	} win[ITU_MEM_WINDOWS];
	unsigned nwin;
	unsigned reads, writes; /* successful accesses */
	unsigned calls;		/* every call, failed ones too */
	int fail_read;		/* when nonzero, reads return it (a negative errno) */
	int fail_write;		/* same for writes */
	uint64_t last_addr;	/* of the last access */
	size_t last_len;
	bool last_write;
};

static ITU_UNUSED void itu_mem_add(struct itu_mem *m, uint64_t base, void *buf, size_t size)
{
	if (m->nwin < ITU_MEM_WINDOWS) {
		m->win[m->nwin].base = base;
		m->win[m->nwin].size = size;
		m->win[m->nwin].buf = buf;
		m->nwin++;
	}
}

/* An up_insn_mem_fn over struct itu_mem: an access must fall inside one window. */
static ITU_UNUSED int itu_mem_fn(void *ctx, uint64_t addr, void *buf, size_t len, bool write)
{
	struct itu_mem *m = ctx;
	unsigned i;

	m->calls++;
	m->last_addr = addr;
	m->last_len = len;
	m->last_write = write;
	if (write && m->fail_write)
		return m->fail_write;
	if (!write && m->fail_read)
		return m->fail_read;
	for (i = 0; i < m->nwin; i++) {
		uint64_t off = addr - m->win[i].base;

		if (addr < m->win[i].base || off >= m->win[i].size || len > m->win[i].size - off)
			continue;
		if (write) {
			memcpy(m->win[i].buf + off, buf, len);
			m->writes++;
		} else {
			memcpy(buf, m->win[i].buf + off, len);
			m->reads++;
		}
		return 0;
	}
	return -EFAULT;
}

/* ---- fixed mappings ---------------------------------------------------------------- */

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/*
 * Maps size bytes at exactly addr (or NULL): low fixed addresses let tests use absolute
 * 32-bit memory operands and put slots at a chosen distance from the code.
 */
static ITU_UNUSED void *itu_map_at(uint64_t addr, size_t size, int prot)
{
	void *p = mmap((void *)(uintptr_t)addr, size, prot,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	if ((uint64_t)(uintptr_t)p != addr) { /* a kernel without MAP_FIXED_NOREPLACE */
		munmap(p, size);
		return NULL;
	}
	return p;
}

/* ---- the native reference ------------------------------------------------------------ */

#if defined(__x86_64__)

void emu_native_run(const struct user_regs_struct *in, struct user_regs_struct *out);
void emu_native_landing(void);
extern uint64_t emu_native_pad_rax, emu_native_pad_rip;

#define ITU_PAD_LEN 44

/*
 * A landing pad at p (which is its address): saves rax and its own address through
 * absolute moves and jumps to emu_native_landing; flags and stack untouched.
 */
static ITU_UNUSED void itu_pad_write(uint8_t *p)
{
	uint64_t rax_at = (uint64_t)(uintptr_t)&emu_native_pad_rax;
	uint64_t rip_at = (uint64_t)(uintptr_t)&emu_native_pad_rip;
	uint64_t pad = (uint64_t)(uintptr_t)p;
	uint64_t landing = (uint64_t)(uintptr_t)&emu_native_landing;

	p[0] = 0x48, p[1] = 0xa3; /* movabs %rax, rax_at */
	memcpy(p + 2, &rax_at, 8);
	p[10] = 0x48, p[11] = 0xb8; /* movabs $pad, %rax */
	memcpy(p + 12, &pad, 8);
	p[20] = 0x48, p[21] = 0xa3; /* movabs %rax, rip_at */
	memcpy(p + 22, &rip_at, 8);
	p[30] = 0xff, p[31] = 0x25; /* jmp *0(%rip) */
	memset(p + 32, 0, 4);
	memcpy(p + 36, &landing, 8);
}

/* How a native run ended: 0 at a pad, else the signal that stopped it. */
struct itu_native_fault {
	int sig;
	uint64_t rip;  /* where it faulted */
	uint64_t addr; /* si_addr */
};

static ITU_UNUSED sigjmp_buf itu_native_env;
static ITU_UNUSED struct itu_native_fault itu_native_fault_info;
static ITU_UNUSED uint8_t itu_native_altstack[64 * 1024] __attribute__((aligned(16)));

static ITU_UNUSED void itu_native_handler(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	itu_native_fault_info.sig = sig;
	itu_native_fault_info.rip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	itu_native_fault_info.addr = (uint64_t)(uintptr_t)si->si_addr;
	siglongjmp(itu_native_env, 1);
}

/*
 * Runs in (rip = where to start) natively; *out gets the state at the pad reached.
 * A fault or a trap (landing on an int3 filler instead of a pad) comes back as a
 * nonzero signal number in *fault instead of killing the test.
 */
static ITU_UNUSED int itu_native_run(const struct user_regs_struct *in,
				     struct user_regs_struct *out,
				     struct itu_native_fault *fault)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGFPE };
	struct sigaction sa, old[sizeof(sigs) / sizeof(sigs[0])];
	stack_t ss = { .ss_sp = itu_native_altstack, .ss_size = sizeof(itu_native_altstack) };
	stack_t old_ss;
	volatile int ret = 0;
	unsigned i;

	memset(out, 0, sizeof(*out));
	memset(&itu_native_fault_info, 0, sizeof(itu_native_fault_info));
	sigaltstack(&ss, &old_ss);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = itu_native_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, &old[i]);
	if (sigsetjmp(itu_native_env, 1) == 0) {
		emu_native_run(in, out);
	} else {
		__asm__ volatile("cld" ::: "memory");
		ret = itu_native_fault_info.sig;
	}
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &old[i], NULL);
	sigaltstack(&old_ss, NULL);
	if (fault)
		*fault = itu_native_fault_info;
	/* what the assembly does not capture */
	out->orig_rax = in->orig_rax;
	out->cs = in->cs;
	out->ss = in->ss;
	out->fs_base = in->fs_base;
	out->gs_base = in->gs_base;
	out->ds = in->ds;
	out->es = in->es;
	out->fs = in->fs;
	out->gs = in->gs;
	return ret;
}

#endif /* __x86_64__ */

/* The arithmetic flags and DF: what the tests set and compare. */
#define ITU_FLAGS_MASK 0x0cd5ULL /* CF PF AF ZF SF DF OF */
#define ITU_FLAGS_FIXED 0x0202ULL /* bit 1 and IF, as user space always has them */

/* name and value of each GPR in struct user_regs_struct, for comparisons. */
#define ITU_GPRS(X)                                                                        \
	X(rax) X(rbx) X(rcx) X(rdx) X(rsi) X(rdi) X(rbp) X(rsp) X(r8) X(r9) X(r10) X(r11)    \
	X(r12) X(r13) X(r14) X(r15)

#endif
