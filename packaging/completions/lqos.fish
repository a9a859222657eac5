# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_lqos_global_optspecs
    string join \n h/help V/version
end

function __fish_lqos_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_lqos_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_lqos_using_subcommand
    set -l cmd (__fish_lqos_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c lqos -n "__fish_lqos_needs_command" -s h -l help -d 'Print help'
complete -c lqos -n "__fish_lqos_needs_command" -s V -l version -d 'Print version'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "check" -d 'Validate network.json, ShapedDevices.csv and lqos.conf'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "compare" -d 'Compare the tree lqos plans with the one LibreQoS built (its state directory and tc commands), by name, field by field'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "gen" -d 'Write a synthetic network (network.json, ShapedDevices.csv, lqos.conf)'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "plan" -d 'Plan the tc trees and write tc -b files and plan.json'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "show" -d 'Print the planned tree for a person to read'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "diff" -d 'Diff two plans (or two sets of inputs) into tc ops'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "apply" -d 'Load a plan into the kernel (incremental by default)'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "verify" -d 'Compare the live kernel tree with a plan'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "detach" -d 'Remove lqos\'s eBPF classifier: detach its programs from every interface and unpin its maps'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "bench" -d 'Benchmark loading methods in a private network namespace'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "watch" -d 'Run as a daemon: apply at start and on every input change, verify periodically, optionally with lazy leaves'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "status" -d 'Print what the `lqos watch` daemon last did'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "confirm" -d 'Apply once the inputs the daemon\'s removal guard refused'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "journal" -d 'List the last input sets that were applied (the input journal)'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "stats" -d 'Per-circuit statistics: rates against ceil, drops, ECN marks, cake delays (one snapshot: two polls an interval apart)'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "top" -d 'A full-screen view of the busiest circuits and nodes, refreshed every second (keys: s sort, v view, / filter, q quit)'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "man" -d 'Print the man page (or write all pages with --out DIR)'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c lqos -n "__fish_lqos_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c lqos -n "__fish_lqos_using_subcommand check" -l network -d 'The node hierarchy (LibreQoS network.json)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand check" -l devices -d 'The circuits and devices (LibreQoS ShapedDevices.csv)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand check" -l config -d 'The config (LibreQoS lqos.conf, TOML) [default: lqos.conf if it exists, else built-in defaults]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand check" -l netns -d 'Look the interfaces lqos.conf names up in this network namespace' -r
complete -c lqos -n "__fish_lqos_using_subcommand check" -l strict -d 'Exit 1 when there are warnings (and no errors)'
complete -c lqos -n "__fish_lqos_using_subcommand check" -l offline -d 'Do not look up the interfaces lqos.conf names (the files are checked for another machine)'
complete -c lqos -n "__fish_lqos_using_subcommand check" -s h -l help -d 'Print help'
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l libreqos -d 'LibreQoS\'s state directory (lqos.conf `state_directory`, by default /opt/libreqos/state): shaping/queuingStructure.json and stats/statsByCircuit.json name LibreQoS\'s classes' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l tc -d 'LibreQoS\'s tc commands [default: DIR/debug/linux_tc_rust.txt (what its bakery loaded), else DIR/debug/linux_tc.txt]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l network -d 'The node hierarchy (LibreQoS network.json)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l devices -d 'The circuits and devices (LibreQoS ShapedDevices.csv)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l config -d 'The config (LibreQoS lqos.conf, TOML) [default: lqos.conf if it exists, else built-in defaults]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l queues -d 'TX queues per interface [default: lqos.conf override_available_queues, else 16 for plan/show/diff, the interfaces\' TX queues for apply/verify]' -r
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l sqm -d 'Leaf qdisc for circuits, overriding lqos.conf default_sqm (e.g. "cake diffserv4", "fq_codel", "pfifo limit 1000", "none")' -r
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l strategy -d 'How top-level subtrees are spread over the queues [default: balanced]' -r -f -a "balanced\t'Largest subtree first into the least-loaded queue (default)'
round-robin\t'LibreQoS\'s round robin over top-level nodes'"
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l classifier -d 'Classifier: `bpf` runs lqos\'s eBPF data path (XDP CPU steering and a tc program reading pinned maps, updated by address without RTNL; any kernel with BPF); `tc` plans clsact + flower + skbedit filters with the tree; `none` leaves classification to an external program (feed it ip_map.csv) [default: lqos.conf [lqos] classifier, else none]' -r -f -a "bpf\t'lqos\'s eBPF data path: XDP CPU steering and a cls_bpf program reading pinned maps (needs BPF, clsact and cls_bpf; XDP optional)'
tc\t'clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0)'
none\t'No classifier ops (LibreQoS\'s XDP or another program classifies)'"
complete -c lqos -n "__fish_lqos_using_subcommand compare" -l summary -d 'Print only the counts, not every difference'
complete -c lqos -n "__fish_lqos_using_subcommand compare" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l circuits -d 'Number of circuits' -r
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l seed -d 'RNG seed (same seed, same files)' -r
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l sites -d 'Top-level sites' -r
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l site-fanout -d 'Child sites per site above the last site level' -r
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l fanout -d 'APs per last-level site' -r
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l depth -d 'Levels of sites (0 = flat network)' -r
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l multi-device-fraction -d 'Share of circuits with several devices (0..1)' -r
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l out -d 'Output directory (created if missing)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l oversubscribed -d 'Minimums of a quarter of each circuit\'s maximum even where an AP\'s circuits then ask for more than the AP guarantees (the planner squashes them, as LibreQoS does). Without it each AP\'s circuits get a smaller fraction where needed, so every minimum is guaranteed'
complete -c lqos -n "__fish_lqos_using_subcommand gen" -l force -d 'Overwrite existing files (without it, gen refuses to replace a real network.json / ShapedDevices.csv / lqos.conf)'
complete -c lqos -n "__fish_lqos_using_subcommand gen" -s h -l help -d 'Print help'
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l network -d 'The node hierarchy (LibreQoS network.json)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l devices -d 'The circuits and devices (LibreQoS ShapedDevices.csv)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l config -d 'The config (LibreQoS lqos.conf, TOML) [default: lqos.conf if it exists, else built-in defaults]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l queues -d 'TX queues per interface [default: lqos.conf override_available_queues, else 16 for plan/show/diff, the interfaces\' TX queues for apply/verify]' -r
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l sqm -d 'Leaf qdisc for circuits, overriding lqos.conf default_sqm (e.g. "cake diffserv4", "fq_codel", "pfifo limit 1000", "none")' -r
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l strategy -d 'How top-level subtrees are spread over the queues [default: balanced]' -r -f -a "balanced\t'Largest subtree first into the least-loaded queue (default)'
round-robin\t'LibreQoS\'s round robin over top-level nodes'"
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l classifier -d 'Classifier: `bpf` runs lqos\'s eBPF data path (XDP CPU steering and a tc program reading pinned maps, updated by address without RTNL; any kernel with BPF); `tc` plans clsact + flower + skbedit filters with the tree; `none` leaves classification to an external program (feed it ip_map.csv) [default: lqos.conf [lqos] classifier, else none]' -r -f -a "bpf\t'lqos\'s eBPF data path: XDP CPU steering and a cls_bpf program reading pinned maps (needs BPF, clsact and cls_bpf; XDP optional)'
tc\t'clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0)'
none\t'No classifier ops (LibreQoS\'s XDP or another program classifies)'"
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l previous -d 'A previous plan.json: keep its classids for circuits and nodes that still exist' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l adopt-libreqos -d 'Plan from the allocation a LibreQoS box recorded in its state directory DIR (shaping/queuingStructure.json, stats/statsByCircuit.json): LibreQoS\'s classids, so ip_map.csv matches its XDP map. Leaf handles are lqos\'s (`lqos apply --adopt-libreqos` takes the kernel\'s)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l out -d 'Output directory (created if missing)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l root-delete -d 'Start each tc file with `qdisc del dev X root`'
complete -c lqos -n "__fish_lqos_using_subcommand plan" -l with-ops -d 'Also store the ops in plan.json (by default it holds the config, the tc-relevant inputs and the allocation; readers re-derive the ops)'
complete -c lqos -n "__fish_lqos_using_subcommand plan" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand show" -l network -d 'The node hierarchy (LibreQoS network.json)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand show" -l devices -d 'The circuits and devices (LibreQoS ShapedDevices.csv)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand show" -l config -d 'The config (LibreQoS lqos.conf, TOML) [default: lqos.conf if it exists, else built-in defaults]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand show" -l queues -d 'TX queues per interface [default: lqos.conf override_available_queues, else 16 for plan/show/diff, the interfaces\' TX queues for apply/verify]' -r
complete -c lqos -n "__fish_lqos_using_subcommand show" -l sqm -d 'Leaf qdisc for circuits, overriding lqos.conf default_sqm (e.g. "cake diffserv4", "fq_codel", "pfifo limit 1000", "none")' -r
complete -c lqos -n "__fish_lqos_using_subcommand show" -l strategy -d 'How top-level subtrees are spread over the queues [default: balanced]' -r -f -a "balanced\t'Largest subtree first into the least-loaded queue (default)'
round-robin\t'LibreQoS\'s round robin over top-level nodes'"
complete -c lqos -n "__fish_lqos_using_subcommand show" -l classifier -d 'Classifier: `bpf` runs lqos\'s eBPF data path (XDP CPU steering and a tc program reading pinned maps, updated by address without RTNL; any kernel with BPF); `tc` plans clsact + flower + skbedit filters with the tree; `none` leaves classification to an external program (feed it ip_map.csv) [default: lqos.conf [lqos] classifier, else none]' -r -f -a "bpf\t'lqos\'s eBPF data path: XDP CPU steering and a cls_bpf program reading pinned maps (needs BPF, clsact and cls_bpf; XDP optional)'
tc\t'clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0)'
none\t'No classifier ops (LibreQoS\'s XDP or another program classifies)'"
complete -c lqos -n "__fish_lqos_using_subcommand show" -l plan -d 'Show a saved plan.json instead of the plan last applied' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand show" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand show" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand show" -l interface -d 'Only this interface [default: all]' -r
complete -c lqos -n "__fish_lqos_using_subcommand show" -l ip -d 'Where this address is shaped (longest-prefix match over every device\'s addresses): circuit, device, node path, queue, classids, rates and leaf, per direction' -r
complete -c lqos -n "__fish_lqos_using_subcommand show" -l from-inputs -d 'Plan the input files (with the planner options given; 16 queues unless --queues or override_available_queues say) instead of showing the plan last applied. Implied by --queues, --sqm, --strategy and --classifier, and the default when nothing was applied'
complete -c lqos -n "__fish_lqos_using_subcommand show" -l circuits -d 'Also list every circuit'
complete -c lqos -n "__fish_lqos_using_subcommand show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l old-network -d 'Old network.json (when OLD is not given)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l old-devices -d 'Old ShapedDevices.csv (when OLD is not given)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l old-config -d 'Old lqos.conf (when OLD is not given) [default: the new --config]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l network -d 'The node hierarchy (LibreQoS network.json)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l devices -d 'The circuits and devices (LibreQoS ShapedDevices.csv)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l config -d 'The config (LibreQoS lqos.conf, TOML) [default: lqos.conf if it exists, else built-in defaults]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l queues -d 'TX queues per interface [default: lqos.conf override_available_queues, else 16 for plan/show/diff, the interfaces\' TX queues for apply/verify]' -r
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l sqm -d 'Leaf qdisc for circuits, overriding lqos.conf default_sqm (e.g. "cake diffserv4", "fq_codel", "pfifo limit 1000", "none")' -r
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l strategy -d 'How top-level subtrees are spread over the queues [default: balanced]' -r -f -a "balanced\t'Largest subtree first into the least-loaded queue (default)'
round-robin\t'LibreQoS\'s round robin over top-level nodes'"
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l classifier -d 'Classifier: `bpf` runs lqos\'s eBPF data path (XDP CPU steering and a tc program reading pinned maps, updated by address without RTNL; any kernel with BPF); `tc` plans clsact + flower + skbedit filters with the tree; `none` leaves classification to an external program (feed it ip_map.csv) [default: lqos.conf [lqos] classifier, else none]' -r -f -a "bpf\t'lqos\'s eBPF data path: XDP CPU steering and a cls_bpf program reading pinned maps (needs BPF, clsact and cls_bpf; XDP optional)'
tc\t'clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0)'
none\t'No classifier ops (LibreQoS\'s XDP or another program classifies)'"
complete -c lqos -n "__fish_lqos_using_subcommand diff" -l summary -d 'Print only the summary'
complete -c lqos -n "__fish_lqos_using_subcommand diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l network -d 'The node hierarchy (LibreQoS network.json)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l devices -d 'The circuits and devices (LibreQoS ShapedDevices.csv)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l config -d 'The config (LibreQoS lqos.conf, TOML) [default: lqos.conf if it exists, else built-in defaults]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l plan -d 'Use this plan (JSON written by `lqos plan`) instead of the inputs' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l queues -d 'TX queues per interface [default: lqos.conf override_available_queues, else 16 for plan/show/diff, the interfaces\' TX queues for apply/verify]' -r
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l sqm -d 'Leaf qdisc for circuits, overriding lqos.conf default_sqm (e.g. "cake diffserv4", "fq_codel", "pfifo limit 1000", "none")' -r
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l strategy -d 'How top-level subtrees are spread over the queues [default: balanced]' -r -f -a "balanced\t'Largest subtree first into the least-loaded queue (default)'
round-robin\t'LibreQoS\'s round robin over top-level nodes'"
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l classifier -d 'Classifier: `bpf` runs lqos\'s eBPF data path (XDP CPU steering and a tc program reading pinned maps, updated by address without RTNL; any kernel with BPF); `tc` plans clsact + flower + skbedit filters with the tree; `none` leaves classification to an external program (feed it ip_map.csv) [default: lqos.conf [lqos] classifier, else none]' -r -f -a "bpf\t'lqos\'s eBPF data path: XDP CPU steering and a cls_bpf program reading pinned maps (needs BPF, clsact and cls_bpf; XDP optional)'
tc\t'clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0)'
none\t'No classifier ops (LibreQoS\'s XDP or another program classifies)'"
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l adopt-libreqos -d 'Adopt the tree a LibreQoS box built: plan from the allocation in LibreQoS\'s state directory DIR (shaping/queuingStructure.json, stats/statsByCircuit.json: every node\'s and circuit\'s classid) and the leaf handles the kernel holds, instead of the last good plan, so LibreQoS\'s tree and classids are kept (its XDP map stays right). Afterwards the saved plan keeps them' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l backend -d 'Loader' -r -f -a "netlink\t'rtnetlink, many requests per sendmsg'
tc\t'`tc -b` processes fed on stdin'"
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l to -d 'With --rollback: the journal\'s input set N (1: the newest, 2: the one live before it, ...)' -r
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l max-removals -d 'Refuse to remove more circuits than this (a count, or a percentage such as `5%`; `0`: no limit) [default: lqos.conf\'s `[lqos] max_removals`, else more than 10% and more than 10 circuits]' -r
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l parallel -d 'One worker per interface (the default for --backend tc)'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l serial -d 'One interface after another (the default for --backend netlink: the kernel handles tc messages one at a time under its RTNL lock, and two netlink workers only contend for it; `lqos bench` measures this)'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l combined -d 'With --backend tc: one combined tc batch for all interfaces (LibreQoS\'s way)'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l full -d 'Delete the root and rebuild everything instead of sending the diff'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l dry-run -d 'Print the ops that would be sent (tc syntax) and change nothing'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l rollback -d 'Re-apply the last plan that loaded successfully (with --to N: the input set N of the journal, `lqos journal`)'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l allow-removals -d 'Apply even when more circuits would be removed than the removal guard allows (an empty input is refused all the same)'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l verify -d 'Read the trees back after loading and verify them'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -l skip-memory-check -d 'Load even when the new leaf qdiscs are estimated not to fit in the kernel\'s memory (MemAvailable minus a margin; a cake leaf takes about 1 MiB). Without it such a load is refused before anything changes'
complete -c lqos -n "__fish_lqos_using_subcommand apply" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l network -d 'The node hierarchy (LibreQoS network.json)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l devices -d 'The circuits and devices (LibreQoS ShapedDevices.csv)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l config -d 'The config (LibreQoS lqos.conf, TOML) [default: lqos.conf if it exists, else built-in defaults]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l plan -d 'Use this plan (JSON written by `lqos plan`) instead of the inputs' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l queues -d 'TX queues per interface [default: lqos.conf override_available_queues, else 16 for plan/show/diff, the interfaces\' TX queues for apply/verify]' -r
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l sqm -d 'Leaf qdisc for circuits, overriding lqos.conf default_sqm (e.g. "cake diffserv4", "fq_codel", "pfifo limit 1000", "none")' -r
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l strategy -d 'How top-level subtrees are spread over the queues [default: balanced]' -r -f -a "balanced\t'Largest subtree first into the least-loaded queue (default)'
round-robin\t'LibreQoS\'s round robin over top-level nodes'"
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l classifier -d 'Classifier: `bpf` runs lqos\'s eBPF data path (XDP CPU steering and a tc program reading pinned maps, updated by address without RTNL; any kernel with BPF); `tc` plans clsact + flower + skbedit filters with the tree; `none` leaves classification to an external program (feed it ip_map.csv) [default: lqos.conf [lqos] classifier, else none]' -r -f -a "bpf\t'lqos\'s eBPF data path: XDP CPU steering and a cls_bpf program reading pinned maps (needs BPF, clsact and cls_bpf; XDP optional)'
tc\t'clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0)'
none\t'No classifier ops (LibreQoS\'s XDP or another program classifies)'"
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l adopt-libreqos -d 'Adopt the tree a LibreQoS box built: plan from the allocation in LibreQoS\'s state directory DIR (shaping/queuingStructure.json, stats/statsByCircuit.json: every node\'s and circuit\'s classid) and the leaf handles the kernel holds, instead of the last good plan, so LibreQoS\'s tree and classids are kept (its XDP map stays right). Afterwards the saved plan keeps them' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l last -d 'Only against the plan last applied (`lqos apply` or `lqos watch`; what verify uses by default when there is one): an error when there is none, instead of planning the input files'
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l from-inputs -d 'Plan the input files (with the planner options given, and the interfaces\' TX queues) and verify against that plan, instead of the plan last applied. Implied by --queues, --sqm, --strategy and --classifier'
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l json -d 'Print the report as JSON'
complete -c lqos -n "__fish_lqos_using_subcommand verify" -l lazy-leaves -d 'Leaves are lazy (`lqos watch --lazy-leaves`, or `[lqos] lazy_leaves = true` in lqos.conf): a circuit without its leaf is not drift; a leaf that is there must match the plan'
complete -c lqos -n "__fish_lqos_using_subcommand verify" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand detach" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand detach" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand detach" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l circuits -d 'Circuits in the generated network [default: 2000 for the quick run, 10000 otherwise]' -r
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l sweep -d 'Circuit counts to sweep instead (e.g. 1000,2000,5000,10000)' -r
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l runs -d 'Runs of each method [default: 1 for the quick run, 3 otherwise]' -r
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l methods -d 'Methods to run, by number (1,2,3a,3b,4,5,6,5p,7,7p,8,9) or `all` [default: 1,2,4,5,5p,7,7p,8 for the quick run (no --circuits, --runs, --sweep or own files), else all]' -r
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l strategy -d 'Queue strategy: balanced, round-robin, or both (compared)' -r
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l queues -d 'TX queues of the veth pair (one HTB each)' -r
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l sqm -d 'Leaf qdisc [default: cake diffserv4 if this kernel has it, else pfifo]' -r
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l classifier -d 'Include the classifier in every load (`tc`: clsact + one flower + skbedit filter per device address per interface; needs cls_flower, act_skbedit, Linux >= 6.0)' -r -f -a "tc\t'clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0)'
none\t'No classifier ops'"
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l seed -d 'Generator seed' -r
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l network -d 'Bench your own network.json instead of a generated network' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l devices -d 'Bench your own ShapedDevices.csv instead of a generated network' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l plot -d 'Draw median wall time against circuit count into this SVG file' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l interfaces -d 'Bench these existing interfaces (download,upload) of the current namespace instead of a private veth pair, e.g. the lab\'s virtio NICs. Their root qdiscs are rebuilt many times and deleted at the end' -r
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l uneven -d 'Make top-level sites uneven in size (shows what balancing buys)'
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l json -d 'Print the results as JSON on stdout'
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l markdown -d 'Also print the table as markdown'
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l replace-existing -d 'With --interfaces: allow replacing a root qdisc that is not the kernel\'s default (it is deleted, not restored)'
complete -c lqos -n "__fish_lqos_using_subcommand bench" -l skip-memory-check -d 'Run even when the tree\'s leaf qdiscs are estimated not to fit in the kernel\'s memory (MemAvailable minus a margin; a cake leaf takes about 1 MiB). Without it such a bench is refused before loading'
complete -c lqos -n "__fish_lqos_using_subcommand bench" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l network -d 'The node hierarchy (LibreQoS network.json)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l devices -d 'The circuits and devices (LibreQoS ShapedDevices.csv)' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l config -d 'The config (LibreQoS lqos.conf, TOML) [default: lqos.conf if it exists, else built-in defaults]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l queues -d 'TX queues per interface [default: lqos.conf override_available_queues, else 16 for plan/show/diff, the interfaces\' TX queues for apply/verify]' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l sqm -d 'Leaf qdisc for circuits, overriding lqos.conf default_sqm (e.g. "cake diffserv4", "fq_codel", "pfifo limit 1000", "none")' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l strategy -d 'How top-level subtrees are spread over the queues [default: balanced]' -r -f -a "balanced\t'Largest subtree first into the least-loaded queue (default)'
round-robin\t'LibreQoS\'s round robin over top-level nodes'"
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l classifier -d 'Classifier: `bpf` runs lqos\'s eBPF data path (XDP CPU steering and a tc program reading pinned maps, updated by address without RTNL; any kernel with BPF); `tc` plans clsact + flower + skbedit filters with the tree; `none` leaves classification to an external program (feed it ip_map.csv) [default: lqos.conf [lqos] classifier, else none]' -r -f -a "bpf\t'lqos\'s eBPF data path: XDP CPU steering and a cls_bpf program reading pinned maps (needs BPF, clsact and cls_bpf; XDP optional)'
tc\t'clsact + flower + skbedit filters (needs cls_flower, act_skbedit, Linux >= 6.0)'
none\t'No classifier ops (LibreQoS\'s XDP or another program classifies)'"
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l poll -d 'Seconds between two statistics polls (lazy leaves: class-counter dumps; --metrics: class and qdisc dumps, the same ones)' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l idle -d 'With lazy leaves: seconds without traffic before a leaf is removed' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l verify-every -d 'Minutes between two verify-and-repair runs (0: never)' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l debounce -d 'Milliseconds to wait after an input file is closed or renamed into place before reading it' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l quiet-period -d 'Seconds without file events after which a file written but never closed is read anyway (and one that ends in the middle of a record is read as it is)' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l max-removals -d 'Refuse a reload that would remove more circuits than this (a count, or a percentage such as `5%`; `0`: no limit) until `lqos confirm` [default: lqos.conf\'s `[lqos] max_removals`, else more than 10% and more than 10 circuits]' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l retry -d 'Seconds before retrying an apply the kernel refused' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l metrics -d 'Serve Prometheus metrics (per circuit and node counters, cake delays, the daemon\'s health) at http://ADDR/metrics, from a statistics poll every --poll seconds (with lazy leaves: the same dumps). Off by default; `--metrics` alone listens on 127.0.0.1:9464. Name another address only on a network you trust: anyone who can reach it reads every circuit\'s traffic' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l metrics-circuits -d 'Which circuits get series on /metrics: all, top:N (the N busiest at each scrape) or none (nodes and the daemon only), for very large networks' -r
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l log-format -d 'Log format (logs go to stderr; under systemd, to the journal)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line (for log shippers)'"
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l lazy-leaves -d 'Give a circuit its leaf qdisc only while it carries traffic (also `[lqos] lazy_leaves = true` in lqos.conf, read at start)'
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l no-incremental -d 'Always re-read and re-plan all input on an edit (no incremental path for edited ShapedDevices.csv rows)'
complete -c lqos -n "__fish_lqos_using_subcommand watch" -l skip-memory-check -d 'Load even when new leaf qdiscs are estimated not to fit in the kernel\'s memory (MemAvailable minus a margin). Without it such a load is refused (and retried), and a lazy-leaf poll gives only as many circuits their leaf as fit'
complete -c lqos -n "__fish_lqos_using_subcommand watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand status" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand status" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand status" -l json -d 'Print the status file as JSON'
complete -c lqos -n "__fish_lqos_using_subcommand status" -s h -l help -d 'Print help'
complete -c lqos -n "__fish_lqos_using_subcommand confirm" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand confirm" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand confirm" -l wait -d 'Seconds to wait for the daemon to apply them' -r
complete -c lqos -n "__fish_lqos_using_subcommand confirm" -s h -l help -d 'Print help'
complete -c lqos -n "__fish_lqos_using_subcommand journal" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand journal" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand journal" -s h -l help -d 'Print help'
complete -c lqos -n "__fish_lqos_using_subcommand stats" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand stats" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand stats" -l circuit -d 'Only this circuit (by Circuit ID)' -r
complete -c lqos -n "__fish_lqos_using_subcommand stats" -l node -d 'Only the circuits below this node (site or AP), and the node itself' -r
complete -c lqos -n "__fish_lqos_using_subcommand stats" -l top -d 'Only the first N circuits after sorting' -r
complete -c lqos -n "__fish_lqos_using_subcommand stats" -l sort -d 'Sort circuits by this (highest first)' -r -f -a "rate\t'Download rate (then upload)'
drops\t'Drops per second (total drops without an interval)'
delay\t'The worst cake tin delay'
rtt\t'The worst TCP round trip (p95 of any direction and side)'
retransmits\t'TCP retransmits per second (total retransmits without an interval)'"
complete -c lqos -n "__fish_lqos_using_subcommand stats" -l interval -d 'Seconds between the two polls the rates come from (0: one poll, counters only)' -r
complete -c lqos -n "__fish_lqos_using_subcommand stats" -l json -d 'Print JSON (every counter, cake\'s tins, fq_codel\'s statistics, TCP round trips with their histograms)'
complete -c lqos -n "__fish_lqos_using_subcommand stats" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand top" -l netns -d 'Work inside this network namespace (`ip netns` name)' -r
complete -c lqos -n "__fish_lqos_using_subcommand top" -l state-dir -d 'State directory (last good plan, lock) [default: $LQOS_STATE_DIR, else /var/lib/lqos]' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand top" -l interval -d 'Seconds between refreshes' -r
complete -c lqos -n "__fish_lqos_using_subcommand top" -l sort -d 'Sort circuits by this at start (`s` changes it)' -r -f -a "rate\t'Download rate (then upload)'
drops\t'Drops per second (total drops without an interval)'
delay\t'The worst cake tin delay'
rtt\t'The worst TCP round trip (p95 of any direction and side)'
retransmits\t'TCP retransmits per second (total retransmits without an interval)'"
complete -c lqos -n "__fish_lqos_using_subcommand top" -l filter -d 'Show only circuits and nodes whose ID, name or parent contains this (`/` changes it)' -r
complete -c lqos -n "__fish_lqos_using_subcommand top" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c lqos -n "__fish_lqos_using_subcommand man" -l out -d 'Write `lqos.1` and one `lqos-SUBCOMMAND.1` per subcommand into this directory instead of printing `lqos.1` to stdout' -r -F
complete -c lqos -n "__fish_lqos_using_subcommand man" -s h -l help -d 'Print help'
complete -c lqos -n "__fish_lqos_using_subcommand completions" -s h -l help -d 'Print help'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "check" -d 'Validate network.json, ShapedDevices.csv and lqos.conf'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "compare" -d 'Compare the tree lqos plans with the one LibreQoS built (its state directory and tc commands), by name, field by field'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "gen" -d 'Write a synthetic network (network.json, ShapedDevices.csv, lqos.conf)'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "plan" -d 'Plan the tc trees and write tc -b files and plan.json'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "show" -d 'Print the planned tree for a person to read'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "diff" -d 'Diff two plans (or two sets of inputs) into tc ops'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "apply" -d 'Load a plan into the kernel (incremental by default)'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "verify" -d 'Compare the live kernel tree with a plan'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "detach" -d 'Remove lqos\'s eBPF classifier: detach its programs from every interface and unpin its maps'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "bench" -d 'Benchmark loading methods in a private network namespace'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "watch" -d 'Run as a daemon: apply at start and on every input change, verify periodically, optionally with lazy leaves'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "status" -d 'Print what the `lqos watch` daemon last did'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "confirm" -d 'Apply once the inputs the daemon\'s removal guard refused'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "journal" -d 'List the last input sets that were applied (the input journal)'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "stats" -d 'Per-circuit statistics: rates against ceil, drops, ECN marks, cake delays (one snapshot: two polls an interval apart)'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "top" -d 'A full-screen view of the busiest circuits and nodes, refreshed every second (keys: s sort, v view, / filter, q quit)'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "man" -d 'Print the man page (or write all pages with --out DIR)'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "completions" -d 'Print a shell completion script'
complete -c lqos -n "__fish_lqos_using_subcommand help; and not __fish_seen_subcommand_from check compare gen plan show diff apply verify detach bench watch status confirm journal stats top man completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
