#include "harness/trace/record.h"

#include <charconv>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace lockstep::trace {
namespace {

using Json = nlohmann::ordered_json;

// The writer runs once per call on the monitor's hot path (bench/comm_bench.cpp): plain
// appends, and nlohmann only for strings that need escaping.
class LineWriter {
 public:
  explicit LineWriter(std::string& out) : out_(out) { out_ += '{'; }
  void end() { out_ += "}\n"; }

  void key(std::string_view k) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_ += k;
    out_ += "\":";
  }
  void number(std::int64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
  }
  void string(std::string_view s) {
    for (const char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
        out_ += Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
        return;
      }
    }
    out_ += '"';
    out_ += s;
    out_ += '"';
  }
  void numbers(const std::vector<std::int64_t>& v) {
    out_ += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out_ += ',';
      number(v[i]);
    }
    out_ += ']';
  }

  template <class T>
  void field(std::string_view k, const std::optional<T>& v) {
    if (!v) return;
    key(k);
    if constexpr (std::is_same_v<T, std::string>) {
      string(*v);
    } else if constexpr (std::is_same_v<T, bool>) {
      out_ += *v ? "true" : "false";
    } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
      numbers(*v);
    } else {
      number(static_cast<std::int64_t>(*v));
    }
  }
  // A key this version does not know, with its value's JSON text as it was read.
  void raw(std::string_view k, std::string_view json_text) {
    if (!first_) out_ += ',';
    first_ = false;
    string(k);
    out_ += ':';
    out_ += json_text;
  }

 private:
  std::string& out_;
  bool first_ = true;
};

// Reads `j` into `*out`; false when its type is not T's.
template <class T>
bool read(const Json& j, std::optional<T>* out) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) return false;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) return false;
  } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
    if (!j.is_array()) return false;
    for (const auto& e : j) {
      if (!e.is_number_integer()) return false;
    }
  } else {
    if (!j.is_number_integer()) return false;
  }
  *out = j.get<T>();
  return true;
}

// Calls f(key, member pointer) for every known key but "v", in the writer's order.
template <class F>
void for_each_field(F&& f) {
  f(key::kRank, &Record::rank);
  f(key::kSeq, &Record::seq);
  f(key::kKind, &Record::kind);
  f(key::kOp, &Record::op);
  f(key::kDtype, &Record::dtype);
  f(key::kCount, &Record::count);
  f(key::kDevice, &Record::device);
  f(key::kBytes, &Record::bytes);
  f(key::kReduce, &Record::reduce);
  for (int i = 0; i < kCallFieldCount; ++i) f(kCallFieldKeys[i], kCallFieldMembers[i]);
  f(key::kSendCounts, &Record::send_counts);
  f(key::kRecvCounts, &Record::recv_counts);
  f(key::kWire, &Record::wire);
  f(key::kGroup, &Record::group);
  f(key::kPhase, &Record::phase);
  f(key::kStep, &Record::step);
  f(key::kIndex, &Record::index);
  f(key::kTStartUs, &Record::t_start_us);
  f(key::kTEndUs, &Record::t_end_us);
  f(key::kError, &Record::error);
  f(key::kFlightRecorder, &Record::flight_recorder);
  f(key::kSource, &Record::source);
  f(key::kCommHash, &Record::comm_hash);
  f(key::kNcclFunc, &Record::nccl_func);
  f(key::kNcclDtype, &Record::nccl_dtype);
  f(key::kNcclSeq, &Record::nccl_seq);
  f(key::kAlgo, &Record::algo);
  f(key::kProto, &Record::proto);
}

}  // namespace

void append_line(std::string& out, const Record& record) {
  LineWriter w(out);
  if (record.v != 0) {
    w.key(key::kVersion);
    w.number(record.v);
  }
  for_each_field([&](std::string_view k, auto member) { w.field(k, record.*member); });
  for (const auto& [k, text] : record.unknown) w.raw(k, text);
  w.end();
}

std::string to_line(const Record& record) {
  std::string out;
  out.reserve(384);
  append_line(out, record);
  return out;
}

std::optional<Record> parse_line(std::string_view line, std::string* why) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  const Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    if (why) *why = j.is_discarded() ? "not JSON" : "not a JSON object";
    return std::nullopt;
  }
  Record r;
  r.v = 0;
  for (const auto& [k, value] : j.items()) {
    if (k == key::kVersion) {
      if (!value.is_number_integer()) {
        if (why) *why = "\"v\" is not an integer";
        return std::nullopt;
      }
      r.v = value.get<int>();
      continue;
    }
    bool known = false, ok = true;
    for_each_field([&](std::string_view name, auto member) {
      if (known || name != k) return;
      known = true;
      ok = read(value, &(r.*member));
    });
    if (!ok) {
      if (why) *why = "\"" + k + "\" has the wrong type: " + value.dump(-1, ' ', false, Json::error_handler_t::replace);
      return std::nullopt;
    }
    if (!known) r.unknown.emplace_back(k, value.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  return r;
}

}  // namespace lockstep::trace
