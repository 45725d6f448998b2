// SPDX-License-Identifier: MIT
/*
 * uprobe decode: how each instruction of a file (or of one function) would be executed
 * when probed.  One line per instruction, in a format tests and scripts parse:
 *
 *	0x<vaddr> <length> <plan> <reason>[\t<assembly>]
 *
 * Bytes that do not decode print as "0x<vaddr> 0 reject invalid" (or truncated) and
 * decoding goes on at the next byte, as objdump's "(bad)" does.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/patch.h"
#include "arch/x86/insn.h"
#include "cli.h"
#include "sym/sym.h"

#define NR_PLANS (UP_PLAN_REJECT + 1)

#define NR_TACTICS UP_TACTIC_COUNT

struct decode {
	enum up_insn_mode mode;
	bool summary;
	bool assembly;
	bool tactic;		/* -t: the fast-path tactic column */
	struct up_sym_elf *elf;
	uint64_t img_lo, img_hi; /* the file's loaded image */
	uint64_t *entries;	/* function starts, sorted */
	size_t nentries, capentries;
	uint64_t tactics[NR_TACTICS], entry_tactics[NR_TACTICS], nentry;
	uint64_t plans[NR_PLANS];
	uint64_t reasons[UP_WHY_COUNT];
	uint64_t total;
	uint64_t bytes;
};

static void decode_usage(FILE *out)
{
	fprintf(out,
		"usage: uprobe decode [-m 32|64] [-s] [--asm] [-t] FILE [SYMBOL]\n"
		"\n"
		"Decodes every instruction of FILE's executable sections (or of the function\n"
		"SYMBOL, by its symbol's bounds; 0xVADDR names the function holding VADDR)\n"
		"and tells how a probe on it would run it.\n"
		"One line per instruction:\n"
		"\n"
		"  0x<vaddr> <length> <plan> <reason> [<tactic>]\n"
		"\n"
		"plan is emulate, xol, step or reject; reason names why.  Bytes that do not\n"
		"decode print as '0x<vaddr> 0 reject invalid' and decoding goes on at the next\n"
		"byte.\n"
		"\n"
		"options:\n"
		"  -m, --mode 32|64   decode as 32- or 64-bit code (default: the ELF class)\n"
		"  -s, --summary      print counts per plan and per reason instead\n"
		"  -a, --asm          append the instruction in AT&T syntax, after a tab\n"
		"  -t, --tactic       add a column: how the fast path would place its jmp there\n"
		"                     (jmp, succ, pad, pun, hop; int3: none), by the code alone;\n"
		"                     with -s, counts per tactic, for all instructions and for\n"
		"                     function entries\n"
		"  -h, --help         this help\n"
		"\n"
		"exit status: 0 on success, 2 for bad arguments, a file that is missing or\n"
		"not an x86 ELF file, or an unknown SYMBOL.\n");
}

static void print_insn(struct decode *d, const struct up_insn *insn, uint64_t vaddr,
		       enum up_tactic tactic)
{
	char text[160];

	printf("0x%" PRIx64 " %u %s %s", vaddr, insn->length, up_insn_plan_str(insn->plan),
	       up_insn_reason_name(insn->reason));
	if (d->tactic)
		printf(" %s", up_patch_tactic_name(tactic));
	if (d->assembly) {
		if (insn->length)
			printf("\t%s", up_insn_format(insn, text, sizeof(text)));
		else
			fputs("\t(bad)", stdout);
	}
	putchar('\n');
}

/* Is vaddr a function's first instruction? */
static bool is_entry(const struct decode *d, uint64_t vaddr)
{
	size_t lo = 0, hi = d->nentries;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (d->entries[mid] < vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < d->nentries && d->entries[lo] == vaddr;
}

static int add_entry(const struct up_sym *sym, void *ctx)
{
	struct decode *d = ctx;

	if (sym->ifunc || !sym->size || (d->nentries && d->entries[d->nentries - 1] == sym->value))
		return 0;
	if (d->nentries == d->capentries) {
		size_t cap = d->capentries ? 2 * d->capentries : 1024;
		uint64_t *v = realloc(d->entries, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		d->entries = v;
		d->capentries = cap;
	}
	d->entries[d->nentries++] = sym->value;
	return 0;
}

static int image_span(const struct up_sym_section *sec, void *ctx)
{
	struct decode *d = ctx;

	if (!d->img_lo || sec->vaddr < d->img_lo)
		d->img_lo = sec->vaddr;
	if (sec->vaddr + sec->size > d->img_hi)
		d->img_hi = sec->vaddr + sec->size;
	return 0;
}

static int decode_range(struct decode *d, const uint8_t *code, uint64_t size, uint64_t vaddr)
{
	enum up_tactic tactic = UP_TACTIC_INT3;
	struct up_insn insn;
	uint64_t off = 0;
	int err;

	while (off < size) {
		err = up_insn_analyze(&insn, code + off, size - off, vaddr + off, d->mode);
		if (err)
			return err;
		if ((unsigned)insn.plan < NR_PLANS)
			d->plans[insn.plan]++;
		if ((unsigned)insn.reason < UP_WHY_COUNT)
			d->reasons[insn.reason]++;
		d->total++;
		if (d->tactic) {
			char why[200];

			tactic = up_plan_file(d->elf, &insn, d->img_lo, d->img_hi, why, sizeof(why));
			d->tactics[tactic]++;
			if (is_entry(d, vaddr + off)) {
				d->entry_tactics[tactic]++;
				d->nentry++;
			}
		}
		if (!d->summary)
			print_insn(d, &insn, vaddr + off, tactic);
		/* undecodable: go on at the next byte, as objdump does after "(bad)" */
		off += insn.length ? insn.length : 1;
	}
	d->bytes += size;
	return 0;
}

static int decode_section(const struct up_sym_section *sec, void *ctx)
{
	return decode_range(ctx, sec->data, sec->size, sec->vaddr);
}

static void print_summary(const struct decode *d)
{
	unsigned i;

	for (i = 0; i < NR_PLANS; i++)
		printf("plan %s %" PRIu64 "\n", up_insn_plan_str(i), d->plans[i]);
	for (i = 0; i < UP_WHY_COUNT; i++)
		if (d->reasons[i])
			printf("reason %s %" PRIu64 "\n", up_insn_reason_name(i), d->reasons[i]);
	printf("total %" PRIu64 "\n", d->total);
	printf("bytes %" PRIu64 "\n", d->bytes);
	if (!d->tactic)
		return;
	for (i = 0; i < NR_TACTICS; i++)
		printf("tactic %s %" PRIu64 "\n", up_patch_tactic_name(i), d->tactics[i]);
	for (i = 0; i < NR_TACTICS; i++)
		printf("entry-tactic %s %" PRIu64 "\n", up_patch_tactic_name(i), d->entry_tactics[i]);
	printf("entries %" PRIu64 "\n", d->nentry);
	if (d->total && d->nentry)
		printf("fast %.2f%% of instructions, %.2f%% of function entries\n",
		       100.0 * (double)(d->total - d->tactics[UP_TACTIC_INT3]) / (double)d->total,
		       100.0 * (double)(d->nentry - d->entry_tactics[UP_TACTIC_INT3]) /
			       (double)d->nentry);
}

static int parse_mode(const char *arg, enum up_insn_mode *mode)
{
	if (!strcmp(arg, "64"))
		*mode = UP_MODE_64;
	else if (!strcmp(arg, "32"))
		*mode = UP_MODE_32;
	else
		return -EINVAL;
	return 0;
}

/* SYMBOL is a function's name, or 0xVADDR for the function that holds that address. */
static int find_function(struct up_sym_elf *elf, const char *symbol, struct up_sym *sym)
{
	unsigned long long vaddr;
	char *end;

	if (strncmp(symbol, "0x", 2))
		return up_sym_elf_lookup(elf, symbol, sym);
	errno = 0;
	vaddr = strtoull(symbol, &end, 16);
	if (errno || *end || end == symbol + 2)
		return -EINVAL;
	return up_sym_elf_enclosing_func(elf, vaddr, sym);
}

static int run_decode(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "summary", no_argument, NULL, 's' },
		{ "asm", no_argument, NULL, 'a' },
		{ "tactic", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cli_cmd *cmd = &cli_cmd_decode;
	struct decode d = { 0 };
	const char *path, *symbol = NULL;
	struct up_sym_elf *elf;
	bool mode_given = false;
	int opt, err, ret = CLI_OK;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":m:saht", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			if (parse_mode(optarg, &d.mode))
				return cli_usage_error(cmd, "bad mode '%s': expected 32 or 64",
						       optarg);
			mode_given = true;
			break;
		case 's':
			d.summary = true;
			break;
		case 'a':
			d.assembly = true;
			break;
		case 't':
			d.tactic = true;
			break;
		case 'h':
			decode_usage(stdout);
			return CLI_OK;
		case ':':
			return cli_usage_error(cmd, "option '%s' needs an argument",
					       argv[optind - 1]);
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
		symbol = argv[optind + 1];

	elf = cli_open_elf(cmd->name, path);
	if (!elf)
		return CLI_USAGE;
	if (!mode_given)
		d.mode = up_sym_elf_class(elf) == 32 ? UP_MODE_32 : UP_MODE_64;
	d.elf = elf;
	if (d.tactic) {
		err = up_sym_elf_for_each_func(elf, add_entry, &d);
		if (!err)
			err = up_sym_elf_for_each_exec_section(elf, image_span, &d);
		if (err) {
			cli_err(cmd->name, "%s: %s", path, strerror(-err));
			ret = CLI_FAIL;
			goto out;
		}
	}

	if (symbol) {
		const uint8_t *code;
		struct up_sym sym;

		if (find_function(elf, symbol, &sym)) {
			if (!strncmp(symbol, "0x", 2))
				cli_err(cmd->name, "%s: no function symbol holds address %s", path,
					symbol);
			else
				cli_err(cmd->name, "%s: no function symbol '%s'", path, symbol);
			ret = CLI_USAGE;
			goto out;
		}
		symbol = sym.name;
		if (!sym.size) {
			cli_err(cmd->name, "%s: symbol '%s' at 0x%" PRIx64 " has no size", path,
				symbol, sym.value);
			ret = CLI_USAGE;
			goto out;
		}
		err = up_sym_elf_code(elf, sym.value, sym.size, &code);
		if (err) {
			cli_err(cmd->name, "%s: symbol '%s' at 0x%" PRIx64 "+%" PRIu64 " %s", path,
				symbol, sym.value, sym.size,
				err == -ERANGE ? "runs past the end of its section" :
						 "is not in an executable section");
			ret = CLI_USAGE;
			goto out;
		}
		err = decode_range(&d, code, sym.size, sym.value);
	} else {
		err = up_sym_elf_for_each_exec_section(elf, decode_section, &d);
	}
	if (err) {
		cli_err(cmd->name, "%s: %s", path, strerror(-err));
		ret = CLI_FAIL;
		goto out;
	}
	if (d.summary)
		print_summary(&d);
	if (fflush(stdout) == EOF) {
		cli_err(cmd->name, "writing the output: %s", strerror(errno));
		ret = CLI_FAIL;
	}
out:
	free(d.entries);
	up_sym_elf_close(elf);
	return ret;
}

const struct cli_cmd cli_cmd_decode = {
	.name = "decode",
	.run = run_decode,
	.synopsis = "decode [-m 32|64] [-s] [--asm] [-t] FILE [SYMBOL]",
	.summary = "show how each instruction of a file or function would be probed",
	.usage = decode_usage,
};
