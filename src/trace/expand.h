/* SPDX-License-Identifier: MIT */
/*
 * Spec forms that stand for one or more of the kernel's p:/r: specs (spec.h), turned
 * into them before they reach a backend, so that the ptrace tracer and the kernel's
 * uprobe_events see the same probes:
 *
 *   USDT       u[:[GRP/]EVENT] PATH:[PROVIDER:]NAME [FETCHARGS]
 *              -> p:GRP/EVENT PATH:0xOFFSET(0xREF_CTR_OFFSET) FETCHARGS, one per site
 *              of the probe (EVENT, EVENT_1, ...; default EVENT: NAME).  $argN in
 *              FETCHARGS is the note's Nth operand ("-4@%edi" -> %di), typed by its
 *              size and sign when it stands alone ("$arg3" -> "%ax:s32"); without
 *              FETCHARGS every operand is fetched, arg1..argN.
 *   wildcards  p|r[:GRP/[*]] PATH:GLOB[+OFF][%return] [FETCHARGS]
 *              -> one spec per function whose name matches the glob (fnmatch), named
 *              after it (characters an event name cannot hold become '_').  Aliases
 *              (one address, several names) give one spec, under the name people
 *              call it by (a global one, fewest leading '_', shortest: malloc, not
 *              __GI___libc_malloc); IFUNC resolvers, and every name at a resolver's
 *              address (glibc's local strlen_ifunc), are left out: each runs once,
 *              when the dynamic linker binds the symbol.
 *   DWARF      see trace/dwarf.h: PATH:FUNC with variable names, PATH:FILE:LINE,
 *              PATH:FUNC:LINE.
 *
 * Any other spec is passed on as it is.  Nothing here prints or exits.  Prefix:
 * up_expand_.
 */
#ifndef UPROBE_TRACE_EXPAND_H
#define UPROBE_TRACE_EXPAND_H

#include "trace/spec.h"

struct up_expand_stats {
	unsigned specs;	  /* specs made */
	unsigned matched; /* functions whose name matched a glob */
	unsigned aliases; /* of them, left out as another name of an address already probed */
	unsigned ifuncs;  /* of them, left out as IFUNC resolvers */
};

/* Called with each spec text made; a non-zero return stops the expansion and is returned. */
typedef int (*up_expand_fn)(void *ctx, const char *spec);

/*
 * Expands text (see above) and calls fn with each resulting spec.  Returns 0 with
 * *stats filled (stats may be NULL), -EINVAL with err saying where and why (a caret
 * into text, or pos -1), -ENOENT (no such file, probe or function; err says),
 * -ENOMEM, or what fn returned.
 */
int up_expand(const char *text, up_expand_fn fn, void *ctx, struct up_expand_stats *stats,
	      struct up_spec_err *err);

#endif
