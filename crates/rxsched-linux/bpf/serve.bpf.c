/* SRP's server's receive path (`rxsched serve`): UDP datagrams for a port
 * one of its consumers owns go to user space; everything else goes on to
 * the kernel's stack, so the host keeps its own traffic while it serves.
 *
 * xdp_serve is the early demultiplexer: it redirects each datagram into
 * the AF_XDP socket of the consumer that owns its port, on the queue it
 * arrived on (xsks[consumer * XSKS_QUEUES + queue]); a consumer's full
 * ring drops it there, before any copy. tc_serve, at tc ingress, marks what the
 * server takes as PACKET_OTHERHOST, so that the kernel's IP input drops it
 * at once while an AF_PACKET socket bound to IPv4 (which sees frames after
 * tc) receives it. */
#include "common.h"
#include "xsks.h"
#include <linux/pkt_cls.h>

#define PACKET_OTHERHOST_ 3

enum { O_TAKEN, O_PASSED, O_N };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, O_N);
	__type(key, __u32);
	__type(value, __u64);
} serve_stats SEC(".maps");

/* The consumers' UDP ports (host order), each to its consumer's index. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u8);
} udp_ports SEC(".maps");

/* The consumer owning the frame, if it is a first (or only) fragment of a
 * UDP datagram to a consumer's port. */
static __always_inline __u8 *ours(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp;
	__u16 port;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->protocol != IPPROTO_UDP || ip->ihl != 5 ||
	    (ip->frag_off & bpf_htons(0x1fff)) != 0)
		return 0;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return 0;
	port = bpf_ntohs(udp->dest);
	return bpf_map_lookup_elem(&udp_ports, &port);
}

SEC("xdp")
int xdp_serve(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *c = ours(data, data_end);
	__u32 key;

	if (!c || ctx->rx_queue_index >= XSKS_QUEUES) {
		BUMP(serve_stats, O_PASSED, 1);
		return XDP_PASS;
	}
	BUMP(serve_stats, O_TAKEN, 1);
	key = (__u32)*c * XSKS_QUEUES + ctx->rx_queue_index;
	return bpf_redirect_map(&xsks, key, XDP_PASS);
}

SEC("classifier")
int tc_serve(struct __sk_buff *skb)
{
	void *data, *data_end;

	bpf_skb_pull_data(skb, sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr));
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (!ours(data, data_end)) {
		BUMP(serve_stats, O_PASSED, 1);
		return TC_ACT_OK;
	}
	BUMP(serve_stats, O_TAKEN, 1);
	bpf_skb_change_type(skb, PACKET_OTHERHOST_);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
