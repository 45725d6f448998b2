// SPDX-License-Identifier: MIT
/*
 * A record's memory entries (agent/abi.h: struct upa_mem and its bytes), read back by
 * address: for the live drain (ring.c) and for raw trace files (trace/raw.c).  Pure:
 * no process, no ring, nothing but the bytes given.
 */
#include <errno.h>
#include <string.h>

#include "agent/abi.h"
#include "agent/rec.h"

int up_rec_mem_read(const uint8_t *mem, size_t memlen, uint64_t addr, void *buf, size_t len)
{
	size_t at = 0;
	uint64_t off;

	while (at + sizeof(struct upa_mem) <= memlen) {
		const struct upa_mem *m = (const struct upa_mem *)(mem + at);
		const uint8_t *data = (const uint8_t *)(m + 1);

		at += sizeof(*m);
		if (m->flags & UPA_MEM_FAULT)
			continue;
		/* its bytes within the record: compared before any sum (a len near 2^32
		   wrapped UPA_ALIGN8's 32-bit addition to 0 and was read past the record:
		   fuzz_region) */
		if (m->len > memlen - at)
			break;
		at += UPA_ALIGN8((uint64_t)m->len);
		/* no sum that could wrap: a raw file's addresses are anything */
		if (addr < m->addr || addr - m->addr > m->len)
			continue;
		off = addr - m->addr;
		if (len <= m->len - off) {
			memcpy(buf, data + off, len);
			return 0;
		}
		if ((m->flags & UPA_MEM_STRING) && off < m->len) {
			size_t have = (size_t)(m->len - off); /* < len */

			memcpy(buf, data + off, have);
			memset((uint8_t *)buf + have, 0, len - have);
			return 0;
		}
	}
	return -EFAULT;
}
