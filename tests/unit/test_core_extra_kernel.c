/* SPDX-License-Identifier: MIT */
/*
 * The kernel's own uprobes as an oracle.  Every instruction of a few core_insns
 * functions gets a kernel uprobe (tracefs uprobe_events, PATH:0xFILEOFFSET); the
 * target runs once under them and uprobe_profile gives each one's hit count.  Then the
 * events are removed and the same target runs under this library with the same
 * instructions probed: every instruction both accepted must have the same count.
 *
 * The kernel probes a private copy of core_insns (its own inode), so that the kernel's
 * int3s land in no other test's process.  The kernel checks an instruction only when
 * it writes the breakpoint into a process mapping the file, so the events are enabled
 * while the copy is stopped at its exec (PTRACE_TRACEME): an instruction it refuses
 * (lock-prefixed ones: ENOTSUPP) fails its enable write and is left out.  The events
 * are always disabled and removed again, also when the test fails (teardown).
 */
#include "test_core.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACEFS "/sys/kernel/tracing"
#define GROUP "uprobe_oracle"
#define N_ARG "50"
#define MAXEV 200
#ifndef ENOTSUPP
#define ENOTSUPP 524 /* the kernel's, not in the uapi headers */
#endif

static const char *const funcs[] = {"f_branches", "f_loopinsn", "f_atomic"};

struct kev {
	struct core_insn ins;
	uint64_t foff;
	int created, enabled;
	int kerr; /* errno of the kernel's refusal, 0 if accepted */
	long long khits;
};

static struct {
	char dir[64];
	char copy[96];
	struct kev ev[MAXEV];
	size_t nev;
	pid_t kchild;
} g;

static int write_str(const char *path, const char *s, int flags)
{
	int fd = open(path, O_WRONLY | flags | O_CLOEXEC);
	int err = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		err = -errno;
	close(fd);
	return err;
}

static int event_write(const char *line)
{
	/* one line per write(); O_APPEND, no seek: the kernel parses each write whole */
	return write_str(TRACEFS "/uprobe_events", line, O_APPEND);
}

static int event_enable(size_t i, int on)
{
	char path[128];

	snprintf(path, sizeof(path), TRACEFS "/events/" GROUP "/p%zu/enable", i);
	return write_str(path, on ? "1" : "0", 0);
}

/* Disables and removes every event of GROUP (ours, or a killed earlier run's). */
static size_t remove_group_events(void)
{
	char line[1024], name[128], path[160];
	size_t removed = 0;
	FILE *f = fopen(TRACEFS "/uprobe_events", "r");
	char (*names)[128] = NULL;
	size_t n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "p:" GROUP "/%127s", name) == 1) {
			names = realloc(names, (n + 1) * sizeof(*names));
			if (!names)
				break;
			snprintf(names[n++], sizeof(*names), "%s", name);
		}
	fclose(f);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), TRACEFS "/events/" GROUP "/%s/enable", names[i]);
		write_str(path, "0", 0);
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(line, sizeof(line), "-:" GROUP "/%s\n", names[i]);
		if (!event_write(line))
			removed++;
	}
	free(names);
	return removed;
}

static void cleanup(void)
{
	if (g.kchild > 0) {
		kill(g.kchild, SIGKILL);
		waitpid(g.kchild, NULL, 0);
		g.kchild = 0;
	}
	for (size_t i = 0; i < g.nev; i++)
		if (g.ev[i].enabled && !event_enable(i, 0))
			g.ev[i].enabled = 0;
	for (size_t i = 0; i < g.nev; i++) {
		char line[64];

		if (!g.ev[i].created)
			continue;
		snprintf(line, sizeof(line), "-:" GROUP "/p%zu\n", i);
		if (!event_write(line))
			g.ev[i].created = 0;
	}
	remove_group_events(); /* whatever is left of the group */
	if (g.copy[0]) {
		unlink(g.copy);
		g.copy[0] = 0;
	}
	if (g.dir[0]) {
		rmdir(g.dir);
		g.dir[0] = 0;
	}
	g.nev = 0;
}

static int teardown(void **state)
{
	(void)state;
	cleanup();
	return 0;
}

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	char buf[65536];
	ssize_t r;

	assert_true(in >= 0 && out >= 0);
	while ((r = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)r), r);
	assert_int_equal(r, 0);
	close(in);
	assert_int_equal(close(out), 0);
}

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

static void redirect_to(const char *path, int fd)
{
	int f = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);

	if (f < 0 || dup2(f, fd) < 0)
		_exit(125);
	close(f);
}

/* Reads uprobe_profile: the hit counts of our events (by path and name). */
static void read_profile(void)
{
	char line[1024], path[512], name[128];
	long long hits;
	size_t found = 0;
	FILE *f = fopen(TRACEFS "/uprobe_profile", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		size_t i;

		if (sscanf(line, " %511s %127s %lld", path, name, &hits) != 3 ||
		    strcmp(path, g.copy) || name[0] != 'p')
			continue;
		i = (size_t)strtoul(name + 1, NULL, 10);
		if (i < g.nev && g.ev[i].created) {
			g.ev[i].khits = hits;
			found++;
		}
	}
	fclose(f);
	for (size_t i = 0; i < g.nev; i++)
		if (g.ev[i].created && g.ev[i].khits < 0)
			fail_msg("uprobe_profile has no line for p%zu (%s:%#" PRIx64 ")", i, g.copy,
				 g.ev[i].foff);
	print_message("uprobe_profile: %zu of our events\n", found);
}

static int have_tracefs(void)
{
	if (access(TRACEFS "/uprobe_events", W_OK) == 0)
		return 1;
	if (mount("nodev", TRACEFS, "tracefs", 0, NULL) && errno != EBUSY) {
		print_message("SKIP: no %s/uprobe_events and mount -t tracefs failed: %s\n", TRACEFS,
			      strerror(errno));
		return 0;
	}
	if (access(TRACEFS "/uprobe_events", W_OK)) {
		print_message("SKIP: %s/uprobe_events: %s (kernel without CONFIG_UPROBE_EVENTS?)\n",
			      TRACEFS, strerror(errno));
		return 0;
	}
	return 1;
}

static void kernel_oracle(void **state)
{
	char *argv[] = {g.copy, (char *)N_ARG, NULL};
	struct core_output plain, kout, probed;
	struct core_insn *ins = NULL;
	size_t nins = 0, ncompared = 0, nrefused = 0, nours_refused = 0, mismatches = 0;
	struct core_session s;
	struct core_probe *p;
	uint64_t total = 0;
	int status;

	(void)state;
	if (!have_tracefs()) {
		core_skipped = 1;
		skip();
	}
	if (remove_group_events())
		print_message("removed stale " GROUP " events of an earlier run\n");

	snprintf(g.dir, sizeof(g.dir), "/tmp/core-kernel-XXXXXX");
	assert_non_null(mkdtemp(g.dir));
	snprintf(g.copy, sizeof(g.copy), "%s/core_insns", g.dir);
	copy_file(CORE_TARGET("core_insns"), g.copy);

	/* the instructions, with their file offsets */
	for (size_t f = 0; f < sizeof(funcs) / sizeof(funcs[0]); f++) {
		uint64_t sva = 0, soff = 0;
		size_t first = nins;

		core_decode(g.copy, funcs[f], &ins, &nins);
		list_symbol(g.copy, funcs[f], &sva, &soff);
		for (size_t i = first; i < nins; i++) {
			if (!strcmp(ins[i].plan, "reject")) {
				nours_refused++;
				continue;
			}
			assert_true(g.nev < MAXEV);
			g.ev[g.nev].ins = ins[i];
			g.ev[g.nev].foff = ins[i].vaddr - sva + soff;
			g.ev[g.nev].khits = -1;
			g.nev++;
		}
	}
	free(ins);

	for (size_t i = 0; i < g.nev; i++) {
		char line[700];
		int rc;

		snprintf(line, sizeof(line), "p:" GROUP "/p%zu %s:0x%" PRIx64 "\n", i, g.copy,
			 g.ev[i].foff);
		rc = event_write(line);
		if (rc)
			fail_msg("writing '%s' to uprobe_events: %s", line, strerror(-rc));
		g.ev[i].created = 1;
	}

	core_output_init(&plain);
	core_output_init(&kout);
	core_output_init(&probed);
	core_run_plain(argv, &plain);

	/* the kernel's run: enable while the copy is mapped (stopped at its exec) */
	fflush(stdout);
	fflush(stderr);
	g.kchild = fork();
	assert_true(g.kchild >= 0);
	if (g.kchild == 0) {
		redirect_to(kout.out_path, 1);
		redirect_to(kout.err_path, 2);
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	assert_int_equal(waitpid(g.kchild, &status, 0), g.kchild);
	assert_true(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP);
	for (size_t i = 0; i < g.nev; i++) {
		int rc = event_enable(i, 1);

		if (rc == 0) {
			g.ev[i].enabled = 1;
			continue;
		}
		g.ev[i].kerr = -rc;
		nrefused++;
		print_message("kernel refused %s %#" PRIx64 " (file %#" PRIx64 ", %s %s): %s\n",
			      g.ev[i].ins.symbol, g.ev[i].ins.vaddr, g.ev[i].foff, g.ev[i].ins.plan,
			      g.ev[i].ins.reason,
			      -rc == ENOTSUPP ? "ENOTSUPP" : strerror(-rc));
		if (-rc != ENOTSUPP && -rc != EINVAL)
			fail_msg("enabling p%zu: unexpected %s", i, strerror(-rc));
	}
	assert_int_equal(ptrace(PTRACE_DETACH, g.kchild, NULL, NULL), 0);
	assert_int_equal(waitpid(g.kchild, &status, 0), g.kchild);
	g.kchild = 0;
	kout.status = status;
	read_profile();
	/* the events go before our run: their int3s must not meet ours */
	for (size_t i = 0; i < g.nev; i++)
		if (g.ev[i].enabled) {
			assert_int_equal(event_enable(i, 0), 0);
			g.ev[i].enabled = 0;
		}
	for (size_t i = 0; i < g.nev; i++) {
		char line[64];

		snprintf(line, sizeof(line), "-:" GROUP "/p%zu\n", i);
		assert_int_equal(event_write(line), 0);
		g.ev[i].created = 0;
	}
	print_message("kernel run: %zu events, %zu refused by the kernel, %zu refused by us\n",
		      g.nev, nrefused, nours_refused);
	core_assert_same_run(&plain, &kout);

	/* our run: the same instructions */
	p = calloc(g.nev, sizeof(*p));
	assert_non_null(p);
	core_session_new(&s, NULL);
	core_session_spawn(&s, argv, &probed);
	for (size_t i = 0; i < g.nev; i++) {
		if (g.ev[i].kerr)
			continue;
		core_probe_init(&p[i], &s, g.ev[i].ins.vaddr);
		assert_int_equal(register_uprobe(s.ctx, &p[i].u), 0);
	}
	core_session_wait(&s, &probed, 10, NULL, NULL);
	core_assert_same_run(&plain, &probed);
	for (size_t i = 0; i < g.nev; i++) {
		if (g.ev[i].kerr)
			continue;
		ncompared++;
		total += p[i].hits;
		if ((long long)p[i].hits != g.ev[i].khits || p[i].bad_rip) {
			print_message("MISMATCH %s %#" PRIx64 " (%s %s): ours %" PRIu64
				      ", kernel %lld, bad rip %" PRIu64 "\n",
				      g.ev[i].ins.symbol, g.ev[i].ins.vaddr, g.ev[i].ins.plan,
				      g.ev[i].ins.reason, p[i].hits, g.ev[i].khits, p[i].bad_rip);
			mismatches++;
		}
	}
	print_message("compared %zu instructions of %zu functions with the kernel's counts "
		      "(%" PRIu64 " hits): %zu mismatches\n",
		      ncompared, sizeof(funcs) / sizeof(funcs[0]), total, mismatches);
	assert_int_equal(mismatches, 0);
	assert_true(ncompared > 0 && total > 0);
	core_session_free(&s);
	free(p);
	core_output_cleanup(&plain);
	core_output_cleanup(&kout);
	core_output_cleanup(&probed);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(kernel_oracle, teardown),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: kernel uprobe events need root\n");
		return 77;
	}
	return core_main(argc, argv, tests, sizeof(tests) / sizeof(tests[0]));
}
