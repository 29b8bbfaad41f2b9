// The fingerprint record every rank contributes for one call, and the comparisons that turn the
// ranks' records into a diagnosis (verifier.h declares them): pure functions of the records, used by
// the Verifier on the board and on the control group, and by a failing rank (skipped_collective).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/comm/board.h"
#include "harness/comm/verifier.h"

namespace lockstep::comm {
namespace {
// Record layout (int64 words): the op's words, one word per row of the call-field table
// (call_fields(), harness/trace/call_fields.h), the call site, then send_counts[ws], recv_counts[ws].
constexpr std::size_t kOp = 0, kDType = 1, kReduce = 2, kDevice = 3, kCount = 4, kField0 = 5;
constexpr std::size_t kSeq = kField0 + kCallFieldCount, kStep = kSeq + 1, kIndex = kSeq + 2, kPhase0 = kSeq + 3,
                      kHeader = kPhase0 + 3;
constexpr std::size_t word_of(std::int64_t Call::*member) {
  std::size_t i = 0;
#define LOCKSTEP_WORD_OF(name, label, when, none, kind) \
  if (member == &Call::name) return kField0 + i;        \
  ++i;
  LOCKSTEP_CALL_FIELDS(LOCKSTEP_WORD_OF)
#undef LOCKSTEP_WORD_OF
  return kHeader;
}
const std::size_t kPeer = word_of(&Call::peer);

// A field's value as a message shows it: a rank of the group as the rank it is.
std::int64_t shown(const CallField& f, std::int64_t v, const std::vector<int>* members) {
  if (f.kind == CallFieldKind::kValue || !members || v < 0 || v >= static_cast<std::int64_t>(members->size())) return v;
  return (*members)[static_cast<std::size_t>(v)];
}

std::string phase_of(const std::int64_t* rec) {
  char buf[25] = {};
  std::memcpy(buf, rec + kPhase0, 24);
  return buf;
}

std::string site_of(const std::int64_t* rec) {
  std::ostringstream os;
  os << phase_of(rec);
  if (rec[kStep] >= 0) os << " step " << rec[kStep];
  os << " call " << rec[kIndex];
  return os.str();
}

// `members`: the group's ranks, so that a root reads as the rank it is.
std::string args_of(const std::int64_t* rec, int ws, const std::vector<int>* members = nullptr) {
  Fingerprint fp;
  fp.op = static_cast<Op>(rec[kOp]);
  fp.dtype = static_cast<DType>(rec[kDType]);
  fp.reduce = static_cast<ReduceOp>(rec[kReduce]);
  fp.device = static_cast<DeviceType>(rec[kDevice]);
  fp.count = rec[kCount];
  for (std::size_t i = 0; i < fp.fields.size(); ++i) fp.fields[i] = shown(call_fields()[i], rec[kField0 + i], members);
  std::string s = describe(fp);
  if (fp.op == Op::kAllToAll) {
    std::ostringstream os;
    os << " send=[";
    for (int j = 0; j < ws; ++j) os << (j ? "," : "") << rec[kHeader + j];
    os << "] recv=[";
    for (int j = 0; j < ws; ++j) os << (j ? "," : "") << rec[kHeader + ws + j];
    os << ']';
    s += os.str();
  }
  return s;
}

// Groups ranks by a key; returns groups ordered by their lowest rank.
template <typename Key>
std::vector<std::vector<int>> group_by(int ws, const std::vector<bool>* present, Key key) {
  std::vector<std::vector<int>> groups;
  std::vector<decltype(key(0))> keys;
  for (int r = 0; r < ws; ++r) {
    if (present && !(*present)[static_cast<std::size_t>(r)]) continue;
    auto k = key(r);
    auto it = std::find(keys.begin(), keys.end(), k);
    if (it == keys.end()) {
      keys.push_back(k);
      groups.push_back({r});
    } else {
      groups[static_cast<std::size_t>(it - keys.begin())].push_back(r);
    }
  }
  return groups;
}

// The group to blame: a strict minority if there is one (the smallest, lowest ranks first),
// otherwise the group not containing rank 0.
const std::vector<int>& blamed(const std::vector<std::vector<int>>& groups) {
  const std::vector<int>* best = &groups.back();
  for (const auto& g : groups) {
    if (g.size() < best->size()) best = &g;
  }
  std::size_t smallest = best->size();
  std::size_t with_size = 0;
  for (const auto& g : groups) with_size += g.size() == smallest;
  if (with_size > 1) {
    for (const auto& g : groups) {
      if (g.front() != 0) return g;
    }
  }
  return *best;
}

std::string differing_fields(const std::int64_t* a, const std::int64_t* b, int ws) {
  std::vector<std::string> fields;
  if (a[kOp] != b[kOp]) fields.push_back("op");
  if (a[kDType] != b[kDType]) fields.push_back("dtype");
  if (a[kCount] != b[kCount]) fields.push_back("count");
  if (a[kReduce] != b[kReduce]) fields.push_back("reduce op");
  for (std::size_t i = 0; i < call_fields().size(); ++i) {
    if (a[kField0 + i] != b[kField0 + i]) fields.emplace_back(call_fields()[i].label);
  }
  if (a[kDevice] != b[kDevice]) fields.push_back("device");
  std::string s;
  for (std::size_t i = 0; i < fields.size(); ++i) s += (i ? ", " : "") + fields[i];
  return s + (fields.size() == 1 ? " differs" : " differ");
}

}  // namespace

std::size_t fingerprint_words(int world_size) {
  return kHeader + 2 * static_cast<std::size_t>(world_size);
}

std::vector<std::int64_t> encode_fingerprint(const Call& call, int world_size) {
  std::vector<std::int64_t> rec(fingerprint_words(world_size), 0);
  const Fingerprint fp = fingerprint_of(call);
  rec[kOp] = static_cast<std::int64_t>(fp.op);
  rec[kDType] = static_cast<std::int64_t>(fp.dtype);
  rec[kReduce] = static_cast<std::int64_t>(fp.reduce);
  rec[kDevice] = static_cast<std::int64_t>(fp.device);
  rec[kCount] = fp.count;
  for (std::size_t i = 0; i < fp.fields.size(); ++i) rec[kField0 + i] = fp.fields[i];
  rec[kSeq] = call.seq;
  rec[kStep] = call.site.step;
  rec[kIndex] = call.site.index;
  char buf[24] = {};
  std::memcpy(buf, call.site.phase.data(), std::min<std::size_t>(call.site.phase.size(), 24));
  std::memcpy(&rec[kPhase0], buf, 24);
  if (call.op == Op::kAllToAll) {
    for (int j = 0; j < world_size; ++j) {
      rec[kHeader + j] = call.send_counts[static_cast<std::size_t>(j)];
      rec[kHeader + world_size + j] = call.recv_counts[static_cast<std::size_t>(j)];
    }
  }
  return rec;
}

std::vector<CallSite> record_sites(const std::vector<std::int64_t>& gathered, int ws) {
  const std::size_t w = fingerprint_words(ws);
  std::vector<CallSite> sites;
  for (int r = 0; r < ws && (static_cast<std::size_t>(r) + 1) * w <= gathered.size(); ++r) {
    const std::int64_t* rec = gathered.data() + static_cast<std::size_t>(r) * w;
    sites.push_back(CallSite{phase_of(rec), rec[kStep], rec[kIndex]});
  }
  return sites;
}

std::optional<Diagnosis> check_fingerprints(const std::vector<std::int64_t>& gathered, int ws,
                                            const std::vector<bool>* present, const std::vector<int>* members) {
  const std::size_t w = fingerprint_words(ws);
  // Positions are the group's ranks; messages and blame name the ranks themselves.
  auto G = [&](int r) { return members ? (*members)[static_cast<std::size_t>(r)] : r; };
  auto names = [&](const std::vector<int>& rs) {
    std::vector<int> g;
    for (int r : rs) g.push_back(G(r));
    return rank_list(g);
  };
  const std::string on = members ? " on the group of " + rank_list(*members) : "";
  auto rec = [&](int r) { return gathered.data() + static_cast<std::size_t>(r) * w; };
  auto known = [&](int r) { return !present || (*present)[static_cast<std::size_t>(r)]; };
  int first = 0;
  while (first < ws && !known(first)) ++first;
  if (first == ws) return std::nullopt;
  const std::int64_t seq = rec(first)[kSeq];

  // 1. Call sites: ranks at different points of the program.
  auto sites = group_by(ws, present, [&](int r) {
    return std::vector<std::int64_t>(rec(r) + kStep, rec(r) + kHeader);
  });
  if (sites.size() > 1) {
    // Two equal groups: the rank further along in the same phase (or at the end) is the one
    // that skipped a call.
    const std::vector<int>* bad_ptr = &blamed(sites);
    if (sites.size() == 2 && sites[0].size() == sites[1].size()) {
      const auto* a = rec(sites[0].front());
      const auto* b = rec(sites[1].front());
      if (phase_of(a) == "finalize" || phase_of(b) == "finalize") {
        bad_ptr = phase_of(a) == "finalize" ? &sites[0] : &sites[1];
      } else if (phase_of(a) == phase_of(b)) {
        const bool a_ahead = std::pair(a[kStep], a[kIndex]) > std::pair(b[kStep], b[kIndex]);
        bad_ptr = a_ahead ? &sites[0] : &sites[1];
      }
    }
    const auto& bad = *bad_ptr;
    std::ostringstream os;
    os << "collective #" << seq << on << ": ";
    for (std::size_t g = 0; g < sites.size(); ++g) {
      const auto* r0 = rec(sites[g].front());
      os << (g ? "; " : "") << names(sites[g]) << " issued it from " << site_of(r0) << " ("
         << args_of(r0, ws, members) << ")";
    }
    const auto* mine = rec(bad.front());
    const auto* other = rec(bad.front() == sites.front().front() ? sites[1].front()
                                                                  : sites.front().front());
    if (phase_of(mine) == "finalize") {
      os << ": " << names(bad) << " reached the end of the workload while others still issue collectives";
    } else if (phase_of(other) == "finalize") {
      os << ": " << names(bad) << " issued a collective after the others reached the end";
    } else {
      os << ": " << names(bad) << " skipped or added a collective before this one";
    }
    // The step of the collective the blamed ranks did not take part in: the others' site.
    return Diagnosis{DiagnosisKind::kMissingParticipant, os.str(), G(bad.front()), seq, other[kStep]};
  }

  // 2. Arguments at the same call site.
  auto args = group_by(ws, present, [&](int r) {
    return std::vector<std::int64_t>(rec(r) + kOp, rec(r) + kSeq);
  });
  if (args.size() > 1) {
    const auto& bad = blamed(args);
    const auto* good_rec = rec(bad.front() == args.front().front() ? args[1].front()
                                                                    : args.front().front());
    std::ostringstream os;
    os << "collective #" << seq << on << " (" << site_of(rec(first)) << "): ";
    for (std::size_t g = 0; g < args.size(); ++g) {
      os << (g ? ", " : "") << names(args[g]) << ' ' << args_of(rec(args[g].front()), ws, members);
    }
    os << ": " << differing_fields(rec(bad.front()), good_rec, ws);
    return Diagnosis{DiagnosisKind::kCollectiveMismatch, os.str(), G(bad.front()), seq, rec(first)[kStep]};
  }

  // 3. all_to_all: what i sends to j must be what j expects from i. Blame the rank party to
  // the most disagreeing (sender, receiver) pairs, the lowest on ties: the one party to every
  // pair when there is one (the minority: a rank with wrong splits disagrees with each peer it
  // got wrong), else the lowest of those that are.
  if (static_cast<Op>(rec(first)[kOp]) == Op::kAllToAll) {
    struct Pair {
      int from, to;
      std::int64_t sent, expected;
    };
    std::vector<Pair> bad;
    std::vector<int> party(static_cast<std::size_t>(ws), 0);
    for (int i = 0; i < ws; ++i) {
      for (int j = 0; j < ws; ++j) {
        if (!known(i) || !known(j)) continue;
        const std::int64_t sent = rec(i)[kHeader + j];
        const std::int64_t expected = rec(j)[kHeader + ws + i];
        if (sent == expected) continue;
        bad.push_back({i, j, sent, expected});
        ++party[static_cast<std::size_t>(i)];
        if (j != i) ++party[static_cast<std::size_t>(j)];
      }
    }
    if (!bad.empty()) {
      const int blame = static_cast<int>(std::max_element(party.begin(), party.end()) - party.begin());
      std::vector<int> in_every;
      for (int r = 0; r < ws; ++r) {
        if (party[static_cast<std::size_t>(r)] == static_cast<int>(bad.size())) in_every.push_back(r);
      }
      constexpr std::size_t kShown = 6;
      std::ostringstream os;
      os << "collective #" << seq << on << " (" << site_of(rec(first)) << "): all_to_all split sizes disagree: ";
      for (std::size_t k = 0; k < std::min(bad.size(), kShown); ++k) {
        const Pair& p = bad[k];
        os << (k ? "; " : "") << "rank " << G(p.from) << " sends " << p.sent << " elements to rank " << G(p.to)
           << ", which expects " << p.expected << " from rank " << G(p.from);
      }
      if (bad.size() > kShown) os << "; and " << bad.size() - kShown << " more pairs";
      if (in_every.size() == 1) {
        os << ": rank " << G(blame) << " is party to every disagreeing pair";
      } else if (in_every.empty()) {
        os << ": no rank is party to every disagreeing pair; rank " << G(blame) << " is party to the most ("
           << party[static_cast<std::size_t>(blame)] << " of " << bad.size() << ")";
      } else {
        os << ": " << names(in_every) << " are party to every disagreeing pair; blaming the lowest";
      }
      return Diagnosis{DiagnosisKind::kCollectiveMismatch, os.str(), G(blame), seq, rec(first)[kStep]};
    }
  }
  return std::nullopt;
}

std::optional<Diagnosis> skipped_collective(const Board& board, int me, std::int64_t issued, const CallSite& here,
                                            const std::string& failure, double wait_s) {
  const int ws = board.world_size();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  auto ready = [&](int r) {
    const auto v = board.view(r);
    return v.issued > issued || v.state == RankState::kFinished || v.state == RankState::kFailed;
  };
  for (;;) {
    bool all = true;
    for (int r = 0; r < ws; ++r) all = all && (r == me || ready(r));
    if (all || std::chrono::steady_clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::vector<int> waiting;
  std::vector<std::int64_t> rec, first;
  for (int r = 0; r < ws; ++r) {
    if (r == me || !board.read_fingerprint(r, issued, rec)) continue;
    const bool passed = phase_of(rec.data()) == here.phase &&
                        std::pair(here.step, here.index) > std::pair(rec[kStep], rec[kIndex]);
    if (!passed) continue;
    if (waiting.empty()) first = rec;
    waiting.push_back(r);
  }
  if (waiting.empty()) return std::nullopt;
  std::ostringstream os;
  os << "collective #" << issued << ": rank " << me << " did not take part in the "
     << to_string(static_cast<Op>(first[kOp])) << " that " << rank_list(waiting) << " issued from "
     << site_of(first.data()) << "; it went past that call without issuing it, then failed: " << failure;
  return Diagnosis{DiagnosisKind::kMissingParticipant, os.str(), me, issued, first[kStep]};
}

std::optional<Diagnosis> check_p2p(const std::vector<std::int64_t>& sender, const Call& receiver,
                                   int group_receiver, const std::vector<int>* members) {
  const auto* s = sender.data();
  auto G = [&](std::int64_t r) {
    return members && r >= 0 && r < static_cast<std::int64_t>(members->size()) ? (*members)[static_cast<std::size_t>(r)]
                                                                               : static_cast<int>(r);
  };
  const int receiver_rank = G(group_receiver);
  const int peer = G(receiver.peer);
  std::ostringstream os;
  if (static_cast<Op>(s[kOp]) != Op::kSend || s[kPeer] != group_receiver) {
    os << "p2p #" << receiver.seq << ": rank " << receiver_rank << " receives from rank " << peer
       << " but rank " << peer << " issued " << to_string(static_cast<Op>(s[kOp])) << " to rank "
       << G(s[kPeer]);
    return Diagnosis{DiagnosisKind::kMissingParticipant, os.str(), peer, receiver.seq, s[kStep]};
  }
  // Every field but the peers (each names the other side) must be the same on both sides.
  bool same = s[kDType] == static_cast<std::int64_t>(receiver.in.dtype) && s[kCount] == receiver.in.count;
  for (std::size_t i = 0; i < call_fields().size(); ++i) {
    const CallField& f = call_fields()[i];
    if (f.kind != CallFieldKind::kPeer) same = same && s[kField0 + i] == f.of(receiver);
  }
  if (!same) {
    // The rows either side shows, each side's value (a rank as the rank it is).
    auto fields = [&](bool sender_side) {
      std::ostringstream out;
      for (std::size_t i = 0; i < call_fields().size(); ++i) {
        const CallField& f = call_fields()[i];
        const std::int64_t sent = s[kField0 + i], got = f.of(receiver);
        if (f.kind == CallFieldKind::kPeer || !(f.shown(Op::kSend, sent) || f.shown(Op::kRecv, got))) continue;
        out << ' ' << f.name << '=' << shown(f, sender_side ? sent : got, members);
      }
      return out.str();
    };
    os << "p2p #" << receiver.seq << " (" << site_of(s) << "): rank " << peer << " send "
       << to_string(static_cast<DType>(s[kDType])) << '[' << s[kCount] << ']' << fields(true) << ", rank "
       << receiver_rank << " recv " << to_string(receiver.in.dtype) << '[' << receiver.in.count << ']' << fields(false);
    return Diagnosis{DiagnosisKind::kCollectiveMismatch, os.str(), peer, receiver.seq, s[kStep]};
  }
  return std::nullopt;
}

}  // namespace lockstep::comm
