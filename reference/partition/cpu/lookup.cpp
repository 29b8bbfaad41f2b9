// Host loops of the partition books. Each kernel validates every id as it goes and returns
// false when one is invalid; the book then rescans to name the first one. Kernels never read
// out of bounds for invalid ids. Vectorised loops OR a word whose top bit is set for an
// invalid id; gathers and searches stop at the first one instead.
//
// RangePartitionBook::nid2partid with few parts counts the part starts that are <= id without
// branches: (t - id) has its top bit set exactly when t < id, for t = start - 1 in [-1, max]
// and id in [0, max]. That needs only subtract, shift, add and or, which vectorise on plain
// SSE2 for int64 lanes too, so the loop runs at memory speed. Many parts use a branch-free
// binary search.
#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>
#include <utility>

#include "reference/partition/book.h"

namespace lockstep::ref {

namespace {

// Parts up to which nid2partid counts starts instead of searching them.
constexpr int kMaxCountParts = 16;

template <class T>
using U = std::make_unsigned_t<T>;
template <class T>
constexpr int kTop = static_cast<int>(sizeof(T)) * 8 - 1;

// The largest valid id as U<T> (ids above it, and negative ids, are invalid); all ones when
// count is 0, which invalid_bits rejects every id against but `id > last` does not, so the
// branching kernels are never called with count 0.
template <class T>
U<T> last_valid(std::int64_t count) {
  const std::int64_t last = std::min<std::int64_t>(count - 1, std::numeric_limits<T>::max());
  return static_cast<U<T>>(static_cast<T>(last));
}

// Top bit set when id > last (as signed values: id < 0 or id beyond last).
template <class T>
U<T> invalid_bits(U<T> id, U<T> last) {
  return id | (last - id);
}

// ---- range book: few parts ----------------------------------------------------------------

template <class T>
struct CountTables {
  std::array<U<T>, kMaxCountParts> thr{};   // start of part k+1, minus one, clamped to T's max
  std::array<U<T>, kMaxCountParts> size{};  // size of part k (exact whenever it is used)
};

template <class T>
CountTables<T> count_tables(const std::vector<std::int64_t>& offsets) {
  CountTables<T> t;
  for (std::size_t k = 0; k + 2 < offsets.size(); ++k) {
    const std::int64_t thr =
        std::min<std::int64_t>(offsets[k + 1] - 1, std::numeric_limits<T>::max());
    t.thr[k] = static_cast<U<T>>(static_cast<T>(thr));
    t.size[k] = static_cast<U<T>>(offsets[k + 1] - offsets[k]);
  }
  return t;
}

// K = num_parts - 1 starts. kLocal writes local ids (T) instead of part ids (int32).
// Always inlined, so that it is vectorised for the ISA of each clone of its caller.
template <int K, class T, bool kLocal>
[[gnu::always_inline]] inline bool count_kernel(const T* __restrict ids, std::int64_t n,
                                                void* __restrict out_v,
                                                const CountTables<T>& tables, U<T> last) {
  U<T> thr[K > 0 ? K : 1];
  U<T> size[K > 0 ? K : 1];
  for (int k = 0; k < K; ++k) {
    thr[k] = tables.thr[static_cast<std::size_t>(k)];
    size[k] = tables.size[static_cast<std::size_t>(k)];
  }
  U<T> bad = 0;
  if constexpr (kLocal) {
    T* __restrict out = static_cast<T*>(out_v);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto id = static_cast<U<T>>(ids[i]);
      bad |= invalid_bits<T>(id, last);
      U<T> start = 0;
      for (int k = 0; k < K; ++k) start += (U<T>{0} - ((thr[k] - id) >> kTop<T>)) & size[k];
      out[i] = static_cast<T>(id - start);
    }
  } else {
    std::int32_t* __restrict out = static_cast<std::int32_t*>(out_v);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto id = static_cast<U<T>>(ids[i]);
      bad |= invalid_bits<T>(id, last);
      U<T> part = 0;
      for (int k = 0; k < K; ++k) part += (thr[k] - id) >> kTop<T>;
      out[i] = static_cast<std::int32_t>(part);
    }
  }
  return (bad >> kTop<T>) == 0;
}

// Runs count_kernel<k> for a run-time k in [0, kMaxCountParts).
template <class T, bool kLocal, int... Ks>
[[gnu::always_inline]] inline bool count_switch(int k, const T* ids, std::int64_t n, void* out,
                                                const CountTables<T>& tables, U<T> last,
                                                std::integer_sequence<int, Ks...>) {
  bool ok = true;
  (void)((k == Ks ? (ok = count_kernel<Ks, T, kLocal>(ids, n, out, tables, last), true) : false) ||
         ...);
  return ok;
}

// One function per id type and output, cloned for AVX2 and AVX-512 where the compiler can
// (the build targets plain x86-64, whose SSE2 has half AVX2's lanes and no 64-bit compare);
// the loader picks the clone for the CPU it runs on.
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define LOCKSTEP_REF_SIMD_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#endif
#endif
#ifndef LOCKSTEP_REF_SIMD_CLONES
#define LOCKSTEP_REF_SIMD_CLONES
#endif

#define LOCKSTEP_REF_COUNT_ENTRY(name, T, kLocal)                                      \
  LOCKSTEP_REF_SIMD_CLONES bool name(int k, const T* ids, std::int64_t n, void* out,   \
                                     const CountTables<T>& tables, U<T> last) {        \
    return count_switch<T, kLocal>(k, ids, n, out, tables, last,                       \
                                   std::make_integer_sequence<int, kMaxCountParts>{}); \
  }
LOCKSTEP_REF_COUNT_ENTRY(count_parts_i32, std::int32_t, false)
LOCKSTEP_REF_COUNT_ENTRY(count_parts_i64, std::int64_t, false)
LOCKSTEP_REF_COUNT_ENTRY(count_locals_i32, std::int32_t, true)
LOCKSTEP_REF_COUNT_ENTRY(count_locals_i64, std::int64_t, true)
#undef LOCKSTEP_REF_COUNT_ENTRY

template <class T, bool kLocal>
bool count_entry(int k, const T* ids, std::int64_t n, void* out, const CountTables<T>& tables,
                 U<T> last) {
  if constexpr (std::is_same_v<T, std::int32_t>) {
    return kLocal ? count_locals_i32(k, ids, n, out, tables, last)
                  : count_parts_i32(k, ids, n, out, tables, last);
  } else {
    return kLocal ? count_locals_i64(k, ids, n, out, tables, last)
                  : count_parts_i64(k, ids, n, out, tables, last);
  }
}

// ---- range book: many parts ---------------------------------------------------------------

// The number of a[0, len) that are <= x, for sorted a and len >= 1, without branches.
inline std::int64_t count_le(const std::int64_t* a, std::int64_t len, std::int64_t x) {
  const std::int64_t* base = a;
  while (len > 1) {
    const std::int64_t half = len / 2;
    base = base[half] <= x ? base + half : base;
    len -= half;
  }
  return (base - a) + (*base <= x ? 1 : 0);
}

template <class T, bool kLocal>
bool search_kernel(const T* __restrict ids, std::int64_t n, void* __restrict out_v,
                   const std::vector<std::int64_t>& offsets, U<T> last) {
  const std::int64_t* starts = offsets.data() + 1;
  const auto len = static_cast<std::int64_t>(offsets.size()) - 2;
  for (std::int64_t i = 0; i < n; ++i) {
    if (static_cast<U<T>>(ids[i]) > last) [[unlikely]]
      return false;
    const auto v = static_cast<std::int64_t>(ids[i]);
    const std::int64_t part = count_le(starts, len, v);
    if constexpr (kLocal) {
      static_cast<T*>(out_v)[i] = static_cast<T>(v - offsets[static_cast<std::size_t>(part)]);
    } else {
      static_cast<std::int32_t*>(out_v)[i] = static_cast<std::int32_t>(part);
    }
  }
  return true;
}

// ---- map book ------------------------------------------------------------------------------

// out[i] = table[ids[i]] as Out for ids in [0, last]; stops at the first other id. A
// predictable branch, not a select: a select on the address halves the gather's speed.
template <class T, class Out, class Entry>
bool gather_kernel(const T* __restrict ids, std::int64_t n, Out* __restrict out,
                   const Entry* __restrict table, U<T> last) {
  for (std::int64_t i = 0; i < n; ++i) {
    const auto id = static_cast<U<T>>(ids[i]);
    if (id > last) [[unlikely]]
      return false;  // negative ids are huge as U<T>
    out[i] = static_cast<Out>(table[id]);
  }
  return true;
}

}  // namespace

bool RangePartitionBook::lookup_host(Op op, int part, const void* ids_v, IdType type,
                                     std::int64_t n, void* out_v) const {
  auto go = [&]<class T>(std::type_identity<T>) -> bool {
    const T* ids = static_cast<const T*>(ids_v);
    switch (op) {
      case Op::kPartId:
      case Op::kLocalId: {
        const bool local = op == Op::kLocalId;
        const std::size_t out_size = local ? sizeof(T) : sizeof(std::int32_t);
        if (num_nodes() == 0) return false;  // every id is invalid
        auto* out = static_cast<unsigned char*>(out_v);
        const U<T> last = last_valid<T>(num_nodes());
        if (num_parts() <= kMaxCountParts) {
          const auto tables = count_tables<T>(offsets_);
          const int k = num_parts() - 1;
          const auto kernel = local ? &count_entry<T, true> : &count_entry<T, false>;
          return parallel_all(n, [&](std::int64_t b, std::int64_t e) {
            return kernel(k, ids + b, e - b, out + static_cast<std::size_t>(b) * out_size, tables,
                          last);
          });
        }
        const auto kernel = local ? &search_kernel<T, true> : &search_kernel<T, false>;
        return parallel_all(n, [&](std::int64_t b, std::int64_t e) {
          return kernel(ids + b, e - b, out + static_cast<std::size_t>(b) * out_size, offsets_,
                        last);
        });
      }
      case Op::kLocalToGlobal: {
        // Valid local ids are [0, size) and must give a global id that fits T.
        const std::int64_t lo = offsets_[static_cast<std::size_t>(part)];
        const std::int64_t size = offsets_[static_cast<std::size_t>(part) + 1] - lo;
        const std::int64_t fits = static_cast<std::int64_t>(std::numeric_limits<T>::max()) - lo;
        const std::int64_t last_local = std::min(size - 1, fits);
        const U<T> last = last_local < 0 ? ~U<T>{0} : static_cast<U<T>>(last_local);
        T* out = static_cast<T*>(out_v);
        return parallel_all(n, [&](std::int64_t b, std::int64_t e) {
          U<T> bad = 0;
          for (std::int64_t i = b; i < e; ++i) {
            const auto l = static_cast<U<T>>(ids[i]);
            bad |= invalid_bits<T>(l, last);
            out[i] = static_cast<T>(static_cast<U<T>>(lo) + l);
          }
          return (bad >> kTop<T>) == 0;
        });
      }
      case Op::kGlobalToLocal: {
        const std::int64_t lo = offsets_[static_cast<std::size_t>(part)];
        const std::int64_t size = offsets_[static_cast<std::size_t>(part) + 1] - lo;
        T* out = static_cast<T*>(out_v);
        return parallel_all(n, [&](std::int64_t b, std::int64_t e) {
          std::uint64_t bad = 0;
          for (std::int64_t i = b; i < e; ++i) {
            // Valid iff id >= 0 and 0 <= id - lo < size; unsigned, so nothing overflows.
            const auto id = static_cast<std::uint64_t>(static_cast<std::int64_t>(ids[i]));
            const std::uint64_t local = id - static_cast<std::uint64_t>(lo);
            bad |= id | local | (static_cast<std::uint64_t>(size - 1) - local);
            out[i] = static_cast<T>(local);
          }
          return (bad >> 63) == 0;
        });
      }
    }
    return false;
  };
  return type == IdType::kI32 ? go(std::type_identity<std::int32_t>{})
                              : go(std::type_identity<std::int64_t>{});
}

bool MapPartitionBook::lookup_host(Op op, int part, const void* ids_v, IdType type, std::int64_t n,
                                   void* out_v) const {
  auto go = [&]<class T>(std::type_identity<T>) -> bool {
    const T* ids = static_cast<const T*>(ids_v);
    const U<T> last = last_valid<T>(num_nodes());
    switch (op) {
      case Op::kPartId: {
        if (part_of_.empty()) return false;
        auto* out = static_cast<std::int32_t*>(out_v);
        return parallel_all(n, [&](std::int64_t b, std::int64_t e) {
          return part8_.empty() ? gather_kernel(ids + b, e - b, out + b, part_of_.data(), last)
                                : gather_kernel(ids + b, e - b, out + b, part8_.data(), last);
        });
      }
      case Op::kLocalId: {
        if (local_.empty()) return false;
        T* out = static_cast<T*>(out_v);
        return parallel_all(n, [&](std::int64_t b, std::int64_t e) {
          return gather_kernel(ids + b, e - b, out + b, local_.data(), last);
        });
      }
      case Op::kLocalToGlobal: {
        const std::int64_t size = part_size(part);
        if (size == 0) return false;
        const std::int64_t* nodes = nodes_.data() + ptr_[static_cast<std::size_t>(part)];
        const U<T> last_local = last_valid<T>(size);
        T* out = static_cast<T*>(out_v);
        return parallel_all(n, [&](std::int64_t b, std::int64_t e) {
          // Global ids >= local ids, so a global id may not fit T where its local id does.
          bool ok = gather_kernel(ids + b, e - b, out + b, nodes, last_local);
          if constexpr (sizeof(T) < sizeof(std::int64_t)) {
            if (ok && !nodes_.empty() &&
                nodes_.size() - 1 > static_cast<std::size_t>(std::numeric_limits<T>::max())) {
              for (std::int64_t i = b; i < e; ++i) {
                ok = ok && nodes[ids[i]] <= std::numeric_limits<T>::max();
              }
            }
          }
          return ok;
        });
      }
      case Op::kGlobalToLocal: {
        if (part_of_.empty()) return false;
        T* out = static_cast<T*>(out_v);
        return parallel_all(n, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) {
            const auto id = static_cast<U<T>>(ids[i]);
            if (id > last || part_of_[id] != part) [[unlikely]]
              return false;
            out[i] = static_cast<T>(local_[id]);
          }
          return true;
        });
      }
    }
    return false;
  };
  return type == IdType::kI32 ? go(std::type_identity<std::int32_t>{})
                              : go(std::type_identity<std::int64_t>{});
}

}  // namespace lockstep::ref
