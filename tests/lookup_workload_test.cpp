// The lookup workload's digest, end to end, against its documented definition
// (scenarios/README.md): "the fetched features in query order", each feature 3·id + 1, hashed
// by FNV-1a over the values' little-endian bytes with FNV's 64-bit prime and lockstep's offset
// basis 1469598103934665603 (the standard basis has one more digit, ...037; lockstep's digests
// have always used this one, and recorded baselines hold them). The expected digest is
// computed here from the dumped query ids alone, so a digest of anything but every rank's
// features in order (a rank's share missing, zeros, another order) fails, even though it
// would still be the same at every world size, which is all the invariance check sees.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "reference/io/npy.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using test::TempDir;
using test::int64s;

constexpr std::uint64_t kStandardBasis = 14695981039346656037ull;
constexpr std::uint64_t kLockstepBasis = 1469598103934665603ull;

// FNV-1a with the 64-bit prime 1099511628211.
std::uint64_t fnv1a64(const unsigned char* bytes, std::size_t n, std::uint64_t basis) {
  std::uint64_t h = basis;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

// lockstep's digest: over each value's 8 bytes, least significant first, as 16 hex digits.
std::string digest_of(const std::vector<std::int64_t>& values) {
  std::vector<unsigned char> bytes;
  for (std::int64_t v : values) {
    for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<unsigned char>(static_cast<std::uint64_t>(v) >> (8 * b)));
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a64(bytes.data(), bytes.size(), kLockstepBasis)));
  return buf;
}

// The hash loop itself, against FNV-1a 64's published test vectors (standard basis).
TEST(LookupWorkloadTest, Fnv1aPublishedTestVectors) {
  const auto of = [](const std::string& s) {
    return fnv1a64(reinterpret_cast<const unsigned char*>(s.data()), s.size(), kStandardBasis);
  };
  EXPECT_EQ(of(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(of("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(of("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(digest_of({}), "14650fb0739d0383");  // the basis itself
}

struct LookupRun {
  std::string digest;
  std::vector<std::int64_t> ids;       // every rank's queries, rank 0's first
  std::vector<std::int64_t> features;  // every rank's fetched features, in the same order
};

LookupRun run_lookup(int world_size) {
  TempDir dir("lookupwl");
  const std::string file =
      dir.write("l.toml", "name = \"t.lookup\"\n[run]\nworld_size = " + std::to_string(world_size) +
                              "\ntimeout_s = 60\n[workload]\nkind = \"graph_lookup\"\ngraph = \"erdos_renyi\"\nnodes = 300\n"
                              "partition = \"random\"\nbook = \"map\"\nqueries = 101\n[expect]\noutcome = \"pass\"\n");
  const auto scenarios = lockstep::validate::load_file(file);
  EXPECT_EQ(scenarios.size(), 1u);
  LookupRun out;
  if (scenarios.size() != 1) return out;
  const auto r = launch::run_scenario(scenarios[0], test::launch_options(dir, /*dump=*/true));
  EXPECT_EQ(r.status, report::Status::kPass) << test::describe(r);
  out.digest = r.digest;
  const std::string dump = dir / "report/dump/t.lookup";
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string suffix = ".rank" + std::to_string(rank) + ".npy";
    const auto ids = int64s(io::read_npy(dump + "/lookup_ids" + suffix));
    const auto features = int64s(io::read_npy(dump + "/lookup_features" + suffix));
    EXPECT_EQ(ids.size(), features.size()) << "rank " << rank;
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.features.insert(out.features.end(), features.begin(), features.end());
  }
  return out;
}

TEST(LookupWorkloadTest, DigestIsEveryQuerysFeatureInQueryOrder) {
  const LookupRun one = run_lookup(1), three = run_lookup(3);
  ASSERT_EQ(one.ids.size(), 101u);
  // The query list is global: three ranks hold the same ids, in the same order, between them.
  EXPECT_EQ(three.ids, one.ids);
  std::vector<std::int64_t> expected;
  for (std::int64_t id : one.ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 300);
    expected.push_back(3 * id + 1);  // the book is "map": ids are the original ids
  }
  EXPECT_EQ(one.features, expected);
  EXPECT_EQ(three.features, expected);
  EXPECT_EQ(one.digest, digest_of(expected));
  EXPECT_EQ(three.digest, digest_of(expected));
}

}  // namespace
}  // namespace lockstep
