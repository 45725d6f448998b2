/* SPDX-License-Identifier: MIT */
/*
 * rel_setid [exec PATH]: calls probed_setid_work() 100 times; with `exec PATH`, then
 * execs PATH (a set-uid copy of this program, say) without arguments.  Without
 * arguments it prints whether it is traced (TracerPid in /proc/self/status), its euid
 * and a checksum, and exits 5.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noipa, used)) int probed_setid_work(int x)
{
	return x * 3 + 1;
}

static long tracer_pid(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "TracerPid:", 10))
			v = strtol(line + 10, NULL, 10);
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	int s = 0;

	for (int i = 0; i < 100; i++)
		s += probed_setid_work(i);
	if (argc > 2 && !strcmp(argv[1], "exec")) {
		execl(argv[2], argv[2], (char *)NULL);
		perror("execl");
		return 1;
	}
	printf("traced=%s euid=%d checksum=%d\n", tracer_pid() > 0 ? "yes" : "no", (int)geteuid(),
	       s);
	return 5;
}
