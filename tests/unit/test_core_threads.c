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

/* ---- records: the fast path's agent names each record's thread ---------------------- */

struct rec_seen {
	pid_t leader;
	pid_t tids[8];
	uint64_t per[8];
	unsigned ntids;
	uint64_t records, bad, unnamed;
};

static void on_record(struct uprobe *u, const struct uprobe_record *rec)
{
	struct rec_seen *r = u->data;
	unsigned i;

	r->records++;
	if (rec->regs->rip != u->vaddr || rec->pid != r->leader)
		r->bad++;
	if (rec->tid <= 0) {
		r->unnamed++;
		return;
	}
	for (i = 0; i < r->ntids && r->tids[i] != rec->tid; i++)
		;
	if (i == r->ntids && r->ntids < 8)
		r->tids[r->ntids++] = rec->tid;
	if (i < 8)
		r->per[i]++;
}

static void record_miss(struct uprobe *u, uprobe_regs_t *regs)
{
	(void)regs;
	fail_msg("0x%" PRIx64 ": a trap-path hit of a fast-path probe", u->vaddr);
}

/*
 * A recording probe placed at the exec stop, before the dynamic linker (or a static
 * program's start code) has given the main thread its TLS block: the agent names
 * threads by their stack until the entry point (a static program's main), then by
 * %fs:0.  Every record must come from one of the workers, each with its ITERS calls,
 * none lost, and the library must have switched.
 */
static void run_records(const char *prog)
{
	char ibuf[16];
	char *argv[] = {(char *)prog, (char *)"2", ibuf, NULL};
	struct uprobe_capture cap = { .regs = 1ull << 14 }; /* rdi */
	struct core_output plain, probed;
	struct core_session s;
	struct core_insn *ins = NULL;
	size_t nins = 0;
	struct rec_seen seen = { 0 };
	struct uprobe u = { 0 };
	enum uprobe_plan plan;
	uint64_t lost = 1;

	snprintf(ibuf, sizeof(ibuf), "%d", ITERS);
	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);
	core_decode(prog, "probed_work", &ins, &nins);

	core_session_new(&s, &(struct uprobe_ctx_opts){ .verbose = 1 });
	core_session_spawn(&s, argv, &probed);
	seen.leader = s.pid;
	u.pid = s.pid;
	u.vaddr = ins[0].vaddr;
	u.capture = &cap;
	u.record_handler = on_record;
	u.handler = record_miss;
	u.data = &seen;
	assert_int_equal(register_uprobe(s.ctx, &u), 0);
	assert_int_equal(uprobe_plan(s.ctx, &u, &plan), 0);
	assert_int_equal(plan, UPROBE_PLAN_FAST);
	core_session_wait(&s, &probed, 30, NULL, NULL);
	uprobe_lost(s.ctx, &u, &lost);
	print_message("%s: %" PRIu64 " records (%" PRIu64 " bad, %" PRIu64
		      " unnamed), %" PRIu64 " lost; threads %u: %" PRIu64 " + %" PRIu64 "\n",
		      prog, seen.records, seen.bad, seen.unnamed, lost, seen.ntids, seen.per[0],
		      seen.per[1]);
	core_assert_same_run(&plain, &probed);
	assert_true(core_logged("records name threads by %fs:0"));
	assert_int_equal(lost, 0);
	assert_int_equal(seen.records, 2 * ITERS);
	assert_int_equal(seen.bad, 0);
	assert_int_equal(seen.unnamed, 0);
	assert_int_equal(seen.ntids, 2);
	assert_int_equal(seen.per[0], ITERS);
	assert_int_equal(seen.per[1], ITERS);
	assert_int_not_equal(seen.tids[0], s.pid); /* the leader only creates and joins */
	assert_int_not_equal(seen.tids[1], s.pid);
	unregister_uprobe(s.ctx, &u);
	core_session_free(&s);
	free(ins);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
}

static void records_2(void **state)
{
	(void)state;
	run_records(CORE_TARGET("core_threads"));
}

static void records_static(void **state)
{
	(void)state;
	run_records(CORE_TARGET("core_threads_static"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(threads_1),
		cmocka_unit_test(threads_2),
		cmocka_unit_test(threads_8),
		cmocka_unit_test(records_2),
		cmocka_unit_test(records_static),
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
