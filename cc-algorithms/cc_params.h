// Per-algorithm parameters: a flat key → string map that each algorithm
// parses itself (the config's `[cc.params]` table, or `--cc-param k=v`).
// Every key must be consumed: an unknown key is an error, never ignored.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "base/units.h"

namespace rowan::cc {

class CcParamError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CcParams {
 public:
  CcParams() = default;
  explicit CcParams(std::map<std::string, std::string> kv) : kv_(std::move(kv)) {}

  void set(const std::string& key, const std::string& value) { kv_[key] = value; }
  bool empty() const { return kv_.empty(); }
  /// Every key and its text, as given (for printing a config back).
  const std::map<std::string, std::string>& values() const { return kv_; }

  /// A real-valued parameter within [lo, hi]; `def` when absent.
  double get_double(const std::string& key, double def, double lo, double hi) const;
  /// A duration given as "20ms", "150us", "1.5s" or plain seconds.
  Duration get_duration(const std::string& key, Duration def) const;
  /// A rate given as "10gbit", "400mbit", "1e9" (bit/s).
  BitsPerSec get_rate(const std::string& key, BitsPerSec def) const;
  bool get_bool(const std::string& key, bool def) const;

  /// Throws CcParamError naming every key no get_* call asked for.
  void reject_unknown(const std::string& algorithm) const;

 private:
  const std::string* find(const std::string& key) const;
  std::map<std::string, std::string> kv_;
  mutable std::set<std::string> used_;
};

/// Parses "10gbit", "1.5Gbit/s", "400mbit", "100kbit", "1e9" → bit/s. Throws CcParamError.
BitsPerSec parse_rate(const std::string& text);
/// Parses "20ms", "150us", "2s", "500ns", "0.5" (seconds) → Duration. Throws CcParamError.
Duration parse_duration(const std::string& text);

}  // namespace rowan::cc
