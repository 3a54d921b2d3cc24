#include "control/telemetry.h"

#include <rte_telemetry.h>

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>

#include "datapath/site.h"

namespace rowan::gw {

namespace {

using J = nlohmann::ordered_json;

// DPDK passes no context to a callback: the gateway the commands answer for.
std::mutex g_mu;
const SnapshotSource* g_gateway = nullptr;
bool g_registered = false;

std::string tel_name(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '/';
    out += ok ? c : '_';
  }
  return out;
}

void flatten_into(const J& v, const std::string& prefix, J& out) {
  if (v.is_object()) {
    for (const auto& [k, x] : v.items()) {
      flatten_into(x, prefix.empty() ? tel_name(k) : prefix + "_" + tel_name(k), out);
    }
  } else if (!v.is_array()) {
    out[prefix] = v;
  }
}

void add_value(rte_tel_data* d, const std::string& name, const J& v) {
  if (v.is_number_unsigned()) {
    rte_tel_data_add_dict_u64(d, name.c_str(), v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x >= INT32_MIN && x <= INT32_MAX) {
      rte_tel_data_add_dict_int(d, name.c_str(), static_cast<int>(x));
    } else {
      rte_tel_data_add_dict_string(d, name.c_str(), std::to_string(x).c_str());
    }
  } else if (v.is_number_float()) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", v.get<double>());
    rte_tel_data_add_dict_string(d, name.c_str(), buf);
  } else if (v.is_boolean()) {
    rte_tel_data_add_dict_int(d, name.c_str(), v.get<bool>() ? 1 : 0);
  } else if (v.is_string()) {
    rte_tel_data_add_dict_string(d, name.c_str(), v.get<std::string>().c_str());
  }
}

void dict_from(rte_tel_data* d, const J& obj) {
  rte_tel_data_start_dict(d);
  int n = 0;
  const J flat = flatten_for_telemetry(obj);
  for (const auto& [k, v] : flat.items()) {
    if (++n > RTE_TEL_MAX_DICT_ENTRIES) break;
    add_value(d, k, v);
  }
}

/// Runs `f(gateway)` under the registration lock; -ENODEV once rowand stops.
template <typename F>
int with_gateway(F&& f) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_gateway == nullptr) return -ENODEV;
  try {
    return f(*g_gateway);
  } catch (const std::exception&) {
    return -EINVAL;
  }
}

int cmd_status(const char*, const char*, rte_tel_data* d) {
  return with_gateway([&](const SnapshotSource& gw) {
    dict_from(d, gw.snapshot("status"));
    return 0;
  });
}

/// /rowan/peers and /rowan/links: the names in that snapshot array.
int list_names(const char* what, rte_tel_data* d) {
  return with_gateway([&](const SnapshotSource& gw) {
    rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
    for (const J& e : gw.snapshot(what)) {
      rte_tel_data_add_array_string(d, e.value("name", "").c_str());
    }
    return 0;
  });
}

/// /rowan/peer,NAME and /rowan/link,NAME.
int one_by_name(const char* what, const char* params, rte_tel_data* d) {
  if (params == nullptr || *params == '\0') return -EINVAL;
  return with_gateway([&](const SnapshotSource& gw) {
    for (const J& e : gw.snapshot(what)) {
      if (e.value("name", "") == params) {
        dict_from(d, e);
        return 0;
      }
    }
    return -ENOENT;
  });
}

int cmd_peers(const char*, const char*, rte_tel_data* d) { return list_names("peers", d); }
int cmd_links(const char*, const char*, rte_tel_data* d) { return list_names("links", d); }
int cmd_peer(const char*, const char* params, rte_tel_data* d) {
  return one_by_name("peers", params, d);
}
int cmd_link(const char*, const char* params, rte_tel_data* d) {
  return one_by_name("links", params, d);
}

int cmd_routes(const char*, const char*, rte_tel_data* d) {
  return with_gateway([&](const SnapshotSource& gw) {
    rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
    const J status = gw.snapshot("status");  // the loop below must not outlive it
    for (const J& r : status.at("routes")) {
      const std::string line =
          r.value("prefix", "") + " " + r.value("peer", "") + " " + r.value("mode", "");
      rte_tel_data_add_array_string(d, line.c_str());
    }
    return 0;
  });
}

int cmd_flows(const char*, const char*, rte_tel_data* d) {
  return with_gateway([&](const SnapshotSource& gw) {
    rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
    int n = 0;
    for (const J& f : gw.snapshot("flows")) {
      if (++n > RTE_TEL_MAX_ARRAY_ENTRIES) break;
      const std::string line = f.value("kind", "") + " " + f.value("src", "") + " -> " +
                               f.value("dst", "") + " " + f.value("peer", "") + " " +
                               std::to_string(f.value("packets", uint64_t{0})) + " " +
                               std::to_string(f.value("bytes", uint64_t{0}));
      rte_tel_data_add_array_string(d, line.c_str());
    }
    return 0;
  });
}

struct Command {
  const char* name;
  telemetry_cb fn;
  const char* help;
};
constexpr Command kCommands[] = {
    {"/rowan/status", cmd_status, "rowand status: counters, local port, drops. No parameters"},
    {"/rowan/peers", cmd_peers, "Names of rowand's peers. No parameters"},
    {"/rowan/peer", cmd_peer, "One rowand peer's transport state. Parameter: peer name"},
    {"/rowan/links", cmd_links, "Names of rowand's WAN links. No parameters"},
    {"/rowan/link", cmd_link, "One rowand WAN link's counters. Parameter: link name"},
    {"/rowan/routes", cmd_routes, "rowand routes: prefix, peer, mode. No parameters"},
    {"/rowan/flows", cmd_flows, "rowand flows (first 512). No parameters"},
};

}  // namespace

J flatten_for_telemetry(const J& obj) {
  J out = J::object();
  flatten_into(obj, "", out);
  return out;
}

Telemetry::Telemetry(const SnapshotSource& gw) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_registered) {
    for (const Command& c : kCommands) {
      const int rc = rte_telemetry_register_cmd(c.name, c.fn, c.help);
      if (rc != 0) {
        throw std::runtime_error(std::string("telemetry: cannot register ") + c.name + ": " +
                                 std::to_string(rc));
      }
    }
    g_registered = true;
  }
  g_gateway = &gw;
}

Telemetry::~Telemetry() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_gateway = nullptr;
}

}  // namespace rowan::gw
