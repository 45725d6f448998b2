// SPDX-License-Identifier: MIT
/*
 * The tracer's side of the aggregation key comm: a word of the region's ctl
 * (agent/abi.h) that the agent reads at each hit keyed by it.  The ctl is the region's
 * first page, in the tracer's mapping too.  (tid_off is ring.c's: the tracer keeps its
 * own copy, never reading the process-writable word back.)
 */
#include "agent/agg_thr.h"
#include "agent/abi.h"
#include "agent/ring.h"

static struct upa_ctl *ctl_of(const struct up_agent *a)
{
	return (struct upa_ctl *)up_agent_region(a);
}

void up_agent_comm_changed(struct up_agent *a)
{
	__atomic_fetch_add(&ctl_of(a)->comm_gen, 1, __ATOMIC_RELEASE);
}
