/* The lab's traffic generator. User space runs this program with
 * BPF_PROG_TEST_RUN in live-frames mode (BPF_F_TEST_XDP_LIVE_FRAMES), in
 * one long call on one CPU: the kernel invokes it over and over, and every
 * frame it answers XDP_TX leaves through the generator's veth. Pacing is
 * done here: until the next departure time the program answers XDP_DROP,
 * which only recycles the page. (One test-run call costs ~20 ms of fixed
 * overhead on this kernel, far too coarse to pace by.)
 *
 * Live-frames pages are recycled without being copied again, and whatever
 * the frame meets downstream (a router rewriting MACs and TTL) writes into
 * that page. So each frame gets its whole header from the template again. */
#include "common.h"

struct gen_cfg {
	__u64 interval_fp; /* ns between frames << 10; 0: as fast as possible */
	__u64 max_lag_fp;  /* a deficit beyond this is forgiven, not caught up */
	__u64 limit;       /* stop sending after this many frames (0: none) */
	__u64 next_fp;     /* state: the next departure time */
	__u64 sent;        /* state: frames sent = the next sequence number */
	__u64 first_ns;    /* state: when the first frame left */
	__u64 last_ns;     /* state: when the last frame left */
	__u64 forgiven;    /* state: times the schedule was reset */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_cfg);
} gen_cfg SEC(".maps");

struct hdr {
	__u8 b[HDR_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hdr);
} gen_hdr SEC(".maps");

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct probe *pr = data + HDR_LEN;
	__u32 k = 0;
	struct gen_cfg *c = bpf_map_lookup_elem(&gen_cfg, &k);
	struct hdr *h = bpf_map_lookup_elem(&gen_hdr, &k);

	if (!c || !h || (void *)(pr + 1) > data_end)
		return XDP_ABORTED;
	if (c->limit && c->sent >= c->limit)
		return XDP_DROP;
	__u64 now = bpf_ktime_get_ns();
	if (c->interval_fp) {
		__u64 now_fp = now << 10;
		if (now_fp < c->next_fp)
			return XDP_DROP;
		__u64 next = c->next_fp + c->interval_fp;
		if (next + c->max_lag_fp < now_fp) {
			c->forgiven++;
			next = now_fp;
		}
		c->next_fp = next;
	}
	__builtin_memcpy(data, h->b, HDR_LEN);
	pr->magic = bpf_htonl(PROBE_MAGIC);
	pr->seq = bpf_cpu_to_be64(c->sent);
	pr->sent_ns = bpf_cpu_to_be64(now);
	if (c->sent == 0)
		c->first_ns = now;
	c->last_ns = now;
	c->sent++;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
