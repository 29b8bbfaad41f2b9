#pragma once
// Internal to harness/scenario: builds Config views over toml++ tables. Only config.cpp,
// scenario.cpp and their tests include this; toml++ stays out of every public header.
#include <toml++/toml.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/scenario/config.h"
#include "harness/scenario/scenario.h"

namespace lockstep::scenario::internal {

// One matrix value that replaces (or adds) one key of a table for one variant. The value is
// not copied, so messages about it keep pointing at its line in [matrix].
struct Override {
  std::string key;            // key within the overridden table, e.g. "num_workers"
  const toml::node* value;    // a node of the same document; never null
  std::string name;           // how messages name it, e.g. `matrix."workload.num_workers"`
  std::int64_t key_line = 0;  // line of the [matrix] key
};

// Returns a Config over the top-level table of a document parsed from `file`. Every view
// derived from it keeps `root` alive.
Config make_root_config(std::shared_ptr<const toml::table> root, std::string file);

// Returns a fresh view (its own set of keys read) of `config`'s table with `overrides`
// applied; an absent table becomes a table holding just the overrides.
Config with_overrides(const Config& config, std::vector<Override> overrides);

// Returns the node under `key` (an override first) or nullptr, and marks `key` read.
const toml::node* read_node(const Config& config, const std::string& key);

struct Entry {
  std::string key;
  const toml::node* value;
  std::int64_t key_line;  // 0 when unknown
};
// Returns the entries of the table itself, in toml++ iteration order (sorted by key),
// without marking them read; overrides are not included.
std::vector<Entry> entries(const Config& config);

// Returns the entries of the array of tables under `key` (e.g. [[inject]]), each a view
// named "[[key]]" in messages; empty when absent. Marks `key` read. Throws InputError when
// the value is not an array of tables.
std::vector<Config> get_table_array(const Config& config, const std::string& key);

// Returns how messages name `key` of this table: "run.world_size", `matrix."workload.x"`.
std::string qualified_name(const Config& config, const std::string& key);

// Throws InputError("file:line: <qualified key>: message") at the line of the key itself
// (where() points at its value).
[[noreturn]] void fail_at_key(const Config& config, const std::string& key,
                              const std::string& message);
// Throws InputError("file:line: name: message") at the line of `node`, a node of
// `config`'s document (the table's own line when the node has no source).
[[noreturn]] void fail_at_node(const Config& config, const toml::node& node,
                               const std::string& name, const std::string& message);

// Describes a value for messages: `string "two"`, `integer 3`, `float 0.5`, `a table`.
std::string describe(const toml::node& node);
// Formats a scalar as it appears in a variant string: `2`, `gloo`, `true`, `0.5`.
// Returns "" for arrays and tables.
std::string format_scalar(const toml::node& node);
using scenario::format_double;  // config.h

// The top-level table of any TOML file of lockstep's (e.g. the known-bug catalog), with
// file:line messages. Throws InputError.
Config load_document(const std::string& path);

// Refuses (InputError naming `t`'s "command" key) a command that cannot start: command_check.cpp.
void check_command(const Config& t, const std::vector<std::string>& command, const std::string& file);

}  // namespace lockstep::scenario::internal
