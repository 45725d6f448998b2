// SPDX-License-Identifier: MIT
/*
 * The session's numbers as Prometheus metrics (session.h, up_trace_print_metrics): a
 * hit counter and a lost-records counter per probe, labelled with the probe's group,
 * event and file, and every hist trigger's table as metric families (hist.h,
 * up_hist_print_prom).  Read from the live tables, as the hist printers read them: the
 * agents' per-CPU tables in the shared region (copied, never trusted as layout), the
 * counters, nothing stopped.  Text exposition format 0.0.4, or OpenMetrics 1.0.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "trace/prom.h"
#include "trace/session_int.h"

static void label_value(FILE *out, const char *s)
{
	up_prom_escape(out, s, s ? strlen(s) : 0, true);
}

static void probe_labels(FILE *out, const struct tspec *ts)
{
	const struct up_spec *s = &ts->spec;

	if (s->kind == UP_SPEC_SEED) {
		fprintf(out, "{group=\"seed\",event=\"");
		label_value(out, ts->label);
		fprintf(out, "\",file=\"\"}");
		return;
	}
	fputs("{group=\"", out);
	label_value(out, s->group);
	fputs("\",event=\"", out);
	label_value(out, s->event);
	fputs("\",file=\"", out);
	label_value(out, s->path);
	fputs("\"}", out);
}

/* uprobe_hist_GROUP_EVENT (or the trigger's name=), made a metric name; a second
   table of the same name gets _2, _3 ... */
static void family_name(const struct tspec *ts, unsigned nth, char *buf, size_t size)
{
	const struct up_hist *h = ts->hist;
	size_t n = (size_t)snprintf(buf, size, "uprobe_hist_");

	if (h->name[0]) {
		n += (size_t)snprintf(buf + n, size - n, "%s", h->name);
	} else {
		n += (size_t)snprintf(buf + n, size - n, "%s_%s", ts->spec.group, ts->spec.event);
	}
	for (char *p = buf; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != ':')
			*p = '_';
	if (nth > 1 && n < size)
		snprintf(buf + n, size - n, "_%u", nth);
}

int up_trace_print_metrics(struct up_trace *tr, FILE *out, bool om, unsigned max_series)
{
	const char *c = om ? "" : "_total";
	char fam[3 * UP_SPEC_NAME_MAX + 32];

	fprintf(out, "# HELP uprobe_probe_hits%s Hits of each probe, on the fast path and the "
		     "trap path, in every traced process.\n# TYPE uprobe_probe_hits%s counter\n",
		c, c);
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];

		if (ts->removed || ts->internal)
			continue;
		fputs("uprobe_probe_hits_total", out);
		probe_labels(out, ts);
		fprintf(out, " %llu\n", (unsigned long long)up_trace_hits(tr, i));
	}
	fprintf(out, "# HELP uprobe_records_lost%s Records of each probe dropped because the "
		     "ring was full.\n# TYPE uprobe_records_lost%s counter\n",
		c, c);
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];

		if (ts->removed || ts->internal)
			continue;
		fputs("uprobe_records_lost_total", out);
		probe_labels(out, ts);
		fprintf(out, " %llu\n", (unsigned long long)up_trace_spec_lost(tr, i));
	}
	for (unsigned i = 0; i < tr->nspecs; i++) {
		struct tspec *ts = tr->specs[i];
		struct up_hist_table *t;
		unsigned nth = 1;
		char help[512];
		int rc;

		if (!ts->hist || ts->removed)
			continue;
		family_name(ts, 1, fam, sizeof(fam));
		for (unsigned j = 0; j < i; j++) {
			char other[sizeof(fam)];

			if (!tr->specs[j]->hist || tr->specs[j]->removed)
				continue;
			family_name(tr->specs[j], 1, other, sizeof(other));
			nth += !strcmp(other, fam);
		}
		if (nth > 1)
			family_name(ts, nth, fam, sizeof(fam));
		t = tr_hist_live(tr, ts);
		if (!t)
			return -ENOMEM;
		snprintf(help, sizeof(help), "uprobe hist trigger %s:%s", ts->label,
			 ts->hist_text ? strchr(ts->hist_text, ':') ? strchr(ts->hist_text, ':') + 1
								    : ts->hist_text
				       : "hist");
		rc = up_hist_print_prom(ts->hist, t, fam, help, max_series, om, out);
		up_hist_table_free(t);
		if (rc)
			return rc;
	}
	if (om)
		fputs("# EOF\n", out);
	return ferror(out) ? -EIO : 0;
}
