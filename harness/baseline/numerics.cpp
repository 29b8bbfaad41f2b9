#include "harness/baseline/numerics.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"
#include "harness/core/fs.h"

namespace lockstep::baseline {
namespace {

constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;

std::string num(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

// The most a numerics file may hold: LOCKSTEP_NUMERICS_MAX_ELEMENTS' default (4M) is 32 MiB a rank.
constexpr std::size_t kMaxFileBytes = std::size_t{1} << 30;

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

}  // namespace

std::string to_bytes(const std::vector<double>& values) {
  std::string out(values.size() * 8, '\0');
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint64_t bits;
    std::memcpy(&bits, &values[i], 8);
    for (int k = 0; k < 8; ++k) out[i * 8 + static_cast<std::size_t>(k)] = static_cast<char>((bits >> (8 * k)) & 0xff);
  }
  return out;
}

std::vector<double> from_bytes(const std::string& bytes, const std::string& source) {
  if (bytes.size() % 8 != 0)
    throw InputError(source + ": " + std::to_string(bytes.size()) + " bytes of float64 values is not a multiple of 8");
  std::vector<double> out(bytes.size() / 8);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint64_t bits = 0;
    for (int k = 0; k < 8; ++k) bits |= std::uint64_t{static_cast<unsigned char>(bytes[i * 8 + static_cast<std::size_t>(k)])} << (8 * k);
    std::memcpy(&out[i], &bits, 8);
  }
  return out;
}

static std::vector<TensorValues> parse_tensors(const nlohmann::json& h, const std::string& bytes, std::size_t nl, const std::string& source);

std::vector<TensorValues> parse_tensor_file(const std::string& bytes, const std::string& source) {
  const auto nl = bytes.find('\n');
  if (nl == std::string::npos) throw InputError(source + ": not a lockstep numerics file (no header line)");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(bytes.substr(0, nl));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source + ": not a lockstep numerics file: its header is not JSON (" + e.what() + ")");
  }
  try {
    return parse_tensors(h, bytes, nl, source);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source + ": not a lockstep numerics file: " + e.what());
  }
}

static std::vector<TensorValues> parse_tensors(const nlohmann::json& h, const std::string& bytes, std::size_t nl, const std::string& source) {
  if (!h.is_object() || h.value("format", "") != "lockstep-numerics")
    throw InputError(source + ": not a lockstep numerics file (format is not \"lockstep-numerics\")");
  if (h.value("version", 0) != 1)
    throw InputError(source + ": numerics version " + h.value("version", nlohmann::json()).dump() + " is not 1");
  const auto& list = h.value("tensors", nlohmann::json());
  if (!list.is_array()) throw InputError(source + ": \"tensors\" must be a list");
  std::vector<TensorValues> out;
  std::int64_t total = 0;
  for (const auto& t : list) {
    TensorValues v;
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("shape") || !t["shape"].is_array())
      throw InputError(source + ": tensor " + std::to_string(out.size()) + " needs a string \"name\" and a list \"shape\"");
    v.name = t["name"].get<std::string>();
    v.dtype = t.value("dtype", "");
    v.kept = t.value("kept", true);
    std::int64_t n = 1;
    for (const auto& d : t["shape"]) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
        throw InputError(source + ": tensor " + v.name + ": a dimension is not a whole number >= 0: " + d.dump());
      v.shape.push_back(d.get<std::int64_t>());
      if (v.shape.back() != 0 && n > kMaxElements / v.shape.back())
        throw InputError(source + ": tensor " + v.name + ": more than 2^40 elements");
      n *= v.shape.back();
    }
    if (v.kept) total += n;
    if (total > kMaxElements) throw InputError(source + ": more than 2^40 elements in all");
    out.push_back(std::move(v));
  }
  const std::size_t data = bytes.size() - nl - 1;
  if (static_cast<std::int64_t>(data) != total * 8)
    throw InputError(source + ": the header lists " + std::to_string(total) + " kept elements (" + std::to_string(total * 8) +
                     " bytes), the file has " + std::to_string(data) + " bytes after it");
  std::size_t at = nl + 1;
  for (auto& v : out) {
    if (!v.kept) continue;
    std::int64_t n = 1;
    for (auto d : v.shape) n *= d;
    v.values = from_bytes(bytes.substr(at, static_cast<std::size_t>(n) * 8), source);
    at += static_cast<std::size_t>(n) * 8;
  }
  return out;
}

std::vector<TensorValues> read_tensor_files(const std::string& artifacts_dir, int world_size) {
  std::vector<TensorValues> out;
  for (int r = 0; r < world_size; ++r) {
    const std::string name = "numerics-rank" + std::to_string(r) + ".bin", path = artifacts_dir + "/" + name;
    std::string bytes;
    try {  // written by the program: untrusted (no symlink followed, no FIFO waited on, size capped)
      if (!open_regular(artifacts_dir, name)) continue;
      bytes = read_regular(artifacts_dir, name, kMaxFileBytes);
    } catch (const std::runtime_error& e) {
      throw InputError(path + ": " + e.what());
    }
    auto part = parse_tensor_file(bytes, path);
    out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  return out;
}

NumericsComparison compare_numerics(const Numerics& a, const Numerics& b, const Tolerances& t) {
  NumericsComparison c;
  std::map<std::string, const TensorValues*> in_b;
  for (const auto& x : b.tensors) in_b[x.name] = &x;
  std::map<std::string, bool> seen;
  for (const auto& x : a.tensors) {
    TensorDiff d;
    d.name = x.name;
    seen[x.name] = true;
    auto it = in_b.find(x.name);
    if (it == in_b.end()) {
      d.problem = "only in the first record";
    } else if (it->second->shape != x.shape) {
      d.problem = "shape changed";
    } else if (!x.kept || !it->second->kept) {
      d.not_kept = true;
    } else if (x.values.size() != it->second->values.size()) {
      d.problem = "values do not fill its shape";
    } else {
      const auto& y = it->second->values;
      d.elements = static_cast<std::int64_t>(x.values.size());
      for (std::size_t i = 0; i < x.values.size(); ++i) {
        const double u = x.values[i], v = y[i];
        if (same_value(u, v)) continue;
        ++d.differ;
        const bool finite = std::isfinite(u) && std::isfinite(v);
        const double diff = finite ? std::fabs(v - u) : INFINITY;
        const double rel = u != 0 && finite ? diff / std::fabs(u) : INFINITY;
        if (!finite || !(diff <= t.param_atol + t.param_rtol * std::fabs(u))) ++d.beyond;
        if (!(diff <= d.max_abs)) d.max_abs = diff;
        if (!(rel <= d.max_rel)) d.max_rel = rel;
      }
    }
    c.tensors.push_back(std::move(d));
  }
  for (const auto& y : b.tensors) {
    if (seen.count(y.name)) continue;
    TensorDiff d;
    d.name = y.name;
    d.problem = "only in the second record";
    c.tensors.push_back(std::move(d));
  }
  for (const auto& x : a.curves) {
    CurveDiff d;
    d.name = x.name;
    const CurveValues* y = nullptr;
    for (const auto& z : b.curves) if (z.name == x.name) y = &z;
    if (!y) {
      d.problem = "only in the first record";
    } else {
      std::map<std::int64_t, double> at;  // a step's first value
      for (std::size_t i = 0; i < y->values.size() && i < y->steps.size(); ++i) at.emplace(y->steps[i], y->values[i]);
      std::set<std::int64_t> done;
      for (std::size_t i = 0; i < x.values.size() && i < x.steps.size(); ++i) {
        auto it = at.find(x.steps[i]);
        if (it == at.end() || !done.insert(x.steps[i]).second) continue;
        ++d.points;
        const double u = x.values[i], v = it->second;
        if (same_value(u, v)) continue;
        if (d.first_differ_step < 0) d.first_differ_step = x.steps[i];
        const double scale = std::max(std::fabs(u), std::fabs(v));
        const double rel = std::isfinite(u) && std::isfinite(v) ? std::fabs(v - u) / scale : INFINITY;
        if (!(rel <= t.curve_rtol) && d.first_beyond_step < 0) {
          d.first_beyond_step = x.steps[i];
          d.first_beyond_rel = rel;
        }
        if (!(rel <= d.max_rel)) {
          d.max_rel = rel;
          d.max_step = x.steps[i];
        }
      }
      if (d.points == 0) d.problem = "no step in common";
    }
    c.curves.push_back(std::move(d));
  }
  for (const auto& y : b.curves) {
    bool found = false;
    for (const auto& x : a.curves) found = found || x.name == y.name;
    if (!found) {
      CurveDiff d;
      d.name = y.name;
      d.problem = "only in the second record";
      c.curves.push_back(std::move(d));
    }
  }

  // The words: the first thing beyond tolerance (curves first: they say when), else the figures.
  std::string beyond, beyond_tensor, figures, not_compared;
  for (const auto& d : c.curves) {
    if (!d.problem.empty()) {
      not_compared += (not_compared.empty() ? "" : ", ") + d.name + " (" + d.problem + ")";
      continue;
    }
    if (d.first_differ_step >= 0) c.identical = false;
    if (d.first_beyond_step >= 0) {
      c.within = false;
      if (beyond.empty())
        beyond = d.name + " parts at step " + std::to_string(d.first_beyond_step) + " (relative difference " + num(d.first_beyond_rel) +
                 " > curve_rtol " + num(t.curve_rtol) +
                 (d.max_step != d.first_beyond_step ? "; largest " + num(d.max_rel) + " at step " + std::to_string(d.max_step) : "") + ")";
    } else if (d.first_differ_step >= 0) {
      figures += (figures.empty() ? "" : "; ") + d.name + " largest relative difference " + num(d.max_rel) + " over " +
                 std::to_string(d.points) + " steps";
    }
  }
  const TensorDiff* worst = nullptr;
  std::int64_t differ = 0, elements = 0;
  int unkept = 0;
  for (const auto& d : c.tensors) {
    if (d.not_kept) {
      ++unkept;
      continue;
    }
    if (!d.problem.empty()) {
      c.identical = c.within = false;
      if (beyond_tensor.empty()) beyond_tensor = "parameter " + d.name + ": " + d.problem;
      continue;
    }
    differ += d.differ;
    elements += d.elements;
    if (d.differ) c.identical = false;
    if (d.beyond) {
      c.within = false;
      if (beyond_tensor.empty())
        beyond_tensor = "parameter " + d.name + ": " + std::to_string(d.beyond) + " of " + std::to_string(d.elements) +
                 " elements beyond atol " + num(t.param_atol) + " + rtol " + num(t.param_rtol) + " x |value| (largest |difference| " +
                 num(d.max_abs) + ", relative " + num(d.max_rel) + ")";
    }
    if (d.differ && (!worst || d.max_rel > worst->max_rel)) worst = &d;
  }
  if (worst)
    figures += std::string(figures.empty() ? "" : "; ") + "parameters: " + std::to_string(differ) + " of " + std::to_string(elements) +
               " elements differ, largest relative difference " + num(worst->max_rel) + " (" + worst->name + ", |difference| " +
               num(worst->max_abs) + ")";
  if (!beyond_tensor.empty()) beyond += (beyond.empty() ? "" : "; ") + beyond_tensor;
  if (unkept) not_compared += std::string(not_compared.empty() ? "" : ", ") + std::to_string(unkept) +
                              " parameter tensors past LOCKSTEP_NUMERICS_MAX_ELEMENTS (listed without values)";
  c.detail = !c.within ? beyond : c.identical ? "identical" : figures;
  if (!not_compared.empty()) c.detail += "; not compared: " + not_compared;
  return c;
}

}  // namespace lockstep::baseline
