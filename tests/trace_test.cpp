// The per-rank trace (scenarios/README.md: `rank<r>.trace.jsonl`, one JSON line per call in
// record and verify modes), read back from a real 2-rank run of the collectives workload with
// count 8 in f32 and reduce max. Every expected value is worked out from the scenario: 8 f32
// elements are 32 bytes, an all_gather's output on 2 ranks 64, broadcast from root 0, and the
// ring's send goes to the other rank.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using test::TempDir;

TEST(TraceFieldsTest, EachCallIsOneLineWithTheDocumentedFieldsAndValues) {
  TempDir dir("lockstep_trace");
  const std::string file = dir.write("t.toml",
                                     "name = \"t.trace\"\n[run]\nworld_size = 2\nverify = \"record\"\n"
                                     "[workload]\nkind = \"collectives\"\nsteps = 1\ncount = 8\ndtypes = [\"f32\"]\n"
                                     "reduce = [\"max\"]\n[expect]\noutcome = \"pass\"\n");
  const auto r = launch::run_scenario(lockstep::validate::load_file(file).at(0), test::launch_options(dir));
  ASSERT_EQ(r.status, report::Status::kPass) << test::describe(r);
  for (int rank = 0; rank < 2; ++rank) {
    std::istringstream lines(test::read_file(dir / ("report/t.trace/rank" + std::to_string(rank) + ".trace.jsonl")));
    std::map<std::string, nlohmann::json> first;  // the first call of each op
    std::string line;
    int n = 0;
    while (std::getline(lines, line)) {
      const auto j = nlohmann::json::parse(line);
      ++n;
      EXPECT_EQ(j.at("rank"), rank) << line;
      EXPECT_LE(j.at("t_start_us").get<std::int64_t>(), j.at("t_end_us").get<std::int64_t>()) << line;
      first.emplace(j.at("op").get<std::string>(), j);
    }
    ASSERT_GT(n, 0) << "rank " << rank << " wrote no trace";
    const auto& ar = first.at("all_reduce");
    EXPECT_EQ(ar.at("kind"), "collective");
    EXPECT_EQ(ar.at("seq"), 0);
    EXPECT_EQ(ar.at("dtype"), "f32");
    EXPECT_EQ(ar.at("count"), 8);
    EXPECT_EQ(ar.at("device"), "cpu");
    EXPECT_EQ(ar.at("bytes"), 32);
    EXPECT_EQ(ar.at("reduce"), "max");
    EXPECT_EQ(ar.at("phase"), "mix");
    EXPECT_EQ(ar.at("step"), 0);
    EXPECT_EQ(ar.at("index"), 0);
    const auto& ag = first.at("all_gather");
    EXPECT_EQ(ag.at("count"), 8);
    EXPECT_EQ(ag.at("bytes"), 64);
    EXPECT_FALSE(ag.contains("reduce"));
    const auto& bc = first.at("broadcast");
    EXPECT_EQ(bc.at("root"), 0);
    EXPECT_EQ(bc.at("bytes"), 32);
    const auto& send = first.at("send");
    EXPECT_EQ(send.at("kind"), "p2p");
    EXPECT_EQ(send.at("peer"), 1 - rank);
    EXPECT_EQ(send.at("bytes"), 32);
    const auto& a2a = first.at("all_to_all");
    EXPECT_TRUE(a2a.contains("send_counts") && a2a.contains("recv_counts")) << a2a.dump();
  }
}

}  // namespace
}  // namespace lockstep
