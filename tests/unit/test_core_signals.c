/* SPDX-License-Identifier: MIT */
/*
 * Signals at probed code (core_signals MODE N): an alarm storm (ITIMER_REAL every
 * 5 ms) with and without SA_RESTART while every instruction of probed_sig_work() is
 * probed -- no hit lost or doubled, every alarm delivered once (the handler's probe
 * counts as many hits as the program counted signals), SA_RESTART still restarts;
 * faults in probed instructions reach the program's own handler as without probes
 * (si_addr, the faulting ip); SIGSTOP/SIGCONT job control; the program's own SIGTRAPs
 * (raise, an int3 of its own) are delivered to it, not taken for the tracer's.
 */
#include "test_core.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct probe_set {
	struct core_probe *p;
	struct core_insn *ins;
	size_t n;
};

/* Probes every probeable instruction of each of funcs (NULL-terminated). */
static void probe_funcs(struct core_session *s, const char *prog, const char *const *funcs,
			struct probe_set *ps)
{
	struct core_insn *all = NULL;
	size_t nall = 0;

	for (size_t f = 0; funcs[f]; f++)
		core_decode(prog, funcs[f], &all, &nall);
	ps->p = calloc(nall, sizeof(*ps->p));
	ps->ins = calloc(nall, sizeof(*ps->ins));
	assert_true(ps->p && ps->ins);
	ps->n = 0;
	for (size_t i = 0; i < nall; i++) {
		if (!strcmp(all[i].plan, "reject"))
			continue;
		ps->ins[ps->n] = all[i];
		core_probe_init(&ps->p[ps->n], s, all[i].vaddr);
		assert_int_equal(register_uprobe(s->ctx, &ps->p[ps->n].u), 0);
		ps->n++;
	}
	free(all);
}

/* hits at symbol's instructions: each must be `want` (the straight-line functions) */
static uint64_t assert_func_hits(const struct probe_set *ps, const char *symbol, uint64_t want,
				 int every)
{
	uint64_t first = UINT64_MAX;

	for (size_t i = 0; i < ps->n; i++) {
		if (strcmp(ps->ins[i].symbol, symbol))
			continue;
		assert_int_equal(ps->p[i].bad_rip, 0);
		if (first == UINT64_MAX)
			first = ps->p[i].hits;
		if (every && ps->p[i].hits != want)
			fail_msg("%s %#" PRIx64 ": %" PRIu64 " hits, expected %" PRIu64, symbol,
				 ps->ins[i].vaddr, ps->p[i].hits, want);
	}
	assert_true(first != UINT64_MAX);
	if (first != want)
		fail_msg("%s entry: %" PRIu64 " hits, expected %" PRIu64, symbol, first, want);
	return first;
}

static void run_signals(const char *mode, int n, const char *const *funcs,
			void (*check)(const struct probe_set *ps, int n,
				      const struct core_output *o))
{
	const char *prog = CORE_TARGET("core_signals");
	char nbuf[16];
	char *argv[] = {(char *)prog, (char *)mode, nbuf, NULL};
	struct core_output plain, probed;
	struct core_session s;
	struct probe_set ps;
	struct uprobe_stats st;

	snprintf(nbuf, sizeof(nbuf), "%d", n);
	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);
	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &probed);
	probe_funcs(&s, prog, funcs, &ps);
	core_session_wait(&s, &probed, 40, NULL, NULL);
	uprobe_ctx_stats(s.ctx, &st);
	print_message("%s %d: %zu probes; stats: hits %" PRIu64 " emulated %" PRIu64 " xol %" PRIu64
		      " stepped %" PRIu64 " inlined %" PRIu64 " delayed_signals %" PRIu64 "\n",
		      mode, n, ps.n, st.hits, st.emulated, st.xol, st.stepped, st.inlined,
		      st.delayed_signals);
	core_assert_same_run(&plain, &probed);
	check(&ps, n, &probed);
	core_session_free(&s);
	free(ps.p);
	free(ps.ins);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

static void check_alarm(const struct probe_set *ps, int n, const struct core_output *o)
{
	char *err = core_slurp(o->err_path, NULL);
	int handled = -1, eintr = -1;
	const char *line = strstr(err, "handled=");

	assert_non_null(line);
	assert_int_equal(sscanf(line, "handled=%d eintr=%d", &handled, &eintr), 2);
	print_message("the probed run handled %d alarms, %d reads failed with EINTR\n", handled,
		      eintr);
	assert_true(handled >= 5);
	assert_func_hits(ps, "probed_sig_work", (uint64_t)n, 1);
	/* every signal delivered once: the handler's probe saw each */
	assert_func_hits(ps, "probed_sig_handler", (uint64_t)handled, 1);
	assert_func_hits(ps, "on_alarm", (uint64_t)handled, 0);
	free(err);
}

static const char *const alarm_funcs[] = {"probed_sig_work", "probed_sig_handler", "on_alarm",
					  NULL};

static void alarm_restart(void **state)
{
	(void)state;
	run_signals("alarm-restart", 3000, alarm_funcs, check_alarm);
}

static void alarm_norestart(void **state)
{
	(void)state;
	run_signals("alarm-norestart", 3000, alarm_funcs, check_alarm);
}

static void check_segv(const struct probe_set *ps, int n, const struct core_output *o)
{
	(void)o;
	/* the faulting instruction is hit; nothing after it in the function is reached */
	assert_func_hits(ps, "probed_segv_load", (uint64_t)n, 0);
	assert_func_hits(ps, "probed_segv_store", (uint64_t)n, 0);
	assert_func_hits(ps, "probed_fpe", (uint64_t)n, 0);
	assert_func_hits(ps, "on_fault", (uint64_t)n * 3, 0);
	for (size_t i = 0; i < ps->n; i++)
		if (!strcmp(ps->ins[i].reason, "ret") && strcmp(ps->ins[i].symbol, "on_fault"))
			assert_int_equal(ps->p[i].hits, 0);
}

static void segv(void **state)
{
	static const char *const funcs[] = {"probed_segv_load", "probed_segv_store", "probed_fpe",
					    "on_fault", NULL};
	(void)state;
	run_signals("segv", 5, funcs, check_segv);
}

static void check_stop(const struct probe_set *ps, int n, const struct core_output *o)
{
	char *out = core_slurp(o->out_path, NULL);

	assert_non_null(strstr(out, "continued\n"));
	assert_func_hits(ps, "probed_sig_work", 2 * (uint64_t)n, 1);
	free(out);
}

static void stop(void **state)
{
	static const char *const funcs[] = {"probed_sig_work", NULL};

	(void)state;
	run_signals("stop", 500, funcs, check_stop);
}

static void check_trap(const struct probe_set *ps, int n, const struct core_output *o)
{
	(void)o;
	/* probed_own_int3's int3 is refused (not probed); its ret follows it */
	assert_func_hits(ps, "probed_own_int3", (uint64_t)n, 1);
	assert_func_hits(ps, "probed_sig_work", (uint64_t)n, 1);
}

/*
 * on_trap itself is not probed: an int3 hit while SIGTRAP is blocked (inside the
 * program's own SIGTRAP handler) makes the kernel reset SIGTRAP to SIG_DFL
 * (force_sig_info_to_task), a limitation of every int3-based tracer (docs/api.md).
 */
static void trap(void **state)
{
	static const char *const funcs[] = {"probed_own_int3", "probed_sig_work", NULL};

	(void)state;
	run_signals("trap", 50, funcs, check_trap);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(alarm_restart),
		cmocka_unit_test(alarm_norestart),
		cmocka_unit_test(segv),
		cmocka_unit_test(stop),
		cmocka_unit_test(trap),
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
