/* The device under test's receive path into user space: every frame on
 * queue i goes to the AF_XDP socket in xsks[i] (the kernel then copies it
 * into that socket's ring, or drops it there when the ring is full). With
 * no socket bound, the frame goes on to the kernel's stack. */
#include "common.h"
#include "xsks.h"

SEC("xdp")
int xdp_to_xsk(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
