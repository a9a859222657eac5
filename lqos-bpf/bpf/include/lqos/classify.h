/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Classification shared by the programs: which direction a packet goes
 * (from the interface's role and, on a stick, its outermost VLAN), which
 * address is the subscriber's, and that address's circuit (exact match
 * first, then the longest prefix).
 */
#ifndef LQOS_CLASSIFY_H
#define LQOS_CLASSIFY_H

#include "lqos/maps.h"
#include "lqos/parse.h"

enum lqos_dir {
	LQOS_DOWN = 0, /* towards the subscribers: key = destination */
	LQOS_UP = 1,   /* towards the internet: key = source */
};

/*
 * Direction of a packet on interface `cfg`: `egress` is 1 for a packet
 * leaving (tc egress), 0 for one arriving (XDP). On a stick, a frame
 * tagged with the internet VLAN is arriving from / leaving to the
 * internet; any other (or untagged) faces the subscribers.
 */
static __always_inline enum lqos_dir
lqos_direction(const struct lqos_iface *cfg, const struct lqos_pkt *p,
	       int egress)
{
	int internet_side;

	if (cfg->role == LQOS_ROLE_STICK)
		internet_side = p->tags > 0 && p->vid == cfg->internet_vlan;
	else
		internet_side = cfg->role == LQOS_ROLE_INTERNET;
	/* Leaving towards the internet, or arriving from the subscribers:
	 * upload. */
	if (egress)
		return internet_side ? LQOS_UP : LQOS_DOWN;
	return internet_side ? LQOS_DOWN : LQOS_UP;
}

/* `addr` (16 bytes) with all but its first `len` bits cleared, as a key
 * of lqos1_fast. */
static __always_inline void lqos_mask(const __u8 *addr, __u32 len,
				      struct lqos_net_key *k)
{
	const __u32 *a = (const __u32 *)addr;
	__u32 *o = (__u32 *)k->addr;

	k->prefixlen = len;
#pragma unroll
	for (int w = 0; w < 4; w++) {
		int bits = (int)len - 32 * w;
		__u32 m;
		if (bits <= 0)
			m = 0;
		else if (bits >= 32)
			m = 0xffffffff;
		else
			m = bpf_htonl(0xffffffff << (32 - bits));
		o[w] = a[w] & m;
	}
}

/* The circuit of address `addr` (16 bytes, IPv4 mapped; `v6` says which
 * family): a host entry (/32, /128) first, then the common prefix lengths
 * by exact match, longest first, then the longest prefix of the rest.
 * NULL: no circuit. */
static __always_inline struct lqos_circuit *lqos_lookup(const __u8 *addr,
							int v6)
{
	struct lqos_circuit *c;
	const struct lqos_global *g;
	struct lqos_net_key nk;
	__u32 zero = 0;

	c = bpf_map_lookup_elem(&lqos1_hosts, addr);
	if (c)
		return c;
	g = bpf_map_lookup_elem(&lqos1_global, &zero);
	if (g) {
		const __u8 *lens = v6 ? g->fast_v6 : g->fast_v4;
#pragma unroll
		for (int i = 0; i < LQOS_FAST_LENS; i++) {
			__u32 len = lens[i];
			if (len == 0 || len > 128)
				break;
			lqos_mask(addr, len, &nk);
			c = bpf_map_lookup_elem(&lqos1_fast, &nk);
			if (c)
				return c;
		}
	}
	nk.prefixlen = 128;
	__builtin_memcpy(nk.addr, addr, 16);
	return bpf_map_lookup_elem(&lqos1_nets, &nk);
}

static __always_inline const struct lqos_steer *
lqos_steer_of(const struct lqos_circuit *c, enum lqos_dir dir)
{
	return dir == LQOS_UP ? &c->up : &c->down;
}

#endif
