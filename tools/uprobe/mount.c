// SPDX-License-Identifier: MIT
/*
 * uprobe mount: the control filesystem, tracefs's files for uprobes served by FUSE
 * (src/fs/ does the work).  Runs in the foreground until unmounted, or while the
 * command after -- runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "fs/fs.h"

static int stop_pipe[2] = { -1, -1 };

static void on_stop_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;

	if (write(stop_pipe[1], &c, 1) < 0) {
		/* full: a stop is pending already */
	}
	errno = saved;
}

/* --listen: a scrape waits; the filesystem's loop calls this between two turns */
static void on_scrape(void *arg, struct up_trace *tr)
{
	cli_listen_serve(arg, tr);
}

static void mount_usage(FILE *out)
{
	fputs("usage: uprobe mount [-p PID]... [-v] [-d] [--listen HOST:PORT] DIR [-- COMMAND [ARGS]]\n"
	      "\n"
	      "Serves in DIR the files tracefs has for uprobes, so that what is written for\n"
	      "/sys/kernel/tracing works here, without root, on every process you may ptrace\n"
	      "(the kernel's ftrace selftests for uprobe events pass against it):\n"
	      "  uprobe_events, uprobes_events, dynamic_events  write a probe spec a line\n"
	      "                   ('>' removes every probe first, '>>' adds; '-:[GRP/]EVENT'\n"
	      "                   removes one; an enabled event cannot be removed); read: the\n"
	      "                   probes.  Seed lines (up PID ADDR D|S|A ...) trace PID.\n"
	      "  error_log        why a written line was refused, with a caret under it\n"
	      "  trace            the trace (header and lines); '> trace' clears it\n"
	      "  trace_pipe       the same lines, read as they come (blocking, consuming)\n"
	      "  tracing_on       1 records, 0 does not\n"
	      "  current_tracer   nop;  README  what is here, as the kernel's mini-HOWTO\n"
	      "  uprobe_profile   hits per event\n"
	      "  set_event_pid    PIDs written here are traced (p:/r: probes act on them) and,\n"
	      "                   when there is one, only its hits are recorded\n"
	      "  events/enable, events/GRP/enable, events/GRP/EVENT/enable   1 / 0 (events\n"
	      "                   are created disabled)\n"
	      "  events/GRP/EVENT/filter   an event filter: 'size > 4096 && comm == \"ls\"'; 0: none\n"
	      "  events/GRP/EVENT/trigger, hist   a hist trigger and its table\n"
	      "  events/GRP/EVENT/format, id\n"
	      "Which processes a probe reaches: COMMAND and all it starts (with -- COMMAND, a\n"
	      "probe by path fires in any program started under it; the mount ends with it and\n"
	      "its exit status is uprobe's), the processes given with -p, and those written to\n"
	      "set_event_pid.  Nothing else unless asked: with -a, -u or -c, enabling an event\n"
	      "by path also brings in the processes these options take that map the file then.\n"
	      "Never uprobe itself, its ancestors (the shell that started it), or a process\n"
	      "waiting on the mount.  Without a command the mount runs until unmounted\n"
	      "(fusermount3 -u DIR) or Ctrl-C/SIGTERM: every probe is then taken out and the\n"
	      "processes run on.  Removing probes clears trace, as the kernel does.\n"
	      "\n"
	      "options:\n"
	      "  -p, --pid PID     trace this process from the start (repeatable)\n"
	      "  -a, --all         reach every process that maps an enabled event's file (all\n"
	      "                    users' as root, else yours)\n"
	      "  -u, --uid USER    reach those of USER (a name or a number; repeatable)\n"
	      "  -c, --comm GLOB   reach those whose comm matches GLOB (repeatable; with -u,\n"
	      "                    both must hold)\n"
	      "  -v, --verbose     say where each probe was armed\n"
	      "  -d, --debug       libfuse's request log\n"
	      "      --listen HOST:PORT  serve the events' hit counts and hist tables at\n"
	      "                    http://HOST:PORT/metrics for Prometheus, as uprobe trace\n"
	      "                    --listen does (':9464' is 127.0.0.1:9464; see uprobe(1))\n"
	      "      --max-series N  at most N keys of a table as series (default 1000)\n"
	      "\n"
	      "example (seed 008's walkthrough):\n"
	      "  uprobe mount /tmp/t &\n"
	      "  echo \"up $(pidof sample) 0x401126 A 5\" > /tmp/t/uprobes_events\n"
	      "  cat /tmp/t/trace\n",
	      out);
}

static void log_msg(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "uprobe mount: %s\n", msg);
}

/* A user by name or number, for --uid; -1 when there is none. */
static long user_id(const char *text)
{
	struct passwd *pw;
	char *end;
	long v = strtol(text, &end, 10);

	if (*text && !*end && v >= 0 && v <= 0x7fffffff)
		return v;
	pw = getpwnam(text);
	return pw ? (long)pw->pw_uid : -1;
}

static int grow(void **v, unsigned n, size_t elem)
{
	void *nv = realloc(*v, (n + 1) * elem);

	if (!nv)
		return -ENOMEM;
	*v = nv;
	return 0;
}

static int mount_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' }, { "all", no_argument, NULL, 'a' },
		{ "uid", required_argument, NULL, 'u' }, { "comm", required_argument, NULL, 'c' },
		{ "verbose", no_argument, NULL, 'v' },	 { "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },	 { "listen", required_argument, NULL, 'M' },
		{ "max-series", required_argument, NULL, 'Q' }, { NULL, 0, NULL, 0 },
	};
	struct up_fs_opts o = { .stop_fd = -1, .log = log_msg };
	struct sigaction sa = { .sa_handler = on_stop_signal };
	pid_t *pids = NULL;
	uid_t *uids = NULL;
	char **comms = NULL;
	unsigned npids = 0, nuids = 0, ncomms = 0;
	int c, rc, st = -1, ret = CLI_FAIL;
	const char *listen_at = NULL;
	unsigned max_series = 1000;
	struct cli_listen *srv = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+p:au:c:vdh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || v <= 0 || v > 0x7fffffff) {
				ret = cli_usage_error(&cli_cmd_mount, "'%s' is not a process id",
						      optarg);
				goto out;
			}
			if (grow((void **)&pids, npids, sizeof(*pids)))
				goto nomem;
			pids[npids++] = (pid_t)v;
			break;
		}
		case 'a':
			o.reach_all = true;
			break;
		case 'u': {
			long v = user_id(optarg);

			if (v < 0) {
				ret = cli_usage_error(&cli_cmd_mount, "--uid: no user '%s'",
						      optarg);
				goto out;
			}
			if (grow((void **)&uids, nuids, sizeof(*uids)))
				goto nomem;
			uids[nuids++] = (uid_t)v;
			break;
		}
		case 'c':
			if (grow((void **)&comms, ncomms, sizeof(*comms)))
				goto nomem;
			comms[ncomms++] = optarg;
			break;
		case 'v':
			o.verbose++;
			break;
		case 'd':
			o.debug = true;
			break;
		case 'M':
			listen_at = optarg;
			break;
		case 'Q': {
			char *end;
			unsigned long n = strtoul(optarg, &end, 10);

			if (*end || !n || n > 1000000) {
				ret = cli_usage_error(&cli_cmd_mount,
						      "--max-series '%s': expected 1 to 1000000", optarg);
				goto out;
			}
			max_series = (unsigned)n;
			break;
		}
		case 'h':
			mount_usage(stdout);
			ret = CLI_OK;
			goto out;
		default:
			ret = cli_usage_error(&cli_cmd_mount, "unknown option");
			goto out;
		}
	}
	if (optind == argc) {
		ret = cli_usage_error(&cli_cmd_mount, "no mount point: give DIR");
		goto out;
	}
	if (optind + 1 < argc && (strcmp(argv[optind + 1], "--") || optind + 2 == argc)) {
		ret = cli_usage_error(&cli_cmd_mount,
				      strcmp(argv[optind + 1], "--") ?
					      "one DIR only (a command comes after --)" :
					      "no command after --");
		goto out;
	}
	if (!up_fs_supported()) {
		cli_err("mount", "built without FUSE (install libfuse3-dev and rebuild)");
		goto out;
	}
	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		cli_err("mount", "pipe: %s", strerror(errno));
		goto out;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	o.mountpoint = argv[optind];
	o.pids = pids;
	o.npids = npids;
	o.reach_uids = uids;
	o.nreach_uids = nuids;
	o.reach_comms = comms;
	o.nreach_comms = ncomms;
	o.stop_fd = stop_pipe[0];
	if (optind + 2 < argc) {
		o.argv = argv + optind + 2;
		o.status = &st;
	}
	if (listen_at) {
		char err[256];

		rc = cli_listen_start(listen_at, max_series, false, &srv, err, sizeof(err));
		if (rc) {
			cli_err("mount", "%s", err);
			ret = rc == -EINVAL ? CLI_USAGE : CLI_FAIL;
			close(stop_pipe[0]);
			close(stop_pipe[1]);
			goto out;
		}
		cli_err("mount", "metrics at http://%s/metrics", cli_listen_where(srv));
		o.metrics = true;
		o.wake_fd = cli_listen_fd(srv);
		o.on_wake = on_scrape;
		o.wake_arg = srv;
	}
	rc = up_fs_run(&o);
	cli_listen_stop(srv);
	srv = NULL;
	close(stop_pipe[0]);
	close(stop_pipe[1]);
	if (rc) {
		if (o.argv && rc != -EIO) {
			cli_err("mount", "%s: %s", o.argv[0], strerror(-rc));
			ret = rc == -ENOENT ? 127 : 126; /* as a shell says it */
			goto out;
		}
		cli_err("mount", "%s: %s", o.mountpoint,
			rc == -EIO ? "cannot mount" : strerror(-rc));
		goto out;
	}
	if (o.argv) /* the command's status is ours */
		ret = st == -1 ? CLI_FAIL : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	else
		ret = CLI_OK;
	goto out;
nomem:
	cli_err("mount", "%s", strerror(ENOMEM));
out:
	free(pids);
	free(uids);
	free(comms);
	return ret;
}

const struct cli_cmd cli_cmd_mount = {
	.name = "mount",
	.run = mount_run,
	.synopsis =
		"mount [-p PID]... [-a | -u USER... | -c COMM...] [-v] [-d] [--listen HOST:PORT] DIR "
		"[-- COMMAND [ARGS]]",
	.summary = "serve tracefs's uprobe files in DIR (FUSE), for shell scripts",
	.usage = mount_usage,
};
