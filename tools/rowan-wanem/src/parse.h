// Parsers for the values rowan-wanem takes on its command line and control
// socket: rates ("100mbit"), durations ("10ms"), byte sizes ("256KiB"),
// probabilities ("0.1%") and booleans. Each throws ParseError with the text.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "base/units.h"

namespace rowan::wanem {

class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// "1gbit", "100mbit", "1.5Gbit/s", "64kbit", "1e9" (bit/s), "0" (unlimited).
BitsPerSec parse_rate(std::string_view text);
/// "10ms", "250us", "1.5s", "800ns", "0".  Negative values are errors.
Duration parse_duration(std::string_view text);
/// "1500", "64KB" (1000), "64KiB" (1024), "2MB", "1MiB".
Bytes parse_bytes(std::string_view text);
/// "0.1%" (= 0.001) or a fraction "0.001"; must lie in [0, 1].
double parse_probability(std::string_view text);
/// "1"/"true"/"on"/"yes"/"up" and "0"/"false"/"off"/"no"/"down".
bool parse_bool(std::string_view text);

/// Formats for humans and JSON: "100mbit", "10ms", "0.1%".
std::string format_rate(BitsPerSec r);
std::string format_duration(Duration d);
std::string format_probability(double p);

}  // namespace rowan::wanem
