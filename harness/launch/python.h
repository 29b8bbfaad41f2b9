#pragma once
// Programs and systems under test as processes: the interpreter that runs them, the probes that
// tell whether it can import what a scenario needs (cached per interpreter), their command
// lines, and the environment of a program's ranks.
#include <string>
#include <vector>

#include "harness/scenario/scenario.h"

namespace lockstep::launch {

// The interpreter that replaces {python}: $LOCKSTEP_PYTHON, else python3.
std::string python_interpreter();
// Throws InputError (exit 2) naming `python` and `source` ("--python", "LOCKSTEP_PYTHON") when it
// cannot be found on PATH, is not executable, or does not start (`python -c pass` fails within 60 s):
// a misspelt interpreter is an input error, never a run of skips.
void require_interpreter(const std::string& python, const std::string& source);
// True when `s` runs a program or a system under test, whose command may use {python}.
bool uses_python(const scenario::Scenario& s);
// Why `python` cannot import `modules` ("" when it can), with `hint` appended to the reason;
// `extra_env` ("NAME=value") is added to the probe's environment. A successful probe is cached
// on disk ($XDG_CACHE_HOME or ~/.cache/lockstep/python-probes) while the interpreter, each
// module's file and each sys.path directory are unchanged; a failed one is probed again.
std::string probe_imports(const std::string& python, const std::vector<std::string>& modules, const std::string& hint,
                          const std::vector<std::string>& extra_env = {});
// Why `s` cannot run on this machine (its interpreter cannot import [system] python_modules),
// or "" when it can. Cached per interpreter and module list.
std::string system_skip_reason(const scenario::Scenario& s);
// Why the program of `s` (kind = "program") cannot run here: its interpreter lacks its
// python_modules, or cannot import this build's PyTorch backend (built against another torch,
// or not built). "" when it can.
std::string program_skip_reason(const scenario::Scenario& s);
// `command` with {python} and {dir} substituted and argv[0] found on PATH (InputError if not).
std::vector<std::string> command_argv(const scenario::Scenario& s, const std::vector<std::string>& command);
// The environment of rank `rank` of a program: torchrun's variables (the program's rank 0 hosts
// its own store on `addr`:`port`), lockstep's backend on PYTHONPATH, and its rank plan (`plan`,
// harness/rank/plan.h: its board, status, trace, verify mode and timeouts); NCCL's traces go under `dir`.
std::vector<std::string> program_env(const scenario::Scenario& s, int rank, int port, const std::string& dir, const std::string& plan,
                                     const std::string& addr = "127.0.0.1");
// The environment every system-under-test rank starts from: this process's, less the per-rank
// variables, with lockstep_sut on PYTHONPATH.
std::vector<std::string> system_base_env();
// A TCP port on 127.0.0.1 that was free a moment ago.
int loopback_port();

}  // namespace lockstep::launch
