// The interpreter probes' cache on disk (launch::probe_imports): a successful probe is not run
// again while nothing it depends on changed, and is run again (and fails) once a module it
// imported is gone. The interpreter is a wrapper around python3 that counts its runs.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "harness/launch/python.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

class PythonProbeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "requires python3";
    const char* old = std::getenv("XDG_CACHE_HOME");
    had_cache_home_ = old != nullptr;
    if (old) old_cache_home_ = old;
    ::setenv("XDG_CACHE_HOME", (tmp_ / "cache").c_str(), 1);
    python_ = tmp_.write("bin/python", "#!/bin/sh\necho run >> " + test::quote(tmp_ / "runs") + "\nexec python3 \"$@\"\n");
    ::chmod(python_.c_str(), 0755);
    tmp_.write("mods/lockstep_probe_mod.py", "x = 1\n");
  }
  void TearDown() override {
    if (had_cache_home_) ::setenv("XDG_CACHE_HOME", old_cache_home_.c_str(), 1);
    else ::unsetenv("XDG_CACHE_HOME");
  }
  // How many times the interpreter ran.
  int runs() const {
    const std::string text = test::read_file(tmp_ / "runs");
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }
  std::string probe() { return launch::probe_imports(python_, {"lockstep_probe_mod"}, "hint", {"PYTHONPATH=" + (tmp_ / "mods")}); }

  test::TempDir tmp_{"lockstep_probe"};
  std::string python_;
  bool had_cache_home_ = false;
  std::string old_cache_home_;
};

TEST_F(PythonProbeCacheTest, ASuccessIsCachedUntilAModuleItImportedChanges) {
  EXPECT_EQ(probe(), "");
  EXPECT_EQ(runs(), 1);
  EXPECT_FALSE(fs::is_empty(tmp_ / "cache/lockstep/python-probes"));
  EXPECT_EQ(probe(), "");
  EXPECT_EQ(runs(), 1) << "the second probe should come from the cache";
  fs::remove(tmp_ / "mods/lockstep_probe_mod.py");
  const std::string why = probe();
  EXPECT_EQ(runs(), 2) << "a module that is gone must be probed again";
  EXPECT_CONTAINS(why, "cannot import them");
  EXPECT_CONTAINS(why, "hint");
  // A failure is not cached: once the module is back, the probe runs and succeeds.
  tmp_.write("mods/lockstep_probe_mod.py", "x = 2\n");
  EXPECT_EQ(probe(), "");
  EXPECT_EQ(runs(), 3);
}

TEST_F(PythonProbeCacheTest, AnotherInterpreterOrModuleListIsAnotherEntry) {
  EXPECT_EQ(probe(), "");
  EXPECT_EQ(launch::probe_imports(python_, {"lockstep_probe_mod", "json"}, "hint", {"PYTHONPATH=" + (tmp_ / "mods")}), "");
  EXPECT_EQ(runs(), 2);
  // The interpreter changed (size and mtime): probed again.
  tmp_.write("bin/python", "#!/bin/sh\n# changed\necho run >> " + test::quote(tmp_ / "runs") + "\nexec python3 \"$@\"\n");
  EXPECT_EQ(probe(), "");
  EXPECT_EQ(runs(), 3);
}

}  // namespace
}  // namespace lockstep
