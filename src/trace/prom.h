/* SPDX-License-Identifier: MIT */
/*
 * Prometheus's text exposition format (0.0.4) and OpenMetrics, the pieces every writer
 * of metrics shares (trace/metrics.c, trace/hist.c, bt/maps.c): escaping and a stack as
 * a label value.  Prefix: up_prom_.
 */
#ifndef UPROBE_TRACE_PROM_H
#define UPROBE_TRACE_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* s (at most n bytes, to its NUL) escaped: \\ and \n, and \" too in a label value. */
void up_prom_escape(FILE *out, const char *s, size_t n, bool label);

/* A stack kept as frames one a line, innermost first (blanks before a frame ignored),
   as a label value: the frames outermost first, joined by ';' as folded stacks are;
   at most 64 frames. */
void up_prom_frames(FILE *out, const char *frames);

#endif
