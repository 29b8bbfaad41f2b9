#include "harness/report/chrome_trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "harness/core/error.h"
#include "harness/core/fs.h"

namespace lockstep::report {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The record keys that become the event's tid, ts and dur; every other key goes to args.
constexpr const char* kPlacementKeys[] = {"rank", "t_start_us", "t_end_us"};

struct Event {
  double ts;
  int tid;
  std::int64_t seq;
  Json json;
};

// Returns t_end - t_start, never negative; integral when both times are.
Json duration(const Json& start, const Json& end) {
  if (!end.is_number()) return 0;
  if (start.is_number_integer() && end.is_number_integer()) {
    return std::max<std::int64_t>(0, end.get<std::int64_t>() - start.get<std::int64_t>());
  }
  return std::max(0.0, end.get<double>() - start.get<double>());
}

// Returns false for records that cannot be placed on the timeline (no rank or start time).
bool to_event(const Json& record, Event* event) {
  if (!record.is_object()) return false;
  const auto rank = record.find("rank");
  const auto start = record.find("t_start_us");
  if (rank == record.end() || !rank->is_number_integer() || start == record.end() ||
      !start->is_number()) {
    return false;
  }
  const auto end = record.find("t_end_us");
  const auto op = record.find("op");
  const auto seq = record.find("seq");
  const auto phase = record.find("phase");

  std::string name = op != record.end() && op->is_string() ? op->get<std::string>() : "?";
  std::int64_t seq_value = -1;
  if (seq != record.end() && seq->is_number_integer()) {
    seq_value = seq->get<std::int64_t>();
    name += " #" + std::to_string(seq_value);
  }
  Json args = Json::object();
  for (const auto& [key, value] : record.items()) {
    if (std::find(std::begin(kPlacementKeys), std::end(kPlacementKeys), key) ==
        std::end(kPlacementKeys)) {
      args[key] = value;
    }
  }

  Json e;
  e["name"] = name;
  e["cat"] = phase != record.end() && phase->is_string() ? phase->get<std::string>() : "";
  e["ph"] = "X";
  e["ts"] = *start;
  e["dur"] = duration(*start, end != record.end() ? *end : Json());
  e["pid"] = 0;
  e["tid"] = rank->get<int>();
  e["args"] = std::move(args);
  *event = Event{start->get<double>(), rank->get<int>(), seq_value, std::move(e)};
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
      const Json record = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      Event event;
      if (!record.is_discarded() && to_event(record, &event)) events.push_back(std::move(event));
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
