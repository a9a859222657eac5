/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * TCP round-trip times and retransmits, measured by the tc egress program
 * on every classified TCP segment and aggregated per circuit in the
 * kernel (no per-sample event goes to user space).
 *
 * Per flow (lqos1_flows, an LRU hash keyed by the subscriber's and the
 * far end's address and port, so both directions share one entry), per
 * direction of the packets: the TCP timestamp state and the highest
 * sequence number seen.
 *
 * - RTT (pping's method): the first time a new TSval is seen in one
 *   direction it is remembered with the time, unless one is already
 *   waiting; a later packet of the other direction whose TSecr equals it
 *   gives a sample, and frees the slot (a TSecr past it frees it without
 *   one). Each TSval is sampled at most once, about one sample per
 *   round trip per flow and side. A TSval seen leaving towards the
 *   subscriber and echoed by the subscriber times the subscriber side
 *   (the last mile and the shaper's own queue); one seen leaving towards
 *   the internet and echoed from there, the internet side.
 * - Retransmits: a segment carrying data (or SYN/FIN) that starts below
 *   the highest sequence number already seen in its direction, unless its
 *   TSval is older than the newest one seen (an original overtaken on
 *   the way: reordering, not a retransmission); counted in segments (a
 *   GSO/GRO packet as the MSS-sized segments of it sent before).
 *
 * Per circuit (lqos1_tcp, keyed by the circuit's download classid and
 * tag, allocated on the circuit's first TCP flow): per direction of the
 * data (the way the flow carried more bytes so far) and side, a histogram
 * of RTT samples in buckets a factor 2^(1/4) apart from 100 us to 11 s,
 * with their count and sum; retransmits per direction; TCP flows seen
 * and those without timestamps (never measured, never a zero RTT).
 * Updated with atomic adds: a circuit's two directions may run on two
 * CPUs.
 *
 * The flow state itself is updated without locks: the two directions of
 * a flow write their own half and only clear the other's waiting TSval,
 * so a race loses or repeats one sample, never corrupts an aggregate.
 */
#ifndef LQOS_FLOWS_H
#define LQOS_FLOWS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lqos/maps.h"
#include "lqos/parse.h"
#include "lqos/classify.h"

/* Flow table size unless the loader sets one ([lqos] flow_table_size). */
#define LQOS_FLOWS_DEFAULT (1u << 18)
/* Circuits with TCP statistics (allocated on use). */
#define LQOS_MAX_TCP_CIRCUITS (1u << 18)
/* RTT histogram: bucket 0 below 100 us, bucket k (1..67) from
 * 100 us * 2^((k-1)/4) up to 100 us * 2^(k/4), bucket 68 from 11.02 s. */
#define LQOS_RTT_BUCKETS 69
#define LQOS_RTT_BASE_NS 100000ull
/* A TSval waiting longer than this (us) for its echo is replaced by the
 * next new one. */
#define LQOS_TS_TIMEOUT_US 10000000u
#define LQOS_BALANCE_MAX (1 << 30)
/* The transport header must start within this many bytes of the frame. */
#define LQOS_L4_MAX 512
/* TCP options walked before giving up on finding the timestamps. */
#define LQOS_TCP_OPTS 10

#define LQOS_TCP_FIN 0x01
#define LQOS_TCP_SYN 0x02
#define LQOS_TCP_RST 0x04
#define LQOS_TCP_ACK 0x10

/* Flow key: the subscriber's end first, whichever way the packet goes.
 * 36 bytes. */
struct lqos_flow_key {
	__u8 sub[16];	 /* subscriber's address (IPv4 as ::ffff:a.b.c.d) */
	__u8 inet[16];	 /* far end's address */
	__u16 sub_port;	 /* network order */
	__u16 inet_port; /* network order */
};

#define LQOS_HALF_PENDING 1 /* ts_pending waits for its echo */
#define LQOS_HALF_SEQ 2	    /* seq_end is set */
#define LQOS_HALF_TS 4	    /* ts_max is set */
#define LQOS_HALF_FIN 8	    /* a FIN went this way */

/* One direction of a flow (by the packets' direction). 16 bytes. */
struct lqos_flow_half {
	__u32 ts_time;	  /* ktime in us (wrapping) ts_pending was first seen */
	__u32 ts_pending; /* TSval waiting for its echo */
	__u32 ts_max;	  /* newest TSval seen */
	__u32 seq_end;	  /* highest sequence number + length seen */
};

/* lqos1_flows' value. 40 bytes: with the key and the kernel's 48-byte
 * element header, an entry is two cache lines. */
struct lqos_flow {
	struct lqos_flow_half half[2]; /* [LQOS_DOWN], [LQOS_UP] */
	/* Payload bytes towards the subscriber minus those towards the
	 * internet, kept within +-2^30: which way the data flows. */
	__s32 balance;
	__u8 flags[2]; /* LQOS_HALF_*, per direction */
	__u16 pad;
};

/* lqos1_tcp's key: the circuit's download classid and tag. */
struct lqos_tcp_key {
	__u32 classid;
	__u32 tag;
};

/* One histogram of RTT samples. 296 bytes. */
struct lqos_rtt_hist {
	__u64 count;
	__u64 sum_ns;
	__u32 bucket[LQOS_RTT_BUCKETS];
	__u32 pad;
};

#define LQOS_SIDE_SUBSCRIBER 0
#define LQOS_SIDE_INTERNET 1

/* lqos1_tcp's value. 1248 bytes. */
struct lqos_tcp_circuit {
	/* [data direction * 2 + side]: download subscriber, download
	 * internet, upload subscriber, upload internet. */
	struct lqos_rtt_hist rtt[4];
	__u64 retransmits[2]; /* [LQOS_DOWN], [LQOS_UP] */
	__u64 flows;	      /* TCP flows seen (table entries made) */
	__u64 unmeasured;     /* of those, without TCP timestamps */
	__u64 reserved[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LQOS_FLOWS_DEFAULT);
	__type(key, struct lqos_flow_key);
	__type(value, struct lqos_flow);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LQOS_MAX_TCP_CIRCUITS);
	__type(key, struct lqos_tcp_key);
	__type(value, struct lqos_tcp_circuit);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_tcp SEC(".maps");

/* All zero, never written: the initial value of a circuit's entry (too
 * big for the stack). Not pinned. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lqos_tcp_circuit);
	__uint(map_flags, BPF_F_RDONLY_PROG);
} lqos_tcp_zero SEC(".maps");

/* Bucket of an RTT of `ns` nanoseconds (see LQOS_RTT_BUCKETS). */
static __always_inline __u32 lqos_rtt_bucket(__u64 ns)
{
	__u64 y, m;
	__u32 n = 0, b;

	if (ns < LQOS_RTT_BASE_NS)
		return 0;
	if (ns >= (1ull << 40))
		return LQOS_RTT_BUCKETS - 1;
	/* ns / 100 us in 16.16 fixed point: at least 1.0. */
	y = (ns << 16) / LQOS_RTT_BASE_NS;
	m = y;
	if (m >> 32) {
		m >>= 32;
		n += 32;
	}
	if (m >> 16) {
		m >>= 16;
		n += 16;
	}
	if (m >> 8) {
		m >>= 8;
		n += 8;
	}
	if (m >> 4) {
		m >>= 4;
		n += 4;
	}
	if (m >> 2) {
		m >>= 2;
		n += 2;
	}
	if (m >> 1)
		n += 1;
	/* n >= 16: the octave is n - 16; the mantissa in [1, 2) as 16.16,
	 * against 2^(1/4), 2^(2/4), 2^(3/4) rounded up. */
	m = y >> (n - 16);
	b = 1 + 4 * (n - 16) + (m >= 77936) + (m >= 92682) + (m >= 110218);
	if (b > LQOS_RTT_BUCKETS - 1)
		b = LQOS_RTT_BUCKETS - 1;
	return b;
}

/* The circuit's statistics, created zeroed on first use. NULL: the map is
 * full (counted). */
static __always_inline struct lqos_tcp_circuit *
lqos_tcp_circuit(const struct lqos_circuit *c, struct lqos_stats *st)
{
	struct lqos_tcp_key k = {.classid = c->down.classid, .tag = c->tag};
	struct lqos_tcp_circuit *a;
	const struct lqos_tcp_circuit *z;
	__u32 zero = 0;

	a = bpf_map_lookup_elem(&lqos1_tcp, &k);
	if (a)
		return a;
	z = bpf_map_lookup_elem(&lqos_tcp_zero, &zero);
	if (!z)
		return 0;
	/* Another CPU may have made it meanwhile: EEXIST is fine. */
	bpf_map_update_elem(&lqos1_tcp, &k, z, BPF_NOEXIST);
	a = bpf_map_lookup_elem(&lqos1_tcp, &k);
	if (!a)
		lqos_count(&st->tcp_circuits_full);
	return a;
}

/* Adds an RTT sample of `ns` to histogram `idx` of circuit `c`. */
static __always_inline void lqos_rtt_sample(const struct lqos_circuit *c,
					    struct lqos_stats *st, __u32 idx,
					    __u64 ns)
{
	struct lqos_tcp_circuit *a = lqos_tcp_circuit(c, st);
	struct lqos_rtt_hist *h;
	__u32 b;

	if (!a)
		return;
	h = &a->rtt[idx & 3];
	b = lqos_rtt_bucket(ns);
	if (b >= LQOS_RTT_BUCKETS)
		return;
	__sync_fetch_and_add(&h->count, 1);
	__sync_fetch_and_add(&h->sum_ns, ns);
	__sync_fetch_and_add(&h->bucket[b], 1);
	lqos_count(&st->tcp_samples);
}

/* What lqos_tcp reads from a TCP header. */
struct lqos_tcp_seg {
	__u16 sport; /* network order */
	__u16 dport;
	__u32 seq;
	__u32 tsval;
	__u32 tsecr;
	__u32 payload; /* bytes of data */
	__u8 flags;    /* LQOS_TCP_* */
	__u8 has_ts;
};

/*
 * Reads the TCP header at data + p->l4_off: sequence, flags, payload
 * length (from the IP header's length, else the skb's), timestamps.
 * Returns 0 when it is not there whole.
 */
static __always_inline int lqos_tcp_read(void *data, void *data_end,
					 __u32 skb_len,
					 const struct lqos_pkt *p,
					 struct lqos_tcp_seg *s)
{
	__u32 l3 = p->l3_off, l4 = p->l4_off, hlen, iplen = 0, len;
	__u8 *ip, *th, *o, *end;

	if (l4 > LQOS_L4_MAX || l3 > l4)
		return 0;
	/* Bound l3 on its own too: older verifiers (Linux 6.1) learn no
	 * bound from l3 <= l4, and refuse ip + 6 <= data_end with an l3 of
	 * up to 65,535 (past MAX_PACKET_OFF with the 6). The barrier keeps
	 * the compiler from dropping the check as implied. */
	asm volatile("" : "+r"(l3));
	if (l3 > LQOS_L4_MAX)
		return 0;
	th = (__u8 *)data + l4;
	if (th + 20 > (__u8 *)data_end)
		return 0;
	hlen = (__u32)(th[12] >> 4) * 4;
	if (hlen < 20)
		return 0;
	s->sport = *(__u16 *)th;
	s->dport = *(__u16 *)(th + 2);
	s->seq = bpf_ntohl(*(__u32 *)(th + 4));
	s->flags = th[13];
	s->has_ts = 0;

	ip = (__u8 *)data + l3;
	if (ip + 6 <= (__u8 *)data_end) {
		if (p->v6) {
			/* Payload length: everything after the fixed header. */
			iplen = bpf_ntohs(*(__u16 *)(ip + 4));
			if (iplen)
				iplen += LQOS_IPV6_HLEN;
		} else {
			iplen = bpf_ntohs(*(__u16 *)(ip + 2));
		}
	}
	/* 0 (a GSO packet past 64 KiB): the skb's length. */
	len = iplen ? l3 + iplen : skb_len;
	if (len > skb_len)
		len = skb_len;
	s->payload = len > l4 + hlen ? len - l4 - hlen : 0;

	/* Options: Linux puts NOP NOP TS first on every segment after the
	 * SYN; other stacks and SYNs are walked. */
	o = th + 20;
	end = th + hlen;
	if (o + 12 <= end && o + 12 <= (__u8 *)data_end &&
	    *(__u32 *)o == bpf_htonl(0x0101080a)) {
		s->tsval = bpf_ntohl(*(__u32 *)(o + 4));
		s->tsecr = bpf_ntohl(*(__u32 *)(o + 8));
		s->has_ts = 1;
		return 1;
	}
#pragma unroll
	for (int i = 0; i < LQOS_TCP_OPTS; i++) {
		__u8 kind, olen;
		if (o + 1 > end || o + 1 > (__u8 *)data_end)
			break;
		kind = o[0];
		if (kind == 0)
			break;
		if (kind == 1) {
			o++;
			continue;
		}
		if (o + 2 > end || o + 2 > (__u8 *)data_end)
			break;
		olen = o[1];
		if (olen < 2)
			break;
		if (kind == 8 && olen == 10) {
			if (o + 10 > end || o + 10 > (__u8 *)data_end)
				break;
			s->tsval = bpf_ntohl(*(__u32 *)(o + 2));
			s->tsecr = bpf_ntohl(*(__u32 *)(o + 6));
			s->has_ts = 1;
			break;
		}
		o += olen;
	}
	return 1;
}

static __always_inline void lqos_flow_key_of(const struct lqos_pkt *p,
					     const struct lqos_tcp_seg *s,
					     __u32 dir,
					     struct lqos_flow_key *k)
{
	if (dir == LQOS_DOWN) {
		__builtin_memcpy(k->sub, p->dst, 16);
		__builtin_memcpy(k->inet, p->src, 16);
		k->sub_port = s->dport;
		k->inet_port = s->sport;
	} else {
		__builtin_memcpy(k->sub, p->src, 16);
		__builtin_memcpy(k->inet, p->dst, 16);
		k->sub_port = s->sport;
		k->inet_port = s->dport;
	}
}

/*
 * Segments sent again in a packet starting at seq, span long, below
 * seq_end, the highest sequence seen that way: 1 for a plain segment;
 * for a GSO or GRO packet (several MSS-sized segments in one skb) those
 * of its segments below seq_end, so a retransmission counts as many
 * segments as the sender's own count (tcpi_total_retrans), however the
 * stack batched them.
 */
static __always_inline __u32 lqos_resent_segs(struct __sk_buff *skb,
					      __u32 seq, __u32 span,
					      __u32 seq_end)
{
	__u32 segs = skb->gso_segs, mss = skb->gso_size, old, n;

	if (segs <= 1 || !mss)
		return 1;
	old = seq_end - seq;
	if (old > span)
		old = span;
	n = (old + mss - 1) / mss;
	if (n > segs)
		n = segs;
	return n ? n : 1;
}

/*
 * Tracks one TCP segment of a circuit (download classid `classid`, tag
 * `tag`) leaving in direction `dir`; `p` is lqos_parse's result for the
 * skb's data. Called by the tc egress program after classification.
 *
 * A global function: the verifier checks it once, on its own, instead of
 * once per path through the header walk before it (which multiplies the
 * states past its limit). So it takes the skb and scalars, not packet
 * pointers, and returns 0.
 */
__attribute__((noinline)) int lqos_tcp(struct __sk_buff *skb,
				       const struct lqos_pkt *p, __u32 dir,
				       __u32 classid, __u32 tag)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct lqos_circuit cv = {.down.classid = classid, .tag = tag};
	const struct lqos_circuit *c = &cv;
	struct lqos_stats *st = lqos_stats();
	struct lqos_flow_key k;
	struct lqos_tcp_seg s;
	struct lqos_flow *f;
	struct lqos_flow_half *me, *other;
	__u8 *me_flags, *other_flags;
	struct lqos_tcp_circuit *a;
	__u32 span, now = 0;

	if (!p || !st)
		return 0;
	if (p->l4proto != 6 || !p->l4_ok)
		return 0;
	if (!lqos_tcp_read(data, data_end, skb->len, p, &s))
		return 0;
	lqos_flow_key_of(p, &s, dir, &k);

	f = bpf_map_lookup_elem(&lqos1_flows, &k);
	if (!f) {
		struct lqos_flow zero = {};
		/* A new flow starts with a SYN or a data segment (not a
		 * pure ACK, FIN or RST: the tail of a flow already closed). */
		if (s.flags & (LQOS_TCP_RST | LQOS_TCP_FIN))
			return 0;
		if (!(s.flags & LQOS_TCP_SYN) && s.payload == 0)
			return 0;
		if (bpf_map_update_elem(&lqos1_flows, &k, &zero,
					BPF_NOEXIST) == 0) {
			lqos_count(&st->tcp_flows_new);
			a = lqos_tcp_circuit(c, st);
			if (a) {
				__sync_fetch_and_add(&a->flows, 1);
				if (!s.has_ts)
					__sync_fetch_and_add(&a->unmeasured,
							     1);
			}
		}
		f = bpf_map_lookup_elem(&lqos1_flows, &k);
		if (!f) {
			lqos_count(&st->tcp_flows_failed);
			return 0;
		}
	}
	if (dir == LQOS_UP) {
		me = &f->half[1];
		other = &f->half[0];
		me_flags = &f->flags[1];
		other_flags = &f->flags[0];
	} else {
		me = &f->half[0];
		other = &f->half[1];
		me_flags = &f->flags[0];
		other_flags = &f->flags[1];
	}

	if (s.flags & LQOS_TCP_RST) {
		if (bpf_map_delete_elem(&lqos1_flows, &k) == 0)
			lqos_count(&st->tcp_flows_closed);
		return 0;
	}

	if (s.payload) {
		__s32 b = f->balance;
		if (dir == LQOS_DOWN)
			b = b > LQOS_BALANCE_MAX ? b : b + (__s32)(s.payload & 0xffffff);
		else
			b = b < -LQOS_BALANCE_MAX ? b : b - (__s32)(s.payload & 0xffffff);
		f->balance = b;
	}
	/* Retransmits: data going backwards. */
	span = s.payload + !!(s.flags & LQOS_TCP_SYN) +
	       !!(s.flags & LQOS_TCP_FIN);
	if (span) {
		__u32 end = s.seq + span;
		if (*me_flags & LQOS_HALF_SEQ) {
			if ((__s32)(s.seq - me->seq_end) < 0 &&
			    !(s.has_ts && (*me_flags & LQOS_HALF_TS) &&
			      (__s32)(s.tsval - me->ts_max) < 0)) {
				a = lqos_tcp_circuit(c, st);
				if (a)
					__sync_fetch_and_add(
						&a->retransmits[dir & 1],
						lqos_resent_segs(skb, s.seq,
								 span,
								 me->seq_end));
			}
			if ((__s32)(end - me->seq_end) > 0)
				me->seq_end = end;
		} else {
			me->seq_end = end;
			*me_flags |= LQOS_HALF_SEQ;
		}
	}

	if (s.has_ts) {
		/* The clock is read only for a sample or a new TSval (at most
		 * one per millisecond and direction with Linux's TS clock),
		 * not for every segment. */
		__s32 d = (__s32)(s.tsecr - other->ts_pending);
		int echo = (*other_flags & LQOS_HALF_PENDING) &&
			   (s.flags & LQOS_TCP_ACK) && d >= 0;
		int fresh = !(*me_flags & LQOS_HALF_TS) ||
			    (__s32)(s.tsval - me->ts_max) > 0;

		if ((echo && d == 0) || fresh)
			now = (__u32)(bpf_ktime_get_ns() / 1000);
		/* The echo of the other direction's waiting TSval (or of a
		 * later one: that one is given up). */
		if (echo) {
			__u32 rtt = now - other->ts_time;
			*other_flags &= ~LQOS_HALF_PENDING;
			if (d == 0 && rtt < LQOS_TS_TIMEOUT_US * 8) {
				/* The TSval went the other way: that way's
				 * side. The data goes the way with more bytes
				 * (ties: download). */
				__u32 side = dir == LQOS_UP ? LQOS_SIDE_SUBSCRIBER
							    : LQOS_SIDE_INTERNET;
				__u32 data_dir =
					f->balance < 0 ? LQOS_UP : LQOS_DOWN;
				lqos_rtt_sample(c, st, data_dir * 2 + side,
						(__u64)rtt * 1000);
			}
		}
		/* A new TSval of this direction waits for its echo, unless
		 * one already does. */
		if (fresh) {
			me->ts_max = s.tsval;
			*me_flags |= LQOS_HALF_TS;
			if (!(*me_flags & LQOS_HALF_PENDING) ||
			    now - me->ts_time > LQOS_TS_TIMEOUT_US) {
				me->ts_pending = s.tsval;
				me->ts_time = now;
				*me_flags |= LQOS_HALF_PENDING;
			}
		}
	}

	if (s.flags & LQOS_TCP_FIN) {
		*me_flags |= LQOS_HALF_FIN;
		if (*other_flags & LQOS_HALF_FIN) {
			if (bpf_map_delete_elem(&lqos1_flows, &k) == 0)
				lqos_count(&st->tcp_flows_closed);
		}
	}
	return 0;
}

#endif
