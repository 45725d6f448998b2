// SPDX-License-Identifier: MIT
/*
 * uprobe trace: probe specs in, trace lines out (src/trace/session.c does the work).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "trace/flame.h"
#include "trace/kernel.h"
#include "trace/expand.h"
#include "trace/session.h"
#include "trace/spec.h"


/* "2", "0.5", "2s", "500ms": an -i period in ms; 0 when malformed. */
static unsigned long parse_period(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v <= 0)
		return 0;
	if (!strcmp(end, "ms"))
		v /= 1000;
	else if (*end && strcmp(end, "s"))
		return 0;
	if (v < 0.01 || v > 86400)
		return 0;
	return (unsigned long)(v * 1000 + 0.5);
}

static void trace_usage(FILE *out)
{
	fputs("usage: uprobe trace [-e SPEC]... [-t TRIGGER]... [-f FILE] [-o FILE] [-i PERIOD]\n"
	      "                    [--format text|json|bars|folded|raw] [--flamegraph FILE.svg]\n"
	      "                    [-c] [-v] [--no-follow] [--strict]\n"
	      "                    [--listen HOST:PORT [--max-series N]]\n"
	      "                    (-p PID... | -- COMMAND [ARGS...])\n"
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
	      "             $argN in an r: event: the argument the entry had ($arg1..$arg6)\n"
	      "             $ustack: the user stack, named frames under the line\n"
	      "      TYPE   u8..u64 s8..s64 x8..x64 string ustring b<WIDTH>@<OFFSET>/<SIZE>\n"
	      "SPEC, forms made into p: specs (the same for --backend kernel):\n"
	      "  u[:[GRP/]EVENT] PATH:[PROVIDER:]NAME [FETCHARG...]   a USDT probe; $argN is\n"
	      "      its Nth operand; its semaphore is set while probed (uprobe list --usdt)\n"
	      "  p|r[:GRP/*] PATH:GLOB [FETCHARG...]   one event per matching function\n"
	      "  p[:[GRP/]EVENT] PATH:FUNC|PATH:SRC.c:LINE|PATH:FUNC:N [VAR...]  with debug\n"
	      "      info: VAR = [NAME=]variable[->field|.field]...[:TYPE] (uprobe list --vars)\n"
	      "TRIGGER, the kernel's hist trigger on an event given with -e (aggregated in the\n"
	      "process on the fast path, nothing lost; printed at the end as the kernel's\n"
	      "hist file, and every -i PERIOD):\n"
	      "  [GRP/]EVENT:hist:keys=KEY[,KEY...][:vals=VAL[,VAL...]][:sort=SORT[,SORT]]\n"
	      "                 [:size=N] [if FILTER]\n"
	      "  KEY    FIELD[.log2|.log2floor|.buckets=N|.hex|.sym|.sym-offset], stacktrace\n"
	      "         (the user stack), common_pid, $duration (r: events: ns from entry to\n"
	      "         return); .log2floor is bpftrace's hist buckets, [2^k, 2^(k+1))\n"
	      "  VAL    hitcount, FIELD (a sum), FIELD.min, FIELD.max, FIELD.avg\n"
	      "  SORT   hitcount or a field, .descending or .ascending (default hitcount)\n"
	      "  FIELD  a fetch argument's NAME, or $duration\n"
	      "\n"
	      "options:\n"
	      "  -e, --event SPEC    a probe (repeatable)\n"
	      "  -t, --trigger TRIG  aggregate an event's hits (repeatable; one an event): its\n"
	      "                      hits are counted into the table, not printed\n"
	      "  -i, --interval T    print the tables every T too (2, 0.5s, 500ms)\n"
	      "  -f, --file FILE     specs from FILE, one a line; '#' starts a comment\n"
	      "  -p, --pid PID       trace a running process (repeatable)\n"
	      "  -o, --output FILE   write the trace (-c: the counts) to FILE instead of stdout\n"
	      "      --format F      text (default: as the kernel's trace file and hist file),\n"
	      "                      json (a line per hit, an object per table; schema in\n"
	      "                      uprobe(1)), bars (tables drawn as bpftrace draws them)\n"
	      "                      or raw (every record as the process wrote it, binary,\n"
	      "                      to the -o FILE, nothing lost to formatting: 'uprobe\n"
	      "                      report FILE' prints it later; the ring defaults to\n"
	      "                      128 MiB), or folded (every event's stacks counted, one\n"
	      "                      line a stack at the end: 'main;c1;leaf 1000', what\n"
	      "                      flamegraph.pl, inferno and speedscope read; an event\n"
	      "                      without -t counts by 'stacktrace')\n"
	      "      --flamegraph FILE.svg  the same stacks drawn as an interactive flame\n"
	      "                      graph (click a frame to zoom; no other tool needed)\n"
	      "  -c, --count         print only the hits per probe at the end (to the -o FILE;\n"
	      "                      without one to stderr when a COMMAND is run, whose\n"
	      "                      stdout it is: never among its output; -o /dev/stdout\n"
	      "                      puts them there)\n"
	      "      --no-follow     do not trace children (by default fork/vfork children are\n"
	      "                      traced with the same probes)\n"
	      "  -v, --verbose       say where each probe was armed, and which probes stayed on\n"
	      "                      the trap path and why\n"
	      "      --strict        trace nothing unless every probe can be armed (by default\n"
	      "                      each probe that cannot is listed with its reason, with a\n"
	      "                      line 'N of M probes armed', and the others trace; only\n"
	      "                      when none can be is it an error: status 2, nothing left\n"
	      "                      in the process); judged once the processes are armed at\n"
	      "                      the start: a library mapped later is armed when it is\n"
	      "                      and its failures listed then\n"
	      "      --filter EXPR   only hits where EXPR holds, the kernel's event filter:\n"
	      "                      NAME OP VALUE joined by && || ! ( ); NAME a fetch\n"
	      "                      argument, comm (the thread's name) or, on r: events,\n"
	      "                      $duration (ns from the entry); numbers take\n"
	      "                      == != < <= > >= & (bit test), strings \"...\" take\n"
	      "                      == != ~ (a glob: * ? [...]); a conjunction of numbers\n"
	      "                      is applied in-process on the fast path, the rest by\n"
	      "                      the tracer (-v says where)\n"
	      "      --no-fast       every probe through int3 stops: by default a probe is,\n"
	      "                      where safe, a jmp to an in-process trampoline that counts\n"
	      "                      or records the hit without stopping the thread (-v says\n"
	      "                      which probes stayed on the trap path and why)\n"
	      "      --fast-after N  a process reached by following a fork or exec takes its\n"
	      "                      first N hits through int3 stops, then its probes go on\n"
	      "                      the fast path (default 128: a short-lived child, a\n"
	      "                      shell's /bin/true, never pays for the fast path's\n"
	      "                      set-up, ~130 trap hits' worth); 0: at once\n"
	      "      --ring-size KB  each in-process record ring (one a thread, for up to 16\n"
	      "                      threads a process, then one they share; default 4096,\n"
	      "                      131072 with --format raw; memory once a thread is\n"
	      "                      about to write it: the first 8 MiB made present\n"
	      "                      ahead, 1 MiB at a new thread, for at most one\n"
	      "                      thread more than record); what happens when one is\n"
	      "                      full: --when-full\n"
	      "      --spool-size SIZE  records copied out of the rings wait here to be\n"
	      "                      formatted (text, json): the first 64 MiB in memory, the\n"
	      "                      rest in a temporary file in $TMPDIR or /tmp (SIZE in\n"
	      "                      MiB, or with K, M, G; default 256M; 0: none, records\n"
	      "                      are formatted straight from the rings)\n"
	      "      --when-full P   when a ring is full (the spool is, or the copy lags):\n"
	      "                      block (default: the thread waits for room -- slower,\n"
	      "                      nothing lost; signals reach it, and it waits no more\n"
	      "                      once the tracer shows no life for 1 s) or drop (the\n"
	      "                      record is dropped, counted and reported per probe)\n"
	      "      --listen HOST:PORT  serve the probes' hit counts and the --trigger tables\n"
	      "                      at http://HOST:PORT/metrics for Prometheus while tracing\n"
	      "                      (':9464' is 127.0.0.1:9464; 0.0.0.0:9464 every address;\n"
	      "                      port 0 any free one, said on stderr); log2 and linear\n"
	      "                      keys are histograms, other keys labels; see uprobe(1)\n"
	      "      --max-series N  at most N keys of a table as series (default 1000, the\n"
	      "                      most hit; the others' hits in *_overflow_hits_total)\n"
	      "  -b, --backend B     ptrace (default: this process traces, no privilege beyond\n"
	      "                      ptrace rights) or kernel (the kernel's uprobe tracer through\n"
	      "                      tracefs, root only; p:/r: PATH specs; without -p or a\n"
	      "                      COMMAND it traces every process until Ctrl-C)\n"
	      "\n"
	      "examples:\n"
	      "  uprobe trace -e 'p:libc/malloc /lib/x86_64-linux-gnu/libc.so.6:malloc size=%di:u64' -- ls\n"
	      "  uprobe trace -e 'r:libc/getenv /lib/x86_64-linux-gnu/libc.so.6:getenv val=+0($retval):string' -p 1234\n"
	      "  uprobe trace -e 'up 0 0x401126 A 5' -- ./sample\n"
	      "  uprobe trace --filter 'size > 4096' -e 'p:libc/malloc /lib/x86_64-linux-gnu/libc.so.6:malloc size=%di:u64' -- ls\n"
	      "  uprobe trace -e 'p:libc/malloc /lib/x86_64-linux-gnu/libc.so.6:malloc size=%di:u64' \\\n"
	      "               -t 'libc/malloc:hist:keys=size.log2' -- ls -R /usr\n"
	      "  uprobe trace --format raw -o malloc.raw \\\n"
	      "               -e 'p:libc/malloc /lib/x86_64-linux-gnu/libc.so.6:malloc size=%di:u64' -- ls\n"
	      "  uprobe report malloc.raw\n"
	      "  uprobe trace --flamegraph malloc.svg \\\n"
	      "               -e 'p:libc/malloc /lib/x86_64-linux-gnu/libc.so.6:malloc' -- ls -R /usr\n"
	      "  uprobe trace -e 'r:libc/getaddrinfo /lib/x86_64-linux-gnu/libc.so.6:getaddrinfo' \\\n"
	      "               -t 'getaddrinfo:hist:keys=$duration.log2' --format bars -p 1234\n"
	      "  uprobe trace -e 'r:libc/getaddrinfo /lib/x86_64-linux-gnu/libc.so.6:getaddrinfo' \\\n"
	      "               -t 'getaddrinfo:hist:keys=$duration.log2' --listen :9464 -p 1234\n",
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

static int add_expanded(void *ctx, const char *spec)
{
	return add_text(ctx, spec);
}

/*
 * u: (USDT) specs and wildcards become the p:/r: specs they stand for (trace/expand.h),
 * so both backends get the same probes.  Returns 0 or a CLI exit status.
 */
static int expand_specs(struct spec_list *l, int verbose)
{
	struct spec_list out = { 0 };
	int status = 0;

	for (unsigned i = 0; i < l->n; i++) {
		struct up_expand_stats st;
		struct up_spec_err se;
		char err[1024];
		int rc = up_expand(l->v[i], add_expanded, &out, &st, &se);

		if (rc == -ENOMEM) {
			cli_err("trace", "'%s': %s", l->v[i], strerror(-rc));
			status = CLI_FAIL;
		} else if (rc) {
			up_spec_err_format(l->v[i], &se, err, sizeof(err));
			fprintf(stderr, "uprobe trace: bad probe spec:\n%s", err);
			status = CLI_USAGE;
		} else if (verbose > 0 && (st.matched || st.specs > 1)) {
			fprintf(stderr, "uprobe trace: '%s': %u probe%s", l->v[i], st.specs,
				st.specs == 1 ? "" : "s");
			if (st.matched)
				fprintf(stderr, " (%u functions matched; left out: %u aliases, %u "
						"IFUNC resolvers)", st.matched, st.aliases, st.ifuncs);
			fputc('\n', stderr);
		}
	}
	for (unsigned i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	*l = out;
	return status;
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

/* The tables: at the end, and at each -i period (a time line first, as bpftrace's). */
static void print_tables(struct up_trace *tr, enum up_hist_style style, FILE *out, bool period)
{
	if (period && style != UP_HIST_JSON) {
		time_t now = time(NULL);
		struct tm tm;
		char when[32];

		localtime_r(&now, &tm);
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
		fprintf(out, "%s\n", when);
	}
	up_trace_print_hists(tr, style, out);
	if (period && style != UP_HIST_JSON)
		fputc('\n', out);
	fflush(out);
}

static int flame_add(void *arg, const char *frames, uint64_t hits)
{
	return up_flame_add(arg, frames, hits);
}

/* The tables' stacks merged: folded lines to out (when not NULL), an SVG flame graph to
   svgpath (when not NULL).  0, or 1 with the reason said. */
static int print_flames(struct up_trace *tr, FILE *out, const char *svgpath)
{
	struct up_flame *fl = up_flame_new();
	char title[512] = "uprobe:";
	size_t tl = strlen(title);
	int rc = fl ? 0 : -ENOMEM;

	for (unsigned i = 0; i < up_trace_nspecs(tr) && !rc; i++) {
		int r = up_trace_hist_stacks(tr, i, flame_add, fl);

		if (r == -ENOENT)
			continue;
		rc = r;
		if (!rc && tl < sizeof(title) - 2)
			tl += (size_t)snprintf(title + tl, sizeof(title) - tl, " %s",
					       up_trace_spec_label(tr, i));
	}
	if (!rc && out) {
		rc = up_flame_folded(fl, out);
		fflush(out);
	}
	if (!rc && svgpath) {
		FILE *svg = fopen(svgpath, "we");

		if (!svg) {
			cli_err("trace", "--flamegraph %s: %s", svgpath, strerror(errno));
			up_flame_free(fl);
			return 1;
		}
		rc = up_flame_svg(fl, title, svg);
		if (fclose(svg) && !rc)
			rc = -EIO;
	}
	up_flame_free(fl);
	if (rc)
		cli_err("trace", "stacks: %s", strerror(-rc));
	return rc ? 1 : 0;
}

static void log_msg(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "uprobe trace: %s\n", msg);
}

/*
 * The file execvp would run for name: searched in PATH by the parent, so that the
 * child, once its pid is traced, calls nothing in libc before its exec (a probe on
 * getenv or read would see uprobe's own calls).  0, or ENOENT / EACCES.
 */
static int find_command(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH"), *p;
	int err = ENOENT;

	if (strchr(name, '/')) {
		snprintf(buf, len, "%s", name);
		return 0;
	}
	if (!path)
		path = "/bin:/usr/bin"; /* glibc's confstr(_CS_PATH), as execvp */
	for (p = path;; p++) {
		const char *end = strchrnul(p, ':');
		struct stat st;

		if ((size_t)snprintf(buf, len, "%.*s%s%s", (int)(end - p), p, end == p ? "" : "/",
				     name) < len &&
		    !stat(buf, &st) && S_ISREG(st.st_mode)) {
			if (!access(buf, X_OK))
				return 0;
			err = EACCES;
		}
		if (!*end)
			break;
		p = end;
	}
	return err;
}

/* A system call with no libc function on the way: what the child runs once traced. */
static long bare_syscall3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
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
		char path[PATH_MAX];
		int err = find_command(cmd[0], path, sizeof(path));

		if (err) {
			cli_err("trace", "cannot run %s: %s", cmd[0], strerror(err));
			return err == ENOENT ? 127 : 126;
		}
		/* the command waits for the filter on its pid before it execs, and from
		   then on makes no call into libc of uprobe's: the events are its own */
		if (pipe2(go, O_CLOEXEC) < 0)
			return CLI_FAIL;
		child = fork();
		if (child < 0)
			return CLI_FAIL;
		if (child == 0) {
			char c;
			long r;

			close(go[1]);
			if (bare_syscall3(SYS_read, go[0], (long)&c, 1) != 1)
				_exit(126);
			r = bare_syscall3(SYS_execve, (long)path, (long)cmd, (long)environ);
			fprintf(stderr, "uprobe trace: cannot run %s: %s\n", cmd[0], strerror((int)-r));
			_exit(r == -ENOENT ? 127 : 126);
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
		up_kb_run(kb, &cli_stop_sig, pid);
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

/* One line: how many of the probes asked are armed; and why nothing is traced, if so. */
static void report_arming(struct up_trace *tr, const struct up_trace_opts *opts, int rc)
{
	struct up_trace_arming a;
	char waiting[64] = "";

	up_trace_arming(tr, &a);
	if (a.failed || opts->verbose > 0) {
		if (a.pending)
			snprintf(waiting, sizeof(waiting), ", %u waiting for their file", a.pending);
		cli_err("trace", "%u of %u probes armed%s%s", a.armed, a.asked, waiting,
			!a.failed	  ? ""
			: a.failed == 1 ? "; 1 could not be (above)"
					: "; the others could not be (above)");
	}
	if (rc == -ECANCELED)
		cli_err("trace", "%s; nothing traced",
			opts->strict ? "--strict: not every probe could be armed"
				     : "no probe could be armed");
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
		{ "ring-size", required_argument, NULL, 'R' }, { "trigger", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' }, { "strict", no_argument, NULL, 'S' },
		{ "flamegraph", required_argument, NULL, 'G' },
		{ "spool-size", required_argument, NULL, 'P' },
		{ "when-full", required_argument, NULL, 'W' },
		{ "listen", required_argument, NULL, 'M' }, { "max-series", required_argument, NULL, 'Q' },
		{ "fast-after", required_argument, NULL, 'A' },
		{ NULL, 0, NULL, 0 },
	};
	FILE *outf = NULL, *out = stdout; /* -o FILE, or stdout: the trace, or -c's table */
	struct up_trace_opts opts = { .out = stdout, .follow = true, .header = false,
				      .log = log_msg };
	/* static: reachable until exit, also on the early usage-error returns */
	static struct spec_list specs, triggers;
	enum up_hist_style style = UP_HIST_TEXT;
	unsigned long period = 0;
	bool bars = false, started = false, folded = false;
	const char *flamepath = NULL; /* --flamegraph FILE.svg */
	pid_t pids[64];
	unsigned npids = 0;
	const char *outpath = NULL;
	bool count = false, kernel = false;
	const char *filter = NULL;
	struct up_trace *tr = NULL;
	int c, rc, status = CLI_OK;
	pid_t child = 0;
	const char *listen_at = NULL;
	unsigned max_series = 1000;
	struct cli_listen *srv = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+e:f:p:o:b:t:i:cvh", longopts, NULL)) != -1) {
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
		case 't':
			if (add_text(&triggers, optarg)) {
				cli_err("trace", "%s", strerror(ENOMEM));
				return CLI_FAIL;
			}
			break;
		case 'i':
			period = parse_period(optarg);
			if (!period)
				return cli_usage_error(&cli_cmd_trace,
						       "--interval '%s': expected a period from 0.01 "
						       "to 86400 seconds (2, 0.5s, 500ms)", optarg);
			break;
		case 'F':
			if (!strcmp(optarg, "json"))
				opts.json = true, style = UP_HIST_JSON;
			else if (!strcmp(optarg, "bars"))
				bars = true, style = UP_HIST_BARS;
			else if (!strcmp(optarg, "raw"))
				opts.raw = true;
			else if (!strcmp(optarg, "folded"))
				folded = true;
			else if (strcmp(optarg, "text"))
				return cli_usage_error(&cli_cmd_trace,
						       "--format '%s': expected text, json, bars, folded "
						       "or raw", optarg);
			break;
		case 'G':
			flamepath = optarg;
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
		case 'S':
			opts.strict = true;
			break;
		case 'L':
			filter = optarg;
			break;
		case 'A': {
			char *end;
			unsigned long n = strtoul(optarg, &end, 10);

			if (!*optarg || *end || n > 1000000000ul)
				return cli_usage_error(&cli_cmd_trace,
						       "--fast-after '%s': expected a number of hits, "
						       "0 to 1000000000",
						       optarg);
			opts.fast_after = n ? (int)n : -1;
			break;
		}
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
		case 'P': {
			char *end;
			unsigned long long n = strtoull(optarg, &end, 10), unit = 1ull << 20;

			if (*end == 'K' || *end == 'k')
				unit = 1ull << 10, end++;
			else if (*end == 'M' || *end == 'm')
				end++;
			else if (*end == 'G' || *end == 'g')
				unit = 1ull << 30, end++;
			if (end == optarg || *end || n > (1ull << 50) / unit)
				return cli_usage_error(&cli_cmd_trace, "--spool-size '%s': expected a "
						       "size (MiB, or with K, M, G)", optarg);
			opts.spool_bytes = (size_t)(n * unit);
			opts.no_spool = !n;
			break;
		}
		case 'W':
			if (!strcmp(optarg, "drop"))
				opts.when_full_drop = true;
			else if (!strcmp(optarg, "block"))
				opts.when_full_drop = false;
			else
				return cli_usage_error(&cli_cmd_trace,
						       "--when-full '%s': expected block or drop", optarg);
			break;
		case 'b':
			if (!strcmp(optarg, "kernel"))
				kernel = true;
			else if (strcmp(optarg, "ptrace"))
				return cli_usage_error(&cli_cmd_trace,
						       "--backend '%s': expected ptrace or kernel", optarg);
			break;
		case 'M':
			listen_at = optarg;
			opts.metrics = true;
			break;
		case 'Q': {
			char *end;
			unsigned long n = strtoul(optarg, &end, 10);

			if (*end || !n || n > 1000000)
				return cli_usage_error(&cli_cmd_trace,
						       "--max-series '%s': expected 1 to 1000000", optarg);
			max_series = (unsigned)n;
			break;
		}
		case 'h':
			trace_usage(stdout);
			return CLI_OK;
		default:
			return cli_usage_error(&cli_cmd_trace, "unknown option");
		}
	}
	if (!specs.n)
		return cli_usage_error(&cli_cmd_trace, "no probe: give -e SPEC or -f FILE");
	status = expand_specs(&specs, opts.verbose);
	if (status)
		goto out;
	if (!npids && optind >= argc && !kernel)
		return cli_usage_error(&cli_cmd_trace, "nothing to trace: give -p PID or -- COMMAND");
	if (kernel && npids > 1)
		return cli_usage_error(&cli_cmd_trace, "--backend kernel takes at most one -p");
	if (npids && optind < argc)
		return cli_usage_error(&cli_cmd_trace, "-p and a COMMAND exclude each other");
	if (kernel && triggers.n)
		return cli_usage_error(&cli_cmd_trace, "--trigger: the kernel backend has no hist "
				       "triggers on this machine's kernel; use the ptrace backend");
	if ((folded || flamepath) && (opts.raw || count || kernel || bars || period || opts.json))
		return cli_usage_error(&cli_cmd_trace, "%s counts stacks in tables printed at the "
				       "end: not with %s", folded ? "--format folded" : "--flamegraph",
				       opts.raw ? "--format raw" : count ? "-c" : kernel ? "--backend kernel"
				       : period ? "--interval" : "another --format");
	if ((bars || period) && !triggers.n)
		return cli_usage_error(&cli_cmd_trace, "%s is for --trigger tables",
				       bars ? "--format bars" : "--interval");
	if (count && triggers.n)
		return cli_usage_error(&cli_cmd_trace, "-c and --trigger exclude each other "
				       "(a table counts its hits)");
	if (listen_at && kernel)
		return cli_usage_error(&cli_cmd_trace, "--listen serves the ptrace backend's tables: "
				       "not with --backend kernel");
	if (opts.raw && (count || triggers.n || kernel))
		return cli_usage_error(&cli_cmd_trace, "--format raw records every event of the "
				       "ptrace backend: not with %s",
				       count ? "-c" : kernel ? "--backend kernel" : "--trigger");
	if (opts.raw && !outpath)
		return cli_usage_error(&cli_cmd_trace, "--format raw writes binary records: give "
				       "-o FILE, then 'uprobe report FILE' (standard output is the "
				       "command's too)");
	/* raw: a hot thread writes a record in ~16-30 ns, faster than this machine's page
	   cache takes them (~0.8 GB/s into a new file); a ring of 128 MiB holds a burst of
	   1,400,000 six-argument records while the tracer copies them out */
	if (opts.raw && !opts.ring_bytes)
		opts.ring_bytes = 128u << 20;

	if (outpath) {
		out = cli_open_output("trace", outpath);
		if (!out)
			return CLI_USAGE;
		if (out != stdout)
			outf = out;
	}
	/* -c: no line per hit; the table at the end goes to the -o FILE, else to stderr
	   when a command is launched (stdout is the command's too: its output and the
	   counts never mix, as perf stat and strace -c do), else to stdout */
	opts.out = count ? NULL : out;
	if (count && !outf && optind < argc)
		out = stderr;
	/* a closed output pipe must not kill us with probes still in the target */
	signal(SIGPIPE, SIG_IGN);
	if (kernel) {
		cli_catch_stops(false);
		status = run_kernel(&specs, npids ? pids[0] : 0, optind < argc ? argv + optind : NULL,
				    opts.json, count, out);
		goto out;
	}
	/* a reader at the other end of a pipe (| grep) or a terminal sees each hit at once;
	   a regular file is written in blocks */
	if (opts.raw)
		setvbuf(opts.out, NULL, _IOFBF, 1 << 20); /* spans of records: big writes */
	else if (opts.out) {
		struct stat st;

		if (fstat(fileno(opts.out), &st) == 0 && !S_ISREG(st.st_mode))
			/* full buffering: the session flushes after each trap-path hit and
			   after each batch of fast-path records */
			setvbuf(opts.out, NULL, _IOFBF, 1 << 16), opts.flush = true;
	}
	if (listen_at) {
		struct sigaction wa = { .sa_handler = cli_on_scrape }; /* no SA_RESTART */
		char err[256];

		sigaction(SIGUSR2, &wa, NULL);
		rc = cli_listen_start(listen_at, max_series, true, &srv, err, sizeof(err));
		if (rc) {
			cli_err("trace", "%s", err);
			status = rc == -EINVAL ? CLI_USAGE : CLI_FAIL;
			goto out;
		}
		cli_err("trace", "metrics at http://%s/metrics", cli_listen_where(srv));
	}
	rc = up_trace_new(&opts, &tr);
	if (rc) {
		cli_err("trace", "%s", strerror(-rc));
		status = CLI_FAIL;
		goto out;
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
	for (unsigned i = 0; i < triggers.n && !status; i++) {
		char err[1024];

		rc = up_trace_add_trigger(tr, triggers.v[i], err, sizeof(err));
		if (rc == -ENOMEM) {
			cli_err("trace", "'%s': %s", triggers.v[i], strerror(-rc));
			status = CLI_FAIL;
		} else if (rc) {
			fprintf(stderr, "uprobe trace: bad trigger:\n%s%s", err,
				err[0] && err[strlen(err) - 1] == '\n' ? "" : "\n");
			status = CLI_USAGE;
		}
	}
	if (!status && (folded || flamepath)) {
		/* every event without a table of its own counts its stacks */
		char err[1024];

		rc = up_trace_add_stack_hists(tr, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "uprobe trace: %s%s", err[0] ? err : strerror(-rc),
				err[0] && err[strlen(err) - 1] == '\n' ? "" : "\n");
			status = rc == -ENOMEM ? CLI_FAIL : CLI_USAGE;
		}
	}
	if (status)
		goto out;

	/* from the first byte written into a process on, a stop detaches */
	cli_catch_stops(true);
	for (unsigned i = 0; i < npids; i++) {
		rc = up_trace_attach(tr, pids[i]);
		if (rc) {
			cli_err("trace", "cannot trace process %d: %s%s", (int)pids[i], strerror(-rc),
				rc == -EBUSY ? " (another tracer, a debugger, is attached)" : "");
			status = CLI_FAIL;
			goto out;
		}
	}
	/* $comm and comm filters see renames (prctl, pthread_setname_np), as `uprobe run`
	   does: the trap path's names and the agent's comm keys are cached per thread */
	for (unsigned i = 0, n = up_trace_uses_comm(tr) ? (npids ? npids : 1) : 0; i < n; i++)
		if (up_trace_watch_comm(tr, npids ? pids[i] : 0) == -ENOMEM) {
			cli_err("trace", "%s", strerror(ENOMEM));
			status = CLI_FAIL;
			goto out;
		}
	if (optind < argc) {
		rc = up_trace_spawn(tr, argv + optind, &child);
		if (rc) {
			cli_err("trace", "cannot run %s: %s", argv[optind], strerror(-rc));
			status = rc == -ENOENT ? 127 : 126;
			goto out;
		}
	}
	rc = up_trace_start(tr);
	cli_catch_stops(false);
	report_arming(tr, &opts, rc);
	if (rc) {
		if (rc != -ECANCELED)
			cli_err("trace", "cannot start tracing: %s", strerror(-rc));
		status = rc == -ECANCELED ? CLI_USAGE : CLI_FAIL;
		if (child)
			kill(child, SIGKILL);
		goto out;
	}
	started = true;
	if (period) {
		struct sigaction ta = { .sa_handler = cli_on_tick };
		struct itimerval it = { { (time_t)(period / 1000), (suseconds_t)(period % 1000) * 1000 },
					{ (time_t)(period / 1000), (suseconds_t)(period % 1000) * 1000 } };

		sigaction(SIGALRM, &ta, NULL);
		setitimer(ITIMER_REAL, &it, NULL);
	}
	for (;;) {
		sigset_t all, old;

		bool tick;

		rc = up_trace_run(tr, &cli_stop_sig);
		if (rc != -EINTR || (!cli_tick_due && !(srv && cli_listen_due(srv))))
			break;
		/* a period ended or a scrape waits, not a stop: a stop that comes meanwhile
		   is kept */
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, &old);
		if (cli_stop_sig == CLI_STOP_TICK)
			cli_stop_sig = 0;
		tick = cli_tick_due;
		cli_tick_due = 0;
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (cli_stop_sig)
			break;
		if (srv)
			cli_listen_serve(srv, tr);
		if (tick)
			print_tables(tr, style, out, true);
	}
	if (period) {
		struct itimerval off = { { 0, 0 }, { 0, 0 } };

		setitimer(ITIMER_REAL, &off, NULL);
		if (cli_stop_sig == CLI_STOP_TICK)
			cli_stop_sig = 0;
	}
	if (rc == -EPIPE) {
		/* the reader went away (| head): stop tracing, leave the command running */
		status = 128 + SIGPIPE;
		if (!cli_stop_sig)
			cli_stop_sig = SIGPIPE;
	} else if (rc && rc != -EINTR) {
		cli_err("trace", "tracing stopped: %s", strerror(-rc));
	}
	if (rc != -EPIPE)
		up_trace_finish(tr);
out:
	if (count && tr && !status)
		up_trace_print_counts(tr, out);
	if (tr && (folded || flamepath) && started) {
		if (print_flames(tr, folded ? out : NULL, flamepath) && !status)
			status = CLI_FAIL;
	} else if (tr && triggers.n && started) {
		print_tables(tr, style, out, false);
	}
	if (tr) {
		uint64_t lost = up_trace_lost(tr);

		/* the output's last lines say so too (raw: its end record), per probe */
		if (lost && !opts.raw && status != 128 + SIGPIPE)
			up_trace_print_lost(tr, out, opts.json);
		struct uprobe_stats ls;

		up_trace_lib_stats(tr, &ls);
		/* the closing note: what the spool took of memory and disk, when it took any
		   disk, or was asked (-v) */
		if (ls.spool_peak_file || ls.spool_dropped || (opts.verbose && ls.spool_peak_mem))
			cli_err("trace", "spool: at most %.1f MiB of records in memory, %.1f MiB in "
				"its temporary file (%.1f MiB written there)%s",
				(double)ls.spool_peak_mem / 1048576.0,
				(double)ls.spool_peak_file / 1048576.0,
				(double)ls.spool_spilled / 1048576.0,
				ls.spool_dropped ? "; a failed write of it lost records" : "");
		if (lost) {
			cli_err("trace", "%" PRIu64 " records lost: %s", lost,
				opts.when_full_drop
					? "a ring was full, --when-full=drop (--when-full=block, a "
					  "bigger --ring-size or --spool-size, or fewer probes keep them)"
					: "a ring was full while the tracer showed no life, or a "
					  "return's table was");
			for (unsigned i = 0; i < up_trace_nspecs(tr); i++) {
				uint64_t n = up_trace_spec_lost(tr, i);

				if (n)
					cli_err("trace", "  %s: %" PRIu64 " lost",
						up_trace_spec_label(tr, i), n);
			}
		}
	}
	cli_listen_stop(srv); /* before the detach: no scrape waits on a session going */
	srv = NULL;
	if (tr && child) {
		int st = up_trace_status(tr);

		up_trace_free(tr); /* detaches: the command runs on unprobed */
		tr = NULL;
		if (st < 0 && !status && cli_stop_sig != SIGTERM && cli_stop_sig != SIGPIPE) {
			pid_t r;

			/* Ctrl-C reached the command too: wait for what it does with it (or
			   the command we no longer traced ended, reaped by the library's
			   wait for any child) */
			while ((r = waitpid(child, &st, 0)) < 0 && errno == EINTR)
				;
			if (r < 0 && (errno != ECHILD || uprobe_reaped_status(child, &st)))
				st = -1;
		}
		if (!status && st >= 0)
			status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		else if (!status && cli_stop_sig)
			status = 128 + cli_stop_sig;
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
	for (unsigned i = 0; i < triggers.n; i++)
		free(triggers.v[i]);
	free(triggers.v);
	triggers.v = NULL;
	triggers.n = 0;
	return status;
}

const struct cli_cmd cli_cmd_trace = {
	.name = "trace",
	.run = run_trace,
	.synopsis = "trace [-e SPEC]... [-t TRIGGER]... [-f FILE] [-o FILE] "
		    "[--format text|json|bars|folded|raw] [--flamegraph FILE.svg] [-c] [-v] [--strict] "
		    "[--listen HOST:PORT] "
		    "(-p PID | -- COMMAND [ARGS...])",
	.summary = "probe instructions of a process or command and print each hit",
	.usage = trace_usage,
};
