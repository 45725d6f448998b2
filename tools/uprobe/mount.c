// SPDX-License-Identifier: MIT
/*
 * uprobe mount: the control filesystem, tracefs's files for uprobes served by FUSE
 * (src/fs/ does the work).  Runs in the foreground until unmounted, or while the
 * command after -- runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

static void mount_usage(FILE *out)
{
	fputs("usage: uprobe mount [-p PID]... [-v] [-d] DIR [-- COMMAND [ARGS]]\n"
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
	      "With -- COMMAND, COMMAND runs with DIR served, it and all it starts traced (a\n"
	      "probe by path fires in any program started under it); the mount ends with it\n"
	      "and its exit status is uprobe's.  Without, enabling an event by path also\n"
	      "brings in your processes that map the file, and the mount runs until unmounted\n"
	      "(fusermount3 -u DIR) or Ctrl-C/SIGTERM: every probe is then taken out and the\n"
	      "processes run on.  Removing probes clears trace, as the kernel does.\n"
	      "\n"
	      "options:\n"
	      "  -p, --pid PID     trace this process from the start (repeatable)\n"
	      "  -v, --verbose     say where each probe was armed\n"
	      "  -d, --debug       libfuse's request log\n"
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

static int mount_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct up_fs_opts o = { .stop_fd = -1, .log = log_msg };
	struct sigaction sa = { .sa_handler = on_stop_signal };
	pid_t *pids = NULL;
	unsigned npids = 0;
	int c, rc, st = -1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+p:vdh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			char *end;
			long v = strtol(optarg, &end, 10);
			pid_t *np;

			if (*end || v <= 0 || v > 0x7fffffff) {
				free(pids);
				return cli_usage_error(&cli_cmd_mount, "'%s' is not a process id",
						       optarg);
			}
			np = realloc(pids, (npids + 1) * sizeof(*np));
			if (!np) {
				free(pids);
				cli_err("mount", "%s", strerror(ENOMEM));
				return CLI_FAIL;
			}
			pids = np;
			pids[npids++] = (pid_t)v;
			break;
		}
		case 'v':
			o.verbose++;
			break;
		case 'd':
			o.debug = true;
			break;
		case 'h':
			mount_usage(stdout);
			free(pids);
			return CLI_OK;
		default:
			free(pids);
			return cli_usage_error(&cli_cmd_mount, "unknown option");
		}
	}
	if (optind == argc) {
		free(pids);
		return cli_usage_error(&cli_cmd_mount, "no mount point: give DIR");
	}
	if (optind + 1 < argc && (strcmp(argv[optind + 1], "--") || optind + 2 == argc)) {
		free(pids);
		return cli_usage_error(&cli_cmd_mount, strcmp(argv[optind + 1], "--")
							       ? "one DIR only (a command comes after --)"
							       : "no command after --");
	}
	if (!up_fs_supported()) {
		free(pids);
		cli_err("mount", "built without FUSE (install libfuse3-dev and rebuild)");
		return CLI_FAIL;
	}
	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(pids);
		cli_err("mount", "pipe: %s", strerror(errno));
		return CLI_FAIL;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	o.mountpoint = argv[optind];
	o.pids = pids;
	o.npids = npids;
	o.stop_fd = stop_pipe[0];
	if (optind + 2 < argc) {
		o.argv = argv + optind + 2;
		o.status = &st;
	}
	rc = up_fs_run(&o);
	free(pids);
	close(stop_pipe[0]);
	close(stop_pipe[1]);
	if (rc) {
		if (o.argv && rc != -EIO) {
			cli_err("mount", "%s: %s", o.argv[0], strerror(-rc));
			return rc == -ENOENT ? 127 : 126; /* as a shell says it */
		}
		cli_err("mount", "%s: %s", o.mountpoint,
			rc == -EIO ? "cannot mount" : strerror(-rc));
		return CLI_FAIL;
	}
	if (o.argv) /* the command's status is ours */
		return st == -1 ? CLI_FAIL : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return CLI_OK;
}

const struct cli_cmd cli_cmd_mount = {
	.name = "mount",
	.run = mount_run,
	.synopsis = "mount [-p PID]... [-v] [-d] DIR [-- COMMAND [ARGS]]",
	.summary = "serve tracefs's uprobe files in DIR (FUSE), for shell scripts",
	.usage = mount_usage,
};
