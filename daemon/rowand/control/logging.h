// rowand's log: spdlog for rowand's own lines, DPDK's rte_log routed into it,
// and a line format that suits where stderr goes.
//
// Under systemd stderr is a journal stream (systemd sets JOURNAL_STREAM to
// its device:inode): each line then starts with its syslog priority, "<3>" for
// an error, which journald reads as the entry's PRIORITY (sd-daemon(3)), and
// carries no timestamp (the journal adds its own). Elsewhere lines read
// "[2026-01-02 03:04:05.678] [warning] text".
//
// Threading: set up once on the main thread before the EAL starts; spdlog's
// default logger is thread-safe after that.
#pragma once

#include <spdlog/common.h>

#include <string>

namespace rowan::gw {

/// True when stderr is the journal stream systemd gave this process.
bool stderr_is_journal();

/// The syslog priority (0 emerg .. 7 debug) of an spdlog level.
int syslog_priority(spdlog::level::level_enum level);

/// The spdlog level of a DPDK log level (RTE_LOG_EMERG=1 .. RTE_LOG_DEBUG=8).
spdlog::level::level_enum level_of_rte(unsigned rte_level);

/// Makes the default logger write to stderr (spdlog's default is stdout),
/// where diagnostics belong and where JOURNAL_STREAM is checked.
void log_to_stderr();

/// Sets the default logger's format: journal (priority prefix, no time) or plain.
void set_log_format(bool journal);

/// Sends DPDK's log (rte_openlog_stream) through spdlog, one spdlog line per
/// DPDK line, at the level DPDK gave it, prefixed "dpdk: ". Call before
/// rte_eal_init so the EAL's own start-up lines follow it. Throws
/// std::runtime_error when the stream cannot be made.
void route_dpdk_log();

}  // namespace rowan::gw
