/* A capture filter (tcpdump's language, compiled by src/pcap_filter):
 * a table of tests, each naming the entry to go to when it holds and when
 * it does not, ending at accept or refuse. Every jump goes forward, so a
 * run takes at most FILTER_OPS steps. A load past the frame's end refuses
 * the frame, as a classic BPF filter's does. */
#pragma once
#include "common.h"

#define FILTER_OPS 128 /* pcap_filter::MAX_OPS */

enum { F_BYTES, F_FIELD, F_L4PORT, F_LEN, F_ACCEPT, F_REFUSE };

/* pcap_filter::Op. */
struct filter_op {
	__u8 kind;
	__u8 size; /* bytes loaded; for F_L4PORT, the port's offset */
	__u16 off;
	__u16 jt;
	__u16 jf;
	__u32 lo;
	__u32 hi;
	__u64 val[2];
	__u64 mask[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FILTER_OPS);
	__type(key, __u32);
	__type(value, struct filter_op);
} filter_ops SEC(".maps");

/* Entry 0: how many entries filter_ops holds (0: no filter). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} filter_len SEC(".maps");

/* 1 if the test `op` holds, 0 if not, -1 if it reads past the end. */
static __always_inline int filter_test(struct xdp_md *ctx, const struct filter_op *op)
{
	__u64 buf[2] = { 0, 0 };
	__u32 off = op->off, v = 0;
	__u8 b[4] = { 0, 0, 0, 0 };
	int r = -1;

	switch (op->kind) {
	case F_BYTES:
		switch (op->size) {
		case 1: r = bpf_xdp_load_bytes(ctx, off, buf, 1); break;
		case 2: r = bpf_xdp_load_bytes(ctx, off, buf, 2); break;
		case 4: r = bpf_xdp_load_bytes(ctx, off, buf, 4); break;
		case 6: r = bpf_xdp_load_bytes(ctx, off, buf, 6); break;
		case 16: r = bpf_xdp_load_bytes(ctx, off, buf, 16); break;
		}
		if (r < 0)
			return -1;
		return (buf[0] & op->mask[0]) == op->val[0] && (buf[1] & op->mask[1]) == op->val[1];
	case F_FIELD:
		switch (op->size) {
		case 1:
			r = bpf_xdp_load_bytes(ctx, off, b, 1);
			v = b[0];
			break;
		case 2:
			r = bpf_xdp_load_bytes(ctx, off, b, 2);
			v = (__u32)b[0] << 8 | b[1];
			break;
		case 4:
			r = bpf_xdp_load_bytes(ctx, off, b, 4);
			v = (__u32)b[0] << 24 | (__u32)b[1] << 16 | (__u32)b[2] << 8 | b[3];
			break;
		}
		if (r < 0)
			return -1;
		return v >= op->lo && v <= op->hi;
	case F_L4PORT:
		if (bpf_xdp_load_bytes(ctx, off, b, 1) < 0)
			return -1;
		off += (b[0] & 0x0f) * 4 + op->size;
		if (bpf_xdp_load_bytes(ctx, off, b, 2) < 0)
			return -1;
		v = (__u32)b[0] << 8 | b[1];
		return v >= op->lo && v <= op->hi;
	case F_LEN:
		v = ctx->data_end - ctx->data;
		return v >= op->lo && v <= op->hi;
	}
	return -1;
}

/* 1 if the filter accepts the frame (or there is none), 0 if not. */
static __always_inline int filter_accepts(struct xdp_md *ctx)
{
	__u32 zero = 0, pc = 0;
	__u32 *n = bpf_map_lookup_elem(&filter_len, &zero);
	int i;

	if (!n || *n == 0)
		return 1;
	for (i = 0; i < FILTER_OPS; i++) {
		struct filter_op *op = bpf_map_lookup_elem(&filter_ops, &pc);
		int r;

		if (!op)
			return 0;
		if (op->kind == F_ACCEPT)
			return 1;
		if (op->kind == F_REFUSE)
			return 0;
		r = filter_test(ctx, op);
		if (r < 0)
			return 0;
		pc = r ? op->jt : op->jf;
	}
	return 0;
}
