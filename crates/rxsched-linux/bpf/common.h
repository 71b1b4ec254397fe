/* Shared by rxsched's XDP programs. Built by build.sh with Debian's clang
 * and libbpf headers; the objects in obj/ are committed and loaded by the
 * rxsched binary, so building rxsched needs no C toolchain. */
#pragma once
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* A probe frame (see rxsched-linux/src/wire.rs): Ethernet, IPv4 without
 * options, UDP, then { magic, seq, sent_ns }, all big-endian. */
#define HDR_LEN (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))
#define PROBE_MAGIC 0x52585343 /* "RXSC", as wire.rs */

struct probe {
	__u32 magic;
	__u64 seq;
	__u64 sent_ns;
} __attribute__((packed));

/* The per-CPU counter at `key` of `map`, incremented by `v`. */
#define BUMP(map, key, v)                                      \
	do {                                                   \
		__u32 k_ = (key);                              \
		__u64 *p_ = bpf_map_lookup_elem(&(map), &k_);  \
		if (p_)                                        \
			*p_ += (v);                            \
	} while (0)

/* TTL minus one, with the checksum updated incrementally (RFC 1624). */
static __always_inline void decrement_ttl(struct iphdr *ip)
{
	__u32 check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xFFFF));
	ip->ttl--;
}
