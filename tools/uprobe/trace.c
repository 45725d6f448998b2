// SPDX-License-Identifier: MIT
/*
 * uprobe trace: probe specs in, trace lines out (src/trace/session.c does the work).
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "trace/kernel.h"
#include "trace/session.h"
#include "trace/spec.h"

static volatile int stop_sig;

static void on_stop_signal(int sig)
{
	stop_sig = sig;
}

static void trace_usage(FILE *out)
{
	fputs("usage: uprobe trace [-e SPEC]... [-f FILE] [-o FILE] [--format text|json] [-c] [-v]\n"
	      "                    [--no-follow] (-p PID... | -- COMMAND [ARGS...])\n"
	      "\n"
	      "Probes the instructions SPEC names in a running process (-p, every thread) or in\n"
	      "COMMAND, launched and stopped before its first instruction so nothing is missed,\n"
	      "and prints a line per hit.  With a COMMAND, uprobe exits with its exit status.\n"
	      "Ctrl-C or SIGTERM ends tracing: the probes are taken out and the process runs on.\n"
	      "\n"
	      "SPEC, the seed's form (Linux uprobes RFC, 2010):\n"
	      "  up PID ADDR D DADDR SIZE   dump SIZE bytes at DADDR\n"
	      "  up PID ADDR S SIZE         dump SIZE bytes at the top of the stack\n"
	      "  up PID ADDR A NARGS        print the first NARGS (<= 6) arguments\n"
	      "      addresses in hex, 0x optional; PID 0 is the COMMAND\n"
	      "SPEC, the kernel's uprobe_events form:\n"
	      "  p[:[GRP/]EVENT] TARGET [FETCHARG...]   a probe\n"
	      "  r[:[GRP/]EVENT] TARGET [FETCHARG...]   a return probe (TARGET: a function)\n"
	      "  TARGET   PATH:0xOFFSET (file offset) | PATH:SYMBOL[+OFFSET] | 0xVADDR\n"
	      "      a PATH probe acts on every mapping of that file, libraries loaded later\n"
	      "      (dlopen) and the images of later execs included\n"
	      "  FETCHARG [NAME=]FETCH[:TYPE]\n"
	      "      FETCH  %REG  @ADDR  @+OFFSET  $stackN  $stack  $argN  $retval  $comm\n"
	      "             +|-OFFS(FETCH)  (a dereference)\n"
	      "      TYPE   u8..u64 s8..s64 x8..x64 string ustring b<WIDTH>@<OFFSET>/<SIZE>\n"
	      "\n"
	      "options:\n"
	      "  -e, --event SPEC    a probe (repeatable)\n"
	      "  -f, --file FILE     specs from FILE, one a line; '#' starts a comment\n"
	      "  -p, --pid PID       trace a running process (repeatable)\n"
	      "  -o, --output FILE   write the trace (-c: the counts) to FILE instead of stdout\n"
	      "      --format F      text (default: as the kernel's trace file) or json (a line\n"
	      "                      per hit; schema in uprobe(1))\n"
	      "  -c, --count         print only the hits per probe at the end\n"
	      "      --no-follow     do not trace children (by default fork/vfork children are\n"
	      "                      traced with the same probes)\n"
	      "  -v, --verbose       say where each probe was armed, and which probes stayed on\n"
	      "                      the trap path and why\n"
	      "      --filter EXPR   only hits where EXPR holds: NAME OP NUMBER [&& ...], NAME\n"
	      "                      a fetch argument, OP one of == != < <= > >= & (bit test);\n"
	      "                      applied in-process on the fast path\n"
	      "      --no-fast       every probe through int3 stops: by default a probe is,\n"
	      "                      where safe, a jmp to an in-process trampoline that counts\n"
	      "                      or records the hit without stopping the thread (-v says\n"
	      "                      which probes stayed on the trap path and why)\n"
	      "      --ring-size KB  the in-process record ring per process (default 4096);\n"
	      "                      when it is full records are dropped and counted\n"
	      "  -b, --backend B     ptrace (default: this process traces, no privilege beyond\n"
	      "                      ptrace rights) or kernel (the kernel's uprobe tracer through\n"
	      "                      tracefs, root only; p:/r: PATH specs; without -p or a\n"
	      "                      COMMAND it traces every process until Ctrl-C)\n"
	      "\n"
	      "examples:\n"
	      "  uprobe trace -e 'p:libc/malloc /lib/x86_64-linux-gnu/libc.so.6:malloc size=%di:u64' -- ls\n"
	      "  uprobe trace -e 'r:libc/getenv /lib/x86_64-linux-gnu/libc.so.6:getenv val=+0($retval):string' -p 1234\n"
	      "  uprobe trace -e 'up 0 0x401126 A 5' -- ./sample\n"
	      "  uprobe trace --filter 'size > 4096' -e 'p:libc/malloc /lib/x86_64-linux-gnu/libc.so.6:malloc size=%di:u64' -- ls\n",
	      out);
}

struct spec_list {
	char **v;
	unsigned n;
};

static int add_text(struct spec_list *l, const char *s)
{
	char **v = realloc(l->v, (l->n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	l->v = v;
	l->v[l->n] = strdup(s);
	if (!l->v[l->n])
		return -ENOMEM;
	l->n++;
	return 0;
}

static int add_file(struct spec_list *l, const char *path)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f) {
		cli_err("trace", "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((n = getline(&line, &cap, f)) >= 0) {
		char *s = line, *hash = strchr(line, '#'), *e;

		if (hash)
			*hash = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		e = s + strlen(s);
		while (e > s && (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			*--e = '\0';
		if (*s && add_text(l, s)) {
			cli_err("trace", "%s: %s", path, strerror(ENOMEM));
			free(line);
			if (f != stdin)
				fclose(f);
			return -ENOMEM;
		}
	}
	free(line);
	if (f != stdin)
		fclose(f);
	return 0;
}

static void log_msg(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "uprobe trace: %s\n", msg);
}

/* --backend kernel: the same specs through tracefs, the same output. */
static int run_kernel(struct spec_list *specs, pid_t pid, char **cmd, bool json, bool count,
		      FILE *out)
{
	struct up_kb_opts ko = { .json = json, .out = count ? NULL : out, .log = log_msg };
	struct up_kb *kb = NULL;
	int go[2] = { -1, -1 }, status = CLI_OK, rc, st = -1;
	pid_t child = 0;

	for (unsigned i = 0; i < specs->n; i++) {
		struct up_spec spec;
		struct up_spec_err se;
		char err[1024];

		if (up_spec_parse(specs->v[i], &spec, &se)) {
			up_spec_err_format(specs->v[i], &se, err, sizeof(err));
			fprintf(stderr, "uprobe trace: bad probe spec:\n%s\n", err);
			return CLI_USAGE;
		}
		up_spec_free(&spec);
	}
	if (cmd) {
		/* the command waits for the filter on its pid before it execs */
		if (pipe2(go, O_CLOEXEC) < 0)
			return CLI_FAIL;
		child = fork();
		if (child < 0)
			return CLI_FAIL;
		if (child == 0) {
			char c;

			close(go[1]);
			if (read(go[0], &c, 1) != 1)
				_exit(126);
			execvp(cmd[0], cmd);
			fprintf(stderr, "uprobe trace: cannot run %s: %s\n", cmd[0], strerror(errno));
			_exit(errno == ENOENT ? 127 : 126);
		}
		close(go[0]);
		pid = child;
	}
	ko.pid_filter = pid;
	rc = up_kb_open(&ko, &kb);
	if (!rc) {
		for (unsigned i = 0; i < specs->n && !rc; i++) {
			struct up_spec spec;
			struct up_spec_err se;

			up_spec_parse(specs->v[i], &spec, &se);
			rc = up_kb_add(kb, &spec);
			if (rc == -EEXIST)
				cli_err("trace", "'%s': the kernel has an event %s/%s already (another "
					"tool's, or left by a killed run): remove it with "
					"echo '-:%s/%s' >> /sys/kernel/tracing/uprobe_events",
					specs->v[i], spec.group, spec.event, spec.group, spec.event);
			else if (rc)
				cli_err("trace", "'%s': the kernel backend cannot take it: %s",
					specs->v[i], strerror(-rc));
			up_spec_free(&spec);
		}
	}
	if (!rc)
		rc = up_kb_enable(kb);
	if (rc) {
		status = rc == -EINVAL ? CLI_USAGE : CLI_FAIL;
		if (child)
			kill(child, SIGKILL);
	} else {
		if (child && write(go[1], "g", 1) != 1)
			status = CLI_FAIL;
		up_kb_run(kb, &stop_sig, pid);
		if (count)
			up_kb_counts(kb, out);
	}
	if (go[1] >= 0)
		close(go[1]);
	up_kb_close(kb);
	if (child) {
		while (waitpid(child, &st, 0) < 0 && errno == EINTR)
			;
		if (!status)
			status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
	return status;
}

static int run_trace(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "event", required_argument, NULL, 'e' },  { "file", required_argument, NULL, 'f' },
		{ "pid", required_argument, NULL, 'p' },    { "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'F' }, { "count", no_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },	    { "no-follow", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },	    { "backend", required_argument, NULL, 'b' },
		{ "no-fast", no_argument, NULL, 'X' },	    { "filter", required_argument, NULL, 'L' },
		{ "ring-size", required_argument, NULL, 'R' }, { NULL, 0, NULL, 0 },
	};
	FILE *outf = NULL, *out = stdout; /* -o FILE, or stdout: the trace, or -c's table */
	struct up_trace_opts opts = { .out = stdout, .follow = true, .header = false,
				      .log = log_msg };
	/* static: reachable until exit, also on the early usage-error returns */
	static struct spec_list specs;
	pid_t pids[64];
	unsigned npids = 0;
	const char *outpath = NULL;
	bool count = false, kernel = false;
	const char *filter = NULL;
	struct up_trace *tr = NULL;
	struct sigaction sa = { .sa_handler = on_stop_signal };
	int c, rc, status = CLI_OK;
	pid_t child = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+e:f:p:o:b:cvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			if (add_text(&specs, optarg)) {
				cli_err("trace", "%s", strerror(ENOMEM));
				return CLI_FAIL;
			}
			break;
		case 'f':
			if (add_file(&specs, optarg))
				return CLI_USAGE;
			break;
		case 'p': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v <= 0)
				return cli_usage_error(&cli_cmd_trace, "'%s' is not a process id", optarg);
			if (npids == sizeof(pids) / sizeof(pids[0]))
				return cli_usage_error(&cli_cmd_trace, "too many -p");
			pids[npids++] = (pid_t)v;
			break;
		}
		case 'o':
			outpath = optarg;
			break;
		case 'F':
			if (!strcmp(optarg, "json"))
				opts.json = true;
			else if (strcmp(optarg, "text"))
				return cli_usage_error(&cli_cmd_trace,
						       "--format '%s': expected text or json", optarg);
			break;
		case 'c':
			count = true;
			break;
		case 'v':
			opts.verbose++;
			break;
		case 'N':
			opts.follow = false;
			break;
		case 'X':
			opts.no_fast = true;
			break;
		case 'L':
			filter = optarg;
			break;
		case 'R': {
			char *end;
			unsigned long kb = strtoul(optarg, &end, 10);

			if (*end || kb < 64 || kb > (1ul << 20))
				return cli_usage_error(&cli_cmd_trace,
						       "--ring-size '%s': expected KiB, 64 to 1048576",
						       optarg);
			opts.ring_bytes = kb * 1024;
			break;
		}
		case 'b':
			if (!strcmp(optarg, "kernel"))
				kernel = true;
			else if (strcmp(optarg, "ptrace"))
				return cli_usage_error(&cli_cmd_trace,
						       "--backend '%s': expected ptrace or kernel", optarg);
			break;
		case 'h':
			trace_usage(stdout);
			return CLI_OK;
		default:
			return cli_usage_error(&cli_cmd_trace, "unknown option");
		}
	}
	if (!specs.n)
		return cli_usage_error(&cli_cmd_trace, "no probe: give -e SPEC or -f FILE");
	if (!npids && optind >= argc && !kernel)
		return cli_usage_error(&cli_cmd_trace, "nothing to trace: give -p PID or -- COMMAND");
	if (kernel && npids > 1)
		return cli_usage_error(&cli_cmd_trace, "--backend kernel takes at most one -p");
	if (npids && optind < argc)
		return cli_usage_error(&cli_cmd_trace, "-p and a COMMAND exclude each other");

	if (outpath) {
		out = outf = fopen(outpath, "we");
		if (!outf) {
			cli_err("trace", "%s: %s", outpath, strerror(errno));
			return CLI_USAGE;
		}
	}
	/* -c: no line per hit; the table at the end goes where the lines would have */
	opts.out = count ? NULL : out;
	/* a closed output pipe must not kill us with probes still in the target */
	signal(SIGPIPE, SIG_IGN);
	if (kernel) {
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		status = run_kernel(&specs, npids ? pids[0] : 0, optind < argc ? argv + optind : NULL,
				    opts.json, count, out);
		goto out;
	}
	/* a reader at the other end of a pipe (| grep) or a terminal sees each hit at once;
	   a regular file is written in blocks */
	if (opts.out) {
		struct stat st;

		if (fstat(fileno(opts.out), &st) == 0 && !S_ISREG(st.st_mode))
			/* full buffering: the session flushes after each trap-path hit and
			   after each batch of fast-path records */
			setvbuf(opts.out, NULL, _IOFBF, 1 << 16), opts.flush = true;
	}
	rc = up_trace_new(&opts, &tr);
	if (rc) {
		cli_err("trace", "%s", strerror(-rc));
		return CLI_FAIL;
	}
	if (filter) {
		char err[1024];

		if (up_trace_set_filter(tr, filter, err, sizeof(err))) {
			fprintf(stderr, "uprobe trace: bad filter:\n%s", err);
			status = CLI_USAGE;
			goto out;
		}
	}
	/* every spec is checked before anything is attached */
	for (unsigned i = 0; i < specs.n; i++) {
		char err[1024];

		err[0] = 0;
		rc = up_trace_add(tr, specs.v[i], err, sizeof(err));
		if (rc == -ENOMEM || (rc && !err[0])) {
			cli_err("trace", "'%s': %s", specs.v[i], strerror(-rc));
			status = CLI_FAIL;
		} else if (rc) {
			fprintf(stderr, "uprobe trace: bad probe spec:\n%s%s", err,
				err[0] && err[strlen(err) - 1] == '\n' ? "" : "\n");
			status = CLI_USAGE;
		}
	}
	if (status)
		goto out;

	for (unsigned i = 0; i < npids; i++) {
		rc = up_trace_attach(tr, pids[i]);
		if (rc) {
			cli_err("trace", "cannot trace process %d: %s%s", (int)pids[i], strerror(-rc),
				rc == -EBUSY ? " (another tracer, a debugger, is attached)" : "");
			status = CLI_FAIL;
			goto out;
		}
	}
	if (optind < argc) {
		rc = up_trace_spawn(tr, argv + optind, &child);
		if (rc) {
			cli_err("trace", "cannot run %s: %s", argv[optind], strerror(-rc));
			status = rc == -ENOENT ? 127 : 126;
			goto out;
		}
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	rc = up_trace_start(tr);
	if (rc) {
		cli_err("trace", "not all probes could be armed; nothing traced");
		status = CLI_FAIL;
		if (child)
			kill(child, SIGKILL);
		goto out;
	}
	rc = up_trace_run(tr, &stop_sig);
	if (rc == -EPIPE) {
		/* the reader went away (| head): stop tracing, leave the command running */
		status = 128 + SIGPIPE;
		if (!stop_sig)
			stop_sig = SIGPIPE;
	} else if (rc && rc != -EINTR) {
		cli_err("trace", "tracing stopped: %s", strerror(-rc));
	}
out:
	if (count && tr && !status)
		up_trace_print_counts(tr, out);
	if (tr) {
		uint64_t lost = up_trace_lost(tr);

		if (lost && opts.json && opts.out)
			fprintf(opts.out, "{\"records_lost\":%" PRIu64 "}\n", lost);
		if (lost)
			cli_err("trace", "%" PRIu64 " records lost: the in-process ring was full "
				"(a bigger --ring-size, or fewer probes, keeps them)", lost);
	}
	if (tr && child) {
		int st = up_trace_status(tr);

		up_trace_free(tr); /* detaches: the command runs on unprobed */
		tr = NULL;
		if (st < 0 && !status && stop_sig != SIGTERM && stop_sig != SIGPIPE) {
			/* Ctrl-C reached the command too: wait for what it does with it */
			while (waitpid(child, &st, 0) < 0 && errno == EINTR)
				;
		}
		if (!status && st >= 0)
			status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		else if (!status && stop_sig)
			status = 128 + stop_sig;
	}
	up_trace_free(tr);
	if (outf)
		fclose(outf);
	else
		fflush(stdout);
	for (unsigned i = 0; i < specs.n; i++)
		free(specs.v[i]);
	free(specs.v);
	specs.v = NULL;
	specs.n = 0;
	return status;
}

const struct cli_cmd cli_cmd_trace = {
	.name = "trace",
	.run = run_trace,
	.synopsis = "trace [-e SPEC]... [-f FILE] [-o FILE] [--format text|json] [-c] [-v] "
		    "(-p PID | -- COMMAND [ARGS...])",
	.summary = "probe instructions of a process or command and print each hit",
	.usage = trace_usage,
};
