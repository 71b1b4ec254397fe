/* The AF_XDP sockets of a device's receive queues: xsks[i] is the socket
 * bound to queue i (src/backend/xdp registers one per queue). Included by
 * the programs that feed sockets. */
#pragma once
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");
