// NeighborLoader: every batch equals sample_neighbors with key.batch = b, in order, for every
// worker count, mode and prefetch; destruction leaves no thread or child process behind;
// process mode refuses to fork after CUDA was initialised.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "reference/common/device.h"
#include "reference/common/philox.h"
#include "reference/graph/graph.h"
#include "reference/loader/loader.h"
#include "reference/sampling/neighbor.h"

namespace {

using lockstep::ref::CsrGraph;
using lockstep::ref::LoaderOptions;
using lockstep::ref::NeighborLoader;
using lockstep::ref::SampledBlocks;
using lockstep::ref::SampleKey;
using lockstep::ref::SampleOptions;
using Mode = LoaderOptions::Mode;

const CsrGraph& rows() {
  static const CsrGraph g = lockstep::ref::sampling_graph(
      lockstep::ref::rmat(10, std::int64_t{8} << 10, /*seed=*/77), /*in_edges=*/true);
  return g;
}

// 29 batches of varying sizes (one empty, one with duplicate seeds), ids from philox.
std::vector<std::vector<std::int64_t>> make_batches() {
  std::vector<std::vector<std::int64_t>> batches;
  for (std::uint64_t b = 0; b < 29; ++b) {
    std::vector<std::int64_t> seeds;
    const std::uint64_t size = b == 5 ? 0 : 1 + (b * 7) % 40;
    for (std::uint64_t i = 0; i < size; ++i) {
      seeds.push_back(static_cast<std::int64_t>(lockstep::ref::uniform_below(
          lockstep::ref::philox_u64(/*key=*/9, b, i), static_cast<std::uint64_t>(rows().num_nodes))));
    }
    if (b == 7) seeds.push_back(seeds.front());
    batches.push_back(seeds);
  }
  return batches;
}

SampleOptions sample_options() {
  SampleOptions o;
  o.fanouts = {10, 5};
  return o;
}

constexpr SampleKey kBase{/*seed=*/123, /*epoch=*/3, /*batch=*/999, /*hop=*/0};

// Expected digests from the reference function itself, never from the loader.
const std::vector<std::uint64_t>& expected_digests() {
  static const std::vector<std::uint64_t> d = [] {
    std::vector<std::uint64_t> out;
    const auto batches = make_batches();
    for (std::size_t b = 0; b < batches.size(); ++b) {
      SampleKey key = kBase;
      key.batch = static_cast<std::int64_t>(b);
      out.push_back(lockstep::ref::digest(
          lockstep::ref::sample_neighbors(rows(), batches[b], sample_options(), key)));
    }
    return out;
  }();
  return d;
}

// Pids of the live (or zombie) children of this process, from /proc.
std::set<int> child_pids() {
  std::set<int> out;
  const int self = static_cast<int>(::getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    // Fields after "(comm)": state ppid ...
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == self) out.insert(std::stoi(name));
  }
  return out;
}

// Process mode refuses to fork once this process has used CUDA (the rule tested at the end).
// Running the whole binary on a GPU machine, an earlier CUDA test may have done so; ctest runs
// each test in its own process, where these run for real.
#define LOCKSTEP_SKIP_IF_CUDA_USED()                                                        \
  if (lockstep::ref::cuda_initialised())                                                    \
  GTEST_SKIP() << "an earlier test in this process used CUDA, after which process mode "    \
                  "refuses to fork; run this test in its own process (ctest does)"

class LoaderEpochTest : public ::testing::TestWithParam<std::tuple<int, Mode, int>> {};

TEST_P(LoaderEpochTest, EveryBatchMatchesReferenceInOrder) {
  const auto [workers, mode, prefetch] = GetParam();
  if (mode == Mode::kProcesses && workers > 0) LOCKSTEP_SKIP_IF_CUDA_USED();
  const auto& expected = expected_digests();
  NeighborLoader loader(rows(), make_batches(), sample_options(), kBase,
                        LoaderOptions{workers, prefetch, mode});
  ASSERT_EQ(loader.num_batches(), static_cast<std::int64_t>(expected.size()));
  const auto batches = make_batches();
  for (std::size_t b = 0; b < expected.size(); ++b) {
    std::optional<SampledBlocks> got = loader.next();
    ASSERT_TRUE(got.has_value()) << "batch " << b;
    EXPECT_EQ(lockstep::ref::digest(*got), expected[b]) << "batch " << b;
    EXPECT_EQ(got->seeds, batches[b]) << "batch " << b << " out of order";
  }
  EXPECT_FALSE(loader.next().has_value());
  EXPECT_FALSE(loader.next().has_value());
}

std::string param_name(const ::testing::TestParamInfo<LoaderEpochTest::ParamType>& info) {
  const auto [workers, mode, prefetch] = info.param;
  return std::string(mode == Mode::kThreads ? "threads" : "processes") + "_w" +
         std::to_string(workers) + "_p" + std::to_string(prefetch);
}

INSTANTIATE_TEST_SUITE_P(LoaderWorkers, LoaderEpochTest,
                         ::testing::Combine(::testing::Values(0, 1, 2, 4),
                                            ::testing::Values(Mode::kThreads, Mode::kProcesses),
                                            ::testing::Values(1, 2, 4)),
                         param_name);

TEST(LoaderSerialise, RoundTripsExactly) {
  const auto batches = make_batches();
  for (std::size_t b : {std::size_t{0}, std::size_t{5}, std::size_t{7}}) {
    const SampledBlocks s = lockstep::ref::sample_neighbors(rows(), batches[b], sample_options(),
                                                            SampleKey{1, 0, 0, 0});
    EXPECT_EQ(lockstep::ref::deserialise(lockstep::ref::serialise(s)), s);
  }
  std::vector<std::int64_t> words = lockstep::ref::serialise(lockstep::ref::sample_neighbors(
      rows(), batches[1], sample_options(), SampleKey{}));
  words.pop_back();
  EXPECT_THROW(lockstep::ref::deserialise(words), std::runtime_error);
}

// Hand-made streams (size-prefixed arrays: seeds, seed_to_output, the block count, then five
// arrays a block): each malformed one is refused with the message naming what is wrong, and
// never read past its end.
TEST(LoaderSerialise, MalformedStreamsAreNamedNeverReadPastTheEnd) {
  using W = std::vector<std::int64_t>;
  const auto message = [](const W& words) {
    try {
      lockstep::ref::deserialise(words);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const SampledBlocks ok = lockstep::ref::deserialise(W{1, 7, 1, 0, 0});
  EXPECT_EQ(ok.seeds, W{7});
  EXPECT_EQ(ok.seed_to_output, W{0});
  EXPECT_TRUE(ok.blocks.empty());
  EXPECT_EQ(message(W{}), "deserialise: truncated stream");
  EXPECT_EQ(message(W{1, 7}), "deserialise: truncated stream") << "ends where seed_to_output starts";
  EXPECT_EQ(message(W{1, 7, 1, 0}), "deserialise: truncated stream") << "ends where the block count starts";
  EXPECT_EQ(message(W{1, 7, 1, 0, 1, 1, 5, 1, 5, 0, 0}), "deserialise: truncated stream") << "ends inside block 0";
  EXPECT_EQ(message(W{-1}), "deserialise: bad array size -1");
  EXPECT_EQ(message(W{3, 7, 8}), "deserialise: bad array size 3");
  EXPECT_EQ(message(W{1, 7, 1, 0, 1, 0, 0, 0, 0}), "deserialise: bad block count 1") << "4 words cannot hold a block";
  EXPECT_EQ(message(W{1, 7, 1, 0, -2}), "deserialise: bad block count -2");
  EXPECT_EQ(message(W{1, 7, 1, 0, 0, 5}), "deserialise: trailing words");
}

TEST(LoaderOptionsCheck, RejectsBadOptions) {
  EXPECT_THROW(NeighborLoader(rows(), make_batches(), sample_options(), kBase,
                              LoaderOptions{-1, 2, Mode::kThreads}),
               std::invalid_argument);
  EXPECT_THROW(NeighborLoader(rows(), make_batches(), sample_options(), kBase,
                              LoaderOptions{2, 0, Mode::kProcesses}),
               std::invalid_argument);
}

TEST(LoaderErrors, BadSeedFailsItsBatchOnlyInEveryMode) {
  auto batches = make_batches();
  batches[3] = {rows().num_nodes + 5};
  for (Mode mode : {Mode::kThreads, Mode::kProcesses}) {
    for (int workers : {0, 2}) {
      if (mode == Mode::kProcesses && workers > 0) LOCKSTEP_SKIP_IF_CUDA_USED();
      NeighborLoader loader(rows(), batches, sample_options(), kBase,
                            LoaderOptions{workers, 2, mode});
      for (std::size_t b = 0; b < batches.size(); ++b) {
        if (b == 3) {
          EXPECT_ANY_THROW(loader.next()) << "workers " << workers;
          continue;
        }
        auto got = loader.next();
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(lockstep::ref::digest(*got), expected_digests()[b]) << "batch " << b;
      }
      EXPECT_FALSE(loader.next().has_value());
    }
  }
}

TEST(LoaderLifetime, DestroyMidEpochLeavesNoChildProcess) {
  LOCKSTEP_SKIP_IF_CUDA_USED();
  const std::set<int> before = child_pids();
  std::set<int> during;
  {
    NeighborLoader loader(rows(), make_batches(), sample_options(), kBase,
                          LoaderOptions{4, 2, Mode::kProcesses});
    ASSERT_TRUE(loader.next().has_value());
    ASSERT_TRUE(loader.next().has_value());
    during = child_pids();
    std::set<int> ours;
    for (int pid : during) {
      if (!before.count(pid)) ours.insert(pid);
    }
    EXPECT_EQ(ours.size(), 4u);
  }
  const std::set<int> after = child_pids();
  for (int pid : after) EXPECT_TRUE(before.count(pid)) << "child " << pid << " outlived the loader";
}

// A parent that dies before a worker process has tied its life to it (PR_SET_PDEATHSIG) is
// noticed: the worker exits at once with code 3 instead of sampling for no one. The start
// hook holds every worker until its parent is gone, which makes the race deterministic; a
// helper process is the subreaper that inherits the orphaned workers and reaps them.
TEST(LoaderLifetime, WorkersWhoseParentDiedBeforeTheyStartedExitWithCode3) {
  LOCKSTEP_SKIP_IF_CUDA_USED();
  const pid_t helper = ::fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) ::_exit(20);
    const pid_t owner = ::fork();
    if (owner < 0) ::_exit(21);
    if (owner == 0) {
      lockstep::ref::loader_worker_start_hook = [](int parent) {
        while (::getppid() == parent) ::usleep(1000);
      };
      NeighborLoader loader(rows(), make_batches(), sample_options(), kBase, LoaderOptions{2, 2, Mode::kProcesses});
      ::_exit(0);  // dies, destructor skipped, while both workers wait in the hook
    }
    int status = 0;
    if (::waitpid(owner, &status, 0) != owner || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ::_exit(22);
    // The two workers are ours now; each must exit with code 3.
    int reaped = 0, with_3 = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (reaped < 2 && std::chrono::steady_clock::now() < deadline) {
      const pid_t w = ::waitpid(-1, &status, WNOHANG);
      if (w > 0) {
        ++reaped;
        with_3 += WIFEXITED(status) && WEXITSTATUS(status) == 3;
      } else {
        ::usleep(2000);
      }
    }
    ::_exit(reaped < 2 ? 23 : 30 + with_3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(helper, &status, 0), helper);
  ASSERT_TRUE(WIFEXITED(status));
  // 32: both workers exited with code 3. 30 or 31: one or none did; 20-23: the helper failed
  // (no subreaper, fork, the owner did not exit cleanly, or workers not reaped within 60 s).
  EXPECT_EQ(WEXITSTATUS(status), 32);
}

TEST(LoaderLifetime, DestroyMidEpochJoinsThreadsPromptly) {
  for (int workers : {1, 4}) {
    const auto start = std::chrono::steady_clock::now();
    {
      NeighborLoader loader(rows(), make_batches(), sample_options(), kBase,
                            LoaderOptions{workers, 1, Mode::kThreads});
      ASSERT_TRUE(loader.next().has_value());
    }
    {
      // Destroyed before any next(): workers blocked on the prefetch bound must wake.
      NeighborLoader loader(rows(), make_batches(), sample_options(), kBase,
                            LoaderOptions{workers, 1, Mode::kThreads});
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
}

// Once CUDA is initialised: process workers are refused with an error naming CUDA, while
// thread workers and num_workers == 0 stay allowed. Returns the death-test exit code: 0 when
// all of that holds, else which check failed (3: no refusal, 4: refusal without CUDA in its
// message, 5: a permitted loader delivered nothing).
int refusal_after_cuda() {
  try {
    NeighborLoader loader(rows(), make_batches(), sample_options(), kBase,
                          LoaderOptions{2, 2, Mode::kProcesses});
    return 3;
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).find("CUDA") == std::string::npos) return 4;
  }
  NeighborLoader threads(rows(), make_batches(), sample_options(), kBase,
                         LoaderOptions{2, 2, Mode::kThreads});
  NeighborLoader inline_loader(rows(), make_batches(), sample_options(), kBase,
                               LoaderOptions{0, 2, Mode::kProcesses});
  return threads.next() && inline_loader.next() ? 0 : 5;
}

// In a death-test child, so the process-wide flag does not leak into other tests.
TEST(LoaderDeathTest, ProcessModeRefusesAfterCudaInitialised) {
  EXPECT_EXIT(
      {
        lockstep::ref::mark_cuda_initialised();
        if (!lockstep::ref::cuda_initialised()) std::_Exit(2);
        std::_Exit(refusal_after_cuda());
      },
      ::testing::ExitedWithCode(0), "");
}

// The same rule after real CUDA use (ids copied to the GPU), not just the flag. The device
// count is read in a forked child so that this process never touches CUDA itself.
TEST(LoaderDeathTest, ProcessModeRefusesAfterRealCudaUse) {
  LOCKSTEP_SKIP_IF_CUDA_USED();
  const pid_t probe = ::fork();
  ASSERT_GE(probe, 0);
  if (probe == 0) std::_Exit(lockstep::ref::cuda_device_count() > 0 ? 1 : 0);
  int status = 0;
  ASSERT_EQ(::waitpid(probe, &status, 0), probe);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  const lockstep::ref::Device gpu{lockstep::ref::DeviceKind::kCuda, 0};
  const std::vector<std::int64_t> values = {3, 1, 2};
  EXPECT_EXIT(
      {
        if (lockstep::ref::cuda_initialised()) std::_Exit(2);
        const auto ids = lockstep::ref::IdArray::from_host(values, lockstep::ref::IdType::kI64, gpu);
        if (ids.to_host() != values) std::_Exit(6);
        if (!lockstep::ref::cuda_initialised()) std::_Exit(7);
        std::_Exit(refusal_after_cuda());
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
