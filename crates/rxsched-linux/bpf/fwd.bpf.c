/* The fastest forwarding this lab can do, as a peer for the user-space
 * router: IPv4 forwarding in XDP with the kernel's FIB and neighbour table
 * (bpf_fib_lookup) and bpf_redirect to the output device. Anything it
 * cannot forward goes on to the kernel's stack. */
#include "common.h"

#ifndef AF_INET
#define AF_INET 2
#endif

enum { F_FORWARDED, F_PASSED, F_NO_FIB, F_N };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, F_N);
	__type(key, __u32);
	__type(value, __u64);
} fwd_stats SEC(".maps");

SEC("xdp")
int xdp_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct bpf_fib_lookup fib = {};

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ttl <= 1) {
		BUMP(fwd_stats, F_PASSED, 1);
		return XDP_PASS;
	}
	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = bpf_ntohs(ip->tot_len);
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	fib.ifindex = ctx->ingress_ifindex;
	if (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0) != BPF_FIB_LKUP_RET_SUCCESS) {
		BUMP(fwd_stats, F_NO_FIB, 1);
		return XDP_PASS;
	}
	decrement_ttl(ip);
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	BUMP(fwd_stats, F_FORWARDED, 1);
	return bpf_redirect(fib.ifindex, 0);
}

char LICENSE[] SEC("license") = "GPL";
