#include "harness/comm/board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <sstream>
#include <utility>

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

}  // namespace

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

std::string SlotView::last_completed() const {
  if (completed == 0) return "no collective";
  std::ostringstream os;
  os << "collective #" << (completed - 1) << ' ' << to_string(last_op) << " ("
     << site_text(last_phase, last_step) << ')';
  return os.str();
}

Board Board::create(const std::string& path, int world_size) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LOCKSTEP_CHECK(fd >= 0, "cannot create board file ", path, ": ", std::strerror(errno));
  const std::size_t bytes = sizeof(BoardSlot) * static_cast<std::size_t>(world_size);
  const int rc = ::ftruncate(fd, static_cast<off_t>(bytes));
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
  b.slots_ = static_cast<BoardSlot*>(p);
  b.world_size_ = static_cast<int>(bytes / sizeof(BoardSlot));
  b.bytes_ = bytes;
  return b;
}

Board::~Board() {
  if (slots_) ::munmap(slots_, bytes_);
}

Board::Board(Board&& other) noexcept { *this = std::move(other); }

Board& Board::operator=(Board&& other) noexcept {
  if (this != &other) {
    if (slots_) ::munmap(slots_, bytes_);
    slots_ = std::exchange(other.slots_, nullptr);
    world_size_ = std::exchange(other.world_size_, 0);
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
  return v;
}

std::int64_t Board::progress() const {
  std::int64_t total = 0;
  for (int r = 0; r < world_size_; ++r) {
    total += slots_[r].issued.load() + slots_[r].completed.load() + slots_[r].p2p.load() +
             slots_[r].state.load();
  }
  return total;
}

}  // namespace lockstep::comm
