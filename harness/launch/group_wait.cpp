#include "harness/launch/group_wait.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <vector>

namespace lockstep::launch {
namespace {

// The call rank r waits in: its group's ranks, its site and op, and how messages name it.
struct Wait {
  int rank = -1;
  std::vector<int> ranks;
  std::string phase;
  std::int64_t step = -1;
  std::int64_t seq = -1;  // the default group's collective number, -1 on another group
  comm::Op op = comm::Op::kBarrier;
  std::string text;
};

std::optional<Wait> wait_of(const comm::Board& board, int r) {
  const comm::SlotView v = board.view(r);
  Wait w;
  w.rank = r;
  if (v.in_collective()) {
    for (int k = 0; k < board.world_size(); ++k) w.ranks.push_back(k);
    w.phase = v.phase;
    w.step = v.step;
    w.seq = v.issued - 1;
    w.op = v.op;
    w.text = v.waiting_in() + " on the default group (every rank)";
    return w;
  }
  if (v.in_group_call()) {
    w.ranks = v.group_ranks();
    w.phase = v.group_phase;
    w.step = v.group_step;
    w.op = v.group_op;
    w.text = v.waiting_in_group();
    return w;
  }
  return std::nullopt;
}

bool has(const std::vector<int>& ranks, int r) { return std::find(ranks.begin(), ranks.end(), r) != ranks.end(); }

}  // namespace

std::string wait_text(const comm::SlotView& v) {
  if (v.in_collective()) return "waiting in " + v.waiting_in();
  if (v.in_group_call()) return "waiting in " + v.waiting_in_group();
  return "not in a collective (last completed " + v.last_completed() + ")";
}

std::optional<Diagnosis> crossed_groups(const comm::Board& board, int first, int end, bool same_site) {
  std::vector<Wait> waits;
  for (int r = first; r < end; ++r) {
    if (auto w = wait_of(board, r)) waits.push_back(std::move(*w));
  }
  // The share of a call's group that waits in it (same group, site and op).
  auto share = [&](const Wait& w) {
    std::size_t joined = 0;
    for (const auto& o : waits) joined += o.ranks == w.ranks && o.phase == w.phase && o.op == w.op;
    return std::pair<std::size_t, std::size_t>{joined, w.ranks.size()};
  };
  for (std::size_t i = 0; i < waits.size(); ++i) {
    for (std::size_t j = i + 1; j < waits.size(); ++j) {
      const Wait& a = waits[i];
      const Wait& b = waits[j];
      if (a.ranks == b.ranks || (same_site && a.phase != b.phase) || !has(a.ranks, b.rank) || !has(b.ranks, a.rank)) continue;
      const auto sa = share(a), sb = share(b);
      // a's share below b's: sa.first / sa.second < sb.first / sb.second.
      const bool a_less = sa.first * sb.second < sb.first * sa.second;
      const bool b_less = sb.first * sa.second < sa.first * sb.second;
      const Wait& bad = b_less ? b : a;
      const Wait& good = b_less ? a : b;
      const auto sbad = b_less ? sb : sa, sgood = b_less ? sa : sb;
      std::ostringstream os;
      const bool one_site = a.phase == b.phase;
      if (one_site) {
        os << "rank " << bad.rank << " and rank " << good.rank << " issued the call at " << bad.phase
           << " on different process groups and wait for each other: ";
      } else {
        os << "rank " << bad.rank << " and rank " << good.rank << " wait for each other in calls on different process groups: ";
      }
      os << "rank " << bad.rank << " is waiting in " << bad.text << ", rank " << good.rank << " in " << good.text << "; rank "
         << bad.rank << "'s call is the one fewer of its group's ranks joined (" << sbad.first << " of " << sbad.second
         << ", against " << sgood.first << " of " << sgood.second << ")";
      if (!a_less && !b_less) os << "; equal shares: blaming the lower rank";
      if (!one_site) os << ": rank " << bad.rank << " skipped or added a call before it";
      return Diagnosis{one_site ? DiagnosisKind::kCollectiveMismatch : DiagnosisKind::kMissingParticipant, os.str(), bad.rank,
                       one_site ? bad.seq : good.seq, one_site ? bad.step : good.step};
    }
  }
  return std::nullopt;
}

std::optional<Diagnosis> misdirected_send(const comm::Board& board, int first, int end) {
  std::vector<std::vector<comm::P2pView>> flights;
  for (int r = first; r < end; ++r) flights.push_back(comm::read_p2p_flight(board.slot(r)));
  auto flight = [&](int r) -> const std::vector<comm::P2pView>& { return flights[static_cast<std::size_t>(r - first)]; };
  auto has_call = [&](int r, comm::Op op, int peer) {
    const auto& f = flight(r);
    return std::any_of(f.begin(), f.end(), [&](const comm::P2pView& v) { return v.op == op && v.peer == peer; });
  };
  for (int r = first; r < end; ++r) {
    for (const comm::P2pView& recv : flight(r)) {
      const int s = recv.peer;
      if (recv.op != comm::Op::kRecv || s < first || s >= end || s == r || has_call(s, comm::Op::kSend, r)) continue;
      for (const comm::P2pView& send : flight(s)) {
        const int t = send.peer;
        if (send.op != comm::Op::kSend || t == r || t < first || t >= end || has_call(t, comm::Op::kRecv, s)) continue;
        std::ostringstream os;
        os << "rank " << s << " sent to the wrong peer: rank " << r << " waits in " << recv.describe() << ", while rank " << s
           << "'s send in flight is " << send.describe() << ", and rank " << t << " is not receiving from rank " << s;
        return Diagnosis{DiagnosisKind::kCollectiveMismatch, os.str(), s, -1, send.step};
      }
    }
  }
  return std::nullopt;
}

std::optional<Diagnosis> torn_p2p_pair(const comm::Board& board, int first, int end, int receiver) {
  std::vector<std::vector<comm::P2pView>> recent;
  for (int r = first; r < end; ++r) recent.push_back(comm::read_p2p_recent(board.slot(r)));
  for (int r = first; r < end; ++r) {
    if (receiver >= 0 && r != receiver) continue;
    for (const comm::P2pView& recv : recent[static_cast<std::size_t>(r - first)]) {
      const int s = recv.peer;
      if (recv.op != comm::Op::kRecv || recv.ended || s < first || s >= end || s == r) continue;
      for (const comm::P2pView& send : recent[static_cast<std::size_t>(s - first)]) {
        if (send.op != comm::Op::kSend || send.peer != r || send.tag != recv.tag || send.group != recv.group ||
            send.ordinal != recv.ordinal) {
          continue;
        }
        if (send.dtype == recv.dtype && send.count == recv.count) break;
        std::ostringstream os;
        os << "p2p (" << send.phase;
        if (send.step >= 0) os << " step " << send.step;
        os << "): rank " << s << " send " << comm::to_string(send.dtype) << '[' << send.count << "] tag=" << send.tag << ", rank " << r
           << " recv " << comm::to_string(recv.dtype) << '[' << recv.count << "] tag=" << recv.tag << " (" << recv.phase;
        if (recv.step >= 0) os << " step " << recv.step;
        os << "); the pair's records were on the board when rank " << r << " failed in its engine";
        return Diagnosis{DiagnosisKind::kCollectiveMismatch, os.str(), s, -1, send.step};
      }
    }
  }
  return std::nullopt;
}

std::optional<Diagnosis> stuck_waits(const comm::Board& board, int first, int end, bool same_site) {
  if (auto d = crossed_groups(board, first, end, same_site)) return d;
  return misdirected_send(board, first, end);
}

}  // namespace lockstep::launch
