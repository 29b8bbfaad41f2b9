#include "harness/comm/types.h"

#include <array>
#include <sstream>

namespace lockstep::comm {
namespace {

constexpr std::array<std::string_view, 8> kDTypeNames = {"f32", "f64", "f16", "bf16",
                                                         "i8",  "u8",  "i32", "i64"};
constexpr std::array<std::size_t, 8> kDTypeSizes = {4, 8, 2, 2, 1, 1, 4, 8};
constexpr std::array<std::string_view, 8> kReduceNames = {"sum", "max", "min", "avg", "product", "band", "bor", "bxor"};
// The ops, in Op's order: name, data, reduces, rooted, splits, p2p.
constexpr std::array<OpTraits, kOpCount> kOps = {{
    {"all_reduce", true, true, false, false, false},
    {"all_gather", true, false, false, false, false},
    {"all_to_all", true, false, false, true, false},
    {"broadcast", true, false, true, false, false},
    {"barrier", false, false, false, false, false},
    {"send", true, false, false, false, true},
    {"recv", true, false, false, false, true},
    {"reduce_scatter", true, true, false, false, false},
    {"reduce", true, true, true, false, false},
    {"gather", true, false, true, false, false},
    {"scatter", true, false, true, false, false},
}};

template <typename E, std::size_t N>
std::optional<E> lookup(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string_view to_string(DType dtype) { return kDTypeNames[static_cast<std::size_t>(dtype)]; }
std::string_view to_string(ReduceOp op) { return kReduceNames[static_cast<std::size_t>(op)]; }
const OpTraits& traits(Op op) { return kOps[static_cast<std::size_t>(op)]; }
std::string_view to_string(Op op) { return traits(op).name; }
std::string_view to_string(DeviceType device) {
  return device == DeviceType::kCpu ? "cpu" : "cuda";
}
std::optional<DType> dtype_from_string(std::string_view name) {
  return lookup<DType>(kDTypeNames, name);
}
std::optional<ReduceOp> reduce_op_from_string(std::string_view name) {
  return lookup<ReduceOp>(kReduceNames, name);
}
std::optional<Op> op_from_string(std::string_view name) {
  for (std::size_t i = 0; i < kOps.size(); ++i) {
    if (kOps[i].name == name) return static_cast<Op>(i);
  }
  return std::nullopt;
}
std::size_t element_size(DType dtype) { return kDTypeSizes[static_cast<std::size_t>(dtype)]; }

const std::array<CallField, kCallFieldCount>& call_fields() {
  static const std::array<CallField, kCallFieldCount> rows = [] {
    std::array<CallField, kCallFieldCount> r = {{
#define LOCKSTEP_CALL_ROW(name, label, when, none, kind) \
  {#name, label, none, CallFieldKind::kind, [](const OpTraits& t) { return static_cast<bool>(when); }, &Call::name, 0},
        LOCKSTEP_CALL_FIELDS(LOCKSTEP_CALL_ROW)
#undef LOCKSTEP_CALL_ROW
    }};
    for (int i = 0; i < kCallFieldCount; ++i) r[static_cast<std::size_t>(i)].index = i;
    return r;
  }();
  return rows;
}

Fingerprint fingerprint_of(const Call& call) {
  Fingerprint fp;
  fp.op = call.op;
  const OpTraits& t = traits(call.op);
  fp.dtype = t.data ? call.in.dtype : DType::kU8;
  fp.device = t.data ? call.in.device : DeviceType::kCpu;
  fp.reduce = t.reduces ? call.reduce : ReduceOp::kSum;
  fp.count = (!t.data || t.splits) ? 0 : call.in.count;
  for (std::size_t i = 0; i < fp.fields.size(); ++i) fp.fields[i] = call_fields()[i].of(call);
  if (t.splits) {
    std::uint64_t h = 1469598103934665603ull;
    for (auto c : call.send_counts) h = (h ^ static_cast<std::uint64_t>(c)) * 1099511628211ull;
    fp.splits_hash = h;
  }
  fp.seq = call.seq;
  fp.step = call.site.step;
  fp.index = call.site.index;
  fp.phase_hash = fnv1a(call.site.phase);
  return fp;
}

std::string describe(const Call& call) {
  std::ostringstream os;
  const OpTraits& t = traits(call.op);
  os << t.name;
  if (!t.data) return os.str();
  os << ' ' << to_string(call.in.dtype) << '[' << call.in.count << ']';
  if (call.in.device != DeviceType::kCpu) os << '@' << to_string(call.in.device);
  if (t.reduces) os << ' ' << to_string(call.reduce);
  for (const CallField& f : call_fields()) {
    if (f.shown(call.op, call.*f.member)) os << ' ' << f.name << '=' << call.*f.member;
  }
  if (t.splits) {
    os << " send=[";
    for (std::size_t i = 0; i < call.send_counts.size(); ++i) os << (i ? "," : "") << call.send_counts[i];
    os << "] recv=[";
    for (std::size_t i = 0; i < call.recv_counts.size(); ++i) os << (i ? "," : "") << call.recv_counts[i];
    os << ']';
  }
  return os.str();
}

std::string describe(const Fingerprint& fp) {
  std::ostringstream os;
  const OpTraits& t = traits(fp.op);
  os << t.name;
  if (!t.data) return os.str();
  os << ' ' << to_string(fp.dtype);
  if (!t.splits) os << '[' << fp.count << ']';
  if (fp.device != DeviceType::kCpu) os << '@' << to_string(fp.device);
  if (t.reduces) os << ' ' << to_string(fp.reduce);
  for (std::size_t i = 0; i < fp.fields.size(); ++i) {
    if (call_fields()[i].shown(fp.op, fp.fields[i])) os << ' ' << call_fields()[i].name << '=' << fp.fields[i];
  }
  return os.str();
}

}  // namespace lockstep::comm
