// Rule 3's reading of the line that says why a rank failed (watch.h): every number read as any
// number, so that ranks that failed the same way compare equal.
#include <cctype>
#include <regex>
#include <string>

#include "harness/launch/watch.h"

namespace lockstep::launch {

std::string failure_words(const std::string& why) {
  std::string out;
  out.reserve(why.size());
  for (std::size_t i = 0; i < why.size();) {
    if (std::isdigit(static_cast<unsigned char>(why[i]))) {
      out += '#';
      while (i < why.size() && std::isdigit(static_cast<unsigned char>(why[i]))) ++i;
    } else {
      out += why[i++];
    }
  }
  return out;
}

bool raised_line(const std::string& line) {
  // A dotted name ending in Error, Exception, Interrupt or Exit, alone or before ": ".
  static const std::regex kRaised(R"(^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Interrupt|Exit)(: .*)?$)");
  return line.size() < 4096 && std::regex_match(line, kRaised);
}

}  // namespace lockstep::launch
