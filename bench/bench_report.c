// SPDX-License-Identifier: MIT
/*
 * The benchmark's output: one table on stdout, the same figures as JSON in
 * BUILD/bench/results.json and a bar chart (log scale, ns per hit, a group per
 * workload, a bar per tool, min-max whiskers) in BUILD/bench/results.svg, written by
 * hand.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char *const colors[T_NTOOLS] = {
	[T_BASE] = "#999999",	      [T_UPROBE] = "#1f77b4",	  [T_UPROBE_PIN] = "#9ecae1",
	[T_UPROBE_CLI] = "#6baed6",   [T_FAST] = "#d62728",	  [T_KERNEL] = "#9467bd",
	[T_FAST_REC] = "#e377c2",     [T_FAST_BURST] = "#f7b6d2",
	[T_CLI_RAW] = "#bcbd22",      [T_CLI_TEXT] = "#dbdb8d",	  [T_CLI_JSON] = "#17becf",
	[T_CLI_RAW0] = "#8c6d31",     [T_CLI_TEXT0] = "#bd9e39",  [T_CLI_JSON0] = "#e7cb94",
	[T_BPFTRACE] = "#2ca02c",     [T_GDB] = "#ff7f0e",
	[T_KERNEL_FILE] = "#756bb1",  [T_KERNEL_FILE64] = "#bcbddc", [T_BPF_PRINTF] = "#74c476",
	[T_AGG_LOG2] = "#b2182b",     [T_AGG_KEY] = "#ef8a62",	  [T_AGG_LAT] = "#fddbc7",
	[T_BPF_LOG2] = "#1b7837",     [T_BPF_KEY] = "#7fbf7b",	  [T_BPF_LAT] = "#d9f0d3",	  [T_RUN_KEY] = "#762a83",	  [T_RUN_LAT] = "#c2a5cf",	  [T_RUN_COMM] = "#9970ab",	  [T_RUN_TID] = "#e7d4e8",	  [T_RUN_HIST] = "#40004b",	  [T_BPF_COMM] = "#a6dba0",	  [T_FLOOR] = "#ffbb78",
	[T_FLOOR_FOLLOW] = "#e7ba52", [T_FLOOR_SAME] = "#8c564b", [T_FLOOR_DIFF] = "#c49c94",
	[T_AGG_STACK] = "#9970ab", [T_AGG_STACK_FP] = "#c2a5cf", [T_BPF_STACK] = "#5aae61",
};

static const char *fmt_ns(char *buf, size_t len, double v)
{
	if (fabs(v) >= 1000)
		snprintf(buf, len, "%.0f", v);
	else if (fabs(v) >= 10)
		snprintf(buf, len, "%.1f", v);
	else
		snprintf(buf, len, "%.2f", v);
	return buf;
}

/* the uprobe figure of a workload: the library, or the CLI where the library is not run */
static const struct bench_cell *uprobe_cell(const struct bench *b, int wi)
{
	const struct bench_cell *c = &b->cell[wi][T_UPROBE];

	return c->used && !c->skip ? c : &b->cell[wi][T_UPROBE_CLI];
}

static bool has(const struct bench_cell *c)
{
	return c->used && !c->skip && c->med > 0;
}

static const struct bench_cell *floor_cell(const struct bench *b)
{
	for (int i = 0; i < b->nw; i++)
		if (b->w[i].kind == BK_FLOOR)
			return &b->cell[i][T_FLOOR];
	return NULL;
}

enum { R_UK, R_UB, R_GU, R_UF, R_KF, R_KR, R_GF, R_BH, R_BK, R_BL, R_KH, R_TK, R_JK, R_RK,
       R_TKF, R_TBP, NRATIOS };
/* uprobe: the trap path (a stop a hit); fast: a counting probe on the fast path;
   records: a recording probe on the fast path (the agent and the ring) */
static const char *const ratio_names[NRATIOS] = { "uprobe/kernel", "uprobe/bpftrace",
						  "gdb/uprobe",	   "uprobe/floor",
						  "kernel/fast",   "kernel/records",
						  "gdb/fast",	   "bpftrace/uprobe hist",
						  "bpftrace/uprobe keyed", "bpftrace/uprobe latency",
						  "kernel event/uprobe hist",
						  "trace text/kernel", "trace json/kernel",
						  "trace raw/kernel", "trace text/kernel file",
						  "trace text/bpftrace printf" };

/* NAN where a side is missing */
static void ratios(const struct bench *b, int wi, double *r)
{
	const struct bench_cell *u = uprobe_cell(b, wi), *f = floor_cell(b);
	const struct bench_cell *k = &b->cell[wi][T_KERNEL], *bt = &b->cell[wi][T_BPFTRACE];
	const struct bench_cell *g = &b->cell[wi][T_GDB];

	r[R_UK] = has(u) && has(k) ? u->med / k->med : NAN;
	r[R_UB] = has(u) && has(bt) ? u->med / bt->med : NAN;
	r[R_GU] = has(u) && has(g) ? g->med / u->med : NAN;
	r[R_UF] = has(u) && f && has(f) ? u->med / f->med : NAN;
	{
		const struct bench_cell *fa = &b->cell[wi][T_FAST], *fr = &b->cell[wi][T_FAST_REC];

		r[R_KF] = has(fa) && has(k) ? k->med / fa->med : NAN;
		r[R_KR] = has(fr) && has(k) ? k->med / fr->med : NAN;
		r[R_GF] = has(fa) && has(g) ? g->med / fa->med : NAN;
	}
	{
		const struct bench_cell *c = b->cell[wi];

		r[R_BH] = has(&c[T_AGG_LOG2]) && has(&c[T_BPF_LOG2]) ? c[T_BPF_LOG2].med / c[T_AGG_LOG2].med : NAN;
		r[R_BK] = has(&c[T_AGG_KEY]) && has(&c[T_BPF_KEY]) ? c[T_BPF_KEY].med / c[T_AGG_KEY].med : NAN;
		r[R_BL] = has(&c[T_AGG_LAT]) && has(&c[T_BPF_LAT]) ? c[T_BPF_LAT].med / c[T_AGG_LAT].med : NAN;
		r[R_KH] = has(&c[T_AGG_LOG2]) && has(k) ? k->med / c[T_AGG_LOG2].med : NAN;
		/* the CLI's records per format over the kernel's event per hit */
		r[R_TK] = has(&c[T_CLI_TEXT]) && has(k) ? c[T_CLI_TEXT].med / k->med : NAN;
		r[R_JK] = has(&c[T_CLI_JSON]) && has(k) ? c[T_CLI_JSON].med / k->med : NAN;
		r[R_RK] = has(&c[T_CLI_RAW]) && has(k) ? c[T_CLI_RAW].med / k->med : NAN;
		/* each to a file as a user runs it (the peers' losses are in their rows) */
		r[R_TKF] = has(&c[T_CLI_TEXT]) && has(&c[T_KERNEL_FILE]) ?
				   c[T_CLI_TEXT].med / c[T_KERNEL_FILE].med : NAN;
		r[R_TBP] = has(&c[T_CLI_TEXT]) && has(&c[T_BPF_PRINTF]) ?
				   c[T_CLI_TEXT].med / c[T_BPF_PRINTF].med : NAN;
	}
}

static void loadavg(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");

	if (!f || !fgets(buf, (int)len, f))
		snprintf(buf, len, "?");
	buf[strcspn(buf, "\n")] = 0;
	if (f)
		fclose(f);
}

static void print_table(const struct bench *b)
{
	char m[32], lo[32], hi[32], load[128];

	loadavg(load, sizeof(load));
	printf("\n== uprobe bench: Linux %s, %d CPUs, %d rounds interleaved round-robin ==\n",
	       b->kernel_release, b->ncpus, b->rounds);
	printf("load average at the end: %s (other work on the machine widens the spread)\n",
	       load);
	printf("ns/hit = (probed loop time - unprobed loop time) / hits, median [min - max] over "
	       "the rounds;\nevery run's hit count checked.  uprobe (library): a handler per hit "
	       "(a counting one;\n(d) a counting ret_handler, (e) one that reads and checks the "
	       "6 argument registers);\n(f) is measured with the CLI, `uprobe trace -c`.  "
	       "\"uprobe, pinned\": UPROBE_PIN=1 (the engine thread\nfollows the "
	       "tracee's CPU).  kernel: a uprobe_events event per hit (e: the 6 arguments "
	       "fetched);\nbpftrace: count() per hit (e: the 6 arguments read and checked).  "
	       "uprobe/floor: uprobe (library) over\nthe plain ptrace floor.  (g): the loop is "
	       "timed from when both threads are\nborn; \"born\" is how long their births took "
	       "before it (the tracer stops each at its\nclone; the scheduler may queue the "
	       "woken threads on one CPU while the other idles).  "
	       "uprobe fast path: a counting probe as a jmp to a trampoline (uprobe trace -c\n"
	       "takes it too where it is safe); fast path, records: the six argument registers "
	       "recorded by the\nin-process agent into the 4 MiB ring (d: rax at the return), "
	       "as many hits as it holds (g: one ring a thread): none may\nbe lost (checked).  records, burst: the "
	       "same probe for the calibrated run, far longer: when\nthe ring is full the "
	       "thread waits for room (the default, --when-full=block; a dropped\nrecord "
	       "would be lost); records + lost checked.  trace --format raw, trace, text / json: "
	       "the CLI at\nits defaults writing every record to a file (e), formatted behind "
	       "the program from the\nspool (text, json); the file's count + lost checked; "
	       "ns/hit is the program's.  raw, drop /\ntext, json, no spool: the same "
	       "as before the spool (--when-full=drop; --spool-size 0).\n"
	       "kernel, to a file / 64M buf: the kernel's event (e's 6 arguments) with a reader "
	       "copying its\ntrace_pipe to a file while the program runs, the per-CPU buffer at "
	       "the kernel's default\n(a new instance's) / at 64 MiB; what the reader did not "
	       "get is lost.  bpftrace printf: the\n6 arguments printed, -o FILE; what is not "
	       "in the file is lost.\n"
	       "uprobe log2 hist / keyed count / latency: `uprobe trace -t` with keys=a.log2 "
	       "(the first argument),\nkeys=a (its low byte: 256 keys) and, on a return probe, "
	       "keys=$duration.log2 (per call: entry\nand return), aggregated in-process; the "
	       "table's Totals must be every hit, none dropped.\nbpftrace: hist(arg0), "
	       "@[arg0 & 255] = count(), and hist(nsecs - @start[tid]) over uprobe+uretprobe.\n\n");
	printf("%-30s %-18s %9s %10s  %s\n", "workload", "tool", "hits/run", "ns/hit",
	       "[min - max]");
	for (int i = 0; i < b->nw; i++) {
		const struct bench_workload *w = &b->w[i];
		char title[64];
		bool first = true;
		double r[NRATIOS];

		if (w->kind == BK_FLOOR)
			snprintf(title, sizeof(title), "(floor) %s", w->label);
		else
			snprintf(title, sizeof(title), "(%s) %s", w->key, w->label);
		for (int t = 0; t < T_NTOOLS; t++) {
			const struct bench_cell *c = &b->cell[i][t];

			if (!c->used)
				continue;
			printf("%-30s %-18s ", first ? title : "", bench_tool_names[t]);
			first = false;
			if (c->skip) {
				printf("%9s %10s  skipped: %s\n", "-", "-", c->skip);
				continue;
			}
			printf("%9ld %10s  [%s - %s]%s", c->n, fmt_ns(m, sizeof(m), c->med),
			       fmt_ns(lo, sizeof(lo), c->lo), fmt_ns(hi, sizeof(hi), c->hi),
			       t == T_BASE ? " ns per iteration, unprobed" : "");
			if ((t == T_FAST_REC || t == T_FAST_BURST ||
			     (t >= T_CLI_RAW && t <= T_BPF_PRINTF)) && c->hits)
				printf(" lost %.2f%%", 100.0 * (double)c->lost / (double)c->hits);
			if (w->kind == BK_MT) {
				double bm, bl, bh;

				bench_stats(c->births, b->rounds, &bm, &bl, &bh);
				printf(" born %.0f us [%.0f - %.0f]", bm / 1e3, bl / 1e3, bh / 1e3);
			}
			printf("\n");
		}
		if (w->kind == BK_FLOOR)
			continue;
		ratios(b, i, r);
		printf("%-30s %-18s ", "", "ratios");
		for (int k = 0; k < NRATIOS; k++) {
			if (isnan(r[k]))
				printf(" %s -", ratio_names[k]);
			else
				/* (f)'s uprobe is the fast path: uprobe/kernel is 0.0007 */
				printf(r[k] < 0.1 ? " %s %.2g" : " %s %.2f", ratio_names[k], r[k]);
		}
		printf("\n");
	}
	if (b->only) {
		printf("\nBENCH_TOOLS=%s: no registration part\n\n", getenv("BENCH_TOOLS"));
		return;
	}
	printf("\nregistration: attach to a running (idle) bench_target, insert N probes on "
	       "big_fn's instructions\n(uprobe: one register_uprobes() batch; kernel: define "
	       "N uprobe_events + enable), remove them\n(unregister_uprobes(); kernel: disable "
	       "+ remove), milliseconds, median [min - max] of %d rounds\n\n",
	       b->reg_rounds);
	printf("%-18s %7s %10s %24s %10s %24s\n", "tool", "probes", "attach", "insert",
	       "us/probe", "remove");
	for (int i = 0; i < b->nreg; i++) {
		const struct bench_reg_row *row = &b->reg[i];
		char ins[64], rem[64];

		printf("%-18s %7ld ", !strcmp(row->tool, "uprobe") ? "uprobe (library)"
								    : "kernel (tracefs)",
		       row->nprobes);
		if (row->skip) {
			printf("skipped: %s\n", row->skip);
			continue;
		}
		snprintf(ins, sizeof(ins), "%.2f [%.2f - %.2f]", row->insert_med * 1e3,
			 row->insert_lo * 1e3, row->insert_hi * 1e3);
		snprintf(rem, sizeof(rem), "%.2f [%.2f - %.2f]", row->remove_med * 1e3,
			 row->remove_lo * 1e3, row->remove_hi * 1e3);
		if (!strcmp(row->tool, "uprobe"))
			printf("%10.2f ", row->attach_med * 1e3);
		else
			printf("%10s ", "-");
		printf("%24s %10.1f %24s\n", ins, row->insert_med * 1e6 / (double)row->nprobes,
		       rem);
	}
	printf("\n");
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.6g", v);
}

static void json_samples(FILE *f, const double *v, int n, double scale)
{
	fputc('[', f);
	for (int r = 0; r < n; r++) {
		if (r)
			fputc(',', f);
		json_num(f, v[r] * scale);
	}
	fputc(']', f);
}

static void write_json(const struct bench *b, const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "bench: %s: %s\n", path, strerror(errno));
		return;
	}
	fprintf(f, "{\n  \"kernel\": ");
	json_str(f, b->kernel_release);
	{
		char load[128];

		loadavg(load, sizeof(load));
		fprintf(f, ",\n  \"loadavg_at_end\": ");
		json_str(f, load);
	}
	fprintf(f, ",\n  \"cpus\": %d,\n  \"rounds\": %d,\n  \"run_seconds\": %g,\n", b->ncpus,
		b->rounds, b->run_seconds);
	fprintf(f, "  \"unit\": \"ns per hit, (probed - unprobed loop time) / hits\",\n");
	fprintf(f, "  \"workloads\": [\n");
	for (int i = 0; i < b->nw; i++) {
		const struct bench_workload *w = &b->w[i];
		double r[NRATIOS];
		bool first = true;

		fprintf(f, "    {\"key\": ");
		json_str(f, w->key);
		fprintf(f, ", \"label\": ");
		json_str(f, w->label);
		fprintf(f, ", \"tools\": {\n");
		for (int t = 0; t < T_NTOOLS; t++) {
			const struct bench_cell *c = &b->cell[i][t];

			if (!c->used)
				continue;
			fprintf(f, "%s      ", first ? "" : ",\n");
			first = false;
			json_str(f, bench_tool_keys[t]);
			fprintf(f, ": {\"name\": ");
			json_str(f, t == T_UPROBE ? "uprobe (library API)" : bench_tool_names[t]);
			if (c->skip) {
				fprintf(f, ", \"skipped\": ");
				json_str(f, c->skip);
				fputc('}', f);
				continue;
			}
			fprintf(f, ", \"hits_per_run\": %ld, \"median\": ", c->n);
			json_num(f, c->med);
			fprintf(f, ", \"min\": ");
			json_num(f, c->lo);
			fprintf(f, ", \"max\": ");
			json_num(f, c->hi);
			fprintf(f, ", \"per_hit\": ");
			json_samples(f, c->per_hit, b->rounds, 1);
			fprintf(f, ", \"loop_ns\": ");
			json_samples(f, c->ns, b->rounds, 1);
			if (t == T_FAST_REC || t == T_FAST_BURST ||
			    (t >= T_CLI_RAW && t <= T_BPF_PRINTF))
				fprintf(f, ", \"records_lost\": %llu, \"records_hits\": %llu",
					(unsigned long long)c->lost, (unsigned long long)c->hits);
			if (w->kind == BK_MT) {
				fprintf(f, ", \"births_ns\": ");
				json_samples(f, c->births, b->rounds, 1);
			}
			fputc('}', f);
		}
		fprintf(f, "\n    }");
		if (w->kind != BK_FLOOR) {
			ratios(b, i, r);
			fprintf(f, ", \"ratios\": {");
			for (int k = 0; k < NRATIOS; k++) {
				fprintf(f, "%s", k ? ", " : "");
				json_str(f, ratio_names[k]);
				fprintf(f, ": ");
				json_num(f, r[k]);
			}
			fputc('}', f);
		}
		fprintf(f, "}%s\n", i + 1 < b->nw ? "," : "");
	}
	fprintf(f, "  ],\n  \"registration_rounds\": %d,\n  \"registration\": [\n",
		b->reg_rounds);
	for (int i = 0; i < b->nreg; i++) {
		const struct bench_reg_row *row = &b->reg[i];

		fprintf(f, "    {\"tool\": ");
		json_str(f, row->tool);
		fprintf(f, ", \"probes\": %ld", row->nprobes);
		if (row->skip) {
			fprintf(f, ", \"skipped\": ");
			json_str(f, row->skip);
		} else {
			fprintf(f, ", \"attach_ms\": ");
			json_num(f, strcmp(row->tool, "uprobe") ? NAN : row->attach_med * 1e3);
			fprintf(f, ", \"insert_ms\": {\"median\": ");
			json_num(f, row->insert_med * 1e3);
			fprintf(f, ", \"min\": ");
			json_num(f, row->insert_lo * 1e3);
			fprintf(f, ", \"max\": ");
			json_num(f, row->insert_hi * 1e3);
			fprintf(f, ", \"samples\": ");
			json_samples(f, row->insert, b->reg_rounds, 1e3);
			fprintf(f, "}, \"remove_ms\": {\"median\": ");
			json_num(f, row->remove_med * 1e3);
			fprintf(f, ", \"min\": ");
			json_num(f, row->remove_lo * 1e3);
			fprintf(f, ", \"max\": ");
			json_num(f, row->remove_hi * 1e3);
			fprintf(f, ", \"samples\": ");
			json_samples(f, row->remove, b->reg_rounds, 1e3);
			fputc('}', f);
		}
		fprintf(f, "}%s\n", i + 1 < b->nreg ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	fclose(f);
}

static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else
			fputc(*s, f);
	}
}

static void write_svg(const struct bench *b, const char *path)
{
	const double bar_w = 20, gap = 40, left = 70, top = 60, plot_h = 360, bottom = 70;
	double vmin = INFINITY, vmax = 0, lmin, lmax, x, width;
	int nbars = 0, ngroups = 0;
	FILE *f;

	for (int i = 0; i < b->nw; i++) {
		int bars = 0;

		for (int t = T_UPROBE; t < T_NTOOLS; t++) {
			const struct bench_cell *c = &b->cell[i][t];

			if (!has(c))
				continue;
			bars++;
			vmin = fmin(vmin, c->lo > 0 ? c->lo : c->med);
			vmax = fmax(vmax, c->hi);
		}
		if (bars) {
			nbars += bars;
			ngroups++;
		}
	}
	if (!nbars)
		return;
	lmin = floor(log10(vmin));
	lmax = ceil(log10(vmax));
	if (lmax <= lmin)
		lmax = lmin + 1;
	width = left + nbars * bar_w + ngroups * gap + 20;
	if (width < 760)
		width = 760;
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "bench: %s: %s\n", path, strerror(errno));
		return;
	}
#define Y(v) (top + plot_h - (log10(v) - lmin) / (lmax - lmin) * plot_h)
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		   "font-family=\"sans-serif\" font-size=\"11\">\n",
		width, top + plot_h + bottom + 20 * ((T_NTOOLS + 3) / 4));
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"14\" font-weight=\"bold\">"
		   "ns per hit (log scale), median with min-max, %d rounds, Linux ",
		left, b->rounds);
	xml_text(f, b->kernel_release);
	fprintf(f, "</text>\n");
	for (double d = lmin; d <= lmax; d++) {
		double y = top + plot_h - (d - lmin) / (lmax - lmin) * plot_h;

		fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			left, width - 10, y, y);
		fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", left - 6,
			y + 4, pow(10, d));
	}
	fprintf(f, "<text x=\"16\" y=\"%.0f\" transform=\"rotate(-90 16 %.0f)\" "
		   "text-anchor=\"middle\">ns per hit</text>\n",
		top + plot_h / 2, top + plot_h / 2);
	x = left + gap / 2;
	for (int i = 0; i < b->nw; i++) {
		const struct bench_workload *w = &b->w[i];
		double x0 = x;
		int bars = 0;

		for (int t = T_UPROBE; t < T_NTOOLS; t++) {
			const struct bench_cell *c = &b->cell[i][t];
			double y, ylo, yhi;
			char v[32];

			if (!has(c))
				continue;
			y = Y(c->med);
			ylo = Y(c->lo > 0 ? c->lo : c->med);
			yhi = Y(c->hi);
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" "
				   "fill=\"%s\"><title>%s: %s ns</title></rect>\n",
				x, y, bar_w - 2, top + plot_h - y, colors[t], bench_tool_names[t],
				fmt_ns(v, sizeof(v), c->med));
			fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
				   "stroke=\"black\"/>\n",
				x + bar_w / 2 - 1, x + bar_w / 2 - 1, ylo, yhi);
			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" "
				   "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
				x + bar_w / 2 + 2, yhi - 3, x + bar_w / 2 + 2, yhi - 3, v);
			x += bar_w;
			bars++;
		}
		if (!bars)
			continue;
		fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">(%s)</text>\n",
			(x0 + x) / 2, top + plot_h + 16, w->key);
		fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" font-size=\"9\">",
			(x0 + x) / 2, top + plot_h + 30);
		xml_text(f, w->kind == BK_FLOOR ? "ptrace floor" : w->label);
		fprintf(f, "</text>\n");
		x += gap;
	}
	for (int t = T_UPROBE, k = 0; t < T_NTOOLS; t++) {
		double lx = left + (k % 4) * 170, ly = top + plot_h + 50 + (k / 4) * 18;

		if (t == T_BPFTRACE && b->bpftrace_skip)
			continue;
		fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
			   "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
			lx, ly, colors[t], lx + 16, ly + 10, bench_tool_names[t]);
		k++;
	}
#undef Y
	fprintf(f, "</svg>\n");
	fclose(f);
}

void bench_report(struct bench *b)
{
	char path[4096];

	print_table(b);
	snprintf(path, sizeof(path), "%s/bench/results.json", b->build);
	write_json(b, path);
	printf("JSON: %s\n", path);
	snprintf(path, sizeof(path), "%s/bench/results.svg", b->build);
	write_svg(b, path);
	printf("SVG:  %s\n", path);
	fflush(stdout);
}
