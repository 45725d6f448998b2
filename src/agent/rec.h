/* SPDX-License-Identifier: MIT */
/*
 * A record's memory entries read back by address (agent/rec.c).  Prefix: up_rec_.
 */
#ifndef UPROBE_AGENT_REC_H
#define UPROBE_AGENT_REC_H

#include <stddef.h>
#include <stdint.h>

/*
 * Memory as the record saw it: mem[0..memlen) is a run of struct upa_mem entries, each
 * followed by its bytes (padded to 8) unless it faulted.  0 when every byte of [addr,
 * addr + len) was read (a string's bytes past its NUL read as 0), -EFAULT when its read
 * faulted or the record has no such bytes.
 */
int up_rec_mem_read(const uint8_t *mem, size_t memlen, uint64_t addr, void *buf, size_t len);

#endif
