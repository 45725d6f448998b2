// SPDX-License-Identifier: MIT
/*
 * The tracer's side of the aggregation keys tid and comm: two words of the region's
 * ctl (agent/abi.h) that the agent reads at each hit keyed by them.  The ctl is the
 * region's first page, in the tracer's mapping too.
 */
#include "agent/agg_thr.h"
#include "agent/abi.h"
#include "agent/ring.h"

static struct upa_ctl *ctl_of(const struct up_agent *a)
{
	return (struct upa_ctl *)up_agent_region(a);
}

void up_agent_tid_off(struct up_agent *a, uint32_t off)
{
	__atomic_store_n(&ctl_of(a)->tid_off, off, __ATOMIC_RELEASE);
}

uint32_t up_agent_tid_off_get(const struct up_agent *a)
{
	return __atomic_load_n(&ctl_of(a)->tid_off, __ATOMIC_RELAXED);
}

void up_agent_comm_changed(struct up_agent *a)
{
	__atomic_fetch_add(&ctl_of(a)->comm_gen, 1, __ATOMIC_RELEASE);
}
