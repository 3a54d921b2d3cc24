#include "control/logging.h"

#include <rte_log.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace rowan::gw {
namespace {

// "%*": the line's syslog priority as journald reads it, "<N>".
class PriorityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*tm*/,
              spdlog::memory_buf_t& dest) override {
    const char text[4] = {'<', static_cast<char>('0' + syslog_priority(msg.level)), '>', '\0'};
    dest.append(text, text + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PriorityFlag>();
  }
};

// The DPDK stream: collects what rte_log writes and logs each complete line.
// rte_log writes one message per call; a message may lack its newline, so a
// partial line waits for the rest (or for close).
struct DpdkStream {
  std::string pending;
  void flush_lines() {
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (!line.empty()) {
        spdlog::log(level_of_rte(static_cast<unsigned>(rte_log_cur_msg_loglevel())), "dpdk: {}",
                    line);
      }
    }
  }
};

ssize_t dpdk_write(void* cookie, const char* buf, size_t size) {
  auto* s = static_cast<DpdkStream*>(cookie);
  s->pending.append(buf, size);
  s->flush_lines();
  return static_cast<ssize_t>(size);
}

int dpdk_close(void* cookie) {
  auto* s = static_cast<DpdkStream*>(cookie);
  s->pending += '\n';
  s->flush_lines();
  delete s;
  return 0;
}

}  // namespace

bool stderr_is_journal() {
  const char* js = std::getenv("JOURNAL_STREAM");
  if (js == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (::fstat(2, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

int syslog_priority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;  // LOG_DEBUG
    case spdlog::level::info:
      return 6;  // LOG_INFO
    case spdlog::level::warn:
      return 4;  // LOG_WARNING
    case spdlog::level::err:
      return 3;  // LOG_ERR
    case spdlog::level::critical:
      return 2;  // LOG_CRIT
    default:
      return 6;
  }
}

spdlog::level::level_enum level_of_rte(unsigned rte_level) {
  if (rte_level <= RTE_LOG_CRIT) return spdlog::level::critical;  // EMERG, ALERT, CRIT
  if (rte_level == RTE_LOG_ERR) return spdlog::level::err;
  if (rte_level == RTE_LOG_WARNING) return spdlog::level::warn;
  if (rte_level <= RTE_LOG_INFO) return spdlog::level::info;  // NOTICE, INFO
  return spdlog::level::debug;
}

void log_to_stderr() {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("rowand", std::move(sink));
  logger->set_level(spdlog::get_level());
  spdlog::set_default_logger(std::move(logger));
}

void set_log_format(bool journal) {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  if (journal) {
    f->add_flag<PriorityFlag>('*').set_pattern("%*%v");
  } else {
    f->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  }
  spdlog::set_formatter(std::move(f));
}

void route_dpdk_log() {
  cookie_io_functions_t io{};
  io.write = dpdk_write;
  io.close = dpdk_close;
  auto* s = new DpdkStream;
  FILE* f = fopencookie(s, "w", io);
  if (f == nullptr) {
    delete s;
    throw std::runtime_error("cannot make a stream for DPDK's log");
  }
  setvbuf(f, nullptr, _IONBF, 0);  // each rte_log call reaches dpdk_write at once
  if (rte_openlog_stream(f) != 0) {
    fclose(f);
    throw std::runtime_error("rte_openlog_stream failed");
  }
}

}  // namespace rowan::gw
