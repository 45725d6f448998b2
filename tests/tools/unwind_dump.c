// SPDX-License-Identifier: MIT
/*
 * The unwind table src/sym/unwind.c builds for FILE: "rows N bytes B ms T" (the build
 * timed, best of 5), then with -r each row: "VADDR KIND CFA_OFF RBP_KIND RBP_OFF" in hex
 * and decimal.  sym.unwind_table checks libc's table against its budget and its rows
 * against readelf's CFA column.
 */
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sym/unwind.h"

static const char *const kinds[] = { "none",  "rsp",	"rbp", "plt",
				     "deref", "signal", "end", "unknown" };
static const char *const rbps[] = { "same", "cfa", "undef" };

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	struct up_unwind_table *t = NULL;
	int rows = argc == 3 && !strcmp(argv[1], "-r");
	const char *path = argv[argc - 1];
	double best = 1e9;
	Elf *elf;
	int fd;

	if (argc != 2 && !rows) {
		fprintf(stderr, "usage: unwind_dump [-r] FILE\n");
		return 2;
	}
	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || !(elf = elf_begin(fd, ELF_C_READ_MMAP, NULL))) {
		perror(path);
		return 2;
	}
	for (int i = 0; i < 5; i++) {
		double t0 = now_ms();

		free(t);
		if (up_unwind_build(elf, &t)) {
			fprintf(stderr, "%s: no unwind table\n", path);
			return 1;
		}
		if (now_ms() - t0 < best)
			best = now_ms() - t0;
	}
	printf("rows %" PRIu32 " bytes %" PRIu64 " ms %.1f\n", t->nrows, t->size, best);
	for (uint32_t i = 0; rows && i < t->nrows; i++) {
		const struct up_unwind_row *r = &t->rows[i];

		printf("%016" PRIx64 " %s %d %s %d\n", t->base + r->pc,
		       r->cfa < 8 ? kinds[r->cfa] : "?", r->cfa_off,
		       r->rbp < 3 ? rbps[r->rbp] : "?", r->rbp_off);
	}
	free(t);
	elf_end(elf);
	close(fd);
	return 0;
}
