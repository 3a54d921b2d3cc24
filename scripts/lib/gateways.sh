# shellcheck shell=bash
# rowand gateways for scripts/two-site (sourced, not run).
#
# In --mode passthrough each gateway namespace runs a rowand: its local port is
# lan0 through a DPDK af_packet vdev (the kernel keeps no address on lan0 and
# forwards nothing), and its WAN link is a UDP socket on wan0. Configs come
# from config/two-site/{a,b}.toml with the testbed's rate, RTT and CC filled
# in; they and the daemons' logs and pids live in the testbed's state dir.
# Each start writes a fresh X25519 key pair per gateway (rowanctl genkey, mode
# 0600) and gives each config its peer's public key, so the WAN links are
# encrypted (docs/link-security.md). ROWAN_INSECURE=1 runs them in plaintext
# (local.insecure = true) instead, e.g. to measure the cost of encryption.
# WAN backend dpdk: the link is a DPDK net_af_packet vdev on wan0 instead of
# the UDP socket; rowand owns wan0's address (answers ARP, resolves the peer)
# and the kernel keeps none there.
#
# Uses from scripts/two-site: $top, $state_dir, die, in_ns, kill_pid_file.
# shellcheck disable=SC2154 # state_dir is set by scripts/two-site

# find_rowand: prints the rowand binary (ROWAN_ROWAND, or the build dir).
find_rowand() {
  if [[ -n "${ROWAN_ROWAND:-}" ]]; then
    echo "$ROWAN_ROWAND"
    return
  fi
  local bin=${ROWAN_BUILD_DIR:-$top/build}/daemon/rowand/rowand
  [[ -x $bin ]] || die "rowand not found at $bin (build it, or set ROWAN_BUILD_DIR or ROWAN_ROWAND)"
  echo "$bin"
}

find_rowanctl() {
  if [[ -n "${ROWAN_ROWANCTL:-}" ]]; then
    echo "$ROWAN_ROWANCTL"
    return
  fi
  local bin=${ROWAN_BUILD_DIR:-$top/build}/daemon/rowanctl/rowanctl
  [[ -x $bin ]] || die "rowanctl not found at $bin"
  echo "$bin"
}

# gateways_start RATE RTT CC [WAN_BACKEND] [SITE_MTU] [WAN_MTU]: configures both
# gateway namespaces for rowand and starts one daemon in each; waits until both
# answer on their control sockets. WAN_BACKEND: udp (default) or dpdk. SITE_MTU:
# the hosts' IP MTU (rowand's [local] mtu, 4200 by default, covers up to 4200).
# WAN_MTU: the WAN link's IP MTU ([[wan.link]] mtu, 1500 by default).
# WORKERS: packet workers per gateway (1: the main lcore is the one worker;
# N > 1: N+1 lcores, the main one distributing the site port; docs/gateway.md).
# SITE_QUEUES: one (default) or per-worker: the site port's af_packet vdev
# gets qpairs=WORKERS, so each worker reads its own queue (local.queues =
# "auto", the default, takes them; docs/gateway.md "Packet workers").
# RATE@RTT...: links 2.. (two-site --links): [[wan.link]] wanK on 198.19.K.0/24
# (A .1, B .2) with that rate and RTT, and the peer reached over every link
# (peer.links and peer.endpoints, in link order).
gateways_start() {
  local rate=$1 rtt=$2 cc=${3:-rowan} wan_backend=${4:-udp} site_mtu=${5:-1500}
  local wan_mtu=${6:-1500} workers=${7:-1} site_queues=${8:-one}
  shift 8 || shift $#
  local more_links=("$@")
  local rowand rowanctl site ns cfg
  rowand=$(find_rowand)
  rowanctl=$(find_rowanctl)
  local -A pub
  for site in a b; do
    (umask 077 && "$rowanctl" genkey >"$state_dir/rowand-$site.key") ||
      die "rowanctl genkey failed"
    pub[$site]=$("$rowanctl" pubkey <"$state_dir/rowand-$site.key") || die "rowanctl pubkey failed"
  done
  local -A peer_of=([a]=b [b]=a)
  local secure_args backend_args memory_mb
  for site in a b; do
    ns=rowan-$site-gw
    # rowand owns lan0 and its address; the kernel must neither answer ARP
    # for it nor route the site's packets itself.
    in_ns "$ns" ip addr flush dev lan0
    in_ns "$ns" sysctl -qw net.ipv4.ip_forward=0
    cfg=$state_dir/rowand-$site.toml
    if [[ ${ROWAN_INSECURE:-0} == 1 ]]; then
      secure_args=(-e "s|^private_key_file = .*|insecure = true|" -e "/^public_key = /d")
    else
      secure_args=(-e "s|^public_key = .*|public_key = \"${pub[${peer_of[$site]}]}\"|")
    fi
    backend_args=(-e "s|^mtu = 1500\$|mtu = $wan_mtu|")
    memory_mb=0
    if ((site_mtu > 4200)); then
      backend_args+=(-e "s|^\[local\]|[local]\nmtu = $site_mtu|")
    fi
    if [[ $wan_backend == dpdk ]]; then
      # rowand answers ARP for wan0's address; the kernel must not (nor send
      # ICMP port-unreachable for the link's datagrams).
      in_ns "$ns" ip addr flush dev wan0
      # A queue pair per worker (dpdk_wan_io.h steers what the kernel's
      # fanout puts on another worker's queue).
      local wan_dev="net_af_packet1,iface=wan0"
      ((workers == 1)) || wan_dev+=",qpairs=$workers"
      backend_args+=(-e "s|^backend = \"udp\"|backend = \"dpdk\"\ndevice = \"$wan_dev\"|")
      memory_mb=256
    fi
    if ((workers > 1)); then
      # Every lcore may run on every CPU: the testbed shares its cores.
      backend_args+=(-e "s|^lcores = .*|lcores = \"(0-$workers)@(0-$(($(nproc) - 1)))\"|")
      memory_mb=512
    fi
    ((memory_mb == 0)) || backend_args+=(-e "s|^no_huge = true.*|&\nmemory_mb = $memory_mb|")
    if [[ $site_queues == per-worker ]]; then
      backend_args+=(-e "s|^device = \"net_af_packet0,iface=lan0\"|device = \"net_af_packet0,iface=lan0,qpairs=$workers\"|")
    fi
    sed -e "s|^rate = .*|rate = \"$rate\"|" -e "s|^rtt = .*|rtt = \"$rtt\"|" \
      -e "s|^algorithm = .*|algorithm = \"$cc\"|" "${secure_args[@]}" "${backend_args[@]}" \
      "$top/config/two-site/$site.toml" >"$cfg"
    ((${#more_links[@]} == 0)) || gateways_add_links "$cfg" "$site" "$wan_mtu" "${more_links[@]}"
    "$rowand" --check-config -c "$cfg" >&2 || die "rowand rejects $cfg"
    mkdir -p "/run/rowan/$site"
    ip netns exec "$ns" setsid "$rowand" -c "$cfg" </dev/null >"$state_dir/rowand-$site.log" 2>&1 9>&- &
    echo $! >"$state_dir/rowand-$site.pid"
  done
  local _ ok
  for site in a b; do
    ok=0
    for _ in $(seq 100); do
      kill -0 "$(cat "$state_dir/rowand-$site.pid")" 2>/dev/null ||
        die "rowand of site $site exited at start-up: $(tail -n 5 "$state_dir/rowand-$site.log")"
      if "$rowanctl" -s "/run/rowan/$site/control.sock" status >/dev/null 2>&1; then
        ok=1
        break
      fi
      sleep 0.1
    done
    [[ $ok -eq 1 ]] || die "rowand of site $site did not open its control socket within 10 s"
  done
}

# gateways_add_links CFG SITE WAN_MTU RATE@RTT...: links 2.. into site SITE's
# config CFG (see gateways_start).
gateways_add_links() {
  local cfg=$1 site=$2 wan_mtu=$3
  shift 3
  local own=1 other=2 k=1 spec blocks="" names='"wan0"' ends
  [[ $site == a ]] || { own=2 other=1; }
  ends="\"198.19.0.$other:47910\""
  for spec in "$@"; do
    blocks+="[[wan.link]]\nname = \"wan$k\"\nbackend = \"udp\"\nbind = \"198.19.$k.$own:47910\"\n"
    blocks+="rate = \"${spec%@*}\"\nrtt = \"${spec#*@}\"\nmtu = $wan_mtu\n\n"
    names+=", \"wan$k\""
    ends+=", \"198.19.$k.$other:47910\""
    k=$((k + 1))
  done
  awk -v blocks="$blocks" -v links="links = [$names]" -v ends="endpoints = [$ends]" '
    /^\[\[peer\]\]/ && !done { printf "%s", blocks; done = 1 }
    { print }
    /^endpoint = / { print links; print ends }' "$cfg" >"$cfg.new"
  mv "$cfg.new" "$cfg"
}

# gateways_stop: stops the daemons (SIGTERM, then SIGKILL) and removes their sockets.
gateways_stop() {
  local site
  for site in a b; do
    kill_pid_file "$state_dir/rowand-$site.pid"
    rm -f "/run/rowan/$site/control.sock"
    rmdir "/run/rowan/$site" 2>/dev/null || true
  done
}
