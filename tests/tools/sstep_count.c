/* SPDX-License-Identifier: MIT */
/*
 * sstep_count [-o FILE] ADDR[,ADDR...] -- CMD [ARGS...]
 *
 * The probing core's oracle: runs CMD under PTRACE_TRACEME and single-steps every
 * instruction it executes (one thread; children and new threads are not followed),
 * counting how many times the instruction pointer arrived at each ADDR.  Prints
 * "0x<addr> <count>" per ADDR, in the order given, to FILE (default stdout, after
 * CMD has finished) and exits with CMD's exit status (128 + signal if it was killed).
 *
 * Tracer and tracee are pinned to one CPU: a stop and a resume cost a few times less
 * there, and the counts of a single-threaded program do not depend on it.
 *
 * Not supported: a program's own int3 (the step's trap and the int3's collide).
 *
 * It shares nothing with the uprobe library on purpose.  A rep-prefixed string
 * instruction traps after each iteration under single-step; those re-arrivals at the
 * same address are one execution, as a probe sees it, so they are counted once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

struct site {
	uint64_t addr;
	uint64_t count;
	size_t order;
};

static int site_cmp(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int order_cmp(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	return x->order < y->order ? -1 : x->order > y->order;
}

static void usage(void)
{
	fprintf(stderr, "usage: sstep_count [-o FILE] ADDR[,ADDR...] -- CMD [ARGS...]\n");
	exit(2);
}

static int parse_sites(const char *list, struct site **out, size_t *n)
{
	char *copy = strdup(list), *save = NULL, *tok;
	size_t cap = 16, len = 0;
	struct site *s = malloc(cap * sizeof(*s));

	if (!copy || !s)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(tok, &end, 0);
		if (errno || *end || end == tok) {
			fprintf(stderr, "sstep_count: bad address '%s'\n", tok);
			free(copy);
			free(s);
			return -1;
		}
		if (len == cap) {
			struct site *t = realloc(s, (cap *= 2) * sizeof(*s));

			if (!t) {
				free(copy);
				free(s);
				return -1;
			}
			s = t;
		}
		s[len].addr = v;
		s[len].count = 0;
		s[len].order = len;
		len++;
	}
	free(copy);
	qsort(s, len, sizeof(*s), site_cmp);
	*out = s;
	*n = len;
	return 0;
}

/* Is the instruction at addr a rep/repne-prefixed string instruction? */
static int is_rep_string(pid_t pid, uint64_t addr)
{
	unsigned char b[16];
	int rep = 0;

	for (size_t off = 0; off < sizeof(b); off += sizeof(long)) {
		long w;

		errno = 0;
		w = ptrace(PTRACE_PEEKTEXT, pid, (void *)(uintptr_t)(addr + off), NULL);
		if (errno)
			return 0;
		memcpy(b + off, &w, sizeof(w));
	}
	for (size_t i = 0; i < sizeof(b); i++) {
		unsigned char c = b[i];

		if (c == 0xf3 || c == 0xf2) {
			rep = 1;
			continue;
		}
		/* legacy prefixes: operand/address size, segments, lock */
		if (c == 0x66 || c == 0x67 || c == 0x2e || c == 0x36 || c == 0x3e ||
		    c == 0x26 || c == 0x64 || c == 0x65 || c == 0xf0)
			continue;
		/* a REX prefix, only meaningful on x86-64 but harmless to skip */
		if ((c & 0xf0) == 0x40 && i + 1 < sizeof(b)) {
			unsigned char d = b[i + 1];

			if ((d >= 0xa4 && d <= 0xa7) || (d >= 0xaa && d <= 0xaf) ||
			    (d >= 0x6c && d <= 0x6f))
				return rep;
			return 0;
		}
		return rep && ((c >= 0xa4 && c <= 0xa7) || (c >= 0xaa && c <= 0xaf) ||
			       (c >= 0x6c && c <= 0x6f));
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *outpath = NULL;
	struct site *sites;
	size_t nsites, ai = 1;
	uint64_t last = UINT64_MAX, steps = 0;
	int status, code;
	pid_t pid;
	FILE *out;

	if (ai < (size_t)argc && !strcmp(argv[ai], "-o")) {
		if (ai + 1 >= (size_t)argc)
			usage();
		outpath = argv[ai + 1];
		ai += 2;
	}
	if (ai + 2 >= (size_t)argc || strcmp(argv[ai + 1], "--"))
		usage();
	if (parse_sites(argv[ai], &sites, &nsites))
		return 2;

	int cpu = sched_getcpu();

	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		sched_setaffinity(0, sizeof(set), &set); /* a speed-up only: errors are fine */
	}
	pid = fork();
	if (pid < 0) {
		perror("sstep_count: fork");
		return 2;
	}
	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL)) {
			perror("sstep_count: PTRACE_TRACEME");
			_exit(127);
		}
		execvp(argv[ai + 2], argv + ai + 2);
		fprintf(stderr, "sstep_count: %s: %s\n", argv[ai + 2], strerror(errno));
		_exit(127);
	}
	/* the exec's SIGTRAP: the new image, stopped before its first instruction */
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
		fprintf(stderr, "sstep_count: %s did not start\n", argv[ai + 2]);
		return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
	}
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);

	/*
	 * An arrival is counted at each stop of a step (TRAP_TRACE; TRAP_BRKPT after a
	 * syscall; si_code SIGTRAP once a handler's frame is set up).  A signal stop comes
	 * before the instruction at rip has run -- it faulted, or the signal came between
	 * two instructions -- and rip was counted at the step's stop already, unless the
	 * signal took the step's trap's place (a SIGTRAP of raise() coalesces with it).
	 */
	int sig = 0, step_stop = 1;
	for (;;) {
		struct user_regs_struct regs;
		siginfo_t si;

		if (ptrace(PTRACE_GETREGS, pid, NULL, &regs)) {
			perror("sstep_count: PTRACE_GETREGS");
			kill(pid, SIGKILL);
			return 2;
		}
		uint64_t ip = regs.rip;
		struct site key = {.addr = ip};
		struct site *s = bsearch(&key, sites, nsites, sizeof(*sites), site_cmp);
		int arrival = step_stop ? !(ip == last && is_rep_string(pid, ip)) : ip != last;

		if (s && arrival)
			s->count++;
		last = ip;
		if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig)) {
			perror("sstep_count: PTRACE_SINGLESTEP");
			kill(pid, SIGKILL);
			return 2;
		}
		steps++;
		sig = 0;
		if (waitpid(pid, &status, 0) != pid) {
			perror("sstep_count: waitpid");
			return 2;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status))
			break;
		step_stop = 0;
		if (WSTOPSIG(status) != SIGTRAP) {
			sig = WSTOPSIG(status); /* the program's own signal: deliver it */
		} else if (ptrace(PTRACE_GETSIGINFO, pid, NULL, &si)) {
			step_stop = 1;
		} else if (si.si_code <= 0) {
			sig = SIGTRAP; /* sent to it (raise, kill): deliver */
		} else if (si.si_code == SI_KERNEL) {
			/* its own int3: deliver; the next instruction is not reached yet */
			sig = SIGTRAP;
			last = ip;
		} else {
			step_stop = 1;
		}
	}
	code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

	out = outpath ? fopen(outpath, "w") : stdout;
	if (!out) {
		perror(outpath);
		return 2;
	}
	qsort(sites, nsites, sizeof(*sites), order_cmp);
	for (size_t i = 0; i < nsites; i++)
		fprintf(out, "0x%" PRIx64 " %" PRIu64 "\n", sites[i].addr, sites[i].count);
	fprintf(stderr, "sstep_count: %" PRIu64 " steps\n", steps);
	if (out != stdout)
		fclose(out);
	free(sites);
	return code;
}
