// SPDX-License-Identifier: MIT
/*
 * The kernel backend (src/trace/kernel.c) against the kernel itself: probes on a real
 * target program (tests/targets/kbackend_target.c) and on libc, text and JSON lines,
 * uprobe_profile counts, and the refusals.
 *
 *   test_trace_kernel text          trace in the kernel's text format
 *   test_trace_kernel json FILE     JSON lines, also written to FILE for json.tool
 *   test_trace_kernel errors        what up_kb_add refuses
 *
 * Exits 77 (skipped) when tracefs cannot be used here, saying why.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sym/sym.h"
#include "trace/kernel.h"
#include "trace/spec.h"

#ifndef KB_TARGET
#error KB_TARGET must name the target program
#endif
#define KB_LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define KB_GROUP "uptest_kb"
#define KB_N 25 /* kb_work and kb_name calls */
#define KB_K 4	/* getpid calls */

static const char *json_file;
static char logbuf[8192];

static void test_log(void *arg, const char *msg)
{
	size_t l = strlen(logbuf);

	(void)arg;
	snprintf(logbuf + l, sizeof(logbuf) - l, "%s\n", msg);
	if (getenv("KB_TEST_VERBOSE"))
		fprintf(stderr, "log: %s\n", msg);
}

static void add_spec(struct up_kb *kb, const char *text)
{
	struct up_spec s;
	struct up_spec_err err;
	int r;

	r = up_spec_parse(text, &s, &err);
	if (r < 0)
		fail_msg("spec '%s' does not parse: %s", text, err.msg);
	r = up_kb_add(kb, &s);
	if (r < 0)
		fail_msg("up_kb_add('%s') = %d (%s); log:\n%s", text, r, strerror(-r), logbuf);
	up_spec_free(&s);
}

/* add_spec's refusal: returns up_kb_add's result. */
static int try_spec(struct up_kb *kb, const char *text)
{
	struct up_spec s;
	struct up_spec_err err;
	int r;

	r = up_spec_parse(text, &s, &err);
	if (r < 0)
		fail_msg("spec '%s' does not parse: %s", text, err.msg);
	logbuf[0] = '\0';
	r = up_kb_add(kb, &s);
	up_spec_free(&s);
	return r;
}

static uint64_t sym_value(const char *path, const char *name)
{
	struct up_sym_elf *elf;
	struct up_sym sym;

	assert_int_equal(up_sym_elf_open(path, &elf), 0);
	assert_int_equal(up_sym_elf_lookup(elf, name, &sym), 0);
	up_sym_elf_close(elf);
	return sym.value;
}

/* The name of the function holding vaddr (a static buffer). */
static const char *enclosing(const char *path, uint64_t vaddr)
{
	static char name[128];
	struct up_sym_elf *elf;
	struct up_sym sym;

	assert_int_equal(up_sym_elf_open(path, &elf), 0);
	assert_int_equal(up_sym_elf_enclosing_func(elf, vaddr, &sym), 0);
	snprintf(name, sizeof(name), "%s", sym.name);
	up_sym_elf_close(elf);
	return name;
}

/* Forks the target, held on a pipe until *go is written (so the pid filter is set first). */
static pid_t spawn_held(int *go)
{
	int p[2];
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c, n[16], k[16];

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(126);
		snprintf(n, sizeof(n), "%d", KB_N);
		snprintf(k, sizeof(k), "%d", KB_K);
		execl(KB_TARGET, KB_TARGET, n, k, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	*go = p[1];
	return pid;
}

/* Runs the target under kb, returns everything up_kb_run wrote (malloc'd). */
static char *run_traced(int json, const char *const *specs, int nspecs, pid_t *pidp,
			struct up_kb **kbp, int *nlines)
{
	struct up_kb_opts o = { 0 };
	struct up_kb *kb;
	char *text = NULL;
	size_t len = 0;
	FILE *mem;
	int go, st, r;
	pid_t pid;

	mem = open_memstream(&text, &len);
	assert_non_null(mem);
	pid = spawn_held(&go);
	o.json = json;
	o.out = mem;
	o.pid_filter = pid;
	o.log = test_log;
	logbuf[0] = '\0';
	r = up_kb_open(&o, &kb);
	if (r < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("up_kb_open = %d; log: %s", r, logbuf);
	}
	for (int i = 0; i < nspecs; i++)
		add_spec(kb, specs[i]);
	r = up_kb_enable(kb);
	if (r < 0)
		fail_msg("up_kb_enable = %d; log: %s", r, logbuf);
	assert_true(up_kb_poll_fd(kb) >= 0);
	assert_int_equal(write(go, "g", 1), 1);
	close(go);
	r = up_kb_run(kb, NULL, pid);
	assert_true(r >= 0);
	/* up_kb_run leaves our child to us: reap it here */
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	fclose(mem);
	*nlines = r;
	*pidp = pid;
	*kbp = kb;
	return text;
}

static int count_lines(const char *text)
{
	int n = 0;

	for (const char *c = text; *c; c++)
		n += *c == '\n';
	return n;
}

static void test_text(void **state)
{
	char specs[4][512];
	const char *sp[4] = { specs[0], specs[1], specs[2], specs[3] };
	uint64_t work = sym_value(KB_TARGET, "kb_work");
	uint64_t getpid_v = sym_value(KB_LIBC, "getpid");
	int nwork = 0, nret = 0, nname = 0, ngetpid = 0, nlines;
	struct up_kb *kb;
	char *text, *counts = NULL, *save = NULL;
	size_t clen = 0;
	uint64_t hits, lost;
	FILE *cf;
	pid_t pid;

	(void)state;
	snprintf(specs[0], sizeof(specs[0]), "p:" KB_GROUP "/kbwork %s:kb_work n=%%di:s32",
		 KB_TARGET);
	snprintf(specs[1], sizeof(specs[1]), "r:" KB_GROUP "/kbret %s:kb_work rv=$retval:s32",
		 KB_TARGET);
	snprintf(specs[2], sizeof(specs[2]),
		 "p:" KB_GROUP "/kbname %s:kb_name s=+0(%%di):string c=$comm a=$arg1", KB_TARGET);
	snprintf(specs[3], sizeof(specs[3]), "p:" KB_GROUP "/getpid " KB_LIBC ":getpid");
	text = run_traced(0, sp, 4, &pid, &kb, &nlines);
	assert_int_equal(count_lines(text), nlines);

	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char ev[32], *p;
		int tid, cpu, v;
		unsigned long s, us;
		uint64_t a, b;

		/* "%16s-%-7d [%03d] %5lu.%06lu: " as format.h's event format */
		assert_true(strlen(line) > 40);
		assert_int_equal(line[16], '-');
		/* the kernel's saved_cmdlines cache is shared: it may have forgotten the comm,
		   or (under load) still hold the one the child had before its exec, this
		   test's own; the tid, below, is what names the thread */
		if (strncmp(line, " kbackend_target-", 17) &&
		    strncmp(line, "           <...>-", 17) && strncmp(line, " test_trace_kern-", 17))
			fail_msg("an event of another comm: %s", line);
		assert_int_equal(sscanf(line + 17, "%d [%d] %lu.%lu: %31[^:]:", &tid, &cpu, &s, &us,
					ev), 5);
		assert_int_equal(tid, pid);
		assert_int_equal(line[24], ' ');
		assert_int_equal(line[25], '[');
		assert_int_equal(line[29], ']');
		p = strstr(line, ": (0x");
		assert_non_null(p);
		p += 5;
		a = strtoull(p, &p, 16);
		if (!strcmp(ev, "kbwork")) {
			assert_int_equal(a, work); /* non-PIE: runtime address == st_value */
			assert_int_equal(sscanf(p, ") n=%d", &v), 1);
			assert_int_equal(v, nwork);
			nwork++;
		} else if (!strcmp(ev, "kbret")) {
			assert_int_equal(strncmp(p, " <- 0x", 6), 0);
			b = strtoull(p + 6, &p, 16);
			assert_int_equal(b, work);
			assert_string_equal(enclosing(KB_TARGET, a), "main"); /* where it returned to */
			assert_int_equal(sscanf(p, ") rv=%d", &v), 1);
			assert_int_equal(v, 2 * nret + 1);
			nret++;
		} else if (!strcmp(ev, "kbname")) {
			char want[128];

			snprintf(want, sizeof(want), ") s=\"kb-%d \"q\"\" c=\"kbackend_target\" a=0x",
				 nname);
			assert_int_equal(strncmp(p, want, strlen(want)), 0);
			nname++;
		} else if (!strcmp(ev, "getpid")) {
			assert_int_equal(a & 0xfff, getpid_v & 0xfff);
			assert_string_equal(p, ")");
			ngetpid++;
		} else {
			fail_msg("unexpected line: %s", line);
		}
	}
	assert_int_equal(nwork, KB_N);
	assert_int_equal(nret, KB_N);
	assert_int_equal(nname, KB_N);
	assert_int_equal(ngetpid, KB_K);
	assert_int_equal(nlines, 3 * KB_N + KB_K);

	/* counts: uprobe_profile's, one line per event, as the ptrace backend's table
	   (the file, GROUP/EVENT, the hits) */
	cf = open_memstream(&counts, &clen);
	assert_int_equal(up_kb_counts(kb, cf), 4);
	fclose(cf);
	assert_int_equal(count_lines(counts), 4);
	{
		char want[PATH_MAX + 64];
		char *l = strstr(counts, " " KB_GROUP "/kbwork ");

		assert_non_null(l);
		/* its line starts with the file */
		while (l > counts && l[-1] != '\n')
			l--;
		assert_non_null(strstr(l, KB_TARGET " "));
		assert_true(strstr(l, KB_TARGET " ") < strchr(l, '\n'));
		snprintf(want, sizeof(want), " %d\n", KB_N);
		assert_int_equal(strncmp(strchr(l, '\n') - strlen(want) + 1, want, strlen(want)), 0);
		assert_non_null(strstr(counts, KB_LIBC " "));
		assert_non_null(strstr(counts, " " KB_GROUP "/getpid "));
	}
	assert_int_equal(up_kb_hits(kb, KB_GROUP, "kbwork", &hits), 0);
	assert_int_equal(hits, KB_N);
	assert_int_equal(up_kb_hits(kb, KB_GROUP, "kbret", &hits), 0);
	assert_int_equal(hits, KB_N);
	assert_int_equal(up_kb_hits(kb, KB_GROUP, "kbname", &hits), 0);
	assert_int_equal(hits, KB_N);
	assert_int_equal(up_kb_hits(kb, KB_GROUP, "getpid", &hits), 0);
	assert_true(hits >= KB_K); /* every process's getpid: the filter is on output only */
	assert_int_equal(up_kb_hits(kb, KB_GROUP, "nosuch", &hits), -ENOENT);
	assert_int_equal(up_kb_lost(kb, &lost), 0);
	assert_int_equal(lost, 0);
	up_kb_close(kb);
	free(counts);
	free(text);
}

/* A fragment of a JSON line (keys come in format.h's fixed order). */
static bool json_has(const char *line, const char *frag)
{
	return strstr(line, frag) != NULL;
}

static void test_json(void **state)
{
	char specs[3][512], frag[256];
	const char *sp[3] = { specs[0], specs[1], specs[2] };
	uint64_t work = sym_value(KB_TARGET, "kb_work");
	int nwork = 0, nret = 0, nname = 0, nlines;
	struct up_kb *kb;
	char *text, *save = NULL;
	FILE *jf = NULL;
	pid_t pid;

	(void)state;
	snprintf(specs[0], sizeof(specs[0]), "p:" KB_GROUP "/kbwork %s:kb_work n=%%di:s32",
		 KB_TARGET);
	snprintf(specs[1], sizeof(specs[1]), "r:" KB_GROUP "/kbret %s:kb_work rv=$retval:s32",
		 KB_TARGET);
	snprintf(specs[2], sizeof(specs[2]),
		 "p:" KB_GROUP "/kbname %s:kb_name s=+0(%%di):string c=$comm a=$arg1 b=%%si:u8",
		 KB_TARGET);
	text = run_traced(1, sp, 3, &pid, &kb, &nlines);
	up_kb_close(kb);
	assert_int_equal(count_lines(text), nlines);
	assert_int_equal(nlines, 3 * KB_N);
	if (json_file) {
		jf = fopen(json_file, "w");
		assert_non_null(jf);
		fputs(text, jf);
		fclose(jf);
	}
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		assert_int_equal(strncmp(line, "{\"time_ns\":", 11), 0);
		assert_int_equal(line[strlen(line) - 1], '}');
		snprintf(frag, sizeof(frag), ",\"pid\":%d,\"tid\":%d,\"cpu\":", pid, pid);
		assert_true(json_has(line, frag));
		assert_true(json_has(line, ",\"comm\":\"kbackend_target\",\"event\":\"" KB_GROUP "/") ||
			    json_has(line, ",\"comm\":\"\",\"event\":\"" KB_GROUP "/")); /* "<...>" */
		if (json_has(line, "\"event\":\"" KB_GROUP "/kbwork\"")) {
			snprintf(frag, sizeof(frag), ",\"addr\":\"0x%" PRIx64 "\",\"args\":{\"n\":%d}}",
				 work, nwork);
			assert_true(json_has(line, frag));
			nwork++;
		} else if (json_has(line, "\"event\":\"" KB_GROUP "/kbret\"")) {
			snprintf(frag, sizeof(frag), ",\"addr\":\"0x%" PRIx64 "\",\"ret_addr\":\"0x",
				 work);
			assert_true(json_has(line, frag));
			snprintf(frag, sizeof(frag), "\",\"args\":{\"rv\":%d}}", 2 * nret + 1);
			assert_true(json_has(line, frag));
			nret++;
		} else if (json_has(line, "\"event\":\"" KB_GROUP "/kbname\"")) {
			snprintf(frag, sizeof(frag),
				 ",\"args\":{\"s\":\"kb-%d \\\"q\\\"\",\"c\":\"kbackend_target\","
				 "\"a\":\"0x",
				 nname);
			if (!json_has(line, frag))
				fail_msg("%s\nlacks %s", line, frag);
			assert_true(json_has(line, "\",\"b\":"));
			nname++;
		} else {
			fail_msg("unexpected line: %s", line);
		}
	}
	assert_int_equal(nwork, KB_N);
	assert_int_equal(nret, KB_N);
	assert_int_equal(nname, KB_N);
	free(text);
}

static void test_errors(void **state)
{
	struct up_kb_opts o = { .out = NULL, .log = test_log };
	struct up_kb *kb;
	char spec[512];

	(void)state;
	assert_int_equal(up_kb_open(&o, &kb), 0);
	assert_int_equal(up_kb_enable(kb), -EINVAL); /* nothing to enable */

	assert_int_equal(try_spec(kb, "up 0 0x401000 A 2"), -EINVAL);
	assert_non_null(strstr(logbuf, "seed"));

	snprintf(spec, sizeof(spec), "p:" KB_GROUP "/nosym %s:kb_no_such_function", KB_TARGET);
	assert_int_equal(try_spec(kb, spec), -ENOENT);
	assert_non_null(strstr(logbuf, "kb_no_such_function"));

	assert_int_equal(try_spec(kb, "p:" KB_GROUP "/abs 0x401000"), -EINVAL);
	assert_non_null(strstr(logbuf, "absolute address"));

	assert_int_equal(try_spec(kb, "p:" KB_GROUP "/nofile /nonexistent/kb/file:0x10"), -ENOENT);

	snprintf(spec, sizeof(spec), "p:" KB_GROUP "/sized %s:kb_work v=%%eax", KB_TARGET);
	assert_int_equal(try_spec(kb, spec), -EINVAL);
	assert_non_null(strstr(logbuf, "sized register"));

	/* the kernel's own refusal: the same probe twice */
	snprintf(spec, sizeof(spec), "p:" KB_GROUP "/kbwork %s:kb_work", KB_TARGET);
	assert_int_equal(try_spec(kb, spec), 0);
	assert_int_equal(try_spec(kb, spec), -EEXIST);
	assert_non_null(strstr(logbuf, "kernel refused"));

	assert_int_equal(up_kb_enable(kb), 0);
	assert_int_equal(up_kb_drain(kb), 0); /* nobody runs the target */
	assert_int_equal(try_spec(kb, spec), -EBUSY); /* after enable */
	up_kb_close(kb);
	/* closed: the event is gone from uprobe_events */
	assert_int_equal(up_kb_remove_group(&o, KB_GROUP), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest text[] = { cmocka_unit_test(test_text) };
	const struct CMUnitTest json[] = { cmocka_unit_test(test_json) };
	const struct CMUnitTest errors[] = { cmocka_unit_test(test_errors) };
	struct up_kb_opts o = { .log = test_log };
	struct up_kb *kb;
	const char *mode = argc > 1 ? argv[1] : "text";
	int r;

	/* Can tracefs be used here at all? */
	r = up_kb_open(&o, &kb);
	if (r < 0) {
		printf("SKIP: the kernel's uprobe tracer cannot be used here (%s): %s", strerror(-r),
		       logbuf);
		return 77;
	}
	up_kb_close(kb);
	/* events of an earlier run that crashed */
	r = up_kb_remove_group(&o, KB_GROUP);
	if (r > 0)
		fprintf(stderr, "removed %d stale " KB_GROUP " events\n", r);
	logbuf[0] = '\0';

	if (!strcmp(mode, "text"))
		r = cmocka_run_group_tests_name("kernel.text", text, NULL, NULL);
	else if (!strcmp(mode, "json")) {
		json_file = argc > 2 ? argv[2] : NULL;
		r = cmocka_run_group_tests_name("kernel.json", json, NULL, NULL);
	} else if (!strcmp(mode, "errors"))
		r = cmocka_run_group_tests_name("kernel.errors", errors, NULL, NULL);
	else {
		fprintf(stderr, "usage: %s text | json [FILE] | errors\n", argv[0]);
		return 2;
	}
	/* whatever failed, leave no events behind */
	up_kb_remove_group(&o, KB_GROUP);
	return r;
}
