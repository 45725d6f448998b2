/* SPDX-License-Identifier: MIT */
/*
 * fork, vfork, exec, clone and thread exits while probes live (core_fork MODE K).  The
 * probe at probed_fork_work's entry counts hits per thread: those of the spawned
 * process's leader must be exact; by default a forked child is cleaned and let go (no
 * hits from it, and it runs as without probes); with follow_fork its hits count too.
 * A vfork child or a clone(CLONE_VM) child shares the parent's memory: removing "its"
 * breakpoints must not remove the parent's.  Output and exit status as without probes.
 */
#include "test_core.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K 200

struct fork_case {
	const char *mode;
	bool follow;
	/* expected hits: leader, others (-1: either 0 or K, not asserted exactly) */
	long leader, other;
	int forks; /* on_fork calls expected with follow_fork */
	int execs;
};

static void run_fork_case(const struct fork_case *c)
{
	const char *prog = CORE_TARGET("core_fork");
	char kbuf[16];
	char *argv[] = {(char *)prog, (char *)c->mode, kbuf, NULL};
	struct uprobe_ctx_opts opts = {.follow_fork = c->follow};
	struct core_output plain, probed;
	struct core_session s;
	struct core_probe p;
	struct uprobe_stats st;

	snprintf(kbuf, sizeof(kbuf), "%d", K);
	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);

	core_session_new(&s, &opts);
	core_session_spawn(&s, argv, &probed);
	core_probe_init(&p, &s, core_decode_entry(prog, "probed_fork_work"));
	assert_int_equal(register_uprobe(s.ctx, &p.u), 0);
	core_session_wait(&s, &probed, 30, NULL, NULL);
	uprobe_ctx_stats(s.ctx, &st);

	print_message("%s%s: hits %" PRIu64 ": leader %" PRIu64 ", others %" PRIu64
		      "; on_fork %d, on_exec %d, on_exit %d; stats hits %" PRIu64 "\n",
		      c->mode, c->follow ? " (follow_fork)" : "", p.hits, p.hits_leader,
		      p.hits_other, s.on_fork_calls, s.on_exec_calls, s.on_exit_calls, st.hits);
	core_assert_same_run(&plain, &probed);
	assert_int_equal(p.bad_rip, 0);
	assert_int_equal(p.bad_tid, 0);
	assert_int_equal(p.hits_leader, (uint64_t)c->leader);
	if (c->other >= 0)
		assert_int_equal(p.hits_other, (uint64_t)c->other);
	else
		assert_true(p.hits_other == 0 || p.hits_other == K);
	if (c->follow)
		assert_int_equal(s.on_fork_calls, c->forks);
	else
		assert_int_equal(s.on_fork_calls, 0);
	assert_int_equal(s.on_exec_calls, c->execs);
	assert_true(s.on_exit_calls >= 1);

	core_session_free(&s);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

#define FORK_TEST(name, ...)                                                                  \
	static void t_##name(void **state)                                                    \
	{                                                                                     \
		const struct fork_case c = {__VA_ARGS__};                                     \
		(void)state;                                                                  \
		run_fork_case(&c);                                                            \
	}

FORK_TEST(fork, .mode = "fork", .leader = 2 * K, .other = 0)
FORK_TEST(fork_follow, .mode = "fork", .follow = true, .leader = 2 * K, .other = K, .forks = 1)
/* the vfork child runs in the parent's memory, over the parent's breakpoints */
FORK_TEST(vfork, .mode = "vfork", .leader = K, .other = -1)
FORK_TEST(vfork_follow, .mode = "vfork", .follow = true, .leader = K, .other = K, .forks = 1)
FORK_TEST(vfork_exec, .mode = "vfork-exec", .leader = K, .other = 0)
/* the probes go with the old image: none is left in the new one */
FORK_TEST(exec, .mode = "exec", .leader = K, .other = 0, .execs = 1)
/* a raw clone thread is a thread: always traced */
FORK_TEST(clone, .mode = "clone", .leader = K, .other = K)
FORK_TEST(clone_vm, .mode = "clone-vm", .leader = K, .other = -1)
FORK_TEST(clone_vm_follow, .mode = "clone-vm", .follow = true, .leader = K, .other = K,
	  .forks = 1)
FORK_TEST(thread_exit, .mode = "thread-exit", .leader = K, .other = 3 * K + K / 2)
/* the leader makes one call, then leaves: the other two threads make K each */
FORK_TEST(leader_exit, .mode = "leader-exit", .leader = 1, .other = 2 * K)

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		{"fork", t_fork, NULL, NULL, NULL},
		{"fork_follow", t_fork_follow, NULL, NULL, NULL},
		{"vfork", t_vfork, NULL, NULL, NULL},
		{"vfork_follow", t_vfork_follow, NULL, NULL, NULL},
		{"vfork_exec", t_vfork_exec, NULL, NULL, NULL},
		{"exec", t_exec, NULL, NULL, NULL},
		{"clone", t_clone, NULL, NULL, NULL},
		{"clone_vm", t_clone_vm, NULL, NULL, NULL},
		{"clone_vm_follow", t_clone_vm_follow, NULL, NULL, NULL},
		{"thread_exit", t_thread_exit, NULL, NULL, NULL},
		{"leader_exit", t_leader_exit, NULL, NULL, NULL},
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
