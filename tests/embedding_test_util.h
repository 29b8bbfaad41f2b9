#pragma once
// Test helpers for DistEmbedding (reference/embedding/embedding.h): an in-process transport
// (a fake of the harness communicator, for the reference only) and a runner of one
// DistEmbedding per thread over it. Shared by embedding_test.cpp and
// embedding_kernels_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "reference/embedding/embedding.h"

namespace lockstep::ref::test_embedding {

using I64 = std::vector<std::int64_t>;

inline IdSpan span_of(const I64& v) { return IdSpan{v.data(), static_cast<std::int64_t>(v.size()), IdType::kI64, Device{}}; }

// Every rank's buffers meet here; a generation-counting barrier separates the calls.
class Hub {
 public:
  explicit Hub(int n) : n_(n), data_(static_cast<std::size_t>(n)), counts_(static_cast<std::size_t>(n)) {}
  int size() const { return n_; }
  template <class T>
  std::vector<T> exchange(int me, const std::vector<T>& data, const I64& send_counts, I64& recv_counts) {
    data_[static_cast<std::size_t>(me)] = data.data();
    counts_[static_cast<std::size_t>(me)] = &send_counts;
    barrier();
    std::vector<T> out;
    recv_counts.assign(static_cast<std::size_t>(n_), 0);
    for (int r = 0; r < n_; ++r) {
      const I64& c = *counts_[static_cast<std::size_t>(r)];
      std::int64_t off = 0;
      for (int q = 0; q < me; ++q) off += c[static_cast<std::size_t>(q)];
      const T* src = static_cast<const T*>(data_[static_cast<std::size_t>(r)]) + off;
      out.insert(out.end(), src, src + c[static_cast<std::size_t>(me)]);
      recv_counts[static_cast<std::size_t>(r)] = c[static_cast<std::size_t>(me)];
    }
    barrier();
    return out;
  }

 private:
  void barrier() {
    std::unique_lock<std::mutex> lock(m_);
    const long gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
  }
  int n_;
  std::vector<const void*> data_;
  std::vector<const I64*> counts_;
  std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
  long gen_ = 0;
};

class TestTransport final : public EmbeddingTransport {
 public:
  TestTransport(Hub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return hub_.size(); }
  I64 exchange_ids(const I64& data, const I64& send_counts, I64& recv_counts) override {
    return hub_.exchange(rank_, data, send_counts, recv_counts);
  }
  std::vector<float> exchange_values(const std::vector<float>& data, const I64& send_counts, const I64& recv_counts) override {
    I64 got;
    auto out = hub_.exchange(rank_, data, send_counts, got);
    EXPECT_EQ(got, recv_counts);
    return out;
  }

 private:
  Hub& hub_;
  int rank_;
};


struct Runner {
  // Runs `steps` steps on `ws` threads: at step s rank r pulls ids[s][r] and pushes grads
  // (row k of its ids gets grad value fill[s][r][k] + column_step * c in column c). Returns each rank's
  // shard table assembled into a full rows x dim table, and every pull's rows.
  static std::vector<float> run(std::shared_ptr<const PartitionBook> book, EmbeddingOptions eo,
                                const std::vector<std::vector<I64>>& ids, const std::vector<std::vector<std::vector<float>>>& fill,
                                std::vector<std::vector<std::vector<float>>>* pulled = nullptr, float column_step = 0.0f) {
    const int ws = book->num_parts();
    Hub hub(ws);
    std::vector<float> table(static_cast<std::size_t>(book->num_nodes() * eo.dim));
    std::vector<std::vector<std::vector<float>>> got(ids.size(), std::vector<std::vector<float>>(static_cast<std::size_t>(ws)));
    std::vector<std::thread> threads;
    std::mutex m;
    for (int r = 0; r < ws; ++r) {
      threads.emplace_back([&, r] {
        TestTransport tp(hub, r);
        DistEmbedding emb(book, eo, tp);
        for (std::size_t s = 0; s < ids.size(); ++s) {
          const I64& mine = ids[s][static_cast<std::size_t>(r)];
          got[s][static_cast<std::size_t>(r)] = emb.pull(span_of(mine)).to_host();
          std::vector<float> grads;
          for (float f : fill[s][static_cast<std::size_t>(r)]) {
            for (std::int64_t c = 0; c < eo.dim; ++c) grads.push_back(f + column_step * static_cast<float>(c));
          }
          emb.accumulate_grad(span_of(mine), grads.data());
          emb.step();
        }
        const auto vals = emb.shard().to_f32();
        std::lock_guard<std::mutex> lock(m);
        for (std::int64_t l = 0; l < emb.shard().rows(); ++l) {
          std::copy_n(vals.begin() + l * eo.dim, eo.dim, table.begin() + emb.shard().global_ids()[static_cast<std::size_t>(l)] * eo.dim);
        }
      });
    }
    for (auto& t : threads) t.join();
    if (pulled) *pulled = got;
    return table;
  }
};


}  // namespace lockstep::ref::test_embedding
