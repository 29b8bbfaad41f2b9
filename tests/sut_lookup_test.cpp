// The lookup capability's map book, feature-store form and per-id judgement (scenarios/README.md,
// "Capabilities"), end to end: tiny numpy adapters run as the ranks through launch::run_scenario.
// Expected values are hand-computed for 10 nodes in 2 partitions: with the range book id v is
// owned by partition v / 5 as its local id v % 5, and feature column c of node v is 2v + c
// (feature_dim 2); none come from lockstep's checker.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "harness/core/error.h"
#include "harness/launch/launcher.h"
#include "harness/validate/validate.h"
#include "reference/io/npy.h"
#include "test_util.h"

namespace lockstep {
namespace {

using test::TempDir;

// One scenario of 10 nodes, 2 partitions, 40 queries per group over 2 ranks, with `workload`
// (more [workload] keys) and an adapter whose body runs with inp, out, np, lockstep_sut in scope.
report::ScenarioResult run_lookup(const TempDir& dir, const std::string& workload, const std::string& body, bool dump = false) {
  const std::string script = dir.write("adapter.py", "import numpy as np\nimport lockstep_sut\ninp, out = lockstep_sut.start()\n" + body + "\nout.finish()\n");
  const std::string text = "name = \"sut.lookup\"\n[system]\nname = \"tiny\"\ncommand = [\"{python}\", \"" + script +
                           "\"]\npython_modules = [\"numpy\"]\n[run]\nworld_size = 2\ntimeout_s = 30\n[workload]\nkind = \"lookup\"\n"
                           "nodes = 10\nnum_parts = 2\nqueries = 40\nfeature_dim = 2\n" + workload + "\n[expect]\noutcome = \"pass\"\n";
  auto scenarios = validate::load_file(dir.write("s.toml", text));
  return launch::run_scenario(scenarios.at(0), test::launch_options(dir, dump));
}

// The range book's answers, the adapter's own closed form: held = the asked partition owns it.
const char* kRange =
    "def held(ids, parts):\n"
    "    return (ids >= 0) & (ids < 10) & (ids // 5 == parts)\n";

TEST(SutLookupTest, MapBookIsAShuffleOfTheAskedSizesAndItsAnswersPass) {
  TempDir dir("sutlookup");
  // Local id: the position among the partition's ids, ascending (the contract's definition).
  const auto r = run_lookup(dir, "book = \"map\"\npart_sizes = [3, 7]\ngroups = [\"partid.valid\", \"localnid.valid\"]",
                            "part_of = np.asarray(inp.array('part_of'))\n"
                            "local = {int(v): k for p in (0, 1) for k, v in enumerate(np.flatnonzero(part_of == p))}\n"
                            "ids = inp.share('ids.partid.valid')\n"
                            "out.save('partid.valid', part_of[ids].astype(np.int64))\n"
                            "ids = inp.share('ids.localnid.valid')\n"
                            "out.save('localnid.valid', np.array([local[int(v)] for v in ids], np.int64))\n");
  EXPECT_EQ(r.status, report::Status::kPass) << test::describe(r);
  const auto part_of = io::read_npy(dir / "report/sut.lookup/sut/inputs/part_of.npy");
  ASSERT_EQ(part_of.descr, "<i4");
  ASSERT_EQ(part_of.shape, (std::vector<std::int64_t>{10}));
  std::vector<std::int32_t> p(10);
  std::memcpy(p.data(), part_of.data.data(), 40);
  EXPECT_EQ(std::count(p.begin(), p.end(), 0), 3);
  EXPECT_EQ(std::count(p.begin(), p.end(), 1), 7);
  const auto manifest = test::read_file(dir / "report/sut.lookup/sut/inputs/manifest.json");
  EXPECT_CONTAINS(manifest, "\"book\": \"map\"");
  EXPECT_EQ(manifest.find("part_offsets"), std::string::npos) << "a map book has no range boundaries";
}

TEST(SutLookupTest, AMaskRejectsSingleIdsAndTheRestAreJudged) {
  TempDir dir("sutlookup");
  const auto r = run_lookup(dir, "groups = [\"localnid.mixed\"]",
                            std::string(kRange) +
                                "ids, parts = inp.share('ids.localnid.mixed'), inp.share('parts.localnid.mixed')\n"
                                "ok = held(ids, parts)\n"
                                "out.save('localnid.mixed', np.where(ok, ids % 5, -7))\n"
                                "out.save('localnid.mixed.answered', ok.astype(np.int8))\n");
  EXPECT_EQ(r.status, report::Status::kPass) << test::describe(r);
  bool noted = false;
  for (const auto& n : r.notes) noted = noted || n.find("localnid.mixed: ") != std::string::npos && n.find("rejected one by one") != std::string::npos;
  EXPECT_TRUE(noted) << "the per-id rejections are reported";
  // The mixed group holds every kind of query (valid, not owned, past the end, negative).
  const auto ids = test::int64s(io::read_npy(dir / "report/sut.lookup/sut/inputs/ids.localnid.mixed.npy"));
  const auto parts = test::int64s(io::read_npy(dir / "report/sut.lookup/sut/inputs/parts.localnid.mixed.npy"));
  int valid = 0, not_owned = 0, past = 0, negative = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0) ++negative;
    else if (ids[i] >= 10) ++past;
    else if (ids[i] / 5 == parts[i]) ++valid;
    else ++not_owned;
  }
  EXPECT_GT(valid, 0);
  EXPECT_GT(not_owned, 0);
  EXPECT_GT(past, 0);
  EXPECT_GT(negative, 0);
}

TEST(SutLookupTest, ANotOwnedIdReadingTheLastRowIsNamedThoughTheBadIdsBesideItAreRejected) {
  TempDir dir("sutlookup");
  // PyG's defect: ids the partition does not hold read its last row (local id 4 of 5); ids
  // outside [0, 10) are rejected one by one.
  const auto r = run_lookup(dir, "groups = [\"localnid.mixed\"]",
                            std::string(kRange) +
                                "ids, parts = inp.share('ids.localnid.mixed'), inp.share('parts.localnid.mixed')\n"
                                "inside = (ids >= 0) & (ids < 10)\n"
                                "out.save('localnid.mixed', np.where(held(ids, parts), ids % 5, 4))\n"
                                "out.save('localnid.mixed.answered', inside.astype(np.int8))\n");
  ASSERT_TRUE(r.diagnosis.has_value()) << test::describe(r);
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kInvariantViolation) << r.diagnosis->message;
  std::smatch m;
  const std::string msg = r.diagnosis->message;
  ASSERT_TRUE(std::regex_search(msg, m, std::regex(R"(id (\d+) \(owned by partition (\d)\) in partition (\d) -> local id 4, which is node (\d+)'s row, the partition's last)")))
      << msg;
  const long id = std::stol(m[1]), owner = std::stol(m[2]), asked = std::stol(m[3]), node = std::stol(m[4]);
  EXPECT_EQ(owner, id / 5);
  EXPECT_NE(asked, owner);
  EXPECT_EQ(node, asked * 5 + 4);
  EXPECT_CONTAINS(msg, "a lookup must reject them");
}

TEST(SutLookupTest, AWholeShareRejectionOfAMixedGroupIsResultMismatch) {
  TempDir dir("sutlookup");
  const auto r = run_lookup(dir, "groups = [\"localnid.mixed\"]", "out.attempt('localnid.mixed', lambda: 1 // 0)\n");
  ASSERT_TRUE(r.diagnosis.has_value()) << test::describe(r);
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kResultMismatch) << r.diagnosis->message;
  EXPECT_EQ(r.diagnosis->rank, 0);
  EXPECT_CONTAINS(r.diagnosis->message, "localnid.mixed: rank 0 rejected its whole share (ZeroDivisionError");
  EXPECT_CONTAINS(r.diagnosis->message, "reject only the bad ids, one by one");
}

TEST(SutLookupTest, AValidIdTheMaskRejectsIsResultMismatchNamingIt) {
  TempDir dir("sutlookup");
  const auto r = run_lookup(dir, "groups = [\"localnid.valid\"]",
                            "ids = inp.share('ids.localnid.valid')\n"
                            "out.save('localnid.valid', ids % 5)\n"
                            "mask = np.ones(len(ids), np.int8)\n"
                            "if inp.rank == 1: mask[2] = 0; open(out.directory + '/refused', 'w').write(str(ids[2]))\n"
                            "out.save('localnid.valid.answered', mask)\n");
  ASSERT_TRUE(r.diagnosis.has_value()) << test::describe(r);
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kResultMismatch) << r.diagnosis->message;
  EXPECT_EQ(r.diagnosis->rank, 1);
  const long id = std::stol(test::read_file(dir / "report/sut.lookup/sut/outputs/rank1/refused"));
  EXPECT_CONTAINS(r.diagnosis->message, "localnid.valid: rank 1 rejected id " + std::to_string(id) + " in partition " +
                                            std::to_string(id / 5) + ", which holds it as local id " + std::to_string(id % 5) + " (query #22)");
}

TEST(SutLookupTest, WrongFeaturesNameTheIdTheColumnAndBothValues) {
  TempDir dir("sutlookup");
  const auto r = run_lookup(dir, "groups = [\"store.valid\"]",
                            "ids = inp.share('ids.store.valid')\n"
                            "rows = np.stack([2 * ids, 2 * ids + 1], axis=1).astype(np.float32)\n"
                            "if inp.rank == 0: rows[3, 1] += 1; open(out.directory + '/changed', 'w').write(str(ids[3]))\n"
                            "out.save('store.valid', ids % 5)\n"
                            "out.save('store.valid.features', rows)\n");
  ASSERT_TRUE(r.diagnosis.has_value()) << test::describe(r);
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kResultMismatch) << r.diagnosis->message;
  EXPECT_EQ(r.diagnosis->rank, 0);
  const long id = std::stol(test::read_file(dir / "report/sut.lookup/sut/outputs/rank0/changed"));
  EXPECT_CONTAINS(r.diagnosis->message, "store.valid: the feature store of partition " + std::to_string(id / 5) + " returned for id " +
                                            std::to_string(id) + " (local row " + std::to_string(id % 5) + ") features with column 1 = " +
                                            std::to_string(2 * id + 2) + ", expected " + std::to_string(2 * id + 1) + " (query #3, rank 0)");
}

TEST(SutLookupTest, AMaskValueOtherThanZeroOrOneBreaksTheContract) {
  TempDir dir("sutlookup");
  const auto r = run_lookup(dir, "groups = [\"localnid.valid\"]",
                            "ids = inp.share('ids.localnid.valid')\n"
                            "out.save('localnid.valid', ids % 5)\n"
                            "out.save('localnid.valid.answered', np.full(len(ids), 2, np.int8))\n");
  ASSERT_TRUE(r.diagnosis.has_value()) << test::describe(r);
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kInvariantViolation) << r.diagnosis->message;
  EXPECT_CONTAINS(r.diagnosis->message, "value 2 at position 0: the mask holds 1 (answered) or 0 (rejected)");
}

TEST(SutLookupTest, AttemptEachAsksEachIdAgainWhenTheShareRaisesAndMasksOnlyThoseThatRaise) {
  TempDir dir("sutlookup");
  // A store that raises on any id it does not hold, for the whole call: the helper asks
  // again id by id, and the ids it held are answered.
  const auto r = run_lookup(dir, "groups = [\"store.mixed\"]",
                            std::string(kRange) +
                                "def lookup(ids, parts):\n"
                                "    if not held(ids, parts).all(): raise KeyError('not held')\n"
                                "    return ids % 5, np.stack([2 * ids, 2 * ids + 1], axis=1).astype(np.float32)\n"
                                "out.attempt_each(['store.mixed', 'store.mixed.features'], lookup,\n"
                                "                 inp.share('ids.store.mixed'), inp.share('parts.store.mixed'))\n");
  EXPECT_EQ(r.status, report::Status::kPass) << test::describe(r);
  const auto ids = test::int64s(io::read_npy(dir / "report/sut.lookup/sut/inputs/ids.store.mixed.npy"));
  const auto parts = test::int64s(io::read_npy(dir / "report/sut.lookup/sut/inputs/parts.store.mixed.npy"));
  const auto mask = io::read_npy(dir / "report/sut.lookup/sut/outputs/rank0/store.mixed.answered.npy");
  ASSERT_EQ(mask.descr, "|i1");
  ASSERT_EQ(mask.shape, (std::vector<std::int64_t>{20}));  // rank 0's share of 40 queries
  for (std::size_t i = 0; i < 20; ++i) {
    const bool held = ids[i] >= 0 && ids[i] < 10 && ids[i] / 5 == parts[i];
    EXPECT_EQ(mask.data[i], held ? 1 : 0) << "query " << i << ": id " << ids[i] << " in partition " << parts[i];
  }
}

TEST(SutLookupTest, TheDumpHoldsTheMixedGroupsAnswersAndWhichMustBeRejected) {
  TempDir dir("sutlookup");
  const auto r = run_lookup(dir, "groups = [\"store.mixed\"]",
                            std::string(kRange) +
                                "ids, parts = inp.share('ids.store.mixed'), inp.share('parts.store.mixed')\n"
                                "ok = held(ids, parts)\n"
                                "out.save('store.mixed', np.where(ok, ids % 5, 0))\n"
                                "out.save('store.mixed.features', np.where(ok[:, None], np.stack([2 * ids, 2 * ids + 1], axis=1), 0).astype(np.float32))\n"
                                "out.save('store.mixed.answered', ok.astype(np.int8))\n",
                            /*dump=*/true);
  ASSERT_EQ(r.status, report::Status::kPass) << test::describe(r);
  const std::string dump = dir / "report/dump/sut.lookup";
  const auto ids = test::int64s(io::read_npy(dump + "/inputs/ids.store.mixed.npy"));
  const auto parts = test::int64s(io::read_npy(dump + "/inputs/parts.store.mixed.npy"));
  const auto want = test::int64s(io::read_npy(dump + "/expected/store.mixed.npy"));
  const auto answered = test::int64s(io::read_npy(dump + "/expected/store.mixed.answered.npy"));
  ASSERT_EQ(want.size(), ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const bool held = ids[i] >= 0 && ids[i] < 10 && ids[i] / 5 == parts[i];
    EXPECT_EQ(answered[i], held ? 1 : 0) << "query " << i;
    if (held) EXPECT_EQ(want[i], ids[i] % 5) << "query " << i;
  }
}

TEST(SutLookupTest, BadKeysNameFileAndLine) {
  TempDir dir("sutlookup");
  struct Case {
    std::string workload;
    std::string expected;
  };
  const Case cases[] = {
      {"book = \"hash\"\n", "s.toml:9: workload.book: must be 'range' or 'map', got 'hash'"},
      {"nodes = 20000000\nbook = \"map\"\n", "nodes must be <= 16777216"},
      {"nodes = 10000000\nfeature_dim = 2\ngroups = [\"store.valid\"]\n", "store groups need nodes * feature_dim <= 16777216"},
      {"num_parts = 1\ngroups = [\"store.mixed\"]\n", "store.mixed needs num_parts >= 2"},
      {"feature_dim = 0\n", "feature_dim"},
  };
  for (const auto& c : cases) {
    const std::string text = "name = \"sut.bad\"\n[system]\nname = \"t\"\ncommand = [\"x\"]\n[run]\nworld_size = 1\n[workload]\nkind = \"lookup\"\n" +
                             c.workload + "[expect]\noutcome = \"pass\"\n";
    try {
      validate::load_file(dir.write("s.toml", text));
      ADD_FAILURE() << "accepted: " << c.workload;
    } catch (const InputError& e) {
      EXPECT_CONTAINS(e.what(), c.expected);
    }
  }
}

}  // namespace
}  // namespace lockstep
