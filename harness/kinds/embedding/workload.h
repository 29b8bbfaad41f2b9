#pragma once
// The embedding workload's layout, as scenarios/README.md documents it ("Workload
// `embedding`"): which tables a run has, how each is seeded, and how rows are sharded over the
// ranks. Declared here so that tests can hold it to the documentation; the workload itself is
// registered by harness/kinds/kinds.h.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reference/embedding/embedding.h"
#include "reference/partition/book.h"

namespace lockstep::workloads {

struct EmbeddingTable {
  ref::OptimizerOptions optimizer;
  ref::Storage storage;
  std::uint64_t seed;
  std::string name() const { return ref::to_string(optimizer.kind) + "/" + ref::to_string(storage); }
};

// Every (optimizer, storage) pair, optimizers outer, in the scenario's order. Table t has
// `optimizer` with its kind set, and is initialised from seed + t.
std::vector<EmbeddingTable> embedding_tables(const ref::OptimizerOptions& optimizer, const std::vector<ref::OptimizerKind>& kinds,
                                             const std::vector<ref::Storage>& storages, std::uint64_t seed);

// The book of `sharding` over `rows` rows and `parts` parts: "even" is a range book with sizes
// within one, larger parts first; "mod" a map book, row r on part r mod parts; "first_empty" a
// range book whose part 0 owns nothing and whose other parts are as "even" over parts - 1 (at
// one part, as "even").
std::shared_ptr<const ref::PartitionBook> embedding_book(const std::string& sharding, std::int64_t rows, int parts);

}  // namespace lockstep::workloads
