/* SPDX-License-Identifier: MIT */
/*
 * A probe on the `syscall` instruction that forks: libc's _Fork (core_fork fork) and
 * libc's vfork (core_fork vfork).  The syscall is single-stepped in a slot, so the new
 * child is born with its rip in the parent's slot: the library must bring it home
 * (after the syscall) -- a fork child does not have the slot page at all.
 *
 * libc is not mapped yet when the spawned process stops before its first instruction:
 * a probe on core_fork's main() registers the libc probes from its handler (queued,
 * -EINPROGRESS), with the addresses computed from /proc/PID/maps then.  Also probed:
 * the instruction right after each syscall, which is where the child must resume.
 *
 * Expected: output and exit status as without probes; the fork syscall hit once (the
 * number of fork()/vfork() calls) by the parent; the instruction after it once by the
 * parent and, with follow_fork, once by the child (its rip came home exactly there).
 */
#include "test_core.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define K 50
#define MAXP 16

struct forksys {
	const char *mode;
	const char *symbol; /* libc's function holding the fork syscall */
	bool follow;
	struct core_session s;
	struct core_probe main_p;
	/* libc probes: [2i] a syscall of symbol, [2i+1] the instruction after it */
	struct core_probe lp[MAXP];
	uint64_t lp_foff[MAXP]; /* their file offsets in libc */
	const char *lp_what[MAXP];
	size_t nlp;
	int queued, queue_errors, setup_error;
	char setup_msg[256];
};

/* `uprobe list FILE SYMBOL`: the symbol's vaddr and file offset. */
static void list_symbol(const char *file, const char *symbol, uint64_t *vaddr, uint64_t *foff)
{
	char cmd[512], line[512], name[256];
	unsigned long long va, off, size;
	int found = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "'%s' list '%s' '%s'", CORE_UPROBE_CLI, file, symbol);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "0x%llx 0x%llx %llu %255s", &va, &off, &size, name) == 4 &&
		    !strcmp(name, symbol) && !found) {
			*vaddr = va;
			*foff = off;
			found = 1;
		}
	pclose(f);
	if (!found)
		fail_msg("'%s' did not list %s", cmd, symbol);
}

/* Runtime address of libc file offset foff in pid, or 0 (sets fs->setup_msg). */
static uint64_t libc_runtime(struct forksys *fs, pid_t pid, uint64_t foff)
{
	char path[64], line[512], perms[8], mpath[256];
	unsigned long long start, end, off, ino;
	unsigned maj, min;
	struct stat st;
	uint64_t addr = 0;
	FILE *f;

	if (stat(LIBC, &st)) {
		snprintf(fs->setup_msg, sizeof(fs->setup_msg), "stat %s: %s", LIBC, strerror(errno));
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f) {
		snprintf(fs->setup_msg, sizeof(fs->setup_msg), "%s: %s", path, strerror(errno));
		return 0;
	}
	while (!addr && fgets(line, sizeof(line), f)) {
		mpath[0] = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %255s", &start, &end, perms, &off,
			   &maj, &min, &ino, mpath) < 7)
			continue;
		/* the same file (by inode), the executable mapping holding foff */
		if (ino != st.st_ino || makedev(maj, min) != st.st_dev || perms[2] != 'x')
			continue;
		if (foff >= off && foff < off + (end - start))
			addr = start + (foff - off);
	}
	fclose(f);
	if (!addr)
		snprintf(fs->setup_msg, sizeof(fs->setup_msg),
			 "no executable mapping of %s holds file offset %#" PRIx64 " in %s", LIBC,
			 foff, path);
	return addr;
}

/* main()'s handler: libc is mapped now; queue the libc probes (once). */
static void on_main(struct core_probe *p, uprobe_regs_t *regs)
{
	struct forksys *fs = p->arg;

	(void)regs;
	if (fs->queued)
		return;
	fs->queued = 1;
	for (size_t i = 0; i < fs->nlp; i++) {
		uint64_t va = libc_runtime(fs, fs->s.pid, fs->lp_foff[i]);
		int rc;

		if (!va) {
			fs->setup_error = 1;
			return;
		}
		core_probe_init(&fs->lp[i], &fs->s, va);
		rc = register_uprobe(fs->s.ctx, &fs->lp[i].u);
		if (rc != -EINPROGRESS) {
			snprintf(fs->setup_msg, sizeof(fs->setup_msg),
				 "register_uprobe(%#" PRIx64 ") from a handler = %d, not -EINPROGRESS",
				 va, rc);
			fs->queue_errors++;
		}
	}
}

static void run_forksys(const char *mode, const char *symbol, bool follow)
{
	const char *prog = CORE_TARGET("core_fork");
	char kbuf[16];
	char *argv[] = {(char *)prog, (char *)mode, kbuf, NULL};
	struct uprobe_ctx_opts opts = {.follow_fork = follow};
	struct core_output plain, probed;
	struct core_insn *ins = NULL;
	struct forksys *fs = calloc(1, sizeof(*fs));
	uint64_t sym_va = 0, sym_off = 0;
	struct uprobe_stats st;
	size_t n = 0, nsys = 0;

	assert_non_null(fs);
	fs->mode = mode;
	fs->symbol = symbol;
	fs->follow = follow;
	snprintf(kbuf, sizeof(kbuf), "%d", K);

	/* the syscalls of symbol in libc, and the instruction after each, as file offsets */
	core_decode(LIBC, symbol, &ins, &n);
	list_symbol(LIBC, symbol, &sym_va, &sym_off);
	for (size_t i = 0; i < n && fs->nlp + 2 <= MAXP; i++) {
		if (strcmp(ins[i].reason, "syscall"))
			continue;
		assert_true(i + 1 < n);
		assert_int_equal(ins[i].vaddr + ins[i].len, ins[i + 1].vaddr);
		fs->lp_foff[fs->nlp] = ins[i].vaddr - sym_va + sym_off;
		fs->lp_what[fs->nlp++] = "syscall";
		fs->lp_foff[fs->nlp] = ins[i + 1].vaddr - sym_va + sym_off;
		fs->lp_what[fs->nlp++] = "after syscall";
		nsys++;
	}
	free(ins);
	if (!nsys)
		fail_msg("%s: no syscall instruction in %s", LIBC, symbol);

	core_output_init(&plain);
	core_output_init(&probed);
	core_run_plain(argv, &plain);

	core_session_new(&fs->s, &opts);
	core_session_spawn(&fs->s, argv, &probed);
	core_probe_init(&fs->main_p, &fs->s, core_decode_entry(prog, "main"));
	fs->main_p.action = on_main;
	fs->main_p.arg = fs;
	assert_int_equal(register_uprobe(fs->s.ctx, &fs->main_p.u), 0);
	core_session_wait(&fs->s, &probed, 12, NULL, NULL);
	uprobe_ctx_stats(fs->s.ctx, &st);

	print_message("core_fork %s%s: main hits %" PRIu64 "; on_fork %d; stats hits %" PRIu64
		      " xol %" PRIu64 " stepped %" PRIu64 " inlined %" PRIu64 "\n",
		      mode, follow ? " (follow_fork)" : "", fs->main_p.hits, fs->s.on_fork_calls,
		      st.hits, st.xol, st.stepped, st.inlined);
	for (size_t i = 0; i < fs->nlp; i++) {
		print_message("  %s+%#" PRIx64 " (file %#" PRIx64 ", %#" PRIx64 ") %-13s: hits %" PRIu64
			      " (leader %" PRIu64 ", others %" PRIu64 "), bad rip %" PRIu64
			      ", registration callback %d (result %d)\n",
			      symbol, fs->lp_foff[i] - sym_off, fs->lp_foff[i], fs->lp[i].u.vaddr,
			      fs->lp_what[i], fs->lp[i].hits, fs->lp[i].hits_leader,
			      fs->lp[i].hits_other, fs->lp[i].bad_rip, fs->lp[i].cb_calls,
			      fs->lp[i].cb_result);
	}
	if (fs->setup_error || fs->queue_errors)
		fail_msg("setting up the libc probes: %s", fs->setup_msg);
	core_assert_same_run(&plain, &probed);
	assert_int_equal(fs->main_p.hits, 1);
	assert_int_equal(fs->queued, 1);
	for (size_t i = 0; i < fs->nlp; i++) {
		assert_int_equal(fs->lp[i].cb_calls, 1);
		assert_int_equal(fs->lp[i].cb_reg, 1);
		assert_int_equal(fs->lp[i].cb_result, 0);
		assert_int_equal(fs->lp[i].bad_rip, 0);
		assert_int_equal(fs->lp[i].bad_tid, 0);
	}
	/* [0]: the fork syscall, once per fork()/vfork() call of the parent, never in the child */
	assert_int_equal(fs->lp[0].hits_leader, 1);
	assert_int_equal(fs->lp[0].hits_other, 0);
	/* [1]: right after it -- the parent came back from the slot, and so did the child */
	assert_int_equal(fs->lp[1].hits_leader, 1);
	if (follow)
		assert_int_equal(fs->lp[1].hits_other, 1);
	else if (!strcmp(mode, "fork"))
		assert_int_equal(fs->lp[1].hits_other, 0); /* the child was cleaned */
	else
		assert_true(fs->lp[1].hits_other <= 1); /* vfork: the shared breakpoints */
	if (follow)
		assert_int_equal(fs->s.on_fork_calls, 1);
	else
		assert_int_equal(fs->s.on_fork_calls, 0);

	core_session_free(&fs->s);
	core_output_cleanup(&plain);
	core_output_cleanup(&probed);
	free(fs);
}

static void t_fork(void **state)
{
	(void)state;
	run_forksys("fork", "_Fork", false);
}

static void t_vfork(void **state)
{
	(void)state;
	run_forksys("vfork", "vfork", false);
}

static void t_fork_follow(void **state)
{
	(void)state;
	run_forksys("fork", "_Fork", true);
}

static void t_vfork_follow(void **state)
{
	(void)state;
	run_forksys("vfork", "vfork", true);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		{"fork", t_fork, NULL, NULL, NULL},
		{"vfork", t_vfork, NULL, NULL, NULL},
		{"fork_follow", t_fork_follow, NULL, NULL, NULL},
		{"vfork_follow", t_vfork_follow, NULL, NULL, NULL},
	};

	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
