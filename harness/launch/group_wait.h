#pragma once
// Where a hang leaves a program that uses several process groups (new_group, a device mesh's
// dimensions): what each rank waits in, on which group, from the board, and the one pattern the
// board proves: two ranks waiting on each other from one call site in calls on different groups (a
// rank that issued the call on the wrong group), and a receive whose sender sent to another rank.
#include <optional>
#include <string>

#include "harness/comm/board.h"
#include "harness/core/diagnosis.h"

namespace lockstep::launch {

// "waiting in collective #4 all_reduce (train.py:36)", "waiting in all_reduce on the group of
// ranks 0,1 (groups.py:36)", or "not in a collective (last completed ...)".
std::string wait_text(const comm::SlotView& v);

// Among ranks [first, end), two ranks a and b waiting in calls on different groups, each a member
// of the other's group (each waits for the other). Blamed: the rank whose call fewer of its group's
// ranks have joined (a share: ranks waiting in that call on that group, of the group's size); equal
// shares, the lower rank. From one call site it is collective_mismatch (the call issued on the
// wrong group), naming both calls and both groups; from two sites (`same_site` false only: a rank
// that skipped a call went on to another group's) missing_participant. nullopt when no two ranks
// wait like that.
std::optional<Diagnosis> crossed_groups(const comm::Board& board, int first, int end, bool same_site = true);

// Among ranks [first, end), a rank R waiting to receive from a rank S whose point-to-point calls in
// flight hold no send to R but a send to another rank T, which is not receiving from S: S sent to
// the wrong peer. collective_mismatch blaming S, naming R's receive and S's send (the first such
// R, S, T in rank order). nullopt when no ranks wait like that.
std::optional<Diagnosis> misdirected_send(const comm::Board& board, int first, int end);

// Among ranks [first, end) (or rank `receiver` alone, when >= 0), a rank R with a receive from S in flight whose pair, S's send to R of
// the same tag, group and ordinal (the k-th send pairs with the k-th receive; ended or not, among
// S's last calls), differs from it in dtype or count: collective_mismatch blaming S, as the verifier
// blames a p2p mismatch, naming both sides ("rank 0 send f32[5] ..., rank 1 recv f16[5] ...").
// Read after a rank failed: an engine given a send larger than the receive buffer kills the
// receiver (Gloo's "Received data size doesn't match expected size") before the verifier beside
// the transfer compares the two records, and the records on the board still say why. nullopt when
// no pair differs.
std::optional<Diagnosis> torn_p2p_pair(const comm::Board& board, int first, int end, int receiver = -1);

// crossed_groups, else misdirected_send: the waits the board proves can never end.
std::optional<Diagnosis> stuck_waits(const comm::Board& board, int first, int end, bool same_site = true);

}  // namespace lockstep::launch
