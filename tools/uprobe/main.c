// SPDX-License-Identifier: MIT
/*
 * The uprobe command: finds the subcommand and hands it the rest of the command line.
 * Everything a subcommand shares (error messages, opening an ELF file) lives here too.
 */
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
