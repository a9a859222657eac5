/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lqos's eBPF maps: the interface between the programs and user space.
 * User space (lqos-bpf's Rust side) owns every policy decision and writes
 * it here; the programs only look up and count.
 *
 * The layout version is part of every map's name (`lqos1_...`): a program
 * built for an incompatible layout uses new names, so its maps are created
 * and filled beside the old ones before the programs are swapped. Keep the
 * structs below in step with lqos-bpf/src/layout.rs (sizes are checked on
 * both sides).
 */
#ifndef LQOS_MAPS_H
#define LQOS_MAPS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Capacities. The exact-match and fast prefix hashes are preallocated
 * (see LQOS_HASH_FLAGS); the LPM trie is allocated on use. */
#define LQOS_MAX_HOSTS (1u << 20)
#define LQOS_MAX_NETS (1u << 20)
#define LQOS_MAX_FAST (1u << 20)
/* Prefix lengths per family looked up by exact match (lqos1_fast). */
#define LQOS_FAST_LENS 4
#define LQOS_MAX_IFACES 64
/* Per-queue counters cover queues 0..LQOS_MAX_QUEUES-1 of each direction. */
#define LQOS_MAX_QUEUES 1024
/* Placeholder; the loader sets the cpumap's size to the possible CPUs. */
#define LQOS_MAX_CPUS 256

/* Exact-match key: an IPv6 address, IPv4 as ::ffff:a.b.c.d. */
struct lqos_host_key {
	__u8 addr[16];
};

/* Longest-prefix key: prefix length in bits (IPv4: prefix + 96). */
struct lqos_net_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/* Global settings (lqos1_global, one slot). 16 bytes. */
struct lqos_global {
	/* Prefix lengths (in IPv6 bits: IPv4 /29 is 125) whose prefixes sit
	 * in lqos1_fast, longest first, 0-terminated; one list per family. */
	__u8 fast_v4[LQOS_FAST_LENS];
	__u8 fast_v6[LQOS_FAST_LENS];
	__u32 reserved[2];
};

/* Where one direction of a circuit is shaped. */
struct lqos_steer {
	__u32 classid; /* major:minor of the circuit's HTB class */
	__u16 queue;   /* 0-based TX queue (the HTB major is queue + 1) */
	__u16 cpu;     /* the CPU that owns that queue */
};

/* A circuit's address or prefix: both directions. 24 bytes. */
struct lqos_circuit {
	struct lqos_steer down;
	struct lqos_steer up;
	__u32 circuit; /* index of the circuit in the plan */
	/* A hash of the circuit's ID: with down.classid, the key of its TCP
	 * statistics (a classid taken over by another circuit starts new
	 * ones). Was a reserved 0 before; 0 is a valid tag. */
	__u32 tag;
};

/* Which traffic an interface carries. */
enum lqos_role {
	LQOS_ROLE_NONE = 0,
	/* Subscriber-facing: leaving = download (key: destination),
	 * arriving = upload (key: source). */
	LQOS_ROLE_SUBSCRIBER = 1,
	/* Internet-facing: leaving = upload (key: source), arriving =
	 * download (key: destination). */
	LQOS_ROLE_INTERNET = 2,
	/* One interface, both directions, told apart by the outermost VLAN:
	 * a frame tagged internet_vlan faces the internet. */
	LQOS_ROLE_STICK = 3,
};

/* Default class of one direction: queue base + flow hash % count, class
 * (queue + 1):default_minor. */
struct lqos_dflt {
	__u16 queue_base;
	__u16 queue_count; /* 0: leave the packet's class and queue alone */
};

#define LQOS_IF_XDP_REDIRECT 1 /* XDP redirects to the circuit's CPU */
#define LQOS_IF_NO_TCP 2       /* tc tracks no TCP round trips here */

/* Per-interface configuration, keyed by ifindex. 16 bytes. */
struct lqos_iface {
	__u8 role;	      /* enum lqos_role */
	__u8 flags;	      /* LQOS_IF_* */
	__u16 internet_vlan;  /* stick: VID of the internet side */
	__u16 network_vlan;   /* stick: VID of the subscriber side (informational) */
	__u16 default_minor;  /* minor of each HTB's default class (2) */
	struct lqos_dflt down;
	struct lqos_dflt up;
};

/* Counters, per CPU (one slot). */
struct lqos_stats {
	__u64 tc_classified;	/* a circuit's class was set */
	__u64 tc_defaulted;	/* IP of no circuit: default class */
	__u64 tc_unparsed;	/* not IP, truncated: default class by hash */
	__u64 tc_unconfigured;	/* interface not in lqos1_ifaces: untouched */
	__u64 xdp_redirected;	/* sent to the circuit's CPU */
	__u64 xdp_local;	/* already on the circuit's CPU */
	__u64 xdp_unknown;	/* IP of no circuit: passed */
	__u64 xdp_unparsed;	/* not IP, truncated: passed */
	__u64 xdp_unconfigured; /* interface not in lqos1_ifaces: passed */
	__u64 xdp_nocpu;	/* the circuit's CPU is not in lqos1_cpus: passed */
	__u64 tcp_flows_new;	 /* TCP flows entered in lqos1_flows */
	__u64 tcp_flows_closed;	 /* ... and removed on RST or both FINs */
	__u64 tcp_flows_failed;	 /* a flow could not be entered */
	__u64 tcp_samples;	 /* RTT samples taken */
	__u64 tcp_circuits_full; /* lqos1_tcp full: a circuit unmeasured */
	__u64 reserved[1];
};

/* The exact-match and fast prefix hashes are preallocated (the kernel's
 * default for a hash): their whole capacity is allocated when they are
 * created (about 100 MiB each), so a write takes an element from a free
 * list instead of allocating one (about 2x faster to fill), and an edit
 * never fails for memory below the capacity. Built with -DLQOS_MAPS_ON_USE
 * (benchmarks only), they are allocated on use instead. */
#ifdef LQOS_MAPS_ON_USE
#define LQOS_HASH_FLAGS BPF_F_NO_PREALLOC
#else
#define LQOS_HASH_FLAGS 0
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LQOS_MAX_HOSTS);
	__type(key, struct lqos_host_key);
	__type(value, struct lqos_circuit);
	__uint(map_flags, LQOS_HASH_FLAGS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_hosts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, LQOS_MAX_NETS);
	__type(key, struct lqos_net_key);
	__type(value, struct lqos_circuit);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_nets SEC(".maps");

/* Prefixes of the most common lengths, by exact match of the masked
 * address (key: length and masked address). User space puts a prefix here
 * only when no other prefix lies inside it, so the first hit, longest
 * length first, is the longest match. The rest go to lqos1_nets. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LQOS_MAX_FAST);
	__type(key, struct lqos_net_key);
	__type(value, struct lqos_circuit);
	__uint(map_flags, LQOS_HASH_FLAGS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_fast SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lqos_global);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_global SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LQOS_MAX_IFACES);
	__type(key, __u32);
	__type(value, struct lqos_iface);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_ifaces SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, LQOS_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lqos_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_stats SEC(".maps");

/* Packets the tc program put on queue q: key q (download) or
 * LQOS_MAX_QUEUES + q (upload), counted on the CPU that ran it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * LQOS_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_queues SEC(".maps");

/* Packets XDP redirected to CPU c: key c, counted on the CPU that
 * received them. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LQOS_MAX_CPUS);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lqos1_redirects SEC(".maps");

static __always_inline struct lqos_stats *lqos_stats(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&lqos1_stats, &zero);
}

static __always_inline void lqos_count(__u64 *c)
{
	/* Per-CPU slot: no other CPU writes it. */
	*c += 1;
}

static __always_inline void lqos_count_key(void *map, __u32 key)
{
	__u64 *c = bpf_map_lookup_elem(map, &key);
	if (c)
		*c += 1;
}

#endif
