#include "test_cc.h"

#include "registry.h"

namespace {
rowan::cc::ControllerPtr make_fixed(const rowan::Clock& clock, const rowan::cc::PathHints& hints,
                                    const rowan::cc::CcParams& params) {
  return std::make_unique<rowan::test::FixedCc>(clock, hints, params);
}
}  // namespace

ROWAN_REGISTER_CC("test-fixed", &make_fixed);
