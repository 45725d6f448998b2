/* SPDX-License-Identifier: MIT */
/*
 * Target of trace.dlopen: starts without the library, then dlopen()s argv[1] and calls
 * its lib_func K times (argv[2], default 4), printing each result.  ROUNDS (argv[3],
 * default 1) repeats dlopen, the calls and dlclose: the library comes back, maybe at
 * another address, and must be probed again.  With TRACE_DLOPEN_MAPS set in the
 * environment it ends by writing to stderr how many executable mappings it has.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int k = argc > 2 ? atoi(argv[2]) : 4;
	int rounds = argc > 3 ? atoi(argv[3]) : 1;
	void *h;
	int (*f)(int);

	if (argc < 2) {
		fprintf(stderr, "usage: trace_dlopen LIB.so [K]\n");
		return 2;
	}
	printf("started\n");
	fflush(stdout);
	for (int round = 0; round < rounds; round++) {
		h = dlopen(argv[1], RTLD_NOW);
		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 1;
		}
		f = (int (*)(int))dlsym(h, "lib_func");
		if (!f) {
			fprintf(stderr, "dlsym: %s\n", dlerror());
			return 1;
		}
		for (int i = 0; i < k; i++)
			printf("lib_func(%d) = %d\n", i, f(i));
		dlclose(h);
	}
	if (getenv("TRACE_DLOPEN_MAPS")) {
		FILE *m = fopen("/proc/self/maps", "r");
		char line[512];
		int nx = 0;

		while (m && fgets(line, sizeof(line), m)) {
			char perms[8];

			if (sscanf(line, "%*s %7s", perms) == 1 && perms[2] == 'x')
				nx++;
		}
		if (m)
			fclose(m);
		fprintf(stderr, "executable mappings: %d\n", nx);
	}
	return 0;
}
