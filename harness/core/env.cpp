#include "harness/core/env.h"

#include <cstdlib>

#include "harness/core/error.h"

namespace lockstep::env {

std::string str(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

int integer(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  LOCKSTEP_INPUT_CHECK(end && *end == '\0', "environment variable ", name, " must be an integer, got '", v, "'");
  return static_cast<int>(x);
}

double seconds(const char* name, double fallback) {
  const std::string v = str(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  return end && *end == '\0' && x > 0 ? x : fallback;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::string assign(const char* name, const std::string& value) { return std::string(name) + "=" + value; }

}  // namespace lockstep::env
