#include "harness/baseline/sequence.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "harness/comm/types.h"
#include "harness/core/error.h"
#include "harness/trace/record.h"

namespace lockstep::baseline {
namespace {

// "[3,0,-1]": the split sizes as the JSON array text they had in the line (hashed and compared).
std::string counts_text(const std::vector<std::int64_t>& counts) {
  std::string s = "[";
  for (std::size_t i = 0; i < counts.size(); ++i) s += (i ? "," : "") + std::to_string(counts[i]);
  return s + "]";
}

}  // namespace

std::string later_fields_text(const CallRecord& c) {
  std::string s;
  for (std::size_t i = trace::kCallFieldsBeforeTable; i < std::size(kCallRecordFields); ++i) {
    const auto& f = kCallRecordFields[i];
    if (c.*f.member != f.none) s += (s.empty() ? "" : ";") + std::string(f.name) + "=" + std::to_string(c.*f.member);
  }
  return s;
}

void read_later_fields(const std::string& text, CallRecord* c) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(';', at);
    if (end == std::string::npos) end = text.size();
    const std::string pair = text.substr(at, end - at);
    at = end + 1;
    const std::size_t eq = pair.find('=');
    if (eq == std::string::npos) continue;
    for (const auto& f : kCallRecordFields) {
      if (pair.compare(0, eq, f.name) == 0 && std::char_traits<char>::length(f.name) == eq) {
        std::int64_t v = 0;
        const char* end_v = pair.data() + pair.size();
        const auto r = std::from_chars(pair.data() + eq + 1, end_v, v);
        if (r.ec != std::errc() || r.ptr != end_v) throw InputError("sequence call field '" + pair + "': not name=integer");
        c->*f.member = v;
      }
    }
  }
}

bool CallRecord::same_fields(const CallRecord& o) const {
  for (const auto& f : kCallRecordFields) {
    if (this->*f.member != o.*f.member) return false;
  }
  return true;
}

bool CallRecord::same_call(const CallRecord& o) const {
  return seq == o.seq && kind == o.kind && op == o.op && dtype == o.dtype && count == o.count &&
         device == o.device && reduce == o.reduce && same_fields(o) &&
         send_counts == o.send_counts && recv_counts == o.recv_counts && group == o.group && phase == o.phase && step == o.step &&
         index == o.index;
}

std::string CallRecord::describe() const {
  std::string s = "#" + std::to_string(seq) + " " + op;
  if (!dtype.empty()) s += " " + dtype + "[" + std::to_string(count) + "]";
  if (device != "cpu" && !device.empty()) s += " on " + device;
  if (!reduce.empty()) s += " " + reduce;
  // A field the op carries (any that is set, for an op this build does not know).
  const auto known = comm::op_from_string(op);
  for (std::size_t i = 0; i < std::size(kCallRecordFields); ++i) {
    const auto& f = kCallRecordFields[i];
    const bool carried = known ? comm::call_fields()[i].carried_by(*known) : this->*f.member != f.none;
    if (trace::call_field_shown(static_cast<int>(i), carried, this->*f.member, f.none)) {
      s += std::string(" ") + f.name + " " + std::to_string(this->*f.member);
    }
  }
  if (!send_counts.empty()) s += " send " + send_counts + " recv " + recv_counts;
  if (!group.empty()) s += " on group " + group;
  s += " (" + (phase.empty() ? std::string("-") : phase) + " step " + std::to_string(step) + " call " +
       std::to_string(index) + ")";
  return s;
}

std::optional<Sequence> read_sequence(const std::string& dir, int world_size) {
  Sequence out(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    const std::string path = (std::filesystem::path(dir) / ("rank" + std::to_string(r) + ".trace.jsonl")).string();
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.empty()) continue;
      std::string why;
      const auto rec = trace::parse_line(line, &why);
      if (!rec) throw InputError(path + ":" + std::to_string(lineno) + ": not a trace record: " + why);
      if (rec->error) return std::nullopt;
      CallRecord c;
      c.seq = rec->seq.value_or(-1);
      c.kind = rec->kind.value_or("");
      c.op = rec->op.value_or("");
      c.dtype = rec->dtype.value_or("");
      c.count = rec->count.value_or(0);
      c.device = rec->device.value_or("");
      c.reduce = rec->reduce.value_or("");
      for (std::size_t i = 0; i < std::size(kCallRecordFields); ++i) {
        c.*kCallRecordFields[i].member = (*rec.*trace::kCallFieldMembers[i]).value_or(kCallRecordFields[i].none);
      }
      if (rec->send_counts) c.send_counts = counts_text(*rec->send_counts);
      if (rec->recv_counts) c.recv_counts = counts_text(*rec->recv_counts);
      if (rec->group) c.group = counts_text(*rec->group);
      c.phase = rec->phase.value_or("");
      c.step = rec->step.value_or(-1);
      c.index = rec->index.value_or(0);
      c.wire = rec->wire.value_or("");
      c.t_start_us = rec->t_start_us.value_or(0);
      c.t_end_us = rec->t_end_us.value_or(0);
      out[static_cast<std::size_t>(r)].push_back(std::move(c));
    }
  }
  return out;
}

std::string sequence_hash(const Sequence& sequence) {
  // FNV-1a 64 over a canonical text of every stored field (wire included, so sequences that
  // differ only in how an engine carried them are stored apart), twice with different offsets.
  std::uint64_t h1 = 14695981039346656037ull, h2 = 1099511628211ull * 31;
  auto feed = [&](const std::string& s) {
    for (unsigned char ch : s) {
      h1 = (h1 ^ ch) * 1099511628211ull;
      h2 = (h2 ^ ch) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
    }
    h1 = (h1 ^ 0x1f) * 1099511628211ull;
    h2 = (h2 ^ 0x1f) * 0x100000001b3ull;
  };
  for (std::size_t r = 0; r < sequence.size(); ++r) {
    feed("rank" + std::to_string(r));
    for (const auto& c : sequence[r]) {
      // The table's first rows by position; later ones (and the group) only where set, so that
      // a sequence without them keeps the hash it was recorded with.
      std::string fields, later;
      for (std::size_t i = 0; i < std::size(kCallRecordFields); ++i) {
        const auto& f = kCallRecordFields[i];
        const std::int64_t v = c.*f.member;
        if (static_cast<int>(i) < trace::kCallFieldsBeforeTable) {
          fields += std::to_string(v) + "|";
        } else if (v != f.none) {
          later += std::string("|") + f.name + "=" + std::to_string(v);
        }
      }
      feed(std::to_string(c.seq) + "|" + c.kind + "|" + c.op + "|" + c.dtype + "|" + std::to_string(c.count) + "|" +
           c.device + "|" + c.reduce + "|" + fields + c.send_counts + "|" + c.recv_counts + "|" + c.phase + "|" +
           std::to_string(c.step) + "|" + std::to_string(c.index) + "|" + c.wire +
           (c.group.empty() ? "" : "|group" + c.group) + later);
    }
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h1),
                static_cast<unsigned long long>(h2));
  return buf;
}

std::string Divergence::message() const {
  return "rank " + std::to_string(rank) + ", call " + std::to_string(position) + ": recorded " + recorded +
         ", observed " + observed;
}

std::optional<Divergence> first_divergence(const Sequence& recorded, const Sequence& observed) {
  const std::size_t ranks = std::max(recorded.size(), observed.size());
  static const std::vector<CallRecord> kEmpty;
  for (std::size_t r = 0; r < ranks; ++r) {
    const auto& a = r < recorded.size() ? recorded[r] : kEmpty;
    const auto& b = r < observed.size() ? observed[r] : kEmpty;
    const std::size_t n = std::max(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
      const bool ha = i < a.size(), hb = i < b.size();
      if (ha && hb && a[i].same_call(b[i])) continue;
      Divergence d;
      d.rank = static_cast<int>(r);
      d.position = static_cast<std::int64_t>(i);
      d.recorded = ha ? a[i].describe() : "(end of sequence)";
      d.observed = hb ? b[i].describe() : "(end of sequence)";
      return d;
    }
  }
  return std::nullopt;
}

}  // namespace lockstep::baseline
