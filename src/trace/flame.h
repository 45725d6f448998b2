/* SPDX-License-Identifier: MIT */
/*
 * Flame graphs of counted stacks (issue 31 item 5): the stacks of stacktrace hist keys
 * merged into a tree by their frames' function names, printed folded ("main;c1;leaf
 * 1000", what flamegraph.pl, inferno and speedscope read) or drawn as an interactive
 * SVG (click a frame to zoom into it, the top line resets; a #zoom=NAME in its URL zooms
 * on load).  Prefix: up_flame_.
 */
#ifndef UPROBE_TRACE_FLAME_H
#define UPROBE_TRACE_FLAME_H

#include <stdint.h>
#include <stdio.h>

struct up_flame;

struct up_flame *up_flame_new(void);
void up_flame_free(struct up_flame *f);
/* A stack counted count times: its frames as trace names them, one a line, innermost
   first ("leaf+0x0 [prog]\nmain+0x9f [prog]\n").  0 or -ENOMEM. */
int up_flame_add(struct up_flame *f, const char *frames, uint64_t count);
/* The name a frame has in a flame graph: its function ("leaf"), else the text trace
   gives it ("[libc.so.6]+0x3c050", "[unknown]"); ';' made ':'.  Into buf. */
void up_flame_frame_name(const char *frame, size_t len, char *buf, size_t size);
/* Folded lines, outermost frame first, one a distinct stack.  0 or -errno. */
int up_flame_folded(const struct up_flame *f, FILE *out);
/* An SVG flame graph (root at the bottom), titled.  0 or -errno. */
int up_flame_svg(const struct up_flame *f, const char *title, FILE *out);

#endif
