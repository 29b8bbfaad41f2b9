#pragma once
// The cross-rank verifier decorator. Before a collective's result is released to the caller,
// every rank's fingerprint (op, dtype, count, reduce op, root, split sizes, call site) has been
// compared on every rank. The fingerprint all_gather runs on a separate control group at the
// same time as the data collective, so a clean collective costs max(data, control) instead of
// PyTorch's barrier + two all_gathers in front of it; a mismatch is diagnosed even when the data
// collective itself would hang. Point-to-point calls send their fingerprint to the peer.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "harness/comm/backend.h"
#include "harness/core/diagnosis.h"

namespace lockstep::comm {

class Board;

// With a progress board (all ranks on one host, under lockstep's launcher) collectives are
// checked through the board instead: each rank publishes its record there before issuing
// the collective, and compares all records when the collective returns (its completion
// implies every peer published), which costs no message at all. A watcher thread compares
// the records of a collective still in flight every few milliseconds, so a mismatch that
// makes the engine hang or abort is still named; it reports through `on_async_diagnosis`,
// which must end the process. Point-to-point calls always use the control group.
//
// Several calls may be in flight at once (a program's overlapping collectives: DDP's bucket
// all-reduces, FSDP2's prefetching all-gathers), each started before the previous one is waited
// for; the watcher compares every call in flight, the oldest first, and each call's wait()
// compares its own.
class Verifier final : public Backend {
 public:
  // `control` must be a separate group over the same ranks (host buffers). `members`: the ranks
  // (global, in group order) of a group other than the default one, which diagnoses name.
  // `peer_grace_s`: how long a mismatch seen on the board waits for the ranks that have not
  // published their record yet (slower, on a loaded machine), so that the diagnosis groups
  // every rank; after it, the ranks present are judged.
  // `group_key` (non-zero, with `board`): a program's other group (`members`), whose records go in
  // the ring of the board each member claims for that key (Board::claim_group_ring; the control
  // group when none is left).
  // `check_in_background` (control group only, with `on_async_diagnosis`): the records of each
  // collective are compared on a thread of the verifier's own as soon as they arrive, not only
  // when the caller waits: for an engine that runs the call before the caller waits (a program
  // starts its own call and waits for it later), where a mismatched call may hang or abort the
  // engine and the wait would never come.
  Verifier(std::unique_ptr<Backend> inner, std::unique_ptr<Backend> control,
           Board* board = nullptr,
           std::function<void(const Diagnosis&)> on_async_diagnosis = {},
           double peer_grace_s = 5.0, std::vector<int> members = {}, bool check_in_background = false,
           std::uint64_t group_key = 0);
  ~Verifier() override;

  // A site mismatch on a program's group (missing_participant) explained by what the other ranks
  // wait in: given the call site of each member's record, in group order, a better diagnosis
  // (the call issued on the wrong group) or nullopt. Control-group path only.
  using SiteExplainer = std::function<std::optional<Diagnosis>(const std::vector<CallSite>&)>;
  void set_site_explainer(SiteExplainer f) { explain_sites_ = std::move(f); }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string name() const override { return inner_->name(); }
  std::unique_ptr<Pending> start(Call& call) override;

 private:
  std::unique_ptr<Pending> start_on_board(Call& call);
  void watch();

 public:
  // The seqs of the collectives started and not yet waited for (board path), for the watcher.
  struct InFlight {
    std::mutex mu;
    std::vector<std::int64_t> seqs;  // in the order they were started
    void add(std::int64_t seq);
    void remove(std::int64_t seq);
    std::vector<std::int64_t> snapshot();
  };
  // Where this verifier's records are on the board: ring 0 of every rank (the default group), or
  // the ring each member of a program's group claimed for its key.
  struct BoardRecords {
    const Board* board;
    std::uint64_t key;
    const std::vector<int>* members;
    bool read(int pos, std::int64_t seq, std::vector<std::int64_t>& out) const;
  };
  BoardRecords board_records() const;
  // check_fingerprints over this verifier's group, a site mismatch then explained (set_site_explainer).
  std::optional<Diagnosis> judge(const std::vector<std::int64_t>& gathered, int ws, const std::vector<bool>* present) const;
  struct ControlCheck;  // one collective's records on the control group (verifier.cpp)
  struct Checker;       // the background comparison's queue and thread (verifier.cpp)

 private:

  std::unique_ptr<Backend> inner_;
  std::unique_ptr<Backend> control_;
  Board* board_;
  std::function<void(const Diagnosis&)> on_async_diagnosis_;
  double peer_grace_s_;
  std::vector<int> members_;  // the group's ranks (global), empty: every rank in order
  SiteExplainer explain_sites_;
  std::uint64_t group_key_ = 0;
  int ring_ = 0;  // this rank's ring on the board (0: the default group's)
  InFlight in_flight_;
  std::shared_ptr<Checker> checker_;  // set with check_in_background
  std::atomic<bool> stop_{false};
  std::thread watcher_;
};

// Installs a std::terminate handler for engine threads. Gloo aborts the process (an uncaught
// EnforceNotMet in its transport thread) when a peer sends more bytes than a buffer holds: that
// is what a mismatched collective does. While a verification is pending, the handler parks the
// failing engine thread instead, so the verifier can still name the mismatch; if the
// fingerprints then agree, the rank aborts with the engine's message.
void install_engine_failure_handler();
// From now on the handler parks failing engine threads unconditionally: the rank's outcome is
// decided (a diagnosis, or the rank is ending) and an engine failure is only a consequence.
void hold_engine_failures();

// Where collectives are verified. kAuto: through the progress board when the launcher provides
// one, else through the control group; kControl: always through the control group (the path
// ranks on several hosts take). Read from LOCKSTEP_VERIFY_CHANNEL (`auto` when unset or empty);
// any other value is an InputError that names it.
enum class VerifyChannel { kAuto, kControl };
VerifyChannel verify_channel_from_env();

// The call site of each of the `ws` records in `gathered` (check_fingerprints' input).
std::vector<CallSite> record_sites(const std::vector<std::int64_t>& gathered, int ws);

// The fixed-size record each rank contributes for one call (int64 words).
std::vector<std::int64_t> encode_fingerprint(const Call& call, int world_size);
std::size_t fingerprint_words(int world_size);

// Compares the gathered records of one collective slot (world_size records, rank order).
// Returns nullopt when they agree, else the diagnosis every rank reaches identically:
// collective_mismatch when the ranks are at the same call site with different arguments,
// missing_participant when they are at different call sites (a skipped or extra collective).
// `present`, when given, marks the ranks whose record is known; the others are left out.
// `members`, when given, are the ranks (global) of the group the records come from, in group
// order: messages and blame name them instead of the records' positions.
std::optional<Diagnosis> check_fingerprints(const std::vector<std::int64_t>& gathered,
                                            int world_size,
                                            const std::vector<bool>* present = nullptr,
                                            const std::vector<int>* members = nullptr);
// Called when this rank failed on its own (a check, an error) after issuing `issued`
// collectives, with `here` the site its next call would have. If peers wait in collective
// #issued at a site this rank has already passed in the same phase, the rank skipped that
// collective and the failure is a consequence: returns missing_participant naming this rank
// (quoting `failure`). Waits up to `wait_s` for live peers to reach collective #issued, so
// that the answer does not depend on timing. nullopt when the rank did not skip.
std::optional<Diagnosis> skipped_collective(const Board& board, int me, std::int64_t issued, const CallSite& here,
                                            const std::string& failure, double wait_s);

// Compares a received p2p record with the receiver's own call.
// `members` as for check_fingerprints (`receiver_rank` and the peer are the group's).
std::optional<Diagnosis> check_p2p(const std::vector<std::int64_t>& sender, const Call& receiver,
                                   int receiver_rank, const std::vector<int>* members = nullptr);

}  // namespace lockstep::comm
