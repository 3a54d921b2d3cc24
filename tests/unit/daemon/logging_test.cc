// rowand's log: journald priorities by level, the journal format (priority
// prefix, no timestamp) against the plain one, JOURNAL_STREAM matched against
// stderr, and DPDK's rte_log lines arriving in spdlog at their levels.
#include <gtest/gtest.h>
#include <rte_log.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "control/logging.h"

namespace rowan::gw {
namespace {

// The default logger writes into `out` for the test's lifetime.
class CaptureLog {
 public:
  CaptureLog() {
    saved_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~CaptureLog() { spdlog::set_default_logger(saved_); }
  CaptureLog(const CaptureLog&) = delete;
  CaptureLog& operator=(const CaptureLog&) = delete;
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> saved_;
};

TEST(Logging, PrioritiesAndLevels) {
  EXPECT_EQ(syslog_priority(spdlog::level::debug), 7);
  EXPECT_EQ(syslog_priority(spdlog::level::info), 6);
  EXPECT_EQ(syslog_priority(spdlog::level::warn), 4);
  EXPECT_EQ(syslog_priority(spdlog::level::err), 3);
  EXPECT_EQ(syslog_priority(spdlog::level::critical), 2);
  EXPECT_EQ(level_of_rte(RTE_LOG_EMERG), spdlog::level::critical);
  EXPECT_EQ(level_of_rte(RTE_LOG_ERR), spdlog::level::err);
  EXPECT_EQ(level_of_rte(RTE_LOG_WARNING), spdlog::level::warn);
  EXPECT_EQ(level_of_rte(RTE_LOG_NOTICE), spdlog::level::info);
  EXPECT_EQ(level_of_rte(RTE_LOG_INFO), spdlog::level::info);
  EXPECT_EQ(level_of_rte(RTE_LOG_DEBUG), spdlog::level::debug);
}

TEST(Logging, JournalLinesStartWithTheirPriority) {
  const CaptureLog log;
  set_log_format(true);
  spdlog::warn("peer b: down");
  spdlog::error("broken");
  spdlog::info("fine");
  EXPECT_EQ(log.text(), "<4>peer b: down\n<3>broken\n<6>fine\n");
}

TEST(Logging, PlainLinesCarryTimeAndLevel) {
  const CaptureLog log;
  set_log_format(false);
  spdlog::warn("peer b: down");
  const std::string t = log.text();
  EXPECT_EQ(t.front(), '[');
  EXPECT_NE(t.find("] [warning] peer b: down\n"), std::string::npos) << t;
}

TEST(Logging, JournalStreamMustBeStderr) {
  struct stat st {};
  ASSERT_EQ(fstat(2, &st), 0);
  const std::string mine = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const char* saved = std::getenv("JOURNAL_STREAM");
  const std::string keep = saved != nullptr ? saved : "";
  setenv("JOURNAL_STREAM", mine.c_str(), 1);
  EXPECT_TRUE(stderr_is_journal());
  setenv("JOURNAL_STREAM", (std::to_string(st.st_dev) + ":1").c_str(), 1);
  EXPECT_EQ(stderr_is_journal(), st.st_ino == 1);
  setenv("JOURNAL_STREAM", "junk", 1);
  EXPECT_FALSE(stderr_is_journal());
  unsetenv("JOURNAL_STREAM");
  EXPECT_FALSE(stderr_is_journal());
  if (saved != nullptr) setenv("JOURNAL_STREAM", keep.c_str(), 1);
}

TEST(Logging, DpdkLinesArriveAtTheirLevels) {
  const CaptureLog log;
  set_log_format(true);
  route_dpdk_log();
  rte_log(RTE_LOG_WARNING, RTE_LOGTYPE_EAL, "EAL: no hugepages\n");
  rte_log(RTE_LOG_ERR, RTE_LOGTYPE_EAL, "EAL: first part ");
  rte_log(RTE_LOG_ERR, RTE_LOGTYPE_EAL, "and the rest\n");
  rte_log(RTE_LOG_INFO, RTE_LOGTYPE_EAL, "two\nlines\n");
  EXPECT_EQ(log.text(),
            "<4>dpdk: EAL: no hugepages\n<3>dpdk: EAL: first part and the rest\n"
            "<6>dpdk: two\n<6>dpdk: lines\n");
  rte_openlog_stream(nullptr);  // back to DPDK's default for the other tests
}

}  // namespace
}  // namespace rowan::gw
