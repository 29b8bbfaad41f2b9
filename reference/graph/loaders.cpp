#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "reference/graph/graph.h"
#include "reference/io/npy.h"

namespace lockstep::ref {

namespace {

void check_num_nodes_arg(const char* who, std::int64_t num_nodes) {
  if (num_nodes < -1) {
    throw std::invalid_argument(std::string(who) + ": num_nodes must be >= -1, got " +
                                std::to_string(num_nodes));
  }
}

std::int64_t infer_num_nodes(std::int64_t num_nodes, const std::vector<std::int64_t>& src,
                             const std::vector<std::int64_t>& dst) {
  if (num_nodes != -1) return num_nodes;
  std::int64_t max_id = -1;
  for (const auto v : src) max_id = std::max(max_id, v);
  for (const auto v : dst) max_id = std::max(max_id, v);
  return max_id + 1;
}

// Splits on whitespace and commas; empty fields between separators are dropped.
std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  const auto is_sep = [](char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
  };
  while (i < line.size()) {
    while (i < line.size() && is_sep(line[i])) ++i;
    const std::size_t b = i;
    while (i < line.size() && !is_sep(line[i])) ++i;
    if (i > b) fields.push_back(line.substr(b, i - b));
  }
  return fields;
}

bool parse_int(std::string_view field, std::int64_t& out) {
  if (!field.empty() && field.front() == '+') field.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), out);
  return ec == std::errc() && ptr == field.data() + field.size() && !field.empty();
}

}  // namespace

CsrGraph load_edge_list(const std::string& path, std::int64_t num_nodes) {
  check_num_nodes_arg("load_edge_list", num_nodes);
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("load_edge_list: cannot open '" + path + "': " + std::strerror(errno));
  }
  std::vector<std::int64_t> src;
  std::vector<std::int64_t> dst;
  std::vector<std::int64_t> line_of;  // source line of each edge, for range errors
  std::string line;
  std::int64_t line_no = 0;
  bool seen_content = false;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view text(line);
    if (const auto hash = text.find('#'); hash != std::string_view::npos) {
      text = text.substr(0, hash);
    }
    const auto fields = split_fields(text);
    if (fields.empty()) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    std::int64_t ids[2] = {0, 0};
    const bool ok0 = parse_int(fields[0], ids[0]);
    const bool ok1 = fields.size() >= 2 && parse_int(fields[1], ids[1]);
    if (!seen_content && !ok0 && !ok1) {  // the optional header
      seen_content = true;
      continue;
    }
    seen_content = true;
    if (fields.size() < 2) {
      throw std::runtime_error(where + ": expected two node ids, got '" + std::string(fields[0]) +
                               "'");
    }
    for (int f = 0; f < 2; ++f) {
      if (!(f == 0 ? ok0 : ok1)) {
        throw std::runtime_error(where + ": '" + std::string(fields[static_cast<std::size_t>(f)]) +
                                 "' is not an integer node id");
      }
      if (ids[f] < 0 || (num_nodes != -1 && ids[f] >= num_nodes)) {
        throw std::out_of_range(where + ": node id " + std::to_string(ids[f]) +
                                (ids[f] < 0
                                     ? " is negative"
                                     : " is out of range [0, " + std::to_string(num_nodes) + ")"));
      }
    }
    src.push_back(ids[0]);
    dst.push_back(ids[1]);
  }
  if (in.bad()) {
    throw std::runtime_error("load_edge_list: error reading '" + path + "' after line " +
                             std::to_string(line_no));
  }
  return from_edges(infer_num_nodes(num_nodes, src, dst), src, dst);
}

namespace {

// Returns the int32/int64 values of `array` read from `path`, checking dtype and shape.
std::vector<std::int64_t> npy_ids(const io::NpyArray& array, const std::string& path) {
  if (array.descr != "<i4" && array.descr != "<i8") {
    throw std::runtime_error(path + ": node ids must be int32 or int64 (<i4 or <i8), got '" +
                             array.descr + "'");
  }
  std::int64_t count = 1;
  for (const auto d : array.shape) count *= d;
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  if (array.descr == "<i8" && !out.empty()) {
    std::memcpy(out.data(), array.data.data(), out.size() * sizeof(std::int64_t));
  } else if (array.descr == "<i4") {
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int32_t v;
      std::memcpy(&v, array.data.data() + i * sizeof v, sizeof v);
      out[i] = v;
    }
  }
  return out;
}

void check_npy_ids(const std::string& path, const char* label, const std::vector<std::int64_t>& ids,
                   std::size_t offset, std::size_t count, std::int64_t num_nodes) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::int64_t v = ids[offset + i];
    if (v < 0 || (num_nodes != -1 && v >= num_nodes)) {
      throw std::out_of_range(
          path + ": " + label + "[" + std::to_string(i) + "] = " + std::to_string(v) +
          (v < 0 ? " is negative" : " is out of range [0, " + std::to_string(num_nodes) + ")"));
    }
  }
}

}  // namespace

CsrGraph load_npy_edges(const std::string& src_path, const std::string& dst_path,
                        std::int64_t num_nodes) {
  check_num_nodes_arg("load_npy_edges", num_nodes);
  const io::NpyArray src_array = io::read_npy(src_path);
  const io::NpyArray dst_array = io::read_npy(dst_path);
  for (const auto* a : {&src_array, &dst_array}) {
    if (a->shape.size() != 1) {
      throw std::runtime_error((a == &src_array ? src_path : dst_path) +
                               ": expected a 1-D array of node ids, got " +
                               std::to_string(a->shape.size()) + " dimensions");
    }
  }
  std::vector<std::int64_t> src = npy_ids(src_array, src_path);
  std::vector<std::int64_t> dst = npy_ids(dst_array, dst_path);
  if (src.size() != dst.size()) {
    throw std::runtime_error(src_path + " holds " + std::to_string(src.size()) + " ids but " +
                             dst_path + " holds " + std::to_string(dst.size()));
  }
  check_npy_ids(src_path, "src", src, 0, src.size(), num_nodes);
  check_npy_ids(dst_path, "dst", dst, 0, dst.size(), num_nodes);
  return from_edges(infer_num_nodes(num_nodes, src, dst), src, dst);
}

CsrGraph load_npy_edge_index(const std::string& path, std::int64_t num_nodes) {
  check_num_nodes_arg("load_npy_edge_index", num_nodes);
  const io::NpyArray array = io::read_npy(path);
  if (array.shape.size() != 2 || array.shape[0] != 2) {
    std::string shape = "[";
    for (std::size_t i = 0; i < array.shape.size(); ++i) {
      shape += (i ? ", " : "") + std::to_string(array.shape[i]);
    }
    throw std::runtime_error(path + ": expected an edge_index of shape [2, E], got " + shape + "]");
  }
  const std::vector<std::int64_t> ids = npy_ids(array, path);
  const auto e = static_cast<std::size_t>(array.shape[1]);
  check_npy_ids(path, "edge_index[0]", ids, 0, e, num_nodes);
  check_npy_ids(path, "edge_index[1]", ids, e, e, num_nodes);
  std::vector<std::int64_t> src(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(e));
  std::vector<std::int64_t> dst(ids.begin() + static_cast<std::ptrdiff_t>(e), ids.end());
  return from_edges(infer_num_nodes(num_nodes, src, dst), src, dst);
}

}  // namespace lockstep::ref
