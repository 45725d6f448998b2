// SPDX-License-Identifier: MIT
/*
 * Stacks through the library's own code (uprobe.h uprobe_code_row): the probe-site
 * layer knows its trampolines' rows and the agent's; a process's layer by its pid.
 * Beside uprobes.c, whose insides (uprobes_int.h) it reads.
 */
#include "uprobes_int.h"

int uprobe_code_row(struct uprobe_ctx *ctx, pid_t pid, uint64_t pc, void *row)
{
	struct uproc *up = NULL;

	for (struct uproc *p = ctx ? ctx->procs : NULL; p; p = p->next)
		if (p->pid == pid) {
			up = p->mm_owner ? p->mm_owner : p;
			break;
		}
	return up ? up_site_code_row(&up->sites, pc, row) : -1;
}
