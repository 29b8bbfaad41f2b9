// The "embedding" capability's check of ids outside the table (bad_id_groups): what rank 0's
// extra steps on them pulled and did to the table, against the declared rule (embedding_model.h).
#include <algorithm>
#include <string>
#include <vector>

#include "harness/core/diagnosis.h"
#include "harness/sut/common.h"
#include "harness/kinds/embedding/model.h"
#include "reference/embedding/embedding.h"

namespace lockstep::sut::embedding {

std::string bad_rule(BadIds b) {
  switch (b) {
    case BadIds::kReject: return "rejected";
    case BadIds::kRowZero: return "row 0 read and updated in their place (bad_ids = \"row_zero\", FBGEMM's BoundsCheckMode.WARNING)";
    case BadIds::kClamp: return "clamped to [0, N - 1] (bad_ids = \"clamp\")";
    case BadIds::kIgnore: return "ignored: zeros pulled, no update (bad_ids = \"ignore\")";
  }
  return "";
}

BadGroup bad_group(const Options& o, std::uint64_t seed, const std::string& step) {
  // "negative": the whole group; "negative.1": its id at position 1 alone, with the same gradient row.
  const auto dot = step.find('.');
  const std::string g = step.substr(0, dot);
  const std::int64_t n = o.rows;
  BadGroup bg;
  if (g == "past_end") bg.ids = I64{n, n + 1, n + 7, 2 * n};
  else if (g == "negative") bg.ids = I64{-1, -2, -n, -(n + 1)};
  else bg.ids = I64{std::min<std::int64_t>(1, n - 1), -1, n - 1, n};  // mixed: valid ids beside bad ones
  if (o.int32_ids) {
    for (auto& id : bg.ids) id = std::max<std::int64_t>(std::min<std::int64_t>(id, 2147483647), -2147483647 - 1);
  }
  const auto gi = static_cast<std::int64_t>(std::find(kBadIdGroups.begin(), kBadIdGroups.end(), g) - kBadIdGroups.begin());
  for (std::size_t p = 0; p < bg.ids.size(); ++p) {
    for (std::int64_t c = 0; c < o.dim; ++c) bg.grads.push_back(ref::embedding_batch_grad(seed, o.steps + gi, static_cast<std::int64_t>(p), c));
  }
  if (dot != std::string::npos) {
    const auto i = static_cast<std::size_t>(std::stoul(step.substr(dot + 1)));
    const auto d = static_cast<std::size_t>(o.dim);
    bg.ids = I64{bg.ids[i]};
    bg.grads = F32(bg.grads.begin() + static_cast<std::ptrdiff_t>(i * d), bg.grads.begin() + static_cast<std::ptrdiff_t>((i + 1) * d));
  }
  return bg;
}

std::vector<std::string> bad_steps(const Options& o) {
  std::vector<std::string> out;
  for (const auto& g : o.bad_groups) {
    out.push_back(g);
    const std::size_t k = bad_group(o, 0, g).ids.size();
    for (std::size_t i = 0; i < k; ++i) out.push_back(g + "." + std::to_string(i));
  }
  return out;
}

namespace {

// The row an id stands for under `rule`: its own inside [0, N); outside, the rule's, or -1 when
// it has none (reject, ignore).
std::int64_t bad_row(BadIds rule, std::int64_t id, std::int64_t n) {
  if (id >= 0 && id < n) return id;
  switch (rule) {
    case BadIds::kRowZero: return 0;
    case BadIds::kClamp: return std::clamp<std::int64_t>(id, 0, n - 1);
    default: return -1;
  }
}

// The extra step of one bad group under `sem` (not kReject), from table w and state s1/s2
// (updated in place), step number t (1-based): the rows pulled, and w, s1 after.
F32 bad_step(const Options& o, const Semantics& sem, const BadGroup& bg, int world_size, std::int64_t t, F32& w, F32& s1, F32& s2) {
  const auto d = static_cast<std::size_t>(o.dim);
  F32 pulled(bg.ids.size() * d, 0.f);
  I64 rows;
  F32 grads;
  for (std::size_t i = 0; i < bg.ids.size(); ++i) {
    const std::int64_t row = bad_row(sem.bad, bg.ids[i], o.rows);
    if (row < 0) continue;
    std::copy(w.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(row) * d),
              w.begin() + static_cast<std::ptrdiff_t>((static_cast<std::size_t>(row) + 1) * d), pulled.begin() + static_cast<std::ptrdiff_t>(i * d));
    rows.push_back(row);
    for (std::size_t c = 0; c < d; ++c) {
      const float g = bg.grads[i * d + c];
      grads.push_back(sem.divide_by_ws ? g / static_cast<float>(world_size) : g);
    }
  }
  if (!rows.empty()) {
    const auto red = ref::reduce_duplicates(rows.data(), grads.data(), static_cast<std::int64_t>(rows.size()), o.dim, sem.reduce);
    for (std::size_t i = 0; i < red.ids.size(); ++i) {
      const auto row = static_cast<std::size_t>(red.ids[i]);
      update_row(o, t, red.grads.data() + i * d, w.data() + row * d, s1.data() + row * static_cast<std::size_t>(state_cols(o)), s2.data() + row * d);
    }
  }
  return pulled;
}

// The first row where two tables differ (beyond `ulps` units, as close() says), or -1.
std::int64_t first_changed_row(const F32& a, const F32& b, std::int64_t dim, double ulps = 0) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!close(a[i], b[i], ulps)) return static_cast<std::int64_t>(i) / dim;
  }
  return -1;
}

}  // namespace

void check_bad_ids(const Options& o, const scenario::Scenario& s, const SystemOutputs& out, const Trajectory& tr, CheckResult& res) {
  const int ws = out.world_size();
  std::vector<std::int64_t> shape;
  F32 w = o.tolerance_ulps > 0 ? out.floats(0, "table.step" + std::to_string(o.steps - 1), Declared::kFloat32, &shape) : tr.after.back();
  F32 s1 = tr.s1.back(), s2 = tr.s2.back();
  const double tol = o.tolerance_ulps;
  std::int64_t t = o.steps;
  // Every step is judged (a group, then each of its ids alone), and every problem named: a
  // rejection of one id must not hide what another did on its own.
  struct Problem {
    Diagnosis d;
    std::string brief;  // how the others are listed after the first: "bad.negative.1: ids [-2] moved row 0"
  };
  std::vector<Problem> problems;
  for (const auto& g : bad_steps(o)) {
    ++t;
    const BadGroup bg = bad_group(o, s.seed, g);
    const std::string ids_text = preview(bg.ids, 4);
    I64 outside, inside;  // the step's ids outside [0, N), and its valid ones (a mixed group's)
    for (const auto id : bg.ids) (id < 0 || id >= o.rows ? outside : inside).push_back(id);
    // "(outside [0, N))", or for a mixed group "(-1, 1009 outside [0, N))".
    const std::string range = "[0, " + std::to_string(o.rows) + ")";
    const std::string outside_text = inside.empty() ? " (outside " + range + ")" : " (" + preview(outside, 4).substr(1, preview(outside, 4).size() - 2) + " outside " + range + ")";
    const F32 table_after = out.floats(0, "bad." + g + ".table", Declared::kFloat32, &shape);
    if (table_after.size() != w.size()) contract_violation(0, "bad." + g + ".table", "expected float32 [" + std::to_string(o.rows) + ", " + std::to_string(o.dim) + "]");
    auto problem = [&](DiagnosisKind kind, const std::string& msg, const std::string& brief) {
      problems.push_back({Diagnosis{kind, "bad." + g + ": ids " + ids_text + msg, 0, -1}, "bad." + g + ": ids " + ids_text + " " + brief});
      w = table_after;  // what follows is judged from the system's own table
    };
    const auto why = out.rejected(0, "bad." + g + ".pulled");
    if (outside.empty()) {
      // A valid id alone (from a mixed group): a plain step of its row, whatever the rule.
      if (why) {
        problem(DiagnosisKind::kResultMismatch, " (inside " + range + ") were rejected (" + *why + "): a valid id must be pulled and stepped",
                "valid, rejected");
        continue;
      }
      const F32 pulled = out.floats(0, "bad." + g + ".pulled", Declared::kFloat32, &shape);
      F32 w2 = w, s1b = s1, s2b = s2;
      const F32 want = bad_step(o, o.declared, bg, ws, t, w2, s1b, s2b);
      const std::int64_t row = want.size() == pulled.size() ? first_changed_row(w2, table_after, o.dim, tol) : -2;
      if (row != -1 || first_changed_row(want, pulled, o.dim, tol) >= 0) {
        const std::string what = row >= 0 ? "row " + std::to_string(row) + " differs from the step's" : "the pulled rows differ";
        problem(DiagnosisKind::kResultMismatch, " (inside " + range + ") were not pulled and stepped as a valid id is: " + what, "valid, " + what);
        continue;
      }
      w = tol > 0 ? table_after : std::move(w2), s1 = std::move(s1b), s2 = std::move(s2b);
      continue;
    }
    if (why) {
      if (o.declared.bad != BadIds::kReject) {
        problem(DiagnosisKind::kResultMismatch, " were rejected (" + *why + "), where the declared rule has them " + bad_rule(o.declared.bad),
                "rejected");
      } else if (const auto row = first_changed_row(w, table_after, o.dim); row >= 0) {
        problem(DiagnosisKind::kResultMismatch, " were rejected (" + *why + ") but row " + std::to_string(row) + " changed",
                "rejected, row " + std::to_string(row) + " changed");
      } else {
        res.notes.push_back("bad." + g + ": ids " + ids_text + " rejected as required (" + *why + ")");
      }
      continue;
    }
    const F32 pulled = out.floats(0, "bad." + g + ".pulled", Declared::kFloat32, &shape);
    if (pulled.size() != bg.ids.size() * static_cast<std::size_t>(o.dim)) {
      contract_violation(0, "bad." + g + ".pulled", "expected float32 [" + std::to_string(bg.ids.size()) + ", " + std::to_string(o.dim) + "]");
    }
    auto replay = [&](BadIds rule, F32& w2, F32& s1b, F32& s2b) {
      Semantics sem = o.declared;
      sem.bad = rule;
      const F32 p = bad_step(o, sem, bg, ws, t, w2, s1b, s2b);
      return p.size() == pulled.size() && first_changed_row(p, pulled, o.dim, tol) < 0 && first_changed_row(w2, table_after, o.dim, tol) < 0;
    };
    if (o.declared.bad != BadIds::kReject) {
      F32 w2 = w, s1b = s1, s2b = s2;
      if (!replay(o.declared.bad, w2, s1b, s2b)) {
        const auto row = first_changed_row(w2, table_after, o.dim, tol);
        const std::string what = row >= 0 ? "row " + std::to_string(row) + " differs" : "the pulled rows differ";
        problem(DiagnosisKind::kResultMismatch, " were not handled as the declared rule says (" + bad_rule(o.declared.bad) + "): " + what,
                "not handled as declared: " + what);
        continue;
      }
      w = tol > 0 ? table_after : std::move(w2), s1 = std::move(s1b), s2 = std::move(s2b);
      continue;
    }
    // Accepted without a declared rule.
    // The table had the bad ids been ignored: the valid ids' step alone (the table as it was for a
    // group of bad ids only). A row that differs from it is one the bad ids moved.
    F32 base = w;
    if (!inside.empty()) {
      F32 s1b = s1, s2b = s2;
      Semantics sem = o.declared;
      sem.bad = BadIds::kIgnore;
      (void)bad_step(o, sem, bg, ws, t, base, s1b, s2b);
    }
    std::string moved;
    for (std::int64_t r = 0; r < o.rows; ++r) {
      for (std::int64_t c = 0; c < o.dim; ++c) {
        const auto i = static_cast<std::size_t>(r * o.dim + c);
        if (!close(base[i], table_after[i], 0)) {
          moved += (moved.empty() ? "" : ", ") + std::to_string(r);
          break;
        }
      }
    }
    std::string explained;
    for (BadIds rule : {BadIds::kRowZero, BadIds::kClamp, BadIds::kIgnore}) {
      F32 w2 = w, s1b = s1, s2b = s2;
      if (replay(rule, w2, s1b, s2b)) {
        explained = "; explained by " + bad_rule(rule) + " (if that is the system's documented behaviour, declare it in [system.profile])";
        s1 = std::move(s1b), s2 = std::move(s2b);
        break;
      }
    }
    if (!moved.empty()) {
      const bool one = moved.find(',') == std::string::npos;
      const std::string rows = (one ? "row " : "rows ") + moved;
      problem(DiagnosisKind::kResultMismatch, outside_text + " were accepted and moved " + rows + (one ? ", a real row" : ", real rows") + explained,
              "moved " + rows);
    } else {
      problem(DiagnosisKind::kInvariantViolation,
              outside_text + " were accepted (no row moved" + (inside.empty() ? "" : " but the valid ids'") + "); a pull must reject them" + explained,
              "accepted, no row moved");
    }
  }
  if (problems.empty()) return;
  // One diagnosis: result_mismatch if any row moved or a rule was broken, else invariant_violation;
  // the first problem in full, then the others.
  Diagnosis d = problems.front().d;
  for (const auto& p : problems) {
    if (p.d.kind == DiagnosisKind::kResultMismatch) d.kind = DiagnosisKind::kResultMismatch;
  }
  for (std::size_t i = 1; i < problems.size(); ++i) d.message += (i == 1 ? "; also " : "; ") + problems[i].brief;
  throw DiagnosisError(d);
}

}  // namespace lockstep::sut::embedding
