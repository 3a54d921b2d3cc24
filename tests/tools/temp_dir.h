// A private temporary directory for one test, removed with everything in it.
// Short paths (/tmp/rowan-<tag>-XXXXXX): a unix socket's sun_path holds 107 bytes.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace rowan::test {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    std::string tmpl = "/tmp/rowan-" + tag + "-XXXXXX";
    const char* d = mkdtemp(tmpl.data());
    EXPECT_NE(d, nullptr) << "mkdtemp " << tmpl;
    path_ = d != nullptr ? d : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace rowan::test
