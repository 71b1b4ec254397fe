/* `rxsched guard`: LRP's early discard for every UDP socket on the host,
 * with no change to its applications.
 *
 * For each unicast UDP datagram addressed to this host, the program finds
 * the socket the kernel would deliver it to (bpf_sk_lookup_udp, the same
 * lookup the UDP receive path makes) and reads that socket's receive
 * buffer: the bytes queued (sk_rmem_alloc) and its limit (sk_rcvbuf). When
 * the buffer is over its limit, the kernel's UDP receive path would drop
 * the datagram after all the protocol work below it (IP input, routing,
 * netfilter, the socket lookup, the checksum); the program drops it here
 * instead, before any of that, and counts it against the socket. Anything
 * else (a socket with room, no socket, not UDP, a fragment, multicast or
 * broadcast, not for this host) goes on to the stack untouched.
 *
 * The two socket fields are read through the kernel's BTF: the offsets in
 * the loaded program are relocated (CO-RE) against /sys/kernel/btf/vmlinux
 * when it is loaded, so a kernel without them refuses the program, and
 * `rxsched guard` attaches nothing. The drop test is the kernel's own
 * (see sock_full), so a socket with room never loses a datagram to the
 * guard. */
#include "common.h"
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_core_read.h>

#ifndef AF_INET
#define AF_INET 2
#define AF_INET6 10
#endif

/* Counters, in the order of GuardOutcome in src/guard.rs. */
enum {
	G_ROOM,      /* passed: its socket has room */
	G_FULL,      /* dropped: its socket's buffer is over its limit */
	G_NO_SOCKET, /* passed: no socket is bound to it */
	G_NOT_LOCAL, /* passed: not addressed to this host */
	G_NOT_UDP,   /* passed: neither UDP over IPv4 nor over IPv6 */
	G_FRAGMENT,  /* passed: an IPv4 fragment */
	G_MULTICAST, /* passed: link-layer multicast or broadcast */
	G_TRUNCATED, /* passed: shorter than its headers (the stack drops it) */
	G_UNREADABLE,/* passed: the socket's fields could not be read */
	G_N
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, G_N);
	__type(key, __u32);
	__type(value, __u64);
} guard_stats SEC(".maps");

/* A socket, as bound: its family, local port (host order) and local
 * address (zero when bound to any; IPv4 in addr[0], network order). */
struct sock_key {
	__u32 family;
	__u32 port;
	__u32 addr[4];
};

/* What the guard did for one socket. */
struct sock_count {
	__u64 passed;
	__u64 dropped;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sock_key);
	__type(value, struct sock_count);
} guard_sockets SEC(".maps");

/* This host's addresses, as `struct sock_key` with port 0 (kept by user
 * space, which reads them from the namespace every second). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct sock_key);
	__type(value, __u8);
} guard_local SEC(".maps");

/* The fields of the kernel's struct sock the drop test reads; their
 * offsets come from the running kernel's BTF. */
typedef struct {
	int counter;
} atomic_t___guard;

struct sk_buff___guard {
	unsigned int truesize;
} __attribute__((preserve_access_index));

struct sk_buff_head___guard {
	struct sk_buff___guard *prev;
	__u32 qlen;
} __attribute__((preserve_access_index));

struct sock___guard {
	int sk_rcvbuf;
	struct {
		atomic_t___guard rmem_alloc;
	} sk_backlog;
	struct sk_buff_head___guard sk_receive_queue;
} __attribute__((preserve_access_index));

/* Present from Linux 6.18 on, whose UDP enqueue drops by another rule. */
struct udp_sock___guard {
	void *udp_prod_queue;
} __attribute__((preserve_access_index));

/* The drop test in force, in the order of DropRule in src/guard.rs. */
enum { RULE_OVER_LIMIT = 1, RULE_NO_FIT = 2 };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} guard_rule SEC(".maps");

/* What a datagram of `len` bytes (UDP header and payload) will be charged
 * to socket `s` (the skb's truesize): the truesize of the last datagram
 * queued there, which came the same way, or `len` itself (which no skb's
 * truesize is below) when the queue is empty or cannot be read. */
static __always_inline __u32 charge(struct sock___guard *s, __u32 len)
{
	struct sk_buff___guard *tail = 0;
	__u32 qlen = 0, truesize = 0;

	if (bpf_probe_read_kernel(&qlen, sizeof(qlen), &s->sk_receive_queue.qlen) || !qlen)
		return len;
	if (bpf_probe_read_kernel(&tail, sizeof(tail), &s->sk_receive_queue.prev) || !tail)
		return len;
	if (bpf_probe_read_kernel(&truesize, sizeof(truesize), &tail->truesize))
		return len;
	return truesize > len ? truesize : len;
}

/* 1 when the kernel's UDP receive path would drop a datagram of `len`
 * bytes for socket `sk` because its receive buffer is full, 0 when it has
 * room, -1 when its fields cannot be read.
 *
 * The test is the running kernel's own (__udp_enqueue_schedule_skb), so
 * that the guard drops what the kernel would drop after its work:
 * - up to 6.17: drop when the bytes queued are over the limit;
 * - from 6.18 (per-NUMA producer queues): drop when the datagram does not
 *   fit (its charge, see above) and the queue is not empty.
 * Bytes still on a producer queue are not counted here, so the guard may
 * pass a datagram the kernel then drops, but not the other way round. */
static __always_inline int sock_full(struct bpf_sock *sk, __u32 len)
{
	struct bpf_sock *held = sk;
	__u64 at = 0;
	int rcvbuf, rmem;
	__u32 zero = 0, rule;

	/* The socket's address as a plain number: the verifier allows no
	 * arithmetic on a socket pointer, and the fields are read with
	 * bpf_probe_read_kernel. */
	if (bpf_probe_read_kernel(&at, sizeof(at), &held))
		return -1;
	struct sock___guard *s = (void *)at;
	if (bpf_probe_read_kernel(&rcvbuf, sizeof(rcvbuf), &s->sk_rcvbuf))
		return -1;
	if (bpf_probe_read_kernel(&rmem, sizeof(rmem), &s->sk_backlog.rmem_alloc.counter))
		return -1;
	rule = bpf_core_field_exists(struct udp_sock___guard, udp_prod_queue) ? RULE_NO_FIT
									     : RULE_OVER_LIMIT;
	__u32 *r = bpf_map_lookup_elem(&guard_rule, &zero);
	if (r && *r != rule)
		*r = rule;
	if (rule == RULE_OVER_LIMIT)
		return (unsigned int)rmem > (unsigned int)rcvbuf;
	if (!rmem)
		return 0;
	return (__u64)(unsigned int)rmem + charge(s, len) > (unsigned int)rcvbuf;
}

/* The key of socket `sk`. */
static __always_inline void sock_key_of(struct bpf_sock *sk, struct sock_key *k)
{
	k->family = sk->family;
	k->port = sk->src_port;
	if (sk->family == AF_INET6) {
		k->addr[0] = sk->src_ip6[0];
		k->addr[1] = sk->src_ip6[1];
		k->addr[2] = sk->src_ip6[2];
		k->addr[3] = sk->src_ip6[3];
	} else {
		k->addr[0] = sk->src_ip4;
	}
}

/* Counts a passed or dropped datagram against its socket. */
static __always_inline void count(struct sock_key *k, int dropped)
{
	struct sock_count *c = bpf_map_lookup_elem(&guard_sockets, k);
	if (!c) {
		struct sock_count zero = {};
		bpf_map_update_elem(&guard_sockets, k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&guard_sockets, k);
		if (!c)
			return;
	}
	if (dropped)
		c->dropped++;
	else
		c->passed++;
}

/* The verdict for a datagram whose socket lookup `sk` found (or not):
 * 1 to drop it, 0 to pass it on. */
static __always_inline int judge(struct bpf_sock *sk, __u32 len)
{
	struct sock_key k = {};
	int full;

	if (!sk) {
		BUMP(guard_stats, G_NO_SOCKET, 1);
		return 0;
	}
	full = sock_full(sk, len);
	sock_key_of(sk, &k);
	bpf_sk_release(sk);
	if (full < 0) {
		BUMP(guard_stats, G_UNREADABLE, 1);
		return 0;
	}
	count(&k, full);
	BUMP(guard_stats, full ? G_FULL : G_ROOM, 1);
	return full;
}

static __always_inline int is_local(__u32 family, const __u32 *addr)
{
	struct sock_key k = { .family = family };
	k.addr[0] = addr[0];
	if (family == AF_INET6) {
		k.addr[1] = addr[1];
		k.addr[2] = addr[2];
		k.addr[3] = addr[3];
	}
	return bpf_map_lookup_elem(&guard_local, &k) != 0;
}

/* An IPv4 frame whose IP header starts at `l3`; `frame_len` is the whole
 * frame's length from `data` (more than `end - data` when part of an skb
 * is not linear). */
static __always_inline int guard4(void *ctx, void *data, void *l3, void *end, __u32 frame_len)
{
	struct iphdr *ip = l3;
	struct bpf_sock_tuple t = {};
	struct udphdr *udp;

	if ((void *)(ip + 1) > end || ip->ihl < 5) {
		BUMP(guard_stats, G_TRUNCATED, 1);
		return 0;
	}
	if (ip->protocol != IPPROTO_UDP) {
		BUMP(guard_stats, G_NOT_UDP, 1);
		return 0;
	}
	if (ip->frag_off & bpf_htons(0x3FFF)) {
		BUMP(guard_stats, G_FRAGMENT, 1);
		return 0;
	}
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end) {
		BUMP(guard_stats, G_TRUNCATED, 1);
		return 0;
	}
	if (!is_local(AF_INET, &ip->daddr)) {
		BUMP(guard_stats, G_NOT_LOCAL, 1);
		return 0;
	}
	t.ipv4.saddr = ip->saddr;
	t.ipv4.daddr = ip->daddr;
	t.ipv4.sport = udp->source;
	t.ipv4.dport = udp->dest;
	return judge(bpf_sk_lookup_udp(ctx, &t, sizeof(t.ipv4), BPF_F_CURRENT_NETNS, 0),
		     frame_len - ((void *)udp - data));
}

static __always_inline int guard6(void *ctx, void *data, void *l3, void *end, __u32 frame_len)
{
	struct ipv6hdr *ip = l3;
	struct bpf_sock_tuple t = {};
	struct udphdr *udp = (void *)(ip + 1);
	__u32 daddr[4];

	if ((void *)(udp + 1) > end) {
		BUMP(guard_stats, G_TRUNCATED, 1);
		return 0;
	}
	if (ip->nexthdr != IPPROTO_UDP) {
		/* Not UDP, or UDP behind extension headers, which the
		 * guard does not walk. */
		BUMP(guard_stats, G_NOT_UDP, 1);
		return 0;
	}
	__builtin_memcpy(daddr, &ip->daddr, sizeof(daddr));
	if (!is_local(AF_INET6, daddr)) {
		BUMP(guard_stats, G_NOT_LOCAL, 1);
		return 0;
	}
	__builtin_memcpy(t.ipv6.saddr, &ip->saddr, 16);
	__builtin_memcpy(t.ipv6.daddr, daddr, 16);
	t.ipv6.sport = udp->source;
	t.ipv6.dport = udp->dest;
	return judge(bpf_sk_lookup_udp(ctx, &t, sizeof(t.ipv6), BPF_F_CURRENT_NETNS, 0),
		     frame_len - ((void *)udp - data));
}

/* 1 to drop the frame at [data, end), 0 to pass it on. */
static __always_inline int guard_frame(void *ctx, void *data, void *end, __u32 frame_len)
{
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end) {
		BUMP(guard_stats, G_TRUNCATED, 1);
		return 0;
	}
	if (eth->h_dest[0] & 1) {
		BUMP(guard_stats, G_MULTICAST, 1);
		return 0;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		return guard4(ctx, data, eth + 1, end, frame_len);
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return guard6(ctx, data, eth + 1, end, frame_len);
	BUMP(guard_stats, G_NOT_UDP, 1);
	return 0;
}

/* The default: in the driver's receive path, before the kernel builds an
 * skb for the frame. */
SEC("xdp")
int guard(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	return guard_frame(ctx, data, end, end - data) ? XDP_DROP : XDP_PASS;
}

/* At tc ingress (`--hook tc`): after the skb is built, before IP. For
 * devices on which XDP costs more than it saves (a veth fed by XDP
 * redirects returns each dropped frame to its sender's pool). */
SEC("classifier")
int tc_guard(struct __sk_buff *skb)
{
	void *data, *end;

	/* The headers, Ethernet to UDP over IPv6 (the longest), linear. */
	bpf_skb_pull_data(skb, sizeof(struct ethhdr) + sizeof(struct ipv6hdr) + sizeof(struct udphdr));
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	return guard_frame(skb, data, end, skb->len) ? TC_ACT_SHOT : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
