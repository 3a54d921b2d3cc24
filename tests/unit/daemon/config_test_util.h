// What the config tests share (config_test.cc, config_errors_test.cc): the
// examples, a small valid config, error positions as FILE:LINE:COL, key files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "crypto/keys.h"
#include "tools/paths.h"
#include "tools/temp_dir.h"

namespace rowan::gw::config_testing {

namespace fs = std::filesystem;

inline std::string example(const std::string& rel) { return test::source_dir() + "/config/" + rel; }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// An example as its text says (its key file is not read: see AllParse).
inline GatewayConfig load_example(const std::string& rel) {
  return parse_config(read_file(example(rel)), example(rel));
}

// Parses `text` as "t.toml" and returns the errors (empty when it parsed).
inline std::vector<std::string> errors_of(const std::string& text) {
  try {
    (void)parse_config(text, "t.toml");
  } catch (const ConfigError& e) {
    return e.errors();
  }
  return {};
}

// "t.toml:LINE:COL" of the first occurrence of `marker` in `text`.
inline std::string where(const std::string& text, const std::string& marker, size_t nth = 0) {
  size_t at = text.find(marker);
  for (size_t i = 0; i < nth && at != std::string::npos; ++i) at = text.find(marker, at + 1);
  EXPECT_NE(at, std::string::npos) << marker;
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "t.toml:" + std::to_string(line) + ":" + std::to_string(col) + ": ";
}

// The position of `marker` inside the first `anchor` of `text`.
inline std::string where_after(const std::string& text, const std::string& anchor,
                               const std::string& marker) {
  const size_t a = text.find(anchor);
  EXPECT_NE(a, std::string::npos) << anchor;
  const size_t m = text.find(marker, a);
  std::string prefix = text.substr(0, m);
  return where(prefix + "\x01", "\x01");
}

// True when some error starts with `loc` and contains `what`.
inline ::testing::AssertionResult has_error(const std::vector<std::string>& errors,
                                            const std::string& loc, const std::string& what) {
  for (const auto& e : errors) {
    if (e.rfind(loc, 0) == 0 && e.find(what) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
  }
  auto r = ::testing::AssertionFailure() << "no error '" << loc << "..." << what << "' among:";
  for (const auto& e : errors) r << "\n  " << e;
  return r;
}

// A small valid config the error tests start from (insecure: no key files).
inline const std::string kBase = R"([local]
device = "net_af_packet0,iface=lan0"
address = "198.18.1.1"
insecure = true

[[wan.link]]
name = "wan0"
bind = "198.19.0.1:47910"

[[peer]]
name = "b"
endpoint = "198.19.0.2"

[[route]]
prefix = "198.18.2.0/24"
peer = "b"
)";

// A private temp dir, removed with everything in it.
class TempDir : public test::TempDir {
 public:
  TempDir() : test::TempDir("config") {}
};

// Writes a fresh private key to `path` with `mode`.
inline void write_key(const std::string& path,
                      fs::perms mode = fs::perms::owner_read | fs::perms::owner_write) {
  std::ofstream(path) << crypto::key_to_base64(crypto::generate_private_key()) << "\n";
  fs::permissions(path, mode);
}

}  // namespace rowan::gw::config_testing
