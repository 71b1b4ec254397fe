/* The router's receive path, for either backend: which frames the
 * user-space router takes, and which go to the kernel's stack. IPv4 on
 * both backends; IPv6 on the XDP backend (the packet backend's socket is
 * IPv4's, and the kernel forwards IPv6 there).
 *
 * The kernel's own tables decide the next hop (bpf_fib_lookup, as kernel
 * forwarding and xdp-fwd see them): a frame the kernel would forward gets
 * the next hop's MAC as its destination and the output port's MAC as its
 * source, and goes to user space, which checks it, decrements its TTL and
 * sends it out of the port whose MAC it now carries. Everything a router
 * must not or cannot forward fast goes to the kernel's stack, which does
 * what RFC 1812 asks of it (ICMP Time Exceeded, Destination Unreachable,
 * Fragmentation Needed and fragmentation, IP options, neighbour
 * resolution, the host's own traffic), rate-limited as the kernel does.
 * Malformed frames and frames for another host's MAC are dropped, counted.
 *
 * xdp_route feeds an AF_XDP socket, or (route_cfg entry 1, `route
 * --forward-in xdp`) forwards the frame itself: TTL or hop limit minus one
 * and bpf_redirect to the output port, as xdp-fwd does, the policy staying
 * with the polling thread, which schedules the devices' receive work this
 * runs in. With a rule set (route_cfg entry 2: how many rules), the
 * frames it would forward in XDP are screened first, by the rules of
 * `route --screen` in their order, the first match deciding (no match:
 * denied); a denied frame is dropped here, counted by its rule, before
 * any copy or transmit. With protection rules (route_cfg entry 3: how
 * many, in protect_rules, the same language, an accepting rule marking a
 * frame protected), a frame for user space that they protect goes to the
 * queue's protected socket, xsks[XSKS_QUEUES + queue], where there is one:
 * its own ring, which the flood cannot fill, served first by the polling
 * thread. xdp_screen runs the same matcher alone, for
 * tests that hold it against user space's. tc_route, at tc ingress, marks what
 * user space takes as PACKET_OTHERHOST, so that the kernel's IP input
 * drops it at once while an AF_PACKET socket bound to IPv4 (which sees
 * frames after tc) receives it. */
#include "common.h"
#include "xsks.h"
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#define ETH_P_ARP_ 0x0806
#define ETH_P_IPV6_ 0x86DD
#define PACKET_OTHERHOST_ 3

/* Outcomes, counted per CPU; the order is route::Outcome's. */
enum {
	O_TAKEN,         /* to user space, next hop set */
	S_ARP,           /* to the stack: ARP */
	S_IPV6,          /* IPv6 not forwarded fast: link-local, extension headers */
	S_OTHER_PROTO,   /* neither IPv4 nor ARP nor IPv6 */
	S_MULTICAST,     /* link or IP multicast and broadcast */
	S_OPTIONS,       /* IPv4 options: the kernel processes them */
	S_TTL,           /* TTL expires here: Time Exceeded */
	S_NOT_FWDED,     /* not forwarded: for this host, or no route (Unreachable) */
	S_NO_NEIGH,      /* next hop unresolved: the kernel resolves it */
	S_FRAG_NEEDED,   /* over the egress MTU: fragments or Fragmentation Needed */
	S_UNREACHABLE,   /* no route, blackhole, prohibited: Destination Unreachable */
	S_FWD_DISABLED,  /* forwarding is off on the input port */
	S_OTHER,         /* any other reason the lookup gave */
	S_GRO,           /* merged by GRO (tc only): the kernel segments it */
	S_NO_SOCKET,     /* arrived on a queue no socket is bound to: the kernel forwards it */
	D_NOT_OURS,      /* dropped: another host's unicast MAC */
	D_TRUNCATED,     /* dropped: shorter than its headers */
	D_BAD_IHL,       /* dropped: IHL below 5 or total length outside the frame */
	D_SCREENED,      /* dropped: denied by a screening rule (forwarding in XDP) */
	O_N
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, O_N);
	__type(key, __u32);
	__type(value, __u64);
} route_stats SEC(".maps");

/* The router's ports: ifindex to MAC (low 48 bits, in wire order). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} port_macs SEC(".maps");

/* With routes given by hand (use_fib 0), the host's own IPv4 addresses;
 * otherwise the kernel's FIB says what is local. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} local_v4 SEC(".maps");

/* Entry 0: 1 to take next hops from the kernel (the default), 0 to leave
 * routing to user space's table. Entry 1: 1 to forward in XDP (with next
 * hops from the kernel) instead of handing frames to user space. Entry 2:
 * the screening rules in screen_rules (0: none, nothing screened). Entry
 * 3: the protection rules in protect_rules (0: none, nothing protected). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} route_cfg SEC(".maps");

/* One screening rule (rules::Rule, as bpf.rs writes it): addresses and
 * masks in network order, ports in host order, `has` the clauses given. */
#define SCREEN_RULES 64
#define HAS_PROTO 1
#define HAS_FROM 2
#define HAS_TO 4
#define HAS_SPORT 8
#define HAS_DPORT 16
struct screen_rule {
	__u32 src, src_mask, dst, dst_mask;
	__u16 sport_lo, sport_hi, dport_lo, dport_hi;
	__u8 proto, has, accept, pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCREEN_RULES);
	__type(key, __u32);
	__type(value, struct screen_rule);
} screen_rules SEC(".maps");

/* Frames each rule decided, per CPU; entry SCREEN_RULES is the default. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCREEN_RULES + 1);
	__type(key, __u32);
	__type(value, __u64);
} screen_stats SEC(".maps");

/* The protection rules: an accepting rule's frames are protected. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCREEN_RULES);
	__type(key, __u32);
	__type(value, struct screen_rule);
} protect_rules SEC(".maps");

/* Per CPU: [0] protected frames steered to their queue's protected
 * socket; [1] protected frames on a queue without one (to the ordinary
 * socket, as before). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} protect_stats SEC(".maps");

/* The fields the rules look at (rules::Flow): an intact IPv4 packet's
 * protocol, addresses, and ports for a TCP or UDP first fragment whose
 * payload holds them; an intact IPv6 packet's next header and ports (no
 * addresses: the rules' are IPv4's). */
struct flow {
	__u32 src, dst;
	__u16 sport, dport;
	__u8 is_ip, proto, has_ports, v6;
};

/* The ports of a TCP or UDP header at l4, if the packet holds them. */
static __always_inline void read_ports(__u8 *l4, void *data_end, struct flow *f)
{
	if ((void *)(l4 + 4) > data_end)
		return;
	f->sport = (__u16)l4[0] << 8 | l4[1];
	f->dport = (__u16)l4[2] << 8 | l4[3];
	f->has_ports = 1;
}

static __always_inline void read_flow6(void *data, void *data_end, struct flow *f)
{
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);
	__u32 len = data_end - data, pl;

	if ((void *)(ip6 + 1) > data_end || ip6->version != 6)
		return;
	pl = bpf_ntohs(ip6->payload_len);
	if (sizeof(struct ethhdr) + sizeof(*ip6) + pl > len)
		return;
	f->is_ip = 1;
	f->v6 = 1;
	f->proto = ip6->nexthdr;
	if ((ip6->nexthdr == IPPROTO_TCP || ip6->nexthdr == IPPROTO_UDP) && pl >= 4)
		read_ports((__u8 *)(ip6 + 1), data_end, f);
}

static __always_inline void read_flow(void *data, void *data_end, struct flow *f)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u32 len = data_end - data, ihl, tot;
	__u8 *l4;

	if ((void *)(eth + 1) <= data_end && eth->h_proto == bpf_htons(ETH_P_IPV6_)) {
		read_flow6(data, data_end, f);
		return;
	}
	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->version != 4)
		return;
	ihl = ip->ihl * 4;
	tot = bpf_ntohs(ip->tot_len);
	if (ihl < sizeof(*ip) || tot < ihl || sizeof(*eth) + tot > len)
		return;
	f->is_ip = 1;
	f->proto = ip->protocol;
	f->src = ip->saddr;
	f->dst = ip->daddr;
	if ((ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP) ||
	    (ip->frag_off & bpf_htons(0x1fff)) || tot - ihl < 4)
		return;
	/* ihl is at most 60: a bounded offset the verifier can follow. */
	l4 = (__u8 *)ip + (ihl & 0x3c);
	read_ports(l4, data_end, f);
}

static __always_inline int rule_matches(const struct screen_rule *r, const struct flow *f)
{
	if (!f->is_ip)
		return r->has == 0;
	if ((r->has & HAS_PROTO) && r->proto != f->proto)
		return 0;
	if (f->v6 && (r->has & (HAS_FROM | HAS_TO)))
		return 0;
	if ((r->has & HAS_FROM) && (f->src & r->src_mask) != r->src)
		return 0;
	if ((r->has & HAS_TO) && (f->dst & r->dst_mask) != r->dst)
		return 0;
	if ((r->has & HAS_SPORT) &&
	    (!f->has_ports || f->sport < r->sport_lo || f->sport > r->sport_hi))
		return 0;
	if ((r->has & HAS_DPORT) &&
	    (!f->has_ports || f->dport < r->dport_lo || f->dport > r->dport_hi))
		return 0;
	return 1;
}

/* 1 if the first of the `n` rules in the map `rules` that matches the
 * flow accepts it, 0 if it denies it or none matches; *by is that rule's
 * index, or SCREEN_RULES for none. */
static __always_inline int first_match(void *rules, const struct flow *f, __u32 n, __u32 *by)
{
	__u32 i;

	for (i = 0; i < SCREEN_RULES && i < n; i++) {
		__u32 k = i;
		struct screen_rule *r = bpf_map_lookup_elem(rules, &k);

		if (r && rule_matches(r, f)) {
			*by = i;
			return r->accept;
		}
	}
	*by = SCREEN_RULES;
	return 0;
}

/* The screening rules' verdict on a frame (see first_match), counted by
 * the rule that decided. */
static __always_inline int screen(void *data, void *data_end, __u32 n)
{
	struct flow f = {};
	__u32 by;
	int ok;

	read_flow(data, data_end, &f);
	ok = first_match(&screen_rules, &f, n, &by);
	BUMP(screen_stats, by, 1);
	return ok;
}

/* 1 if the protection rules (route_cfg entry 3) protect the frame. */
static __always_inline int is_protected(void *data, void *data_end)
{
	__u32 three = 3, *n = bpf_map_lookup_elem(&route_cfg, &three);
	struct flow f = {};
	__u32 by;

	if (!n || !*n)
		return 0;
	read_flow(data, data_end, &f);
	return first_match(&protect_rules, &f, *n, &by);
}

/* How many screening rules are set (0: no screening). */
static __always_inline __u32 screen_rule_count(void)
{
	__u32 two = 2, *n = bpf_map_lookup_elem(&route_cfg, &two);

	return n ? *n : 0;
}

enum { V_TAKE, V_STACK, V_DROP };

/* The MACs a taken frame leaves with (the first 12 bytes of its new
 * Ethernet header), and its output port. */
struct hop {
	__u8 dmac[ETH_ALEN];
	__u8 smac[ETH_ALEN];
	__u32 oif;
};
#define HOP_MACS (2 * ETH_ALEN)

static __always_inline __u64 mac48(const __u8 *m)
{
	return (__u64)m[0] | (__u64)m[1] << 8 | (__u64)m[2] << 16 | (__u64)m[3] << 24 |
	       (__u64)m[4] << 32 | (__u64)m[5] << 40;
}

/* The kernel's answer for a frame it would forward (`fib` filled in):
 * taken, with its next hop in *hop, or to the stack with the reason. */
static __always_inline int fib_verdict(void *ctx, struct bpf_fib_lookup *fib, __u32 *why,
				       struct hop *hop)
{
	switch (bpf_fib_lookup(ctx, fib, sizeof(*fib), 0)) {
	case BPF_FIB_LKUP_RET_SUCCESS:
		__builtin_memcpy(hop->dmac, fib->dmac, ETH_ALEN);
		__builtin_memcpy(hop->smac, fib->smac, ETH_ALEN);
		hop->oif = fib->ifindex;
		*why = O_TAKEN;
		return V_TAKE;
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		*why = S_NOT_FWDED;
		break;
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		*why = S_NO_NEIGH;
		break;
	case BPF_FIB_LKUP_RET_FRAG_NEEDED:
		*why = S_FRAG_NEEDED;
		break;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
		*why = S_UNREACHABLE;
		break;
	case BPF_FIB_LKUP_RET_FWD_DISABLED:
		*why = S_FWD_DISABLED;
		break;
	default:
		*why = S_OTHER;
	}
	return V_STACK;
}

/* IPv6 behind the Ethernet header (`eth`, unicast to this port): what the
 * kernel would forward is taken; neighbour discovery and the rest of
 * ICMPv6 to or from link-local addresses, multicast, extension headers,
 * an expiring hop limit (Time Exceeded) and a packet over the egress MTU
 * (Packet Too Big) go to the stack, which answers them. */
static __always_inline int classify6(void *ctx, struct ethhdr *eth, void *data_end, __u32 len,
				     __u32 ifindex, __u32 segs, __u32 *why, struct hop *hop)
{
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct bpf_fib_lookup fib = {};
	__u32 zero = 0, *use_fib;

	if ((void *)(ip6 + 1) > data_end) {
		*why = D_TRUNCATED;
		return V_DROP;
	}
	if (sizeof(*eth) + sizeof(*ip6) + bpf_ntohs(ip6->payload_len) > len) {
		*why = D_BAD_IHL;
		return V_DROP;
	}
	if (ip6->daddr.in6_u.u6_addr8[0] == 0xff) {
		*why = S_MULTICAST;
		return V_STACK;
	}
	/* fe80::/10 on either side: never forwarded. */
	if ((ip6->daddr.in6_u.u6_addr16[0] & bpf_htons(0xffc0)) == bpf_htons(0xfe80) ||
	    (ip6->saddr.in6_u.u6_addr16[0] & bpf_htons(0xffc0)) == bpf_htons(0xfe80)) {
		*why = S_IPV6;
		return V_STACK;
	}
	/* Extension headers (hop-by-hop options first among them): the kernel. */
	if (ip6->nexthdr != IPPROTO_TCP && ip6->nexthdr != IPPROTO_UDP &&
	    ip6->nexthdr != IPPROTO_ICMPV6) {
		*why = S_OPTIONS;
		return V_STACK;
	}
	if (ip6->hop_limit <= 1) {
		*why = S_TTL;
		return V_STACK;
	}
	if (segs > 1) {
		*why = S_GRO;
		return V_STACK;
	}
	/* Routes by hand are IPv4's: IPv6 is the kernel's then. */
	use_fib = bpf_map_lookup_elem(&route_cfg, &zero);
	if (use_fib && *use_fib == 0) {
		*why = S_IPV6;
		return V_STACK;
	}
	fib.family = AF_INET6;
	fib.flowinfo = *(__be32 *)ip6 & bpf_htonl(0x0fffffff);
	fib.l4_protocol = ip6->nexthdr;
	fib.tot_len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
	__builtin_memcpy(fib.ipv6_src, &ip6->saddr, sizeof(fib.ipv6_src));
	__builtin_memcpy(fib.ipv6_dst, &ip6->daddr, sizeof(fib.ipv6_dst));
	fib.ifindex = ifindex;
	return fib_verdict(ctx, &fib, why, hop);
}

/* What to do with a frame of `len` bytes (headers at data, readable up to
 * data_end) that arrived on `ifindex`; the reason goes to *why, and a
 * taken frame's next hop to *hop. */
static __always_inline int classify(void *ctx, void *data, void *data_end, __u32 len,
				    __u32 ifindex, __u32 segs, int take_v6, __u32 *why,
				    struct hop *hop)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct bpf_fib_lookup fib = {};
	__u32 zero = 0, *use_fib;
	__u64 *mine;
	__u16 tot;

	if ((void *)(eth + 1) > data_end) {
		*why = D_TRUNCATED;
		return V_DROP;
	}
	if (eth->h_proto == bpf_htons(ETH_P_ARP_)) {
		*why = S_ARP;
		return V_STACK;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IP) && eth->h_proto != bpf_htons(ETH_P_IPV6_)) {
		*why = S_OTHER_PROTO;
		return V_STACK;
	}
	if (eth->h_dest[0] & 1) {
		*why = S_MULTICAST;
		return V_STACK;
	}
	mine = bpf_map_lookup_elem(&port_macs, &ifindex);
	if (mine && *mine != mac48(eth->h_dest)) {
		*why = D_NOT_OURS;
		return V_DROP;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6_)) {
		if (take_v6)
			return classify6(ctx, eth, data_end, len, ifindex, segs, why, hop);
		*why = S_IPV6;
		return V_STACK;
	}
	if ((void *)(ip + 1) > data_end) {
		*why = D_TRUNCATED;
		return V_DROP;
	}
	tot = bpf_ntohs(ip->tot_len);
	if (ip->ihl < 5 || tot < ip->ihl * 4 || sizeof(*eth) + tot > len) {
		*why = D_BAD_IHL;
		return V_DROP;
	}
	if (ip->ihl > 5) {
		*why = S_OPTIONS;
		return V_STACK;
	}
	if ((ip->daddr & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000) ||
	    ip->daddr == 0xffffffff) {
		*why = S_MULTICAST;
		return V_STACK;
	}
	if (ip->ttl <= 1) {
		*why = S_TTL;
		return V_STACK;
	}
	if (segs > 1) {
		*why = S_GRO;
		return V_STACK;
	}
	use_fib = bpf_map_lookup_elem(&route_cfg, &zero);
	if (use_fib && *use_fib == 0) {
		if (bpf_map_lookup_elem(&local_v4, &ip->daddr)) {
			*why = S_NOT_FWDED;
			return V_STACK;
		}
		__builtin_memcpy(hop->dmac, eth->h_dest, ETH_ALEN);
		__builtin_memcpy(hop->smac, eth->h_source, ETH_ALEN);
		*why = O_TAKEN;
		return V_TAKE;
	}
	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = tot;
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	fib.ifindex = ifindex;
	return fib_verdict(ctx, &fib, why, hop);
}

SEC("xdp")
int xdp_route(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct hop hop = {};
	__u32 why = S_OTHER, one = 1, *in_xdp = bpf_map_lookup_elem(&route_cfg, &one);
	int v = classify(ctx, data, data_end, data_end - data, ctx->ingress_ifindex, 1, 1, &why,
			 &hop);

	int fwd_here = in_xdp && *in_xdp;
	__u32 queue = ctx->rx_queue_index, rules = screen_rule_count();

	/* A queue without a socket (a multi-queue NIC's others): the kernel. */
	if (v == V_TAKE && !fwd_here && !bpf_map_lookup_elem(&xsks, &queue)) {
		why = S_NO_SOCKET;
		v = V_STACK;
	}
	if (v == V_TAKE && fwd_here && rules && !screen(data, data_end, rules)) {
		why = D_SCREENED;
		v = V_DROP;
	}
	BUMP(route_stats, why, 1);
	if (v == V_DROP)
		return XDP_DROP;
	if (v == V_STACK)
		return XDP_PASS;
	__builtin_memcpy(data, &hop, HOP_MACS);
	if (fwd_here) {
		struct ethhdr *eth = data;

		/* classify has checked these headers against data_end. */
		if (eth->h_proto == bpf_htons(ETH_P_IP)) {
			struct iphdr *ip = (void *)(eth + 1);

			if ((void *)(ip + 1) > data_end)
				return XDP_DROP;
			decrement_ttl(ip);
		} else {
			struct ipv6hdr *ip6 = (void *)(eth + 1);

			if ((void *)(ip6 + 1) > data_end)
				return XDP_DROP;
			ip6->hop_limit--;
		}
		return bpf_redirect(hop.oif, 0);
	}
	if (is_protected(data, data_end)) {
		__u32 guarded = XSKS_QUEUES + queue;

		if (queue < XSKS_QUEUES && bpf_map_lookup_elem(&xsks, &guarded)) {
			BUMP(protect_stats, 0, 1);
			return bpf_redirect_map(&xsks, guarded, XDP_PASS);
		}
		BUMP(protect_stats, 1, 1);
	}
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

/* The screening rules alone: XDP_PASS for a frame they accept, XDP_DROP
 * for one they deny. Never attached; tests run it on frames. */
SEC("xdp")
int xdp_screen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;

	return screen(data, data_end, screen_rule_count()) ? XDP_PASS : XDP_DROP;
}

SEC("classifier")
int tc_route(struct __sk_buff *skb)
{
	void *data, *data_end;
	struct hop hop = {};
	__u32 why = S_OTHER;
	int v;

	/* The headers classify reads, in the linear part. */
	bpf_skb_pull_data(skb, sizeof(struct ethhdr) + sizeof(struct iphdr));
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	/* The packet socket is IPv4's: IPv6 is the kernel's to forward. */
	v = classify(skb, data, data_end, skb->len, skb->ifindex, skb->gso_segs, 0, &why, &hop);
	BUMP(route_stats, why, 1);
	if (v == V_DROP)
		return TC_ACT_SHOT;
	if (v == V_STACK)
		return TC_ACT_OK;
	bpf_skb_store_bytes(skb, 0, &hop, HOP_MACS, 0);
	bpf_skb_change_type(skb, PACKET_OTHERHOST_);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
