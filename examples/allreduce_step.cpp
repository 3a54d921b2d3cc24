// allreduce_step: one bulk "all-reduce step" between two sites over the
// message channel — each rank sends its gradient shard to the other and sums
// what it receives, so both end with the same reduced vector. The shard goes
// out in chunks, all queued at once, each chunk's buffer owned by the channel
// until its completion.
//
//   allreduce_step --listen PORT [FLOATS]          rank 1 (waits for rank 0)
//   allreduce_step --connect HOST:PORT [FLOATS]    rank 0
//   allreduce_step --self-test [FLOATS]            both ranks on loopback
//
// Exit 0 when the reduced vector is exactly right on this rank.
#include <rowan/rowan.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kChunkFloats = 64 * 1024;  // 256 KiB per message

// Rank r's value at index i: small integers, so float sums are exact.
float value(int rank, size_t i) {
  return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 13) % 1024);
}

int run_rank(rowan::Channel& ch, int rank, size_t n) {
  std::vector<float> mine(n), theirs(n);
  for (size_t i = 0; i < n; ++i) mine[i] = value(rank, i);
  const size_t chunks = (n + kChunkFloats - 1) / kChunkFloats;
  size_t received = 0;
  int failures = 0;
  // Receive buffers: the peer's chunks land directly in `theirs`.
  for (size_t c = 0; c < chunks; ++c) {
    const size_t len = std::min(kChunkFloats, n - c * kChunkFloats) * sizeof(float);
    ch.post_recv(theirs.data() + c * kChunkFloats, len, [&](void*, size_t got, int status) {
      if (status != ROWAN_OK) ++failures;
      (void)got;
      ++received;
    });
  }
  const auto start = std::chrono::steady_clock::now();
  size_t sent = 0;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t len = std::min(kChunkFloats, n - c * kChunkFloats) * sizeof(float);
    while (!ch.send(mine.data() + c * kChunkFloats, len, [&](const void*, size_t, int status) {
      if (status != ROWAN_OK) ++failures;
      ++sent;
    })) {
      ch.poll(10);
    }
  }
  while ((sent < chunks || received < chunks) && failures == 0) {
    if (ch.poll(100) < 0) break;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const float sum = mine[i] + theirs[i];
    if (sum != value(0, i) + value(1, i)) ++wrong;
  }
  const rowan_channel_stats st = ch.stats();
  std::printf(
      "rank %d: %zu floats reduced in %.3f s (%.1f Mbit/s each way), wrong=%zu, "
      "retransmitted=%llu, srtt_ms=%.3f, cc=%s\n",
      rank, n, s, static_cast<double>(n) * 4 * 8 / s / 1e6, wrong,
      static_cast<unsigned long long>(st.retransmitted_packets), st.srtt_s * 1e3, st.cc);
  return wrong == 0 && failures == 0 && sent == chunks && received == chunks ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: allreduce_step --listen PORT | --connect HOST:PORT | --self-test [FLOATS]\n");
    return 64;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "--self-test") {
      const size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (4u << 20);
      rowan::Listener l("127.0.0.1:0");
      int rc1 = 1;
      std::thread rank1([&] {
        rowan::Channel ch(nullptr);
        if (l.accept(&ch, 10000)) rc1 = run_rank(ch, 1, n);
        // Wait for rank 0's close, so both finish their exchange.
        while (ch.poll(100) >= 0) {
        }
      });
      rowan::Channel ch = rowan::Channel::connect("127.0.0.1:" + std::to_string(l.port()));
      const int rc0 = run_rank(ch, 0, n);
      ch.flush(10000);
      ch.close();
      rank1.join();
      return rc0 == 0 && rc1 == 0 ? 0 : 1;
    }
    const size_t n = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : (4u << 20);
    if (mode == "--listen" && argc > 2) {
      rowan::Listener l(std::string("0.0.0.0:") + argv[2]);
      rowan::Channel ch(nullptr);
      if (!l.accept(&ch, 60000)) return 69;
      const int rc = run_rank(ch, 1, n);
      while (ch.poll(100) >= 0) {
      }
      return rc;
    }
    if (mode == "--connect" && argc > 2) {
      rowan::Channel ch = rowan::Channel::connect(argv[2]);
      const int rc = run_rank(ch, 0, n);
      ch.flush(30000);
      return rc;
    }
  } catch (const rowan::Error& e) {
    std::fprintf(stderr, "allreduce_step: %s\n", e.what());
    return 1;
  }
  return 64;
}
