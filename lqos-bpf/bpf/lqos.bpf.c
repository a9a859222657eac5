// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * lqos's data path, two programs sharing the maps of lqos/maps.h:
 *
 * lqos_xdp  (XDP, ingress of every shaped interface): finds the packet's
 *           circuit and redirects it through the cpumap to the CPU that
 *           owns the circuit's TX queue, so that CPU alone enqueues into
 *           the queue's HTB. Unknown or unparsed packets pass untouched.
 *
 * lqos_tc   (cls_bpf, direct action, clsact egress of every shaped
 *           interface): sets skb->priority to the circuit's classid and
 *           skb->queue_mapping to its TX queue + 1 (with XPS off, the
 *           stack's skb_tx_hash takes a non-zero mapping as "recorded RX
 *           queue + 1" and transmits on that queue). A packet of no circuit
 *           goes to the default class (:2) of a queue picked by flow hash.
 *           A circuit's TCP segments also feed its round-trip times and
 *           retransmits (lqos/flows.h).
 *
 * Build: lqos-bpf/bpf/build.sh (clang -target bpf); the object it writes
 * is committed and embedded in the Rust crate.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#include "lqos/maps.h"
#include "lqos/parse.h"
#include "lqos/classify.h"
#include "lqos/flows.h"

/* Bytes the tc program wants in the linear part of the skb: the headers
 * lqos_parse walks and a TCP header with options (60 bytes). */
#define LQOS_TC_PULL 160

SEC("xdp")
int lqos_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct lqos_stats *st = lqos_stats();
	__u32 ifindex = ctx->ingress_ifindex;
	const struct lqos_iface *cfg;
	const struct lqos_circuit *c;
	const struct lqos_steer *s;
	struct lqos_pkt p;
	enum lqos_dir dir;
	__u32 cpu;
	long ret;

	if (!st)
		return XDP_PASS;
	cfg = bpf_map_lookup_elem(&lqos1_ifaces, &ifindex);
	if (!cfg) {
		lqos_count(&st->xdp_unconfigured);
		return XDP_PASS;
	}
	if (lqos_parse(data, data_end, 0, 0, &p) != LQOS_IP) {
		lqos_count(&st->xdp_unparsed);
		return XDP_PASS;
	}
	dir = lqos_direction(cfg, &p, 0);
	c = lqos_lookup(dir == LQOS_UP ? p.src : p.dst, p.v6);
	if (!c) {
		lqos_count(&st->xdp_unknown);
		return XDP_PASS;
	}
	s = lqos_steer_of(c, dir);
	cpu = s->cpu;
	if (!(cfg->flags & LQOS_IF_XDP_REDIRECT) ||
	    cpu == bpf_get_smp_processor_id()) {
		lqos_count(&st->xdp_local);
		return XDP_PASS;
	}
	/* A CPU missing from the cpumap: pass on this CPU. */
	ret = bpf_redirect_map(&lqos1_cpus, cpu, XDP_PASS);
	if (ret != XDP_REDIRECT) {
		lqos_count(&st->xdp_nocpu);
		return XDP_PASS;
	}
	lqos_count(&st->xdp_redirected);
	lqos_count_key(&lqos1_redirects, cpu);
	return XDP_REDIRECT;
}

static __always_inline void lqos_set_queue(struct __sk_buff *skb,
					   enum lqos_dir dir, __u16 queue,
					   __u32 classid)
{
	skb->priority = classid;
	/* netdev_pick_tx -> skb_tx_hash transmits on mapping - 1. */
	skb->queue_mapping = (__u32)queue + 1;
	if (queue < LQOS_MAX_QUEUES)
		lqos_count_key(&lqos1_queues,
			       (dir == LQOS_UP ? LQOS_MAX_QUEUES : 0) + queue);
}

SEC("classifier")
int lqos_tc(struct __sk_buff *skb)
{
	struct lqos_stats *st = lqos_stats();
	__u32 ifindex = skb->ifindex;
	const struct lqos_iface *cfg;
	const struct lqos_circuit *c = 0;
	const struct lqos_dflt *d;
	struct lqos_pkt p;
	enum lqos_parsed parsed;
	enum lqos_dir dir;
	void *data, *data_end;
	__u32 want, q;

	if (!st)
		return TC_ACT_OK;
	cfg = bpf_map_lookup_elem(&lqos1_ifaces, &ifindex);
	if (!cfg) {
		lqos_count(&st->tc_unconfigured);
		return TC_ACT_OK;
	}
	want = skb->len < LQOS_TC_PULL ? skb->len : LQOS_TC_PULL;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if ((long)data + want > (long)data_end)
		bpf_skb_pull_data(skb, want);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;

	parsed = lqos_parse(data, data_end, skb->vlan_present, skb->vlan_tci,
			    &p);
	dir = lqos_direction(cfg, &p, 1);
	if (parsed == LQOS_IP)
		c = lqos_lookup(dir == LQOS_UP ? p.src : p.dst, p.v6);
	if (c) {
		const struct lqos_steer *s = lqos_steer_of(c, dir);
		lqos_set_queue(skb, dir, s->queue, s->classid);
		lqos_count(&st->tc_classified);
		if (!(cfg->flags & LQOS_IF_NO_TCP))
			lqos_tcp(skb, &p, dir, c->down.classid, c->tag);
		return TC_ACT_OK;
	}
	if (parsed == LQOS_IP)
		lqos_count(&st->tc_defaulted);
	else
		lqos_count(&st->tc_unparsed);
	d = dir == LQOS_UP ? &cfg->up : &cfg->down;
	if (d->queue_count == 0)
		return TC_ACT_OK;
	q = d->queue_base + bpf_get_hash_recalc(skb) % d->queue_count;
	lqos_set_queue(skb, dir, q, ((q + 1) << 16) | cfg->default_minor);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
