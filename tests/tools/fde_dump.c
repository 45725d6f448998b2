// SPDX-License-Identifier: MIT
/*
 * Prints the FDE ranges src/sym/fde.c reads from FILE, one "START..END" a line in hex
 * (readelf --debug-dump=frames's pc= form), sorted: sym.fde compares them with readelf's.
 */
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sym/fde.h"

int main(int argc, char **argv)
{
	struct up_fde *v;
	size_t n;
	Elf *elf;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: fde_dump FILE\n");
		return 2;
	}
	elf_version(EV_CURRENT);
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || !(elf = elf_begin(fd, ELF_C_READ_MMAP, NULL))) {
		perror(argv[1]);
		return 2;
	}
	if (up_fde_table(elf, &v, &n)) {
		fprintf(stderr, "%s: cannot read its FDEs\n", argv[1]);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		printf("%016" PRIx64 "..%016" PRIx64 "\n", v[i].start, v[i].end);
	free(v);
	elf_end(elf);
	close(fd);
	return 0;
}
