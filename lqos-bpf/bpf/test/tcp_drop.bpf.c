// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Test fixture, not part of the data path: a cls_bpf program that drops
 * every Nth TCP segment carrying data to one IPv4 address, so a test can
 * make a known share of one circuit's segments go missing (this host has
 * no netem). Plain Ethernet + IPv4 only; everything else passes.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct lqos_test_drop {
	__u32 daddr;   /* IPv4 destination, network order (0: drop nothing) */
	__u32 every;   /* drop one data segment in this many */
	__u64 seen;    /* data segments to daddr seen */
	__u64 dropped; /* ... and dropped */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lqos_test_drop);
} lqos_test_drop SEC(".maps");

SEC("classifier")
int lqos_test_tcp_drop(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	__u8 *ip = (__u8 *)data + 14, *th;
	struct lqos_test_drop *cfg;
	__u32 zero = 0, ihl, tot, doff;
	__u64 n;

	cfg = bpf_map_lookup_elem(&lqos_test_drop, &zero);
	if (!cfg || !cfg->daddr || !cfg->every)
		return TC_ACT_UNSPEC;
	if (ip + 20 > (__u8 *)data_end ||
	    *(__u16 *)((__u8 *)data + 12) != bpf_htons(0x0800))
		return TC_ACT_UNSPEC;
	if (ip[9] != 6 || *(__u32 *)(ip + 16) != cfg->daddr)
		return TC_ACT_UNSPEC;
	ihl = (ip[0] & 0x0f) * 4;
	if (ihl < 20 || ihl > 60)
		return TC_ACT_UNSPEC;
	th = ip + ihl;
	if (th + 20 > (__u8 *)data_end)
		return TC_ACT_UNSPEC;
	tot = bpf_ntohs(*(__u16 *)(ip + 2));
	doff = (th[12] >> 4) * 4;
	if (tot <= ihl + doff)
		return TC_ACT_UNSPEC;
	n = __sync_fetch_and_add(&cfg->seen, 1) + 1;
	if (n % cfg->every)
		return TC_ACT_UNSPEC;
	__sync_fetch_and_add(&cfg->dropped, 1);
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "GPL";
