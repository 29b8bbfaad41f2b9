#include "harness/nccl_profiler/trace_writer.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "harness/trace/record.h"

namespace lockstep::nccl_profiler {
namespace {

namespace fs = std::filesystem;

struct DTypeName {
  const char* nccl;
  const char* lockstep;
  std::size_t size;
};
// ncclDatatypeToString's names (NCCL 2.28 src/collectives.cc), then nccl.h's aliases.
constexpr DTypeName kDTypes[] = {
    {"ncclInt8", "i8", 1},         {"ncclUint8", "u8", 1},         {"ncclInt32", "i32", 4},
    {"ncclUint32", "u32", 4},      {"ncclInt64", "i64", 8},        {"ncclUint64", "u64", 8},
    {"ncclFloat16", "f16", 2},     {"ncclFloat32", "f32", 4},      {"ncclFloat64", "f64", 8},
    {"ncclBfloat16", "bf16", 2},   {"ncclFloat8e4m3", "f8e4m3", 1}, {"ncclFloat8e5m2", "f8e5m2", 1},
    {"ncclChar", "i8", 1},         {"ncclInt", "i32", 4},          {"ncclHalf", "f16", 2},
    {"ncclFloat", "f32", 4},       {"ncclDouble", "f64", 8},
};

const DTypeName* find_dtype(const char* nccl_dtype) {
  if (nccl_dtype == nullptr) return nullptr;
  for (const auto& d : kDTypes) {
    if (std::strcmp(d.nccl, nccl_dtype) == 0) return &d;
  }
  return nullptr;
}

std::string hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string op_name(const char* nccl_func) {
  if (nccl_func == nullptr || *nccl_func == '\0') return "unknown";
  // ncclFuncToString spells all-to-all "AlltoAll"; the camel-case rule below would split it wrongly.
  if (std::strcmp(nccl_func, "AlltoAll") == 0 || std::strcmp(nccl_func, "AllToAll") == 0) return "all_to_all";
  std::string out;
  for (const char* c = nccl_func; *c; ++c) {
    const auto ch = static_cast<unsigned char>(*c);
    if (std::isupper(ch)) {
      if (!out.empty()) out += '_';
      out += static_cast<char>(std::tolower(ch));
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

std::string dtype_name(const char* nccl_dtype) {
  const DTypeName* d = find_dtype(nccl_dtype);
  return d ? d->lockstep : "unknown";
}

std::size_t dtype_size(const char* nccl_dtype) {
  const DTypeName* d = find_dtype(nccl_dtype);
  return d ? d->size : 0;
}

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string comm_folder(std::uint64_t hash) { return "comm-" + hex16(hash); }

CommTrace::CommTrace(const std::string& dir, CommInfo info) : info_(std::move(info)) {
  const fs::path folder = fs::path(dir) / comm_folder(info_.hash);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw std::runtime_error("cannot create trace folder " + folder.string() + ": " + ec.message());
  path_ = (folder / ("rank" + std::to_string(info_.rank) + ".trace.jsonl")).string();
  file_ = std::fopen(path_.c_str(), "w");
  if (file_ == nullptr) throw std::runtime_error("cannot write trace file " + path_ + ": " + std::strerror(errno));
  if (info_.rank == 0) {
    nlohmann::ordered_json comm;
    comm["source"] = "nccl_profiler";
    comm["comm_hash"] = hex16(info_.hash);
    comm["comm_name"] = info_.name;
    comm["nranks"] = info_.nranks;
    comm["nnodes"] = info_.nnodes;
    const fs::path tmp = folder / "comm.json.tmp";
    if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
      const std::string text = comm.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
      if (std::fclose(f) == 0 && ok) fs::rename(tmp, folder / "comm.json", ec);
    }
  }
}

CommTrace::~CommTrace() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& open : open_) {
    for (auto& [seq, p] : open) {
      write_line(*p, p->stopped ? nullptr : "nccl did not stop this event before the communicator was finalized");
    }
    open.clear();
  }
  if (file_) std::fclose(file_);
}

Pending* CommTrace::start(TaskEvent event, std::int64_t t_us) {
  auto p = std::make_unique<Pending>();
  p->owner = this;
  p->event = std::move(event);
  p->t_start_us = t_us;
  const int kind = p->event.p2p ? 1 : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  p->seq = next_seq_[kind]++;
  Pending* raw = p.get();
  open_[kind].emplace(raw->seq, std::move(p));
  return raw;
}

void CommTrace::stop(Pending* pending, std::int64_t t_us) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending->t_end_us = t_us;
  pending->stopped = true;
  write_ready(pending->event.p2p ? 1 : 0);
}

void CommTrace::write_ready(int kind) {
  auto& open = open_[kind];
  while (!open.empty() && open.begin()->second->stopped) {
    write_line(*open.begin()->second, nullptr);
    open.erase(open.begin());
  }
}

void CommTrace::write_line(const Pending& p, const char* error) {
  const TaskEvent& e = p.event;
  const std::string op = op_name(e.func.c_str());
  std::uint64_t bytes = e.count * dtype_size(e.datatype.c_str());
  // As lockstep counts them: all_gather its output, the rest their input (NCCL's count is the
  // per-rank part for all_gather, reduce_scatter and all_to_all).
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") bytes *= static_cast<std::uint64_t>(info_.nranks);
  trace::Record r;
  r.rank = info_.rank;
  r.seq = p.seq;
  r.kind = e.p2p ? trace::kP2p : trace::kCollective;
  r.op = op;
  r.dtype = dtype_name(e.datatype.c_str());
  r.count = static_cast<std::int64_t>(e.count);
  r.device = "cuda";
  r.bytes = static_cast<std::int64_t>(bytes);
  // NCCL's descriptors carry no reduction operator, so "reduce" is never written.
  if (!e.p2p && (op == "broadcast" || op == "reduce")) r.root = e.root;
  if (e.p2p) {
    r.peer = e.peer;
    r.tag = 0;
  }
  // NCCL knows no call sites: one (phase "", step -1) holds every call, so index == seq.
  r.phase = "";
  r.step = -1;
  r.index = p.seq;
  r.t_start_us = p.t_start_us;
  r.t_end_us = p.t_end_us;
  if (error) r.error = error;
  r.source = "nccl_profiler";
  r.comm_hash = hex16(info_.hash);
  r.nccl_func = e.func;
  r.nccl_dtype = e.datatype;
  if (!e.p2p) {
    r.nccl_seq = static_cast<std::int64_t>(e.nccl_seq);
    r.algo = e.algo;
    r.proto = e.proto;
  }
  const std::string line = trace::to_line(r);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace lockstep::nccl_profiler
