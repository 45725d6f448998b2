/* SPDX-License-Identifier: MIT */
/*
 * Return probes (struct uprobe.ret_handler) on tests/targets/core_ret.c: the return
 * value and return address at each return, recursion, frames skipped by longjmp, a
 * tail call (two probed entries, one return), and a detach while returns are hijacked.
 * The program's output and exit status must be those of an unprobed run.
 */
#include "test_core.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct ret_probe {
	struct uprobe u;
	uint64_t entries, returns, bad;
	uint64_t last_rax;
	long expect_add; /* answer: rax must be rdi + expect_add */
	uint64_t arg;	 /* rdi at the last entry */
};

static void on_entry(struct uprobe *u, uprobe_regs_t *regs)
{
	struct ret_probe *p = u->data;

	p->entries++;
	p->arg = regs->rdi;
}

static void on_ret(struct uprobe *u, uprobe_regs_t *regs)
{
	struct ret_probe *p = u->data;

	p->returns++;
	p->last_rax = regs->rax;
	if (p->expect_add && regs->rax != p->arg + (uint64_t)p->expect_add)
		p->bad++;
	/* back in the caller, not in the trampoline or the function */
	if (regs->rip >= u->vaddr && regs->rip < u->vaddr + 64)
		p->bad++;
}

static void ret_probe_init(struct ret_probe *p, struct core_session *s, const char *prog,
			   const char *func)
{
	memset(p, 0, sizeof(*p));
	p->u.pid = s->pid;
	p->u.vaddr = core_decode_entry(prog, func);
	p->u.handler = on_entry;
	p->u.ret_handler = on_ret;
	p->u.data = p;
	assert_int_equal(register_uprobe(s->ctx, &p->u), 0);
}

static void run_mode(const char *mode, const char *n, const char *const *funcs,
		     struct ret_probe *probes, struct uprobe_stats *st)
{
	const char *prog = CORE_TARGET("core_ret");
	char *argv[] = { (char *)prog, (char *)mode, (char *)n, NULL };
	struct core_output plain, probed;
	struct core_session s;

	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);
	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &probed);
	for (int i = 0; funcs[i]; i++)
		ret_probe_init(&probes[i], &s, prog, funcs[i]);
	core_session_wait(&s, &probed, 20, NULL, NULL);
	uprobe_ctx_stats(s.ctx, st);
	core_assert_same_run(&plain, &probed);
	core_session_free(&s);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

static void calls(void **state)
{
	static const char *const funcs[] = { "answer", NULL };
	struct ret_probe p[1];
	struct uprobe_stats st;

	(void)state;
	p[0].expect_add = 1;
	run_mode("calls", "50", funcs, p, &st);
	assert_int_equal(p[0].entries, 50);
	assert_int_equal(p[0].returns, 50);
	assert_int_equal(p[0].bad, 0);
	assert_int_equal(p[0].last_rax, 50);
}

static void recurse(void **state)
{
	static const char *const funcs[] = { "depth", NULL };
	struct ret_probe p[1];
	struct uprobe_stats st;

	(void)state;
	run_mode("recurse", "100", funcs, p, &st);
	assert_int_equal(p[0].entries, 101);
	assert_int_equal(p[0].returns, 101);
	/* the outermost return comes last */
	assert_int_equal(p[0].last_rax, 5050);
}

static void longjmp_frames(void **state)
{
	static const char *const funcs[] = { "jumper", "deep_jump", "answer", NULL };
	struct ret_probe p[3];
	struct uprobe_stats st;

	(void)state;
	run_mode("longjmp", "20", funcs, p, &st);
	assert_int_equal(p[0].entries, 20);
	assert_int_equal(p[0].returns, 20);
	/* deep_jump never returns: 6 frames a round are dropped, none is called */
	assert_int_equal(p[1].entries, 20 * 6);
	assert_int_equal(p[1].returns, 0);
	assert_int_equal(p[2].returns, 1);
	assert_int_equal(p[2].last_rax, 42);
	print_message("returns %" PRIu64 ", dropped %" PRIu64 "\n", st.returns, st.returns_dropped);
	assert_true(st.returns_dropped >= 20 * 6 - 6);
}

static void tail(void **state)
{
	static const char *const funcs[] = { "tail_outer", "tail_inner", NULL };
	struct ret_probe p[2];
	struct uprobe_stats st;

	(void)state;
	run_mode("tail", "30", funcs, p, &st);
	assert_int_equal(p[0].entries, 30);
	assert_int_equal(p[1].entries, 30);
	/* one return, both see it, with the value tail_outer returns */
	assert_int_equal(p[0].returns, 30);
	assert_int_equal(p[1].returns, 30);
	assert_int_equal(p[0].last_rax, 29 * 3 + 3);
}

/* Detach while waiter()'s return is hijacked: it must still return to main. */
static void detach_pending(void **state)
{
	const char *prog = CORE_TARGET("core_ret");
	char *argv[] = { (char *)prog, "wait", NULL };
	struct ret_probe p;
	struct core_session s;
	struct core_output probed;
	int fds[2], saved, status;
	char *out;
	size_t len;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	saved = dup(0);
	dup2(fds[0], 0);
	core_output_init(&probed);
	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &probed);
	dup2(saved, 0);
	close(saved);
	close(fds[0]);
	ret_probe_init(&p, &s, prog, "waiter");
	assert_int_equal(uprobe_resume(s.ctx, s.pid), 0);
	for (int i = 0; i < 2000 && !p.entries; i++) {
		uprobe_ctx_dispatch(s.ctx);
		usleep(1000);
	}
	assert_int_equal(p.entries, 1);
	usleep(20000); /* it is in read() now, its return address is the trampoline */
	assert_int_equal(uprobe_detach(s.ctx, s.pid), 0);
	assert_int_equal(write(fds[1], "x", 1), 1);
	close(fds[1]);
	assert_int_equal(waitpid(s.pid, &status, 0), s.pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	out = core_slurp(probed.out_path, &len);
	assert_string_equal(out, "waiter 7\n");
	free(out);
	s.exited = 1;
	core_session_free(&s);
	core_output_cleanup(&probed);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(calls),	  cmocka_unit_test(recurse),
		cmocka_unit_test(longjmp_frames), cmocka_unit_test(tail),
		cmocka_unit_test(detach_pending),
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
