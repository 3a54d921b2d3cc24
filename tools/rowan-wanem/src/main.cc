// rowan-wanem: a two-port DPDK long-haul link emulator.
//
//   rowan-wanem --iface-a IF --iface-b IF [--control SOCKET] [--set KEY=VALUE]...
//   rowan-wanem ctl SOCKET COMMAND ...
//
// Frames received on port A leave on port B after the a2b impairments, and the
// other way round (see link.h for the model, emulator.h for the settings).
// One thread forwards both directions: it reads the clock once per loop
// iteration, admits received bursts, transmits what is due, and serves the
// control socket between bursts. When nothing is due it sleeps in ppoll()
// until the earliest release minus a spin margin, woken early by a frame on
// either interface (a packet socket per interface that keeps one byte of each
// frame serves as the doorbell), and spins only for the last margin. With
// --slack it instead sleeps until the earliest release plus the slack and
// never spins: releases ride on the wake-ups that arrivals cause.
#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_pause.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "base/clock.h"
#include "control_server.h"
#include "ctl.h"
#include "emulator.h"
#include "io/af_packet_ring.h"
#include "io/doorbell.h"
#include "parse.h"
#include "rowan/build_version.h"

namespace rowan::wanem {
namespace {

constexpr uint16_t kBurst = 32;
constexpr size_t kTxPending = 1024;
constexpr Duration kSpinWindow = Duration::from_ms(10);
constexpr Duration kRtRunBudget = Duration::from_ms(3);
constexpr Duration kRtPause = Duration::from_us(300);
constexpr int kExitUsage = 64;
constexpr int kExitUnavailable = 69;

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Options {
  std::string iface_a, iface_b, vdev_a, vdev_b;
  std::string control;
  uint64_t seed = 1;
  std::vector<std::string> set;
  std::vector<std::string> flaps;
  std::string flap_every, flap_for = "1s";
  std::string flap_dir = "both";
  uint32_t mbufs = 65536;
  uint32_t framecnt = 4096;
  uint32_t mtu = 1500;  ///< largest IP packet on the links (jumbo: ring slots and mbufs grow)
  std::string spin_margin = "10us";
  std::string early = "0us";
  std::string spin_budget = "3ms";  ///< spinning allowed per kSpinWindow
  std::string slack = "0us";        ///< a release may leave this late (no spinning then)
  std::string idle_spin = "5us";
  std::string max_sleep = "100ms";
  std::string huge_dir;
  std::string file_prefix;
  uint32_t mem_mb = 0;
  int rt_priority = 0;
  bool json = false;
  std::vector<std::string> eal;
};

// Packets waiting for room in a port's transmit ring.
struct TxQueue {
  uint16_t port = 0;
  rte_mbuf* pkts[kTxPending];
  int64_t release_ns[kTxPending];
  uint32_t len[kTxPending];
  size_t count = 0;
};

std::string vdev_name(const std::string& spec) { return spec.substr(0, spec.find(',')); }

uint16_t setup_port(const std::string& name, rte_mempool* pool) {
  uint16_t port = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port) != 0) {
    throw std::runtime_error("no DPDK port " + name);
  }
  rte_eth_conf conf{};
  if (rte_eth_dev_configure(port, 1, 1, &conf) != 0) throw std::runtime_error("configure " + name);
  const int socket = rte_eth_dev_socket_id(port);
  const unsigned sock = socket < 0 ? 0U : static_cast<unsigned>(socket);
  if (rte_eth_rx_queue_setup(port, 0, 1024, sock, nullptr, pool) != 0 ||
      rte_eth_tx_queue_setup(port, 0, 1024, sock, nullptr) != 0) {
    throw std::runtime_error("queue setup " + name);
  }
  if (rte_eth_dev_start(port) != 0) throw std::runtime_error("start " + name);
  rte_eth_promiscuous_enable(port);
  return port;
}

// Sends what is pending on a port; frames the ring keeps refusing while the
// queue is full are dropped (tx_full) so a stuck port cannot stall the other
// direction's scheduler forever.
size_t flush_tx(TxQueue& q, Direction& dir, TimePoint now) {
  if (q.count == 0) return 0;
  const uint16_t n =
      rte_eth_tx_burst(q.port, 0, q.pkts, static_cast<uint16_t>(std::min<size_t>(q.count, 512)));
  for (uint16_t i = 0; i < n; ++i) dir.note_tx(now, q.release_ns[i], q.len[i]);
  if (n > 0) {
    // Shift the unsent tail to the front (ranges overlap; std::copy runs forward).
    std::copy(q.pkts + n, q.pkts + q.count, q.pkts);
    std::copy(q.release_ns + n, q.release_ns + q.count, q.release_ns);
    std::copy(q.len + n, q.len + q.count, q.len);
    q.count -= n;
  } else if (q.count == kTxPending) {
    const size_t drop = kTxPending / 2;
    for (size_t i = 0; i < drop; ++i) {
      rte_pktmbuf_free(q.pkts[i]);
      dir.note_drop(DropReason::kTxFull);
    }
    // Shift the unsent tail to the front (ranges overlap; std::copy runs forward).
    std::copy(q.pkts + drop, q.pkts + q.count, q.pkts);
    std::copy(q.release_ns + drop, q.release_ns + q.count, q.release_ns);
    std::copy(q.len + drop, q.len + q.count, q.len);
    q.count -= drop;
  }
  return n;
}

std::vector<std::pair<std::string, std::string>> split_kv(const std::vector<std::string>& items) {
  std::vector<std::pair<std::string, std::string>> kv;
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw ParseError("expected KEY=VALUE: '" + item + "'");
    kv.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return kv;
}

int run(const Options& opt) {
  const MonotonicClock clock;
  const Duration spin_margin = parse_duration(opt.spin_margin);
  const Duration early = parse_duration(opt.early);
  const Duration idle_spin = parse_duration(opt.idle_spin);
  const Duration spin_budget = parse_duration(opt.spin_budget);
  const Duration slack = parse_duration(opt.slack);
  if (slack > Duration::from_ms(10)) throw ParseError("--slack " + opt.slack + " is over 10 ms");
  if (spin_budget > kSpinWindow) {
    throw ParseError("--spin-budget " + opt.spin_budget + " is more than its " +
                     std::to_string(kSpinWindow.ns() / 1000000) + " ms window");
  }
  Duration max_sleep = parse_duration(opt.max_sleep);

  // Validate every setting before touching the EAL.
  Emulator emu(opt.mbufs, opt.seed);
  const TimePoint t0 = clock.now();
  emu.set(split_kv(opt.set), t0);
  const uint8_t flap_mask = parse_dir_mask(opt.flap_dir);
  struct PlannedFlap {
    Duration at, length;
  };
  std::vector<PlannedFlap> planned;
  for (const std::string& f : opt.flaps) {
    const auto plus = f.find('+');
    if (plus == std::string::npos) throw ParseError("--flap wants AT+LENGTH, e.g. 5s+2s: " + f);
    planned.push_back({parse_duration(f.substr(0, plus)), parse_duration(f.substr(plus + 1))});
  }
  std::optional<Duration> every;
  if (!opt.flap_every.empty()) every = parse_duration(opt.flap_every);
  const Duration every_len = parse_duration(opt.flap_for);

  std::string spec_a = opt.vdev_a;
  std::string spec_b = opt.vdev_b;
  // Whole frames in one mbuf and one ring slot each (io/af_packet_ring.h).
  const uint32_t max_frame = rowan::io::ethernet_frame(opt.mtu);
  uint32_t data_room = std::max<uint32_t>(RTE_MBUF_DEFAULT_DATAROOM, max_frame);
  if (!opt.iface_a.empty()) {
    spec_a =
        rowan::io::af_packet_device("net_af_packet_a,iface=" + opt.iface_a +
                                        ",qdisc_bypass=1,framecnt=" + std::to_string(opt.framecnt),
                                    max_frame, &data_room);
  }
  if (!opt.iface_b.empty()) {
    spec_b =
        rowan::io::af_packet_device("net_af_packet_b,iface=" + opt.iface_b +
                                        ",qdisc_bypass=1,framecnt=" + std::to_string(opt.framecnt),
                                    max_frame, &data_room);
  }
  if (spec_a.empty() || spec_b.empty()) {
    spdlog::error("rowan-wanem: give --iface-a/--vdev-a and --iface-b/--vdev-b");
    return kExitUsage;
  }
  std::vector<std::unique_ptr<io::Doorbell>> bells;
  // Each frame's kernel arrival time dates it (frames are reaped late).
  const io::DoorbellOptions bell{.rcvbuf = 4096, .timestamps = true};
  if (!opt.iface_a.empty()) bells.push_back(std::make_unique<io::Doorbell>(opt.iface_a, bell));
  if (!opt.iface_b.empty()) bells.push_back(std::make_unique<io::Doorbell>(opt.iface_b, bell));
  // Without a doorbell on both ports nothing wakes the loop on arrival: cap
  // the sleep so a frame waits at most this long before it is timestamped.
  if (bells.size() < 2) max_sleep = std::min(max_sleep, Duration::from_us(50));

  cpu_set_t cpus;
  sched_getaffinity(0, sizeof cpus, &cpus);
  std::vector<std::string> eal = {"rowan-wanem",        "-l", "0", "--no-pci", "--no-telemetry",
                                  "--log-level=warning"};
  eal.push_back("--file-prefix");
  eal.push_back(opt.file_prefix.empty() ? "rowan-wanem-" + std::to_string(getpid())
                                        : opt.file_prefix);
  const uint32_t mem =
      opt.mem_mb > 0 ? opt.mem_mb
                     : static_cast<uint32_t>(
                           static_cast<uint64_t>(opt.mbufs) * (data_room + 1000) / 1000000 + 128);
  if (opt.huge_dir.empty()) {
    eal.insert(eal.end(), {"--no-huge", "-m", std::to_string(mem)});
  } else {
    eal.insert(eal.end(), {"--huge-dir", opt.huge_dir, "-m", std::to_string(mem)});
  }
  eal.insert(eal.end(), {"--vdev", spec_a, "--vdev", spec_b});
  eal.insert(eal.end(), opt.eal.begin(), opt.eal.end());
  std::vector<char*> eal_argv;
  eal_argv.reserve(eal.size());
  for (std::string& s : eal) eal_argv.push_back(s.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    spdlog::error("rowan-wanem: EAL init failed: {}", rte_strerror(rte_errno));
    return kExitUnavailable;
  }
  // The EAL pinned this thread to one core; the machine is shared, let the
  // scheduler place it.
  sched_setaffinity(0, sizeof cpus, &cpus);
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  if (opt.rt_priority > 0) {
    // On a loaded machine a normal thread's wake-up can lag by milliseconds;
    // SCHED_FIFO wakes within microseconds. The loop sleeps when idle, and the
    // kernel's RT throttling still bounds it when busy.
    sched_param sp{};
    sp.sched_priority = opt.rt_priority;
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
      spdlog::warn("rowan-wanem: SCHED_FIFO {}: {} (continuing unprioritised)", opt.rt_priority,
                   std::strerror(errno));
    }
  }

  int status = 0;
  {
    rte_mempool* pool = rte_pktmbuf_pool_create(
        "wanem_pool", opt.mbufs, 256, 0, static_cast<uint16_t>(data_room + RTE_PKTMBUF_HEADROOM),
        static_cast<int>(rte_socket_id()));
    if (pool == nullptr) {
      spdlog::error("rowan-wanem: mbuf pool of {}: {} (raise --mem-mb)", opt.mbufs,
                    rte_strerror(rte_errno));
      rte_eal_cleanup();
      return kExitUnavailable;
    }
    const uint16_t port_a = setup_port(vdev_name(spec_a), pool);
    const uint16_t port_b = setup_port(vdev_name(spec_b), pool);
    const uint16_t rx_port[2] = {port_a, port_b};
    auto txq = std::make_unique<TxQueue[]>(2);
    txq[kA2B].port = port_b;  // a2b leaves on B
    txq[kB2A].port = port_a;

    emu.set_port_stats([port_a, port_b] {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [name, port] : {std::pair{"a", port_a}, std::pair{"b", port_b}}) {
        rte_eth_stats st{};
        rte_eth_stats_get(port, &st);
        out[name] = nlohmann::json{{"rx_packets", st.ipackets}, {"tx_packets", st.opackets},
                                   {"rx_missed", st.imissed},   {"rx_errors", st.ierrors},
                                   {"tx_errors", st.oerrors},   {"rx_nombuf", st.rx_nombuf}};
      }
      return out;
    });
    std::unique_ptr<ControlServer> control;
    if (!opt.control.empty()) control = std::make_unique<ControlServer>(opt.control);

    TimePoint now = clock.now();
    emu.set_start(now);
    for (const PlannedFlap& f : planned) emu.flap(flap_mask, f.at, f.length, now);
    if (every) emu.flap_every(*every, every_len, flap_mask, now);

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    // On stdout: scripts wait for this line.
    fmt::print("rowan-wanem: forwarding {} <-> {}{}{}\n", vdev_name(spec_a), vdev_name(spec_b),
               control ? ", control " : "", control ? opt.control : "");
    std::fflush(stdout);

    rte_mbuf* rx[kBurst];
    Scheduled due[kBurst];
    // Kernel arrival times of the frames that woke the loop, per port.
    int64_t stamps[2][kBurst];
    size_t n_stamps[2] = {0, 0};
    std::vector<pollfd> pfds;
    TimePoint last_busy = now;
    TimePoint last_wake = now;
    TimePoint next_control = now;
    TimePoint next_offset = now;
    int64_t mono_minus_real = 0;
    Duration margin = spin_margin;
    int64_t overshoot_ewma = 0;
    int64_t overshoot_dev = 0;
    LoopStats& ls = emu.loop_stats();
    bool armed = false;
    bool quit = false;
    // Spin budget: within each window the loop may spin (wait for a release
    // less than the wake-up margin away) for at most `spin_budget`. Beyond it,
    // a release within the margin is slept for instead (the frame leaves late).
    TimePoint window_start = now;
    int64_t spun_ns = 0;
    bool spinning = false;
    TimePoint prev = now;
    while (g_stop == 0 && !quit) {
      now = clock.now();
      if (spinning) spun_ns += (now - prev).ns();
      prev = now;
      spinning = false;
      if (now - window_start >= kSpinWindow) {
        window_start = now;
        spun_ns = 0;
      }
      // With slack, precision is traded for wake-ups: never spin.
      const bool relaxed = slack.ns() > 0 || spun_ns >= spin_budget.ns();
      size_t work = 0;
      if (now >= emu.next_event()) emu.run_schedule(now);
      // Transmit what is due first: its timing matters most.
      for (int d = 0; d < 2; ++d) {
        Direction& dir = emu.dir(d);
        TxQueue& q = txq[static_cast<size_t>(d)];
        if (!dir.settings().up && dir.in_flight() > 0) {
          // A cut link loses what was on the wire.
          size_t n;
          while ((n = dir.drain(due, kBurst)) > 0) {
            for (size_t i = 0; i < n; ++i) {
              rte_pktmbuf_free(static_cast<rte_mbuf*>(due[i].pkt));
              dir.note_drop(DropReason::kLinkDown);
            }
          }
        }
        work += flush_tx(q, dir, now);
        // Never before its release (less `early`, 0 by default): a frame may
        // leave late, never early, even once the spin budget is spent.
        const TimePoint deadline = now + early;
        while (q.count < kTxPending && dir.next_release() <= deadline) {
          const size_t room = std::min<size_t>(kBurst, kTxPending - q.count);
          const size_t n = dir.release(deadline, due, room);
          for (size_t i = 0; i < n; ++i) {
            rte_mbuf* m = static_cast<rte_mbuf*>(due[i].pkt);
            q.pkts[q.count] = m;
            q.release_ns[q.count] = due[i].release_ns;
            q.len[q.count] = rte_pktmbuf_pkt_len(m);
            ++q.count;
          }
          work += n;
          work += flush_tx(q, dir, now);
        }
      }
      // Arrivals are dated after the transmit phase: a frame that came in
      // while it ran would otherwise carry the time before it, and leave
      // early by as long as the transmit phase took.
      const TimePoint rx_now = clock.now();
      for (int d = 0; d < 2; ++d) {
        Direction& dir = emu.dir(d);
        const uint16_t n = rte_eth_rx_burst(rx_port[d], 0, rx, kBurst);
        work += n;
        for (uint16_t i = 0; i < n; ++i) {
          rte_mbuf* m = rx[i];
          // A frame that arrived while the loop slept carries the kernel's
          // arrival time (from the doorbell); every other frame this burst's.
          TimePoint at = rx_now;
          if (i < n_stamps[d]) {
            at = TimePoint::from_ns(std::min(stamps[d][i], rx_now.ns()));
            ++ls.stamped;
            ls.stamp_correction_sum_ns += rx_now.ns() - at.ns();
            ls.stamp_correction_max_ns =
                std::max(ls.stamp_correction_max_ns, rx_now.ns() - at.ns());
          }
          bool dup = false;
          DropReason why{};
          if (dir.admit(at, m, rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m), true, &dup,
                        &why) == Direction::Verdict::kDropped) {
            rte_pktmbuf_free(m);
            continue;
          }
          if (dup) {
            rte_mbuf* c = rte_pktmbuf_copy(m, pool, 0, UINT32_MAX);
            if (c == nullptr) {
              dir.note_drop(DropReason::kNoMbuf);
            } else if (dir.admit(at, c, rte_pktmbuf_mtod(c, uint8_t*), rte_pktmbuf_data_len(c),
                                 false, &dup, &why) == Direction::Verdict::kDropped) {
              rte_pktmbuf_free(c);
            }
          }
        }
        n_stamps[d] = 0;
      }
      if (control && now >= next_control) {
        quit = control->poll_once(emu, now);
        next_control = now + Duration::from_ms(1);
      }
      if (opt.rt_priority > 0 && now - last_wake > kRtRunBudget) {
        // A SCHED_FIFO thread that never sleeps is throttled by the kernel for
        // 50 ms each second; sleeping briefly on our own terms costs far less.
        const timespec pause{0, kRtPause.ns()};
        nanosleep(&pause, nullptr);
        last_wake = clock.now();
        ++ls.forced_sleeps;
        continue;
      }
      if (work > 0 || txq[0].count > 0 || txq[1].count > 0) {
        last_busy = now;
        armed = false;
        continue;
      }
      TimePoint next = std::min(emu.dir(0).next_release(), emu.dir(1).next_release());
      // Slack: the timer wakes the loop `slack` after the earliest release,
      // so that a frame's arrival (which rings the doorbell anyway) releases
      // what fell due meanwhile; under load one wake-up serves both
      // directions' arrivals and releases. Frames still never leave early.
      if (slack.ns() > 0 && !next.is_infinite()) next = next + slack;
      next = std::min(next, emu.next_event());
      const Duration wait = next.is_infinite() ? Duration::infinite() : next - now;
      if (!relaxed && (wait <= margin || now - last_busy < idle_spin)) {
        spinning = true;
        rte_pause();
        continue;
      }
      if (wait.ns() <= 0) continue;
      if (!armed) {
        // Empty the doorbells, then look at the rings once more: a frame that
        // arrives after this point rings the bell and ends the sleep.
        for (const auto& b : bells) b->drain();
        armed = true;
        continue;
      }
      armed = false;
      if (now >= next_offset) {
        mono_minus_real = monotonic_minus_realtime_ns();
        next_offset = now + Duration::from_s(1);
      }
      // Past the spin budget, a release within the margin is slept for in
      // full: the frame leaves late (by the wake-up's overshoot), not early.
      const Duration sleep = slack.ns() > 0 || (relaxed && wait <= margin)
                                 ? std::min(wait, max_sleep)
                                 : std::min(wait - margin, max_sleep);
      pfds.clear();
      for (const auto& b : bells) pfds.push_back(pollfd{b->fd(), POLLIN, 0});
      if (control) control->add_fds(pfds);
      timespec ts{sleep.ns() / 1000000000, sleep.ns() % 1000000000};
      const int r = ppoll(pfds.data(), pfds.size(), &ts, nullptr);
      const TimePoint woke = clock.now();
      last_wake = woke;
      ++ls.sleeps;
      ls.slept_ns += (woke - now).ns();
      if (r == 0) {
        // Timer wake-up: learn how late it comes and wake that much earlier.
        const int64_t over = std::max<int64_t>((woke - (now + sleep)).ns(), 0);
        ++ls.timeouts;
        ls.overshoot_sum_ns += over;
        ls.overshoot_max_ns = std::max(ls.overshoot_max_ns, over);
        // Wake early by the mean overshoot plus twice its mean deviation
        // (Jacobson's RTO estimator): late wake-ups become rare.
        overshoot_dev += (std::abs(over - overshoot_ewma) - overshoot_dev) / 4;
        overshoot_ewma += (over - overshoot_ewma) / 8;
        margin = std::clamp(Duration::from_ns(overshoot_ewma + 2 * overshoot_dev + 2000),
                            spin_margin, Duration::from_ms(1));
      } else if (r > 0) {
        if (bells.size() == 2) {
          for (int d = 0; d < 2; ++d) {
            if ((pfds[static_cast<size_t>(d)].revents & POLLIN) != 0) {
              n_stamps[d] =
                  bells[static_cast<size_t>(d)]->read_stamps(stamps[d], kBurst, mono_minus_real);
            }
          }
        }
        if (control) {
          quit = control->poll_once(emu, woke);
          next_control = woke + Duration::from_ms(1);
        }
      }
      ls.margin_ns = margin.ns();
    }

    now = clock.now();
    for (int d = 0; d < 2; ++d) {
      size_t n;
      while ((n = emu.dir(d).drain(due, kBurst)) > 0) {
        for (size_t i = 0; i < n; ++i) rte_pktmbuf_free(static_cast<rte_mbuf*>(due[i].pkt));
      }
      TxQueue& q = txq[static_cast<size_t>(d)];
      for (size_t i = 0; i < q.count; ++i) rte_pktmbuf_free(q.pkts[i]);
      q.count = 0;
    }
    if (opt.json) {
      fmt::print(
          "{}\n",
          nlohmann::json{{"settings", emu.settings_json()}, {"stats", emu.stats_json(now)}}.dump());
    } else {
      fmt::print("rowan-wanem: final counters\n{}", emu.stats_text(now));
    }
    std::fflush(stdout);
    control.reset();
    rte_eth_dev_stop(port_a);
    rte_eth_dev_stop(port_b);
    rte_eth_dev_close(port_a);
    rte_eth_dev_close(port_b);
  }
  rte_eal_cleanup();
  return status;
}

}  // namespace
}  // namespace rowan::wanem

int main(int argc, char** argv) {
  using namespace rowan::wanem;
  if (argc >= 2 && std::strcmp(argv[1], "ctl") == 0) return run_ctl(argc - 2, argv + 2);

  // Diagnostics on stderr; stdout carries the forwarding line and the counters.
  spdlog::set_default_logger(spdlog::stderr_color_mt("rowan-wanem"));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  Options opt;
  CLI::App app{"rowan-wanem: a two-port DPDK long-haul link emulator (see docs/wanem.md)"};
  app.set_version_flag("--version", std::string("rowan-wanem ") + ROWAN_BUILD_VERSION);
  app.add_option("--iface-a", opt.iface_a, "interface of port A (net_af_packet vdev)");
  app.add_option("--iface-b", opt.iface_b, "interface of port B (net_af_packet vdev)");
  app.add_option("--vdev-a", opt.vdev_a, "any DPDK vdev spec for port A instead of --iface-a");
  app.add_option("--vdev-b", opt.vdev_b, "any DPDK vdev spec for port B instead of --iface-b");
  app.add_option("--control", opt.control, "control socket path (newline-delimited JSON)");
  app.add_option("--seed", opt.seed, "seed of the random impairments")->capture_default_str();
  app.add_option(
      "--set", opt.set,
      "initial setting KEY=VALUE, e.g. rate=1gbit delay=10ms a2b.loss=0.1% (repeatable)");
  app.add_option("--flap", opt.flaps,
                 "link down at AT for LENGTH after start: AT+LENGTH, e.g. 5s+2s");
  app.add_option("--flap-every", opt.flap_every, "periodic flap: period");
  app.add_option("--flap-for", opt.flap_for, "periodic flap: down time")->capture_default_str();
  app.add_option("--flap-dir", opt.flap_dir, "a2b, b2a or both")->capture_default_str();
  app.add_option("--mbufs", opt.mbufs, "mbufs in the pool (frames in flight)")
      ->capture_default_str();
  app.add_option("--framecnt", opt.framecnt, "af_packet ring frames per queue")
      ->capture_default_str();
  app.add_option("--mtu", opt.mtu,
                 "largest IP packet on the links (bytes; jumbo frames above 1500)")
      ->check(CLI::Range(576U, 9600U))
      ->capture_default_str();
  app.add_option("--spin-margin", opt.spin_margin, "wake this long before a release and spin")
      ->capture_default_str();
  app.add_option("--early", opt.early, "release frames at most this early")->capture_default_str();
  app.add_option("--spin-budget", opt.spin_budget,
                 "spin at most this long in each 10 ms (0: never; releases then leave late "
                 "by the timer's overshoot)")
      ->capture_default_str();
  app.add_option("--slack", opt.slack,
                 "let releases leave up to this late, to serve them in the wake-ups that "
                 "arrivals cause (0: on time, spinning for the last --spin-margin)")
      ->capture_default_str();
  app.add_option("--idle-spin", opt.idle_spin, "poll this long after the last work before sleeping")
      ->capture_default_str();
  app.add_option("--max-sleep", opt.max_sleep, "longest single sleep")->capture_default_str();
  app.add_option("--huge-dir", opt.huge_dir, "hugetlbfs mount to use (default: --no-huge)");
  app.add_option("--file-prefix", opt.file_prefix, "EAL file prefix (default rowan-wanem-PID)");
  app.add_option("--mem-mb", opt.mem_mb, "EAL memory in MB (default: from --mbufs)");
  app.add_option("--rt-priority", opt.rt_priority,
                 "run the forwarding thread SCHED_FIFO at this priority (0: normal)")
      ->capture_default_str()
      ->check(CLI::Range(0, 99));
  app.add_flag("--json", opt.json, "print the final counters as JSON");
  app.add_option("--eal", opt.eal, "extra EAL argument (repeatable)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  try {
    return run(opt);
  } catch (const ParseError& e) {
    spdlog::error("rowan-wanem: {}", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    spdlog::error("rowan-wanem: {}", e.what());
    return kExitUnavailable;
  }
}
