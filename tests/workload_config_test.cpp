// Tests of every workload's numeric keys at the edges of the ranges that scenarios/README.md
// documents ("Workloads" and "Workload `embedding`"): each bound is accepted, the value just
// beyond it is refused with an InputError naming file:line and the key. The ranges below are
// copied from that document, not from the code. Also the embedding workload's documented
// layout (harness/kinds/embedding/workload.h): table order and seeds, and the three shardings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/core/error.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "harness/kinds/embedding/workload.h"
#include "tests/test_util.h"

namespace lockstep::workloads {
namespace {

// A range as documented: [lo, hi] with either end open or absent.
struct Range {
  std::string workload;
  std::string key;
  bool integer;
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;
  std::string wrap = "%s";  // how a value is written, e.g. "[%s]" for a list
};

void PrintTo(const Range& r, std::ostream* os) { *os << r.workload << "." << r.key; }

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTwo20 = 1 << 20, kTwo24 = 1 << 24, kTwo26 = 1 << 26, kTwo28 = 1 << 28, kTwo30 = 1 << 30;

Range I(std::string w, std::string k, std::optional<double> lo, std::optional<double> hi, std::string wrap = "%s") {
  return Range{std::move(w), std::move(k), true, lo, hi, false, false, std::move(wrap)};
}
Range F(std::string w, std::string k, std::optional<double> lo, bool lo_open, std::optional<double> hi, bool hi_open) {
  return Range{std::move(w), std::move(k), false, lo, hi, lo_open, hi_open, "%s"};
}

const std::vector<Range>& documented() {
  static const std::vector<Range> all = {
      // Workload `embedding` (its key table).
      I("embedding", "rows", 1, kTwo24), I("embedding", "dim", 1, 4096), I("embedding", "steps", 1, 1000),
      I("embedding", "batch_sizes", 0, kTwo20, "[%s]"), I("embedding", "hot_rows", 1, std::nullopt),
      F("embedding", "lr", 0, false, 100, false), F("embedding", "eps", 0, false, 1, false),
      F("embedding", "beta1", 0, false, 1, true), F("embedding", "beta2", 0, false, 1, true),
      F("embedding", "initial_accumulator_value", 0, false, std::nullopt, false),
      F("embedding", "init_scale", 0, true, 1000, false),
      // Workloads table.
      I("collectives", "steps", 1, 100000), I("collectives", "count", 1, kTwo26),
      F("collectives", "compute_ms", 0, false, std::nullopt, false),
      I("latency", "iterations", 1, std::nullopt), I("latency", "warmup", 0, std::nullopt), I("latency", "count", 1, std::nullopt),
      I("split", "num_ids", 0, kTwo24), I("split", "batch_size", 1, kTwo24),
      I("graph_lookup", "num_parts", 1, 1024), I("graph_lookup", "queries", 0, kTwo24),
      I("sampling", "fanouts", 1, 1000, "[%s]"), I("sampling", "num_workers", 0, 64), I("sampling", "prefetch", 1, 64),
      I("sampling", "uniformity_draws", 0, 10'000'000), I("sampling", "num_seeds", 0, std::nullopt),
      I("sampling", "batch_size", 1, std::nullopt), I("sampling", "epochs", 1, 100),
      I("training", "layers", 2, 3), I("training", "hidden", 1, 4096), I("training", "feature_dim", 1, 4096),
      I("training", "num_classes", 2, 1024), I("training", "fanouts", 1, 1000, "[%s, 5]"), I("training", "batch_size", 1, std::nullopt),
      I("training", "steps", 1, 100000), I("training", "num_train", 1, std::nullopt), I("training", "num_eval", 0, std::nullopt),
      I("training", "bucket_bytes", 4, kTwo30), I("training", "num_workers", 0, 16), I("training", "embedding_dim", 0, 1024),
      F("training", "lr", 0, true, 10, false), F("training", "momentum", 0, false, 1, true),
      F("training", "embedding_lr", 0, true, 100, false), F("training", "curve_rtol", 0, false, 1, false),
      // Graph keys (graph_lookup, sampling, training).
      I("graph_lookup", "scale", 1, 26), I("graph_lookup", "nodes", 1, kTwo26), I("graph_lookup", "edges", 0, kTwo28),
      F("graph_lookup", "exponent", 0, true, std::nullopt, false), F("graph_lookup", "isolated_fraction", 0, false, 1, true),
  };
  return all;
}

// `v` as TOML: an integer, or a float with enough digits to round-trip.
std::string toml_number(double v, bool integer) {
  char buf[64];
  if (integer) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (!integer && s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

class DocumentedRangeTest : public ::testing::TestWithParam<Range> {
 protected:
  // Writes a scenario whose [workload] sets `key` to `value` (on line 6) and returns its path.
  std::string write(const Range& r, double value) {
    char text[64];
    std::snprintf(text, sizeof text, r.wrap.c_str(), toml_number(value, r.integer).c_str());
    // World size 2: the graph and training keys need no more, the collectives fit it.
    return tmp_.write(r.workload + "_" + r.key + "_" + std::to_string(n_++) + ".toml",
                      "name = \"t.bounds\"\n[run]\nworld_size = 2\n[workload]\nkind = \"" + r.workload + "\"\n" + r.key + " = " + text +
                          "\n[expect]\noutcome = \"pass\"\n");
  }
  // The InputError of loading (validating) `path`, or "" when it loads.
  static std::string error_of(const std::string& path) {
    try {
      (void)lockstep::validate::load_file(path);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  void expect_accepted(const Range& r, double v) {
    const std::string m = error_of(write(r, v));
    EXPECT_EQ(m, "") << r.key << " = " << toml_number(v, r.integer) << " is inside the documented range";
  }
  void expect_refused(const Range& r, double v) {
    const std::string path = write(r, v);
    const std::string m = error_of(path);
    EXPECT_CONTAINS(m, path + ":6: workload." + r.key + ": ") << r.key << " = " << toml_number(v, r.integer) << " is outside it";
  }

  test::TempDir tmp_{"lockstep-workload-config"};
  int n_ = 0;
};

TEST_P(DocumentedRangeTest, BoundsAreAcceptedAndTheValuesBeyondThemRefused) {
  const Range& r = GetParam();
  // The next value: an integer's neighbour, a float's next double (past 0, a tiny normal one,
  // which every TOML reader parses exactly).
  auto step = [&](double v, double dir) { return r.integer ? v + dir : v == 0 ? dir * 1e-300 : std::nextafter(v, dir * kInf); };
  if (r.lo) {
    if (r.lo_open) {
      expect_refused(r, *r.lo);
      expect_accepted(r, step(*r.lo, +1));
    } else {
      expect_accepted(r, *r.lo);
      expect_refused(r, step(*r.lo, -1));
    }
  }
  if (r.hi) {
    if (r.hi_open) {
      expect_refused(r, *r.hi);
      expect_accepted(r, step(*r.hi, -1));
    } else {
      expect_accepted(r, *r.hi);
      expect_refused(r, step(*r.hi, +1));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workloads, DocumentedRangeTest, ::testing::ValuesIn(documented()),
                         [](const ::testing::TestParamInfo<Range>& info) { return info.param.workload + "_" + info.param.key; });

// Fanouts also take -1 (all neighbours); nothing else below 1.
TEST_F(DocumentedRangeTest, FanoutsTakeMinusOneForAllButNoOtherValueBelowOne) {
  for (const char* w : {"sampling", "training"}) {
    Range r = I(w, "fanouts", std::nullopt, std::nullopt, std::string(w) == "training" ? "[%s, 5]" : "[%s]");
    expect_accepted(r, -1);
    expect_refused(r, -2);
    expect_refused(r, 0);
  }
}

// ---- the embedding workload's layout ----

TEST(EmbeddingLayoutTest, TablesAreEveryOptimizerStoragePairOptimizersOuterSeededRunSeedPlusT) {
  using ref::OptimizerKind;
  using ref::Storage;
  ref::OptimizerOptions opt;
  opt.lr = 0.25;
  const auto t = embedding_tables(opt, {OptimizerKind::kAdam, OptimizerKind::kSgd}, {Storage::kBF16, Storage::kF32, Storage::kF16}, 40);
  const std::vector<std::string> names = {"adam/bf16", "adam/f32", "adam/f16", "sgd/bf16", "sgd/f32", "sgd/f16"};
  ASSERT_EQ(t.size(), names.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].name(), names[i]);
    EXPECT_EQ(t[i].seed, 40u + i);
    EXPECT_EQ(t[i].optimizer.lr, 0.25);
  }
  EXPECT_EQ(t[0].optimizer.kind, OptimizerKind::kAdam);
  EXPECT_EQ(t[3].optimizer.kind, OptimizerKind::kSgd);
}

std::vector<std::int64_t> part_sizes(const ref::PartitionBook& b) {
  std::vector<std::int64_t> out;
  for (int p = 0; p < b.num_parts(); ++p) out.push_back(b.part_size(p));
  return out;
}

TEST(EmbeddingLayoutTest, ShardingsGiveTheDocumentedParts) {
  using V = std::vector<std::int64_t>;
  // even: 10 rows over 4 parts, within one, larger first.
  EXPECT_EQ(part_sizes(*embedding_book("even", 10, 4)), (V{3, 3, 2, 2}));
  // first_empty: part 0 owns nothing, the other three share 10 as "even" would.
  const auto fe = embedding_book("first_empty", 10, 4);
  EXPECT_EQ(part_sizes(*fe), (V{0, 4, 3, 3}));
  // At one part there is nothing to leave empty.
  EXPECT_EQ(part_sizes(*embedding_book("first_empty", 10, 1)), (V{10}));
  // mod: row r on part r mod 3; 10 rows give 4, 3, 3.
  const auto mod = embedding_book("mod", 10, 3);
  EXPECT_EQ(part_sizes(*mod), (V{4, 3, 3}));
  const std::vector<std::int64_t> ids = {0, 1, 2, 3, 7, 9};
  ref::IdArray parts;
  mod->nid2partid(ref::IdSpan{ids.data(), 6, ref::IdType::kI64, ref::Device{}}, parts);
  const auto* p = static_cast<const std::int32_t*>(parts.data());
  EXPECT_EQ((std::vector<std::int32_t>(p, p + 6)), (std::vector<std::int32_t>{0, 1, 2, 0, 1, 0}));
  fe->nid2partid(ref::IdSpan{ids.data(), 6, ref::IdType::kI64, ref::Device{}}, parts);
  const auto* q = static_cast<const std::int32_t*>(parts.data());
  EXPECT_EQ((std::vector<std::int32_t>(q, q + 6)), (std::vector<std::int32_t>{1, 1, 1, 1, 3, 3}));
}

}  // namespace
}  // namespace lockstep::workloads
