// Tests of how the baseline store (harness/baseline/store.h) meets a file system that refuses:
// read-only files and directories, side files (-wal, -shm) left by another user, and a full or
// nearly full disk (issue 32, item 3). Each is an InputError (exit 2) with a plain one-line
// message naming the file, and a refused write leaves the file as it was.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness/baseline/sqlite.h"
#include "harness/baseline/store.h"
#include "harness/core/error.h"
#include "tests/store_test_util.h"
#include "tests/test_util.h"

namespace lockstep::baseline {
namespace {

namespace fs = std::filesystem;

using lockstep::test::CliResult;
using lockstep::test::quote;
using lockstep::test::read_file;
using store_test::expect_plain;
using store_test::FileState;
using store_test::input_error_of;
using store_test::kScenario;
using store_test::query_int;
using store_test::state_of;
using store_test::StoreTest;
using store_test::summary;
using store_test::test_env;

// ---------------------------------------------------------------------------------------------
// Read-only files and directories, full disks

// A write through a read-only connection maps SQLITE_READONLY to a plain InputError (this is
// the path a read-only file takes; it works as root, where file modes do not stop writes).
TEST_F(StoreTest, WriteThroughAReadOnlyConnectionIsAnInputError) {
  const std::string file = make_store("b.db");
  const FileState before = state_of(file);
  {
    Db db(file, Db::Mode::kReadOnly);
    EXPECT_TRUE(db.read_only());
    const std::string msg = input_error_of([&] {
      Transaction tx(db);
      db.exec("INSERT INTO environments(name, torch, torch_line, cuda, nccl, compiler, cpu, gpu, driver, lockstep_rev)"
              " VALUES('x', '', '', '', '', '', '', '', '', '')");
    });
    expect_plain(msg, file);
    EXPECT_CONTAINS(msg, "read-only");
  }
  // A read-only connection to a WAL file cannot remove its -wal and -shm; only bytes count here.
  EXPECT_TRUE(read_file(file) == before.bytes);
}

TEST_F(StoreTest, ReadOnlyFileIsRefusedForWritingAndStillRead) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes through file modes; RecordAndImportRefuseReadOnlyFilesAndDirectories covers this as nobody";
  const std::string file = make_store("b.db");
  fs::permissions(file, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  for (Access access : {Access::kWrite, Access::kCreate}) {
    const FileState before = state_of(file);
    const std::string msg = input_error_of([&] { Store store(file, access); });
    expect_plain(msg, file);
    EXPECT_CONTAINS(msg, "read-only");
    EXPECT_UNCHANGED(before, file);
  }
  Store store(file, Access::kRead);
  EXPECT_EQ(store.runs().size(), 2u);
}

// `record` and `import` against a read-only file, or a file in a read-only directory (where WAL
// cannot create its -wal and -shm), exit 2 before running anything. Run as an unprivileged
// user: as root through setpriv (root ignores file modes).
TEST_F(StoreTest, RecordAndImportRefuseReadOnlyFilesAndDirectories) {
  std::string prefix;
  if (::geteuid() == 0) {
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    if (std::system((prefix + "test -x " + quote(LOCKSTEP_BINARY) + " 2>/dev/null").c_str()) != 0)
      GTEST_SKIP() << "running as root, and setpriv cannot run " << LOCKSTEP_BINARY << " as nobody (65534)";
    // As nobody the binary must load the same LibTorch it was built against: one inside a
    // private home (the wheel line's ~/.cache under /root) is unreadable, and the dynamic
    // linker then finds another (Debian's) and complains on stderr.
    const std::string err = path("probe.stderr");
    const int rc = std::system((prefix + quote(LOCKSTEP_BINARY) + " --version >/dev/null 2>" + quote(err)).c_str());
    if (rc != 0 || !read_file(err).empty())
      GTEST_SKIP() << "running as root, and " << LOCKSTEP_BINARY << " does not run cleanly as nobody (65534): "
                   << read_file(err);
  }
  using fs::perms;
  const perms rx = perms::owner_read | perms::owner_exec | perms::group_read | perms::group_exec | perms::others_read |
                   perms::others_exec;
  fs::permissions(dir_, rx | perms::owner_write);
  fs::create_directories(path("out"));
  fs::permissions(path("out"), perms::all);
  write("s/small.toml", kScenario);
  fs::permissions(path("s"), rx | perms::owner_write);
  // The export of another baseline, to import.
  {
    Store other(path("other.db"), Access::kCreate);
    other.record(test_env("other"), summary(3), dir_, 0);
    write("out/other.json", other.export_text());
  }
  // A read-only file in a directory anyone may write.
  fs::create_directories(path("rofile"));
  const std::string ro_file = make_store("rofile/b.db");
  fs::permissions(path("rofile"), perms::all);
  fs::permissions(ro_file, perms::owner_read | perms::group_read | perms::others_read);
  // A file anyone may write in a directory nobody but its owner (root, or us with 0555) may.
  fs::create_directories(path("rodir"));
  const std::string ro_dir = make_store("rodir/b.db");
  fs::permissions(ro_dir, perms::owner_read | perms::owner_write | perms::group_read | perms::group_write |
                              perms::others_read | perms::others_write);
  fs::permissions(path("rodir"), rx);

  const std::string s = quote(path("s"));
  expect_refused("record " + s + " --repeat 1 --env fresh", ro_file, "read-only", prefix);
  expect_refused("record " + s + " --repeat 1 --env fresh", ro_dir, "is not writable", prefix);
  for (const std::string& file : {ro_file, ro_dir}) {
    const FileState before = state_of(file);
    const auto r = lockstep("baseline import --baseline " + quote(file) + " " + quote(path("out/other.json")), prefix);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    expect_plain(r.err, file);
    EXPECT_UNCHANGED(before, file);
  }
  // Reading a read-only baseline still works.
  const auto r = lockstep("report --baseline " + quote(ro_file) + " --out " + quote(path("out/rep")), prefix);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  fs::permissions(path("rodir"), perms::all);  // lets TempDir remove it when not root
}

TEST_F(StoreTest, FullDiskIsAnInputErrorAndRollsTheWriteBack) {
  const std::string file = make_store("b.db", /*runs=*/1);
  const FileState before = state_of(file);
  {
    Store store(file, Access::kWrite);
    // SQLite reports SQLITE_FULL when the file would outgrow max_page_count: a full disk.
    const std::int64_t pages = query_int(file, "PRAGMA page_count");
    ASSERT_GT(pages, 0);
    store.db().exec("PRAGMA max_page_count = " + std::to_string(pages));
    const std::string msg = input_error_of([&] { store.record(test_env("e2"), summary(400), dir_, 0); });
    expect_plain(msg, file);
    EXPECT_CONTAINS(msg, "disk is full");
    EXPECT_FALSE(store.environment("e2")) << "the environment row was rolled back with the run";
    EXPECT_EQ(store.runs().size(), 1u);
  }
  EXPECT_UNCHANGED(before, file);
}

// ---------------------------------------------------------------------------------------------
// Side files left by another user, and a nearly full disk (issue 32, item 3)

// A writer other than the owner of the side files: as root, nobody (65534) through setpriv, the
// side files staying root's; as another user, this user, the side files made read-only. Returns
// the skip reason, or "" with `prefix` set.
std::string other_writer(const std::string& binary, const std::string& scratch, std::string* prefix) {
  prefix->clear();
  if (::geteuid() != 0) return "";
  *prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  const std::string err = scratch + "/probe.stderr";
  const int rc = std::system((*prefix + quote(binary) + " --version >/dev/null 2>" + quote(err)).c_str());
  if (rc != 0 || !read_file(err).empty())
    return "running as root, and " + binary + " does not run cleanly as nobody (65534) through setpriv: " + read_file(err);
  return "";
}

// The bytes of `file`, or "" when it is missing.
std::string bytes_of(const std::string& file) { return fs::exists(file) ? read_file(file) : std::string(); }

void put_bytes(const std::string& file, const std::string& bytes, fs::perms mode) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  fs::permissions(file, mode);
}

class SideFilesTest : public StoreTest {
 protected:
  // A baseline anyone may write in a folder anyone may write (no sticky bit), an export to
  // import, and the writer.
  std::string setup(std::string* skip) {
    *skip = other_writer(LOCKSTEP_BINARY, dir_, &prefix_);
    if (!skip->empty()) return "";
    using fs::perms;
    fs::permissions(dir_, perms::owner_all | perms::group_read | perms::group_exec | perms::others_read | perms::others_exec);
    fs::create_directories(path("shared"));
    fs::permissions(path("shared"), perms::all);
    const std::string file = make_store("shared/b.db");
    fs::permissions(file, perms::owner_read | perms::owner_write | perms::group_read | perms::group_write |
                              perms::others_read | perms::others_write);
    {
      Store other(path("other.db"), Access::kCreate);
      other.record(test_env("other"), summary(3), dir_, 0);
      write("other.json", other.export_text());
    }
    return file;
  }
  // The mode the side files get: as root they stay root's (0644); otherwise read-only.
  fs::perms side_mode() const {
    using fs::perms;
    return ::geteuid() == 0 ? perms::owner_read | perms::owner_write | perms::group_read | perms::others_read
                            : perms::owner_read | perms::group_read | perms::others_read;
  }
  CliResult import_into(const std::string& file) {
    return lockstep("baseline import --baseline " + quote(file) + " " + quote(path("other.json")), prefix_);
  }
  std::string prefix_;
};

// What the stale files hold is kept: a commit that is only in the -wal survives the recovery.
TEST_F(SideFilesTest, StaleShmAndWalOfAnotherUserAreReplacedAndTheWriteSucceeds) {
  std::string skip;
  const std::string file = setup(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  // Another user's session: a commit left in the -wal, and the -shm that indexes it, both theirs
  // and not writable by the writer; the database file as it was before any checkpoint.
  std::string db, wal, shm;
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "PRAGMA wal_autocheckpoint = 0; INSERT INTO environments(name, torch, torch_line, cuda, nccl, compiler, cpu, gpu, driver, lockstep_rev)"
                              " VALUES('only_in_the_wal', '', '', '', '', '', '', '', '', '')", nullptr, nullptr, nullptr), SQLITE_OK);
    db = read_file(file);
    wal = bytes_of(file + "-wal");
    shm = bytes_of(file + "-shm");
    sqlite3_close(h);
  }
  ASSERT_GT(wal.size(), 0u);
  ASSERT_GT(shm.size(), 0u);
  put_bytes(file, db, fs::status(file).permissions());
  put_bytes(file + "-wal", wal, side_mode());
  put_bytes(file + "-shm", shm, side_mode());

  const auto r = import_into(file);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM environments WHERE name = 'only_in_the_wal'"), 1) << "the -wal's commit was lost";
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM runs"), 3) << "2 recorded + 1 imported";
}

TEST_F(SideFilesTest, StaleShmOfAnotherUserIsRemovedWhenNothingHasTheDatabaseOpen) {
  std::string skip;
  const std::string file = setup(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  std::string shm;
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "SELECT count(*) FROM runs", nullptr, nullptr, nullptr), SQLITE_OK);
    shm = bytes_of(file + "-shm");
    sqlite3_close(h);
  }
  ASSERT_GT(shm.size(), 0u);
  put_bytes(file + "-shm", shm, side_mode());
  const auto r = import_into(file);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("read-only"), std::string::npos) << r.err;
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM runs"), 3);
}

// While another process has the database open, its -shm is in use: the writer is refused with a
// message naming the file, its owner and why, and nothing is removed.
TEST_F(SideFilesTest, UnwritableShmInUseByAnotherProcessIsNamedNotRemoved) {
  std::string skip;
  const std::string file = setup(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "SELECT count(*) FROM runs", nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_TRUE(fs::exists(file + "-shm"));
  fs::permissions(file + "-shm", side_mode());
  const auto r = import_into(file);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  expect_plain(r.err, file);
  EXPECT_CONTAINS(r.err, file + "-shm (owned by ");
  EXPECT_CONTAINS(r.err, "is not writable by this user");
  EXPECT_CONTAINS(r.err, "open in another process");
  EXPECT_TRUE(fs::exists(file + "-shm"));
  sqlite3_close(h);
  EXPECT_EQ(query_int(file, "SELECT count(*) FROM runs"), 2) << "nothing was imported";
}

// A small tmpfs, filled to `leave` bytes free (root only: mount).
class FullDiskTest : public StoreTest {
 protected:
  std::string mount_small(std::string* skip) {
    if (::geteuid() != 0) {
      *skip = "mounting a small tmpfs needs root";
      return "";
    }
    mnt_ = path("small");
    fs::create_directories(mnt_);
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=256k") != 0) {
      *skip = std::string("cannot mount a tmpfs here: ") + std::strerror(errno);
      mnt_.clear();
      return "";
    }
    return mnt_;
  }
  // Fills the filesystem of `dir` until at most `leave` bytes are free; returns what is free.
  static long long fill(const std::string& dir, long long leave) {
    std::ofstream f(dir + "/filler", std::ios::binary);
    const std::string page(4096, 'x');
    auto avail = [&] {
      struct statvfs v {};
      ::statvfs(dir.c_str(), &v);
      return static_cast<long long>(v.f_bavail) * static_cast<long long>(v.f_frsize);
    };
    while (avail() > leave && f.write(page.data(), static_cast<std::streamsize>(page.size()))) f.flush();
    return avail();
  }
  ~FullDiskTest() override {
    if (!mnt_.empty()) ::umount2(mnt_.c_str(), MNT_DETACH);
  }
  std::string mnt_;
};

TEST_F(FullDiskTest, UnderSixteenKibFreeIsTheDiskIsFullNotAnIoError) {
  std::string skip;
  const std::string dir = mount_small(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const std::string file = make_store("small/b.db", /*runs=*/1, /*scenarios=*/3);
  const long long left = fill(dir, 12 * 1024);
  ASSERT_LT(left, 16 * 1024);
  const std::string before = read_file(file);
  const std::string msg = input_error_of([&] {
    Store store(file, Access::kWrite);
    store.record(test_env("e2"), summary(200), dir_, 0);
  });
  expect_plain(msg, file);
  EXPECT_CONTAINS(msg, "the disk is full (");
  EXPECT_CONTAINS(msg, " bytes free on " + dir + ")");
  EXPECT_EQ(msg.find("I/O error"), std::string::npos) << msg;
  EXPECT_TRUE(read_file(file) == before) << "the database changed";
}

TEST_F(FullDiskTest, NoSpaceAtAllIsTheDiskIsFullNamingZeroBytes) {
  std::string skip;
  const std::string dir = mount_small(&skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const std::string file = make_store("small/b.db", /*runs=*/1, /*scenarios=*/3);
  ASSERT_EQ(fill(dir, 0), 0);
  const std::string msg = input_error_of([&] {
    Store store(file, Access::kWrite);
    store.record(test_env("e2"), summary(200), dir_, 0);
  });
  expect_plain(msg, file);
  EXPECT_CONTAINS(msg, "the disk is full (0 bytes free on " + dir + ")");
}

}  // namespace
}  // namespace lockstep::baseline
