#include "reference/io/npy.h"

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string_view>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace lockstep::io {
namespace {

// Data bytes are written and read as they lie in memory, and labelled little-endian.
static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;
constexpr std::size_t kHeaderAlign = 64;
// A header longer than this is refused before it is read (NumPy writes a few hundred bytes).
constexpr std::size_t kMaxHeaderBytes = 1 << 20;

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw std::runtime_error(path + ": " + problem);
}

struct DescrParts {
  char order;        // '<', '>', '|' or '='
  char kind;         // 'b', 'i', 'u', 'f', 'c', 'S', 'V', 'U'
  std::size_t unit;  // bytes per scalar unit (a 'U' element is `count` units of 4 bytes)
  std::size_t count;
};

DescrParts parse_descr(const std::string& descr) {
  auto bad = [&](const char* why) -> DescrParts {
    throw std::invalid_argument("npy descr '" + descr + "' " + why);
  };
  if (descr.size() < 3) return bad("is too short");
  DescrParts parts{descr[0], descr[1], 0, 0};
  if (std::string_view("<>|=").find(parts.order) == std::string_view::npos) {
    return bad("does not start with a byte order ('<', '>', '|' or '=')");
  }
  std::size_t n = 0;
  for (std::size_t i = 2; i < descr.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(descr[i]))) return bad("has a non-digit size");
    if (n > (std::numeric_limits<std::size_t>::max() - 9) / 10) return bad("has a size too large");
    n = n * 10 + static_cast<std::size_t>(descr[i] - '0');
  }
  if (n == 0) return bad("has size 0");
  switch (parts.kind) {
    case 'b': case 'i': case 'u': case 'f': case 'c': case 'S': case 'V':
      parts.unit = n;
      parts.count = 1;
      break;
    case 'U':
      parts.unit = 4;
      parts.count = n;
      break;
    default:
      return bad("is not a supported kind (expected one of b i u f c S V U)");
  }
  return parts;
}

// True when the byte order of `parts` says the data is big-endian.
bool is_big_endian(const DescrParts& parts) {
  const bool ordered_kind = std::string_view("iufcU").find(parts.kind) != std::string_view::npos;
  return parts.order == '>' && ordered_kind && parts.unit > 1;
}

// Sets *out to prod(shape) * item. Returns false on a negative dimension or overflow.
bool byte_count(const std::vector<std::int64_t>& shape, std::size_t item, std::size_t* out) {
  std::size_t total = item;
  for (std::int64_t dim : shape) {
    if (dim < 0) return false;
    const auto d = static_cast<std::size_t>(dim);
    if (d != 0 && total > std::numeric_limits<std::size_t>::max() / d) return false;
    total *= d;
  }
  *out = total;
  return true;
}

std::string shape_repr(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// A parser for the Python dict literal in a .npy header.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, std::string_view text) : path_(path), text_(text) {}

  NpyArray parse() {
    NpyArray array;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[') fail(path_, "structured dtypes are not supported");
        array.descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        array.fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        array.shape = parse_shape();
        have_shape = true;
      } else {
        fail(path_, "unexpected key '" + key + "' in .npy header");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        fail(path_, "malformed .npy header: expected ',' or '}' at offset " + std::to_string(pos_));
      }
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail(path_, "malformed .npy header: trailing characters");
    if (!have_descr || !have_order || !have_shape) {
      fail(path_, ".npy header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return array;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) {
      fail(path_, std::string("malformed .npy header: expected '") + c + "' at offset " +
                      std::to_string(pos_));
    }
    ++pos_;
  }
  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') {
      fail(path_, "malformed .npy header: expected a string at offset " + std::to_string(pos_));
    }
    ++pos_;
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail(path_, "malformed .npy header: unterminated string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  bool parse_bool() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail(path_, "malformed .npy header: fortran_order is not True or False");
  }
  std::vector<std::int64_t> parse_shape() {
    std::vector<std::int64_t> shape;
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) {
        fail(path_, "malformed .npy header: shape entry is not a non-negative integer");
      }
      std::int64_t value = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        const int digit = peek() - '0';
        if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10) {
          fail(path_, "shape entry overflows int64");
        }
        value = value * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long literal
      shape.push_back(value);
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        fail(path_, "malformed .npy header: expected ',' or ')' in shape");
      }
    }
    ++pos_;
    return shape;
  }

  const std::string& path_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

std::uint32_t read_le(const unsigned char* p, int n) {
  std::uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::size_t npy_item_size(const std::string& descr) {
  const DescrParts parts = parse_descr(descr);
  return parts.unit * parts.count;
}

void write_npy(const std::string& path, const std::string& descr,
               const std::vector<std::int64_t>& shape, const void* data, std::size_t bytes) {
  const DescrParts parts = parse_descr(descr);
  if (is_big_endian(parts)) {
    throw std::invalid_argument(path + ": cannot write big-endian descr '" + descr + "'");
  }
  std::size_t expected = 0;
  if (!byte_count(shape, parts.unit * parts.count, &expected)) {
    throw std::invalid_argument(path + ": invalid shape " + shape_repr(shape));
  }
  if (bytes != expected) {
    throw std::invalid_argument(path + ": shape " + shape_repr(shape) + " of '" + descr +
                                "' needs " + std::to_string(expected) + " bytes, got " +
                                std::to_string(bytes));
  }
  if (bytes > 0 && data == nullptr) throw std::invalid_argument(path + ": data is null");

  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " +
                     shape_repr(shape) + ", }";
  // Format 1.0 holds a 16-bit header length; 2.0 is the same with a 32-bit one.
  std::size_t preamble = kMagicSize + 2 + 2;
  unsigned char major = 1;
  if (preamble + dict.size() + 1 > std::numeric_limits<std::uint16_t>::max()) {
    major = 2;
    preamble = kMagicSize + 2 + 4;
  }
  const std::size_t unpadded = preamble + dict.size() + 1;
  dict.append((kHeaderAlign - unpadded % kHeaderAlign) % kHeaderAlign, ' ');
  dict.push_back('\n');

  std::string head(kMagic, kMagicSize);
  head.push_back(static_cast<char>(major));
  head.push_back('\0');
  const std::size_t header_len = dict.size();
  for (std::size_t i = 0; i < preamble - kMagicSize - 2; ++i) {
    head.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  }
  head += dict;

  // Written beside the target and renamed, so a killed writer never leaves a torn .npy.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, std::string("cannot open for writing: ") + std::strerror(errno));
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    if (bytes > 0) out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      fail(path, "write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    fail(path, "cannot rename " + tmp + ": " + ec.message());
  }
}

NpyArray read_npy(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
  try {
    NpyArray a = read_npy(fd, path, std::numeric_limits<std::size_t>::max());
    ::close(fd);
    return a;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

namespace {
// Reads exactly n bytes at `offset`; false on a short read.
bool read_at(int fd, void* buf, std::size_t n, std::size_t offset) {
  auto* p = static_cast<unsigned char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
    offset += static_cast<std::size_t>(got);
  }
  return true;
}
}  // namespace

NpyArray read_npy(int fd, const std::string& name, std::size_t max_data_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(name, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(name, "not a regular file");
  const auto file_size = static_cast<std::size_t>(st.st_size);

  unsigned char pre[kMagicSize + 2];
  if (file_size < sizeof(pre) || !read_at(fd, pre, sizeof(pre), 0) || std::memcmp(pre, kMagic, kMagicSize) != 0) {
    fail(name, "not a .npy file (bad magic)");
  }
  const int major = pre[kMagicSize], minor = pre[kMagicSize + 1];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    fail(name, "unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor));
  }
  const std::size_t len_size = major == 1 ? 2 : 4;
  unsigned char len_bytes[4];
  if (!read_at(fd, len_bytes, len_size, sizeof(pre))) fail(name, "truncated .npy header");
  const std::size_t header_len = read_le(len_bytes, static_cast<int>(len_size));
  const std::size_t data_offset = sizeof(pre) + len_size + header_len;
  if (data_offset > file_size) fail(name, "truncated .npy header");
  if (header_len > kMaxHeaderBytes) {
    fail(name, "header of " + std::to_string(header_len) + " bytes (at most " + std::to_string(kMaxHeaderBytes) + ")");
  }
  std::string header(header_len, '\0');
  if (!read_at(fd, header.data(), header_len, sizeof(pre) + len_size)) fail(name, "truncated .npy header");

  NpyArray array = HeaderParser(name, header).parse();
  DescrParts parts{};
  try {
    parts = parse_descr(array.descr);
  } catch (const std::invalid_argument& e) {
    fail(name, e.what());
  }
  if (is_big_endian(parts)) {
    fail(name, "big-endian descr '" + array.descr + "' is not supported");
  }
  if (array.fortran_order) fail(name, "Fortran-ordered arrays are not supported");
  std::size_t bytes = 0;
  if (!byte_count(array.shape, parts.unit * parts.count, &bytes)) {
    fail(name, "shape " + shape_repr(array.shape) + " is too large");
  }
  if (file_size - data_offset != bytes) {
    fail(name, "holds " + std::to_string(file_size - data_offset) + " data bytes, but shape " +
                   shape_repr(array.shape) + " of '" + array.descr + "' needs " +
                   std::to_string(bytes));
  }
  if (bytes > max_data_bytes) {
    fail(name, "shape " + shape_repr(array.shape) + " of '" + array.descr + "' holds " + std::to_string(bytes) +
                   " data bytes, more than the " + std::to_string(max_data_bytes) + " allowed");
  }
  array.data.resize(bytes);
  if (bytes > 0 && !read_at(fd, array.data.data(), bytes, data_offset)) fail(name, "read failed");
  return array;
}

}  // namespace lockstep::io
