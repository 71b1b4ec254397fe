/* A monitor's receive path (`rxsched capture`).
 *
 * xdp_copy, the default, is passive: it copies each frame into a BPF ring
 * buffer that the monitor's polling thread reads, and passes the frame on
 * to the kernel's stack (XDP_PASS), so that the host keeps every frame it
 * had. The ring buffer is the monitor's receive ring: while the monitor
 * inhibits its input (M3, M4) it stops reading it, and once it is full a
 * frame is passed on without a copy (before the copy's work), and counted.
 *
 * Wake-ups are batched, as a TPACKET_V3 block is: a copy wakes the reader
 * only when the unread data crosses WAKE_BYTES, or when WAKE_NS have passed
 * since the last wake-up (so a frame after a quiet spell wakes it at once).
 * Waking the reader for every copy costs an inter-processor interrupt (a
 * VM exit on a virtual machine) and two context switches a frame, which
 * halved the rate the receive work could copy at. The reader, for its
 * part, sleeps at most WAKE_NS while copies are flowing (see
 * backend/copy.rs), so no copy waits longer than that.
 *
 * With a capture filter (filter.h, tcpdump's language) a frame it refuses
 * is passed on uncopied, and counted, so it never reaches user space.
 *
 * tc_take is the packet backend's taking mode (`--take`, for a dedicated
 * monitor port): an AF_PACKET socket sees a frame before tc ingress, which
 * then drops it, so that the kernel spends nothing more on it. (The xdp
 * backend takes frames with bpf/xsk.bpf.c, or with xdp_take here when a
 * capture filter decides which.) */
#include "common.h"
#include "filter.h"
#include "xsks.h"
#include <linux/pkt_cls.h>

/* Counters, in the order of CopyOutcome in src/bpf.rs. */
enum { C_COPIED, C_RING_FULL, C_TAKEN, C_FILTERED, C_N };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_N);
	__type(key, __u32);
	__type(value, __u64);
} copy_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 21);
} copy_ring SEC(".maps");

/* Entry 0: when the reader was last woken, in ns (a race between CPUs
 * costs at most an extra wake-up). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} copy_woken SEC(".maps");

#define WAKE_BYTES (64 << 10)
#define WAKE_NS 1000000ULL

/* The submit flags for a record of `rec` bytes just reserved. */
static __always_inline __u64 wake_flags(__u64 rec)
{
	__u32 zero = 0;
	__u64 *woken = bpf_map_lookup_elem(&copy_woken, &zero);
	__u64 avail = bpf_ringbuf_query(&copy_ring, BPF_RB_AVAIL_DATA);
	__u64 now = bpf_ktime_get_ns();

	if (!woken)
		return 0;
	if ((avail >= WAKE_BYTES && avail < WAKE_BYTES + rec) || now - *woken >= WAKE_NS) {
		*woken = now;
		return BPF_RB_FORCE_WAKEUP;
	}
	return BPF_RB_NO_WAKEUP;
}

/* A copy: the frame's length, the receive queue it came in on, then its
 * bytes (the record is as long as the smallest size class that holds
 * them). One ring takes every queue's copies. */
struct copy {
	__u32 len;
	__u32 queue;
	__u8 data[];
};

/* Copies a frame of `len` bytes (at most `cls`) into a record of class
 * `cls`. Returns 0, or -1 when the ring buffer is full. */
static __always_inline int copy_in(struct xdp_md *ctx, __u32 len, const __u32 cls)
{
	struct copy *c = bpf_ringbuf_reserve(&copy_ring, sizeof(struct copy) + cls, 0);
	__u64 n;

	if (!c)
		return -1;
	/* Bounds the verifier can see (the compiler knows them already). */
	asm volatile("" : "+r"(len));
	n = len & 0x3fff;
	if (n > cls)
		n = cls;
	c->len = n;
	c->queue = ctx->rx_queue_index;
	if (n == 0 || bpf_xdp_load_bytes(ctx, 0, c->data, n) < 0) {
		bpf_ringbuf_discard(c, 0);
		return 0;
	}
	/* The ring buffer's own 8-byte header is part of each record. */
	bpf_ringbuf_submit(c, wake_flags(8 + sizeof(struct copy) + cls));
	return 0;
}

#define CLASS(n)                                                  \
	if (len <= (n)) {                                         \
		full = copy_in(ctx, len, (n));                    \
		goto done;                                        \
	}

SEC("xdp")
int xdp_copy(struct xdp_md *ctx)
{
	__u32 len = ctx->data_end - ctx->data;
	int full;

	/* A frame the capture filter refuses is left alone, uncopied. */
	if (!filter_accepts(ctx)) {
		BUMP(copy_stats, C_FILTERED, 1);
		return XDP_PASS;
	}
	/* Classes keep the ring's records close to the frames' sizes. */
	CLASS(128)
	CLASS(256)
	CLASS(512)
	CLASS(1024)
	CLASS(1536)
	CLASS(2048)
	CLASS(4096)
	/* Longer frames (not seen by a single-buffer XDP program) are cut. */
	full = copy_in(ctx, len, 9216);
done:
	BUMP(copy_stats, full ? C_RING_FULL : C_COPIED, 1);
	return XDP_PASS;
}

/* Taking (`capture --take` with a filter, on AF_XDP): a frame the filter
 * accepts goes to the socket of its queue; one it refuses goes on to the
 * kernel's stack, untaken, and is counted. */
SEC("xdp")
int xdp_take(struct xdp_md *ctx)
{
	if (!filter_accepts(ctx)) {
		BUMP(copy_stats, C_FILTERED, 1);
		return XDP_PASS;
	}
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

/* The capture filter's verdict alone: XDP_PASS if it accepts the frame,
 * XDP_DROP if not (for tests, through BPF_PROG_TEST_RUN). */
SEC("xdp")
int xdp_filter_verdict(struct xdp_md *ctx)
{
	return filter_accepts(ctx) ? XDP_PASS : XDP_DROP;
}

SEC("classifier")
int tc_take(struct __sk_buff *skb)
{
	BUMP(copy_stats, C_TAKEN, 1);
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
