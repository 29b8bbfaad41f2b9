#include "harness/perf/cost.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"

namespace lockstep::perf {
namespace {

double clock_s(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double timeval_s(const timeval& tv) { return static_cast<double>(tv.tv_sec) + 1e-6 * static_cast<double>(tv.tv_usec); }

int open_event(std::uint32_t type, std::uint64_t config) {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = type;
  a.config = config;
  a.exclude_kernel = 1;  // allowed at perf_event_paranoid 2; the kernel's share is in sys_s
  a.exclude_hv = 1;
  a.inherit = 1;  // threads started later (Gloo's, the loader's) count too
  return static_cast<int>(syscall(SYS_perf_event_open, &a, /*pid=*/0, /*cpu=*/-1, /*group_fd=*/-1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

Counters::Counters()
    : Counters({{PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS}, {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES}},
               {"instructions", "cycles"}) {}

Counters::Counters(const std::vector<std::pair<std::uint32_t, std::uint64_t>>& events, std::vector<std::string> names) {
  for (std::size_t i = 0; i < events.size(); ++i) {
    const int fd = open_event(events[i].first, events[i].second);
    if (fd < 0) {
      availability_ = "none: perf_event_open(" + names[i] + "): " + std::strerror(errno);
      for (int f : fds_) close(f);
      fds_.clear();
      return;
    }
    fds_.push_back(fd);
  }
  names_ = std::move(names);
  for (const auto& n : names_) availability_ += (availability_.empty() ? "" : ",") + n;
}

Counters::~Counters() {
  for (int f : fds_) close(f);
}

std::vector<double> Counters::read() const {
  std::vector<double> out;
  for (int f : fds_) {
    std::uint64_t v = 0;
    if (::read(f, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) v = 0;
    out.push_back(static_cast<double>(v));
  }
  return out;
}

Reading read_clocks(const Counters* counters) {
  Reading r;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  r.cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  r.main_cpu_s = clock_s(CLOCK_THREAD_CPUTIME_ID);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.user_s = timeval_s(ru.ru_utime);
  r.sys_s = timeval_s(ru.ru_stime);
  if (counters && counters->available()) r.counters = counters->read();
  return r;
}

void burn_cpu(double seconds) {
  if (!(seconds > 0)) return;
  const double until = clock_s(CLOCK_THREAD_CPUTIME_ID) + seconds;
  volatile std::uint64_t x = 0x9e3779b97f4a7c15ull;
  do {
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  } while (clock_s(CLOCK_THREAD_CPUTIME_ID) < until);
}

bool Slowdown::applies(const std::string& phase_name, int rank_id) const {
  return (phase.empty() || phase == phase_name) && (rank < 0 || rank == rank_id);
}

std::string Slowdown::describe() const {
  char pct[32];
  std::snprintf(pct, sizeof pct, "%g%%", percent);
  return std::string(pct) + " on " + (phase.empty() ? "every phase" : "phase " + phase) + ", " +
         (rank < 0 ? "every rank" : "rank " + std::to_string(rank));
}


Slowdown parse_slowdown_flag(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return InputError(what + ": " + why + ", got '" + text + "' (PERCENT[:PHASE[:RANK]], e.g. 10:train:1)");
  };
  std::vector<std::string> parts{""};
  for (char ch : text) {
    if (ch == ':') parts.emplace_back();
    else parts.back() += ch;
  }
  if (parts.size() > 3) throw bad("at most three fields");
  Slowdown s;
  char* end = nullptr;
  s.percent = std::strtod(parts[0].c_str(), &end);
  if (parts[0].empty() || *end || !std::isfinite(s.percent) || !(s.percent > 0 && s.percent <= 1000))
    throw bad("PERCENT must be a number in (0, 1000]");
  if (parts.size() > 1) s.phase = parts[1];
  if (parts.size() > 2 && !parts[2].empty()) {
    const long r = std::strtol(parts[2].c_str(), &end, 10);
    if (*end || r < 0 || r > 4096) throw bad("RANK must be an integer >= 0");
    s.rank = static_cast<int>(r);
  }
  return s;
}

PhaseClock::PhaseClock(const Counters* counters, std::vector<Slowdown> slowdowns, int rank)
    : counters_(counters), slowdowns_(std::move(slowdowns)), rank_(rank), last_(read_clocks(counters)) {}

void PhaseClock::charge() {
  Reading now = read_clocks(counters_);
  double extra = 0;
  for (const auto& s : slowdowns_) {
    if (s.applies(site_.phase, rank_)) extra += s.percent / 100;
  }
  if (extra > 0 && now.main_cpu_s > last_.main_cpu_s) {
    burn_cpu(extra * (now.main_cpu_s - last_.main_cpu_s));
    fired_ = true;
    now = read_clocks(counters_);
  }
  const auto key = std::make_pair(site_.phase, site_.step);
  auto it = index_.find(key);
  if (it == index_.end()) {
    it = index_.emplace(key, acc_.size()).first;
    acc_.push_back({site_, Acc{}});
  }
  Acc& a = acc_[it->second].second;
  a.wall_s += now.wall_s - last_.wall_s;
  a.cpu_s += now.cpu_s - last_.cpu_s;
  a.main_cpu_s += now.main_cpu_s - last_.main_cpu_s;
  a.user_s += now.user_s - last_.user_s;
  a.sys_s += now.sys_s - last_.sys_s;
  a.counters.resize(now.counters.size());
  for (std::size_t i = 0; i < now.counters.size() && i < last_.counters.size(); ++i)
    a.counters[i] += now.counters[i] - last_.counters[i];
  last_ = std::move(now);
}

void PhaseClock::mark(const std::string& phase, std::int64_t step) {
  const std::string name = phase.empty() ? "setup" : phase;
  if (name == site_.phase && step == site_.step) return;
  charge();
  site_ = {name, step};
}

std::map<std::string, PhaseCost> PhaseClock::finish() {
  // The site the workload ended in (see end_workload) counts in the totals, but it is not an
  // iteration's sample.
  const Site tail = tail_.value_or(site_);
  charge();
  const std::size_t nc = counters_ && counters_->available() ? counters_->names().size() : 0;
  std::map<std::string, PhaseCost> out;
  std::map<std::string, std::vector<const Acc*>> iterations;  // steps >= 0, in order
  for (const auto& [site, a] : acc_) {
    PhaseCost& p = out[site.phase];
    p.wall_s += a.wall_s;
    p.cpu_s += a.cpu_s;
    p.main_cpu_s += a.main_cpu_s;
    p.user_s += a.user_s;
    p.sys_s += a.sys_s;
    p.counters.resize(nc);
    for (std::size_t i = 0; i < nc && i < a.counters.size(); ++i) p.counters[i] += a.counters[i];
    // A label that changed twice in a row (set_phase then set_step) leaves an empty site: not
    // an iteration.
    if (site.step >= 0 && a.wall_s >= kMinIterationWallS) {
      ++p.iterations;
      if (site.phase != tail.phase || site.step != tail.step) iterations[site.phase].push_back(&a);
    }
  }
  for (auto& [phase, its] : iterations) {
    PhaseCost& p = out[phase];
    p.counter_samples.assign(nc, {});
    if (its.size() < 2) continue;
    // The first iteration warms caches and allocators: it is not a sample.
    const std::size_t n = its.size() - 1;
    const std::size_t chunk = (n + kMaxSamples - 1) / kMaxSamples;
    for (std::size_t from = 1; from + chunk <= its.size(); from += chunk) {
      double cpu = 0, main_cpu = 0;
      std::vector<double> c(nc, 0);
      for (std::size_t k = from; k < from + chunk; ++k) {
        cpu += its[k]->cpu_s;
        main_cpu += its[k]->main_cpu_s;
        for (std::size_t i = 0; i < nc && i < its[k]->counters.size(); ++i) c[i] += its[k]->counters[i];
      }
      p.cpu_samples.push_back(cpu);
      p.main_cpu_samples.push_back(main_cpu);
      for (std::size_t i = 0; i < nc; ++i) p.counter_samples[i].push_back(c[i]);
    }
  }
  return out;
}

namespace {
// Six significant digits: far below the noise, and a third of the text.
std::vector<double> rounded(std::vector<double> v) {
  for (double& x : v) {
    if (x == 0 || !std::isfinite(x)) continue;
    const double scale = std::pow(10.0, 5 - std::floor(std::log10(std::fabs(x))));
    x = std::round(x * scale) / scale;
  }
  return v;
}
}  // namespace

RankCost report(const std::map<std::string, PhaseCost>& phases, const Counters& counters, bool slowdown_fired) {
  RankCost out;
  out.availability = counters.availability();
  out.counters = counters.names();
  out.slowdown_fired = slowdown_fired;
  for (const auto& [name, p] : phases) {
    PhaseReport& x = out.phases[name];
    x.iterations = p.iterations;
    x.wall_s = p.wall_s;
    x.cpu_s = p.cpu_s;
    x.main_cpu_s = p.main_cpu_s;
    x.user_s = p.user_s;
    x.sys_s = p.sys_s;
    x.cpu_samples = rounded(p.cpu_samples);
    x.main_cpu_samples = rounded(p.main_cpu_samples);
    for (std::size_t i = 0; i < counters.names().size() && i < p.counters.size(); ++i) {
      x.counters[counters.names()[i]] = p.counters[i];
      x.counter_samples[counters.names()[i]] = rounded(p.counter_samples[i]);
    }
  }
  return out;
}

}  // namespace lockstep::perf
