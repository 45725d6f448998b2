/* SPDX-License-Identifier: MIT */
/*
 * The tracer's side of the aggregation keys tid and comm (abi.h, struct upa_thr): where
 * glibc keeps each thread's tid, and the announcement that a comm may have changed.
 * Writes the region's ctl, nothing else.  Prefix: up_agent_.
 */
#ifndef UPROBE_AGENT_AGG_THR_H
#define UPROBE_AGENT_AGG_THR_H

#include <stdint.h>

struct up_agent;

/* Each thread's tid is the 4 bytes at %fs:off (0: unknown, a gettid a hit). */
void up_agent_tid_off(struct up_agent *a, uint32_t off);
uint32_t up_agent_tid_off_get(const struct up_agent *a);
/* Some thread's comm may have changed: every thread asks the kernel again at its next
   hit that keys by comm. */
void up_agent_comm_changed(struct up_agent *a);

#endif
