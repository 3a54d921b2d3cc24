// Self-registration of congestion-control algorithms by name (Envoy
// REGISTER_FACTORY, DPDK RTE_INIT). Each algorithm's .cc file says
//   ROWAN_REGISTER_CC("cubic", &make_cubic);
// The algorithms are linked as an OBJECT library so the registrations are kept.
// A duplicate name aborts at start-up.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "congestion_controller.h"

namespace rowan::cc {

/// The algorithm rowand and rowan-sim use when none is named: the flagship.
inline constexpr std::string_view kDefaultAlgorithm = "rowan";

class Registry {
 public:
  /// Called from static initializers only. Aborts on a duplicate name.
  static void add(std::string_view name, ControllerFactory factory);
  /// nullptr when unknown.
  static ControllerFactory find(std::string_view name);
  static std::vector<std::string> names();
  /// Builds `name`; throws CcParamError for an unknown name or bad parameters.
  static ControllerPtr create(std::string_view name, const Clock& clock, const PathHints& hints,
                              const CcParams& params);
};

struct Registrar {
  Registrar(std::string_view name, ControllerFactory factory) { Registry::add(name, factory); }
};

}  // namespace rowan::cc

#define ROWAN_CC_CONCAT_(a, b) a##b
#define ROWAN_CC_CONCAT(a, b) ROWAN_CC_CONCAT_(a, b)
#define ROWAN_REGISTER_CC(name, factory) \
  static const ::rowan::cc::Registrar ROWAN_CC_CONCAT(rowan_cc_registrar_, __LINE__)(name, factory)
