#include "parse.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "cc_params.h"

namespace rowan::wanem {
namespace {

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

// Splits "12.5ms" into 12.5 and "ms"; throws when there is no number.
double split_number(const std::string& s, std::string& unit, std::string_view what) {
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  double v = 0;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || !std::isfinite(v)) {
    throw ParseError("not a " + std::string(what) + ": '" + s + "'");
  }
  unit.assign(ptr, end);
  return v;
}

}  // namespace

// Rates and durations use the one grammar rowan has (cc::parse_rate and
// cc::parse_duration, cc-algorithms/cc_params.h: the daemon's config and the
// CC parameters read them too). What the command line adds: blanks are
// ignored, "bps" is another spelling of bit/s, a duration other than 0 needs
// its unit, and errors are ParseError.
BitsPerSec parse_rate(std::string_view text) {
  std::string s = lower(text);
  if (s.empty() || s.front() == '-') throw ParseError("not a rate (or negative): '" + s + "'");
  if (s.size() > 2 && s.compare(s.size() - 2, 2, "/s") == 0) s.resize(s.size() - 2);
  if (s.size() > 3 && s.compare(s.size() - 3, 3, "bps") == 0) s.replace(s.size() - 3, 3, "bit");
  try {
    return cc::parse_rate(s);
  } catch (const cc::CcParamError& e) {
    throw ParseError(std::string("rate: ") + e.what());
  }
}

Duration parse_duration(std::string_view text) {
  std::string s = lower(text);
  if (s.empty() || s.front() == '-') throw ParseError("not a duration (or negative): '" + s + "'");
  if (s.size() > 3 && s.compare(s.size() - 3, 3, "\xc2\xb5s") == 0) s.replace(s.size() - 3, 2, "u");
  Duration d;
  try {
    d = cc::parse_duration(s);
  } catch (const cc::CcParamError& e) {
    throw ParseError(std::string("duration: ") + e.what());
  }
  const bool has_unit = std::isalpha(static_cast<unsigned char>(s.back())) != 0;
  if (!has_unit && !d.is_zero())
    throw ParseError("duration needs a unit (ns, us, ms, s): '" + s + "'");
  return d;
}

Bytes parse_bytes(std::string_view text) {
  const std::string s = lower(text);
  std::string unit;
  const double v = split_number(s, unit, "size");
  if (v < 0) throw ParseError("negative size: '" + s + "'");
  double mult = 0;
  if (unit.empty() || unit == "b") {
    mult = 1;
  } else if (unit == "k" || unit == "kb") {
    mult = 1e3;
  } else if (unit == "kib") {
    mult = 1024;
  } else if (unit == "m" || unit == "mb") {
    mult = 1e6;
  } else if (unit == "mib") {
    mult = 1024.0 * 1024;
  } else if (unit == "g" || unit == "gb") {
    mult = 1e9;
  } else if (unit == "gib") {
    mult = 1024.0 * 1024 * 1024;
  } else {
    throw ParseError("unknown size unit in '" + s + "' (use B, KB, KiB, MB, MiB, GB, GiB)");
  }
  return static_cast<Bytes>(std::llround(v * mult));
}

double parse_probability(std::string_view text) {
  const std::string s = lower(text);
  std::string unit;
  double v = split_number(s, unit, "probability");
  if (unit == "%") {
    v /= 100.0;
  } else if (!unit.empty()) {
    throw ParseError("probability must be a fraction or a percentage: '" + s + "'");
  }
  if (v < 0 || v > 1) throw ParseError("probability outside [0, 1]: '" + s + "'");
  return v;
}

bool parse_bool(std::string_view text) {
  const std::string s = lower(text);
  if (s == "1" || s == "true" || s == "on" || s == "yes" || s == "up") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no" || s == "down") return false;
  throw ParseError("not a boolean: '" + s + "'");
}

std::string format_rate(BitsPerSec r) {
  const uint64_t b = r.bps();
  if (b == 0) return "0";
  if (b % 1000000000ULL == 0) return fmt::format("{}gbit", b / 1000000000ULL);
  if (b % 1000000ULL == 0) return fmt::format("{}mbit", b / 1000000ULL);
  if (b % 1000ULL == 0) return fmt::format("{}kbit", b / 1000ULL);
  return fmt::format("{}bit", b);
}

std::string format_duration(Duration d) {
  const int64_t ns = d.ns();
  if (ns == 0) return "0";
  if (ns % 1000000 == 0) return fmt::format("{}ms", ns / 1000000);
  if (ns % 1000 == 0) return fmt::format("{}us", ns / 1000);
  return fmt::format("{}ns", ns);
}

std::string format_probability(double p) { return fmt::format("{:.6g}%", p * 100.0); }

}  // namespace rowan::wanem
