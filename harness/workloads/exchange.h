#pragma once
// Variable-length exchanges between ranks through the communicator's uneven all_to_all: the
// pattern of every owner-served request (sampling hops, embedding pulls and pushes, feature
// fetches). Every rank must call each function, even with nothing to send.
#include <cstdint>
#include <vector>

#include "harness/comm/communicator.h"
#include "harness/comm/dtype.h"

namespace lockstep::workloads {

// Tells every rank how many elements each peer will send it: returns recv_counts, where
// recv_counts[r] is what rank r holds in its send_counts for this rank. One all_to_all.
inline std::vector<std::int64_t> exchange_counts(comm::Communicator& comm, std::vector<std::int64_t> send_counts) {
  std::vector<std::int64_t> recv(send_counts.size()), ones(send_counts.size(), 1);
  comm.all_to_all(comm::view_of(send_counts), ones, comm::view_of(recv), ones);
  return recv;
}

// Sends send_counts[r] consecutive elements of `data` (in rank order) to rank r and returns
// what arrived, in rank order; recv_counts must come from exchange_counts or be known to both
// sides (a reply of known size). One all_to_all.
template <class T>
std::vector<T> exchange(comm::Communicator& comm, std::vector<T> data, const std::vector<std::int64_t>& send_counts,
                        const std::vector<std::int64_t>& recv_counts) {
  std::int64_t total = 0;
  for (auto c : recv_counts) total += c;
  std::vector<T> out(static_cast<std::size_t>(total));
  comm.all_to_all(comm::view_of(data), send_counts, comm::view_of(out), recv_counts);
  return out;
}

}  // namespace lockstep::workloads
