// Rule 3's reading of the line that says why a rank failed (watch.h): every number read as any
// number, so that ranks that failed the same way compare equal.
#include <cctype>
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

}  // namespace lockstep::launch
