#include "emulator.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "parse.h"

namespace rowan::wanem {

using nlohmann::json;

const char* dir_name(int d) { return d == kA2B ? "a2b" : "b2a"; }

uint8_t parse_dir_mask(const std::string& s) {
  if (s == "a2b") return 1;
  if (s == "b2a") return 2;
  if (s == "both" || s.empty()) return kDirMaskBoth;
  throw ParseError("direction must be a2b, b2a or both: '" + s + "'");
}

void apply_setting(DirSettings& s, const std::string& key, const std::string& v) {
  if (key == "rate") {
    s.rate = parse_rate(v);
  } else if (key == "delay") {
    s.delay = parse_duration(v);
  } else if (key == "jitter") {
    s.jitter = parse_duration(v);
  } else if (key == "jitter_reorder") {
    s.jitter_reorder = parse_bool(v);
  } else if (key == "loss") {
    s.loss = parse_probability(v);
  } else if (key == "ge_p") {
    s.ge_p = parse_probability(v);
  } else if (key == "ge_r") {
    s.ge_r = parse_probability(v);
  } else if (key == "ge_bad_loss") {
    s.ge_bad_loss = parse_probability(v);
  } else if (key == "ge_good_loss") {
    s.ge_good_loss = parse_probability(v);
  } else if (key == "duplicate" || key == "dup") {
    s.duplicate = parse_probability(v);
  } else if (key == "corrupt") {
    s.corrupt = parse_probability(v);
  } else if (key == "corrupt_payload") {
    s.corrupt_payload = parse_bool(v);
  } else if (key == "reorder") {
    s.reorder = parse_probability(v);
  } else if (key == "queue") {
    s.queue_limit = parse_bytes(v);
    if (s.queue_limit < 2048) throw ParseError("queue must hold a frame (>= 2048 B): " + v);
  } else if (key == "ecn_threshold") {
    s.ecn_threshold = parse_bytes(v);
  } else if (key == "overhead") {
    s.overhead = parse_bytes(v);
    if (s.overhead > 1024) throw ParseError("overhead above 1024 B: " + v);
  } else if (key == "link") {
    s.up = parse_bool(v);
  } else {
    throw ParseError("unknown setting '" + key + "'");
  }
}

json settings_to_json(const DirSettings& s) {
  return json{{"rate", format_rate(s.rate)},
              {"delay", format_duration(s.delay)},
              {"jitter", format_duration(s.jitter)},
              {"jitter_reorder", s.jitter_reorder},
              {"loss", format_probability(s.loss)},
              {"ge_p", format_probability(s.ge_p)},
              {"ge_r", format_probability(s.ge_r)},
              {"ge_bad_loss", format_probability(s.ge_bad_loss)},
              {"ge_good_loss", format_probability(s.ge_good_loss)},
              {"duplicate", format_probability(s.duplicate)},
              {"corrupt", format_probability(s.corrupt)},
              {"corrupt_payload", s.corrupt_payload},
              {"reorder", format_probability(s.reorder)},
              {"queue", s.queue_limit},
              {"ecn_threshold", s.ecn_threshold},
              {"overhead", s.overhead},
              {"link", s.up ? "up" : "down"}};
}

Emulator::Emulator(size_t capacity_per_dir, uint64_t seed)
    : dirs_{Direction(capacity_per_dir, seed * 2 + 1), Direction(capacity_per_dir, seed * 2 + 2)} {}

void Emulator::set(const std::vector<std::pair<std::string, std::string>>& kv, TimePoint now) {
  std::array<DirSettings, 2> next{dirs_[0].settings(), dirs_[1].settings()};
  for (const auto& [full_key, value] : kv) {
    uint8_t mask = kDirMaskBoth;
    std::string key = full_key;
    if (key.rfind("a2b.", 0) == 0) {
      mask = 1;
      key = key.substr(4);
    } else if (key.rfind("b2a.", 0) == 0) {
      mask = 2;
      key = key.substr(4);
    }
    for (int d = 0; d < 2; ++d) {
      if ((mask & (1U << d)) != 0) apply_setting(next[static_cast<size_t>(d)], key, value);
    }
  }
  for (int d = 0; d < 2; ++d)
    dirs_[static_cast<size_t>(d)].configure(next[static_cast<size_t>(d)], now);
}

void Emulator::set_link(uint8_t dirs, bool up, TimePoint now) {
  for (int d = 0; d < 2; ++d) {
    if ((dirs & (1U << d)) == 0) continue;
    DirSettings s = dirs_[static_cast<size_t>(d)].settings();
    s.up = up;
    dirs_[static_cast<size_t>(d)].configure(s, now);
  }
}

void Emulator::add_flap(uint8_t dirs, TimePoint down_at, Duration length) {
  events_.push_back(LinkEvent{down_at.ns(), dirs, false});
  events_.push_back(LinkEvent{(down_at + length).ns(), dirs, true});
  std::stable_sort(events_.begin(), events_.end(),
                   [](const LinkEvent& a, const LinkEvent& b) { return a.at_ns < b.at_ns; });
  ++flaps_;
}

void Emulator::flap(uint8_t dirs, Duration in, Duration length, TimePoint now) {
  add_flap(dirs, now + in, length);
  run_schedule(now);
}

void Emulator::flap_every(Duration period, Duration length, uint8_t dirs, TimePoint now) {
  if (period.is_zero() || length >= period) {
    throw ParseError("a periodic flap needs 0 < length < period");
  }
  period_ = period;
  period_down_ = length;
  period_dirs_ = dirs;
  next_period_ = now + period;
}

void Emulator::run_schedule(TimePoint now) {
  while (next_period_ <= now) {
    add_flap(period_dirs_, next_period_, period_down_);
    next_period_ += period_;
  }
  size_t n = 0;
  while (n < events_.size() && events_[n].at_ns <= now.ns()) {
    set_link(events_[n].dirs, events_[n].up, now);
    ++n;
  }
  events_.erase(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(n));
}

TimePoint Emulator::next_event() const {
  TimePoint t = next_period_;
  if (!events_.empty()) t = std::min(t, TimePoint::from_ns(events_.front().at_ns));
  return t;
}

json Emulator::settings_json() const {
  return json{{"a2b", settings_to_json(dirs_[0].settings())},
              {"b2a", settings_to_json(dirs_[1].settings())}};
}

json Emulator::stats_json(TimePoint now) const {
  json out = json::object();
  for (int d = 0; d < 2; ++d) {
    const Direction& dr = dirs_[static_cast<size_t>(d)];
    const DirCounters& c = dr.counters();
    json drops = json::object();
    for (size_t r = 0; r < c.drops.size(); ++r) {
      drops[drop_reason_name(static_cast<DropReason>(r))] = c.drops[r];
    }
    drops["total"] = c.dropped();
    const double n_delay = c.delay_count > 0 ? static_cast<double>(c.delay_count) : 1.0;
    const double n_late = c.late_count > 0 ? static_cast<double>(c.late_count) : 1.0;
    out[dir_name(d)] = json{
        {"rx_frames", c.rx_frames},
        {"rx_bytes", c.rx_bytes},
        {"forwarded_frames", c.tx_frames},
        {"forwarded_bytes", c.tx_bytes},
        {"dropped", drops},
        {"duplicated", c.duplicated},
        {"corrupted", c.corrupted},
        {"corrupt_skipped", c.corrupt_skipped},
        {"reordered", c.reordered},
        {"ecn_marked", c.ecn_marked},
        {"ecn_not_ect", c.ecn_not_ect},
        {"queue_bytes", dr.backlog(now)},
        {"queue_max_bytes", c.queue_max_bytes},
        {"in_flight", dr.in_flight()},
        {"link", dr.settings().up ? "up" : "down"},
        {"ge_state", dr.ge_bad() ? "bad" : "good"},
        {"delay_applied_us",
         {{"mean", static_cast<double>(c.delay_sum_ns) / n_delay / 1e3},
          {"min", static_cast<double>(c.delay_min_ns) / 1e3},
          {"max", static_cast<double>(c.delay_max_ns) / 1e3}}},
        {"release_error_us",
         {{"mean", static_cast<double>(c.late_sum_ns) / n_late / 1e3},
          {"min", static_cast<double>(c.late_min_ns) / 1e3},
          {"p50", c.late_quantile_us(0.5)},
          {"p99", c.late_quantile_us(0.99)},
          {"p999", c.late_quantile_us(0.999)},
          {"max", static_cast<double>(c.late_max_ns) / 1e3}}},
    };
  }
  out["flaps"] = flaps_;
  if (port_stats_) out["ports"] = port_stats_();
  const auto mean_us = [](int64_t sum, uint64_t n) {
    return n == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(n) / 1e3;
  };
  out["loop"] = json{{"sleeps", loop_.sleeps},
                     {"timer_wakeups", loop_.timeouts},
                     {"forced_sleeps", loop_.forced_sleeps},
                     {"slept_s", static_cast<double>(loop_.slept_ns) / 1e9},
                     {"timer_overshoot_us",
                      {{"mean", mean_us(loop_.overshoot_sum_ns, loop_.timeouts)},
                       {"max", static_cast<double>(loop_.overshoot_max_ns) / 1e3}}},
                     {"spin_margin_us", static_cast<double>(loop_.margin_ns) / 1e3},
                     {"kernel_stamped_frames", loop_.stamped},
                     {"stamp_correction_us",
                      {{"mean", mean_us(loop_.stamp_correction_sum_ns, loop_.stamped)},
                       {"max", static_cast<double>(loop_.stamp_correction_max_ns) / 1e3}}}};
  out["uptime_s"] = start_.is_zero() ? 0.0 : (now - start_).seconds();
  return out;
}

std::string Emulator::stats_text(TimePoint now) const {
  std::string out;
  auto to = std::back_inserter(out);
  for (int d = 0; d < 2; ++d) {
    const Direction& dr = dirs_[static_cast<size_t>(d)];
    const DirCounters& c = dr.counters();
    const double n_delay = c.delay_count > 0 ? static_cast<double>(c.delay_count) : 1.0;
    const double n_late = c.late_count > 0 ? static_cast<double>(c.late_count) : 1.0;
    fmt::format_to(to, "{}: rx {} frames {} B, forwarded {} frames {} B, dropped {} (", dir_name(d),
                   c.rx_frames, c.rx_bytes, c.tx_frames, c.tx_bytes, c.dropped());
    for (size_t r = 0; r < c.drops.size(); ++r) {
      fmt::format_to(to, "{}{} {}", r == 0 ? "" : ", ",
                     drop_reason_name(static_cast<DropReason>(r)), c.drops[r]);
    }
    fmt::format_to(
        to,
        ")\n  duplicated {}, corrupted {}, reordered {}, ecn_marked {}; queue {} B (max "
        "{} B), in flight {}\n"
        "  delay applied mean {:.1f} us (min {:.1f}, max {:.1f}); release error mean "
        "{:.1f} us (p99 {:.0f}, max {:.1f})\n",
        c.duplicated, c.corrupted, c.reordered, c.ecn_marked, dr.backlog(now), c.queue_max_bytes,
        dr.in_flight(), static_cast<double>(c.delay_sum_ns) / n_delay / 1e3,
        static_cast<double>(c.delay_min_ns) / 1e3, static_cast<double>(c.delay_max_ns) / 1e3,
        static_cast<double>(c.late_sum_ns) / n_late / 1e3, c.late_quantile_us(0.99),
        static_cast<double>(c.late_max_ns) / 1e3);
  }
  return out;
}

json Emulator::handle(const json& req, TimePoint now, bool* quit) {
  *quit = false;
  try {
    if (!req.is_object() || !req.contains("cmd") || !req["cmd"].is_string()) {
      return json{{"ok", false}, {"error", "request must be an object with a string \"cmd\""}};
    }
    const std::string cmd = req["cmd"].get<std::string>();
    auto str = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    if (cmd == "get") {
      return json{{"ok", true}, {"settings", settings_json()}, {"stats", stats_json(now)}};
    }
    if (cmd == "stats") return json{{"ok", true}, {"stats", stats_json(now)}};
    if (cmd == "set") {
      if (!req.contains("settings") || !req["settings"].is_object()) {
        return json{{"ok", false}, {"error", "set needs an object \"settings\""}};
      }
      std::vector<std::pair<std::string, std::string>> kv;
      for (const auto& [k, v] : req["settings"].items()) kv.emplace_back(k, str(v));
      set(kv, now);
      return json{{"ok", true}, {"settings", settings_json()}};
    }
    if (cmd == "flap") {
      const uint8_t mask = parse_dir_mask(req.contains("dir") ? str(req["dir"]) : "both");
      const Duration length = parse_duration(req.contains("for") ? str(req["for"]) : "");
      const Duration in = req.contains("in") ? parse_duration(str(req["in"])) : Duration::zero();
      flap(mask, in, length, now);
      return json{{"ok", true}, {"settings", settings_json()}};
    }
    if (cmd == "link") {
      const uint8_t mask = parse_dir_mask(req.contains("dir") ? str(req["dir"]) : "both");
      const bool up = parse_bool(req.contains("state") ? str(req["state"]) : "");
      set_link(mask, up, now);
      return json{{"ok", true}, {"settings", settings_json()}};
    }
    if (cmd == "reset_stats") {
      dirs_[0].reset_counters();
      dirs_[1].reset_counters();
      loop_ = LoopStats{};
      flaps_ = 0;
      return json{{"ok", true}};
    }
    if (cmd == "quit") {
      *quit = true;
      return json{{"ok", true}};
    }
    return json{{"ok", false}, {"error", "unknown cmd '" + cmd + "'"}};
  } catch (const std::exception& e) {
    return json{{"ok", false}, {"error", e.what()}};
  }
}

}  // namespace rowan::wanem
