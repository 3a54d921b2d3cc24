// telemetry_watch_cpp: the C++ wrapper's view of the same telemetry — the
// path to a remote host and what that means for a DiLoCo-style outer step.
//
//   telemetry_watch_cpp [-s SOCKET] REMOTE_HOST [BYTES_PER_SYNC]
#include <rowan/rowan.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  std::string socket;
  int arg = 1;
  if (argc > 2 && std::string(argv[1]) == "-s") {
    socket = argv[2];
    arg = 3;
  }
  if (arg >= argc) {
    std::fprintf(stderr, "usage: telemetry_watch_cpp [-s SOCKET] REMOTE_HOST [BYTES_PER_SYNC]\n");
    return 64;
  }
  const std::string remote = argv[arg];
  const double bytes = arg + 1 < argc ? std::atof(argv[arg + 1]) : 1e9;
  try {
    rowan::Telemetry t(socket);
    t.refresh();
    const rowan_path_info p = t.path_to(remote);
    // Time one synchronisation of `bytes` needs on this path: a round trip
    // plus the bytes at the bottleneck rate.
    const double sync_s = p.min_rtt_s + (p.btlbw_bps > 0 ? bytes * 8 / p.btlbw_bps : 0);
    std::printf("remote=%s peer=%s min_rtt_ms=%.3f btlbw_mbps=%.1f bdp_bytes=%llu sync_s=%.3f\n",
                remote.c_str(), p.peer, p.min_rtt_s * 1e3, p.btlbw_bps / 1e6,
                static_cast<unsigned long long>(p.bdp_bytes), sync_s);
  } catch (const rowan::Error& e) {
    std::fprintf(stderr, "telemetry_watch_cpp: %s\n", e.what());
    return e.status() == ROWAN_ERR_UNREACHABLE ? 69 : 1;
  }
  return 0;
}
