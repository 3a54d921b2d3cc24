// Running shell commands from tests: exit status and stdout.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace rowan::test {

struct ShellResult {
  int status = -1;  ///< exit status, -1 if killed by a signal or not run
  std::string out;  ///< stdout (stderr passes through)
};

inline ShellResult shell(const std::string& cmd) {
  ShellResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline bool have_tool(const std::string& tool) {
  return shell("command -v " + tool + " >/dev/null").status == 0;
}

}  // namespace rowan::test
