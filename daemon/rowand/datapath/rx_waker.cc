#include "datapath/rx_waker.h"

#include <stdexcept>

namespace rowan::gw {

std::string RxWaker::af_packet_iface(const std::string& device) {
  if (device.rfind("net_af_packet", 0) != 0) return "";
  size_t pos = device.find(',');
  while (pos != std::string::npos) {
    const size_t start = pos + 1;
    const size_t end = device.find(',', start);
    const std::string kv =
        device.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (kv.rfind("iface=", 0) == 0) return kv.substr(6);
    pos = end;
  }
  return "";
}

RxWaker::RxWaker(const std::string& device) {
  const std::string iface = af_packet_iface(device);
  if (iface.empty()) {
    why_not_ = "not an af_packet port";
    return;
  }
  try {
    bell_ = std::make_unique<io::Doorbell>(iface);
  } catch (const std::runtime_error& e) {
    why_not_ = e.what();
  }
}

}  // namespace rowan::gw
