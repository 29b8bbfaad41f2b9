#pragma once
// Contained runs: a local run's processes (lockstep's ranks, programs, systems under test, and
// whatever they start) live in their own network namespace, with only loopback up, and their own
// PID and mount namespaces, so that nothing of the run is reachable from outside, no outside
// process can reach its Gloo or store ports, and every process it started dies with it, even
// after `kill -9` of the launcher. Where the machine does not allow it (neither root nor
// unprivileged user namespaces), the run goes on as before and says so (results.json,
// "containment"; one line on stderr).
//
// How: the command's process (the one the user started) forks a holder that unshares the
// network, mount and PID namespaces (with a user namespace mapping only its own uid and gid when
// not root), makes every mount private, brings `lo` up, and forks the namespace's pid 1, a
// small init that mounts a fresh /proc (so /proc/<pid> matches the run's pids), reaps orphans
// and starts the worker, which continues the command. Each of holder and init dies with its
// parent (PR_SET_PDEATHSIG); when pid 1 exits the kernel kills everything left in the
// namespace. SIGINT and SIGTERM sent to the command's process are forwarded, once, to the
// worker (the holder and what it starts are in a process group of their own, so a terminal's
// Ctrl-C reaches only the command's process), and the command exits as the worker did.
#include <sys/types.h>

#include <string>

#include "harness/report/results.h"

namespace lockstep::launch {

// What the CLI knows about a command's run before containing it.
struct ContainRequest {
  bool opted_out = false;   // `--no-contain`
  std::string not_local;    // why this run must reach other hosts ("" when it is local)
};

// Contains the rest of this command's run where `request` and LOCKSTEP_CONTAIN allow it and the
// machine can (above). Returns in the process that goes on with the run: the worker inside the
// namespaces, or this process when the run is not contained (it then prints why on stderr, once,
// unless the user opted out). In the command's own process of a contained run it never returns:
// that process exits as the worker did. Throws InputError for an invalid LOCKSTEP_CONTAIN, and
// with LOCKSTEP_CONTAIN=require when the run cannot be contained. Call it once, before the
// command opens files, starts threads or children.
void contain_run(const ContainRequest& request);

// Whether this process's run is contained, and if not, why (for results.json).
const report::Containment& containment();

// The pid, as this machine's (initial) PID namespace sees it, of the lockstep process the user
// started: getpid() unless the run is contained, where every run's worker is pid 2. Use it
// where a pid must tell concurrent runs apart (file names).
pid_t host_pid();

}  // namespace lockstep::launch
