// The report contract's array dumps: .npy files (every descr and shape, headers of every
// version, bad files named) and DumpWriter's fragments and manifest.json. Files written by NumPy,
// and files read back by NumPy, check the format against its real consumer; those tests skip
// when python3 with numpy is not installed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "harness/comm/dtype.h"
#include "harness/core/error.h"
#include "harness/report/dump.h"
#include "reference/io/npy.h"
#include "tests/report_test_util.h"

namespace lockstep::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using report_test::exit_code;
using report_test::read_text;
using report_test::run_python;
using report_test::write_text;
// A fresh directory, removed with everything in it on destruction.
using test::TempDir;

bool have_numpy() {
  return exit_code(std::system("python3 -c 'import numpy' >/dev/null 2>&1")) == 0;
}

// ---------------------------------------------------------------------------------------------
// .npy

struct DescrCase {
  const char* descr;
  std::size_t item;
};

class NpyRoundTripTest : public ::testing::TestWithParam<DescrCase> {};

TEST_P(NpyRoundTripTest, RoundTripsEveryShapeWithAlignedHeader) {
  const DescrCase c = GetParam();
  EXPECT_EQ(io::npy_item_size(c.descr), c.item);
  TempDir dir("lockstep_report");
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {5}, {2, 3}, {2, 3, 4}, {1, 1, 7, 2}};
  for (const auto& shape : shapes) {
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d);
    std::vector<unsigned char> data(n * c.item);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 37 + 11);
    const std::string path = dir / "a.npy";
    io::write_npy(path, c.descr, shape, data.data(), data.size());
    EXPECT_FALSE(fs::exists(path + ".tmp"));

    const std::string raw = read_text(path);
    ASSERT_GE(raw.size(), 10u + data.size());
    const std::size_t header_end = raw.size() - data.size();
    EXPECT_EQ(raw.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const std::size_t header_len = static_cast<unsigned char>(raw[8]) |
                                   (static_cast<std::size_t>(static_cast<unsigned char>(raw[9])) << 8);
    EXPECT_EQ(10 + header_len, header_end);
    EXPECT_EQ(header_end % 64, 0u) << "header of " << c.descr << " not 64-byte aligned";
    EXPECT_EQ(raw[header_end - 1], '\n');
    EXPECT_NE(raw.find(std::string("'descr': '") + c.descr + "'"), std::string::npos);

    const io::NpyArray back = io::read_npy(path);
    EXPECT_EQ(back.descr, c.descr);
    EXPECT_EQ(back.shape, shape);
    EXPECT_FALSE(back.fortran_order);
    EXPECT_EQ(back.data, data);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDescrs, NpyRoundTripTest,
                         ::testing::Values(DescrCase{"<f4", 4}, DescrCase{"<i8", 8},
                                           DescrCase{"<u2", 2}, DescrCase{"|u1", 1},
                                           DescrCase{"<f2", 2}, DescrCase{"|i1", 1},
                                           DescrCase{"<i4", 4}, DescrCase{"<f8", 8}),
                         [](const auto& info) {
                           const std::string descr = info.param.descr;
                           return (descr[0] == '<' ? "le_" : "any_") + descr.substr(1);
                         });

TEST(NpyTest, ShapeTupleIsPythonSyntax) {
  TempDir dir("lockstep_report");
  const std::int32_t v[6] = {};
  io::write_npy(dir / "a.npy", "<i4", {2, 3}, v, sizeof(v));
  EXPECT_NE(read_text(dir / "a.npy").find("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"),
            std::string::npos);
  io::write_npy(dir / "b.npy", "<i4", {6}, v, sizeof(v));
  EXPECT_NE(read_text(dir / "b.npy").find("'shape': (6,), }"), std::string::npos);
  io::write_npy(dir / "c.npy", "<i4", {}, v, 4);
  EXPECT_NE(read_text(dir / "c.npy").find("'shape': (), }"), std::string::npos);
}

TEST(NpyTest, WriteRejectsBadArguments) {
  TempDir dir("lockstep_report");
  const float v[4] = {};
  EXPECT_THROW(io::write_npy(dir / "a.npy", "<f4", {2, 3}, v, sizeof(v)), std::invalid_argument);
  EXPECT_THROW(io::write_npy(dir / "a.npy", ">f4", {4}, v, sizeof(v)), std::invalid_argument);
  EXPECT_THROW(io::write_npy(dir / "a.npy", "f4", {4}, v, sizeof(v)), std::invalid_argument);
  EXPECT_THROW(io::write_npy(dir / "a.npy", "<f4", {-1}, v, 0), std::invalid_argument);
  EXPECT_THROW(io::write_npy(dir / "missing/a.npy", "<f4", {4}, v, sizeof(v)), std::runtime_error);
  EXPECT_THROW(io::npy_item_size("<O8"), std::invalid_argument);
}

// Builds a .npy file by hand: magic, version, little-endian header length, header, data.
std::string hand_npy(int major, const std::string& dict, const std::string& data) {
  const int len_size = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + len_size + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (int i = 0; i < len_size; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

void expect_read_error(const std::string& path, const std::string& fragment) {
  try {
    io::read_npy(path);
    ADD_FAILURE() << "read_npy(" << path << ") did not throw";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(NpyTest, ReadsVersion2And3Headers) {
  TempDir dir("lockstep_report");
  const std::string data("\x01\x00\x02\x00\x03\x00", 6);
  for (int major : {2, 3}) {
    const std::string path = dir / ("v" + std::to_string(major) + ".npy");
    write_text(path, hand_npy(major, "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<u2\"}",
                              data));
    const io::NpyArray a = io::read_npy(path);
    EXPECT_EQ(a.descr, "<u2");
    EXPECT_EQ(a.shape, std::vector<std::int64_t>{3});
    EXPECT_EQ(std::string(a.data.begin(), a.data.end()), data);
  }
}

TEST(NpyTest, ReadRejectsBadFilesNamingThePath) {
  TempDir dir("lockstep_report");
  const std::string four(16, '\0');
  write_text(dir / "big.npy", hand_npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", four));
  expect_read_error(dir / "big.npy", "big-endian");
  write_text(dir / "fortran.npy",
             hand_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", four));
  expect_read_error(dir / "fortran.npy", "Fortran");
  write_text(dir / "short.npy",
             hand_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", four));
  expect_read_error(dir / "short.npy", "data bytes");
  write_text(dir / "magic.npy", "PK\x03\x04 not numpy at all");
  expect_read_error(dir / "magic.npy", "magic");
  write_text(dir / "v9.npy", hand_npy(1, "{}", "").replace(6, 1, "\x09"));
  expect_read_error(dir / "v9.npy", "version");
  write_text(dir / "obj.npy", hand_npy(1, "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", four));
  expect_read_error(dir / "obj.npy", "|O");
  expect_read_error(dir / "absent.npy", "cannot open");
}

TEST(NpyNumpyTest, ReadsFilesNumpyWrote) {
  if (!have_numpy()) GTEST_SKIP() << "requires python3 with numpy (python3 -c 'import numpy' failed)";
  TempDir dir("lockstep_report");
  const std::string d = dir.path();
  const std::string script = R"(
import numpy as np
d = ')" + d + R"('
np.save(d + '/f4.npy', (np.arange(24, dtype='<f4') * 0.5 - 3).reshape(2, 3, 4))
np.save(d + '/i8.npy', np.array([-(2**62), -1, 0, 2**40 + 7], dtype='<i8'))
np.save(d + '/u1.npy', np.arange(6, dtype='|u1').reshape(3, 2) * 50)
np.save(d + '/f2.npy', np.array([1.0, -2.5, 0.0], dtype='<f2'))
np.save(d + '/i4.npy', np.int32(-7))
)";
  ASSERT_EQ(run_python(dir, script), 0);

  const io::NpyArray f4 = io::read_npy(d + "/f4.npy");
  EXPECT_EQ(f4.descr, "<f4");
  EXPECT_EQ(f4.shape, (std::vector<std::int64_t>{2, 3, 4}));
  ASSERT_EQ(f4.data.size(), 24 * sizeof(float));
  for (int i = 0; i < 24; ++i) {
    float v;
    std::memcpy(&v, f4.data.data() + 4 * i, 4);
    EXPECT_EQ(v, i * 0.5f - 3) << i;
  }

  const io::NpyArray i8 = io::read_npy(d + "/i8.npy");
  EXPECT_EQ(i8.descr, "<i8");
  const std::int64_t want_i8[] = {-(std::int64_t{1} << 62), -1, 0, (std::int64_t{1} << 40) + 7};
  ASSERT_EQ(i8.data.size(), sizeof(want_i8));
  EXPECT_EQ(std::memcmp(i8.data.data(), want_i8, sizeof(want_i8)), 0);

  const io::NpyArray u1 = io::read_npy(d + "/u1.npy");
  EXPECT_EQ(u1.descr, "|u1");
  EXPECT_EQ(u1.shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(u1.data, (std::vector<unsigned char>{0, 50, 100, 150, 200, 250}));

  const io::NpyArray f2 = io::read_npy(d + "/f2.npy");
  EXPECT_EQ(f2.descr, "<f2");
  const std::uint16_t want_f2[] = {0x3C00, 0xC100, 0x0000};  // 1.0, -2.5, 0.0 in binary16
  ASSERT_EQ(f2.data.size(), sizeof(want_f2));
  EXPECT_EQ(std::memcmp(f2.data.data(), want_f2, sizeof(want_f2)), 0);

  const io::NpyArray i4 = io::read_npy(d + "/i4.npy");
  EXPECT_EQ(i4.descr, "<i4");
  EXPECT_TRUE(i4.shape.empty());
  std::int32_t scalar;
  ASSERT_EQ(i4.data.size(), 4u);
  std::memcpy(&scalar, i4.data.data(), 4);
  EXPECT_EQ(scalar, -7);
}

// ---------------------------------------------------------------------------------------------
// DumpWriter and manifest.json

TEST(DumpWriterTest, DisabledWriterWritesNothing) {
  DumpWriter writer("", 0);
  EXPECT_FALSE(writer.enabled());
  writer.write("x", std::vector<float>{1, 2}, "unused");
  merge_manifests("", "s");
}

TEST(DumpWriterTest, RejectsBadNamesNamingTheValue) {
  TempDir dir("lockstep_report");
  DumpWriter writer(dir / "dump", 0);
  for (const std::string bad : {"a/b", "", "x y", "caf\xc3\xa9"}) {
    try {
      writer.write(bad, std::vector<float>{1}, "m");
      ADD_FAILURE() << "no error for name '" << bad << "'";
    } catch (const lockstep::Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(DumpWriterTest, MergeWithoutFragmentsDoesNothing) {
  TempDir dir("lockstep_report");
  merge_manifests(dir.path(), "s");
  EXPECT_FALSE(fs::exists(dir / "manifest.json"));
  merge_manifests(dir / "absent", "s");
}

TEST(DumpWriterTest, ManifestListsArraysSortedByNameThenRank) {
  TempDir dir("lockstep_report");
  const std::string d = dir / "dump/scn";
  for (int rank : {1, 0}) {
    DumpWriter writer(d, rank);
    EXPECT_TRUE(writer.enabled());
    writer.write("z_out", std::vector<std::int32_t>{rank}, "last");
    writer.write("a_in", std::vector<float>{1.0f, 2.0f}, "first");
  }
  DumpWriter(d, 0).write("mid", comm::DType::kU8, {2, 2}, "\x01\x02\x03\x04", "a 2x2 block");
  EXPECT_TRUE(fs::exists(d + "/manifest.rank0.jsonl"));
  EXPECT_TRUE(fs::exists(d + "/manifest.rank1.jsonl"));
  merge_manifests(d, "scn[x]");
  EXPECT_FALSE(fs::exists(d + "/manifest.rank0.jsonl"));
  EXPECT_FALSE(fs::exists(d + "/manifest.rank1.jsonl"));

  const json m = json::parse(read_text(d + "/manifest.json"));
  EXPECT_EQ(m["schema_version"], 1);
  EXPECT_EQ(m["scenario"], "scn[x]");
  ASSERT_EQ(m["arrays"].size(), 5u);
  const std::vector<std::pair<std::string, int>> order = {
      {"a_in", 0}, {"a_in", 1}, {"mid", 0}, {"z_out", 0}, {"z_out", 1}};
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(m["arrays"][i]["name"], order[i].first) << i;
    EXPECT_EQ(m["arrays"][i]["rank"], order[i].second) << i;
  }
  EXPECT_EQ(m["arrays"][2], json({{"name", "mid"}, {"file", "mid.rank0.npy"}, {"dtype", "u8"},
                                  {"numpy_dtype", "|u1"}, {"shape", {2, 2}}, {"rank", 0},
                                  {"meaning", "a 2x2 block"}}));
  EXPECT_EQ(m["arrays"][1]["file"], "a_in.rank1.npy");
  EXPECT_EQ(m["arrays"][1]["numpy_dtype"], "<f4");
  EXPECT_EQ(m["arrays"][1]["shape"], json({2}));
}

TEST(DumpWriterTest, MergeDropsTornLastLineAndKeepsLastWrite) {
  TempDir dir("lockstep_report");
  const std::string d = dir / "dump";
  {
    DumpWriter writer(d, 0);
    writer.write("a", std::vector<float>{1.0f}, "old");
    writer.write("a", std::vector<float>{2.0f}, "new");
  }
  std::ofstream(d + "/manifest.rank0.jsonl", std::ios::app) << "{\"name\": \"b\", \"fi";
  merge_manifests(d, "s");
  const json m = json::parse(read_text(d + "/manifest.json"));
  ASSERT_EQ(m["arrays"].size(), 1u);
  EXPECT_EQ(m["arrays"][0]["meaning"], "new");
}

TEST(DumpWriterTest, MergeRejectsMalformedInnerLine) {
  TempDir dir("lockstep_report");
  write_text(dir / "manifest.rank0.jsonl", "not json\n{\"name\":\"a\",\"rank\":0}\n");
  EXPECT_THROW(merge_manifests(dir.path(), "s"), lockstep::Error);
}

TEST(DumpWriterTest, NumpyLoadsEveryDtypeWithTheRightValues) {
  if (!have_numpy()) GTEST_SKIP() << "requires python3 with numpy (python3 -c 'import numpy' failed)";
  TempDir dir("lockstep_report");
  const std::string d = dir / "dump";
  for (int rank : {0, 1}) {
    DumpWriter w(d, rank);
    std::vector<float> logits(6);
    for (int i = 0; i < 6; ++i) logits[i] = 0.5f * i - 1 + rank;
    w.write("logits", comm::DType::kF32, {2, 3}, logits.data(), "per-node logits");
    std::vector<std::int64_t> ids(4);
    for (int i = 0; i < 4; ++i) ids[i] = rank * 1'000'000'000'000LL + i;
    w.write("ids", ids, "global node ids");
    w.write("f64", std::vector<double>{0.1, -1e300}, "doubles");
    // bf16 bits of 1.0, -2.0, 0.5, 12.0; binary16 bits of 1.0, -2.0, 0.5.
    w.write("emb", std::vector<comm::BFloat16>{{0x3F80}, {0xC000}, {0x3F00}, {0x4140}}, "bf16 bits");
    w.write("half", std::vector<comm::Half>{{0x3C00}, {0xC000}, {0x3800}}, "halves");
    w.write("i8", std::vector<std::int8_t>{-128, -1, 0, 127}, "bytes");
    w.write("u8", std::vector<std::uint8_t>{0, 255}, "ubytes");
    w.write("i32", std::vector<std::int32_t>{-2147483647 - 1, rank}, "ints");
  }
  merge_manifests(d, "scn");

  const std::string script = R"(
import json, sys
import numpy as np
d = ')" + d + R"('
m = json.load(open(d + '/manifest.json'))
def check(cond, what):
    if not cond:
        print('dump check failed:', what); sys.exit(1)
check(m['schema_version'] == 1 and m['scenario'] == 'scn', m)
check(len(m['arrays']) == 16, len(m['arrays']))
want_dtype = {'logits': ('f32', '<f4'), 'ids': ('i64', '<i8'), 'f64': ('f64', '<f8'),
              'emb': ('bf16', '<u2'), 'half': ('f16', '<f2'), 'i8': ('i8', '|i1'),
              'u8': ('u8', '|u1'), 'i32': ('i32', '<i4')}
for e in m['arrays']:
    a = np.load(d + '/' + e['file'])
    r = e['rank']
    check(e['file'] == '%s.rank%d.npy' % (e['name'], r), e)
    check((e['dtype'], e['numpy_dtype']) == want_dtype[e['name']], e)
    check(a.dtype.str == e['numpy_dtype'], (e, a.dtype.str))
    check(list(a.shape) == e['shape'], (e, a.shape))
    n = e['name']
    if n == 'logits':
        want = (np.arange(6, dtype=np.float32) * 0.5 - 1 + r).reshape(2, 3)
        check(a.shape == (2, 3) and np.array_equal(a, want), a)
    elif n == 'ids':
        check(a.tolist() == [r * 10**12 + i for i in range(4)], a)
    elif n == 'f64':
        check(a.tolist() == [0.1, -1e300], a)
    elif n == 'emb':
        f = (a.astype(np.uint32) << 16).view(np.float32)
        check(f.tolist() == [1.0, -2.0, 0.5, 12.0], f)
    elif n == 'half':
        check(a.tolist() == [1.0, -2.0, 0.5], a)
    elif n == 'i8':
        check(a.tolist() == [-128, -1, 0, 127], a)
    elif n == 'u8':
        check(a.tolist() == [0, 255], a)
    elif n == 'i32':
        check(a.tolist() == [-2**31, r], a)
names = [(e['name'], e['rank']) for e in m['arrays']]
check(names == sorted(names), names)
)";
  EXPECT_EQ(run_python(dir, script), 0);
}

}  // namespace
}  // namespace lockstep::report
