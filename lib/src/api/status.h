// The C API's error detail: a rowan_* call that fails records why in the
// calling thread's string (rowan_last_error()); one that succeeds clears it.
// Shared by the C shim (rowan.cc) and the parts behind it that report their
// own failures (the telemetry client, telemetry.cc, also on its subscription
// thread before it calls the application's callback).
#pragma once

#include <string>
#include <utility>

#include "../../include/rowan/rowan.h"

namespace rowan::api {

inline thread_local std::string t_last_error;

/// Records `detail` for rowan_last_error() and returns `status`.
inline int fail(int status, std::string detail) {
  t_last_error = std::move(detail);
  return status;
}

/// Clears the detail and returns ROWAN_OK.
inline int ok() {
  t_last_error.clear();
  return ROWAN_OK;
}

}  // namespace rowan::api
