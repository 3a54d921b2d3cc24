// Where tests find the source tree (fixtures) and the build tree (binaries).
// ctest sets ROWAN_SOURCE_DIR and ROWAN_BINARY_DIR (cmake/RowanTargets.cmake).
#pragma once

#include <cstdlib>
#include <string>

namespace rowan::test {

inline std::string source_dir() {
  const char* s = std::getenv("ROWAN_SOURCE_DIR");
  return s != nullptr ? s : ROWAN_TEST_SOURCE_DIR;
}
inline std::string binary_dir() {
  const char* s = std::getenv("ROWAN_BINARY_DIR");
  return s != nullptr ? s : ROWAN_TEST_BINARY_DIR;
}

}  // namespace rowan::test
