// The report contract: results.json, junit.xml and the Chrome trace (the .npy dumps and their
// manifest are tested in report_dump_test.cpp). junit.xml is read back by Python's XML parser,
// checking the format against a real consumer; that test skips when python3 is not installed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "harness/core/error.h"
#include "harness/report/chrome_trace.h"
#include "harness/report/results.h"
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

bool have_python() { return exit_code(std::system("python3 -c 'pass' >/dev/null 2>&1")) == 0; }

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
  fail.waits = "waited per rank: rank 0 0.10 s, rank 1 0.00 s";
  fail.straggler = "rank 1 kept the others waiting in 9 of 9 steps";
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

TEST(ReportResultsTest, MarkdownTablesTheWaitsWithALinkToEachPage) {
  TempDir dir("lockstep_report_md");
  const std::string path = dir / "report.md";
  write_markdown_summary(sample_run(), path);
  const std::string md = read_text(path);
  EXPECT_NE(md.find("**Waits at collectives**\n\n| scenario | waits | straggler |"), std::string::npos) << md;
  EXPECT_NE(md.find("| [mismatch](allreduce/f32/waits.html) | waited per rank: rank 0 0.10 s, rank 1 0.00 s | "
                    "rank 1 kept the others waiting in 9 of 9 steps |"),
            std::string::npos)
      << md;
  // Only the one scenario with waits has a row.
  EXPECT_EQ(md.find("[allreduce"), std::string::npos) << md;
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

  EXPECT_EQ(j["schema_version"], 6);
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
  EXPECT_FALSE(p.contains("waits"));  // none analysed

  const json& f = j["scenarios"][1];
  EXPECT_EQ(f["status"], "fail");
  EXPECT_EQ(f["variant"], "");
  EXPECT_EQ(f["diagnosis"],
            json({{"kind", "collective_mismatch"}, {"message", "rank 1 sent bf16"}, {"rank", 1},
                  {"seq", 7}, {"step", -1}}));
  EXPECT_EQ(f["reason"], "expected pass, observed collective_mismatch");
  EXPECT_TRUE(f["metrics"].is_object());
  EXPECT_TRUE(f["metrics"].empty());
  EXPECT_EQ(f["waits"], json({{"summary", "waited per rank: rank 0 0.10 s, rank 1 0.00 s"},
                              {"file", "allreduce/f32/waits.json"},
                              {"html", "allreduce/f32/waits.html"},
                              {"straggler", "rank 1 kept the others waiting in 9 of 9 steps"}}));
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
