// The report contract: results.json, junit.xml, .npy dumps with their manifest, and the
// Chrome trace. Files written by NumPy, and files read back by NumPy or Python's XML parser,
// check the formats against their real consumers; those tests skip when python3 (with numpy)
// is not installed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "harness/comm/dtype.h"
#include "harness/core/error.h"
#include "harness/report/chrome_trace.h"
#include "harness/report/dump.h"
#include "harness/report/results.h"
#include "reference/io/npy.h"

namespace lockstep::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A fresh directory, removed with everything in it on destruction.
using test::TempDir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

bool have_python() { return exit_code(std::system("python3 -c 'pass' >/dev/null 2>&1")) == 0; }
bool have_numpy() {
  return exit_code(std::system("python3 -c 'import numpy' >/dev/null 2>&1")) == 0;
}

// Runs `script` with python3 and returns its exit code.
int run_python(const TempDir& dir, const std::string& script) {
  const std::string path = dir / "check.py";
  write_text(path, script);
  return exit_code(std::system(("python3 '" + path + "'").c_str()));
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// results.json and junit.xml

RunSummary sample_run() {
  RunSummary run;
  run.lockstep_version = "0.1.0";
  run.torch_version = "2.5.1";
  run.started_at = "2025-01-02T03:04:05Z";
  run.duration_s = 12.5;

  ScenarioResult pass;
  pass.name = "allreduce";
  pass.id = "allreduce[f32]";
  pass.file = "scenarios/allreduce.toml";
  pass.variant = "f32";
  pass.tags = {"smoke", "cpu"};
  pass.status = Status::kPass;
  pass.expected = "pass";
  pass.duration_s = 1.25;
  pass.world_size = 2;
  pass.digest = "abc123";
  pass.metrics = {{"step_ms", 3.5}, {"bytes", 4096}};
  pass.artifacts = "allreduce/f32";
  run.results.push_back(pass);

  ScenarioResult fail = pass;
  fail.name = "mismatch";
  fail.id = "mismatch";
  fail.variant = "";
  fail.status = Status::kFail;
  fail.expected = "pass";
  fail.diagnosis = Diagnosis{DiagnosisKind::kCollectiveMismatch, "rank 1 sent bf16", 1, 7};
  fail.reason = "expected pass, observed collective_mismatch";
  fail.metrics = {};
  run.results.push_back(fail);

  ScenarioResult skip = pass;
  skip.id = "nccl_only";
  skip.status = Status::kSkip;
  skip.reason = "requires CUDA";
  run.results.push_back(skip);

  ScenarioResult error = pass;
  error.id = "broken";
  error.status = Status::kError;
  error.reason = "rank 0 threw: boom";
  run.results.push_back(error);

  ScenarioResult pass2 = pass;
  pass2.id = "allreduce[bf16]";
  run.results.push_back(pass2);
  return run;
}

TEST(ReportResultsTest, StatusNames) {
  EXPECT_EQ(to_string(Status::kPass), "pass");
  EXPECT_EQ(to_string(Status::kFail), "fail");
  EXPECT_EQ(to_string(Status::kSkip), "skip");
  EXPECT_EQ(to_string(Status::kError), "error");
}

TEST(ReportResultsTest, JsonHasFieldsAndSummaryCounts) {
  TempDir dir("lockstep_report");
  const std::string path = dir / "results.json";
  write_results_json(sample_run(), path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const std::string text = read_text(path);
  EXPECT_NE(text.find("\n  \"summary\": {"), std::string::npos) << "2-space indent";
  const json j = json::parse(text);

  EXPECT_EQ(j["schema_version"], 4);
  EXPECT_EQ(j["lockstep_version"], "0.1.0");
  EXPECT_EQ(j["torch_version"], "2.5.1");
  EXPECT_EQ(j["started_at"], "2025-01-02T03:04:05Z");
  EXPECT_DOUBLE_EQ(j["duration_s"].get<double>(), 12.5);
  EXPECT_EQ(j["summary"], json({{"total", 5}, {"pass", 2}, {"fail", 1}, {"skip", 1}, {"error", 1}, {"cancelled", 0}}));

  ASSERT_EQ(j["scenarios"].size(), 5u);
  const json& p = j["scenarios"][0];
  EXPECT_EQ(p["name"], "allreduce");
  EXPECT_EQ(p["id"], "allreduce[f32]");
  EXPECT_EQ(p["file"], "scenarios/allreduce.toml");
  EXPECT_EQ(p["variant"], "f32");
  EXPECT_EQ(p["tags"], json({"smoke", "cpu"}));
  EXPECT_EQ(p["status"], "pass");
  EXPECT_EQ(p["expected"], "pass");
  EXPECT_TRUE(p["diagnosis"].is_null());
  EXPECT_EQ(p["reason"], "");
  EXPECT_DOUBLE_EQ(p["duration_s"].get<double>(), 1.25);
  EXPECT_EQ(p["world_size"], 2);
  EXPECT_EQ(p["digest"], "abc123");
  EXPECT_EQ(p["metrics"], json({{"step_ms", 3.5}, {"bytes", 4096.0}}));
  EXPECT_EQ(p["artifacts"], "allreduce/f32");

  const json& f = j["scenarios"][1];
  EXPECT_EQ(f["status"], "fail");
  EXPECT_EQ(f["variant"], "");
  EXPECT_EQ(f["diagnosis"],
            json({{"kind", "collective_mismatch"}, {"message", "rank 1 sent bf16"}, {"rank", 1},
                  {"seq", 7}, {"step", -1}}));
  EXPECT_EQ(f["reason"], "expected pass, observed collective_mismatch");
  EXPECT_TRUE(f["metrics"].is_object());
  EXPECT_TRUE(f["metrics"].empty());
  EXPECT_EQ(j["scenarios"][2]["status"], "skip");
  EXPECT_EQ(j["scenarios"][3]["status"], "error");
}

TEST(ReportResultsTest, UnwritablePathThrows) {
  TempDir dir("lockstep_report");
  write_text(dir / "file", "x");
  EXPECT_THROW(write_results_json(sample_run(), dir / "file/results.json"), lockstep::Error);
  EXPECT_THROW(write_junit_xml(sample_run(), dir / "file/junit.xml"), lockstep::Error);
}

TEST(ReportJunitTest, CountsAndElements) {
  TempDir dir("lockstep_report");
  const std::string path = dir / "junit.xml";
  write_junit_xml(sample_run(), path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const std::string xml = read_text(path);

  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u);
  EXPECT_NE(xml.find("<testsuites name=\"lockstep\" tests=\"5\" failures=\"1\" errors=\"1\" "
                     "skipped=\"1\" time=\"12.500\">"),
            std::string::npos)
      << xml;
  EXPECT_EQ(count_of(xml, "<testsuite "), 1u);
  EXPECT_EQ(count_of(xml, "<testcase "), 5u);
  EXPECT_EQ(count_of(xml, "<failure "), 1u);
  EXPECT_EQ(count_of(xml, "<error "), 1u);
  EXPECT_EQ(count_of(xml, "<skipped "), 1u);
  EXPECT_NE(xml.find("<testcase classname=\"scenarios/allreduce.toml\" name=\"allreduce[f32]\" "
                     "time=\"1.250\"/>"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<skipped message=\"requires CUDA\"/>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<failure message=\"expected pass, observed collective_mismatch\" "
                     "type=\"collective_mismatch\">"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("rank 1 sent bf16"), std::string::npos);
  EXPECT_NE(xml.find("<error message=\"rank 0 threw: boom\">"), std::string::npos) << xml;
}

RunSummary hostile_run() {
  RunSummary run;
  ScenarioResult r;
  r.name = "weird";
  r.id = "w<&\">'\x01" "x";
  r.file = "a&b.toml";
  r.status = Status::kFail;
  r.expected = "pass";
  r.diagnosis = Diagnosis{DiagnosisKind::kResultMismatch, "got <nan> & \x1b[31mred\x1b[0m", 0, -1};
  r.reason = "line1\nline2\t\"q\"\x7f\x02";
  run.results.push_back(r);
  return run;
}

TEST(ReportJunitTest, EscapesMarkupAndControlCharacters) {
  TempDir dir("lockstep_report");
  const std::string path = dir / "junit.xml";
  write_junit_xml(hostile_run(), path);
  const std::string xml = read_text(path);

  EXPECT_NE(xml.find("name=\"w&lt;&amp;&quot;&gt;&apos;"), std::string::npos) << xml;
  EXPECT_NE(xml.find("classname=\"a&amp;b.toml\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("got &lt;nan&gt; &amp; "), std::string::npos) << xml;
  for (unsigned char c : xml) {
    EXPECT_TRUE(c >= 0x20 || c == '\n' || c == '\t' || c == '\r')
        << "control character " << static_cast<int>(c) << " in junit.xml";
  }
}

TEST(ReportJunitTest, PythonParsesEscapedValues) {
  if (!have_python()) GTEST_SKIP() << "requires python3 to parse junit.xml";
  TempDir dir("lockstep_report");
  const std::string path = dir / "junit.xml";
  write_junit_xml(hostile_run(), path);
  // Forbidden characters (0x01, 0x02, ESC) read back as U+FFFD; DEL is legal XML 1.0.
  const std::string script = R"(
import sys, xml.etree.ElementTree as ET
root = ET.parse(')" + path + R"(').getroot()
def check(cond, what):
    if not cond:
        print('junit check failed:', what); sys.exit(1)
check(root.tag == 'testsuites', root.tag)
check(root.get('tests') == '1' and root.get('failures') == '1', root.attrib)
cases = root.findall('./testsuite/testcase')
check(len(cases) == 1, len(cases))
tc = cases[0]
check(tc.get('name') == 'w<&">\'\ufffdx', repr(tc.get('name')))
check(tc.get('classname') == 'a&b.toml', repr(tc.get('classname')))
failure = tc.find('failure')
check(failure is not None, 'no <failure>')
check(failure.get('message') == 'line1\nline2\t"q"\x7f\ufffd', repr(failure.get('message')))
check(failure.get('type') == 'result_mismatch', failure.get('type'))
check('got <nan> & \ufffd[31mred\ufffd[0m' in failure.text, repr(failure.text))
)";
  EXPECT_EQ(run_python(dir, script), 0);
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

// ---------------------------------------------------------------------------------------------
// Chrome trace

std::string trace_record(int rank, int seq, const std::string& op, const std::string& phase,
                         std::int64_t start, std::int64_t end) {
  json r = {{"rank", rank},      {"seq", seq},          {"kind", "collective"},
            {"op", op},          {"dtype", "f32"},      {"wire_dtype", "f32"},
            {"count", 1024},     {"bytes", 4096},       {"reduce", "sum"},
            {"root", -1},        {"peer", -1},          {"tag", 0},
            {"send_counts", json::array()}, {"recv_counts", json::array()},
            {"phase", phase},    {"step", 3},           {"index", seq},
            {"t_start_us", start}, {"t_end_us", end}};
  return r.dump() + "\n";
}

TEST(ChromeTraceTest, OneCompleteEventPerRecordAndRankThreads) {
  TempDir dir("lockstep_report");
  write_text(dir / "rank0.jsonl", trace_record(0, 0, "all_reduce", "train", 1000, 1250) +
                                      trace_record(0, 1, "broadcast", "eval", 2000, 2010));
  write_text(dir / "rank1.jsonl", trace_record(1, 0, "all_reduce", "train", 1005, 1300) +
                                      trace_record(1, 1, "broadcast", "eval", 2001, 2011) +
                                      "{\"rank\": 1, \"seq\": 2, \"op\": \"all_to");
  const std::string out = dir / "out/trace.json";
  write_chrome_trace({dir / "rank0.jsonl", dir / "missing.jsonl", dir / "rank1.jsonl"}, out);
  EXPECT_FALSE(fs::exists(out + ".tmp"));

  const json t = json::parse(read_text(out));
  ASSERT_TRUE(t["traceEvents"].is_array());
  std::vector<json> complete;
  std::map<int, std::string> thread_names;
  std::string process_name;
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "X") complete.push_back(e);
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "process_name") process_name = e["args"]["name"];
  }
  EXPECT_EQ(process_name, "lockstep");
  EXPECT_EQ(thread_names, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  ASSERT_EQ(complete.size(), 4u);

  struct Want {
    int rank;
    int seq;
    const char* name;
    const char* phase;
    std::int64_t ts;
    std::int64_t dur;
  };
  const Want wants[] = {{0, 0, "all_reduce #0", "train", 1000, 250},
                        {0, 1, "broadcast #1", "eval", 2000, 10},
                        {1, 0, "all_reduce #0", "train", 1005, 295},
                        {1, 1, "broadcast #1", "eval", 2001, 10}};
  for (const Want& w : wants) {
    const auto it = std::find_if(complete.begin(), complete.end(), [&](const json& e) {
      return e["tid"] == w.rank && e["args"]["seq"] == w.seq;
    });
    ASSERT_NE(it, complete.end()) << w.name << " on rank " << w.rank;
    const json& e = *it;
    EXPECT_EQ(e["name"], w.name);
    EXPECT_EQ(e["cat"], w.phase);
    EXPECT_EQ(e["pid"], 0);
    EXPECT_EQ(e["ts"], w.ts);
    EXPECT_EQ(e["dur"], w.dur);
    EXPECT_EQ(e["args"]["dtype"], "f32");
    EXPECT_EQ(e["args"]["bytes"], 4096);
    EXPECT_EQ(e["args"]["kind"], "collective");
    EXPECT_EQ(e["args"]["step"], 3);
    EXPECT_FALSE(e["args"].contains("t_start_us"));
    EXPECT_FALSE(e["args"].contains("rank"));
  }
}

TEST(ChromeTraceTest, NoInputsGiveAValidEmptyTrace) {
  TempDir dir("lockstep_report");
  write_chrome_trace({dir / "absent.jsonl"}, dir / "trace.json");
  const json t = json::parse(read_text(dir / "trace.json"));
  for (const json& e : t["traceEvents"]) EXPECT_NE(e["ph"], "X");
}

}  // namespace
}  // namespace lockstep::report
