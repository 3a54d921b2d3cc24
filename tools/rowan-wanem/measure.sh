#!/usr/bin/env bash
# Measures rowan-wanem through the two-site testbed (run as root):
#   delay  — ping RTT against the setting, and the emulator's release error
#   rate   — iperf3 UDP at 1.1× the set rate, receiver payload rate against
#            rate × payload/frame, for each rate given
#   loss   — iperf3 UDP at 20 Mbit/s with --loss, measured against the setting
# Usage: tools/rowan-wanem/measure.sh [RATE...]   (default: 100mbit 500mbit 1gbit 2gbit)
# ROWAN_BUILD_DIR or ROWAN_WANEM locate the binary (see scripts/two-site).
set -euo pipefail
# Take turns with other users of the machine's one testbed (see scripts/two-site).
mkdir -p /run/rowan
exec 8>/run/rowan/testbed.lock
flock 8
top=$(cd "$(dirname "$0")/../.." && pwd)
ts=$top/scripts/two-site
rates=("$@")
[[ ${#rates[@]} -gt 0 ]] || rates=(100mbit 500mbit 1gbit 2gbit)
trap '"$ts" down >/dev/null 2>&1 || true' EXIT
"$ts" down >/dev/null 2>&1 || true

to_bps() { awk -v s="$1" 'BEGIN { v = s + 0; u = tolower(s); gsub(/[0-9.]/, "", u)
  m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1; printf "%.0f", v * m }'; }

echo "== delay: ping, 40 × 50 ms, low load"
for rtt in ${ROWAN_MEASURE_RTTS:-1ms 20ms 100ms}; do
  "$ts" up --rate 1gbit --rtt "$rtt" >/dev/null 2>&1
  out=$("$ts" exec a -- ping -n -c 40 -i 0.05 198.18.2.10)
  med=$(echo "$out" | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "rtt $rtt: ping median ${med} ms; $(echo "$out" | tail -1)"
  "$ts" wanem stats | jq -c '{a2b_release_error_us: .stats.a2b.release_error_us, stamp_correction_us: .stats.loop.stamp_correction_us, timer_overshoot_us: .stats.loop.timer_overshoot_us}'
  "$ts" down >/dev/null
done

echo "== rate: iperf3 UDP 1400 B payload at 1.1 × rate, 5 s, receiver seconds 1-4"
for rate in "${rates[@]}"; do
  bps=$(to_bps "$rate")
  "$ts" up --rate "$rate" --rtt 20ms >/dev/null 2>&1
  "$ts" exec b -- chrt -f 5 iperf3 -s -D -1 -J -p 5201 --logfile /dev/null
  sleep 0.5
  "$ts" wanem reset >/dev/null
  j=$("$ts" exec a -- chrt -f 5 iperf3 -c 198.18.2.10 -p 5201 -u -b "$(awk -v b="$bps" 'BEGIN{printf "%.0f", b*1.1}')" \
    -l 1400 -t 5 -J --get-server-output)
  echo "$j" | jq -r --argjson bps "$bps" '
    [.server_output_json.intervals[].sum | select(.start >= 0.99 and .end <= 4.01)] as $iv
    | ((($iv | map(.bytes) | add) * 8) / ($iv | map(.seconds) | add)) as $got
    | ($bps * 1400 / 1442) as $want
    | "rate \($bps / 1e6) Mbit/s: received \($got / 1e6 | . * 100 | round / 100) Mbit/s payload, expected \($want / 1e6 | . * 100 | round / 100), error \(($got / $want - 1) * 100 | . * 100 | round / 100)%"'
  "$ts" wanem stats | jq -c '.stats | {release_error_us: .a2b.release_error_us, delay_applied_us: .a2b.delay_applied_us, dropped: .a2b.dropped.total, forced_sleeps: .loop.forced_sleeps, sleeps: .loop.sleeps}'
  "$ts" down >/dev/null
done

echo "== loss: iperf3 UDP 20 Mbit/s, 5 s"
for loss in 0.1% 1% 5%; do
  "$ts" up --rate 1gbit --rtt 10ms --loss "$loss" >/dev/null 2>&1
  "$ts" exec b -- chrt -f 5 iperf3 -s -D -1 -J -p 5201 --logfile /dev/null
  sleep 0.5
  "$ts" exec a -- chrt -f 5 iperf3 -c 198.18.2.10 -p 5201 -u -b 20M -l 1400 -t 5 -J |
    jq -r --arg loss "$loss" '.end.sum | "loss \($loss): \(.lost_packets) of \(.packets) lost = \(.lost_percent | . * 1000 | round / 1000)%"'
  "$ts" down >/dev/null
done
