// rowan-perf: goodput between two hosts over librowan's message channel,
// like iperf3. Uses only the public C API (<rowan/rowan.h>).
//
//   rowan-perf -s [-p PORT] [-1]
//   rowan-perf -c HOST [-p PORT] [-t SECONDS] [-O SECONDS] [-P STREAMS] [--cc NAME] [--json]
//   rowan-perf -c HOST --rr [-l BYTES] ...   # request-response: completion times
//   rowan-perf -c HOST1,HOST2 [--bind LOCAL1,LOCAL2] [--rate R1,R2] [--rtt T1,T2] ...
//                                            # each stream's channel over several paths
//
// Each stream is one channel. The client sends START, then DATA messages
// whose bytes are a function of (test, stream, sequence) for -t seconds, then
// END; the server checks every DATA byte and sequence number and answers END
// with RESULT (bytes and messages it verified, errors). The client reports
// goodput as the message bytes the server's transport acknowledged within
// the test time, and exits 1 when the server saw a bad byte or a gap. -O
// (like iperf3's) runs that many seconds first and leaves them out of the
// goodput (slow start).
//
// With --rr the client sends one DATA message at a time (a request, -l bytes,
// 1 MiB by default) and waits for the server's 16-byte ANSWER, which the
// server sends once it has the whole request and checked it; each request's
// completion time (send to answer) is measured, and the client reports their
// mean, p50, p99 and p99.9.
//
// With several hosts (-c A,B) each stream's channel runs over one path per
// host (rowan_connect_paths): path i from the i-th --bind address (any when
// not given) to the i-th host, with the i-th --rate and --rtt (one value
// applies to every path). --json then adds each path's figures.
#include <rowan/rowan.h>
#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace {

constexpr uint32_t kStart = 1, kData = 2, kEnd = 3, kResult = 4, kAnswer = 5;
constexpr size_t kAnswerBytes = 16;  // u32 type, u32 stream, u64 sequence
constexpr int kAnswerRing = 64;      // answers in flight at once (one per request in --rr)
constexpr size_t kHeader = 16;       // u32 type, u32 stream, u64 sequence
constexpr size_t kMaxMessage = 4 << 20;
constexpr int kExitUsage = 64;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint64_t pattern(uint64_t test, uint32_t stream, uint64_t seq, size_t word) {
  uint64_t x = test ^ (static_cast<uint64_t>(stream) << 48) ^ (seq << 20) ^ word;
  x *= 0x9E3779B97F4A7C15ULL;
  return x ^ (x >> 29);
}

void fill(uint8_t* buf, size_t len, uint64_t test, uint32_t stream, uint64_t seq) {
  put32(buf, kData);
  put32(buf + 4, stream);
  put64(buf + 8, seq);
  for (size_t w = 2; (w + 1) * 8 <= len; ++w) put64(buf + w * 8, pattern(test, stream, seq, w));
  for (size_t i = len - len % 8; i < len && i >= kHeader; ++i)
    buf[i] = static_cast<uint8_t>(pattern(test, stream, seq, i));
}

bool verify(const uint8_t* buf, size_t len, uint64_t test, uint32_t stream, uint64_t seq) {
  if (len < kHeader || get32(buf) != kData || get32(buf + 4) != stream || get64(buf + 8) != seq)
    return false;
  for (size_t w = 2; (w + 1) * 8 <= len; ++w)
    if (get64(buf + w * 8) != pattern(test, stream, seq, w)) return false;
  for (size_t i = len - len % 8; i < len && i >= kHeader; ++i)
    if (buf[i] != static_cast<uint8_t>(pattern(test, stream, seq, i))) return false;
  return true;
}

int die(const char* what, int rc) {
  fmt::print(stderr, "rowan-perf: {}: {} ({})\n", what, rowan_strerror(rc), rowan_last_error());
  return 1;
}

// ---- Server -----------------------------------------------------------------

struct ServerStream {
  rowan_channel* ch = nullptr;
  std::vector<std::vector<uint8_t>> bufs;
  uint64_t test = 0;
  uint32_t stream = 0;
  uint32_t streams = 0;
  uint64_t next_seq = 0;
  uint64_t bytes = 0;
  uint64_t messages = 0;
  uint64_t errors = 0;
  bool started = false;
  bool ended = false;
  bool rr = false;  // answer each DATA message (request-response)
  uint8_t result[48] = {};
  uint8_t answers[kAnswerRing][kAnswerBytes] = {};
};

void on_server_recv(rowan_channel* ch, void* user, void* buf, size_t len, int status);

// The first test a -1 server serves: its id, stream count and streams done.
struct FirstTest {
  std::mutex mu;
  uint64_t test = 0;
  uint32_t streams = 0;
  uint32_t done = 0;
};

void serve_stream(rowan_channel* ch, FirstTest* first) {
  ServerStream s;
  s.ch = ch;
  constexpr int kBuffers = 8;
  s.bufs.assign(kBuffers, std::vector<uint8_t>(kMaxMessage));
  for (auto& b : s.bufs) rowan_channel_post_recv(ch, b.data(), b.size(), on_server_recv, &s);
  int rc = 0;
  while (!s.ended) {
    rc = rowan_channel_poll(ch, 100);
    if (rc < 0) break;
  }
  if (s.ended) {
    put32(s.result, kResult);
    put32(s.result + 4, s.stream);
    put64(s.result + 8, s.bytes);
    put64(s.result + 16, s.messages);
    put64(s.result + 24, s.errors);
    rowan_channel_send(ch, s.result, sizeof s.result, nullptr, nullptr);
    rowan_channel_flush(ch, 10000);
    // Wait for the client's close so the RESULT's ACK and our close do not race.
    for (int i = 0; i < 100 && rowan_channel_poll(ch, 100) >= 0; ++i) {
    }
  }
  char peer[80];
  rowan_channel_peer(ch, peer, sizeof peer);
  fmt::print(stderr, "rowan-perf: stream {} from {}: {} bytes, {} messages, {} errors{}{}{}\n",
             s.stream, peer, s.bytes, s.messages, s.errors,
             s.ended ? "" : (rc < 0 ? " (channel failed before END: " : ""),
             s.ended || rc >= 0 ? "" : rowan_strerror(rc), s.ended || rc >= 0 ? "" : ")");
  rowan_channel_close(ch);
  if (s.started) {
    std::lock_guard lock(first->mu);
    if (first->test == 0) {
      first->test = s.test;
      first->streams = s.streams;
    }
    if (first->test == s.test) ++first->done;
  }
}

void on_server_recv(rowan_channel* ch, void* user, void* buf, size_t len, int status) {
  auto* s = static_cast<ServerStream*>(user);
  if (status != ROWAN_OK) {
    if (status == ROWAN_ERR_MSGSIZE) ++s->errors;
    if (status != ROWAN_ERR_CLOSED)
      rowan_channel_post_recv(ch, buf, kMaxMessage, on_server_recv, s);
    return;
  }
  const auto* p = static_cast<const uint8_t*>(buf);
  const uint32_t type = len >= 4 ? get32(p) : 0;
  if (type == kStart && len >= 32) {
    s->test = get64(p + 8);
    s->stream = get32(p + 4);
    s->streams = get32(p + 16);
    s->rr = get32(p + 20) != 0;
    s->started = true;
  } else if (type == kData) {
    if (!verify(p, len, s->test, s->stream, s->next_seq)) ++s->errors;
    if (s->rr) {
      uint8_t* a = s->answers[s->next_seq % kAnswerRing];
      put32(a, kAnswer);
      put32(a + 4, s->stream);
      put64(a + 8, s->next_seq);
      if (rowan_channel_send(ch, a, kAnswerBytes, nullptr, nullptr) != ROWAN_OK) ++s->errors;
    }
    ++s->next_seq;
    ++s->messages;
    s->bytes += len;
  } else if (type == kEnd && len >= 16) {
    if (get64(p + 8) != s->messages) ++s->errors;  // the client's count must match ours
    s->ended = true;
  } else {
    ++s->errors;
  }
  rowan_channel_post_recv(ch, buf, kMaxMessage, on_server_recv, s);
}

int run_server(int port, bool one, const rowan_channel_options& o) {
  rowan_listener* l = nullptr;
  const std::string bind = "0.0.0.0:" + std::to_string(port);
  if (const int rc = rowan_listen(bind.c_str(), &o, &l); rc != ROWAN_OK) return die("listen", rc);
  fmt::print(stderr, "rowan-perf: listening on {}\n", bind);
  FirstTest first;
  std::vector<std::thread> threads;
  for (;;) {
    rowan_channel* ch = nullptr;
    const int rc = rowan_accept(l, 200, &ch);
    if (rc == ROWAN_OK) {
      threads.emplace_back(serve_stream, ch, &first);
    } else if (rc != ROWAN_ERR_TIMEOUT) {
      return die("accept", rc);
    }
    if (one) {
      std::lock_guard lock(first.mu);
      if (first.test != 0 && first.done >= first.streams) break;
    }
  }
  for (auto& t : threads) t.join();
  rowan_listener_close(l);
  return 0;
}

// ---- Client -----------------------------------------------------------------

struct ClientStream {
  uint32_t index = 0;
  rowan_channel* ch = nullptr;
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<size_t> free_bufs;
  uint64_t next_seq = 0;
  uint64_t acked_bytes = 0;
  uint64_t acked_in_time = 0;  // DATA bytes acked in the measured interval
  uint64_t acked_at_omit = 0;  // ... and before it (--omit)
  bool result_seen = false;
  uint64_t server_bytes = 0, server_messages = 0, server_errors = 0;
  rowan_channel_stats stats{};
  std::vector<rowan_channel_path_stats> paths;
  double duration_s = 0;
  int error = 0;
  std::string error_text;
  std::vector<uint8_t> control;  // START / END
  std::vector<uint8_t> result_buf;
  // Request-response.
  std::vector<std::vector<uint8_t>> answer_bufs;
  uint64_t answered = 0;             // answers received (in order)
  std::vector<double> completion_s;  // per request
};

void on_client_sent(rowan_channel*, void* user, const void* buf, size_t len, int status) {
  auto* s = static_cast<ClientStream*>(user);
  if (status == ROWAN_OK && len > 0 && get32(static_cast<const uint8_t*>(buf)) == kData)
    s->acked_bytes += len;
  for (size_t i = 0; i < s->bufs.size(); ++i) {
    if (s->bufs[i].data() == buf) s->free_bufs.push_back(i);
  }
}

void on_client_recv(rowan_channel* ch, void* user, void* buf, size_t len, int status) {
  auto* s = static_cast<ClientStream*>(user);
  const auto* p = static_cast<const uint8_t*>(buf);
  if (status == ROWAN_OK && len == kAnswerBytes && get32(p) == kAnswer) {
    if (get64(p + 8) == s->answered) ++s->answered;
    rowan_channel_post_recv(ch, buf, 64, on_client_recv, s);  // for the next answer
    return;
  }
  if (status == ROWAN_OK && len >= 32 && get32(p) == kResult) {
    s->server_bytes = get64(p + 8);
    s->server_messages = get64(p + 16);
    s->server_errors = get64(p + 24);
    s->result_seen = true;
  }
}

// --rr: one request at a time; returns the channel's last status.
int run_requests(ClientStream* s, uint64_t test, double duration, size_t msg_len) {
  int rc = 0;
  const auto start = Clock::now();
  std::vector<uint8_t>& req = s->bufs[0];
  while (rc >= 0 && seconds_since(start) < duration) {
    fill(req.data(), msg_len, test, s->index, s->next_seq);
    const auto t0 = Clock::now();
    rc = rowan_channel_send(s->ch, req.data(), msg_len, on_client_sent, s);
    if (rc < 0) break;
    s->free_bufs.clear();  // on_client_sent gives it back
    ++s->next_seq;
    // The request buffer is ours again once acked; the answer says the
    // server has it all.
    while (rc >= 0 && (s->answered < s->next_seq || s->free_bufs.empty()))
      rc = rowan_channel_poll(s->ch, 10);
    if (rc >= 0) s->completion_s.push_back(seconds_since(t0));
  }
  s->duration_s = seconds_since(start);
  return rc;
}

/// One path of the client's channels (-c, --bind, --rate, --rtt).
struct PathArg {
  std::string local;
  std::string remote;  // HOST:PORT
  double rate_bps = 0;
  double rtt_s = 0;
};

int connect(const std::vector<PathArg>& paths, const rowan_channel_options& o, rowan_channel** ch) {
  if (paths.size() == 1 && paths[0].local.empty())
    return rowan_connect(paths[0].remote.c_str(), &o, ch);  // the one-path handshake as before
  std::vector<rowan_channel_path> c;
  for (const PathArg& p : paths)
    c.push_back(rowan_channel_path{p.local.c_str(), p.remote.c_str(), p.rate_bps, p.rtt_s});
  return rowan_connect_paths(c.data(), c.size(), &o, ch);
}

void run_stream(ClientStream* s, const std::vector<PathArg>& paths, const rowan_channel_options& o,
                uint64_t test, uint32_t streams, double duration, double omit, size_t msg_len,
                size_t depth, bool rr) {
  int rc = connect(paths, o, &s->ch);
  if (rc != ROWAN_OK) {
    s->error = rc;
    s->error_text = rowan_last_error();
    return;
  }
  s->bufs.assign(depth, std::vector<uint8_t>(msg_len));
  for (size_t i = 0; i < depth; ++i) s->free_bufs.push_back(depth - 1 - i);
  s->control.assign(32, 0);
  put32(s->control.data(), kStart);
  put32(s->control.data() + 4, s->index);
  put64(s->control.data() + 8, test);
  put32(s->control.data() + 16, streams);
  put32(s->control.data() + 20, rr ? 1 : 0);
  s->result_buf.assign(64, 0);
  rowan_channel_post_recv(s->ch, s->result_buf.data(), s->result_buf.size(), on_client_recv, s);
  if (rr) {
    s->answer_bufs.assign(4, std::vector<uint8_t>(64));
    for (auto& b : s->answer_bufs)
      rowan_channel_post_recv(s->ch, b.data(), b.size(), on_client_recv, s);
  }
  rowan_channel_send(s->ch, s->control.data(), s->control.size(), nullptr, nullptr);
  const auto start = Clock::now();
  // --omit: the first `omit` seconds run but are not measured (iperf3 -O).
  auto measured_from = start;
  bool measuring = omit <= 0;
  if (rr) rc = run_requests(s, test, duration, msg_len);
  while (!rr && rc >= 0 && seconds_since(start) < omit + duration) {
    if (!measuring && seconds_since(start) >= omit) {
      measuring = true;
      measured_from = Clock::now();
      s->acked_at_omit = s->acked_bytes;
    }
    while (!s->free_bufs.empty()) {
      const size_t i = s->free_bufs.back();
      fill(s->bufs[i].data(), msg_len, test, s->index, s->next_seq);
      rc = rowan_channel_send(s->ch, s->bufs[i].data(), msg_len, on_client_sent, s);
      if (rc == ROWAN_ERR_AGAIN) break;
      if (rc < 0) break;
      s->free_bufs.pop_back();
      ++s->next_seq;
    }
    if (rc < 0 && rc != ROWAN_ERR_AGAIN) break;
    rc = rowan_channel_poll(s->ch, 10);
  }
  if (!rr) s->duration_s = seconds_since(measured_from);
  s->acked_in_time = s->acked_bytes - s->acked_at_omit;
  if (rc >= 0) {
    std::vector<uint8_t> end(16, 0);
    put32(end.data(), kEnd);
    put32(end.data() + 4, s->index);
    put64(end.data() + 8, s->next_seq);
    rc = rowan_channel_send(s->ch, end.data(), end.size(), nullptr, nullptr);
    if (rc >= 0) rc = rowan_channel_flush(s->ch, 60000);
    const auto wait = Clock::now();
    while (rc >= 0 && !s->result_seen && seconds_since(wait) < 30)
      rc = rowan_channel_poll(s->ch, 100);
    if (rc < 0 && !s->result_seen) {
      s->error = rc;
      s->error_text = rowan_last_error();
    }
  } else {
    s->error = rc;
    s->error_text = rowan_last_error();
  }
  rowan_channel_stats_get(s->ch, &s->stats);
  s->paths.resize(rowan_channel_path_count(s->ch));
  for (size_t i = 0; i < s->paths.size(); ++i) rowan_channel_path_stats_get(s->ch, i, &s->paths[i]);
  rowan_channel_close(s->ch);
  s->ch = nullptr;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

nlohmann::ordered_json path_json(const rowan_channel_path_stats& p) {
  return {{"local", p.local},
          {"remote", p.remote},
          {"state", p.up != 0 ? "up" : "down"},
          {"downs", p.downs},
          {"wire_bytes_sent", p.wire_bytes_sent},
          {"wire_bytes_acked", p.wire_bytes_acked},
          {"packets_sent", p.packets_sent},
          {"packets_received", p.packets_received},
          {"lost_packets", p.lost_packets},
          {"retransmitted_packets", p.retransmitted_packets},
          {"min_rtt_s", p.min_rtt_s},
          {"srtt_s", p.srtt_s},
          {"cwnd_bytes", p.cwnd_bytes},
          {"pacing_rate_bps", p.pacing_rate_bps},
          {"bytes_in_flight", p.bytes_in_flight},
          {"rate_bps", p.rate_bps},
          {"rtt_s", p.rtt_s},
          {"fec_repair_packets", p.fec_repair_packets},
          {"fec_repair_bytes", p.fec_repair_bytes}};
}

// Path i over all streams: counters summed, RTTs the lowest min and the mean
// smoothed, cwnd summed, "down" when any stream's copy of the path is down.
nlohmann::ordered_json paths_json(const std::vector<ClientStream>& s, size_t count,
                                  double duration_s) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < count; ++i) {
    rowan_channel_path_stats sum{};
    sum.up = 1;
    size_t n = 0;
    double srtt = 0;
    for (const ClientStream& c : s) {
      if (i >= c.paths.size()) continue;
      const rowan_channel_path_stats& p = c.paths[i];
      if (n++ == 0) {
        std::memcpy(sum.local, p.local, sizeof sum.local);
        std::memcpy(sum.remote, p.remote, sizeof sum.remote);
        sum.rate_bps = p.rate_bps;
        sum.rtt_s = p.rtt_s;
      }
      sum.up = sum.up != 0 && p.up != 0 ? 1 : 0;
      sum.downs += p.downs;
      sum.wire_bytes_sent += p.wire_bytes_sent;
      sum.wire_bytes_acked += p.wire_bytes_acked;
      sum.packets_sent += p.packets_sent;
      sum.packets_received += p.packets_received;
      sum.lost_packets += p.lost_packets;
      sum.retransmitted_packets += p.retransmitted_packets;
      if (p.min_rtt_s > 0 && (sum.min_rtt_s == 0 || p.min_rtt_s < sum.min_rtt_s))
        sum.min_rtt_s = p.min_rtt_s;
      srtt += p.srtt_s;
      sum.cwnd_bytes += p.cwnd_bytes;
      sum.pacing_rate_bps += p.pacing_rate_bps;
      sum.bytes_in_flight += p.bytes_in_flight;
      sum.fec_repair_packets += p.fec_repair_packets;
      sum.fec_repair_bytes += p.fec_repair_bytes;
    }
    if (n == 0) continue;
    sum.srtt_s = srtt / static_cast<double>(n);
    nlohmann::ordered_json j{{"path", i}};
    j.update(path_json(sum));
    // Wire bytes the peer acknowledged on this path (headers and
    // retransmissions included) over the whole run: the omitted seconds and
    // the END exchange count too.
    j["acked_bps"] =
        duration_s > 0 ? static_cast<double>(sum.wire_bytes_acked) * 8 / duration_s : 0.0;
    out.push_back(j);
  }
  return out;
}

int run_client(const std::vector<PathArg>& paths, double duration, double omit, int streams,
               size_t msg_len, bool json, bool rr, const rowan_channel_options& o) {
  uint64_t test = 0;
  while (test == 0) {
    if (getrandom(&test, sizeof test, 0) != sizeof test) test = 0x5EED;
  }
  // Enough messages in flight to cover 4 x the expected BDP (send buffer 2
  // BDP plus the window).
  double rate = 0, rtt = 0;
  for (const PathArg& p : paths) {
    rate += p.rate_bps > 0 ? p.rate_bps : (o.rate_bps > 0 ? o.rate_bps : 1e9);
    rtt = std::max(rtt, p.rtt_s > 0 ? p.rtt_s : (o.rtt_s > 0 ? o.rtt_s : 0.1));
  }
  const auto depth = static_cast<size_t>(
      std::clamp(std::ceil(4 * rate / 8 * rtt / static_cast<double>(msg_len)), 8.0, 2048.0));
  std::vector<ClientStream> s(static_cast<size_t>(streams));
  std::vector<std::thread> threads;
  for (int i = 0; i < streams; ++i) {
    s[static_cast<size_t>(i)].index = static_cast<uint32_t>(i);
    threads.emplace_back(run_stream, &s[static_cast<size_t>(i)], std::cref(paths), o, test,
                         static_cast<uint32_t>(streams), duration, omit, msg_len, rr ? 1 : depth,
                         rr);
  }
  for (auto& t : threads) t.join();

  double bytes = 0, dur = 0, min_rtt = 0, srtt = 0;
  uint64_t sent = 0, retx = 0, server_bytes = 0, server_errors = 0;
  int failures = 0;
  nlohmann::ordered_json per = nlohmann::ordered_json::array();
  for (const ClientStream& c : s) {
    if (c.error != 0) {
      ++failures;
      fmt::print(stderr, "rowan-perf: stream {}: {} ({})\n", c.index, rowan_strerror(c.error),
                 c.error_text);
    }
    bytes += static_cast<double>(c.acked_in_time);
    dur = std::max(dur, c.duration_s);
    sent += c.stats.packets_sent;
    retx += c.stats.retransmitted_packets;
    if (c.stats.min_rtt_s > 0 && (min_rtt == 0 || c.stats.min_rtt_s < min_rtt))
      min_rtt = c.stats.min_rtt_s;
    srtt += c.stats.srtt_s / streams;
    server_bytes += c.server_bytes;
    server_errors += c.server_errors;
    if (!c.result_seen) ++failures;
    nlohmann::ordered_json cp = nlohmann::ordered_json::array();
    for (const rowan_channel_path_stats& p : c.paths) cp.push_back(path_json(p));
    per.push_back({{"stream", c.index},
                   {"goodput_bps", c.duration_s > 0 ? c.acked_in_time * 8 / c.duration_s : 0},
                   {"bytes_acked", c.acked_in_time},
                   {"server_bytes", c.server_bytes},
                   {"server_messages", c.server_messages},
                   {"server_errors", c.server_errors},
                   {"retransmitted_packets", c.stats.retransmitted_packets},
                   {"packets_sent", c.stats.packets_sent},
                   {"lost_packets", c.stats.lost_packets},
                   {"packets_received", c.stats.packets_received},
                   {"cwnd_bytes", c.stats.cwnd_bytes},
                   {"bytes_in_flight", c.stats.bytes_in_flight},
                   {"pacing_rate_bps", c.stats.pacing_rate_bps},
                   {"min_rtt_s", c.stats.min_rtt_s},
                   {"srtt_s", c.stats.srtt_s},
                   {"cc", c.stats.cc},
                   {"paths", cp}});
  }
  const double goodput = dur > 0 ? bytes * 8 / dur : 0;
  const double ratio = sent > 0 ? static_cast<double>(retx) / static_cast<double>(sent) : 0;
  std::vector<double> done;
  for (const ClientStream& c : s)
    done.insert(done.end(), c.completion_s.begin(), c.completion_s.end());
  double mean = 0;
  for (double d : done) mean += d / static_cast<double>(done.size());
  if (json) {
    nlohmann::ordered_json j{{"goodput_bps", goodput},
                             {"duration_s", dur},
                             {"omitted_s", omit},
                             {"retransmit_ratio", ratio},
                             {"min_rtt_s", min_rtt},
                             {"srtt_s", srtt},
                             {"streams", streams},
                             {"message_bytes", msg_len},
                             {"cc", s.empty() ? "" : s[0].stats.cc},
                             {"verified_bytes", server_bytes},
                             {"verify_errors", server_errors},
                             {"failed_streams", failures},
                             {"per_stream", per},
                             {"paths", paths_json(s, paths.size(), dur + omit)}};
    if (rr) {
      j["messages"] = done.size();
      j["rr_mean_s"] = mean;
      j["rr_p50_s"] = quantile(done, 0.50);
      j["rr_p99_s"] = quantile(done, 0.99);
      j["rr_p999_s"] = quantile(done, 0.999);
      j["rr_max_s"] = quantile(done, 1.0);
    }
    std::cout << j.dump() << "\n";
  } else {
    fmt::print(
        "{} stream(s), {:.2f} s: goodput {:.1f} Mbit/s, retransmit {:.4f}, min RTT {:.2f} ms, "
        "SRTT {:.2f} ms, verified {} bytes, {} errors\n",
        streams, dur, goodput / 1e6, ratio, min_rtt * 1e3, srtt * 1e3, server_bytes, server_errors);
    if (paths.size() > 1) {
      for (const auto& p : paths_json(s, paths.size(), dur + omit)) {
        fmt::print(
            "path {} {} -> {}: {}, acked {:.1f} Mbit/s (wire), {} lost, min RTT {:.2f} ms, "
            "SRTT {:.2f} ms, cwnd {} bytes\n",
            p["path"].get<size_t>(), p["local"].get<std::string>(), p["remote"].get<std::string>(),
            p["state"].get<std::string>(), p["acked_bps"].get<double>() / 1e6,
            p["lost_packets"].get<uint64_t>(), p["min_rtt_s"].get<double>() * 1e3,
            p["srtt_s"].get<double>() * 1e3, p["cwnd_bytes"].get<uint64_t>());
      }
    }
    if (rr) {
      fmt::print("{} requests: completion mean {:.2f} ms, p50 {:.2f}, p99 {:.2f}, p99.9 {:.2f}\n",
                 done.size(), mean * 1e3, quantile(done, 0.50) * 1e3, quantile(done, 0.99) * 1e3,
                 quantile(done, 0.999) * 1e3);
    }
  }
  return failures == 0 && server_errors == 0 ? 0 : 1;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (!list.empty()) {
    const size_t comma = list.find(',', start);
    out.push_back(list.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// A comma list of positive numbers (empty: none).
bool numbers(const std::string& list, const char* name, std::vector<double>* out) {
  for (const std::string& v : split(list)) {
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (v.empty() || end == nullptr || *end != '\0' || !(d > 0)) {
      fmt::print(stderr, "rowan-perf: {}: '{}' is not a positive number\n", name, v);
      return false;
    }
    out->push_back(d);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rowan-perf: goodput over librowan's message channel (like iperf3)"};
  app.set_version_flag("--version", std::string("rowan-perf ") + rowan_version());
  bool server = false, one = false, json = false, rr = false;
  std::string host, cc, bind, rate_list, rtt_list;
  int port = 5201, streams = 1, idle_ms = 0;
  double duration = 10, omit = 0;
  size_t msg_len = size_t{128} * 1024;
  app.add_flag("-s,--server", server, "run as server");
  app.add_option("-c,--client", host,
                 "run as client to HOST; HOST1,HOST2,...: one path per host (multipath channel)");
  app.add_option("--bind", bind,
                 "client: local address of each path (LOCAL1,LOCAL2,...; default any)");
  app.add_option("-p,--port", port, "server port")->check(CLI::Range(1, 65535));
  app.add_flag("-1,--one-off", one, "server: exit after one test");
  app.add_option("-t,--time", duration, "seconds to send")->check(CLI::Range(0.1, 3600.0));
  app.add_option("-O,--omit", omit,
                 "client: run this many seconds more first, unmeasured (slow start; iperf3 -O)")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("-P,--parallel", streams, "parallel streams (channels)")->check(CLI::Range(1, 64));
  app.add_option("--cc", cc, "congestion controller (rowan, bbr, cubic, ...)");
  app.add_option("-l,--length", msg_len, "message bytes")
      ->check(CLI::Range(size_t{kHeader}, kMaxMessage));
  app.add_option("--rate", rate_list,
                 "expected path rate in bit/s (sizes buffers), R1,R2,... per path; default 1e9");
  app.add_option("--rtt", rtt_list,
                 "expected RTT in seconds, T1,T2,... per path; default: measured");
  app.add_flag("-J,--json", json, "client: one JSON object on stdout");
  app.add_flag("--rr", rr,
               "client: request-response, one request (-l bytes, default 1 MiB) at a time; "
               "reports completion times");
  app.add_option("--idle-timeout", idle_ms,
                 "ms of silence from the peer before a channel fails (keepalives keep a quiet "
                 "one open); -1: never; default 15000");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitUsage;
  }
  if (server == !host.empty()) {
    fmt::print(stderr, "rowan-perf: give exactly one of -s or -c HOST\n");
    return kExitUsage;
  }
  std::vector<std::string> hosts = split(host), binds = split(bind);
  std::vector<double> rates, rtts;
  if (!numbers(rate_list, "--rate", &rates) || !numbers(rtt_list, "--rtt", &rtts))
    return kExitUsage;
  const size_t n = std::max<size_t>(hosts.size(), 1);
  for (const auto& [list, name] :
       {std::pair{binds.size(), "--bind"}, std::pair{rates.size(), "--rate"},
        std::pair{rtts.size(), "--rtt"}}) {
    if (list > 1 && list != n) {
      fmt::print(stderr, "rowan-perf: {} has {} values for {} path(s): give one, or one per path\n",
                 name, list, n);
      return kExitUsage;
    }
  }
  rowan_channel_options o;
  rowan_channel_options_init(&o);
  if (!cc.empty()) o.cc = cc.c_str();
  // One value for every path: the options' (and the one-path handshake's).
  o.rate_bps = rates.size() == 1 ? rates[0] : 0;
  o.rtt_s = rtts.size() == 1 ? rtts[0] : 0;
  o.idle_timeout_ms = idle_ms;
  if (server) return run_server(port, one, o);
  if (rr && app.count("-l") == 0) msg_len = size_t{1} << 20;
  std::vector<PathArg> paths;
  for (size_t i = 0; i < hosts.size(); ++i) {
    PathArg p;
    const std::string& h = hosts[i];
    p.remote = (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port);
    if (binds.size() == 1) p.local = binds[0];
    if (binds.size() > 1) p.local = binds[i];
    if (rates.size() > 1) p.rate_bps = rates[i];
    if (rtts.size() > 1) p.rtt_s = rtts[i];
    paths.push_back(p);
  }
  if (paths.size() > ROWAN_MAX_CHANNEL_PATHS) {
    fmt::print(stderr, "rowan-perf: at most {} paths\n", ROWAN_MAX_CHANNEL_PATHS);
    return kExitUsage;
  }
  if (rr && omit > 0) {
    fmt::print(stderr, "rowan-perf: --omit applies to goodput tests, not --rr\n");
    return kExitUsage;
  }
  return run_client(paths, duration, omit, streams, msg_len, json, rr, o);
}
