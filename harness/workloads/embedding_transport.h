#pragma once
// The transport of ref::DistEmbedding over the harness communicator: the owner exchanges of
// pull() and step() as uneven all_to_alls (harness/workloads/exchange.h).
#include <cstdint>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/workloads/exchange.h"
#include "reference/embedding/embedding.h"

namespace lockstep::workloads {

class CommTransport final : public ref::EmbeddingTransport {
 public:
  explicit CommTransport(comm::Communicator& c) : c_(c) {}
  int rank() const override { return c_.rank(); }
  int world_size() const override { return c_.world_size(); }
  std::vector<std::int64_t> exchange_ids(const std::vector<std::int64_t>& data, const std::vector<std::int64_t>& send_counts,
                                         std::vector<std::int64_t>& recv_counts) override {
    recv_counts = exchange_counts(c_, send_counts);
    return exchange(c_, data, send_counts, recv_counts);
  }
  std::vector<float> exchange_values(const std::vector<float>& data, const std::vector<std::int64_t>& send_counts,
                                     const std::vector<std::int64_t>& recv_counts) override {
    return exchange(c_, data, send_counts, recv_counts);
  }

 private:
  comm::Communicator& c_;
};

}  // namespace lockstep::workloads
