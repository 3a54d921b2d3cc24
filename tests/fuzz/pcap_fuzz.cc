// libFuzzer target for `rowanctl decode`'s capture input: each input is a
// capture file (classic pcap or pcapng, any link type) read through libpcap and
// decoded frame by frame, in both the text and the JSON form. The decoder must
// never crash, and must exit 0 or 66 (unreadable).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "decode.h"

namespace {

const std::string& scratch() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/rowan-pcap-fuzz-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) std::abort();
    close(fd);
    return std::string(tmpl);
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = scratch();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  if (size > 0 && std::fwrite(data, 1, size, f) != size) {
    std::fclose(f);
    return 0;
  }
  std::fclose(f);
  for (const bool json : {false, true}) {
    std::ostringstream out, err;
    const int rc = rowan::ctl::run_decode(path, json, out, err);
    if (rc != 0 && rc != 66) std::abort();
  }
  return 0;
}
