#include "harness/scenario/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>
#include <utility>

#include "harness/core/error.h"
#include "harness/scenario/config_internal.h"

namespace lockstep::scenario {

struct Config::Impl {
  // The keys any getter asked for, present or not: the keys allowed in this table.
  struct KeyLog {
    std::vector<std::string> order;  // first-ask order, for "allowed keys" lists
    std::set<std::string> seen;
    void add(const std::string& key) {
      if (seen.insert(key).second) order.push_back(key);
    }
  };

  std::shared_ptr<const toml::table> root;  // keeps the document alive; null without source
  const toml::table* table = nullptr;       // null: the table is absent (or no source)
  std::vector<internal::Override> overrides;
  std::string file;       // "" when there is no source: messages then carry no location
  std::string path;       // dotted name of this table ("run"); "" at the top level
  std::string label;      // "[run]", "[[inject]]"; "" at the top level
  std::int64_t line = 1;  // the table's line; its parent's when the table is absent
  std::shared_ptr<KeyLog> read = std::make_shared<KeyLog>();

  const internal::Override* find_override(const std::string& key) const {
    for (const auto& o : overrides) {
      if (o.key == key) return &o;
    }
    return nullptr;
  }

  const toml::node* lookup(const std::string& key) const {
    if (const auto* o = find_override(key)) return o->value;
    return table ? table->get(key) : nullptr;
  }

  const toml::node* take(const std::string& key) const {
    read->add(key);
    return lookup(key);
  }

  std::string location(std::int64_t at_line) const {
    if (file.empty()) return "";
    return file + ":" + std::to_string(at_line > 0 ? at_line : line);
  }

  std::string prefix(std::int64_t at_line) const {
    std::string loc = location(at_line);
    return loc.empty() ? "" : loc + ": ";
  }

  std::int64_t key_line(const std::string& key) const {
    if (const auto* o = find_override(key)) return o->key_line;
    if (table) {
      auto it = table->find(key);
      if (it != table->end()) return static_cast<std::int64_t>(it->first.source().begin.line);
    }
    return 0;
  }

  std::int64_t value_line(const std::string& key) const {
    if (const auto* node = lookup(key)) {
      auto value = static_cast<std::int64_t>(node->source().begin.line);
      if (value > 0) return value;
    }
    return key_line(key);
  }

  std::string name_of(const std::string& key) const;

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw InputError(prefix(value_line(key)) + name_of(key) + ": " + message);
  }

  [[noreturn]] void wrong_type(const std::string& key, const std::string& expected,
                               const toml::node& got) const {
    fail(key, "expected " + expected + ", got " + internal::describe(got));
  }

  [[noreturn]] void missing(const std::string& key) const {
    if (path.empty())
      throw InputError(prefix(line) + "missing required top-level key '" + key + "'");
    throw InputError(prefix(line) + label + " is missing required key '" + key + "'");
  }

  const toml::node& require(const std::string& key) const {
    const toml::node* node = take(key);
    if (!node) missing(key);
    return *node;
  }
};

// Grants config_internal.h's functions access to Config::impl_.
struct ConfigAccess {
  static const std::shared_ptr<Config::Impl>& impl(const Config& config) { return config.impl_; }
};

namespace {

using Impl = Config::Impl;

const Impl& impl_of(const Config& config) { return *ConfigAccess::impl(config); }

bool is_bare_key(const std::string& key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string qualify(const std::string& path, const std::string& key) {
  std::string k = is_bare_key(key) ? key : quote(key);
  return path.empty() ? k : path + "." + k;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

}  // namespace

std::string Config::Impl::name_of(const std::string& key) const {
  if (const auto* o = find_override(key)) return o->name;
  return qualify(path, key);
}

Config::Config() : impl_(std::make_shared<Impl>()) {}
Config::~Config() = default;
Config::Config(const Config&) = default;
Config& Config::operator=(const Config&) = default;
// Moves share, as copies do, so that a moved-from Config stays usable.
Config::Config(Config&& other) noexcept : impl_(other.impl_) {}
Config& Config::operator=(Config&& other) noexcept {
  impl_ = other.impl_;
  return *this;
}
Config::Config(std::shared_ptr<Impl> impl)
    : impl_(impl ? std::move(impl) : std::make_shared<Impl>()) {}

bool Config::has(const std::string& key) const { return impl_->lookup(key) != nullptr; }

std::int64_t Config::get_int(const std::string& key) const {
  const toml::node& node = impl_->require(key);
  if (const auto* v = node.as_integer()) return v->get();
  impl_->wrong_type(key, "an integer", node);
}

double Config::get_double(const std::string& key) const {
  const toml::node& node = impl_->require(key);
  if (const auto* v = node.as_floating_point()) {
    // TOML allows nan and inf; no key of lockstep means either (a sleep of nan seconds never
    // sleeps, a tolerance of inf accepts anything).
    if (!std::isfinite(v->get())) fail(key, "must be a finite number, got " + internal::format_double(v->get()));
    return v->get();
  }
  if (const auto* v = node.as_integer()) return static_cast<double>(v->get());
  impl_->wrong_type(key, "a number", node);
}

std::string Config::get_string(const std::string& key) const {
  const toml::node& node = impl_->require(key);
  if (const auto* v = node.as_string()) return v->get();
  impl_->wrong_type(key, "a string", node);
}

bool Config::get_bool(const std::string& key) const {
  const toml::node& node = impl_->require(key);
  if (const auto* v = node.as_boolean()) return v->get();
  impl_->wrong_type(key, "a boolean", node);
}

std::int64_t Config::get_int(const std::string& key, std::int64_t fallback) const {
  return impl_->take(key) ? get_int(key) : fallback;
}

double Config::get_double(const std::string& key, double fallback) const {
  return impl_->take(key) ? get_double(key) : fallback;
}

std::string Config::get_string(const std::string& key, const std::string& fallback) const {
  return impl_->take(key) ? get_string(key) : fallback;
}

bool Config::get_bool(const std::string& key, bool fallback) const {
  return impl_->take(key) ? get_bool(key) : fallback;
}

std::vector<std::int64_t> Config::get_int_list(const std::string& key,
                                               const std::vector<std::int64_t>& fallback) const {
  const toml::node* node = impl_->take(key);
  if (!node) return fallback;
  const toml::array* array = node->as_array();
  if (!array) impl_->wrong_type(key, "an array of integers", *node);
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const auto* v = element.as_integer();
    if (!v) {
      internal::fail_at_node(*this, element, impl_->name_of(key) + "[" + std::to_string(i) + "]",
                             "expected an integer, got " + internal::describe(element));
    }
    out.push_back(v->get());
  }
  return out;
}

std::vector<std::string> Config::get_string_list(const std::string& key,
                                                 const std::vector<std::string>& fallback) const {
  const toml::node* node = impl_->take(key);
  if (!node) return fallback;
  const toml::array* array = node->as_array();
  if (!array) impl_->wrong_type(key, "an array of strings", *node);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const auto* v = element.as_string();
    if (!v) {
      internal::fail_at_node(*this, element, impl_->name_of(key) + "[" + std::to_string(i) + "]",
                             "expected a string, got " + internal::describe(element));
    }
    out.push_back(v->get());
  }
  return out;
}

Config Config::get_table(const std::string& key) const {
  const toml::node* node = impl_->take(key);
  auto child = std::make_shared<Impl>();
  child->root = impl_->root;
  child->file = impl_->file;
  child->path = qualify(impl_->path, key);
  child->label = "[" + child->path + "]";
  child->line = impl_->line;
  if (node) {
    const toml::table* table = node->as_table();
    if (!table) impl_->wrong_type(key, "a table", *node);
    child->table = table;
    auto table_line = static_cast<std::int64_t>(table->source().begin.line);
    if (table_line <= 0) table_line = impl_->key_line(key);
    if (table_line > 0) child->line = table_line;
  }
  return Config(std::move(child));
}

std::string Config::where(const std::string& key) const {
  if (key.empty() || !impl_->lookup(key)) return impl_->location(impl_->line);
  return impl_->location(impl_->value_line(key));
}

void Config::fail(const std::string& key, const std::string& message) const {
  if (key.empty()) throw InputError(impl_->prefix(impl_->line) + message);
  impl_->fail(key, message);
}

void Config::finish() const {
  std::vector<std::string> present;
  if (impl_->table) {
    for (const auto& [k, value] : *impl_->table) present.emplace_back(k.str());
  }
  for (const auto& o : impl_->overrides) {
    if (!impl_->table || !impl_->table->contains(o.key)) present.push_back(o.key);
  }
  const auto& log = *impl_->read;
  // Every unknown key of the table is named, not only the first.
  std::vector<std::string> errors;
  for (const auto& key : present) {
    if (log.seen.count(key)) continue;
    std::string message = "unknown key";
    std::string best;
    std::size_t best_distance = 3;  // suggest only close matches
    for (const auto& allowed : log.order) {
      std::size_t d = edit_distance(key, allowed);
      if (d < best_distance && d < std::max<std::size_t>(allowed.size(), 2)) {
        best_distance = d;
        best = allowed;
      }
    }
    if (!best.empty()) message += " (did you mean '" + best + "'?)";
    if (log.order.empty()) {
      message += impl_->path.empty() ? "; no top-level keys are allowed"
                                     : "; no keys are allowed in " + impl_->label;
    } else if (impl_->path.empty()) {
      message += "; allowed top-level keys: " + join(log.order);
    } else {
      message += "; allowed keys in " + impl_->label + ": " + join(log.order);
    }
    try {
      internal::fail_at_key(*this, key, message);
    } catch (const InputError& e) {
      errors.emplace_back(e.what());
    }
  }
  if (errors.empty()) return;
  std::string all = errors.front();
  for (std::size_t i = 1; i < errors.size(); ++i) all += "\n" + errors[i];
  throw InputError(all);
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = 3;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance && d < std::max<std::size_t>(c.size(), 2)) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string format_double(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::int64_t read_int(const Config& c, const std::string& key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  const std::int64_t v = c.get_int(key, fallback);
  if (!c.has(key) || (v >= lo && v <= hi)) return v;
  if (hi == kNoUpperBound) c.fail(key, "must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  c.fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
}

bool Interval::contains(double v) const {
  const bool above = lo_open ? v > lo : v >= lo;
  const bool below = hi_open ? v < hi : v <= hi;
  return above && below;
}

std::string Interval::describe() const {
  if (std::isinf(hi)) return (lo_open ? "> " : ">= ") + format_double(lo);
  if (std::isinf(lo)) return (hi_open ? "< " : "<= ") + format_double(hi);
  return (lo_open ? "(" : "[") + format_double(lo) + ", " + format_double(hi) + (hi_open ? ")" : "]");
}

double read_double(const Config& c, const std::string& key, double fallback, const Interval& range) {
  const double v = c.get_double(key, fallback);  // finite: get_double refuses nan and inf
  if (!c.has(key) || range.contains(v)) return v;
  const std::string bound = range.describe();
  c.fail(key, (bound[0] == '[' || bound[0] == '(' ? "must be in " : "must be ") + bound + ", got " + format_double(v));
}

double read_double(const Config& c, const std::string& key, double fallback, double lo, double hi) {
  return read_double(c, key, fallback, Interval{lo, hi});
}

std::string read_choice(const Config& c, const std::string& key, const std::string& fallback,
                        std::initializer_list<const char*> allowed) {
  const std::string v = c.get_string(key, fallback);
  std::string names;
  for (const char* a : allowed) {
    if (v == a) return v;
    names += (names.empty() ? "" : ", ") + std::string(a);
  }
  c.fail(key, "unknown value \"" + v + "\"; allowed: " + names);
}

namespace internal {

Config make_root_config(std::shared_ptr<const toml::table> root, std::string file) {
  auto impl = std::make_shared<Impl>();
  impl->table = root.get();
  impl->root = std::move(root);
  impl->file = std::move(file);
  impl->line = 1;
  return Config(std::move(impl));
}

Config with_overrides(const Config& config, std::vector<Override> overrides) {
  const Impl& base = impl_of(config);
  auto impl = std::make_shared<Impl>();
  impl->root = base.root;
  impl->table = base.table;
  impl->overrides = base.overrides;
  for (auto& o : overrides) {
    auto same = std::find_if(impl->overrides.begin(), impl->overrides.end(),
                             [&](const Override& existing) { return existing.key == o.key; });
    if (same != impl->overrides.end()) {
      *same = std::move(o);
    } else {
      impl->overrides.push_back(std::move(o));
    }
  }
  impl->file = base.file;
  impl->path = base.path;
  impl->label = base.label;
  impl->line = base.line;
  return Config(std::move(impl));
}

const toml::node* read_node(const Config& config, const std::string& key) {
  return impl_of(config).take(key);
}

std::vector<Entry> entries(const Config& config) {
  std::vector<Entry> out;
  if (const toml::table* table = impl_of(config).table) {
    for (const auto& [k, value] : *table) {
      out.push_back(
          {std::string(k.str()), &value, static_cast<std::int64_t>(k.source().begin.line)});
    }
  }
  return out;
}

std::vector<Config> get_table_array(const Config& config, const std::string& key) {
  const Impl& base = impl_of(config);
  const toml::node* node = base.take(key);
  std::vector<Config> out;
  if (!node) return out;
  const toml::array* array = node->as_array();
  if (!array) base.wrong_type(key, "an array of tables ([[" + key + "]])", *node);
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const toml::table* table = element.as_table();
    if (!table) {
      fail_at_node(config, element, base.name_of(key) + "[" + std::to_string(i) + "]",
                   "expected a table, got " + describe(element));
    }
    auto impl = std::make_shared<Impl>();
    impl->root = base.root;
    impl->table = table;
    impl->file = base.file;
    impl->path = qualify(base.path, key);
    impl->label = "[[" + impl->path + "]]";
    auto line = static_cast<std::int64_t>(table->source().begin.line);
    impl->line = line > 0 ? line : base.line;
    out.emplace_back(std::move(impl));
  }
  return out;
}

std::string qualified_name(const Config& config, const std::string& key) {
  return impl_of(config).name_of(key);
}

void fail_at_key(const Config& config, const std::string& key, const std::string& message) {
  const Impl& impl = impl_of(config);
  throw InputError(impl.prefix(impl.key_line(key)) + impl.name_of(key) + ": " + message);
}

void fail_at_node(const Config& config, const toml::node& node, const std::string& name,
                  const std::string& message) {
  const Impl& impl = impl_of(config);
  throw InputError(impl.prefix(static_cast<std::int64_t>(node.source().begin.line)) + name + ": " +
                   message);
}

std::string format_scalar(const toml::node& node) {
  if (const auto* v = node.as_string()) return v->get();
  if (const auto* v = node.as_integer()) return std::to_string(v->get());
  if (const auto* v = node.as_floating_point()) return format_double(v->get());
  if (const auto* v = node.as_boolean()) return v->get() ? "true" : "false";
  if (node.is_array() || node.is_table()) return "";
  std::ostringstream os;  // dates and times print as in TOML
  node.visit([&](const auto& n) { os << n; });
  return os.str();
}

std::string describe(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "string " + quote(node.as_string()->get());
    case toml::node_type::integer:
      return "integer " + format_scalar(node);
    case toml::node_type::floating_point:
      return "float " + format_scalar(node);
    case toml::node_type::boolean:
      return "boolean " + format_scalar(node);
    case toml::node_type::date:
      return "date " + format_scalar(node);
    case toml::node_type::time:
      return "time " + format_scalar(node);
    case toml::node_type::date_time:
      return "date-time " + format_scalar(node);
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

}  // namespace internal
}  // namespace lockstep::scenario
