#include "harness/core/fs.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/core/error.h"

namespace lockstep {

void write_file_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  LOCKSTEP_CHECK(!ec, "cannot create directory ", parent.string(), ": ", ec.message());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LOCKSTEP_CHECK(out.good(), "cannot open ", tmp, " for writing: ", std::strerror(errno));
    out << text;
    out.close();
    LOCKSTEP_CHECK(out.good(), "cannot write ", tmp);
  }
  fs::rename(tmp, path, ec);
  LOCKSTEP_CHECK(!ec, "cannot rename ", tmp, " to ", path, ": ", ec.message());
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {
const char* what_is(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}
}  // namespace

Fd open_regular(const std::string& dir, const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    throw std::runtime_error("'" + name + "' is not a file name inside its folder");
  }
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d) {
    if (errno == ENOENT) return {};
    if (errno == ELOOP || errno == ENOTDIR) throw std::runtime_error("its folder " + dir + " is a symlink or not a folder");
    throw std::runtime_error("cannot open the folder " + dir + ": " + std::strerror(errno));
  }
  // O_NONBLOCK: opening a FIFO for reading returns at once (a regular file's reads ignore it).
  Fd f(::openat(d.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!f) {
    if (errno == ENOENT) return {};
    if (errno == ELOOP) throw std::runtime_error("is a symlink (outputs are never read through symlinks)");
    if (errno == ENXIO) throw std::runtime_error("is a socket or a device without a reader");
    throw std::runtime_error(std::string("cannot be opened: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) throw std::runtime_error(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw std::runtime_error(std::string("is ") + what_is(st.st_mode) + ", not a regular file");
  if (st.st_nlink > 1) throw std::runtime_error("is a hard link to another file (" + std::to_string(st.st_nlink) + " links)");
  const int flags = ::fcntl(f.get(), F_GETFL);
  if (flags >= 0) ::fcntl(f.get(), F_SETFL, flags & ~O_NONBLOCK);
  return f;
}

namespace {
std::string read_range(int fd, std::size_t offset, std::size_t n) {
  std::string out(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    const ssize_t k = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += static_cast<std::size_t>(k);
  }
  out.resize(got);
  return out;
}
}  // namespace

std::string read_regular(const std::string& dir, const std::string& name, std::size_t max_bytes) {
  const Fd f = open_regular(dir, name);
  if (!f) throw std::runtime_error("missing");
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) throw std::runtime_error(std::string("cannot stat: ") + std::strerror(errno));
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size > max_bytes) {
    throw std::runtime_error("holds " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " allowed");
  }
  return read_range(f.get(), 0, size);
}

std::string read_tail(const std::string& path, std::size_t max_bytes) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  Fd f;
  try {
    f = open_regular(dir, path.substr(slash == std::string::npos ? 0 : slash + 1));
  } catch (const std::exception&) {
    return "";
  }
  if (!f) return "";
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) return "";
  const auto size = static_cast<std::size_t>(st.st_size);
  const std::size_t from = size > max_bytes ? size - max_bytes : 0;
  return read_range(f.get(), from, size - from);
}

}  // namespace lockstep
