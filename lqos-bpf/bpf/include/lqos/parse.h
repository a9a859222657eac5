/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Header walk shared by every lqos program: Ethernet, up to two VLAN tags
 * (802.1Q 0x8100, 802.1ad 0x88a8, the old QinQ 0x9100), a PPPoE session
 * (0x8864 carrying PPP IPv4 0x0021 or IPv6 0x0057), then IPv4 (any
 * options) or IPv6 (up to LQOS_V6_EXT extension headers). It fills a
 * struct lqos_pkt with the addresses (IPv4 as ::ffff:a.b.c.d) and where
 * the transport header starts, for classification now and for flow
 * tracking later.
 *
 * Every read is bounds-checked against data_end; loops are unrolled with
 * fixed bounds. A truncated or unknown header stops the walk with
 * LQOS_L2 (the VLAN is known, the addresses are not): callers then use the
 * default handling, never a guess.
 */
#ifndef LQOS_PARSE_H
#define LQOS_PARSE_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>

#define LQOS_ETH_HLEN 14
#define LQOS_VLAN_HLEN 4
#define LQOS_PPPOE_HLEN 8 /* PPPoE session header (6) + PPP protocol (2) */
#define LQOS_IPV4_HLEN 20
#define LQOS_IPV6_HLEN 40
#define LQOS_MAX_TAGS 2
#define LQOS_V6_EXT 4

#define LQOS_P_8021Q 0x8100
#define LQOS_P_8021AD 0x88a8
#define LQOS_P_QINQ_OLD 0x9100
#define LQOS_P_PPPOE_SES 0x8864
#define LQOS_P_IPV4 0x0800
#define LQOS_P_IPV6 0x86dd
#define LQOS_PPP_IPV4 0x0021
#define LQOS_PPP_IPV6 0x0057

enum lqos_parsed {
	LQOS_L2 = 0, /* no addresses: not IP, or truncated */
	LQOS_IP = 1, /* src and dst are valid */
};

struct lqos_pkt {
	__u8 src[16];
	__u8 dst[16];
	__u16 vid;	/* VID of the outermost tag (valid when tags > 0) */
	__u8 tags;	/* VLAN tags seen (accelerated one included) */
	__u8 v6;	/* 1: IPv6 */
	__u8 l4proto;	/* transport protocol (IPPROTO_*) */
	__u8 l4_ok;	/* 1: l4_off is a first fragment's transport header */
	__u16 l3_off;	/* offset of the IP header from data */
	__u16 l4_off;	/* offset of the transport header from data */
	__u16 pad;
} __attribute__((aligned(4)));

static __always_inline int lqos_is_vlan(__u16 proto)
{
	return proto == LQOS_P_8021Q || proto == LQOS_P_8021AD ||
	       proto == LQOS_P_QINQ_OLD;
}

static __always_inline void lqos_v4_mapped(__u8 *out, const __u8 *in)
{
	__u32 *o = (__u32 *)out;
	o[0] = 0;
	o[1] = 0;
	o[2] = bpf_htonl(0x0000ffff);
	__builtin_memcpy(&o[3], in, 4);
}

/* IPv6 extension headers that may precede the transport header. */
static __always_inline int lqos_v6_ext(__u8 nh)
{
	return nh == 0 /* hop-by-hop */ || nh == 43 /* routing */ ||
	       nh == 60 /* destination options */ || nh == 44 /* fragment */;
}

/*
 * Walks the headers of the frame [data, data_end). `accel_vid` is the VID
 * of a tag the driver or stack took out of the frame (tc: skb->vlan_tci),
 * `accel` says whether there is one; it counts as the outermost tag.
 */
static __always_inline enum lqos_parsed
lqos_parse(void *data, void *data_end, int accel, __u16 accel_vid,
	   struct lqos_pkt *p)
{
	__u8 *pos = data;
	__u16 proto;

	p->tags = 0;
	p->vid = 0;
	p->v6 = 0;
	p->l4_ok = 0;
	p->l4proto = 0;
	if (accel) {
		p->tags = 1;
		p->vid = accel_vid & 0x0fff;
	}
	if (pos + LQOS_ETH_HLEN > (__u8 *)data_end)
		return LQOS_L2;
	proto = bpf_ntohs(*(__u16 *)(pos + 12));
	pos += LQOS_ETH_HLEN;

#pragma unroll
	for (int i = 0; i < LQOS_MAX_TAGS; i++) {
		if (!lqos_is_vlan(proto))
			break;
		if (pos + LQOS_VLAN_HLEN > (__u8 *)data_end)
			return LQOS_L2;
		if (p->tags == 0)
			p->vid = bpf_ntohs(*(__u16 *)pos) & 0x0fff;
		p->tags++;
		proto = bpf_ntohs(*(__u16 *)(pos + 2));
		pos += LQOS_VLAN_HLEN;
	}

	if (proto == LQOS_P_PPPOE_SES) {
		__u16 ppp;
		if (pos + LQOS_PPPOE_HLEN > (__u8 *)data_end)
			return LQOS_L2;
		ppp = bpf_ntohs(*(__u16 *)(pos + 6));
		pos += LQOS_PPPOE_HLEN;
		if (ppp == LQOS_PPP_IPV4)
			proto = LQOS_P_IPV4;
		else if (ppp == LQOS_PPP_IPV6)
			proto = LQOS_P_IPV6;
		else
			return LQOS_L2;
	}

	p->l3_off = pos - (__u8 *)data;
	if (proto == LQOS_P_IPV4) {
		__u8 vihl, ihl;
		__u16 frag;
		if (pos + LQOS_IPV4_HLEN > (__u8 *)data_end)
			return LQOS_L2;
		vihl = pos[0];
		ihl = vihl & 0x0f;
		if ((vihl >> 4) != 4 || ihl < 5)
			return LQOS_L2;
		lqos_v4_mapped(p->src, pos + 12);
		lqos_v4_mapped(p->dst, pos + 16);
		p->l4proto = pos[9];
		p->l4_off = p->l3_off + ihl * 4;
		frag = bpf_ntohs(*(__u16 *)(pos + 6));
		/* Only a first fragment (offset 0) starts with the transport
		 * header. */
		p->l4_ok = (frag & 0x1fff) == 0;
		return LQOS_IP;
	}
	if (proto == LQOS_P_IPV6) {
		__u8 nh;
		if (pos + LQOS_IPV6_HLEN > (__u8 *)data_end)
			return LQOS_L2;
		if ((pos[0] >> 4) != 6)
			return LQOS_L2;
		p->v6 = 1;
		__builtin_memcpy(p->src, pos + 8, 16);
		__builtin_memcpy(p->dst, pos + 24, 16);
		nh = pos[6];
		pos += LQOS_IPV6_HLEN;
		p->l4_ok = 1;
#pragma unroll
		for (int i = 0; i < LQOS_V6_EXT; i++) {
			if (!lqos_v6_ext(nh))
				break;
			if (pos + 8 > (__u8 *)data_end) {
				/* Addresses are known; the transport is not. */
				p->l4_ok = 0;
				break;
			}
			if (nh == 44) {
				/* Fragment header: 8 bytes; offset != 0 means
				 * no transport header here. */
				if (bpf_ntohs(*(__u16 *)(pos + 2)) & 0xfff8)
					p->l4_ok = 0;
				nh = pos[0];
				pos += 8;
			} else {
				__u16 len = ((__u16)pos[1] + 1) * 8;
				nh = pos[0];
				pos += len;
			}
		}
		if (lqos_v6_ext(nh))
			p->l4_ok = 0;
		p->l4proto = nh;
		p->l4_off = pos - (__u8 *)data;
		return LQOS_IP;
	}
	return LQOS_L2;
}

#endif
