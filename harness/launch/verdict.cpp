#include "harness/launch/verdict.h"

namespace lockstep::launch {

bool meets_expectation(const scenario::Expectation& e, const std::optional<Diagnosis>& d, std::string& why) {
  if (!e.kind) {
    if (d) why = "expected pass, got " + std::string(to_string(d->kind)) + ": " + d->message;
    return !d;
  }
  if (!d) {
    why = "expected " + std::string(to_string(*e.kind)) + ", but the run passed";
    return false;
  }
  if (d->kind != *e.kind) {
    why = "expected " + std::string(to_string(*e.kind)) + ", got " + std::string(to_string(d->kind)) + ": " + d->message;
    return false;
  }
  if (e.rank && d->rank != *e.rank) {
    why = "expected the diagnosis to name rank " + std::to_string(*e.rank) + ", it names rank " + std::to_string(d->rank);
    return false;
  }
  if (e.seq && d->seq != *e.seq) {
    why = "expected the diagnosis at collective #" + std::to_string(*e.seq) + ", got #" + std::to_string(d->seq);
    return false;
  }
  if (e.step && d->step != *e.step) {
    why = "expected the diagnosis at step " + std::to_string(*e.step) +
          (d->step >= 0 ? ", got step " + std::to_string(d->step) : ", it names no step") + ": " + d->message;
    return false;
  }
  for (const auto& part : e.message_contains) {
    if (d->message.find(part) == std::string::npos) {
      why = "the diagnosis message lacks '" + part + "': " + d->message;
      return false;
    }
  }
  return true;
}

const scenario::Expectation& expectation_for(const scenario::Scenario& s, const report::ScenarioResult& r) {
  const std::string prefix = "torch ";
  return s.expectation_for(r.system.rfind(prefix, 0) == 0 ? r.system.substr(prefix.size()) : "");
}

void decide(const scenario::Expectation& e, report::ScenarioResult& r) {
  r.expected = e.expected_label();
  if (!r.cancelled.empty()) {
    r.status = report::Status::kCancelled;
    r.reason = r.cancelled;
    return;
  }
  if (!r.skip.empty()) {
    r.status = r.skip_fails ? report::Status::kFail : report::Status::kSkip;
    r.reason = r.skip_fails ? "skipped, and --no-skip makes a skip a failure: " + r.skip : r.skip;
    return;
  }
  if (!r.error.empty()) {
    r.status = report::Status::kError;
    r.reason = r.error;
    return;
  }
  std::string why;
  r.status = meets_expectation(e, r.diagnosis, why) ? report::Status::kPass : report::Status::kFail;
  r.reason = why;
}

}  // namespace lockstep::launch
