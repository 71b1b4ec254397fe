/* The lab's sink, on the sink's veth, as an XDP program or (cheaper for
 * frames that arrive as socket buffers) a tc classifier: it counts the
 * probes the device under test delivered, notes the highest sequence number (loss is what is
 * missing below it) and frames that came after a higher one (reordering),
 * keeps a histogram of one-way latency from the generator's stamp (both ends
 * read the same clock), checks TTL and the IPv4 header checksum, remembers
 * the first probe's MACs, and drops the probe. Any other frame goes on to
 * the kernel's stack, so that the sink's host still answers (ping through
 * the device under test, its neighbour resolution) while it counts. */
#include "common.h"

/* Latency in ns, log-linear: 32 buckets per power of two (3% wide). */
#define SUB_BITS 5
#define LAT_BUCKETS (64 << SUB_BITS)

/* Everything the sink counts, one per CPU (one lookup per frame). */
struct sink_state {
	__u64 probes;
	__u64 other;
	__u64 reordered;
	__u64 bad_csum;
	__u64 bytes;
	__u64 next_seq;  /* highest sequence number seen + 1, on this CPU */
	__u64 ttl_min;   /* 256 - lowest TTL, so that 0 means "none yet" */
	__u64 ttl_max;
	__u64 first_ns;
	__u64 last_ns;   /* arrival of the last timed probe */
	__u64 timed;     /* probes in the latency histogram */
	__u64 lat[LAT_BUCKETS]; /* latency histogram, see lat_bucket() */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sink_state);
} sink_stats SEC(".maps");

/* Set by user space: a probe is timed when (seq & mask) == 0. Reading the
 * clock is the dearest step here, so at the highest rates the latency
 * histogram can be kept from a sample (every count stays exact). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sink_cfg SEC(".maps");

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

/* A big-endian 64-bit field at any alignment in the packet (x86 loads it
 * in one instruction; the verifier allows unaligned packet access there). */
static __always_inline __u64 be64_at(const void *p)
{
	return bpf_be64_to_cpu(*(const __u64 *)p);
}

static __always_inline void note_probe(struct sink_state *st, struct ethhdr *eth,
				       struct iphdr *ip, struct probe *pr, __u64 bytes)
{
	__u64 seq = be64_at(&pr->seq);
	__u32 zero = 0;
	__u64 *mask = bpf_map_lookup_elem(&sink_cfg, &zero);

	st->probes++;
	st->bytes += bytes;
	if (seq + 1 <= st->next_seq)
		st->reordered++;
	else
		st->next_seq = seq + 1;
	if (!ip_checksum_ok(ip))
		st->bad_csum++;
	if (256 - ip->ttl > st->ttl_min)
		st->ttl_min = 256 - ip->ttl;
	if (ip->ttl > st->ttl_max)
		st->ttl_max = ip->ttl;
	if (mask && (seq & *mask) && st->first_ns)
		return;
	__u64 now = bpf_ktime_get_ns();
	__u64 sent = be64_at(&pr->sent_ns);
	st->timed++;
	st->lat[lat_bucket(now > sent ? now - sent : 0)]++;
	if (st->first_ns == 0) {
		st->first_ns = now;
		__u32 d = 0, s = 1;
		__u64 dm = mac48(eth->h_dest), sm = mac48(eth->h_source);
		bpf_map_update_elem(&sink_macs, &d, &dm, BPF_ANY);
		bpf_map_update_elem(&sink_macs, &s, &sm, BPF_ANY);
	}
	st->last_ns = now;
}

/* Counts one frame between `data` and `data_end`: 1 if it is a probe. */
static __always_inline int sink(void *data, void *data_end)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct probe *pr = data + HDR_LEN;
	__u32 zero = 0;
	struct sink_state *st = bpf_map_lookup_elem(&sink_stats, &zero);

	if (!st)
		return 0;
	if ((void *)(pr + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5 || ip->protocol != IPPROTO_UDP || pr->magic != bpf_htonl(PROBE_MAGIC)) {
		st->other++;
		return 0;
	}
	note_probe(st, eth, ip, pr, data_end - data);
	return 1;
}

SEC("xdp")
int xdp_sink(struct xdp_md *ctx)
{
	return sink((void *)(long)ctx->data, (void *)(long)ctx->data_end) ? XDP_DROP : XDP_PASS;
}

/* tc ingress: a frame the sink's veth received as a socket buffer is
 * counted where it is, without the copy veth makes to run XDP on it. */
SEC("classifier")
int tc_sink(struct __sk_buff *skb)
{
	if (skb->data_end - skb->data < HDR_LEN + sizeof(struct probe))
		bpf_skb_pull_data(skb, HDR_LEN + sizeof(struct probe));
	/* TC_ACT_SHOT, or TC_ACT_OK */
	return sink((void *)(long)skb->data, (void *)(long)skb->data_end) ? 2 : 0;
}

char LICENSE[] SEC("license") = "GPL";
