#include "qp_attrs.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/qp_attrs.h"
#include "api/telemetry.h"
#include "ctl.h"

namespace rowan::ctl {

int run_qp_attrs(const std::string& socket, const QpAttrsOptions& opt, std::ostream& out,
                 std::ostream& err) {
  using Json = nlohmann::ordered_json;
  Json peers;
  Json links;
  Json status;
  std::string error;
  for (auto [cmd, dst] :
       {std::pair<const char*, Json*>{"peers", &peers}, {"links", &links}, {"status", &status}}) {
    const int rc = api::control_query(socket, cmd, opt.timeout_ms, dst, &error);
    if (rc == ROWAN_ERR_UNREACHABLE || rc == ROWAN_ERR_SYSTEM) {
      err << "rowanctl: the daemon is unreachable: " << error << "\n";
      return kExitUnavailable;
    }
    if (rc == ROWAN_ERR_DAEMON) {
      err << "rowanctl: " << error << "\n";
      return kExitError;
    }
    if (rc != ROWAN_OK) {
      err << "rowanctl: " << error << "\n";
      return kExitProtocol;
    }
  }
  api::Snapshot snap;
  try {
    snap = api::build_snapshot(peers, links, status, nullptr, api::monotonic_seconds());
  } catch (const std::exception& e) {
    err << "rowanctl: " << e.what() << "\n";
    return kExitProtocol;
  }
  rowan_qp_path path{};
  if (api::qp_path_for(snap, opt.target, opt.message_bytes, opt.uses_read ? 1 : 0, &path, &error) !=
      ROWAN_OK) {
    err << "rowanctl: " << error << "\n";
    return kExitError;
  }
  rowan_qp_attrs a{};
  if (api::compute_qp_attrs(path, a) != ROWAN_OK) {
    err << "rowanctl: cannot compute attributes for " << opt.target << "\n";
    return kExitError;
  }
  const rowan_path_info* p = api::find_path(snap, opt.target);
  if (opt.json) {
    const Json j{{"peer", p->peer},
                 {"mode", api::mode_name(path.mode)},
                 {"rtt_s", path.rtt_s},
                 {"rate_bps", path.rate_bps},
                 {"bdp_bytes", a.bdp_bytes},
                 {"timeout", a.timeout},
                 {"ack_timeout_s", a.ack_timeout_s},
                 {"retry_cnt", a.retry_cnt},
                 {"rnr_retry", a.rnr_retry},
                 {"min_rnr_timer", a.min_rnr_timer},
                 {"max_rd_atomic", a.max_rd_atomic},
                 {"max_dest_rd_atomic", a.max_dest_rd_atomic},
                 {"path_mtu", a.path_mtu},
                 {"path_mtu_bytes", a.path_mtu_bytes},
                 {"max_send_wr", a.max_send_wr},
                 {"max_recv_wr", a.max_recv_wr}};
    out << j.dump() << "\n";
    return 0;
  }
  out << fmt::format("peer                {} ({} route)\n", p->peer, api::mode_name(path.mode));
  out << fmt::format("path                RTT {:.3f} ms, rate {:.1f} Mbit/s, BDP {} bytes\n",
                     path.rtt_s * 1e3, path.rate_bps / 1e6, a.bdp_bytes);
  out << fmt::format("timeout             {} ({:.3f} ms)\n", a.timeout, a.ack_timeout_s * 1e3);
  out << fmt::format("retry_cnt           {}\n", a.retry_cnt);
  out << fmt::format("rnr_retry           {}\n", a.rnr_retry);
  out << fmt::format("min_rnr_timer       {} ({:.2f} ms)\n", a.min_rnr_timer,
                     api::rnr_timer_seconds(a.min_rnr_timer) * 1e3);
  out << fmt::format("max_rd_atomic       {}\n", a.max_rd_atomic);
  out << fmt::format("max_dest_rd_atomic  {}\n", a.max_dest_rd_atomic);
  out << fmt::format("path_mtu            {} ({} bytes)\n", a.path_mtu, a.path_mtu_bytes);
  out << fmt::format("max_send_wr         {}\n", a.max_send_wr);
  out << fmt::format("max_recv_wr         {}\n", a.max_recv_wr);
  return 0;
}

}  // namespace rowan::ctl
