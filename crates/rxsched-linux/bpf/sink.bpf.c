/* The lab's sink, on the sink's veth, as an XDP program or (cheaper for
 * frames that arrive as socket buffers) a tc classifier: it counts the
 * probes the device under test delivered, notes the highest sequence number (loss is what is
 * missing below it) and frames that came after a higher one (reordering),
 * keeps a histogram of one-way latency from the generator's stamp (both ends
 * read the same clock), checks TTL and the IPv4 header checksum, remembers
 * the first probe's MACs, and drops the frame. */
#include "common.h"

enum {
	S_PROBES,
	S_OTHER,
	S_REORDERED,
	S_BAD_CSUM,
	S_BYTES,
	S_NEXT_SEQ,  /* highest sequence number seen + 1, on this CPU */
	S_TTL_MIN,   /* 256 - lowest TTL, so that 0 means "none yet" */
	S_TTL_MAX,
	S_FIRST_NS,
	S_LAST_NS,
	S_N
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, S_N);
	__type(key, __u32);
	__type(value, __u64);
} sink_stats SEC(".maps");

/* Latency in ns, log-linear: 32 buckets per power of two (3% wide). */
#define SUB_BITS 5
#define LAT_BUCKETS (64 << SUB_BITS)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LAT_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} sink_lat SEC(".maps");

/* The first probe's destination and source MACs, low 48 bits each. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} sink_macs SEC(".maps");

static __always_inline __u32 ilog2(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) r += 1;
	return r;
}

/* Values below 2^SUB_BITS have a bucket each; above, a power of two is
 * split into 2^SUB_BITS buckets. User space inverts this (sink.rs). */
static __always_inline __u32 lat_bucket(__u64 ns)
{
	if (ns < (1 << SUB_BITS))
		return ns;
	__u32 e = ilog2(ns);
	__u32 idx = ((e - SUB_BITS + 1) << SUB_BITS) + ((ns >> (e - SUB_BITS)) & ((1 << SUB_BITS) - 1));
	return idx < LAT_BUCKETS ? idx : LAT_BUCKETS - 1;
}

static __always_inline __u64 mac48(const unsigned char *m)
{
	return ((__u64)m[0] << 40) | ((__u64)m[1] << 32) | ((__u64)m[2] << 24) |
	       ((__u64)m[3] << 16) | ((__u64)m[4] << 8) | (__u64)m[5];
}

static __always_inline int ip_checksum_ok(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

static __always_inline void set_max(__u32 key, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&sink_stats, &key);
	if (p && v > *p)
		*p = v;
}

static __always_inline void note_probe(struct ethhdr *eth, struct iphdr *ip, struct probe *pr, __u64 bytes)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 seq = bpf_be64_to_cpu(pr->seq);
	__u64 sent = bpf_be64_to_cpu(pr->sent_ns);
	__u32 k = S_NEXT_SEQ;
	__u64 *next = bpf_map_lookup_elem(&sink_stats, &k);

	BUMP(sink_stats, S_PROBES, 1);
	BUMP(sink_stats, S_BYTES, bytes);
	if (next) {
		if (seq + 1 <= *next)
			BUMP(sink_stats, S_REORDERED, 1);
		else
			*next = seq + 1;
	}
	BUMP(sink_lat, lat_bucket(now > sent ? now - sent : 0), 1);
	if (!ip_checksum_ok(ip))
		BUMP(sink_stats, S_BAD_CSUM, 1);
	set_max(S_TTL_MIN, 256 - ip->ttl);
	set_max(S_TTL_MAX, ip->ttl);
	k = S_FIRST_NS;
	__u64 *first = bpf_map_lookup_elem(&sink_stats, &k);
	if (first && *first == 0) {
		*first = now;
		__u32 d = 0, s = 1;
		__u64 dm = mac48(eth->h_dest), sm = mac48(eth->h_source);
		bpf_map_update_elem(&sink_macs, &d, &dm, BPF_ANY);
		bpf_map_update_elem(&sink_macs, &s, &sm, BPF_ANY);
	}
	set_max(S_LAST_NS, now);
}

/* Counts one frame between `data` and `data_end`. */
static __always_inline void sink(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct probe *pr = data + HDR_LEN;

	if ((void *)(pr + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5 || ip->protocol != IPPROTO_UDP || pr->magic != bpf_htonl(PROBE_MAGIC)) {
		BUMP(sink_stats, S_OTHER, 1);
		return;
	}
	note_probe(eth, ip, pr, data_end - data);
}

SEC("xdp")
int xdp_sink(struct xdp_md *ctx)
{
	sink((void *)(long)ctx->data, (void *)(long)ctx->data_end);
	return XDP_DROP;
}

/* tc ingress: a frame the sink's veth received as a socket buffer is
 * counted where it is, without the copy veth makes to run XDP on it. */
SEC("classifier")
int tc_sink(struct __sk_buff *skb)
{
	if (skb->data_end - skb->data < HDR_LEN + sizeof(struct probe))
		bpf_skb_pull_data(skb, HDR_LEN + sizeof(struct probe));
	sink((void *)(long)skb->data, (void *)(long)skb->data_end);
	return 2; /* TC_ACT_SHOT */
}

char LICENSE[] SEC("license") = "GPL";
