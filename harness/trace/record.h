#pragma once
// The per-rank trace record: one JSON object per line of rank<r>.trace.jsonl (scenarios/README.md,
// "The trace"). Its keys, its line writer and its parser live here and nowhere else; the monitor,
// the launcher's flight-recorder merge and the NCCL profiler plugin write records, the Chrome
// trace and the golden sequences read them. Torch-free and CUDA-free (linked into the plugin).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/trace/call_fields.h"

namespace lockstep::trace {

// The format version written in `"v"`. Lines without it were written before versioning
// (format 0) and have the same keys; readers accept both and ignore keys they do not know.
inline constexpr int kVersion = 1;

// Every key of the format, named once.
namespace key {
inline constexpr std::string_view kVersion = "v";
inline constexpr std::string_view kRank = "rank";
inline constexpr std::string_view kSeq = "seq";
inline constexpr std::string_view kKind = "kind";
inline constexpr std::string_view kOp = "op";
inline constexpr std::string_view kDtype = "dtype";
inline constexpr std::string_view kCount = "count";
inline constexpr std::string_view kDevice = "device";
inline constexpr std::string_view kBytes = "bytes";
inline constexpr std::string_view kReduce = "reduce";
// then the call-field table's rows (call_fields.h), each keyed by its name
inline constexpr std::string_view kSendCounts = "send_counts";
inline constexpr std::string_view kRecvCounts = "recv_counts";
inline constexpr std::string_view kWire = "wire";
inline constexpr std::string_view kGroup = "group";
inline constexpr std::string_view kPhase = "phase";
inline constexpr std::string_view kStep = "step";
inline constexpr std::string_view kIndex = "index";
inline constexpr std::string_view kTStartUs = "t_start_us";
inline constexpr std::string_view kTEndUs = "t_end_us";
inline constexpr std::string_view kError = "error";
inline constexpr std::string_view kFlightRecorder = "flight_recorder";
// Written by the NCCL profiler plugin only (harness/nccl_profiler/README.md).
inline constexpr std::string_view kSource = "source";
inline constexpr std::string_view kCommHash = "comm_hash";
inline constexpr std::string_view kNcclFunc = "nccl_func";
inline constexpr std::string_view kNcclDtype = "nccl_dtype";
inline constexpr std::string_view kNcclSeq = "nccl_seq";
inline constexpr std::string_view kAlgo = "algo";
inline constexpr std::string_view kProto = "proto";
}  // namespace key

// Values of `kind`.
inline constexpr std::string_view kCollective = "collective";
inline constexpr std::string_view kP2p = "p2p";

// One call. Every key is optional: a field is written when it is set and is set when the line
// has it, so write -> parse gives back the same record.
struct Record {
  int v = kVersion;  // 0: read from a line without "v"; the writer then omits it
  std::optional<int> rank;
  std::optional<std::int64_t> seq;  // collectives and p2p are numbered apart, from 0
  std::optional<std::string> kind;  // kCollective or kP2p
  std::optional<std::string> op;
  std::optional<std::string> dtype;  // none for barrier
  std::optional<std::int64_t> count;
  std::optional<std::string> device;
  std::optional<std::int64_t> bytes;
  std::optional<std::string> reduce;
  // The call-field table's rows (call_fields.h): root, peer, tag, ...
#define LOCKSTEP_RECORD_MEMBER(name, label, when, none, kind) std::optional<std::int64_t> name;
  LOCKSTEP_CALL_FIELDS(LOCKSTEP_RECORD_MEMBER)
#undef LOCKSTEP_RECORD_MEMBER
  std::optional<std::vector<std::int64_t>> send_counts, recv_counts;
  std::optional<std::string> wire;
  std::optional<std::vector<std::int64_t>> group;  // a program's group other than the default: its ranks
  std::optional<std::string> phase;
  std::optional<std::int64_t> step, index;
  std::optional<std::int64_t> t_start_us, t_end_us;  // system clock, µs since the Unix epoch
  std::optional<std::string> error;                  // the call failed or never completed
  std::optional<bool> flight_recorder;               // appended by the launcher from the board
  std::optional<std::string> source, comm_hash, nccl_func, nccl_dtype;
  std::optional<std::int64_t> nccl_seq;
  std::optional<std::string> algo, proto;
  // Keys this version does not know, in line order: (key, the value's JSON text).
  std::vector<std::pair<std::string, std::string>> unknown;

  bool operator==(const Record&) const = default;
};

// The members of the call-field table's rows, in the table's order, and their keys.
inline constexpr std::optional<std::int64_t> Record::*kCallFieldMembers[] = {
#define LOCKSTEP_RECORD_ROW(name, label, when, none, kind) &Record::name,
    LOCKSTEP_CALL_FIELDS(LOCKSTEP_RECORD_ROW)
#undef LOCKSTEP_RECORD_ROW
};
inline constexpr std::string_view kCallFieldKeys[] = {
#define LOCKSTEP_RECORD_KEY(name, label, when, none, kind) #name,
    LOCKSTEP_CALL_FIELDS(LOCKSTEP_RECORD_KEY)
#undef LOCKSTEP_RECORD_KEY
};

// Appends `record` as one line (a JSON object and '\n') to `out`. Keys in the order of Record's
// fields, "v" first, unknown keys last. Strings are escaped as JSON (invalid UTF-8 replaced).
void append_line(std::string& out, const Record& record);
// The line of `record`, '\n' included.
std::string to_line(const Record& record);

// The record of one line (trailing "\r\n" ignored). Returns nullopt, with the reason in `why`
// when given, for a line that is not a JSON object or has a known key with a value of the wrong
// type (a torn last line, say). Never throws.
std::optional<Record> parse_line(std::string_view line, std::string* why = nullptr);

}  // namespace lockstep::trace
