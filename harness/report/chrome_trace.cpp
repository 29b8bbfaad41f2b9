#include "harness/report/chrome_trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <tuple>

#include "harness/core/error.h"
#include "harness/core/fs.h"
#include "harness/trace/record.h"

namespace lockstep::report {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The record keys that become the event's tid, ts and dur, and the format's version; every
// other key goes to args.
constexpr std::string_view kNotArgs[] = {trace::key::kRank, trace::key::kTStartUs, trace::key::kTEndUs,
                                         trace::key::kVersion};

struct Event {
  std::int64_t ts;
  int tid;
  std::int64_t seq;
  Json json;
};

// Returns false for records that cannot be placed on the timeline (no rank or start time).
bool to_event(const trace::Record& record, Event* event) {
  if (!record.rank || !record.t_start_us) return false;
  const std::int64_t start = *record.t_start_us;
  std::string name = record.op.value_or("?");
  if (record.seq) name += " #" + std::to_string(*record.seq);
  Json args = Json::object();
  const Json all = Json::parse(trace::to_line(record));
  for (const auto& [key, value] : all.items()) {
    if (std::find(std::begin(kNotArgs), std::end(kNotArgs), key) == std::end(kNotArgs)) args[key] = value;
  }

  Json e;
  e["name"] = name;
  e["cat"] = record.phase.value_or("");
  e["ph"] = "X";
  e["ts"] = start;
  e["dur"] = record.t_end_us ? std::max<std::int64_t>(0, *record.t_end_us - start) : 0;  // never negative
  e["pid"] = 0;
  e["tid"] = *record.rank;
  e["args"] = std::move(args);
  *event = Event{start, *record.rank, record.seq.value_or(-1), std::move(e)};
  return true;
}

Json metadata(const char* name, int tid, Json args) {
  Json m;
  m["name"] = name;
  m["ph"] = "M";
  m["pid"] = 0;
  m["tid"] = tid;
  m["args"] = std::move(args);
  return m;
}

}  // namespace

void write_chrome_trace(const std::vector<std::string>& jsonl_paths, const std::string& out_path) {
  std::vector<Event> events;
  for (const auto& path : jsonl_paths) {
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    std::ifstream in(path, std::ios::binary);
    LOCKSTEP_CHECK(in.good(), "cannot read trace ", path, ": ", std::strerror(errno));
    std::string line;
    while (std::getline(in, line)) {
      const auto record = trace::parse_line(line);
      Event event;
      if (record && to_event(*record, &event)) events.push_back(std::move(event));
    }
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.ts, a.tid, a.seq) < std::tie(b.ts, b.tid, b.seq);
  });

  std::set<int> ranks;
  for (const auto& e : events) ranks.insert(e.tid);
  Json trace_events = Json::array();
  trace_events.push_back(metadata("process_name", 0, {{"name", "lockstep"}}));
  for (int rank : ranks) {
    trace_events.push_back(metadata("thread_name", rank, {{"name", "rank " + std::to_string(rank)}}));
    trace_events.push_back(metadata("thread_sort_index", rank, {{"sort_index", rank}}));
  }
  for (auto& e : events) trace_events.push_back(std::move(e.json));

  Json root;
  root["traceEvents"] = std::move(trace_events);
  root["displayTimeUnit"] = "ms";

  write_file_atomically(out_path, root.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n");
}

}  // namespace lockstep::report
