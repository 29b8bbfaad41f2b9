#include "harness/launch/cancel.h"

#include <signal.h>

#include <atomic>

#include "harness/launch/processes.h"

namespace lockstep::launch {
namespace {

std::atomic<int> g_signal{0};

void on_signal(int sig) {
  g_signal.store(sig);
  // The next one is not caught: a user who presses Ctrl-C twice gets out at once.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
}

}  // namespace

void install_cancel_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int cancel_signal() { return g_signal.load(); }

std::string cancelled_reason() { return "cancelled by " + cancel_signal_name() + " while running; its ranks were stopped"; }

std::string cancel_signal_name() {
  const int sig = cancel_signal();
  return sig ? signal_name(sig) : "";
}

void set_cancelled_for_test(int sig) { g_signal.store(sig); }

}  // namespace lockstep::launch
