// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Test fixture, not part of the data path: a cls_bpf program that puts an
 * 802.1Q tag on each packet the way the stack carries it outside the frame
 * (skb->vlan_tci, as a VLAN device or bridge with tag offload does), then
 * lets the next filter run. The namespace tests put it before lqos_tc to
 * check that lqos_tc reads such tags; this host has no 8021q, bridge VLAN
 * filtering or act_vlan to do it.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Slot 0: the VID to push (0: none). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lqos_test_vid SEC(".maps");

SEC("classifier")
int lqos_test_vlan_push(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u32 *vid = bpf_map_lookup_elem(&lqos_test_vid, &zero);

	if (vid && *vid && !skb->vlan_present)
		bpf_skb_vlan_push(skb, bpf_htons(0x8100), *vid & 0x0fff);
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "GPL";
