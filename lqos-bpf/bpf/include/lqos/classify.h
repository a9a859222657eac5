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

/* The circuit of address `addr` (16 bytes, IPv4 mapped): a host entry
 * (/32, /128) first, else the longest prefix. NULL: no circuit. */
static __always_inline struct lqos_circuit *lqos_lookup(const __u8 *addr)
{
	struct lqos_circuit *c;
	struct lqos_net_key nk;

	c = bpf_map_lookup_elem(&lqos1_hosts, addr);
	if (c)
		return c;
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
