#include "registry.h"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace rowan::cc {
namespace {

std::map<std::string, ControllerFactory, std::less<>>& table() {
  static std::map<std::string, ControllerFactory, std::less<>> t;  // built before first use
  return t;
}

}  // namespace

void Registry::add(std::string_view name, ControllerFactory factory) {
  auto [it, inserted] = table().emplace(std::string(name), factory);
  (void)it;
  if (!inserted) {
    std::fprintf(stderr, "rowan: congestion control '%.*s' registered twice\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
}

ControllerFactory Registry::find(std::string_view name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second;
}

std::vector<std::string> Registry::names() {
  std::vector<std::string> out;
  for (const auto& [name, f] : table()) out.push_back(name);
  return out;
}

ControllerPtr Registry::create(std::string_view name, const Clock& clock, const PathHints& hints,
                               const CcParams& params) {
  ControllerFactory f = find(name);
  if (f == nullptr) {
    std::string known;
    for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw CcParamError("unknown congestion control '" + std::string(name) + "' (known: " + known +
                       ")");
  }
  ControllerPtr cc = f(clock, hints, params);
  params.reject_unknown(std::string(name));
  return cc;
}

}  // namespace rowan::cc
