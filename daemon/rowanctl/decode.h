// `rowanctl decode FILE.pcap [--json]`: decodes every frame of a capture as
// RoCEv2 (see docs/architecture.md, "Interfaces other tools rely on"). Reads classic pcap and
// pcapng through libpcap; link types Ethernet, raw IP and Linux cooked (SLL,
// SLL2).
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

namespace rowan::ctl {

/// One frame as the JSON object the contract specifies. `linktype` is the
/// pcap DLT of the capture. Never throws on malformed input.
nlohmann::ordered_json decode_frame(uint64_t frame_no, int linktype,
                                    std::span<const uint8_t> bytes);

/// Decodes `path` to `out`. Returns the process exit status: 0, or 66 when the
/// file cannot be read (the reason goes to `err`).
int run_decode(const std::string& path, bool json, std::ostream& out, std::ostream& err);

}  // namespace rowan::ctl
