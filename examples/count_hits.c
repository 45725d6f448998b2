// SPDX-License-Identifier: MIT
/*
 * count_hits: seed 007's example module, as a program.
 *
 *   count_hits PID VADDR [verbose]
 *
 * Probes the instruction at VADDR in process PID, reports each hit (unless verbose is
 * 0) and, when the process exits or on Ctrl-C, how many times the probe was hit.  The
 * process runs on unharmed after Ctrl-C.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uprobe/uprobe.h>

static int verbose = 1;
static unsigned long nhits;
static volatile int stop;

static void handler(struct uprobe *u, uprobe_regs_t *regs)
{
	(void)regs;
	nhits++;
	if (verbose)
		printf("Hit #%lu on probepoint at %#" PRIx64 "\n", nhits, u->vaddr);
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void log_msg(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "count_hits: %s\n", msg);
}

int main(int argc, char **argv)
{
	struct uprobe_ctx_opts opts = { .log = log_msg };
	struct uprobe u = { .handler = handler };
	struct sigaction sa = { .sa_handler = on_signal };
	struct uprobe_ctx *ctx;
	char *end;
	int rc;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: count_hits PID VADDR [verbose]\n"
				"  Probes VADDR (hex with 0x, or decimal) in process PID and counts the hits;\n"
				"  verbose 0 prints only the total, at exit or Ctrl-C.\n");
		return 2;
	}
	u.pid = (pid_t)strtol(argv[1], &end, 10);
	if (*end || u.pid <= 0) {
		fprintf(stderr, "count_hits: '%s' is not a pid\n", argv[1]);
		return 2;
	}
	u.vaddr = strtoull(argv[2], &end, 0);
	if (*end || !u.vaddr) {
		fprintf(stderr, "count_hits: '%s' is not an address\n", argv[2]);
		return 2;
	}
	if (argc == 4)
		verbose = atoi(argv[3]);
	setvbuf(stdout, NULL, _IOLBF, 0);

	rc = uprobe_ctx_new(&opts, &ctx);
	if (rc) {
		fprintf(stderr, "count_hits: %s\n", strerror(-rc));
		return 1;
	}
	rc = uprobe_attach(ctx, u.pid);
	if (rc) {
		fprintf(stderr, "count_hits: cannot trace process %d: %s\n", (int)u.pid, strerror(-rc));
		uprobe_ctx_free(ctx);
		return 1;
	}
	rc = register_uprobe(ctx, &u);
	if (rc) {
		fprintf(stderr, "count_hits: cannot probe %#" PRIx64 ": %s\n", u.vaddr, strerror(-rc));
		uprobe_ctx_free(ctx);
		return 1;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	fprintf(stderr, "count_hits: probing %#" PRIx64 " in process %d; Ctrl-C to stop\n", u.vaddr,
		(int)u.pid);
	rc = uprobe_ctx_run(ctx, &stop);
	unregister_uprobe(ctx, &u);
	uprobe_ctx_free(ctx);
	printf("Probepoint was hit %lu times\n", nhits);
	return rc && rc != -EINTR ? 1 : 0;
}
