// SPDX-License-Identifier: MIT
/*
 * Files a traced process names (src/sym/file.c): up_file_open() opens regular files
 * only, never blocks on a FIFO nor opens a device, refuses a symlink or another inode
 * where a mapping's path was, reaches a deleted mapping through /proc/PID/map_files
 * (as root), and says why it refused; up_sym_elf_open() and a .gnu_debuglink that leads
 * to a FIFO do not hang.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sym/file.h"
#include "sym/sym.h"

static char dir[64];

static void path_in(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_sym_file.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void regular_opens_blocking(void **state)
{
	char p[128], buf[8] = "";
	int fd, fl;

	(void)state;
	path_in(p, sizeof(p), "plain");
	write_file(p, "hello");
	fd = up_file_open(p, NULL, true);
	assert_true(fd >= 0);
	fl = fcntl(fd, F_GETFL);
	assert_false(fl & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(read(fd, buf, sizeof(buf)), 5);
	assert_string_equal(buf, "hello");
	close(fd);
}

static void fifo_refused_at_once(void **state)
{
	char p[128], l[128];
	double t0 = now();

	(void)state;
	path_in(p, sizeof(p), "fifo");
	path_in(l, sizeof(l), "to_fifo");
	assert_int_equal(mkfifo(p, 0666), 0);
	assert_int_equal(symlink(p, l), 0);
	assert_int_equal(up_file_open(p, NULL, true), -ENXIO);
	assert_string_equal(up_file_strerror(-ENXIO), "not a regular file (FIFO)");
	assert_int_equal(up_file_open(l, NULL, true), -ENXIO);
	assert_string_equal(up_file_strerror(-ENXIO), "not a regular file (FIFO)");
	/* what the ELF layer says of one, without waiting for a writer */
	struct up_sym_elf *elf;

	assert_int_equal(up_sym_elf_open(p, &elf), -ENXIO);
	assert_string_equal(up_file_strerror(-ENXIO), "not a regular file (FIFO)");
	assert_true(now() - t0 < 1.0);
}

static void devices_and_dirs_refused(void **state)
{
	char l[128];

	(void)state;
	path_in(l, sizeof(l), "to_zero");
	assert_int_equal(symlink("/dev/zero", l), 0);
	assert_int_equal(up_file_open("/dev/null", NULL, true), -ENXIO);
	assert_string_equal(up_file_strerror(-ENXIO), "not a regular file (character device)");
	assert_int_equal(up_file_open(l, NULL, true), -ENXIO);
	assert_string_equal(up_file_strerror(-ENXIO), "not a regular file (character device)");
	assert_int_equal(up_file_open(dir, NULL, true), -EISDIR);
	/* a plain errno is strerror's */
	assert_int_equal(up_file_open("/nonexistent/x", NULL, true), -ENOENT);
	assert_string_equal(up_file_strerror(-ENOENT), strerror(ENOENT));
}

/* A mapping's path: no symlink in its last component, the inode maps gave. */
static void mapping_path_held_to_its_inode(void **state)
{
	char p[128], l[128];
	struct stat st;
	struct up_file_map map = { 0 };
	int fd;

	(void)state;
	path_in(p, sizeof(p), "mapped");
	path_in(l, sizeof(l), "to_mapped");
	write_file(p, "x");
	assert_int_equal(symlink(p, l), 0);
	assert_int_equal(stat(p, &st), 0);
	map.ino = st.st_ino;
	fd = up_file_open(p, &map, true);
	assert_true(fd >= 0);
	close(fd);
	/* followed for a user's name, not for a mapping's */
	fd = up_file_open(l, NULL, true);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(up_file_open(l, &map, true), -ELOOP);
	assert_string_equal(up_file_strerror(-ELOOP),
			    "a symbolic link where the process maps a file");
	map.ino = st.st_ino + 1;
	assert_int_equal(up_file_open(p, &map, true), -ESTALE);
	assert_non_null(strstr(up_file_strerror(-ESTALE), "not the file the process maps"));
}

/* A deleted mapping with a FIFO at its name: map_files reaches the file (root). */
static void deleted_mapping_through_map_files(void **state)
{
	char p[128], del[160], buf[16] = "";
	struct up_file_map map = { 0 };
	struct stat st;
	void *at;
	int fd;

	(void)state;
	path_in(p, sizeof(p), "lib.so");
	snprintf(del, sizeof(del), "%s (deleted)", p);
	write_file(p, "the mapped file");
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	at = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(at != MAP_FAILED);
	close(fd);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0666), 0);
	assert_int_equal(mkfifo(del, 0666), 0);
	map = (struct up_file_map){ getpid(), (uintptr_t)at, (uintptr_t)at + 4096, st.st_ino };
	fd = up_file_open(del, &map, false);
	if (geteuid() == 0) {
		assert_true(fd >= 0);
		assert_int_equal(read(fd, buf, sizeof(buf) - 1), 15);
		assert_string_equal(buf, "the mapped file");
		close(fd);
	} else {
		assert_int_equal(fd, -ENXIO); /* no map_files: the path, refused */
	}
	/* the mapping gone: by the path, a FIFO, refused */
	munmap(at, 4096);
	assert_int_equal(up_file_open(del, &map, false), -ENXIO);
}

static void too_big_refused(void **state)
{
	char p[128];
	int fd;

	(void)state;
	path_in(p, sizeof(p), "sparse");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	if (ftruncate(fd, (off_t)UP_FILE_MAX_SIZE + 1)) {
		close(fd);
		skip();
	}
	close(fd);
	assert_int_equal(up_file_open(p, NULL, true), -EFBIG);
	assert_non_null(strstr(up_file_strerror(-EFBIG), "larger than 8 GiB"));
}

/* A file whose .gnu_debuglink names a FIFO next to it opens, without its debug file. */
static void debuglink_to_fifo(void **state)
{
	char prog[128], dbg[128], cmd[512];
	struct up_sym_elf *elf;
	double t0;

	(void)state;
	path_in(prog, sizeof(prog), "prog");
	path_in(dbg, sizeof(dbg), "prog.debug");
	snprintf(cmd, sizeof(cmd),
		 "cp /bin/true '%s' && objcopy --add-gnu-debuglink='%s' /bin/true '%s' 2>/dev/null",
		 dbg, dbg, prog);
	if (system(cmd) != 0)
		skip(); /* no objcopy (binutils) */
	assert_int_equal(unlink(dbg), 0);
	assert_int_equal(mkfifo(dbg, 0666), 0);
	t0 = now();
	assert_int_equal(up_sym_elf_open(prog, &elf), 0);
	assert_null(up_sym_elf_debug_path(elf));
	up_sym_elf_close(elf);
	assert_true(now() - t0 < 1.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(regular_opens_blocking),
		cmocka_unit_test(fifo_refused_at_once),
		cmocka_unit_test(devices_and_dirs_refused),
		cmocka_unit_test(mapping_path_held_to_its_inode),
		cmocka_unit_test(deleted_mapping_through_map_files),
		cmocka_unit_test(too_big_refused),
		cmocka_unit_test(debuglink_to_fifo),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
