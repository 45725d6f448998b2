// SPDX-License-Identifier: MIT
/*
 * A target for DWARF probes, built at -O0 and at -O2 with -g (tests/probes.cmake):
 * handle() takes a struct pointer, an int and a string; its locals live on the stack
 * at -O0 and in registers, or nowhere (optimized out), at -O2.  "dwarf_prog N" makes N
 * requests and prints a checksum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct req {
	int id;
	long size;
	const char *name;
	struct {
		unsigned short port;
		char host[16];
	} peer;
};

static long total;

__attribute__((noinline)) long handle(struct req *r, int flags, const char *tag)
{
	long cost = r->size * 2 + flags; /* line 26 */
	int unused_after = (int)strlen(tag);

	total += cost + unused_after;
	if (flags & 1)
		total -= r->peer.port; /* line 31 */
	return total;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "alpha", "beta", "gamma" };
	int n = argc > 1 ? atoi(argv[1]) : 3;
	struct req r;

	for (int i = 0; i < n; i++) {
		memset(&r, 0, sizeof(r));
		r.id = 100 + i;
		r.size = 4096L * (i + 1);
		r.name = names[i % 3];
		r.peer.port = (unsigned short)(8000 + i);
		snprintf(r.peer.host, sizeof(r.peer.host), "h%d.test", i % 1000);
		handle(&r, i, i % 2 ? "odd" : "even");
	}
	printf("total %ld\n", total);
	return 0;
}
