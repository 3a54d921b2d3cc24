// libFuzzer target for rowand's TOML config parser (toml++ plus every check in
// config.cc): any input either parses or throws ConfigError with at least one
// message; a config that parses writes back (to_toml) to text that parses to
// the same TOML again.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  rowan::gw::GatewayConfig cfg;
  try {
    cfg = rowan::gw::parse_config(text, "fuzz.toml");
  } catch (const rowan::gw::ConfigError& e) {
    if (e.errors().empty()) std::abort();
    return 0;
  }
  const std::string again = rowan::gw::to_toml(cfg);
  try {
    const rowan::gw::GatewayConfig back = rowan::gw::parse_config(again, "fuzz.toml");
    if (rowan::gw::to_toml(back) != again) std::abort();
  } catch (const rowan::gw::ConfigError&) {
    std::abort();  // what to_toml writes must parse
  }
  return 0;
}
