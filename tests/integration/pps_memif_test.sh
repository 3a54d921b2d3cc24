#!/usr/bin/env bash
# Egress backpressure in passthrough (issue 5): gateway B must not drop
# records its transport has already acknowledged when its local port cannot
# take what one poll drains. Runs bench/pps-memif once (no testbed, no lock):
# dpdk-testpmd txonly saturates rowand A with 64-byte frames over net_memif;
# a WAN datagram carries ~26 of them, so one drain at B easily exceeds its
# 1024-entry local TX queue. Before the fix B dropped 1.6-7.8 M frames per
# 10 s point as local_tx_full (bench/results/pps-memif.md).
# Checks, for the UDP and the DPDK (memif) WAN backends, each also with 2
# packet workers per gateway (plain-w2; dpdk-w2, a WAN memif queue pair per
# worker; the generator spreading its source addresses): frames were carried,
# B dropped none as local_tx_full or neighbor_pending (records for the
# sink wait in their stream while B asks for its MAC), and the sink
# received at least 70 % of
# what A carried in the same window (the rest is counter timing: rowand
# publishes its counters every 100 ms). Every rowand stops cleanly on the
# SIGTERM that ends each point: a crash or a hang at shutdown fails the test
# (net_memif's disconnect raced rowand's port close on the EAL interrupt
# thread, dpdk_port.cc).
#   tests/integration/pps_memif_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 bin=$2
if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: needs root (DPDK vdevs)"
  exit 0
fi
out=$(ROWAN_BUILD_DIR=$bin "$src/bench/pps-memif" --runs 1 --seconds 3 --modes "plain dpdk plain-w2 dpdk-w2" --multi-flow \
  --sizes 64)
echo "$out"
fail=0
for mode in plain dpdk plain-w2 dpdk-w2; do
  row=$(grep -E "^\| 1 \| 64 \| $mode \|" <<<"$out") || { echo "FAIL: no row for $mode"; exit 1; }
  carried=$(awk -F'|' '{gsub(/ /, "", $8); print $8}' <<<"$row")
  delivered=$(awk -F'|' '{gsub(/ /, "", $9); print $9}' <<<"$row")
  b=$(grep -E "^- run 1, 64 B, $mode: " <<<"$out" | sed 's/.*; B //')
  echo "$mode: carried/s $carried, delivered/s $delivered, B drops $(jq -c .drops <<<"$b")"
  if ((carried < 1000)); then
    echo "FAIL ($mode): A carried only $carried frames/s"
    fail=1
  fi
  for reason in local_tx_full neighbor_pending; do
    n=$(jq ".drops.$reason // 0" <<<"$b")
    if ((n != 0)); then
      echo "FAIL ($mode): gateway B dropped $n acknowledged frames as $reason"
      fail=1
    fi
  done
  if ((delivered * 10 < carried * 7)); then
    echo "FAIL ($mode): the sink received $delivered/s of $carried/s carried"
    fail=1
  fi
done
if grep -q "^rowand shutdown failures" <<<"$out"; then
  echo "FAIL: a rowand did not stop cleanly on SIGTERM (listed above)"
  fail=1
fi
exit $fail
