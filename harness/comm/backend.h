#pragma once
// The small interface every communication layer implements: a real engine (Gloo through
// c10d, NCCL) or a decorator that wraps one (recorder, verifier, fault injector), in the
// manner of c10d's ProcessGroupWrapper. Workloads never see this; they use Communicator.
#include <memory>
#include <string>

#include "harness/comm/types.h"

namespace lockstep::comm {

// A started operation. wait() blocks until it completes; it throws CommError when the engine
// reports a failure, and DiagnosisError when a decorator diagnosed the call.
class Pending {
 public:
  virtual ~Pending() = default;
  virtual void wait() = 0;
};

// A Pending that is already complete.
class Done final : public Pending {
 public:
  void wait() override {}
};

// The engine failed (peer closed, engine timeout, invalid argument). Usually a consequence of
// another rank's failure; the launcher decides what the root cause was.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // "gloo", "nccl", or a decorator's name followed by its inner backend's.
  virtual std::string name() const = 0;
  // Starts `call` (asynchronously where the engine allows). May assign call.seq.
  virtual std::unique_ptr<Pending> start(Call& call) = 0;
};

// A key-value store shared by all ranks of one run (c10d TCPStore underneath).
class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists (up to the store's timeout, then throws CommError).
  virtual std::string get(const std::string& key) = 0;
};

}  // namespace lockstep::comm
