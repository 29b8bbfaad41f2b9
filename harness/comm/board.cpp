#include "harness/comm/board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <utility>

#include "harness/core/diagnosis.h"
#include "harness/core/error.h"

namespace lockstep::comm {
namespace {

std::string load_phase(const std::atomic<std::uint64_t> (&src)[3]) {
  char buf[25] = {};
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t w = src[i].load(std::memory_order_relaxed);
    std::memcpy(buf + 8 * i, &w, 8);
  }
  return std::string(buf);
}

std::string site_text(const std::string& phase, std::int64_t step) {
  std::ostringstream os;
  os << (phase.empty() ? "?" : phase);
  if (step >= 0) os << " step " << step;
  return os.str();
}

constexpr std::uint64_t kMagic = 0x6c6f636b73746570ull;  // "lockstep"

struct alignas(64) BoardHeader {
  std::uint64_t magic;
  std::int64_t world_size;
  std::int64_t words;
  std::int64_t ring;
};

// Per rank, 1 + kGroupRings rings; each a key word, then kFingerprintRing records of words + 1.
std::size_t ring_words(std::size_t words) { return 1 + Board::kFingerprintRing * (words + 1); }

std::size_t ring_bytes(int world_size, std::size_t words) {
  return sizeof(std::atomic<std::int64_t>) * static_cast<std::size_t>(world_size) * (1 + Board::kGroupRings) * ring_words(words);
}

BoardSlot* g_own_slot = nullptr;

}  // namespace

void set_own_slot(BoardSlot* slot) { g_own_slot = slot; }

void set_activity(const std::string& what) {
  if (g_own_slot) Board::store_phase(g_own_slot->activity, what);
}

void set_engine_timeout(double seconds) {
  if (g_own_slot && seconds > 0) g_own_slot->engine_timeout_ms.store(static_cast<std::int64_t>(seconds * 1000.0));
}

void mark_fired(std::size_t index) {
  if (!g_own_slot || index >= 64) return;
  g_own_slot->fired.fetch_or(std::uint64_t{1} << index);
  g_own_slot->changed.fetch_or(std::uint64_t{1} << index);
}

namespace {
std::vector<std::string>& injection_kinds() {
  static std::vector<std::string> kinds;
  return kinds;
}
}  // namespace

void set_injection_kinds(std::vector<std::string> kinds) { injection_kinds() = std::move(kinds); }

void mark_fired(std::string_view kind) {
  const auto& kinds = injection_kinds();
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] == kind) mark_fired(i);
  }
}

void mark_fired_unchanged(std::string_view kind) {
  const auto& kinds = injection_kinds();
  for (std::size_t i = 0; i < kinds.size() && i < 64; ++i) {
    if (kinds[i] == kind && g_own_slot) g_own_slot->fired.fetch_or(std::uint64_t{1} << i);
  }
}

void Board::store_phase(std::atomic<std::uint64_t> (&dst)[3], const std::string& phase) {
  char buf[24] = {};
  std::memcpy(buf, phase.data(), std::min<std::size_t>(phase.size(), sizeof buf));
  for (int i = 0; i < 3; ++i) {
    std::uint64_t w;
    std::memcpy(&w, buf + 8 * i, 8);
    dst[i].store(w, std::memory_order_relaxed);
  }
}

std::string SlotView::waiting_in() const {
  std::ostringstream os;
  os << "collective #" << (issued - 1) << ' ' << to_string(op) << " (" << site_text(phase, step)
     << ')';
  return os.str();
}

std::vector<int> SlotView::group_ranks() const {
  std::vector<int> ranks;
  for (int r = 0; r < 64; ++r) {
    if (group_mask >> r & 1u) ranks.push_back(r);
  }
  return ranks;
}

std::string SlotView::waiting_in_group() const {
  std::ostringstream os;
  os << to_string(group_op) << " on the group of " << rank_list(group_ranks()) << " (" << site_text(group_phase, group_step) << ')';
  return os.str();
}

std::string SlotView::last_completed() const {
  if (completed == 0) return "no collective";
  std::ostringstream os;
  os << "collective #" << (completed - 1) << ' ' << to_string(last_op) << " ("
     << site_text(last_phase, last_step) << ')';
  return os.str();
}

Board Board::create(const std::string& path, int world_size, std::size_t fingerprint_words) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LOCKSTEP_CHECK(fd >= 0, "cannot create board file ", path, ": ", std::strerror(errno));
  const std::size_t bytes = sizeof(BoardHeader) + sizeof(BoardSlot) * static_cast<std::size_t>(world_size) +
                            ring_bytes(world_size, fingerprint_words);
  int rc = ::ftruncate(fd, static_cast<off_t>(bytes));
  if (rc == 0) {
    const BoardHeader h{kMagic, world_size, static_cast<std::int64_t>(fingerprint_words), kFingerprintRing};
    rc = ::pwrite(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) ? 0 : -1;
  }
  ::close(fd);
  LOCKSTEP_CHECK(rc == 0, "cannot size board file ", path, ": ", std::strerror(errno));
  return attach(path);
}

Board Board::attach(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  LOCKSTEP_CHECK(fd >= 0, "cannot open board file ", path, ": ", std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const auto bytes = static_cast<std::size_t>(st.st_size);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  LOCKSTEP_CHECK(p != MAP_FAILED, "cannot map board file ", path, ": ", std::strerror(errno));
  Board b;
  b.base_ = p;
  b.bytes_ = bytes;
  const auto* h = static_cast<const BoardHeader*>(p);
  LOCKSTEP_CHECK(bytes >= sizeof(BoardHeader) && h->magic == kMagic && h->ring == kFingerprintRing,
                 "not a lockstep board file: ", path);
  b.world_size_ = static_cast<int>(h->world_size);
  b.words_ = static_cast<std::size_t>(h->words);
  b.slots_ = reinterpret_cast<BoardSlot*>(static_cast<char*>(p) + sizeof(BoardHeader));
  b.rings_ = reinterpret_cast<std::atomic<std::int64_t>*>(b.slots_ + b.world_size_);
  LOCKSTEP_CHECK(bytes == sizeof(BoardHeader) + sizeof(BoardSlot) * static_cast<std::size_t>(b.world_size_) +
                              ring_bytes(b.world_size_, b.words_),
                 "board file ", path, " has the wrong size");
  return b;
}

Board::~Board() {
  if (base_) ::munmap(base_, bytes_);
}

Board::Board(Board&& other) noexcept { *this = std::move(other); }

Board& Board::operator=(Board&& other) noexcept {
  if (this != &other) {
    if (base_) ::munmap(base_, bytes_);
    base_ = std::exchange(other.base_, nullptr);
    slots_ = std::exchange(other.slots_, nullptr);
    rings_ = std::exchange(other.rings_, nullptr);
    world_size_ = std::exchange(other.world_size_, 0);
    words_ = std::exchange(other.words_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

SlotView Board::view(int rank) const {
  const BoardSlot& s = slots_[rank];
  SlotView v;
  v.issued = s.issued.load();
  v.completed = s.completed.load();
  v.p2p = s.p2p.load();
  v.op = static_cast<Op>(s.op.load());
  v.state = static_cast<RankState>(s.state.load());
  v.step = s.step.load();
  v.index = s.index.load();
  v.phase = load_phase(s.phase);
  v.last_op = static_cast<Op>(s.last_op.load());
  v.last_step = s.last_step.load();
  v.last_phase = load_phase(s.last_phase);
  v.activity = load_phase(s.activity);
  v.fired = s.fired.load();
  v.changed = s.changed.load();
  v.max_step = s.max_step.load();
  v.engine_timeout_ms = s.engine_timeout_ms.load();
  v.group_issued = s.group_issued.load();
  v.group_completed = s.group_completed.load();
  v.group_op = static_cast<Op>(s.group_op.load());
  v.group_mask = s.group_mask.load();
  v.group_step = s.group_step.load();
  v.group_phase = load_phase(s.group_phase);
  return v;
}

std::atomic<std::int64_t>* Board::ring(int rank, int ring) const {
  return rings_ + (static_cast<std::size_t>(rank) * (1 + kGroupRings) + static_cast<std::size_t>(ring)) * ring_words(words_);
}

std::atomic<std::int64_t>* Board::record(int rank, std::int64_t seq, int ring_index) const {
  return ring(rank, ring_index) + 1 + static_cast<std::size_t>(seq % kFingerprintRing) * (words_ + 1);
}

int Board::claim_group_ring(int rank, std::uint64_t key) {
  for (int j = 1; j <= kGroupRings; ++j) {
    std::int64_t expected = 0;
    std::atomic<std::int64_t>& k = ring(rank, j)[0];
    if (k.compare_exchange_strong(expected, static_cast<std::int64_t>(key)) || expected == static_cast<std::int64_t>(key)) return j;
  }
  return -1;
}

int Board::find_group_ring(int rank, std::uint64_t key) const {
  for (int j = 1; j <= kGroupRings; ++j) {
    if (ring(rank, j)[0].load(std::memory_order_acquire) == static_cast<std::int64_t>(key)) return j;
  }
  return -1;
}

void Board::publish_fingerprint(int rank, std::int64_t seq, const std::vector<std::int64_t>& words, int ring_index) {
  std::atomic<std::int64_t>* r = record(rank, seq, ring_index);
  r[0].store(0, std::memory_order_relaxed);  // invalidate while writing
  std::atomic_thread_fence(std::memory_order_release);
  const std::size_t n = std::min(words.size(), words_);
  for (std::size_t i = 0; i < n; ++i) r[1 + i].store(words[i], std::memory_order_relaxed);
  r[0].store(seq + 1, std::memory_order_release);
}

bool Board::read_fingerprint(int rank, std::int64_t seq, std::vector<std::int64_t>& out, int ring_index) const {
  const std::atomic<std::int64_t>* r = record(rank, seq, ring_index);
  if (r[0].load(std::memory_order_acquire) != seq + 1) return false;
  out.resize(words_);
  for (std::size_t i = 0; i < words_; ++i) out[i] = r[1 + i].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return r[0].load(std::memory_order_relaxed) == seq + 1;
}

std::int64_t Board::progress() const {
  std::int64_t total = 0;
  for (int r = 0; r < world_size_; ++r) {
    total += slots_[r].issued.load() + slots_[r].completed.load() + slots_[r].p2p.load() +
             slots_[r].group_issued.load() + slots_[r].group_completed.load() + slots_[r].state.load();
  }
  return total;
}

}  // namespace lockstep::comm

namespace lockstep::comm {

void flight_issued(BoardSlot& slot, std::int64_t seq, const Call& call, std::int64_t t_start_us) {
  FlightRecord& r = slot.flight[seq % BoardSlot::kFlightRing];
  r.seq1.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  r.op.store(static_cast<std::int32_t>(call.op), std::memory_order_relaxed);
  r.dtype.store(static_cast<std::int32_t>(call.in.dtype), std::memory_order_relaxed);
  r.reduce.store(static_cast<std::int32_t>(call.reduce), std::memory_order_relaxed);
  r.state.store(static_cast<std::int32_t>(FlightState::kIssued), std::memory_order_relaxed);
  r.count.store(call.op == Op::kBarrier ? 0 : call.in.count, std::memory_order_relaxed);
  r.step.store(call.site.step, std::memory_order_relaxed);
  r.index.store(call.site.index, std::memory_order_relaxed);
  r.t_start_us.store(t_start_us, std::memory_order_relaxed);
  r.t_end_us.store(0, std::memory_order_relaxed);
  Board::store_phase(r.phase, call.site.phase);
  r.seq1.store(seq + 1, std::memory_order_release);
}

void flight_done(BoardSlot& slot, std::int64_t seq, bool ok, std::int64_t t_end_us) {
  FlightRecord& r = slot.flight[seq % BoardSlot::kFlightRing];
  if (r.seq1.load(std::memory_order_relaxed) != seq + 1) return;
  r.t_end_us.store(t_end_us, std::memory_order_relaxed);
  r.state.store(static_cast<std::int32_t>(ok ? FlightState::kCompleted : FlightState::kFailed), std::memory_order_release);
}

std::vector<FlightView> read_flight(const BoardSlot& slot) {
  std::vector<FlightView> out;
  for (const FlightRecord& r : slot.flight) {
    const std::int64_t seq = r.seq1.load(std::memory_order_acquire) - 1;
    if (seq < 0) continue;
    FlightView v;
    v.seq = seq;
    v.op = static_cast<Op>(r.op.load(std::memory_order_relaxed));
    v.dtype = static_cast<DType>(r.dtype.load(std::memory_order_relaxed));
    v.reduce = static_cast<ReduceOp>(r.reduce.load(std::memory_order_relaxed));
    v.state = static_cast<FlightState>(r.state.load(std::memory_order_acquire));
    v.count = r.count.load(std::memory_order_relaxed);
    v.step = r.step.load(std::memory_order_relaxed);
    v.index = r.index.load(std::memory_order_relaxed);
    v.t_start_us = r.t_start_us.load(std::memory_order_relaxed);
    v.t_end_us = r.t_end_us.load(std::memory_order_relaxed);
    v.phase = load_phase(r.phase);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (r.seq1.load(std::memory_order_relaxed) != seq + 1) continue;  // rewritten while read
    out.push_back(std::move(v));
  }
  std::sort(out.begin(), out.end(), [](const FlightView& a, const FlightView& b) { return a.seq < b.seq; });
  return out;
}

std::string FlightView::describe() const {
  std::ostringstream os;
  os << '#' << seq << ' ' << to_string(op);
  if (traits(op).data) os << ' ' << to_string(dtype) << '[' << count << ']';
  if (traits(op).reduces) os << ' ' << to_string(reduce);
  os << " (" << site_text(phase, step) << ") "
     << (state == FlightState::kCompleted ? "completed" : state == FlightState::kFailed ? "failed" : "in flight");
  return os.str();
}


std::string P2pView::describe() const {
  std::ostringstream os;
  os << to_string(op) << ' ' << to_string(dtype) << '[' << count << "] " << (op == Op::kSend ? "to" : "from") << " rank " << peer
     << " tag=" << tag << " (" << phase;
  if (step >= 0) os << " step " << step;
  os << ')';
  return os.str();
}

std::int64_t p2p_issued(BoardSlot& slot, const Call& call, int peer, std::int64_t ordinal, std::uint64_t group) {
  const std::int64_t n = slot.p2p_next.fetch_add(1, std::memory_order_relaxed);
  P2pRecord& r = slot.p2p_flight[n % BoardSlot::kP2pRing];
  r.id1.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  r.ended.store(0, std::memory_order_relaxed);
  r.ordinal.store(ordinal, std::memory_order_relaxed);
  r.group.store(group, std::memory_order_relaxed);
  r.op.store(static_cast<std::int32_t>(call.op), std::memory_order_relaxed);
  r.peer.store(peer, std::memory_order_relaxed);
  r.tag.store(call.tag, std::memory_order_relaxed);
  r.dtype.store(static_cast<std::int32_t>(call.in.dtype), std::memory_order_relaxed);
  r.count.store(call.in.count, std::memory_order_relaxed);
  r.step.store(call.site.step, std::memory_order_relaxed);
  Board::store_phase(r.phase, call.site.phase);
  r.id1.store(n + 1, std::memory_order_release);
  return n;
}

void p2p_done(BoardSlot& slot, std::int64_t n) {
  // The call's own number: a place the ring has given to a later call meanwhile reads as in flight.
  slot.p2p_flight[n % BoardSlot::kP2pRing].ended.store(n + 1, std::memory_order_release);
}

std::vector<P2pView> read_p2p_recent(const BoardSlot& slot) {
  std::vector<std::pair<std::int64_t, P2pView>> found;
  for (const P2pRecord& r : slot.p2p_flight) {
    const std::int64_t id1 = r.id1.load(std::memory_order_acquire);
    if (id1 == 0) continue;
    P2pView v;
    v.op = static_cast<Op>(r.op.load(std::memory_order_relaxed));
    v.peer = r.peer.load(std::memory_order_relaxed);
    v.tag = r.tag.load(std::memory_order_relaxed);
    v.dtype = static_cast<DType>(r.dtype.load(std::memory_order_relaxed));
    v.count = r.count.load(std::memory_order_relaxed);
    v.step = r.step.load(std::memory_order_relaxed);
    v.ordinal = r.ordinal.load(std::memory_order_relaxed);
    v.group = r.group.load(std::memory_order_relaxed);
    v.ended = r.ended.load(std::memory_order_acquire) == id1;
    v.phase = load_phase(r.phase);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (r.id1.load(std::memory_order_relaxed) != id1) continue;  // rewritten meanwhile
    found.emplace_back(id1, std::move(v));
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<P2pView> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::vector<P2pView> read_p2p_flight(const BoardSlot& slot) {
  std::vector<P2pView> out = read_p2p_recent(slot);
  out.erase(std::remove_if(out.begin(), out.end(), [](const P2pView& v) { return v.ended; }), out.end());
  return out;
}

}  // namespace lockstep::comm
