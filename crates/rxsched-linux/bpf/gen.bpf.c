/* The lab's traffic generator. User space runs this program with
 * BPF_PROG_TEST_RUN in live-frames mode (BPF_F_TEST_XDP_LIVE_FRAMES), in
 * one long call on one CPU: the kernel invokes it over and over, and every
 * frame it answers XDP_TX leaves through the generator's veth. Pacing is
 * done here: until the next departure time the program answers XDP_DROP,
 * which only recycles the page. (One test-run call costs ~20 ms of fixed
 * overhead on this kernel, far too coarse to pace by.)
 *
 * A second stream may be mixed in (another destination port at its own
 * rate, its own sequence numbers): its frames leave between the first
 * stream's, as two senders' frames meet on a wire.
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
	__u64 mix_interval_fp; /* the mixed stream: ns between frames << 10; 0: none */
	__u64 mix_next_fp;     /* state: its next departure time */
	__u64 mix_sent;        /* state: its frames sent */
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
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct hdr);
} gen_hdr SEC(".maps");

/* The next departure after `next` on a schedule of `interval`, a deficit
 * beyond `max_lag` forgiven. */
static __always_inline __u64 next_departure(__u64 next, __u64 interval, __u64 max_lag,
					    __u64 now_fp, __u64 *forgiven)
{
	next += interval;
	if (next + max_lag < now_fp) {
		(*forgiven)++;
		next = now_fp;
	}
	return next;
}

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
	__u64 now = bpf_ktime_get_ns();
	__u64 now_fp = now << 10;
	__u32 k1 = 1;
	if (c->mix_interval_fp && now_fp >= c->mix_next_fp) {
		struct hdr *m = bpf_map_lookup_elem(&gen_hdr, &k1);
		if (!m)
			return XDP_ABORTED;
		c->mix_next_fp = next_departure(c->mix_next_fp, c->mix_interval_fp, c->max_lag_fp,
						now_fp, &c->forgiven);
		__builtin_memcpy(data, m->b, HDR_LEN);
		pr->magic = bpf_htonl(PROBE_MAGIC);
		pr->seq = bpf_cpu_to_be64(c->mix_sent);
		pr->sent_ns = bpf_cpu_to_be64(now);
		c->mix_sent++;
		return XDP_TX;
	}
	if (c->limit && c->sent >= c->limit)
		return XDP_DROP;
	if (c->interval_fp) {
		if (now_fp < c->next_fp)
			return XDP_DROP;
		c->next_fp = next_departure(c->next_fp, c->interval_fp, c->max_lag_fp, now_fp,
					    &c->forgiven);
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
