#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "reference/common/philox.h"
#include "reference/graph/graph.h"

namespace lockstep::ref {

namespace {

// Edges are drawn in chunks of this many; chunk c goes to thread c % num_threads. Each edge's
// draw depends only on its index, so neither constant can change the result.
constexpr std::int64_t kChunk = std::int64_t{1} << 16;

int resolve_threads(int requested, const char* who) {
  if (requested < 0) {
    throw std::invalid_argument(std::string(who) + ": num_threads must be >= 0, got " +
                                std::to_string(requested));
  }
  if (requested > 0) return requested;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// Runs body(i) for every i in [0, n) over fixed chunks; rethrows the first thread's exception.
template <class Body>
void parallel_for(std::int64_t n, int num_threads, const Body& body) {
  const std::int64_t num_chunks = (n + kChunk - 1) / kChunk;
  const auto threads = static_cast<int>(std::min<std::int64_t>(num_threads, num_chunks));
  const auto run = [&](int t) {
    for (std::int64_t c = t; c < num_chunks; c += std::max(threads, 1)) {
      const std::int64_t end = std::min(n, (c + 1) * kChunk);
      for (std::int64_t i = c * kChunk; i < end; ++i) body(i);
    }
  };
  if (threads <= 1) {
    run(0);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        run(t);
      } catch (...) {
        errors[static_cast<std::size_t>(t)] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Drops self-loops and repeated pairs as GenOptions asks, keeping edge order and the first
// occurrence of each pair, then builds the CSR (edge ids = positions among the kept edges).
CsrGraph finish(std::int64_t n, std::vector<std::int64_t> src, std::vector<std::int64_t> dst,
                const GenOptions& options) {
  const std::size_t m = src.size();
  std::vector<char> keep(m, 1);
  if (!options.self_loops) {
    for (std::size_t i = 0; i < m; ++i) keep[i] = src[i] != dst[i];
  }
  if (!options.multi_edges) {
    // Group edge indices by source (stable, so ascending index within a source), then sort
    // each group by (dst, index): a pair's first occurrence comes first in its run.
    std::vector<std::int64_t> start(static_cast<std::size_t>(n) + 1, 0);
    for (std::size_t i = 0; i < m; ++i) {
      if (keep[i]) ++start[static_cast<std::size_t>(src[i]) + 1];
    }
    for (std::size_t u = 0; u < static_cast<std::size_t>(n); ++u) start[u + 1] += start[u];
    std::vector<std::int64_t> order(static_cast<std::size_t>(start.back()));
    std::vector<std::int64_t> next(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < m; ++i) {
      if (keep[i]) {
        order[static_cast<std::size_t>(next[static_cast<std::size_t>(src[i])]++)] =
            static_cast<std::int64_t>(i);
      }
    }
    for (std::size_t u = 0; u < static_cast<std::size_t>(n); ++u) {
      const auto b = order.begin() + start[u];
      const auto e = order.begin() + start[u + 1];
      std::sort(b, e, [&](std::int64_t x, std::int64_t y) {
        const auto dx = dst[static_cast<std::size_t>(x)];
        const auto dy = dst[static_cast<std::size_t>(y)];
        return dx != dy ? dx < dy : x < y;
      });
      for (auto it = b; it != e; ++it) {
        if (it != b &&
            dst[static_cast<std::size_t>(*it)] == dst[static_cast<std::size_t>(*(it - 1))]) {
          keep[static_cast<std::size_t>(*it)] = 0;
        }
      }
    }
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < m; ++i) {
    if (keep[i]) {
      src[out] = src[i];
      dst[out] = dst[i];
      ++out;
    }
  }
  src.resize(out);
  dst.resize(out);
  return from_edges(n, src, dst);
}

template <class Draw>
CsrGraph generate(std::int64_t n, std::int64_t num_edges, const GenOptions& options,
                  const char* who, const Draw& draw) {
  const int threads = resolve_threads(options.num_threads, who);
  std::vector<std::int64_t> src(static_cast<std::size_t>(num_edges));
  std::vector<std::int64_t> dst(static_cast<std::size_t>(num_edges));
  parallel_for(num_edges, threads, [&](std::int64_t i) {
    const auto [s, d] = draw(static_cast<std::uint64_t>(i));
    src[static_cast<std::size_t>(i)] = s;
    dst[static_cast<std::size_t>(i)] = d;
  });
  return finish(n, std::move(src), std::move(dst), options);
}

void check_num_edges(const char* who, std::int64_t num_edges) {
  if (num_edges < 0) {
    throw std::invalid_argument(std::string(who) + ": num_edges must be >= 0, got " +
                                std::to_string(num_edges));
  }
}

// All nodes sorted by (philox key, id): the first k are power_law's isolated nodes.
std::vector<std::int64_t> power_law_order(std::int64_t n, std::uint64_t seed) {
  std::vector<std::pair<std::uint64_t, std::int64_t>> keyed(static_cast<std::size_t>(n));
  const std::uint64_t c1 = stream_counter(streams::kPowerLawNodes, 0);
  for (std::int64_t u = 0; u < n; ++u) {
    keyed[static_cast<std::size_t>(u)] = {philox_u64(seed, static_cast<std::uint64_t>(u), c1), u};
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = keyed[i].second;
  return order;
}

std::int64_t isolated_count(std::int64_t n, double isolated_fraction, const char* who) {
  if (n < 0) {
    throw std::invalid_argument(std::string(who) + ": n must be >= 0, got " + std::to_string(n));
  }
  if (!(isolated_fraction >= 0.0 && isolated_fraction <= 1.0)) {
    throw std::invalid_argument(std::string(who) + ": isolated_fraction must be in [0, 1], got " +
                                std::to_string(isolated_fraction));
  }
  return std::llround(isolated_fraction * static_cast<double>(n));
}

}  // namespace

CsrGraph rmat(int scale, std::int64_t num_edges, std::uint64_t seed, GenOptions options) {
  if (scale < 0 || scale > 40) {
    throw std::invalid_argument("rmat: scale must be in [0, 40], got " + std::to_string(scale));
  }
  check_num_edges("rmat", num_edges);
  const std::int64_t n = std::int64_t{1} << scale;
  return generate(n, num_edges, options, "rmat", [&](std::uint64_t i) {
    std::int64_t s = 0;
    std::int64_t d = 0;
    std::array<std::uint64_t, 2> words{};
    for (int level = 0; level < scale; ++level) {
      if (level % 2 == 0) {
        words = philox_u64x2(seed, i,
                             stream_counter(streams::kRmat, static_cast<std::uint32_t>(level / 2)));
      }
      const double u = uniform01(words[static_cast<std::size_t>(level % 2)]);
      const int sb = u < 0.76 ? 0 : 1;
      const int db = (u < 0.57 || (u >= 0.76 && u < 0.95)) ? 0 : 1;
      s = (s << 1) | sb;
      d = (d << 1) | db;
    }
    return std::pair{s, d};
  });
}

CsrGraph erdos_renyi(std::int64_t n, std::int64_t num_edges, std::uint64_t seed,
                     GenOptions options) {
  if (n < 0) {
    throw std::invalid_argument("erdos_renyi: n must be >= 0, got " + std::to_string(n));
  }
  check_num_edges("erdos_renyi", num_edges);
  if (n == 0 && num_edges > 0) {
    throw std::invalid_argument("erdos_renyi: cannot draw " + std::to_string(num_edges) +
                                " edges on 0 nodes");
  }
  const auto un = static_cast<std::uint64_t>(n);
  const std::uint64_t c1 = stream_counter(streams::kErdosRenyi, 0);
  return generate(n, num_edges, options, "erdos_renyi", [&](std::uint64_t i) {
    const auto w = philox_u64x2(seed, i, c1);
    return std::pair{static_cast<std::int64_t>(uniform_below(w[0], un)),
                     static_cast<std::int64_t>(uniform_below(w[1], un))};
  });
}

std::vector<std::int64_t> power_law_isolated(std::int64_t n, double isolated_fraction,
                                             std::uint64_t seed) {
  const std::int64_t k = isolated_count(n, isolated_fraction, "power_law_isolated");
  std::vector<std::int64_t> order = power_law_order(n, seed);
  order.resize(static_cast<std::size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

CsrGraph power_law(std::int64_t n, std::int64_t num_edges, double exponent,
                   double isolated_fraction, std::uint64_t seed, GenOptions options) {
  const std::int64_t k = isolated_count(n, isolated_fraction, "power_law");
  check_num_edges("power_law", num_edges);
  if (!std::isfinite(exponent) || exponent < 0.0) {
    throw std::invalid_argument("power_law: exponent must be finite and >= 0, got " +
                                std::to_string(exponent));
  }
  const std::int64_t ranked = n - k;
  if (ranked == 0 && num_edges > 0) {
    throw std::invalid_argument("power_law: cannot draw " + std::to_string(num_edges) +
                                " edges when all " + std::to_string(n) +
                                " nodes are isolated (isolated_fraction " +
                                std::to_string(isolated_fraction) + ")");
  }
  const std::vector<std::int64_t> order = power_law_order(n, seed);
  std::vector<double> cdf(static_cast<std::size_t>(ranked) + 1, 0.0);
  for (std::int64_t r = 1; r <= ranked; ++r) {
    cdf[static_cast<std::size_t>(r)] =
        cdf[static_cast<std::size_t>(r) - 1] + std::pow(static_cast<double>(r), -exponent);
  }
  const double total = cdf.back();
  const auto node_of = [&](std::uint64_t word) {
    const double target = uniform01(word) * total;
    auto r = std::upper_bound(cdf.begin() + 1, cdf.end(), target) - cdf.begin();
    r = std::min<std::ptrdiff_t>(r, static_cast<std::ptrdiff_t>(ranked));
    return order[static_cast<std::size_t>(k + r - 1)];
  };
  const std::uint64_t c1 = stream_counter(streams::kPowerLawEdges, 0);
  return generate(n, num_edges, options, "power_law", [&](std::uint64_t i) {
    const auto w = philox_u64x2(seed, i, c1);
    return std::pair{node_of(w[0]), node_of(w[1])};
  });
}

CsrGraph tiny(const std::string& name) {
  if (name == "path4") return from_edges(4, {0, 1, 2}, {1, 2, 3});
  if (name == "star5") return from_edges(5, {0, 0, 0, 0}, {1, 2, 3, 4});
  if (name == "triangle") return from_edges(3, {0, 1, 2}, {1, 2, 0});
  if (name == "isolated3") return from_edges(3, {}, {});
  if (name == "two_cliques") {
    std::vector<std::int64_t> src;
    std::vector<std::int64_t> dst;
    for (const std::int64_t base : {0, 3}) {
      for (std::int64_t u = base; u < base + 3; ++u) {
        for (std::int64_t v = base; v < base + 3; ++v) {
          if (u != v) {
            src.push_back(u);
            dst.push_back(v);
          }
        }
      }
    }
    return from_edges(6, src, dst);
  }
  throw std::invalid_argument("tiny: unknown graph '" + name +
                              "'; known: path4, star5, triangle, isolated3, two_cliques");
}

}  // namespace lockstep::ref
