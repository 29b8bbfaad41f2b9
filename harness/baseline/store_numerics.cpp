// A result's numbers beyond its digest in the baseline store (schema version 6's `numerics`
// table) and in its text export.
#include <cmath>
#include <sstream>

#include "harness/baseline/store.h"
#include "harness/core/error.h"

namespace lockstep::baseline {
namespace {

using Json = nlohmann::ordered_json;

std::string join_ints(const std::vector<std::int64_t>& v, char sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? std::string(1, sep) : "") + std::to_string(v[i]);
  return out;
}

std::vector<std::int64_t> split_ints(const std::string& text, char sep, const std::string& what) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, sep)) {
    try {
      std::size_t used = 0;
      out.push_back(std::stoll(part, &used));
      if (used != part.size()) throw std::invalid_argument(part);
    } catch (const std::exception&) {
      throw InputError(what + ": not a whole number: \"" + part + "\"");
    }
  }
  return out;
}

// JSON has no NaN or infinity: those are the strings "nan", "inf", "-inf".
Json values_json(const std::vector<double>& values) {
  Json a = Json::array();
  for (double v : values) {
    if (std::isfinite(v)) a.push_back(v);
    else a.push_back(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
  }
  return a;
}

std::vector<double> values_from_json(const Json& a) {
  std::vector<double> out;
  for (const auto& v : a) {
    if (v.is_number()) out.push_back(v.get<double>());
    else if (v == "nan") out.push_back(NAN);
    else if (v == "inf") out.push_back(INFINITY);
    else if (v == "-inf") out.push_back(-INFINITY);
    else throw InputError("numerics: not a value: " + v.dump());
  }
  return out;
}

// The elements of `shape`; InputError naming `what` for a negative dimension or more than 2^40.
std::int64_t elements_of(const std::vector<std::int64_t>& shape, const std::string& what) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw InputError(what + ": a negative dimension");
    if (d != 0 && n > (std::int64_t{1} << 40) / d) throw InputError(what + ": more than 2^40 elements");
    n *= d;
  }
  return n;
}

}  // namespace

void Store::put_numerics(std::int64_t result_id, const Numerics& n) {
  Statement ins(db_, "INSERT INTO numerics(result_id, pos, kind, name, shape, dtype, vals) VALUES(?,?,?,?,?,?,?)");
  std::int64_t pos = 0;
  for (const auto& t : n.tensors) {
    ins.bind(1, result_id).bind(2, pos++).bind(3, "tensor").bind(4, t.name).bind(5, join_ints(t.shape, 'x')).bind(6, t.dtype);
    if (t.kept) ins.bind_blob(7, to_bytes(t.values));
    else ins.bind_null(7);
    ins.run();
  }
  for (const auto& c : n.curves) {
    ins.bind(1, result_id).bind(2, pos++).bind(3, "curve").bind(4, c.name).bind(5, join_ints(c.steps, ',')).bind(6, "");
    ins.bind_blob(7, to_bytes(c.values));
    ins.run();
  }
}

Numerics Store::numerics(std::int64_t row, bool with_tensors) {
  Numerics n;
  Statement st(db_, "SELECT kind, name, shape, dtype, vals FROM numerics WHERE result_id = ?1 AND (?2 OR kind = 'curve') ORDER BY pos");
  st.bind(1, row).bind(2, with_tensors ? 1 : 0);
  const std::string where = db_.path() + ": numerics of result " + std::to_string(row);
  while (st.step()) {
    if (st.text(0) == "tensor") {
      TensorValues t;
      t.name = st.text(1);
      t.shape = split_ints(st.text(2), 'x', where);
      t.dtype = st.text(3);
      t.kept = !st.is_null(4);
      t.values = from_bytes(st.blob(4), where);
      if (t.kept && static_cast<std::int64_t>(t.values.size()) != elements_of(t.shape, where + ", tensor " + t.name))
        throw InputError(where + ": tensor " + t.name + " has " + std::to_string(t.values.size()) + " values, not its shape's");
      n.tensors.push_back(std::move(t));
    } else {
      CurveValues c;
      c.name = st.text(1);
      c.steps = split_ints(st.text(2), ',', where);
      c.values = from_bytes(st.blob(4), where);
      if (c.steps.size() != c.values.size()) throw InputError(where + ": curve " + c.name + " has steps and values of different lengths");
      n.curves.push_back(std::move(c));
    }
  }
  return n;
}

nlohmann::ordered_json Store::numerics_json(const Numerics& n) {
  Json tensors = Json::array(), curves = Json::array();
  for (const auto& t : n.tensors) {
    Json x{{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}, {"kept", t.kept}};
    if (t.kept) x["values"] = values_json(t.values);
    tensors.push_back(std::move(x));
  }
  for (const auto& c : n.curves) curves.push_back(Json{{"name", c.name}, {"steps", c.steps}, {"values", values_json(c.values)}});
  return Json{{"tensors", std::move(tensors)}, {"curves", std::move(curves)}};
}

Numerics Store::numerics_from_json(const nlohmann::ordered_json& j) {
  Numerics n;
  for (const auto& x : j.at("tensors")) {
    TensorValues t;
    t.name = x.at("name").get<std::string>();
    t.shape = x.at("shape").get<std::vector<std::int64_t>>();
    t.dtype = x.at("dtype").get<std::string>();
    t.kept = x.at("kept").get<bool>();
    if (t.kept) t.values = values_from_json(x.at("values"));
    const std::int64_t elements = elements_of(t.shape, "numerics: tensor " + t.name);
    if (t.kept && static_cast<std::int64_t>(t.values.size()) != elements)
      throw InputError("numerics: tensor " + t.name + " has " + std::to_string(t.values.size()) + " values for its shape's " +
                       std::to_string(elements));
    n.tensors.push_back(std::move(t));
  }
  for (const auto& x : j.at("curves")) {
    CurveValues c{x.at("name").get<std::string>(), x.at("steps").get<std::vector<std::int64_t>>(), values_from_json(x.at("values"))};
    if (c.steps.size() != c.values.size()) throw InputError("numerics: curve " + c.name + " has steps and values of different lengths");
    n.curves.push_back(std::move(c));
  }
  return n;
}

}  // namespace lockstep::baseline
