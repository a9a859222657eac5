// SPDX-License-Identifier: GPL-2.0
/*
 * indr_replay: a stand-in indirect offload driver that checks the replay
 * of flow_indr_dev_register().
 *
 * On load it registers an indirect block callback, the way a driver for
 * tunnel or uplink devices does.  flow_indr_dev_register() replays every
 * filter block already bound on a device without ndo_setup_tc (an HTB
 * qdisc or class, clsact, fq_codel, ...) to the new callback; blocks bound
 * or unbound while the module is loaded reach it live.  Every call is
 * logged as one line:
 *
 *   indr_replay: TAG PHASE COMMAND dev=NAME qdisc=MAJ: binder=N
 *
 * PHASE is "replay" for calls made while flow_indr_dev_register() runs
 * and "live" for later ones; COMMAND is "bind" or "unbind".  The counts
 * are also read-only parameters under /sys/module/indr_replay/parameters/.
 * The callback binds nothing (it answers -EOPNOTSUPP, as a driver does
 * for a device it does not handle), so loading the module changes no
 * offload state.  On unload it unregisters.
 */

#include <linux/module.h>
#include <linux/netdevice.h>
#include <net/flow_offload.h>
#include <net/sch_generic.h>

static int tag;
module_param(tag, int, 0444);
MODULE_PARM_DESC(tag, "number printed on every line (tells loads apart)");

static int replay_binds;
module_param(replay_binds, int, 0444);
MODULE_PARM_DESC(replay_binds, "blocks replayed by flow_indr_dev_register()");

static int live_binds;
module_param(live_binds, int, 0444);
MODULE_PARM_DESC(live_binds, "blocks bound while loaded");

static int live_unbinds;
module_param(live_unbinds, int, 0444);
MODULE_PARM_DESC(live_unbinds, "blocks unbound while loaded");

static bool registering;

static const char *command_name(enum flow_block_command command)
{
	switch (command) {
	case FLOW_BLOCK_BIND:
		return "bind";
	case FLOW_BLOCK_UNBIND:
		return "unbind";
	}
	return "other";
}

static int indr_replay_cb(struct net_device *dev, struct Qdisc *sch,
			  void *cb_priv, enum tc_setup_type type,
			  void *type_data, void *data,
			  void (*cleanup)(struct flow_block_cb *block_cb))
{
	struct flow_block_offload *bo = type_data;
	bool replay = READ_ONCE(registering);

	if (type != TC_SETUP_BLOCK || !bo)
		return -EOPNOTSUPP;

	if (replay && bo->command == FLOW_BLOCK_BIND)
		replay_binds++;
	else if (bo->command == FLOW_BLOCK_BIND)
		live_binds++;
	else if (bo->command == FLOW_BLOCK_UNBIND)
		live_unbinds++;

	pr_info("indr_replay: %d %s %s dev=%s qdisc=%x: binder=%u\n", tag,
		replay ? "replay" : "live", command_name(bo->command),
		dev ? dev->name : "-", sch ? TC_H_MAJ(sch->handle) >> 16 : 0,
		bo->binder_type);
	return -EOPNOTSUPP;
}

static int __init indr_replay_init(void)
{
	int err;

	WRITE_ONCE(registering, true);
	err = flow_indr_dev_register(indr_replay_cb, &tag);
	WRITE_ONCE(registering, false);
	if (err)
		return err;
	pr_info("indr_replay: %d registered: %d blocks replayed\n", tag,
		replay_binds);
	return 0;
}

static void __exit indr_replay_exit(void)
{
	flow_indr_dev_unregister(indr_replay_cb, &tag, NULL);
	pr_info("indr_replay: %d unregistered: %d live binds, %d live unbinds\n",
		tag, live_binds, live_unbinds);
}

module_init(indr_replay_init);
module_exit(indr_replay_exit);
MODULE_DESCRIPTION("Checks the block replay of flow_indr_dev_register()");
MODULE_LICENSE("GPL");
