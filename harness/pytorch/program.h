#pragma once
// The C interface of liblockstep_program.so (program.cpp), for the lockstep_torch package (harness/pytorch/python/lockstep_torch/binding.py, ctypes). It
// needs no torch: a call is described by plain values, and the program's own backend runs it
// through the two callbacks. Enumerations are lockstep's (harness/comm/types.h); the wrapper asks
// ls_code for their values by name, so the two sides never keep separate tables.
#include <cstdint>

#define LS_API __attribute__((visibility("default")))

extern "C" {

struct ls_call {
  std::int32_t op;      // comm::Op
  std::int32_t dtype;   // comm::DType
  std::int32_t reduce;  // comm::ReduceOp
  std::int32_t device;  // 0 cpu, 1 cuda
  void* in;
  std::int64_t in_count;
  void* out;
  std::int64_t out_count;
  std::int64_t nsplits;                 // all_to_all: world_size, else 0
  const std::int64_t* send_counts;      // elements to each rank
  const std::int64_t* recv_counts;      // elements from each rank
  // The call-field table's rows (harness/trace/call_fields.h: root, peer, tag, ...), in
  // ls_call_fields()'s order; `nfields` must be its length.
  std::int64_t nfields;
  const std::int64_t* fields;
};

// Starts `call` on the program's backend (group 0; `token` > 0: the program's call the wrapper
// holds, 0: a call of lockstep's own on host buffers) or on the control group (group 1); for the
// program's group `id` (ls_open_group), on that group (2 * id) or on lockstep's control group over
// its ranks (2 * id + 1), whose ranks are the group's. Returns a
// handle >= 0 for wait, or -1 with the engine's error in `err`.
typedef std::int64_t (*ls_start_fn)(int group, std::int64_t token, const ls_call* call, char* err, int errlen);
// Waits for a started call; 0, or non-zero with the engine's error in `err`.
typedef int (*ls_wait_fn)(std::int64_t handle, char* err, int errlen);

// The value of a lockstep enumerator by kind ("op", "dtype", "reduce") and name ("all_reduce",
// "bf16", "sum"); -1 when unknown.
LS_API int ls_code(const char* kind, const char* name);
// Builds the rank's runtime from the launcher's LOCKSTEP_* variables (scenarios/README.md,
// "Programs"). 0, or non-zero with the reason in `err`.
// `system` names what the program runs on ("torch 2.15.0"), for the report.
LS_API int ls_open(int rank, int world_size, const char* system, ls_start_fn start, ls_wait_fn wait, char* err, int errlen);
// 1 when the run's board carries the verification (local runs), 0 when the control group does.
LS_API int ls_board_verifies(void);
// Carries the program's call `token` on `group` (0: the default group, else ls_open_group's id)
// from `site` ("train.py:57") at the program's `step`. A
// diagnosis or an engine failure ends the process (status file, exit code), as in lockstep's own
// ranks. Returns 0 when carried, 1 when lockstep no longer carries calls (after ls_finish, or never
// opened): the caller runs the call itself.
LS_API int ls_carry(int group, std::int64_t token, const ls_call* call, const char* site, std::int64_t step);
// A process group the program made besides the default one (new_group, a device mesh's dimension):
// `ranks` (global, in the group's order, `n` of them), this rank being the group's `me`-th. Returns
// its id (>= 1) for ls_carry, whose calls are then numbered, traced and verified as that group's
// (through its control group, 2 * id + 1, which the wrapper makes over the same ranks), or -1
// when lockstep carries no calls (before ls_open, after ls_finish). Every member calls it in the
// same order.
LS_API int ls_open_group(const std::int32_t* ranks, int n, int me);
// ls_carry in two halves, so that the program's call runs while the program goes on (DDP's
// bucket all-reduces overlap its backward pass; FSDP2 prefetches the next all-gather). ls_begin
// issues the collective on `group` (0: the default group, else ls_open_group's id) through
// lockstep's chain (trace, board, verifier) and returns its id, or -1 when the caller must use
// ls_carry instead (lockstep no longer carries calls, or a point-to-point call). On the board and
// over the control group (ranks on several hosts) alike, the records are compared beside the
// call, by a thread of the verifier's own. The
// caller then starts the program's call itself, and calls ls_end with the id when it has
// completed (`failure` "") or failed (the engine's error), from any thread. Several collectives
// may be in flight at once, on any groups, in the order the program issued them (at most 16:
// ls_begin then waits for one to end); a group's records are compared as soon as they
// arrive, so a mismatch that hangs the program's engine is still named. ls_end checks the call as
// ls_carry does (a diagnosis or an engine failure ends the process). ls_carry, ls_open_group,
// ls_check_same_count and ls_finish first wait for every collective begun to end. ls_end returns
// 0, or 1 for an id that is not a collective begun and not yet ended.
LS_API std::int64_t ls_begin(int group, const ls_call* call, const char* site, std::int64_t step);
LS_API int ls_end(std::int64_t id, const char* failure);
// A point-to-point call (send, recv) on `group` issued through lockstep's chain (its record goes to
// the peer on the control group, the receiver compares it) while the program's own call runs: the
// caller starts it after ls_p2p_begin returns an id (-1: not a p2p call, or lockstep carries no
// calls; use ls_carry) and calls ls_p2p_end with the id when the program waits for it (`failure`
// "" when it completed), on one host and on several alike. Any number may be in flight at once, beside a call begun with ls_begin,
// so that pairs of isend/irecv and batch_isend_irecv run as they do natively. ls_p2p_end checks
// the call as ls_carry does (a diagnosis or an engine failure ends the process) and returns 0, or 1
// for an unknown id.
LS_API std::int64_t ls_p2p_begin(int group, const ls_call* call, const char* site, std::int64_t step);
LS_API int ls_p2p_end(std::int64_t id, const char* failure);
// Every rank must hold the same count (e.g. a DataLoader's batches in an epoch): uneven_steps
// naming each rank's count otherwise.
LS_API void ls_check_same_count(std::int64_t value, const char* subject, const char* unit, std::int64_t step);
// At the program's end: `failure` "" meets the other ranks in one verified barrier and compares
// the DDP replicas' digest (-1: no DDP), then writes the status with the program's steps, steps
// per second and median step in seconds (0: not measured) and the run's digest: with
// `rank_digest` >= 0 (this rank's own parameters: those its optimizers hold, or those its DDP
// module ignores), every rank's combined in rank order after the replicas' (program_digest); else
// the replicas'. A failure is reported instead, with
// `failure_step`, the program's step when it failed (-1 unknown).
// Returns the exit code the process must end with when it is not the program's own: 2 (bad input)
// when lockstep was to verify the program and it never created its default group; else 0.
LS_API int ls_finish(const char* failure, std::int64_t failure_step, std::int64_t steps, double steps_per_s,
                     double median_step_s, std::int64_t replica_digest, std::int64_t rank_digest);
// The program made `count` calls named `name` ("allreduce_coalesced") that lockstep did not verify
// (they ran unchanged on the program's group): written in the rank's status (unverified_calls),
// whatever its outcome, and named in the scenario's notes.
LS_API void ls_unverified(const char* name, std::int64_t count);
// A metric of the wrapper's own (`name` "fast_calls": the collectives lockstep_fast began), in the
// rank's metrics when it finishes cleanly.
LS_API void ls_metric(const char* name, double value);
// The call-field table: "name=none" per row, joined by ',' ("root=-1,peer=-1,tag=0"), the order of
// ls_call's `fields`. The Python side builds its calls from it and refuses, at load, a library
// that lacks a field it sets.
LS_API const char* ls_call_fields(void);
// The version of this C interface: "9" (3: ls_finish takes the failure's step; 4:
// ls_engine_timeout; 5: ls_finish takes the rank's digest of a program without DDP; 6: ls_unverified,
// ops reduce_scatter, reduce, gather, scatter; ls_open_group, ls_carry's group, ls_p2p_begin and
// ls_p2p_end; 7: ls_begin takes the group, several collectives in flight; 8: ls_call's fields come from the
// call-field table, ls_call_fields; 9: ls_metric). The Python side refuses
// a library of another version at load.
// The program gave its process group `seconds` as its timeout (init_process_group's `timeout`):
// published on the board, where the launcher's watchdog reads it (harness/launch/watchdog.h).
LS_API void ls_engine_timeout(double seconds);
LS_API const char* ls_version(void);

}  // extern "C"
