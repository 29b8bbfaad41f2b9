// Tests of the one schema per [workload] kind (scenarios/README.md, "One schema per kind"): the
// shared readers of harness/kinds/<kind>/spec.h give the documented defaults, and a shared
// key has the same range whether lockstep's workload or a system under test ([system]) reads it.
// Also the public range-checked readers of harness/scenario/config.h they are built on.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "harness/core/error.h"
#include "harness/scenario/config.h"
#include "harness/scenario/config_internal.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "harness/kinds/embedding/spec.h"
#include "harness/kinds/sampling/spec.h"
#include "harness/kinds/training/spec.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using scenario::Config;
using scenario::Interval;

// The InputError message of `f`, or "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

class ConfigReadersTest : public ::testing::Test {
 protected:
  // The table [t] of a document whose line 2 is `body` (one key).
  Config table(const std::string& body) {
    path_ = tmp_.write("t" + std::to_string(n_++) + ".toml", "[t]\n" + body + "\n");
    return scenario::internal::load_document(path_).get_table("t");
  }
  test::TempDir tmp_{"lockstep-config-readers"};
  std::string path_;
  int n_ = 0;
};

TEST_F(ConfigReadersTest, ReadIntChecksTheRangeAndNamesFileLineAndKey) {
  EXPECT_EQ(scenario::read_int(table("k = 3"), "k", 7, 1, 3), 3);
  EXPECT_EQ(scenario::read_int(table(""), "k", 7, 1, 3), 7);  // absent: the fallback, unchecked
  const Config big = table("k = 4");
  EXPECT_EQ(error_of([&] { scenario::read_int(big, "k", 1, 1, 3); }), path_ + ":2: t.k: must be in [1, 3], got 4");
  const Config low = table("k = 0");
  EXPECT_EQ(error_of([&] { scenario::read_int(low, "k", 1, 1); }), path_ + ":2: t.k: must be >= 1, got 0");
}

TEST_F(ConfigReadersTest, ReadDoubleHonoursOpenAndUnboundedEnds) {
  const Interval lr{0, 10, /*lo_open=*/true};
  EXPECT_EQ(lr.describe(), "(0, 10]");
  EXPECT_EQ((Interval{0, 1, false, true}).describe(), "[0, 1)");
  EXPECT_EQ((Interval{0}).describe(), ">= 0");
  EXPECT_EQ(scenario::read_double(table("k = 10"), "k", 1, lr), 10.0);
  const Config zero = table("k = 0");
  EXPECT_EQ(error_of([&] { scenario::read_double(zero, "k", 1, lr); }), path_ + ":2: t.k: must be in (0, 10], got 0");
  const Config negative = table("k = -0.5");
  EXPECT_EQ(error_of([&] { scenario::read_double(negative, "k", 0, Interval{0}); }), path_ + ":2: t.k: must be >= 0, got -0.5");
  EXPECT_EQ(scenario::read_double(table("k = 1"), "k", 0, 0, 1), 1.0);  // closed [lo, hi]
}

TEST_F(ConfigReadersTest, ReadChoiceNamesTheAllowedValues) {
  EXPECT_EQ(scenario::read_choice(table("k = \"b\""), "k", "a", {"a", "b"}), "b");
  EXPECT_EQ(scenario::read_choice(table(""), "k", "a", {"a", "b"}), "a");
  const Config bad = table("k = \"c\"");
  EXPECT_EQ(error_of([&] { scenario::read_choice(bad, "k", "a", {"a", "b"}); }), path_ + ":2: t.k: unknown value \"c\"; allowed: a, b");
}

TEST(WorkloadSpecTest, EmptyTablesGiveTheDocumentedDefaults) {
  const Config empty;
  const auto t = workloads::TrainingSpec::read(empty, /*seed=*/5);
  EXPECT_EQ(t.graph.kind, "rmat");
  EXPECT_EQ(t.graph.seed, 5u);
  EXPECT_EQ(t.model.num_layers, 2);
  EXPECT_EQ(t.model.hidden, 32);
  EXPECT_EQ(t.feature_dim, 16);
  EXPECT_EQ(t.model.in_dim, 16);
  EXPECT_EQ(t.model.num_classes, 4);
  EXPECT_EQ(t.model.activation, ref::train::SageConfig::Activation::kSilu);
  EXPECT_EQ(t.fanouts, (std::vector<std::int64_t>{5, 5}));
  EXPECT_EQ(t.precision, ref::train::Precision::kF32);
  EXPECT_EQ(t.num_train, 1024);
  EXPECT_EQ(t.batch_size, 64);
  EXPECT_EQ(t.steps, 40);
  EXPECT_EQ(t.optimizer, ref::train::Optimizer::Kind::kSgd);
  EXPECT_EQ(t.lr, 0.1);
  EXPECT_EQ(t.momentum, 0.9);

  const auto s = workloads::SamplingSpec::read(empty, /*seed=*/0);
  EXPECT_EQ(s.fanouts, (std::vector<std::int64_t>{10, 5}));
  EXPECT_FALSE(s.replace);
  EXPECT_TRUE(s.in_edges);
  EXPECT_EQ(s.num_seeds, 256);
  EXPECT_EQ(s.batch_size, 64);

  const auto e = workloads::EmbeddingSpec::read(empty);
  EXPECT_EQ(e.rows, 1009);
  EXPECT_EQ(e.dim, 16);
  EXPECT_EQ(e.steps, 4);
  EXPECT_EQ(e.batch_sizes, (std::vector<std::int64_t>{24, 3, 0, 17}));
  EXPECT_EQ(e.hot_rows, 4);
  EXPECT_EQ(e.optimizer.lr, 0.1);
  EXPECT_EQ(e.optimizer.eps, -1.0);  // torch's default
  EXPECT_EQ(e.optimizer.beta1, 0.9);
  EXPECT_EQ(e.optimizer.beta2, 0.999);
  EXPECT_EQ(e.optimizer.initial_accumulator_value, 0.0);
  EXPECT_EQ(e.init_scale, 0.5);
  EXPECT_TRUE(e.bag_sizes.empty());  // no bags: one id per sample
  EXPECT_FALSE(e.bags());
  EXPECT_EQ(e.pooling, ref::BagPooling::kSum);
  EXPECT_FALSE(e.per_sample_weights);
}

// One [workload] line, loaded by lockstep's workload and by a system under test.
struct SharedKey {
  std::string kind;
  std::string line;      // e.g. "num_classes = 1024"
  std::string refusal;   // "" when accepted; else the message both give
};

void PrintTo(const SharedKey& k, std::ostream* os) { *os << k.kind << ": " << k.line; }

class SharedSchemaTest : public ::testing::TestWithParam<SharedKey> {
 protected:
  // Loads (validates) a scenario of `kind` whose [workload] has `line` on line 6; with_system adds
  // a [system] (never started: loading only validates). Returns the message after the path.
  std::string error(const SharedKey& k, bool with_system) {
    const std::string path = tmp_.write("s" + std::to_string(n_++) + ".toml",
                                        "name = \"t.shared\"\n[run]\nworld_size = 2\n[workload]\nkind = \"" + k.kind + "\"\n" + k.line +
                                            "\n[expect]\noutcome = \"pass\"\n" +
                                            (with_system ? "[system]\nname = \"t\"\ncommand = [\"true\"]\n" : ""));
    const std::string m = error_of([&] { (void)lockstep::validate::load_file(path); });
    if (m.empty()) return m;
    EXPECT_CONTAINS(m, path + ":");
    return m.substr(path.size());
  }
  test::TempDir tmp_{"lockstep-shared-schema"};
  int n_ = 0;
};

TEST_P(SharedSchemaTest, WorkloadAndSystemUnderTestGiveTheSameVerdict) {
  const SharedKey& k = GetParam();
  const std::string workload = error(k, /*with_system=*/false);
  const std::string system = error(k, /*with_system=*/true);
  EXPECT_EQ(workload, system) << "lockstep's workload and the capability read " << k.line << " differently";
  if (k.refusal.empty()) {
    EXPECT_EQ(workload, "");
  } else {
    EXPECT_CONTAINS(workload, k.refusal);
  }
}

// The ranges that differed before the readers were shared, at their unified bounds.
INSTANTIATE_TEST_SUITE_P(
    Kinds, SharedSchemaTest,
    ::testing::Values(SharedKey{"training", "num_classes = 1024", ""},
                      SharedKey{"training", "num_classes = 1025", ":6: workload.num_classes: must be in [2, 1024], got 1025"},
                      SharedKey{"training", "layers = 1", ":6: workload.layers: must be in [2, 3], got 1"},
                      SharedKey{"training", "fanouts = [-1, 5]", ""},
                      SharedKey{"training", "fanouts = [0, 5]", "each fanout must be -1 (all) or in 1..1000, got 0"},
                      SharedKey{"training", "hidden = 4096", ""}, SharedKey{"training", "steps = 100000", ""},
                      SharedKey{"training", "lr = 0", ":6: workload.lr: must be in (0, 10], got 0"},
                      SharedKey{"training", "momentum = 0.9995", ""},
                      SharedKey{"training", "activation = \"tanh\"", "unknown value \"tanh\"; allowed: silu, relu"},
                      SharedKey{"sampling", "fanouts = [-1, 5]", ""},
                      SharedKey{"sampling", "fanouts = [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000]", ""},
                      SharedKey{"sampling", "fanouts = [0]", "each fanout must be -1 (all) or in 1..1000, got 0"},
                      SharedKey{"sampling", "num_seeds = 0", ""}, SharedKey{"sampling", "batch_size = 0", "must be >= 1, got 0"},
                      SharedKey{"embedding", "rows = 16777216", ""},
                      SharedKey{"embedding", "rows = 16777217", ":6: workload.rows: must be in [1, 16777216], got 16777217"},
                      SharedKey{"embedding", "beta1 = 0.9999995", ""}, SharedKey{"embedding", "init_scale = 1e-7", ""},
                      SharedKey{"embedding", "hot_rows = 0", ":6: workload.hot_rows: must be >= 1, got 0"},
                      SharedKey{"embedding", "bag_sizes = [3, 0, 1024]", ""},
                      SharedKey{"embedding", "bag_sizes = []", ":6: workload.bag_sizes: must not be empty"},
                      SharedKey{"embedding", "bag_sizes = [2, 1025]", ":6: workload.bag_sizes: each bag size must be in 0..1024, got 1025"},
                      SharedKey{"embedding", "bag_sizes = [2]\npooling = \"max\"", "unknown value \"max\"; allowed: sum, mean"},
                      SharedKey{"embedding", "pooling = \"mean\"", ":6: workload.pooling: needs bag_sizes"},
                      SharedKey{"embedding", "per_sample_weights = true", ":6: workload.per_sample_weights: needs bag_sizes"},
                      SharedKey{"embedding", "bag_sizes = [2]\npooling = \"mean\"\nper_sample_weights = true", ""},
                      SharedKey{"embedding", "id_dtype = \"int32\"", ""},
                      SharedKey{"embedding", "id_dtype = \"int16\"", "unknown value \"int16\"; allowed: int64, int32"},
                      SharedKey{"split", "num_ids = 16777216", ""},
                      SharedKey{"split", "num_ids = 16777217", ":6: workload.num_ids: must be in [0, 16777216], got 16777217"},
                      SharedKey{"split", "batch_size = 16777216", ""},
                      SharedKey{"split", "batch_size = 16777217", ":6: workload.batch_size: must be in [1, 16777216], got 16777217"},
                      SharedKey{"split", "batch_size = 0", ":6: workload.batch_size: must be in [1, 16777216], got 0"}),
    [](const ::testing::TestParamInfo<SharedKey>& info) { return info.param.kind + "_" + std::to_string(info.index); });

// What a capability cannot check is refused naming the key; lockstep's workload runs it.
TEST_F(SharedSchemaTest, CapabilityLimitsAreRefusedOnlyWithASystem) {
  const SharedKey bf16_reduce{"training", "precision = \"bf16_reduce\"", ""};
  EXPECT_EQ(error(bf16_reduce, /*with_system=*/false), "");
  EXPECT_CONTAINS(error(bf16_reduce, /*with_system=*/true), ":6: workload.precision: a system under test trains in \"fp32\" or \"bf16\"");
  const SharedKey out{"sampling", "edges_dir = \"out\"", ""};
  EXPECT_EQ(error(out, /*with_system=*/false), "");
  EXPECT_CONTAINS(error(out, /*with_system=*/true), ":6: workload.edges_dir: systems under test sample in-edges");
}

// Bags are refused, naming the key, where one side cannot check them yet.
TEST_F(SharedSchemaTest, BagLimitsNameTheKey) {
  EXPECT_CONTAINS(error({"embedding", "bag_sizes = [2]\nstorages = [\"bf16\"]", ""}, /*with_system=*/false),
                  ":7: workload.storages: bags (bag_sizes) are checked with f32 storage in this version");
  EXPECT_CONTAINS(error({"embedding", "bag_sizes = [2]\nbad_id_groups = [\"negative\"]\noptimizer = \"sgd\"", ""}, /*with_system=*/true),
                  ":7: workload.bad_id_groups: is checked with one id per sample in this version");
}

// Each side's own keys stay its own: an unknown key on the other side.
TEST_F(SharedSchemaTest, SideSpecificKeysAreUnknownOnTheOtherSide) {
  EXPECT_CONTAINS(error({"training", "bucket_bytes = 64", ""}, /*with_system=*/true), "workload.bucket_bytes: unknown key");
  EXPECT_CONTAINS(error({"sampling", "repeats = 2", ""}, /*with_system=*/false), "workload.repeats: unknown key");
  EXPECT_CONTAINS(error({"embedding", "optimizer = \"sgd\"", ""}, /*with_system=*/false), "workload.optimizer: unknown key");
  EXPECT_CONTAINS(error({"embedding", "optimizers = [\"sgd\"]", ""}, /*with_system=*/true), "workload.optimizers: unknown key");
}

// The two partition lookups take different inputs, so they are different kinds: "lookup" (a
// system's partition book over explicit part sizes) and "graph_lookup" (lockstep's, on a graph).
TEST_F(SharedSchemaTest, LookupIsTheCapabilityAndGraphLookupTheWorkload) {
  EXPECT_EQ(error({"lookup", "part_sizes = [1, 2]", ""}, /*with_system=*/true), ":6: workload.part_sizes: has 2 entries, num_parts is 3");
  EXPECT_EQ(error({"graph_lookup", "book = \"map\"", ""}, /*with_system=*/false), "");
  EXPECT_CONTAINS(error({"lookup", "queries = 8", ""}, /*with_system=*/false),
                  ":5: workload.kind: unknown workload 'lookup' (known: ");
  EXPECT_CONTAINS(error({"lookup", "queries = 8", ""}, /*with_system=*/false), "lockstep's own partition lookup on a graph is 'graph_lookup'");
}

// Loading parses the scenario schema; validation against the workload (or the capability) is
// the step after it, which the CLI's and a rank's loading take (harness/validate).
TEST(ValidateTest, ParsingChecksTheSchemaAndValidationTheWorkloadKeys) {
  test::TempDir tmp("lockstep-validate");
  const std::string path = tmp.write("v.toml", "name = \"t.v\"\n[workload]\nkind = \"training\"\nnum_clases = 8\n[expect]\noutcome = \"pass\"\n");
  auto parsed = scenario::load_file(path);
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_CONTAINS(error_of([&] { validate::check(parsed[0]); }), path + ":4: workload.num_clases: unknown key (did you mean 'num_classes'?)");
  EXPECT_CONTAINS(error_of([&] { (void)validate::load_paths({path}); }), path + ":4: workload.num_clases: unknown key");
  // A schema error is the parser's own, with or without validation.
  const std::string bad_run = tmp.write("r.toml", "name = \"t.r\"\n[run]\nworld_size = 0\n[workload]\nkind = \"training\"\n[expect]\noutcome = \"pass\"\n");
  EXPECT_EQ(error_of([&] { (void)scenario::load_file(bad_run); }), bad_run + ":3: run.world_size: must be in [1, 64], got 0");
  EXPECT_EQ(error_of([&] { (void)validate::load_file(bad_run); }), bad_run + ":3: run.world_size: must be in [1, 64], got 0");
}

// The contract's key list cannot drift from the schema reader: every key a system under test's
// capability accepts (as the reader itself lists them when it refuses an unknown key) is named,
// in backquotes, in that capability's paragraph of scenarios/README.md ("**`<kind>`**: ..." up to
// the next capability's). The capabilities are the ones the reader names for a kind it refuses.
TEST(ContractKeysTest, EveryKeyACapabilityAcceptsIsNamedInItsContractParagraph) {
  test::TempDir tmp("lockstep-contract-keys");
  auto refusal = [&](const std::string& kind) {
    const std::string path = tmp.write(kind + ".toml", "name = \"t.k\"\n[system]\nname = \"s\"\ncommand = [\"true\"]\n[workload]\nkind = \"" +
                                                           kind + "\"\nzz_not_a_key = 1\n[expect]\noutcome = \"pass\"\n");
    return error_of([&] { validate::check(scenario::load_file(path).at(0)); });
  };
  auto split = [](const std::string& list) {
    std::vector<std::string> out;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) out.push_back(item.substr(item.find_first_not_of(' ')));
    return out;
  };
  const std::string kinds_error = refusal("collectives");
  const std::string can = "a system under test can do '";
  ASSERT_NE(kinds_error.find(can), std::string::npos) << kinds_error;
  const std::size_t from = kinds_error.find(can) + can.size();
  const std::vector<std::string> kinds = split(kinds_error.substr(from, kinds_error.find('\'', from) - from));
  ASSERT_GE(kinds.size(), 5u) << kinds_error;  // embedding, lookup, sampling, split, training

  std::ifstream in(LOCKSTEP_SOURCE_DIR "/scenarios/README.md");
  const std::string readme{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::size_t> starts;
  for (const auto& kind : kinds) {
    const std::size_t at = readme.find("**`" + kind + "`**:");
    ASSERT_NE(at, std::string::npos) << "no paragraph for the capability " << kind;
    starts.push_back(at);
  }
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    std::size_t end = readme.size();
    for (const std::size_t s : starts) {
      if (s > starts[k] && s < end) end = s;
    }
    const std::string paragraph = readme.substr(starts[k], end - starts[k]);
    const std::string error = refusal(kinds[k]);
    const std::string allowed = "allowed keys in [workload]: ";
    ASSERT_NE(error.find(allowed), std::string::npos) << error;
    const std::vector<std::string> keys = split(error.substr(error.find(allowed) + allowed.size()));
    EXPECT_GE(keys.size(), 3u) << error;
    for (const auto& key : keys) {
      if (key == "kind") continue;  // the section's own name
      EXPECT_NE(paragraph.find("`" + key + "`"), std::string::npos) << kinds[k] << ": key '" << key << "' is not named in its paragraph";
    }
  }
}

}  // namespace
}  // namespace lockstep
