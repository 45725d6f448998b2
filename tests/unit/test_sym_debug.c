// SPDX-License-Identifier: MIT
/*
 * Separate debug files: the stripped copies of tests/targets/sym_stripped.c that
 * tests/sym.cmake lays out under SYM_DEBUG_DIR (see the layout there) must get their
 * static functions back from the debug file, found by .gnu_debuglink (same directory,
 * .debug/, a debug root) or by build-id, at the addresses nm gives for the unstripped
 * build; code bytes still come from the stripped file and equal the unstripped ones.
 * Debug files with a wrong CRC or build-id are refused, leaving .dynsym only.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sym/sym.h"

#define D SYM_DEBUG_DIR

static const char *const statics[] = { "sym_static_add", "sym_static_mul", "sym_static_leaf" };
static const char *const globals[] = { "sym_global_entry", "sym_global_twice", "main" };
#define NR(a) (sizeof(a) / sizeof((a)[0]))

/* The address nm printed for name in file (an nm listing), or 0. */
static uint64_t nm_addr(const char *file, const char *name)
{
	char line[512], sym[256], type;
	unsigned long long addr;
	uint64_t found = 0;
	FILE *f = fopen(file, "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %255s", &addr, &type, sym) == 3 && !strcmp(sym, name) &&
		    (type == 't' || type == 'T')) {
			found = addr;
			break;
		}
	fclose(f);
	return found;
}

static struct up_sym_elf *open_with_roots(const char *path, const char *roots)
{
	struct up_sym_elf *elf = NULL;

	if (roots)
		assert_int_equal(setenv("UPROBE_DEBUG_DIRS", roots, 1), 0);
	else
		assert_int_equal(unsetenv("UPROBE_DEBUG_DIRS"), 0);
	assert_int_equal(up_sym_elf_open(path, &elf), 0);
	return elf;
}

struct walk {
	const char *name;
	int seen;
	struct up_sym sym;
	uint64_t last;
	bool sorted;
	size_t n, n_debug, n_dynamic;
};

static int walk_one(const struct up_sym *s, void *ctx)
{
	struct walk *w = ctx;

	if (s->value < w->last)
		w->sorted = false;
	w->last = s->value;
	w->n++;
	w->n_debug += s->debug_file;
	w->n_dynamic += s->dynamic;
	if (!strcmp(s->name, w->name)) {
		w->seen++;
		w->sym = *s;
	}
	return 0;
}

static struct walk walk_for(struct up_sym_elf *elf, const char *name)
{
	struct walk w = { .name = name, .sorted = true };

	assert_int_equal(up_sym_elf_for_each_func(elf, walk_one, &w), 0);
	assert_true(w.sorted);
	return w;
}

/* A stripped copy whose debug file must be found at want_debug (under D). */
static void check_found(const char *variant, const char *roots, const char *want_debug)
{
	char path[512], want[512], *real_got, *real_want;
	struct up_sym_elf *elf, *orig;
	size_t i;

	snprintf(path, sizeof(path), D "/%s/prog", variant);
	snprintf(want, sizeof(want), D "/%s", want_debug);
	elf = open_with_roots(path, roots);
	assert_int_equal(up_sym_elf_open(D "/orig/prog", &orig), 0);

	assert_non_null(up_sym_elf_debug_path(elf));
	real_got = realpath(up_sym_elf_debug_path(elf), NULL);
	real_want = realpath(want, NULL);
	assert_non_null(real_got);
	assert_non_null(real_want);
	assert_string_equal(real_got, real_want);
	free(real_got);
	free(real_want);
	assert_null(up_sym_elf_debug_path(orig));

	for (i = 0; i < NR(statics) + NR(globals); i++) {
		const char *name = i < NR(statics) ? statics[i] : globals[i - NR(statics)];
		uint64_t addr = nm_addr(D "/prog.nm", name);
		const uint8_t *code, *orig_code;
		struct up_sym s, o;
		struct walk w;

		assert_true(addr != 0);
		/* lookup: the debug file's .symtab entry, at nm's address */
		assert_int_equal(up_sym_elf_lookup(elf, name, &s), 0);
		assert_int_equal(s.value, addr);
		assert_true(s.debug_file);
		assert_false(s.dynamic);
		assert_int_equal(s.global, i >= NR(statics));
		assert_int_equal(up_sym_elf_lookup(orig, name, &o), 0);
		assert_false(o.debug_file);
		assert_int_equal(s.size, o.size);
		assert_true(s.size > 1);

		/* the walk lists it once, from the debug file */
		w = walk_for(elf, name);
		assert_int_equal(w.seen, 1);
		assert_int_equal(w.sym.value, addr);
		assert_true(w.sym.debug_file);

		/* enclosing_func inside the body */
		assert_int_equal(up_sym_elf_enclosing_func(elf, addr + 1, &s), 0);
		assert_string_equal(s.name, name);
		assert_int_equal(s.value, addr);

		/* the bytes come from the stripped file and are the unstripped build's */
		assert_int_equal(up_sym_elf_code(elf, addr, o.size, &code), 0);
		assert_int_equal(up_sym_elf_code(orig, addr, o.size, &orig_code), 0);
		assert_memory_equal(code, orig_code, o.size);
	}
	up_sym_elf_close(orig);
	up_sym_elf_close(elf);
}

/* A stripped copy that must end up with no debug file: .dynsym only. */
static void check_refused(const char *variant, const char *roots)
{
	struct up_sym_elf *elf;
	struct up_sym s;
	char path[512];
	struct walk w;
	size_t i;

	snprintf(path, sizeof(path), D "/%s/prog", variant);
	elf = open_with_roots(path, roots);
	assert_null(up_sym_elf_debug_path(elf));
	for (i = 0; i < NR(statics); i++) {
		assert_int_equal(up_sym_elf_lookup(elf, statics[i], &s), -ENOENT);
		w = walk_for(elf, statics[i]);
		assert_int_equal(w.seen, 0);
	}
	for (i = 0; i < NR(globals); i++) {
		assert_int_equal(up_sym_elf_lookup(elf, globals[i], &s), 0);
		assert_true(s.dynamic);
		assert_false(s.debug_file);
		assert_int_equal(s.value, nm_addr(D "/prog.nm", globals[i]));
	}
	w = walk_for(elf, "main");
	assert_int_equal(w.seen, 1);
	assert_true(w.n > 0);
	assert_int_equal(w.n_dynamic, w.n);
	assert_int_equal(w.n_debug, 0);
	/* enclosing_func inside a static function: nothing, or not that function */
	if (up_sym_elf_enclosing_func(elf, nm_addr(D "/prog.nm", "sym_static_add") + 1, &s) == 0)
		assert_string_not_equal(s.name, "sym_static_add");
	up_sym_elf_close(elf);
}

static void test_unstripped_has_no_debug_file(void **state)
{
	struct up_sym_elf *elf = open_with_roots(D "/orig/prog", D "/bidroot");
	struct up_sym s;

	/* it has .symtab: its build-id's debug file is not looked for */
	assert_null(up_sym_elf_debug_path(elf));
	assert_int_equal(up_sym_elf_lookup(elf, "sym_static_add", &s), 0);
	assert_false(s.debug_file);
	assert_false(s.dynamic);
	assert_int_equal(s.value, nm_addr(D "/prog.nm", "sym_static_add"));
	up_sym_elf_close(elf);
}

static void test_debuglink_same_dir(void **state)
{
	check_found("link", D "/empty", "link/prog.debug");
}

static void test_debuglink_default_roots(void **state)
{
	/* the file's own directory is searched whatever the roots */
	check_found("link", NULL, "link/prog.debug");
}

static void test_debuglink_debug_subdir(void **state)
{
	check_found("sub", D "/empty", "sub/.debug/prog.debug");
}

static void test_debuglink_under_root(void **state)
{
	char rel[512];

	snprintf(rel, sizeof(rel), "rootlink/root%s/rootlink/prog.debug", D);
	/* the second root of the list holds it */
	check_found("rootlink", D "/empty:" D "/rootlink/root", rel);
}

static void test_build_id(void **state)
{
	char id[128], want[512];
	struct up_sym_elf *elf;
	FILE *f;

	/* readelf's build-id of the unstripped build: bidroot/.build-id/xx/yyyy.debug */
	f = fopen(D "/prog.build-id", "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%127s", id), 1);
	fclose(f);
	assert_int_equal(strlen(id), 40);
	snprintf(want, sizeof(want), "bidroot/.build-id/%.2s/%s.debug", id, id + 2);
	check_found("bid", D "/bidroot", want);

	/* empty entries in the list are skipped; the third root holds it */
	elf = open_with_roots(D "/bid/prog", "::" D "/empty:" D "/bidroot:");
	snprintf(want, sizeof(want), D "/bidroot/.build-id/%.2s/%s.debug", id, id + 2);
	assert_non_null(up_sym_elf_debug_path(elf));
	assert_string_equal(up_sym_elf_debug_path(elf), want);
	up_sym_elf_close(elf);
}

static void test_bad_crc_refused(void **state)
{
	check_refused("badcrc", D "/empty");
}

static void test_no_debug_file(void **state)
{
	check_refused("nolink", D "/empty");
	/* no roots at all */
	check_refused("nolink", "");
}

static void test_wrong_build_id_refused(void **state)
{
	check_refused("wrongbid", D "/wrongbid/root");
}

static void test_debuglink_build_id_mismatch_refused(void **state)
{
	/* right CRC (objcopy computed it over this very file), another build's build-id */
	check_refused("mismatch", D "/empty");
}

/* The C library through its installed debug file (libc6-dbg), when there is one. */
static void test_libc_debug_file(void **state)
{
	static const char *const locals[] = { "_int_malloc", "_int_free", "sysmalloc" };
	char want[4096], *nl;
	struct up_sym_elf *elf;
	size_t i;
	FILE *f;

	f = fopen(D "/libc.debug-path", "r");
	if (!f) {
		print_message("SKIP: no debug file for " UPROBE_TEST_LIBC " (libc6-dbg)\n");
		skip();
	}
	assert_non_null(fgets(want, sizeof(want), f));
	fclose(f);
	nl = strchr(want, '\n');
	if (nl)
		*nl = '\0';

	elf = open_with_roots(UPROBE_TEST_LIBC, NULL);
	assert_non_null(up_sym_elf_debug_path(elf));
	assert_string_equal(up_sym_elf_debug_path(elf), want);
	for (i = 0; i < NR(locals); i++) {
		uint64_t addr = nm_addr(D "/libc.nm", locals[i]);
		const uint8_t *code;
		struct up_sym s;

		assert_true(addr != 0);
		assert_int_equal(up_sym_elf_lookup(elf, locals[i], &s), 0);
		assert_int_equal(s.value, addr);
		assert_true(s.debug_file);
		assert_false(s.global);
		assert_true(s.size > 0);
		assert_int_equal(up_sym_elf_code(elf, s.value, s.size, &code), 0);
		assert_int_equal(up_sym_elf_enclosing_func(elf, addr + s.size - 1, &s), 0);
		assert_int_equal(s.value, addr);
	}
	/* an exported function is still found, once */
	{
		struct walk w = walk_for(elf, "malloc");

		assert_int_equal(w.seen, 1);
		assert_true(w.n_debug > 0);
	}
	up_sym_elf_close(elf);

	/* and without roots: .dynsym only */
	elf = open_with_roots(UPROBE_TEST_LIBC, "");
	assert_null(up_sym_elf_debug_path(elf));
	{
		struct up_sym s;

		assert_int_equal(up_sym_elf_lookup(elf, "_int_malloc", &s), -ENOENT);
	}
	up_sym_elf_close(elf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unstripped_has_no_debug_file),
		cmocka_unit_test(test_debuglink_same_dir),
		cmocka_unit_test(test_debuglink_default_roots),
		cmocka_unit_test(test_debuglink_debug_subdir),
		cmocka_unit_test(test_debuglink_under_root),
		cmocka_unit_test(test_build_id),
		cmocka_unit_test(test_bad_crc_refused),
		cmocka_unit_test(test_no_debug_file),
		cmocka_unit_test(test_wrong_build_id_refused),
		cmocka_unit_test(test_debuglink_build_id_mismatch_refused),
		cmocka_unit_test(test_libc_debug_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
