// SPDX-License-Identifier: MIT
/*
 * uprobe list: the function symbols of a file, by address, one per line:
 *
 *	0x<vaddr> 0x<file offset> <size> <name>
 *
 * The file offset is what a PATH:0xOFFSET probe (and the kernel's uprobe_events) takes;
 * it is "-" where no PT_LOAD segment maps the address (relocatable objects).
 *
 * With --usdt, the USDT probes (SDT notes) instead, one per site, then those of the
 * libraries it needs with the library's path in front (LIBRARY:provider:name):
 *
 *	<provider>:<name> 0x<file offset>[(0x<semaphore's file offset>)] $arg1=FETCH:TYPE ...
 *
 * With --vars FILE WHERE (WHERE a function, FILE.c:LINE or FUNC:LINE as probe specs
 * take them), the variables debug information names at each probe address:
 *
 *	<func> @ 0x<file offset> (<source>:<line>)
 *	    <C type> <name>  <fetch:type> | (why it cannot be fetched there)
 */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sym/dwarf.h"
#include "sym/file.h"
#include "sym/sym.h"
#include "sym/usdt.h"

struct list {
	struct up_sym_elf *elf;
	const char *pattern;
	uint64_t shown;
};

static void list_usage(FILE *out)
{
	fprintf(out,
		"usage: uprobe list FILE [PATTERN]\n"
		"       uprobe list --usdt FILE [PATTERN]\n"
		"       uprobe list --vars FILE FUNC|SRC.c:LINE|FUNC:LINE\n"
		"\n"
		"Lists the function symbols of FILE (.symtab and .dynsym), sorted by address,\n"
		"one per line:\n"
		"\n"
		"  0x<vaddr> 0x<file offset> <size> <name>\n"
		"\n"
		"PATTERN is a shell glob (fnmatch) on the name, e.g. 'str*'.  The file offset\n"
		"is the one a PATH:0xOFFSET probe takes; '-' when no segment maps the address.\n"
		"\n"
		"With --usdt, the USDT probes (SystemTap SDT notes) of FILE instead, one per\n"
		"site, PATTERN matching provider:name, then those of the libraries FILE needs\n"
		"(DT_NEEDED), each line with the library's path in front:\n"
		"\n"
		"  [LIBRARY:]<provider>:<name> 0x<offset>[(0x<semaphore offset>)] $arg1=FETCH:TYPE ...\n"
		"\n"
		"each $argN as a u: spec's fetch arguments take it (the note's operand, typed\n"
		"by its size and sign).\n"
		"\n"
		"With --vars, the parameters and local variables that debug information\n"
		"(DWARF) names where a probe on FUNC (past its prologue when built without\n"
		"optimization), on a source line, or on a line of FUNC (relative, as perf\n"
		"probe's FUNC:N) would be placed: their C type, name, and the fetch a probe\n"
		"spec naming them uses, or why they cannot be read there (optimized out).\n"
		"\n"
		"options:\n"
		"  -u, --usdt   list USDT probes\n"
		"  -V, --vars   list variables at a probe point\n"
		"  -h, --help   this help\n"
		"\n"
		"exit status: 0 when something was listed, 1 when no function matched, 2 for\n"
		"bad arguments or a file that is missing or not an x86 ELF file.\n");
}

static int list_one(const struct up_sym *sym, void *ctx)
{
	struct list *l = ctx;
	uint64_t offset;

	if (l->pattern && fnmatch(l->pattern, sym->name, 0))
		return 0;
	printf("0x%" PRIx64 " ", sym->value);
	if (up_sym_elf_vaddr_to_offset(l->elf, sym->value, &offset) == 0)
		printf("0x%" PRIx64, offset);
	else
		putchar('-');
	printf(" %" PRIu64 " %s\n", sym->size, sym->name);
	l->shown++;
	return 0;
}

struct usdt_list {
	const char *pattern;
	const char *prefix; /* "LIBRARY:" for a needed library's probes, else "" */
	unsigned shown;
};

static void usdt_print(struct up_usdt_file *f, struct usdt_list *ul)
{
	for (size_t i = 0; i < up_usdt_count(f); i++) {
		const struct up_usdt_probe *p = up_usdt_probe(f, i);
		char full[256];

		snprintf(full, sizeof(full), "%s:%s", p->provider, p->name);
		if (ul->pattern && fnmatch(ul->pattern, full, 0) && fnmatch(ul->pattern, p->name, 0))
			continue;
		printf("%s%s 0x%" PRIx64, ul->prefix, full, p->offset);
		if (p->sema_offset)
			printf("(0x%" PRIx64 ")", p->sema_offset);
		if (p->nargs < 0)
			printf(" operands not understood: %s", p->args_text);
		for (int a = 0; a < p->nargs; a++) {
			char fetch[64], type[8];

			up_usdt_arg_fetch(&p->args[a], fetch, sizeof(fetch));
			up_usdt_arg_type(&p->args[a], type, sizeof(type));
			printf(" $arg%d=%s:%s", a + 1, fetch, type);
		}
		putchar('\n');
		ul->shown++;
	}
}

static int usdt_lib(void *ctx, const char *path)
{
	struct usdt_list *ul = ctx;
	struct up_usdt_file *f;
	char prefix[4200];

	if (up_usdt_open(path, &f))
		return 0;
	snprintf(prefix, sizeof(prefix), "%s:", path);
	ul->prefix = prefix;
	usdt_print(f, ul);
	ul->prefix = "";
	up_usdt_close(f);
	return 0;
}

static int list_usdt(const char *path, const char *pattern)
{
	struct usdt_list ul = { .pattern = pattern, .prefix = "" };
	struct up_usdt_file *f;
	struct up_sym_elf *elf;
	int rc = up_usdt_open(path, &f);

	if (rc) {
		cli_err("list", "%s: %s", path,
			rc == -ENOEXEC ? "not an ELF file" : up_file_strerror(rc));
		return CLI_USAGE;
	}
	usdt_print(f, &ul);
	up_usdt_close(f);
	if (!up_sym_elf_open(path, &elf)) { /* and the libraries it needs */
		up_sym_elf_for_each_needed(elf, usdt_lib, &ul);
		up_sym_elf_close(elf);
	}
	if (!ul.shown) {
		if (pattern)
			cli_err("list", "%s: no USDT probe matches '%s'", path, pattern);
		else
			cli_err("list", "%s: no USDT probes (no .note.stapsdt), nor in the "
				"libraries it needs", path);
		return CLI_FAIL;
	}
	if (fflush(stdout) == EOF) {
		cli_err("list", "writing the output: %m");
		return CLI_FAIL;
	}
	return CLI_OK;
}

static int var_one(void *ctx, const char *type, const char *name, const char *fetch,
		   const char *why)
{
	(void)ctx;
	printf("    %-24s %-16s %s%s%s\n", type, name, fetch ? fetch : "(", fetch ? "" : why,
	       fetch ? "" : ")");
	return 0;
}

static int site_vars(void *ctx, const struct up_dwarf_site *s)
{
	printf("%s @ 0x%" PRIx64 " (%s:%d)\n", s->func, s->offset, s->file, s->line);
	return up_dwarf_for_each_var(ctx, s->vaddr, var_one, NULL);
}

static int list_vars(const char *path, const char *where)
{
	const char *colon = strchr(where, ':');
	struct up_dwarf *d;
	int rc = up_dwarf_open(path, &d);

	if (rc) {
		cli_err("list", "%s: %s", path,
			rc == -ENODATA ? "no debug information (DWARF), nor a debug file for it" :
			rc == -ENOEXEC ? "not an x86 ELF file" :
					 up_file_strerror(rc));
		return CLI_USAGE;
	}
	if (colon) {
		char what[256];
		bool is_file;

		snprintf(what, sizeof(what), "%.*s", (int)(colon - where), where);
		is_file = strchr(what, '.') || strchr(what, '/');
		rc = up_dwarf_line_sites(d, is_file ? what : NULL, is_file ? NULL : what,
					 atoi(colon + 1), site_vars, d);
	} else {
		struct up_dwarf_site s;

		rc = up_dwarf_func_site(d, where, &s);
		if (!rc)
			rc = site_vars(d, &s);
	}
	up_dwarf_close(d);
	if (rc == -ENOENT) {
		cli_err("list", "%s: no code for '%s' in its debug information", path, where);
		return CLI_FAIL;
	}
	if (rc || fflush(stdout) == EOF) {
		cli_err("list", "%s: %s", path, rc ? strerror(-rc) : "writing the output failed");
		return CLI_FAIL;
	}
	return CLI_OK;
}

static int run_list(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "usdt", no_argument, NULL, 'u' },
		{ "vars", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cli_cmd *cmd = &cli_cmd_list;
	struct list l = { 0 };
	const char *path;
	int opt, err, ret = CLI_OK;
	bool usdt = false, vars = false;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":huV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			list_usage(stdout);
			return CLI_OK;
		case 'u':
			usdt = true;
			break;
		case 'V':
			vars = true;
			break;
		default:
			return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return cli_usage_error(cmd, "no FILE given");
	if (argc - optind > 2)
		return cli_usage_error(cmd, "too many arguments");
	path = argv[optind];
	if (argc - optind == 2)
		l.pattern = argv[optind + 1];
	if (usdt)
		return list_usdt(path, l.pattern);
	if (vars) {
		if (!l.pattern)
			return cli_usage_error(cmd, "--vars needs FILE and FUNC, SRC.c:LINE or FUNC:LINE");
		return list_vars(path, l.pattern);
	}

	l.elf = cli_open_elf(cmd->name, path);
	if (!l.elf)
		return CLI_USAGE;

	err = up_sym_elf_for_each_func(l.elf, list_one, &l);
	if (err) {
		cli_err(cmd->name, "%s: reading symbols: %s", path, strerror(-err));
		ret = CLI_FAIL;
	} else if (!l.shown) {
		if (l.pattern)
			cli_err(cmd->name, "%s: no function matches '%s'", path, l.pattern);
		else
			cli_err(cmd->name, "%s: no function symbols", path);
		ret = CLI_FAIL;
	}
	if (fflush(stdout) == EOF && ret == CLI_OK) {
		cli_err(cmd->name, "writing the output: %m");
		ret = CLI_FAIL;
	}
	up_sym_elf_close(l.elf);
	return ret;
}

const struct cli_cmd cli_cmd_list = {
	.name = "list",
	.run = run_list,
	.synopsis = "list [--usdt] FILE [PATTERN] | list --vars FILE WHERE",
	.summary = "list the functions of a binary or library, with file offsets",
	.usage = list_usage,
};
