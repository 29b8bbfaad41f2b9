#pragma once
// Errors thrown inside lockstep. `main` is the one place that catches them and maps them
// to exit codes: InputError -> 2 (bad scenario, flag or value), anything else -> 1 or 3.
#include <sstream>
#include <stdexcept>
#include <string>

namespace lockstep {

// A problem with what the user gave us: a scenario file, a flag, a value. Exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An internal failure or a failing C API call. Carries file:line of the throw site.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace lockstep

// LOCKSTEP_CHECK(cond, parts...): throws lockstep::Error("file:line: parts...") unless cond.
#define LOCKSTEP_CHECK(cond, ...)                                                         \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      ::lockstep::detail::throw_error(__FILE__, __LINE__,                                 \
                                      ::lockstep::detail::concat(__VA_ARGS__));           \
    }                                                                                     \
  } while (0)

// LOCKSTEP_INPUT_CHECK(cond, parts...): throws lockstep::InputError(parts...) unless cond.
// Use for user input; the message itself must name the file:line or the offending value.
#define LOCKSTEP_INPUT_CHECK(cond, ...)                                                   \
  do {                                                                                    \
    if (!(cond)) throw ::lockstep::InputError(::lockstep::detail::concat(__VA_ARGS__));   \
  } while (0)
