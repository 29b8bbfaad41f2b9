#include "harness/report/dump.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "harness/core/error.h"
#include "harness/core/fs.h"
#include "reference/io/npy.h"

namespace lockstep::report {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// NumPy has no bfloat16: bf16 is stored as its raw bits, "<u2".
std::string numpy_descr(comm::DType dtype) {
  switch (dtype) {
    case comm::DType::kF32: return "<f4";
    case comm::DType::kF64: return "<f8";
    case comm::DType::kF16: return "<f2";
    case comm::DType::kBF16: return "<u2";
    case comm::DType::kI8: return "|i1";
    case comm::DType::kU8: return "|u1";
    case comm::DType::kI32: return "<i4";
    case comm::DType::kI64: return "<i8";
  }
  LOCKSTEP_CHECK(false, "dump: unknown dtype ", static_cast<int>(dtype));
  return {};
}

bool valid_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
  });
}

std::string fragment_path(const std::string& dir, int rank) {
  return (fs::path(dir) / ("manifest.rank" + std::to_string(rank) + ".jsonl")).string();
}

}  // namespace

DumpWriter::DumpWriter(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {
  if (!enabled()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  LOCKSTEP_CHECK(!ec, "dump: cannot create directory ", dir_, ": ", ec.message());
}

DumpWriter::~DumpWriter() = default;

void DumpWriter::write(const std::string& name, comm::DType dtype,
                       const std::vector<std::int64_t>& shape, const void* data,
                       const std::string& meaning) {
  if (!enabled()) return;
  LOCKSTEP_CHECK(valid_name(name), "dump: array name '", name,
                 "' must match [A-Za-z0-9_.-]+");
  const std::string descr = numpy_descr(dtype);
  const std::string file = name + ".rank" + std::to_string(rank_) + ".npy";
  const std::string path = (fs::path(dir_) / file).string();

  std::size_t bytes = comm::element_size(dtype);
  for (std::int64_t dim : shape) {
    LOCKSTEP_CHECK(dim >= 0, "dump: array '", name, "' has negative dimension ", dim);
    bytes *= static_cast<std::size_t>(dim);
  }
  try {
    io::write_npy(path, descr, shape, data, bytes);
  } catch (const std::exception& e) {
    LOCKSTEP_CHECK(false, "dump: ", e.what());
  }

  Json entry;
  entry["name"] = name;
  entry["file"] = file;
  entry["dtype"] = std::string(comm::to_string(dtype));
  entry["numpy_dtype"] = descr;
  entry["shape"] = shape;
  entry["rank"] = rank_;
  entry["meaning"] = meaning;
  const std::string fragment = fragment_path(dir_, rank_);
  std::ofstream out(fragment, std::ios::binary | std::ios::app);
  LOCKSTEP_CHECK(out.good(), "dump: cannot open ", fragment, ": ", std::strerror(errno));
  out << entry.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
  out.flush();
  LOCKSTEP_CHECK(out.good(), "dump: cannot append to ", fragment);
}

// An array written twice under one name by one rank is listed once, as its last write: the
// manifest describes the .npy files that are on disk. A fragment's unterminated last line (a
// rank killed mid-append) is dropped; any other malformed line is an error.
void merge_manifests(const std::string& dir, const std::string& scenario_id) {
  if (dir.empty()) return;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;

  static const std::regex kFragment(R"(manifest\.rank[0-9]+\.jsonl)");
  std::vector<fs::path> fragments;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), kFragment)) {
      fragments.push_back(entry.path());
    }
  }
  LOCKSTEP_CHECK(!ec, "dump: cannot list ", dir, ": ", ec.message());
  if (fragments.empty()) return;
  std::sort(fragments.begin(), fragments.end());

  std::vector<Json> arrays;
  for (const auto& fragment : fragments) {
    std::ifstream in(fragment, std::ios::binary);
    LOCKSTEP_CHECK(in.good(), "dump: cannot read ", fragment.string());
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::size_t begin = 0;
    int line_no = 0;
    while (begin < text.size()) {
      ++line_no;
      const std::size_t end = text.find('\n', begin);
      const bool terminated = end != std::string::npos;
      const std::string line = text.substr(begin, terminated ? end - begin : std::string::npos);
      begin = terminated ? end + 1 : text.size();
      if (line.empty()) continue;
      Json record = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (record.is_discarded() && !terminated) break;
      LOCKSTEP_CHECK(record.is_object() && record.contains("name") && record["name"].is_string() &&
                         record.contains("rank") && record["rank"].is_number_integer(),
                     "dump: ", fragment.string(), ":", line_no, ": malformed manifest line");
      arrays.push_back(std::move(record));
    }
  }

  auto key = [](const Json& a) {
    return std::make_pair(a["name"].get<std::string>(), a["rank"].get<int>());
  };
  std::stable_sort(arrays.begin(), arrays.end(),
                   [&](const Json& a, const Json& b) { return key(a) < key(b); });
  std::vector<Json> unique;
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    if (i + 1 < arrays.size() && key(arrays[i]) == key(arrays[i + 1])) continue;
    unique.push_back(std::move(arrays[i]));
  }

  Json manifest;
  manifest["schema_version"] = 1;
  manifest["scenario"] = scenario_id;
  manifest["arrays"] = std::move(unique);
  write_file_atomically(fs::path(fs::path(dir) / "manifest.json").string(),
                        manifest.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
  for (const auto& fragment : fragments) {
    fs::remove(fragment, ec);
    LOCKSTEP_CHECK(!ec, "dump: cannot remove ", fragment.string(), ": ", ec.message());
  }
}

}  // namespace lockstep::report
