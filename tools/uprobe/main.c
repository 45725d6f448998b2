// SPDX-License-Identifier: MIT
/*
 * The uprobe command: finds the subcommand and hands it the rest of the command line.
 * Everything a subcommand shares (error messages, opening an ELF file or an output
 * file) lives here too.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "sym/file.h"
#include "sym/sym.h"

#ifndef UPROBE_VERSION
#define UPROBE_VERSION "unknown"
#endif

static const struct cli_cmd *const commands[] = {
	&cli_cmd_decode,
	&cli_cmd_list,
	&cli_cmd_mount,
	&cli_cmd_report,
	&cli_cmd_run,
	&cli_cmd_trace,
};

#define NR_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* Big enough that decoding a whole libc is not a write(2) per line. */
static char stdout_buf[1 << 20];

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: uprobe [--help] [--version] COMMAND [ARGS...]\n\n"
		     "Dynamic user-space probes over ptrace.\n\ncommands:\n");
	for (i = 0; i < NR_COMMANDS; i++)
		fprintf(out, "  %-8s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(out, "\n'uprobe help COMMAND' or 'uprobe COMMAND --help' shows a command's "
		     "options.\n");
}

static const struct cli_cmd *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < NR_COMMANDS; i++)
		if (!strcmp(commands[i]->name, name))
			return commands[i];
	return NULL;
}

void cli_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (cmd)
		fprintf(stderr, "uprobe %s: ", cmd);
	else
		fprintf(stderr, "uprobe: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "uprobe %s: ", cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: uprobe %s\nTry 'uprobe help %s' for more.\n", cmd->synopsis,
		cmd->name);
	return CLI_USAGE;
}

static const char *machine_name(unsigned machine)
{
	switch (machine) {
	case EM_AARCH64:
		return "aarch64";
	case EM_ARM:
		return "arm";
	case EM_RISCV:
		return "riscv";
	case EM_PPC:
		return "ppc";
	case EM_PPC64:
		return "ppc64";
	case EM_S390:
		return "s390";
	case EM_MIPS:
		return "mips";
	case EM_SPARCV9:
		return "sparcv9";
	case EM_LOONGARCH:
		return "loongarch";
	case EM_BPF:
		return "bpf";
	default:
		return "unknown";
	}
}

struct up_sym_elf *cli_open_elf(const char *cmd, const char *path)
{
	struct up_sym_elf *elf;
	unsigned machine;
	int err, cls;

	err = up_sym_elf_open(path, &elf);
	if (!err)
		return elf;

	if (err == -ENOEXEC) {
		if (up_sym_elf_identify(path, &cls, &machine) == 0 &&
		    (machine == EM_X86_64 || machine == EM_386))
			cli_err(cmd, "%s: truncated or corrupt ELF file", path);
		else if (up_sym_elf_identify(path, &cls, &machine) == 0)
			cli_err(cmd, "%s: ELF%d machine %u (%s) is not x86 (x86-64 or i386)", path,
				cls, machine, machine_name(machine));
		else
			cli_err(cmd, "%s: not an ELF file", path);
	} else {
		cli_err(cmd, "%s: %s", path, up_file_strerror(err));
	}
	return NULL;
}

/* Someone else's, in a sticky world-writable directory (owned by neither us nor it)? */
static bool foreign(const struct stat *st, const struct stat *dir, bool sticky)
{
	return sticky && st->st_uid != geteuid() && st->st_uid != dir->st_uid;
}

FILE *cli_open_output(const char *cmd, const char *path)
{
	char copy[PATH_MAX], *dir;
	struct stat dst, lst, st;
	bool sticky = false, follow = false, fifo = false, existed = false;
	int fd, fl;
	FILE *f;

	if (!strcmp(path, "-"))
		return stdout;
	snprintf(copy, sizeof(copy), "%s", path);
	dir = dirname(copy);
	if (!stat(dir, &dst))
		sticky = (dst.st_mode & S_ISVTX) && (dst.st_mode & S_IWOTH);
	if (!lstat(path, &lst)) {
		existed = true;
		if (S_ISLNK(lst.st_mode) && foreign(&lst, &dst, sticky)) {
			cli_err(cmd,
				"%s: a symbolic link of uid %u in the sticky world-writable "
				"directory %s: not followed (it may lead to any file); remove "
				"it, or name the file it leads to",
				path, (unsigned)lst.st_uid, dir);
			return NULL;
		}
		follow = S_ISLNK(lst.st_mode);
		fifo = S_ISFIFO(lst.st_mode) || follow;
		/* checked before the open: a FIFO's would wait for a reader */
		if (!follow && foreign(&lst, &dst, sticky))
			goto foreign;
	}
	/* O_NOFOLLOW: a link put there since is not followed; O_NONBLOCK: nor is a FIFO
	   waited on that was not there (no O_TRUNC yet: only once it is known) */
	fd = open(path,
		  O_WRONLY | O_CREAT | O_NOCTTY | O_CLOEXEC | O_NONBLOCK |
			  (follow ? 0 : O_NOFOLLOW),
		  0666);
	if (fd < 0 && errno == ENXIO && fifo) /* the user's FIFO: wait for its reader */
		fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
	if (fd < 0) {
		if (errno == ELOOP && !follow)
			cli_err(cmd, "%s: became a symbolic link while it was opened: not followed",
				path);
		else if (errno == ENXIO && (!existed || S_ISREG(lst.st_mode)))
			cli_err(cmd, "%s: became a FIFO while it was opened: not written", path);
		else
			cli_err(cmd, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st)) {
		cli_err(cmd, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (S_ISBLK(st.st_mode)) {
		cli_err(cmd,
			"%s: a block device: not written (a trace goes to a file, a pipe "
			"or a terminal)",
			path);
		close(fd);
		return NULL;
	}
	/* created by someone else between the lstat and the open */
	if (!follow && foreign(&st, &dst, sticky)) {
		close(fd);
		lst = st;
		goto foreign;
	}
	fl = fcntl(fd, F_GETFL);
	if ((S_ISREG(st.st_mode) && ftruncate(fd, 0)) || fl < 0 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 || !(f = fdopen(fd, "w"))) {
		cli_err(cmd, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	return f;

foreign:
	cli_err(cmd,
		"%s: owned by uid %u in the sticky world-writable directory %s: not "
		"written (another user's file, or FIFO); remove it, or write elsewhere",
		path, (unsigned)lst.st_uid, dir);
	return NULL;
}

int main(int argc, char **argv)
{
	const struct cli_cmd *cmd;
	const char *arg;

	setvbuf(stdout, stdout_buf, _IOFBF, sizeof(stdout_buf));

	if (argc < 2) {
		usage(stderr);
		return CLI_USAGE;
	}
	arg = argv[1];
	if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
		usage(stdout);
		return CLI_OK;
	}
	if (!strcmp(arg, "-V") || !strcmp(arg, "--version")) {
		printf("uprobe %s\n", UPROBE_VERSION);
		return CLI_OK;
	}
	if (!strcmp(arg, "help")) {
		if (argc < 3) {
			usage(stdout);
			return CLI_OK;
		}
		cmd = find_command(argv[2]);
		if (!cmd) {
			cli_err(NULL, "no such command '%s'", argv[2]);
			usage(stderr);
			return CLI_USAGE;
		}
		cmd->usage(stdout);
		return CLI_OK;
	}
	if (arg[0] == '-') {
		cli_err(NULL, "unknown option '%s'", arg);
		usage(stderr);
		return CLI_USAGE;
	}

	cmd = find_command(arg);
	if (!cmd) {
		cli_err(NULL, "no such command '%s'", arg);
		usage(stderr);
		return CLI_USAGE;
	}
	return cmd->run(argc - 1, argv + 1);
}
