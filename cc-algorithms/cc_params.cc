#include "cc_params.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace rowan::cc {
namespace {

// Splits "12.5ms" into 12.5 and "ms"; throws on no number.
double leading_number(const std::string& text, std::string& suffix) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (end == begin || errno == ERANGE || !std::isfinite(v)) {
    throw CcParamError("'" + text + "' is not a number");
  }
  suffix.assign(end);
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

}  // namespace

BitsPerSec parse_rate(const std::string& text) {
  std::string suffix;
  const double v = leading_number(text, suffix);
  if (suffix.ends_with("/s")) suffix.resize(suffix.size() - 2);
  if (suffix.ends_with("ps")) {  // "mbps", "gbps", "bps": bits per second
    suffix.resize(suffix.size() - 2);
    if (suffix.ends_with("b")) suffix.pop_back();
    suffix += "bit";
  }
  double mult = 0;
  if (suffix.empty() || suffix == "bit" || suffix == "b")
    mult = 1;
  else if (suffix == "kbit" || suffix == "kb" || suffix == "k")
    mult = 1e3;
  else if (suffix == "mbit" || suffix == "mb" || suffix == "m")
    mult = 1e6;
  else if (suffix == "gbit" || suffix == "gb" || suffix == "g")
    mult = 1e9;
  else if (suffix == "tbit" || suffix == "tb" || suffix == "t")
    mult = 1e12;
  else
    throw CcParamError("'" + text + "': unknown rate unit (use bit, kbit, mbit, gbit, tbit)");
  const double bps = v * mult;
  if (bps < 0 || bps > 1.8e19) throw CcParamError("'" + text + "': rate out of range");
  return BitsPerSec::from_bps(static_cast<uint64_t>(bps));
}

Duration parse_duration(const std::string& text) {
  std::string suffix;
  const double v = leading_number(text, suffix);
  double mult = 0;
  if (suffix.empty() || suffix == "s")
    mult = 1e9;
  else if (suffix == "ms")
    mult = 1e6;
  else if (suffix == "us")
    mult = 1e3;
  else if (suffix == "ns")
    mult = 1;
  else if (suffix == "min")
    mult = 60e9;
  else
    throw CcParamError("'" + text + "': unknown time unit (use s, ms, us, ns)");
  const double ns = v * mult;
  if (ns < 0 || ns > 9.2e18) throw CcParamError("'" + text + "': duration out of range");
  return Duration::from_ns(static_cast<int64_t>(std::llround(ns)));
}

const std::string* CcParams::find(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) return nullptr;
  used_.insert(key);
  return &it->second;
}

double CcParams::get_double(const std::string& key, double def, double lo, double hi) const {
  const std::string* s = find(key);
  if (s == nullptr) return def;
  std::string suffix;
  double v = 0;
  try {
    v = leading_number(*s, suffix);
  } catch (const CcParamError& e) {
    throw CcParamError(key + ": " + e.what());
  }
  if (!suffix.empty()) throw CcParamError(key + ": '" + *s + "' is not a number");
  if (v < lo || v > hi) {
    throw CcParamError(key + ": " + *s + " is outside [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "]");
  }
  return v;
}

Duration CcParams::get_duration(const std::string& key, Duration def) const {
  const std::string* s = find(key);
  if (s == nullptr) return def;
  try {
    return parse_duration(*s);
  } catch (const CcParamError& e) {
    throw CcParamError(key + ": " + e.what());
  }
}

BitsPerSec CcParams::get_rate(const std::string& key, BitsPerSec def) const {
  const std::string* s = find(key);
  if (s == nullptr) return def;
  try {
    return parse_rate(*s);
  } catch (const CcParamError& e) {
    throw CcParamError(key + ": " + e.what());
  }
}

bool CcParams::get_bool(const std::string& key, bool def) const {
  const std::string* s = find(key);
  if (s == nullptr) return def;
  if (*s == "true" || *s == "1" || *s == "yes") return true;
  if (*s == "false" || *s == "0" || *s == "no") return false;
  throw CcParamError(key + ": '" + *s + "' is not a boolean");
}

void CcParams::reject_unknown(const std::string& algorithm) const {
  std::string bad;
  for (const auto& [k, v] : kv_) {
    if (used_.count(k) == 0) bad += (bad.empty() ? "" : ", ") + k;
  }
  if (!bad.empty()) throw CcParamError(algorithm + ": unknown parameter(s): " + bad);
}

}  // namespace rowan::cc
