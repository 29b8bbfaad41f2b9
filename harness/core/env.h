#pragma once
// Every LOCKSTEP_* environment variable lockstep reads, named once, with its meaning; and the
// readers of the environment that every process of a run shares (the rank runtime, the program
// backend, the launcher). The Python helpers (harness/sut/python, harness/pytorch/python) spell
// the names they read themselves; scenarios/README.md lists them all.
#include <string>

namespace lockstep::env {

// Set by the user.
inline constexpr const char* kPython = "LOCKSTEP_PYTHON";                // the interpreter of {python}; `--python`
inline constexpr const char* kVerifyChannel = "LOCKSTEP_VERIFY_CHANNEL";  // auto | control: how ranks compare call records
// auto (default): contain each local run in its own namespaces where the machine allows it; off:
// never (as `--no-contain`); require: refuse (exit 2) a local run whose namespaces cannot be
// made here (harness/launch/contain.h).
inline constexpr const char* kContain = "LOCKSTEP_CONTAIN";
// The cap of every rank log in MiB (default 8): the first and last halves are kept
// (harness/launch/log_pump.h).
inline constexpr const char* kLogCapMb = "LOCKSTEP_LOG_CAP_MB";

// Set by the launcher for each of lockstep's own ranks (`lockstep rank`).
inline constexpr const char* kStoreHosted = "LOCKSTEP_STORE_HOSTED";  // 1: the launcher hosts the store, rank 0 does not
inline constexpr const char* kStoreToken = "LOCKSTEP_STORE_TOKEN";    // the secret prefix of the run's store keys
inline constexpr const char* kStoreFile = "LOCKSTEP_STORE_FILE";      // a FileStore path instead of a TCPStore

// Set for every rank the launcher watches, lockstep's own and programs': the rank's plan
// (harness/rank/plan.h: its verify mode, status, trace, board, timeouts, slowdowns), read once.
inline constexpr const char* kPlan = "LOCKSTEP_PLAN";

// Set for a program's ranks (kind = "program"), read by the program runtime (harness/pytorch/).
inline constexpr const char* kC10d = "LOCKSTEP_C10D";                         // 1: wrap the program's default process group
inline constexpr const char* kC10dWrap = "LOCKSTEP_C10D_WRAP";                // gloo: wrap the default group (any backend), none: only report steps
inline constexpr const char* kProgramLib = "LOCKSTEP_PROGRAM_LIB";           // liblockstep_program.so, for the lockstep_torch package
inline constexpr const char* kNcclTraceDir = "LOCKSTEP_NCCL_TRACE_DIR";       // the NCCL profiler plugin's traces

// Set for a system under test's ranks ([system]), read by lockstep_sut.py.
inline constexpr const char* kSutInputs = "LOCKSTEP_SUT_INPUTS";    // the capability's inputs
inline constexpr const char* kSutOutputs = "LOCKSTEP_SUT_OUTPUTS";  // where this rank writes its outputs

// The variable's value, or `fallback` when it is unset or empty.
std::string str(const char* name, const std::string& fallback = "");
// The variable as an integer, or `fallback` when unset or empty; InputError naming the variable
// when it is not an integer.
int integer(const char* name, int fallback);
// The variable as positive seconds, or `fallback` when unset, empty or not a positive number.
double seconds(const char* name, double fallback);
// Whether `host` (MASTER_ADDR) is this machine's loopback.
bool is_loopback(const std::string& host);
// "NAME=value", as execve's environment takes it.
std::string assign(const char* name, const std::string& value);

}  // namespace lockstep::env
