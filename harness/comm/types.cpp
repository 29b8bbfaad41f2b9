#include "harness/comm/types.h"

#include <array>
#include <sstream>

namespace lockstep::comm {
namespace {

constexpr std::array<std::string_view, 8> kDTypeNames = {"f32", "f64", "f16", "bf16",
                                                         "i8",  "u8",  "i32", "i64"};
constexpr std::array<std::size_t, 8> kDTypeSizes = {4, 8, 2, 2, 1, 1, 4, 8};
constexpr std::array<std::string_view, 4> kReduceNames = {"sum", "max", "min", "avg"};
constexpr std::array<std::string_view, 7> kOpNames = {"all_reduce", "all_gather", "all_to_all",
                                                      "broadcast",  "barrier",    "send",
                                                      "recv"};

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
std::string_view to_string(Op op) { return kOpNames[static_cast<std::size_t>(op)]; }
std::string_view to_string(DeviceType device) {
  return device == DeviceType::kCpu ? "cpu" : "cuda";
}
std::optional<DType> dtype_from_string(std::string_view name) {
  return lookup<DType>(kDTypeNames, name);
}
std::optional<ReduceOp> reduce_op_from_string(std::string_view name) {
  return lookup<ReduceOp>(kReduceNames, name);
}
std::optional<Op> op_from_string(std::string_view name) { return lookup<Op>(kOpNames, name); }
std::size_t element_size(DType dtype) { return kDTypeSizes[static_cast<std::size_t>(dtype)]; }

Fingerprint fingerprint_of(const Call& call) {
  Fingerprint fp;
  fp.op = call.op;
  fp.dtype = call.op == Op::kBarrier ? DType::kU8 : call.in.dtype;
  fp.device = call.op == Op::kBarrier ? DeviceType::kCpu : call.in.device;
  fp.reduce = call.op == Op::kAllReduce ? call.reduce : ReduceOp::kSum;
  fp.count = (call.op == Op::kBarrier || call.op == Op::kAllToAll) ? 0 : call.in.count;
  fp.root = call.op == Op::kBroadcast ? call.root : -1;
  if (call.op == Op::kAllToAll) {
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
  os << to_string(call.op);
  if (call.op == Op::kBarrier) return os.str();
  os << ' ' << to_string(call.in.dtype) << '[' << call.in.count << ']';
  if (call.in.device != DeviceType::kCpu) os << '@' << to_string(call.in.device);
  if (call.op == Op::kAllReduce) os << ' ' << to_string(call.reduce);
  if (call.op == Op::kBroadcast) os << " root=" << call.root;
  if (call.op == Op::kSend || call.op == Op::kRecv) os << " peer=" << call.root << " tag=" << call.tag;
  if (call.op == Op::kAllToAll) {
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
  os << to_string(fp.op);
  if (fp.op == Op::kBarrier) return os.str();
  os << ' ' << to_string(fp.dtype);
  if (fp.op != Op::kAllToAll) os << '[' << fp.count << ']';
  if (fp.device != DeviceType::kCpu) os << '@' << to_string(fp.device);
  if (fp.op == Op::kAllReduce) os << ' ' << to_string(fp.reduce);
  if (fp.op == Op::kBroadcast) os << " root=" << fp.root;
  return os.str();
}

}  // namespace lockstep::comm
