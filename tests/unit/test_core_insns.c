/* SPDX-License-Identifier: MIT */
/*
 * Every instruction of several core_insns functions probed at once (rip-relative
 * operands, calls direct and indirect, jmp, jcc, loop/jrcxz, a jump table, push/pop,
 * rep string ops, lock-prefixed atomics, SSE): the program's output and exit status
 * must be those of a run without probes, and each instruction's hit count must equal
 * the number of times the sstep_count oracle saw the instruction pointer arrive there.
 * Also for the 32-bit build, with no_xol (inline steps only), and for core_signals'
 * faulting instructions (a fault is a hit; what follows it is not reached).
 */
#include "exec_check.h"
#include "test_core.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const insn_funcs[] = {
	"f_riprel", "f_calls", "f_branches", "f_loopinsn", "f_switch", "f_pushpop",
	"f_string", "f_atomic", "f_sse",     "leaf_add",   "leaf_mul", "main",
};

static const char *const segv_funcs[] = {
	"probed_segv_load", "probed_segv_store", "probed_fpe", "on_fault",
};

static void probe_all(const char *prog, char *const argv[], const char *const *funcs,
		      size_t nfuncs, const struct uprobe_ctx_opts *opts)
{
	struct core_output plain, probed, oracle;
	struct core_insn *all = NULL, *ins;
	size_t nall = 0, n = 0, mismatches = 0;
	struct core_session s;
	struct core_probe *p;
	struct uprobe **up;
	uint64_t *addrs, *want, total = 0;
	struct uprobe_stats st;

	for (size_t f = 0; f < nfuncs; f++)
		core_decode(prog, funcs[f], &all, &nall);
	ins = calloc(nall, sizeof(*ins));
	assert_non_null(ins);
	for (size_t i = 0; i < nall; i++)
		if (strcmp(all[i].plan, "reject"))
			ins[n++] = all[i];
	p = calloc(n, sizeof(*p));
	up = calloc(n, sizeof(*up));
	addrs = calloc(n, sizeof(*addrs));
	want = calloc(n, sizeof(*want));
	assert_true(p && up && addrs && want);
	for (size_t i = 0; i < n; i++)
		addrs[i] = ins[i].vaddr;

	core_output_init(&plain);
	core_output_init(&probed);
	core_output_init(&oracle);
	core_run_plain(argv, &plain);
	core_run_oracle(argv, addrs, n, want, &oracle);
	/* the oracle itself must not have changed the program */
	core_assert_same_run(&plain, &oracle);

	core_session_new(&s, opts);
	core_session_spawn(&s, argv, &probed);
	for (size_t i = 0; i < n; i++) {
		core_probe_init(&p[i], &s, addrs[i]);
		up[i] = &p[i].u;
	}
	assert_int_equal(register_uprobes(s.ctx, up, n), 0);
	for (size_t i = 0; i < n; i++) {
		enum uprobe_plan plan;

		assert_int_equal(uprobe_plan(s.ctx, &p[i].u, &plan), 0);
		if (opts && opts->no_xol && plan == UPROBE_PLAN_XOL)
			fail_msg("%#" PRIx64 ": no_xol, yet planned for a slot", addrs[i]);
	}
	core_session_wait(&s, &probed, 40, NULL, NULL);
	uprobe_ctx_stats(s.ctx, &st);

	for (size_t i = 0; i < n; i++) {
		total += p[i].hits;
		if (p[i].hits != want[i] || p[i].bad_rip || p[i].bad_tid) {
			print_message("%s %#" PRIx64 " (%s %s): %" PRIu64 " hits, oracle %" PRIu64
				      ", bad rip %" PRIu64 "\n",
				      ins[i].symbol, addrs[i], ins[i].plan, ins[i].reason, p[i].hits,
				      want[i], p[i].bad_rip);
			mismatches++;
		}
	}
	print_message("%s: %zu instructions probed, %" PRIu64 " hits; stats: hits %" PRIu64
		      " emulated %" PRIu64 " xol %" PRIu64 " stepped %" PRIu64 " inlined %" PRIu64
		      "\n",
		      prog, n, total, st.hits, st.emulated, st.xol, st.stepped, st.inlined);
	core_assert_same_run(&plain, &probed);
	assert_int_equal(mismatches, 0);
	assert_int_equal(st.hits, total);
	assert_true(total > 0);
	if (opts && opts->no_xol)
		assert_int_equal(st.xol, 0);
	else
		assert_int_equal(st.inlined, 0); /* a slot area exists: nothing in place */

	core_session_free(&s);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
	core_output_cleanup(&oracle);
	free(all);
	free(ins);
	free(p);
	free(up);
	free(addrs);
	free(want);
}

static void insns_all64(void **state)
{
	char *argv[] = {(char *)CORE_TARGET("core_insns"), (char *)"150", NULL};

	(void)state;
	probe_all(argv[0], argv, insn_funcs, sizeof(insn_funcs) / sizeof(insn_funcs[0]), NULL);
}

static void insns_all32(void **state)
{
	char *argv[] = {(char *)CORE_TARGET("core_insns32"), (char *)"150", NULL};

	(void)state;
	if (!CORE_HAVE_M32 || !test_can_exec(argv[0])) {
		core_skipped = 1;
		skip();
	}
	probe_all(argv[0], argv, insn_funcs, sizeof(insn_funcs) / sizeof(insn_funcs[0]), NULL);
}

static void insns_noxol(void **state)
{
	char *argv[] = {(char *)CORE_TARGET("core_insns"), (char *)"40", NULL};
	struct uprobe_ctx_opts opts = {.no_xol = true};

	(void)state;
	probe_all(argv[0], argv, insn_funcs, sizeof(insn_funcs) / sizeof(insn_funcs[0]), &opts);
}

static void insns_segv_oracle(void **state)
{
	char *argv[] = {(char *)CORE_TARGET("core_signals"), (char *)"segv", (char *)"4", NULL};

	(void)state;
	probe_all(argv[0], argv, segv_funcs, sizeof(segv_funcs) / sizeof(segv_funcs[0]), NULL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(insns_all64),
		cmocka_unit_test(insns_all32),
		cmocka_unit_test(insns_noxol),
		cmocka_unit_test(insns_segv_oracle),
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
