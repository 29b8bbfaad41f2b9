#pragma once
// The progress board: a small file shared (mmap) by the launcher and its rank processes. Each
// rank publishes what it is doing with plain atomic stores (no syscalls), so the watchdog can
// say, after a crash or a hang, which collective every rank last completed or is waiting in.
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/comm/types.h"

namespace lockstep::comm {

enum class RankState : std::int32_t { kStarting = 0, kRunning = 1, kFinished = 2, kFailed = 3 };

// One call in a rank's flight recorder (BoardSlot::flight): written by the rank's Monitor when
// it issues the call and when the call completes or fails, so that the launcher can still read a
// rank's last calls after it was killed. `seq1` (the call's seq + 1; 0 on the zero-filled board:
// empty) is written last (release) and cleared first, so a reader that sees the same value
// before and after reading the fields has a whole record.
enum class FlightState : std::int32_t { kIssued = 0, kCompleted = 1, kFailed = 2 };
struct FlightRecord {
  std::atomic<std::int64_t> seq1{0};  // seq + 1; 0: empty or being written
  std::atomic<std::int32_t> op{0};
  std::atomic<std::int32_t> dtype{0};
  std::atomic<std::int32_t> reduce{0};
  std::atomic<std::int32_t> state{0};  // FlightState
  std::atomic<std::int64_t> count{0};
  std::atomic<std::int64_t> step{-1};
  std::atomic<std::int64_t> index{0};
  std::atomic<std::int64_t> t_start_us{0};
  std::atomic<std::int64_t> t_end_us{0};
  std::atomic<std::uint64_t> phase[3]{};
};

// A consistent copy of one FlightRecord.
struct FlightView {
  std::int64_t seq = -1, count = 0, step = -1, index = 0, t_start_us = 0, t_end_us = 0;
  Op op = Op::kBarrier;
  DType dtype = DType::kF32;
  ReduceOp reduce = ReduceOp::kSum;
  FlightState state = FlightState::kIssued;
  std::string phase;
  // "#12 all_reduce f32[1316] sum (train.py:88 step 27) completed"
  std::string describe() const;
};

// One of a rank's last point-to-point calls (issued; in flight until waited for: a Work the program
// never waits for stays in flight until the ring reuses its place), in BoardSlot::p2p_flight,
// written by the Monitor: `id1` (the slot's p2p number + 1; 0: empty) is written last; `ended`
// holds the same number once the call has ended (another value: in flight). A hang where a receiver waits for a sender whose send went to another rank
// is named from the calls in flight, and a receiver killed inside its engine by a send of another
// size from the pair (ended or not) with the same ordinal (harness/launch/group_wait.h).
struct P2pRecord {
  std::atomic<std::int64_t> id1{0};
  std::atomic<std::int64_t> ended{0};
  // The call's place among this rank's calls of its op, peer and tag on its group (the Monitor
  // counts them): the k-th send from S to R pairs with the k-th receive of R from S.
  std::atomic<std::int64_t> ordinal{0};
  std::atomic<std::uint64_t> group{0};  // its group's board key, the same on every member (0: the default group)
  std::atomic<std::int32_t> op{0};
  std::atomic<std::int32_t> peer{-1};  // global rank
  std::atomic<std::int32_t> tag{0};
  std::atomic<std::int32_t> dtype{0};
  std::atomic<std::int64_t> count{0};
  std::atomic<std::int64_t> step{-1};
  std::atomic<std::uint64_t> phase[3]{};
};

// A copy of one P2pRecord.
struct P2pView {
  Op op = Op::kSend;
  int peer = -1, tag = 0;
  DType dtype = DType::kF32;
  std::int64_t count = 0, step = -1, ordinal = 0;
  std::uint64_t group = 0;
  bool ended = false;
  std::string phase;
  // "send f32[4] to rank 2 tag=0 (pipe.py:40 step 2)"
  std::string describe() const;
};

struct alignas(64) BoardSlot {
  std::atomic<std::int64_t> issued{0};     // collectives issued (last issued seq + 1)
  std::atomic<std::int64_t> completed{0};  // collectives completed
  std::atomic<std::int64_t> p2p{0};        // point-to-point calls issued
  std::atomic<std::int32_t> op{0};         // Op of the last issued collective
  std::atomic<std::int32_t> state{0};      // RankState
  std::atomic<std::int64_t> step{-1};      // call site of the last issued collective
  std::atomic<std::int64_t> index{0};
  std::atomic<std::uint64_t> phase[3]{};   // up to 24 chars, NUL padded
  std::atomic<std::int64_t> last_op{0};    // Op of the last completed collective
  std::atomic<std::int64_t> last_step{-1};
  std::atomic<std::uint64_t> last_phase[3]{};
  std::atomic<std::uint64_t> activity[3]{};  // what a starting rank does, e.g. "building graph"
  std::atomic<std::uint64_t> fired{0};       // bit i: the scenario's [[inject]] #i fired here
  std::atomic<std::uint64_t> changed{0};     // bit i: ... and changed what this rank does
  std::atomic<std::int64_t> max_step{-1};    // the highest step a collective was issued from
  std::atomic<std::int64_t> engine_timeout_ms{0};  // a program's own process-group timeout (0: none said)
  // A program's calls on its other process groups (new_group; Call::group), numbered apart from the
  // collectives above: progress for the watchdog, and where a hang leaves the rank.
  std::atomic<std::int64_t> group_issued{0};
  std::atomic<std::int64_t> group_completed{0};
  std::atomic<std::int32_t> group_op{0};        // Op of the last issued one
  std::atomic<std::uint64_t> group_mask{0};     // its group's ranks: bit r for rank r (ranks < 64)
  std::atomic<std::int64_t> group_step{-1};
  std::atomic<std::uint64_t> group_phase[3]{};
  static constexpr int kFlightRing = 16;     // the flight recorder: the last 16 collectives
  FlightRecord flight[kFlightRing];          // collective seq s is in flight[s % kFlightRing]
  static constexpr int kP2pRing = 8;         // point-to-point calls in flight: the last 8 issued
  std::atomic<std::int64_t> p2p_next{0};     // numbers them, over every group of the rank
  P2pRecord p2p_flight[kP2pRing];            // p2p number n is in p2p_flight[n % kP2pRing]
};

// Records a point-to-point call issued to global rank `peer`, the `ordinal`-th of its op, peer and
// tag on the group whose board key is `group` (0: the default group); its number, for p2p_done.
std::int64_t p2p_issued(BoardSlot& slot, const Call& call, int peer, std::int64_t ordinal = 0, std::uint64_t group = 0);
// The call numbered `n` has ended (completed or failed).
void p2p_done(BoardSlot& slot, std::int64_t n);
// The rank's point-to-point calls in flight, oldest first.
std::vector<P2pView> read_p2p_flight(const BoardSlot& slot);
// The rank's last point-to-point calls (at most BoardSlot::kP2pRing), ended or not, oldest first.
std::vector<P2pView> read_p2p_recent(const BoardSlot& slot);

// The rank's flight recorder, oldest first (at most BoardSlot::kFlightRing records).
std::vector<FlightView> read_flight(const BoardSlot& slot);
// Records that collective `seq` was issued (Monitor).
void flight_issued(BoardSlot& slot, std::int64_t seq, const Call& call, std::int64_t t_start_us);
// Records that collective `seq` completed (ok) or failed.
void flight_done(BoardSlot& slot, std::int64_t seq, bool ok, std::int64_t t_end_us);

// A snapshot of one slot, for messages.
struct SlotView {
  std::int64_t issued = 0, completed = 0, p2p = 0, step = -1, index = 0, last_step = -1;
  Op op = Op::kBarrier, last_op = Op::kBarrier;
  RankState state = RankState::kStarting;
  std::string phase, last_phase, activity;
  std::uint64_t fired = 0, changed = 0;
  std::int64_t max_step = -1;
  std::int64_t engine_timeout_ms = 0;
  std::int64_t group_issued = 0, group_completed = 0, group_step = -1;
  Op group_op = Op::kBarrier;
  std::uint64_t group_mask = 0;
  std::string group_phase;

  bool in_collective() const { return issued > completed; }
  // In a call on another of the program's groups (its last issued one has not completed).
  bool in_group_call() const { return group_issued > group_completed; }
  // "all_reduce on the group of ranks 0,1 (groups.py:36)" for the group call in flight.
  std::string waiting_in_group() const;
  // The ranks of the group call in flight.
  std::vector<int> group_ranks() const;
  // Past start-up: the rank has issued its first call, or has ended.
  bool started() const {
    return issued > 0 || p2p > 0 || group_issued > 0 || state == RankState::kFinished || state == RankState::kFailed;
  }
  // "collective #13 all_reduce (train step 27)" for the one in flight.
  std::string waiting_in() const;
  // "collective #12 all_reduce (train step 27)" or "no collective" for the last completed.
  std::string last_completed() const;
};

// Owns a mapping of the board file. Movable, not copyable.
// Layout: a header, one BoardSlot per rank, then per rank 1 + kGroupRings rings of the fingerprint
// records (verifier.h) of its last kFingerprintRing collectives (ring 0: the default group's; the
// others a program's other groups', each behind a key word naming its group), each record
// published seqlock-style: the words first, then seq + 1 with release order.
class Board {
 public:
  Board() = default;
  static constexpr int kFingerprintRing = 64;
  static constexpr int kGroupRings = 8;

  // Creates (truncating) `path` with `world_size` zeroed slots and fingerprint rings of
  // records of `fingerprint_words` words, and maps it.
  static Board create(const std::string& path, int world_size, std::size_t fingerprint_words);
  // Maps an existing board file; throws Error if it cannot.
  static Board attach(const std::string& path);
  ~Board();
  Board(Board&& other) noexcept;
  Board& operator=(Board&& other) noexcept;
  Board(const Board&) = delete;
  Board& operator=(const Board&) = delete;

  bool valid() const { return slots_ != nullptr; }
  int world_size() const { return world_size_; }
  BoardSlot& slot(int rank) { return slots_[rank]; }
  const BoardSlot& slot(int rank) const { return slots_[rank]; }
  SlotView view(int rank) const;
  // Sum of every counter: changes whenever any rank makes progress.
  std::int64_t progress() const;

  static void store_phase(std::atomic<std::uint64_t> (&dst)[3], const std::string& phase);

  // Publishes `rank`'s fingerprint record of collective `seq` in its ring `ring` (0: the default
  // group's; a program's other groups: claim_group_ring).
  void publish_fingerprint(int rank, std::int64_t seq, const std::vector<std::int64_t>& words, int ring = 0);
  // Copies `rank`'s record of collective `seq` into `out`; false when it is not published yet
  // or was already overwritten by a later one.
  bool read_fingerprint(int rank, std::int64_t seq, std::vector<std::int64_t>& out, int ring = 0) const;
  std::size_t fingerprint_words() const { return words_; }
  // Each rank has kGroupRings more rings for the records of a program's other process groups,
  // each marked with its group's `key` (non-zero, the same on every member: group_key). The ring
  // of `rank` for the group `key`, claimed now if it has none (the rank's own); -1 when all are
  // taken (that group is verified through its control group instead).
  int claim_group_ring(int rank, std::uint64_t key);
  // The ring `rank` claimed for `key`, -1 when it has not (yet).
  int find_group_ring(int rank, std::uint64_t key) const;

 private:
  std::atomic<std::int64_t>* ring(int rank, int ring) const;
  std::atomic<std::int64_t>* record(int rank, std::int64_t seq, int ring) const;

  void* base_ = nullptr;
  BoardSlot* slots_ = nullptr;
  std::atomic<std::int64_t>* rings_ = nullptr;
  int world_size_ = 0;
  std::size_t words_ = 0;
  std::size_t bytes_ = 0;
};

// This process's own slot, for the two calls below (set by the rank's main; null elsewhere,
// where they do nothing).
void set_own_slot(BoardSlot* slot);
// Publishes what this rank is doing before its first collective (24 characters at most), so
// that a start-up that takes too long is reported with it.
void set_activity(const std::string& what);
// Publishes the timeout this rank's program gave its process group (init_process_group's
// `timeout`), so that the launcher's watchdog speaks before the program's engine gives up.
void set_engine_timeout(double seconds);
// Records that the scenario's [[inject]] number `index` fired on this rank and changed what it
// does; the launcher reports an injection that fired on no rank as an error. Safe to call just
// before a crash.
void mark_fired(std::size_t index);
// The scenario's [[inject]] kinds, in order, for the overloads below (set by the rank's main).
void set_injection_kinds(std::vector<std::string> kinds);
// Records that every [[inject]] of `kind` fired and changed what the rank does: what a workload
// calls where its injected bug makes it compute something else.
void mark_fired(std::string_view kind);
// Records that every [[inject]] of `kind` fired (the workload took the bug's path) without
// changing anything yet: a workload whose bug changes the result only with some data (duplicate
// ids, a peer's rows) calls this where it takes the path and mark_fired where the data makes a
// difference. The launcher reports an injection that fired but changed nothing on any rank as
// an error: it tested nothing.
void mark_fired_unchanged(std::string_view kind);

}  // namespace lockstep::comm
