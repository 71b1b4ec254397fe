/* The AF_XDP sockets of a device's receive queues: xsks[i] is the socket
 * bound to queue i (src/backend/xdp registers one per queue); a program
 * that feeds one socket per consumer on each queue uses
 * xsks[consumer * XSKS_QUEUES + queue] (src/backend/xdp/shared.rs).
 * Included by the programs that feed sockets. */
#pragma once
#include "common.h"

#define XSKS_QUEUES 64
#define XSKS_CONSUMERS 16

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, XSKS_QUEUES * XSKS_CONSUMERS);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");
