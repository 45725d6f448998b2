/* SPDX-License-Identifier: MIT */
/*
 * The arithmetic of aggregation that the in-process agent (blob/agent.c) and the
 * tracer (trace/hist.c, for hits taken on the trap path) must do alike, so that a
 * table comes out the same whichever path a hit took.  Freestanding: no libc, only
 * static inline functions on fixed-width integers.  Prefix: upa_agg_.
 */
#ifndef UPROBE_AGENT_AGG_H
#define UPROBE_AGENT_AGG_H

#include <stdint.h>

/* The kernel's .log2 key: ilog2(roundup_pow_of_two(v)), i.e. ceil(log2(v)); 0 and 1
   both land in 2^0. */
static inline uint64_t upa_agg_log2(uint64_t v)
{
	if (v <= 1)
		return 0;
	return 64 - (uint64_t)__builtin_clzll(v - 1);
}

/* bpftrace's hist() buckets, [2^k, 2^(k+1)), where the kernel's .log2 is ceil: a
   UPA_AGG_LOG2 key whose buckets word is UPA_AGG_LOG2_FLOOR keeps v's bit length, 0 for
   0, 1 for 1, k + 1 for [2^k, 2^(k+1)) (so 0 and 1 stay apart, as bpftrace's [0] and
   [1] do).  The bucket's low bound is 0 for 0, else 1 << (key - 1). */
#define UPA_AGG_LOG2_FLOOR 1u

static inline uint64_t upa_agg_log2_floor(uint64_t v)
{
	return v ? 64 - (uint64_t)__builtin_clzll(v) : 0;
}

/* A UPA_AGG_LOG2 key: the kernel's ceil, or with buckets == UPA_AGG_LOG2_FLOOR the bit
   length. */
static inline uint64_t upa_agg_log2_key(uint64_t v, uint64_t buckets)
{
	return buckets == UPA_AGG_LOG2_FLOOR ? upa_agg_log2_floor(v) : upa_agg_log2(v);
}

/* The kernel's .buckets=N key: v rounded down to a multiple of n (n > 0).  The agent
   has no libgcc: a 64-bit division is one instruction on x86-64. */
static inline uint64_t upa_agg_bucket(uint64_t v, uint64_t n)
{
	return n ? v - v % n : v;
}

static inline uint64_t upa_agg_mix(uint64_t h, uint64_t w)
{
	h ^= w;
	h *= 0x100000001b3ull;
	return h ^ h >> 29;
}

/* A key's hash: FNV-1a over its words, never 0 or 1 (the table's free and busy).  A
   long key (a stack's 16 words) is mixed in four independent lanes, folded at the end:
   one chain of 16 multiplies was a fifth of a stack key's cost in the agent. */
static inline uint64_t upa_agg_hash(const uint64_t *w, unsigned n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	unsigned i = 0;

	if (n >= 8) {
		uint64_t l0 = h, l1 = h ^ 1, l2 = h ^ 2, l3 = h ^ 3;

		for (; i + 4 <= n; i += 4) {
			l0 = upa_agg_mix(l0, w[i]);
			l1 = upa_agg_mix(l1, w[i + 1]);
			l2 = upa_agg_mix(l2, w[i + 2]);
			l3 = upa_agg_mix(l3, w[i + 3]);
		}
		h = upa_agg_mix(upa_agg_mix(upa_agg_mix(l0, l1), l2), l3);
	}
	for (; i < n; i++)
		h = upa_agg_mix(h, w[i]);
	return h < 2 ? h + 2 : h;
}

#endif
