/* SPDX-License-Identifier: MIT */
/*
 * Target of trace.fork / trace.exec: calls tick() once in the parent, forks, calls
 * tick() once in the child and once more in the parent, waits for the child.  Prints
 * "tick PID" per call.  With "nofork" as argv[1] it just calls tick() once.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline, used)) int tick(int who)
{
	__asm__ volatile("" : : "r"(who) : "memory");
	printf("tick %d %d\n", who, (int)getpid());
	fflush(stdout);
	return who;
}

int main(int argc, char **argv)
{
	pid_t c;
	int st = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "nofork")) {
		tick(0);
		return 0;
	}
	tick(0);
	c = fork();
	if (c < 0) {
		perror("fork");
		return 1;
	}
	if (c == 0) {
		tick(1);
		_exit(0);
	}
	tick(0);
	if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "child failed\n");
		return 1;
	}
	return 0;
}
