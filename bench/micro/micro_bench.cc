// Microbenchmarks of the per-packet work (Google Benchmark): parsing a RoCEv2
// frame, its ICRC, and sealing a WAN datagram with AES-256-GCM. Each checks
// its result, so a broken codec fails the run instead of timing garbage.
//
//   build/bench/micro/rowan_micro_bench                      # full run
//   build/bench/micro/rowan_micro_bench --benchmark_min_time=0.01   # ctest's smoke run
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "codec/roce.h"
#include "crypto/aead.h"
#include "crypto/keys.h"

namespace {

using namespace rowan;

// An RC SEND-only frame with `payload` bytes, built by the codec.
std::vector<uint8_t> send_frame(size_t payload) {
  std::vector<uint8_t> data(payload, 0x5a);
  roce::FrameSpec s;
  s.dst_mac = {0x02, 0, 0, 0, 0, 2};
  s.src_mac = {0x02, 0, 0, 0, 0, 1};
  s.src = roce::parse_ip_addr("198.18.1.10");
  s.dst = roce::parse_ip_addr("198.18.2.10");
  s.bth.opcode = 0x04;  // RC SEND Only
  s.bth.dest_qp = 0x123;
  s.bth.psn = 42;
  s.payload = data;
  std::vector<uint8_t> frame(payload + 128);
  frame.resize(roce::build(s, frame));
  return frame;
}

void BM_ParseRoceFrame(benchmark::State& state) {
  const std::vector<uint8_t> frame = send_frame(static_cast<size_t>(state.range(0)));
  if (frame.empty()) return state.SkipWithError("the codec built no frame");
  roce::RocePacket pkt;
  for (auto _ : state) {
    const roce::ParseError e = roce::parse_ethernet(frame, pkt);
    if (e != roce::ParseError::kOk) return state.SkipWithError("the frame does not parse");
    benchmark::DoNotOptimize(pkt);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(frame.size()));
}
BENCHMARK(BM_ParseRoceFrame)->Arg(64)->Arg(1024)->Arg(4096);

void BM_Icrc(benchmark::State& state) {
  const std::vector<uint8_t> frame = send_frame(static_cast<size_t>(state.range(0)));
  roce::RocePacket pkt;
  if (frame.empty() || roce::parse_ethernet(frame, pkt) != roce::ParseError::kOk) {
    return state.SkipWithError("no frame to check");
  }
  for (auto _ : state) {
    if (!roce::icrc_ok(pkt)) return state.SkipWithError("the ICRC the codec built is wrong");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(frame.size()));
}
BENCHMARK(BM_Icrc)->Arg(64)->Arg(1024)->Arg(4096);

// Arguments: datagram bytes, backend (0: OpenSSL EVP, 1: intel-ipsec-mb where
// built in; the label names what ran).
void BM_AesGcmSealOpen(benchmark::State& state) {
  const auto backend =
      state.range(1) == 0 ? crypto::AesGcm::Backend::kOpenSsl : crypto::AesGcm::Backend::kIpsecMb;
  crypto::AesGcm tx(backend), rx(backend);
  state.SetLabel(std::string(tx.backend_name()));
  const crypto::Key k = crypto::generate_private_key();
  tx.set_key(k);
  rx.set_key(k);
  std::vector<uint8_t> pt(static_cast<size_t>(state.range(0)), 0xa5), ct(pt.size()), out(pt.size());
  std::array<uint8_t, 16> aad{}, tag{};
  uint64_t n = 0;
  for (auto _ : state) {
    const auto nonce = crypto::AesGcm::nonce(++n);
    if (!tx.seal(nonce, aad.data(), aad.size(), pt.data(), pt.size(), ct.data(), tag.data()) ||
        !rx.open(nonce, aad.data(), aad.size(), ct.data(), ct.size(), out.data(), tag.data())) {
      return state.SkipWithError("seal/open failed");
    }
    benchmark::DoNotOptimize(out.data());
  }
  if (out != pt) state.SkipWithError("open did not give back the plaintext");
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_AesGcmSealOpen)->ArgsProduct({{64, 1400, 8900}, {0, 1}});

// Sealing a datagram of pieces (secure_io.h): arguments datagram bytes,
// backend, runs (1: one call; 3: a 25-byte header in place, the stream bytes
// from elsewhere, the tail in place, as a one-frame datagram; 5: two frames).
void BM_AesGcmSealRuns(benchmark::State& state) {
  const auto backend =
      state.range(1) == 0 ? crypto::AesGcm::Backend::kOpenSsl : crypto::AesGcm::Backend::kIpsecMb;
  crypto::AesGcm tx(backend);
  state.SetLabel(std::string(tx.backend_name()));
  tx.set_key(crypto::generate_private_key());
  const auto len = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf(len, 0x5a), src(len, 0xa5);
  std::array<uint8_t, 16> aad{}, tag{};
  std::vector<crypto::AesGcm::Run> runs;
  if (state.range(2) == 1) {
    runs.push_back({buf.data(), len});
  } else {
    const size_t frames = state.range(2) == 3 ? 1 : 2;
    const size_t each = (len - 25) / frames;
    size_t pos = 0;
    for (size_t f = 0; f < frames; ++f) {
      const size_t hdr = f == 0 ? 25 : 8;
      runs.push_back({buf.data() + pos, hdr});
      runs.push_back({src.data() + pos + hdr, each - hdr});
      pos += each;
    }
    runs.push_back({buf.data() + pos, len - pos});
  }
  uint64_t n = 0;
  for (auto _ : state) {
    if (!tx.seal_runs(crypto::AesGcm::nonce(++n), aad.data(), aad.size(), runs.data(), runs.size(),
                      buf.data(), tag.data())) {
      return state.SkipWithError("seal failed");
    }
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_AesGcmSealRuns)->ArgsProduct({{1400, 8900}, {0, 1}, {1, 3, 5}});

}  // namespace

BENCHMARK_MAIN();
