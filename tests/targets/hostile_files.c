/* SPDX-License-Identifier: MIT */
/*
 * A hostile target for trace.hostile.files: it maps a library, then swaps what its name
 * leads to for something a tracer must never open, and runs as nobody.
 *
 *   hostile_files LIB DIR MODE NAME CALLS
 *
 * copies LIB to DIR/NAME, dlopen()s it, unlinks it, and puts in its place, under both
 * NAME and "NAME (deleted)" (what /proc/PID/maps then shows):
 *   fifo     a FIFO (an open(2) for reading blocks until a writer comes)
 *   chr      a character device node, /dev/zero's (mknod, done as root before the drop)
 *   symlink  a symbolic link to /dev/zero (what an unprivileged user can do)
 *   keep     nothing: the library stays, not unlinked (a control)
 * then drops to nobody, prints "ready PID ADDR" (lib_func's address) and calls lib_func
 * CALLS times, one every millisecond, and prints "calls N sum S" and exits 0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static int copy(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	ssize_t n;

	if (in < 0 || out < 0)
		return -1;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			return -1;
	close(in);
	return close(out);
}

static int plant(const char *mode, const char *path)
{
	if (!strcmp(mode, "fifo"))
		return mkfifo(path, 0666);
	if (!strcmp(mode, "chr"))
		return mknod(path, S_IFCHR | 0666, makedev(1, 5));
	if (!strcmp(mode, "symlink"))
		return symlink("/dev/zero", path);
	return -1;
}

int main(int argc, char **argv)
{
	char path[4096], deleted[4200];
	struct timespec ms = { 0, 1000000 };
	int (*f)(int);
	long sum = 0;
	int calls;
	void *h;

	if (argc != 6) {
		fprintf(stderr, "usage: hostile_files LIB DIR fifo|chr|symlink|keep NAME CALLS\n");
		return 2;
	}
	calls = atoi(argv[5]);
	snprintf(path, sizeof(path), "%s/%s", argv[2], argv[4]);
	snprintf(deleted, sizeof(deleted), "%s (deleted)", path);
	if (copy(argv[1], path)) {
		perror(path);
		return 2;
	}
	h = dlopen(path, RTLD_NOW);
	if (!h || !(f = (int (*)(int))dlsym(h, "lib_func"))) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	if (strcmp(argv[3], "keep")) {
		if (unlink(path) || plant(argv[3], path) || plant(argv[3], deleted)) {
			perror("plant");
			return 2;
		}
	}
	if (chown(argv[2], 65534, 65534) || setgid(65534) || setuid(65534)) {
		perror("drop to nobody");
		return 2;
	}
	printf("ready %d %p\n", (int)getpid(), (void *)f);
	fflush(stdout);
	for (int i = 0; i < calls; i++) {
		sum += f(i);
		nanosleep(&ms, NULL);
	}
	printf("calls %d sum %ld\n", calls, sum);
	return 0;
}
