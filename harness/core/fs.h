#pragma once
#include <cstddef>
#include <string>

namespace lockstep {

// Writes `text` to path.tmp and renames it over `path`, so readers never see a torn file.
// Creates missing parent directories. Throws lockstep::Error on failure.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace lockstep

namespace lockstep {

// An open file descriptor, closed by the destructor. Movable, not copyable.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Opens DIR/NAME, a file another program wrote, for reading, as untrusted input: NAME must be
// a plain name (no '/'), neither DIR nor NAME is followed if it is a symlink, and the open never
// blocks (a FIFO is not waited on). Returns an empty Fd when DIR or NAME does not exist. Throws
// std::runtime_error saying what NAME is ("a FIFO", "a symlink", "a directory", "a device", "a
// hard link to another file") when it is not a regular file of DIR's own.
Fd open_regular(const std::string& dir, const std::string& name);

// Reads DIR/NAME (as open_regular) whole. Throws std::runtime_error when it is missing, not a
// regular file, or larger than max_bytes (checked before it is read).
std::string read_regular(const std::string& dir, const std::string& name, std::size_t max_bytes);

// The last max_bytes bytes of PATH (as open_regular); "" when it is missing or not a regular file.
std::string read_tail(const std::string& path, std::size_t max_bytes);

}  // namespace lockstep
