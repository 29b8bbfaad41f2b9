#pragma once
// Cancellation: SIGINT and SIGTERM (what a terminal's Ctrl-C and a CI cancel send) end a run
// cleanly instead of killing it. The handler only records the signal; the watch loops stop
// their ranks (killed and reaped), the suite marks what did not finish as cancelled, and the
// reports are still written. A second signal kills the process as usual.
#include <string>

namespace lockstep::launch {

// Installs the handlers (once; later calls do nothing).
void install_cancel_handlers();
// The signal that cancelled the run, or 0.
int cancel_signal();
inline bool cancelled() { return cancel_signal() != 0; }
// "SIGINT", "SIGTERM" or "" when not cancelled.
std::string cancel_signal_name();
// Thrown where a cancelled run stops deep in a call (a system's repeated runs); the scenario
// ends with status cancelled and cancelled_reason().
struct Cancelled {};
// "cancelled by SIGINT while running; its ranks were stopped".
std::string cancelled_reason();
// For tests: cancel as if `sig` had arrived (0 clears).
void set_cancelled_for_test(int sig);

}  // namespace lockstep::launch
