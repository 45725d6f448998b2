/* SPDX-License-Identifier: MIT */
/*
 * Handlers that act (core_calls N prints "i answer(i) other(i)", answer(x) = x + 1,
 * other(x) = 2x + 3): one sets rdi at answer's entry, one doubles rax at its ret, one
 * returns from other() at once (rip = return address, rax = -1) -- the printed lines
 * change exactly as predicted; one unregisters its own probe from inside (-EINPROGRESS,
 * then registration_callback(reg 0, result 0), no hit after it); one registers another
 * probe (callback reg 1, result 0, then that probe is hit); several probes at one
 * address run in registration order; uprobe_plan agrees with `uprobe decode`; a ret
 * emulated at first goes to a slot at its 32nd hit (no XOL area in the process before).
 * These run the blocking uprobe_ctx_run().
 */
#include "test_core.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 20

static volatile int g_stop;

static void on_alarm(int sig)
{
	(void)sig;
	g_stop = 1;
}

struct run {
	const char *prog;
	char nbuf[16];
	char *argv[3];
	struct core_output plain, probed;
	struct core_session s;
};

static void run_start_n(struct run *r, int n)
{
	r->prog = CORE_TARGET("core_calls");
	snprintf(r->nbuf, sizeof(r->nbuf), "%d", n);
	r->argv[0] = (char *)r->prog;
	r->argv[1] = r->nbuf;
	r->argv[2] = NULL;
	core_output_init(&r->plain);
	core_output_init(&r->probed);
	core_run_plain(r->argv, &r->plain);
	core_session_new(&r->s, NULL);
	core_session_spawn(&r->s, r->argv, &r->probed);
}

static void run_start(struct run *r)
{
	run_start_n(r, N);
}

static void run_finish(struct run *r)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	int rc;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	g_stop = 0;
	assert_int_equal(uprobe_resume(r->s.ctx, r->s.pid), 0);
	alarm(30);
	rc = uprobe_ctx_run(r->s.ctx, &g_stop);
	alarm(0);
	if (rc == -EINTR) {
		kill(r->s.pid, SIGKILL);
		fail_msg("core_calls still runs after 30 s");
	}
	assert_int_equal(rc, 0);
	assert_true(r->s.exited);
	r->probed.status = r->s.exit_status;
}

static void run_free(struct run *r)
{
	core_session_free(&r->s);
	core_output_cleanup(&r->plain);
	core_output_cleanup(&r->probed);
}

/* The probed run printed what f(i, &a, &o) predicts for each line, and exited as plain. */
static void assert_output(struct run *r, void (*f)(int i, long *a, long *o))
{
	char *want = malloc(64 * (N + 1)), *got;
	size_t off = 0;

	assert_non_null(want);
	for (int i = 0; i < N; i++) {
		long a = i + 1, o = 2L * i + 3;

		if (f)
			f(i, &a, &o);
		off += (size_t)sprintf(want + off, "%d %ld %ld\n", i, a, o);
	}
	sprintf(want + off, "done\n");
	got = core_slurp(r->probed.out_path, NULL);
	if (strcmp(want, got)) {
		print_message("---- expected:\n%s---- got:\n%s", want, got);
		fail_msg("core_calls did not print what the handler should have made it print");
	}
	assert_int_equal(r->probed.status, r->plain.status);
	free(want);
	free(got);
}

/* ---- registers --------------------------------------------------------------------- */

static void act_set_rdi(struct core_probe *p, uprobe_regs_t *regs)
{
	(void)p;
	regs->rdi = 100;
}

static void want_rdi(int i, long *a, long *o)
{
	(void)i;
	(void)o;
	*a = 101;
}

static void set_rdi(void **state)
{
	struct run r;
	struct core_probe p;

	(void)state;
	run_start(&r);
	core_probe_init(&p, &r.s, core_decode_entry(r.prog, "answer"));
	p.action = act_set_rdi;
	assert_int_equal(register_uprobe(r.s.ctx, &p.u), 0);
	run_finish(&r);
	assert_int_equal(p.hits, N);
	assert_output(&r, want_rdi);
	run_free(&r);
}

static void act_double_rax(struct core_probe *p, uprobe_regs_t *regs)
{
	(void)p;
	regs->rax *= 2;
}

static void want_rax(int i, long *a, long *o)
{
	(void)o;
	*a = 2L * (i + 1);
}

static void set_rax(void **state)
{
	struct run r;
	struct core_probe p;

	(void)state;
	run_start(&r);
	core_probe_init(&p, &r.s, core_decode_find(r.prog, "answer", "ret"));
	p.action = act_double_rax;
	assert_int_equal(register_uprobe(r.s.ctx, &p.u), 0);
	run_finish(&r);
	assert_int_equal(p.hits, N);
	assert_output(&r, want_rax);
	run_free(&r);
}

static void act_return_now(struct core_probe *p, uprobe_regs_t *regs)
{
	uint64_t ra = 0;
	int rc = uprobe_read(p->s->ctx, p->s->pid, regs->rsp, &ra, sizeof(ra));

	if (rc) {
		p->bad_rip++; /* reported by the test */
		return;
	}
	regs->rip = ra;
	regs->rsp += 8;
	regs->rax = (uint64_t)-1;
}

static void want_skip(int i, long *a, long *o)
{
	(void)i;
	(void)a;
	*o = -1;
}

static void skip_function(void **state)
{
	struct run r;
	struct core_probe p, after;

	(void)state;
	run_start(&r);
	core_probe_init(&p, &r.s, core_decode_entry(r.prog, "other"));
	p.action = act_return_now;
	/* other's ret: never reached once its entry returns at once */
	core_probe_init(&after, &r.s, core_decode_find(r.prog, "other", "ret"));
	assert_int_equal(register_uprobe(r.s.ctx, &p.u), 0);
	assert_int_equal(register_uprobe(r.s.ctx, &after.u), 0);
	run_finish(&r);
	assert_int_equal(p.bad_rip, 0);
	assert_int_equal(p.hits, N);
	assert_int_equal(after.hits, 0);
	assert_output(&r, want_skip);
	run_free(&r);
}

/* ---- (un)registration from handlers ------------------------------------------------ */

static int g_rc_inside;

static void act_unregister_self(struct core_probe *p, uprobe_regs_t *regs)
{
	(void)regs;
	if (p->hits == 5)
		g_rc_inside = unregister_uprobe(p->s->ctx, &p->u);
}

static void unregister_self(void **state)
{
	struct run r;
	struct core_probe p;

	(void)state;
	g_rc_inside = 1;
	run_start(&r);
	core_probe_init(&p, &r.s, core_decode_entry(r.prog, "answer"));
	p.action = act_unregister_self;
	assert_int_equal(register_uprobe(r.s.ctx, &p.u), 0);
	run_finish(&r);
	print_message("hits %" PRIu64 ", at the callback %" PRIu64 "\n", p.hits, p.hits_at_cb);
	assert_int_equal(g_rc_inside, -EINPROGRESS);
	assert_int_equal(p.cb_calls, 1);
	assert_int_equal(p.cb_reg, 0);
	assert_int_equal(p.cb_result, 0);
	assert_true(p.hits >= 5);
	assert_int_equal(p.hits, p.hits_at_cb); /* no hit once it is unregistered */
	assert_true(p.hits < N);
	/* unregistering it again from outside: a no-op */
	assert_int_equal(unregister_uprobe(r.s.ctx, &p.u), 0);
	assert_output(&r, NULL);
	run_free(&r);
}

static void act_register_other(struct core_probe *p, uprobe_regs_t *regs)
{
	(void)regs;
	if (p->hits == 3)
		g_rc_inside = register_uprobe(p->s->ctx, &((struct core_probe *)p->arg)->u);
}

static void register_other(void **state)
{
	struct run r;
	struct core_probe a, b;

	(void)state;
	g_rc_inside = 1;
	run_start(&r);
	core_probe_init(&a, &r.s, core_decode_entry(r.prog, "answer"));
	core_probe_init(&b, &r.s, core_decode_entry(r.prog, "other"));
	a.action = act_register_other;
	a.arg = &b;
	assert_int_equal(register_uprobe(r.s.ctx, &a.u), 0);
	run_finish(&r);
	print_message("answer hits %" PRIu64 ", other hits %" PRIu64 "\n", a.hits, b.hits);
	assert_int_equal(g_rc_inside, -EINPROGRESS);
	assert_int_equal(a.hits, N);
	assert_int_equal(b.cb_calls, 1);
	assert_int_equal(b.cb_reg, 1);
	assert_int_equal(b.cb_result, 0);
	assert_int_equal(b.hits_at_cb, 0);
	assert_true(b.hits > 0);
	assert_true(b.hits <= N - 2); /* other(0..1) ran before */
	assert_int_equal(b.bad_rip, 0);
	assert_output(&r, NULL);
	run_free(&r);
}

/* ---- order ------------------------------------------------------------------------- */

static int g_log[4 * N + 8];
static size_t g_nlog;

static void act_log(struct core_probe *p, uprobe_regs_t *regs)
{
	(void)regs;
	if (g_nlog < sizeof(g_log) / sizeof(g_log[0]))
		g_log[g_nlog++] = (int)(intptr_t)p->arg;
}

static void order(void **state)
{
	struct run r;
	struct core_probe p[3];
	uint64_t va;

	(void)state;
	g_nlog = 0;
	run_start(&r);
	va = core_decode_entry(r.prog, "answer");
	for (int i = 0; i < 3; i++) {
		core_probe_init(&p[i], &r.s, va);
		p[i].action = act_log;
		p[i].arg = (void *)(intptr_t)(i + 1);
	}
	/* register 2, then 1 and 3 together: the order of registration is 2, 1, 3 */
	assert_int_equal(register_uprobe(r.s.ctx, &p[1].u), 0);
	struct uprobe *two[] = {&p[0].u, &p[2].u};
	assert_int_equal(register_uprobes(r.s.ctx, two, 2), 0);
	run_finish(&r);
	assert_int_equal(g_nlog, 3 * N);
	for (size_t i = 0; i < g_nlog; i += 3) {
		if (g_log[i] != 2 || g_log[i + 1] != 1 || g_log[i + 2] != 3)
			fail_msg("hit %zu: handlers ran as %d %d %d, not 2 1 3", i / 3, g_log[i],
				 g_log[i + 1], g_log[i + 2]);
	}
	assert_output(&r, NULL);
	run_free(&r);
}

/* ---- plan -------------------------------------------------------------------------- */

static void plan(void **state)
{
	static const char *const names[] = {"emulate", "xol", "step", "inline"};
	struct run r;
	struct core_insn *ins = NULL;
	size_t n = 0;
	struct core_probe *p;

	(void)state;
	run_start(&r);
	core_decode(r.prog, "answer", &ins, &n);
	core_decode(r.prog, "other", &ins, &n);
	core_decode(r.prog, "main", &ins, &n);
	p = calloc(n, sizeof(*p));
	assert_non_null(p);
	for (size_t i = 0; i < n; i++) {
		enum uprobe_plan pl;

		if (!strcmp(ins[i].plan, "reject"))
			continue;
		core_probe_init(&p[i], &r.s, ins[i].vaddr);
		assert_int_equal(register_uprobe(r.s.ctx, &p[i].u), 0);
		assert_int_equal(uprobe_plan(r.s.ctx, &p[i].u, &pl), 0);
		assert_true((unsigned)pl < 4);
		/* the core runs push/pop/ret/jmp-through-memory in a slot: cheaper, as exact */
		if (pl == UPROBE_PLAN_XOL && !strcmp(ins[i].plan, "emulate") &&
		    (!strcmp(ins[i].reason, "push") || !strcmp(ins[i].reason, "pop") ||
		     !strcmp(ins[i].reason, "ret") || !strcmp(ins[i].reason, "jmp-indirect")))
			continue;
		if (strcmp(names[pl], ins[i].plan))
			fail_msg("%s %#" PRIx64 ": uprobe_plan says %s, decode says %s",
				 ins[i].symbol, ins[i].vaddr, names[pl], ins[i].plan);
	}
	run_finish(&r);
	assert_output(&r, NULL);
	/* after the exit: a registered probe's unregistration is a no-op */
	for (size_t i = 0; i < n; i++)
		if (p[i].s)
			assert_int_equal(unregister_uprobe(r.s.ctx, &p[i].u), 0);
	run_free(&r);
	free(p);
	free(ins);
}

/* ---- a slot when it pays ------------------------------------------------------------ */

/*
 * A ret (emulated exactly, but a read of the stack a hit) goes to a slot at its 32nd hit
 * in a process that has no XOL area yet (uprobes.c SLOT_AFTER): its first hits are
 * emulated, the rest run in the slot, every one of them counted, the output unchanged.
 */
static void slot_after(void **state)
{
	struct run r;
	struct core_probe p;
	struct uprobe_stats st;
	enum uprobe_plan pl;

	(void)state;
	run_start_n(&r, 200);
	core_probe_init(&p, &r.s, core_decode_find(r.prog, "answer", "ret"));
	assert_int_equal(register_uprobe(r.s.ctx, &p.u), 0);
	assert_int_equal(uprobe_plan(r.s.ctx, &p.u, &pl), 0);
	assert_int_equal(pl, UPROBE_PLAN_EMULATE);
	run_finish(&r);
	assert_int_equal(p.hits, 200);
	assert_int_equal(p.bad_rip, 0);
	uprobe_ctx_stats(r.s.ctx, &st);
	/* the rendezvous' own ret at _dl_debug_state, if the session has one, adds its
	   emulated hits */
	if (st.emulated < 31 || st.xol != 200 - 31)
		fail_msg("answer's ret: %" PRIu64 " hits emulated, %" PRIu64 " in a slot; "
			 "expected 31 (and the rendezvous') and 169",
			 (uint64_t)st.emulated, (uint64_t)st.xol);
	{
		char *want = core_slurp(r.plain.out_path, NULL), *got = core_slurp(r.probed.out_path, NULL);

		assert_string_equal(got, want);
		free(want);
		free(got);
	}
	assert_int_equal(r.probed.status, r.plain.status);
	run_free(&r);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(set_rdi),	   cmocka_unit_test(set_rax),
		cmocka_unit_test(skip_function),   cmocka_unit_test(unregister_self),
		cmocka_unit_test(register_other), cmocka_unit_test(order),
		cmocka_unit_test(plan),		   cmocka_unit_test(slot_after),
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
