/* SPDX-License-Identifier: MIT */
/*
 * Exact hit counts with threads: core_threads N ITERS calls probed_work() N * ITERS
 * times from N threads.  The probe at its entry must count exactly that many hits,
 * while between dispatch rounds the test keeps registering and unregistering probes on
 * probed_work's and probed_helper's other instructions (text changes while threads
 * run through it).  The program's output and exit status must not change.
 */
#include "test_core.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITERS 3000

struct toggler {
	struct core_probe *probes;
	size_t n, next;
	uint64_t registered, unregistered, gone;
};

static void toggle(struct core_session *s, void *arg)
{
	struct toggler *t = arg;
	struct core_probe *p = &t->probes[t->next % t->n];
	int rc;

	if (!p->armed) {
		rc = register_uprobe(s->ctx, &p->u);
		if (rc == 0) {
			p->armed = 1;
			t->registered++;
		} else if (rc == -ESRCH) {
			t->gone++; /* the process is exiting */
		} else {
			fail_msg("register_uprobe(%#" PRIx64 "): %s", p->u.vaddr, strerror(-rc));
		}
		if (t->registered % 3 == 0)
			t->next++; /* leave some armed for a while */
		return;
	}
	rc = unregister_uprobe(s->ctx, &p->u);
	assert_int_equal(rc, 0);
	p->armed = 0;
	t->unregistered++;
	t->next++;
}

static void run_threads(int nthreads)
{
	const char *prog = CORE_TARGET("core_threads");
	char nbuf[16], ibuf[16];
	char *argv[] = {(char *)prog, nbuf, ibuf, NULL};
	struct core_output plain, probed;
	struct core_session s;
	struct core_probe entry;
	struct core_insn *ins = NULL;
	size_t nins = 0;
	struct toggler t = {0};
	struct uprobe_stats st;
	uint64_t other_hits = 0;

	snprintf(nbuf, sizeof(nbuf), "%d", nthreads);
	snprintf(ibuf, sizeof(ibuf), "%d", ITERS);
	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);

	core_decode(prog, "probed_work", &ins, &nins);
	core_decode(prog, "probed_helper", &ins, &nins);

	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &probed);
	core_probe_init(&entry, &s, ins[0].vaddr);
	assert_int_equal(register_uprobe(s.ctx, &entry.u), 0);

	t.probes = calloc(nins, sizeof(*t.probes));
	assert_non_null(t.probes);
	for (size_t i = 1; i < nins; i++) {
		if (!strcmp(ins[i].plan, "reject"))
			continue;
		core_probe_init(&t.probes[t.n++], &s, ins[i].vaddr);
	}
	assert_true(t.n > 3);

	core_session_wait(&s, &probed, 30, toggle, &t);

	for (size_t i = 0; i < t.n; i++) {
		other_hits += t.probes[i].hits;
		assert_int_equal(t.probes[i].bad_rip, 0);
		assert_int_equal(t.probes[i].bad_tid, 0);
	}
	uprobe_ctx_stats(s.ctx, &st);
	print_message("threads=%d: entry hits %" PRIu64 " (leader %" PRIu64 "), %" PRIu64
		      " registrations, %" PRIu64 " unregistrations, %" PRIu64
		      " hits on toggled probes, %" PRIu64 " rounds; stats: hits %" PRIu64
		      " emulated %" PRIu64 " xol %" PRIu64 " stepped %" PRIu64 " inlined %" PRIu64
		      "\n",
		      nthreads, entry.hits, entry.hits_leader, t.registered, t.unregistered,
		      other_hits, s.rounds, st.hits, st.emulated, st.xol, st.stepped, st.inlined);
	core_assert_same_run(&plain, &probed);
	assert_int_equal(entry.hits, (uint64_t)nthreads * ITERS);
	/* the leader only creates and joins the workers */
	assert_int_equal(entry.hits_leader, 0);
	assert_int_equal(entry.bad_rip, 0);
	assert_int_equal(entry.bad_tid, 0);
	assert_true(t.registered > 0);
	assert_int_equal(st.hits, entry.hits + other_hits);

	core_session_free(&s);
	free(t.probes);
	free(ins);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

static void threads_1(void **state)
{
	(void)state;
	run_threads(1);
}

static void threads_2(void **state)
{
	(void)state;
	run_threads(2);
}

static void threads_8(void **state)
{
	(void)state;
	run_threads(8);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(threads_1),
		cmocka_unit_test(threads_2),
		cmocka_unit_test(threads_8),
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
