// SPDX-License-Identifier: MIT
/*
 * uprobe report: prints a raw trace (uprobe trace --format raw -o FILE) as uprobe trace
 * would have printed it live.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "trace/raw.h"

static void report_usage(FILE *out)
{
	fputs("usage: uprobe report [--format text|json] [-o FILE] [--header] [RAWFILE]\n"
	      "\n"
	      "Prints the events of a raw trace, made by 'uprobe trace --format raw -o RAWFILE',\n"
	      "line for line as 'uprobe trace' prints them live (the kernel's trace file\n"
	      "layout, or JSON).  RAWFILE '-' or none: standard input.  Writing records raw\n"
	      "and formatting them afterwards keeps every record of a hot probe: the tracer\n"
	      "copies the in-process ring to the file instead of formatting each hit.\n"
	      "\n"
	      "options:\n"
	      "  -o, --output FILE   write to FILE instead of stdout\n"
	      "      --format F      text (default) or json (a line per event)\n"
	      "      --header        the trace file's comment header first (text)\n"
	      "\n"
	      "A record or block that cannot be read (a forged or damaged one) is skipped and\n"
	      "the rest printed; stderr says, for each kind, how many and where the first was.\n"
	      "\n"
	      "Exit status: 0; 1 when not every event is printed: records were lost while\n"
	      "tracing, skipped as unreadable (counts on stderr), or the file ends early; 2\n"
	      "when it is not a raw trace (where and why on stderr).\n"
	      "\n"
	      "example:\n"
	      "  uprobe trace --format raw -o ls.raw \\\n"
	      "      -e 'p:libc/malloc /lib/x86_64-linux-gnu/libc.so.6:malloc size=%di:u64' -- ls\n"
	      "  uprobe report ls.raw | head\n",
	      out);
}

/* "N records skipped, the first at byte B: why", a line a kind. */
static void say_skipped(const char *name, const struct up_raw_stats *st)
{
	static const char *const what[UP_RAW_SKIP_KINDS][2] = {
		[UP_RAW_SKIP_PROBE] = { "record", "records" },
		[UP_RAW_SKIP_LEN] = { "record", "records" },
		[UP_RAW_SKIP_REGS] = { "record", "records" },
		[UP_RAW_SKIP_REST] = { "rest of a block", "rests of blocks" },
		[UP_RAW_SKIP_BLOCK] = { "block", "blocks" },
	};

	for (int k = 0; k < UP_RAW_SKIP_KINDS; k++)
		if (st->skip[k].n)
			cli_err("report", "%s: %" PRIu64 " %s skipped as unreadable, the first %s",
				name, st->skip[k].n, what[k][st->skip[k].n > 1], st->skip[k].first);
}

static int run_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' }, { "format", required_argument, NULL, 'F' },
		{ "header", no_argument, NULL, 'H' },	    { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct up_raw_report_opts o = { 0 };
	struct up_raw_stats st;
	const char *inpath = NULL, *outpath = NULL;
	FILE *in = stdin, *out = stdout;
	char err[512];
	int c, rc, status = CLI_OK;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			outpath = optarg;
			break;
		case 'F':
			if (!strcmp(optarg, "json"))
				o.json = true;
			else if (strcmp(optarg, "text"))
				return cli_usage_error(&cli_cmd_report,
						       "--format '%s': expected text or json", optarg);
			break;
		case 'H':
			o.header = true;
			break;
		case 'h':
			report_usage(stdout);
			return CLI_OK;
		default:
			return cli_usage_error(&cli_cmd_report, "unknown option");
		}
	}
	if (argc - optind > 1)
		return cli_usage_error(&cli_cmd_report, "one raw file at a time");
	if (optind < argc && strcmp(argv[optind], "-"))
		inpath = argv[optind];
	if (inpath) {
		in = fopen(inpath, "re");
		if (!in) {
			cli_err("report", "%s: %s", inpath, strerror(errno));
			return CLI_USAGE;
		}
	}
	if (outpath) {
		out = cli_open_output("report", outpath);
		if (!out) {
			if (in != stdin)
				fclose(in);
			return CLI_USAGE;
		}
	}
	err[0] = '\0';
	rc = up_raw_report(in, out, &o, &st, err, sizeof(err));
	if (fflush(out) && !rc)
		rc = errno ? -errno : -EIO;
	if (rc == -EINVAL) {
		cli_err("report", "%s: %s", inpath ? inpath : "standard input", err);
		status = CLI_USAGE;
	} else if (rc) {
		cli_err("report", "%s", strerror(-rc));
		status = CLI_FAIL;
	} else if (!st.ended) {
		cli_err("report", "%s ends before its last block: the trace was cut short "
			"(%" PRIu64 " events printed)", inpath ? inpath : "standard input",
			st.records);
		status = CLI_FAIL;
	} else if (st.lost) {
		cli_err("report", "%" PRIu64 " records were lost while tracing (the in-process "
			"ring was full: a bigger --ring-size keeps them)", st.lost);
		status = CLI_FAIL;
	}
	if (st.skipped) {
		say_skipped(inpath ? inpath : "standard input", &st);
		if (status == CLI_OK)
			status = CLI_FAIL;
	}
	if (in != stdin)
		fclose(in);
	if (out != stdout && fclose(out) && !status) {
		cli_err("report", "%s: %s", outpath, strerror(errno));
		status = CLI_FAIL;
	}
	return status;
}

const struct cli_cmd cli_cmd_report = {
	.name = "report",
	.run = run_report,
	.synopsis = "report [--format text|json] [-o FILE] [--header] [RAWFILE]",
	.summary = "print a raw trace (trace --format raw) as trace would have",
	.usage = report_usage,
};
