#include "harness/launch/watchdog.h"

#include <algorithm>

namespace lockstep::launch {
namespace {

double seconds(Watchdog::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Watchdog::Watchdog(int world_size, Limits limits, Clock::time_point spawned)
    : limits_(limits), spawned_(spawned), started_at_(static_cast<std::size_t>(world_size)), last_change_(spawned),
      busy_(static_cast<std::size_t>(world_size)),
      timeout_s_(limits.timeout_s) {}

Watchdog::Verdict Watchdog::observe(const std::vector<Rank>& ranks, Clock::time_point now) {
  const Verdict v = decide(ranks, now);
  if (v != Verdict::kWatch && first_bad_ && !settle_until_) settle_until_ = now;
  return v;
}

Watchdog::Verdict Watchdog::decide(const std::vector<Rank>& ranks, Clock::time_point now) {
  std::int64_t total = 0;
  bool all_exited = true;
  starting_.clear();
  for (std::size_t r = 0; r < ranks.size() && r < started_at_.size(); ++r) {
    const Rank& k = ranks[r];
    if ((k.started || k.exited) && !started_at_[r]) started_at_[r] = now;
    total += k.progress + (k.exited ? 1 : 0) + (started_at_[r] ? 1 : 0);
    all_exited = all_exited && k.exited;
    if (k.bad_exit && !first_bad_) first_bad_ = now;
    if (!k.exited && !started_at_[r]) starting_.push_back(static_cast<int>(r));
    if (k.engine_timeout_s > 0) timeout_s_ = std::min(timeout_s_, k.engine_timeout_s * kEngineTimeoutShare);
  }
  if (total != last_total_) {
    last_total_ = total;
    last_change_ = now;
  }
  idle_s_ = seconds(now - last_change_);
  if (all_exited) return Verdict::kAllExited;
  if (first_bad_) {
    const double since = seconds(now - *first_bad_);
    const bool coming = still_coming(ranks, now);  // every observation: it watches the ranks' counters
    if (since > limits_.settle_s && !coming) return Verdict::kSettled;
  }
  if (seconds(now - spawned_) > limits_.deadline_s) return Verdict::kDeadline;
  if (!starting_.empty()) {
    // Someone is still starting: the others may be waiting for it, which is not a hang.
    return seconds(now - spawned_) > limits_.startup_s ? Verdict::kStartupTimeout : Verdict::kWatch;
  }
  // Every live rank has started; the idle clock counts from the last start at the earliest,
  // since a start is progress.
  return idle_s_ > timeout_s_ ? Verdict::kTimeout : Verdict::kWatch;
}

bool Watchdog::still_coming(const std::vector<Rank>& ranks, Clock::time_point now) {
  bool coming = false;
  const bool in_grace = seconds(now - *first_bad_) <= limits_.settle_grace_s;
  for (std::size_t r = 0; r < ranks.size() && r < busy_.size(); ++r) {
    const Rank& k = ranks[r];
    if (k.in_call) busy_[r] = Busy{};  // waiting for its peers: its window starts again once it leaves the call
    if (k.exited || k.in_call || k.cpu_ns < 0) continue;
    Busy& b = busy_[r];
    if (!b.since) {
      b = Busy{k.cpu_ns, now, true};  // not yet watched for a whole window: counted as busy
    } else if (const double dt = seconds(now - *b.since); dt >= limits_.busy_window_s) {
      b = Busy{k.cpu_ns, now, static_cast<double>(k.cpu_ns - b.ns) / 1e9 >= kBusyShare * dt};
    }
    coming = coming || (in_grace && b.busy);
  }
  return coming;
}

Watchdog::Limits watchdog_limits(const scenario::Scenario& s) {
  Watchdog::Limits l;
  l.startup_s = s.startup_timeout_s;
  l.timeout_s = s.timeout_s;
  l.deadline_s = s.deadline_s;
  return l;
}


std::optional<double> Watchdog::startup_seconds(int rank) const {
  const auto& t = started_at_[static_cast<std::size_t>(rank)];
  if (!t) return std::nullopt;
  return seconds(*t - spawned_);
}

}  // namespace lockstep::launch
