#!/bin/sh
# cases.sh LIBREQOS OUT: writes the comparison's inputs under OUT (LibreQoS's
# sample files, and lqos gen networks of 2,000 circuits) and runs LibreQoS
# on each (run-libreqos.sh). `lqos` must be on PATH.
set -e
L=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd); T=$(cd "$(dirname "$0")" && pwd)
S=$(cd "$T/../../samples" && pwd)
conf() { # conf DIR QUEUES: the case's lqos.conf edits
  sed -i "s/^\[queues\]/[queues]\noverride_available_queues = $2/" "$1/lqos.conf"
}
gen() { # gen NAME QUEUES ARGS...
  n=$1; q=$2; shift 2; rm -rf "$O/$n"; mkdir -p "$O/$n"
  lqos gen --out "$O/$n" "$@" >/dev/null; conf "$O/$n" "$q"
}
sample() { # sample NAME NETWORK DEVICES: LibreQoS's sample files, 4 queues
  rm -rf "$O/$1"; mkdir -p "$O/$1"; cp "$S/libreqos/$2" "$O/$1/network.json"
  cp "$S/libreqos/$3" "$O/$1/ShapedDevices.csv"; cp "$T/samples.lqos.conf" "$O/$1/lqos.conf"
}
sample example network.example.json ShapedDevices.example.csv
sample v14 network.v14.example.json ShapedDevices.v14-legacy.example.csv
sample legacy network.example.json ShapedDevices.v14-legacy.example.csv
sample radius radius-network.json radius-ShapedDevices.csv
rm -rf "$O/edge"; cp -r "$T/edge" "$O/edge"
gen g-default 16 --circuits 2000 --seed 1
gen g-q4      4  --circuits 2000 --seed 2
gen g-flat    16 --circuits 2000 --seed 3 --depth 0
gen g-deep    8  --circuits 2000 --seed 4 --sites 2 --site-fanout 2 --depth 6 --fanout 2
gen g-asym    8  --circuits 2000 --seed 5
sed -i 's/^uplink_bandwidth_mbps = .*/uplink_bandwidth_mbps = 5000/; s/^downlink_bandwidth_mbps = .*/downlink_bandwidth_mbps = 10000/' "$O/g-asym/lqos.conf"
gen g-stick   16 --circuits 2000 --seed 6
sed -i 's/^\[bridge\]/[single_interface]\ninterface = "ens19"/; /^to_internet/d; /^to_network/d' "$O/g-stick/lqos.conf"
gen g-fq      6  --circuits 2000 --seed 7 --sites 5
sed -i 's/^\[queues\]/[queues]\nfast_queues_fq_codel = 150/' "$O/g-fq/lqos.conf"
# LibreQoS refuses `example` (13-field rows under a 15-column header).
"$T/run-libreqos.sh" "$L" "$O/example" || true
for c in v14 legacy radius edge g-default g-q4 g-flat g-deep g-asym g-stick g-fq; do "$T/run-libreqos.sh" "$L" "$O/$c"; done
