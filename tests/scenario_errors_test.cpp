// Tests of the scenario schema's errors: missing, unknown and mistyped keys, bad values, and TOML
// syntax errors, each an InputError that names the file:line written in the test's own TOML text.
#include "tests/test_util.h"
#include "harness/scenario/scenario.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/scenario_test_util.h"

namespace lockstep::scenario {
namespace {

using schema_test::input_error;
using schema_test::kMinimal;
using schema_test::load_file;
using schema_test::ScenarioTest;

TEST_F(ScenarioTest, MissingKeyNamesTheTable) {
  std::string path = write("missing.toml", R"(name = "comm.missing"
[workload]
kind = "collectives"

[expect]
rank = 1
)");
  std::string message = input_error([&] { load_file(path); });
  EXPECT_CONTAINS(message, path + ":5: [expect] is missing required key 'outcome'");
}

TEST_F(ScenarioTest, MissingTopLevelKeyAndTableNameLineOne) {
  std::string no_name = write("no_name.toml", R"(description = "no name"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
)");
  std::string message = input_error([&] { load_file(no_name); });
  EXPECT_CONTAINS(message, no_name + ":1: missing required top-level key 'name'");

  std::string no_expect = write("no_expect.toml", R"(name = "comm.no_expect"
[workload]
kind = "collectives"
)");
  // [expect] is optional: without it the scenario must pass.
  const auto loaded = load_file(no_expect);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_FALSE(loaded[0].expect.kind.has_value());
  EXPECT_EQ(loaded[0].expect.expected_label(), "pass");

  std::string no_workload = write("no_workload.toml", R"(name = "comm.no_workload"
[expect]
outcome = "pass"
)");
  message = input_error([&] { load_file(no_workload); });
  EXPECT_CONTAINS(message, no_workload + ":1: missing required table [workload]");

  std::string no_kind = write("no_kind.toml", R"(name = "comm.no_kind"
[workload]
[expect]
outcome = "pass"
)");
  message = input_error([&] { load_file(no_kind); });
  EXPECT_CONTAINS(message, no_kind + ":2: [workload] is missing required key 'kind'");
}

TEST_F(ScenarioTest, WrongTypeNamesTheValue) {
  std::string path = write("wrong_type.toml", R"(name = "comm.wrong_type"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
[run]
world_size = "two"
)");
  std::string message = input_error([&] { load_file(path); });
  EXPECT_CONTAINS(message, path + ":7: run.world_size: expected an integer, got string \"two\"");

  std::string tags = write("wrong_tag.toml", R"(name = "comm.wrong_tag"
tags = ["comm",
  3]
[workload]
kind = "collectives"
[expect]
outcome = "pass"
)");
  message = input_error([&] { load_file(tags); });
  EXPECT_CONTAINS(message, tags + ":3: tags[1]: expected a string, got integer 3");

  std::string table = write("wrong_table.toml", R"(name = "comm.wrong_table"
workload = "collectives"
[expect]
outcome = "pass"
)");
  message = input_error([&] { load_file(table); });
  EXPECT_CONTAINS(message, table + ":2: workload: expected a table, got string \"collectives\"");
}

TEST_F(ScenarioTest, UnknownTopLevelKey) {
  std::string path = write("unknown_top.toml", R"(name = "comm.unknown_top"
descripton = "typo"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
)");
  std::string message = input_error([&] { load_file(path); });
  EXPECT_CONTAINS(message, path + ":2: descripton: unknown key");
  EXPECT_CONTAINS(message, "did you mean 'description'");
  EXPECT_CONTAINS(message, "allowed top-level keys: name, description, tags");
}

TEST_F(ScenarioTest, UnknownKeyInRun) {
  std::string path = write("unknown_run.toml", R"(name = "comm.unknown_run"
[workload]
kind = "collectives"
[run]
backend = "gloo"
wrld_size = 2
[expect]
outcome = "pass"
)");
  std::string message = input_error([&] { load_file(path); });
  EXPECT_CONTAINS(message, path + ":6: run.wrld_size: unknown key");
  EXPECT_CONTAINS(message, "did you mean 'world_size'");
  EXPECT_CONTAINS(message,
                  "allowed keys in [run]: world_size, backend, device, verify, timeout_s, startup_timeout_s, deadline_s, seed");
}

TEST_F(ScenarioTest, UnknownKeyInExpectAndRequires) {
  std::string expect = write("unknown_expect.toml", R"(name = "comm.unknown_expect"
[workload]
kind = "collectives"
[expect]
outcome = "timeout"
message = "x"
)");
  std::string message = input_error([&] { load_file(expect); });
  EXPECT_CONTAINS(message, expect + ":6: expect.message: unknown key");

  std::string requires_path = write("unknown_requires.toml", R"(name = "comm.unknown_requires"
[requires]
gpu = true
[workload]
kind = "collectives"
[expect]
outcome = "pass"
)");
  message = input_error([&] { load_file(requires_path); });
  EXPECT_CONTAINS(message, requires_path + ":3: requires.gpu: unknown key");
  EXPECT_CONTAINS(message, "allowed keys in [requires]: cuda, ranks");
}

TEST_F(ScenarioTest, BadValuesNameValueAndAllowed) {
  auto file_with_run = [&](const std::string& name, const std::string& run) {
    return write(name, std::string(kMinimal) + "[run]\n" + run);  // run keys start at line 7
  };
  std::string path = file_with_run("world_size_zero.toml", "world_size = 0\n");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":7: run.world_size: must be in [1, 64], got 0");

  path = file_with_run("mpi.toml", "backend = \"mpi\"\n");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":7: run.backend: unknown value \"mpi\"; allowed: gloo, nccl");

  path = file_with_run("verify.toml", "seed = 1\nverify = \"strict\"\n");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":8: run.verify: unknown value \"strict\"; allowed: off, record, verify");

  path = file_with_run("timeout.toml", "timeout_s = 0\n");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":7: run.timeout_s: must be in (0, 3600]");

  path = file_with_run("seed.toml", "seed = -1\n");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":7: run.seed: must be >= 0, got -1");

  path = file_with_run("nccl_cpu.toml", "device = \"cpu\"\nbackend = \"nccl\"\n");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":8: run.backend: backend \"nccl\" requires device \"cuda\"");

  // NCCL is the backend on CUDA, Gloo on the CPU, unless a scenario names one.
  path = file_with_run("cuda_default.toml", "device = \"cuda\"\n");
  EXPECT_EQ(load_file(path).at(0).backend, Backend::kNccl);
  path = file_with_run("cpu_default.toml", "world_size = 2\n");
  EXPECT_EQ(load_file(path).at(0).backend, Backend::kGloo);

  // Gloo carries host buffers only: device "cuda" with gloo is for workloads that compute on
  // the GPU and exchange on the host (graph_lookup, sampling, embedding, training), not for
  // collectives.
  path = file_with_run("gloo_cuda.toml", "device = \"cuda\"\nbackend = \"gloo\"\n");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":3: workload.kind: run.backend 'gloo' in lockstep carries host buffers only; "
                         "use backend 'nccl' for device 'cuda' (workload 'collectives' has no GPU "
                         "compute with host exchanges)");
  for (const char* kind : {"graph_lookup", "sampling", "embedding", "training"}) {
    path = write(std::string(kind) + "_gloo_cuda.toml",
                 std::string("name = \"x.gloo_cuda\"\n[workload]\nkind = \"") + kind +
                     "\"\n[expect]\noutcome = \"pass\"\n[run]\ndevice = \"cuda\"\nbackend = \"gloo\"\n");
    const std::vector<Scenario> loaded = load_file(path);
    ASSERT_EQ(loaded.size(), 1u) << kind;
    EXPECT_EQ(loaded[0].device, Device::kCuda) << kind;
    EXPECT_EQ(loaded[0].backend, Backend::kGloo) << kind;
    EXPECT_TRUE(loaded[0].requires_cuda) << kind;
  }
  // The workloads that exchange host buffers refuse NCCL, the default on CUDA; those with GPU
  // compute say to use Gloo, the others to run on the CPU.
  path = write("split_nccl.toml",
               "name = \"x.nccl\"\n[workload]\nkind = \"split\"\n[expect]\noutcome = \"pass\"\n[run]\ndevice = \"cuda\"\n");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":3: workload.kind: workload 'split' exchanges host buffers: backend 'nccl' cannot carry "
                         "them; run it on device 'cpu' with backend 'gloo'");
  for (const char* kind : {"embedding", "training", "sampling"}) {
    path = write(std::string(kind) + "_nccl.toml",
                 std::string("name = \"x.nccl\"\n[workload]\nkind = \"") + kind +
                     "\"\n[expect]\noutcome = \"pass\"\n[run]\ndevice = \"cuda\"\n");
    EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                    path + ":3: workload.kind: workload '" + kind + "' exchanges host buffers: with run.device "
                           "'cuda' use run.backend 'gloo'");
  }

  path = write("bad_name.toml", R"(name = "Comm Bad"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
)");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":1: name: must match [a-z0-9_.-]+, got \"Comm Bad\"");

  path = write("ranks.toml", R"(name = "comm.ranks"
[run]
world_size = 4
[requires]
ranks = 2
[workload]
kind = "collectives"
[expect]
outcome = "pass"
)");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }), path + ":5: requires.ranks: must be in");
}

TEST_F(ScenarioTest, InjectWithoutKind) {
  std::string path = write("inject_kind.toml", R"(name = "comm.inject_kind"
[workload]
kind = "collectives"

[[inject]]
rank = 1

[expect]
outcome = "collective_mismatch"
)");
  EXPECT_CONTAINS(input_error([&] { load_file(path); }),
                  path + ":5: [[inject]] is missing required key 'kind'");
}

TEST_F(ScenarioTest, TomlSyntaxErrorNamesLineAndColumn) {
  std::string path = write("syntax.toml", R"(name = "comm.syntax"
[run]
world_size = = 2
)");
  std::string message = input_error([&] { load_file(path); });
  EXPECT_CONTAINS(message, path + ":3:");
  EXPECT_EQ(message.rfind(path + ":3:", 0), 0u) << message;
}

}  // namespace
}  // namespace lockstep::scenario
