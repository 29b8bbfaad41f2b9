#pragma once
// NumPy .npy files (format 1.0; the reader also takes 2.0 and 3.0). Only little-endian or
// byte-order-free ("|") C-order arrays are supported. bf16 has no NumPy dtype: callers store
// it as "<u2" and record that in their own metadata.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::io {

struct NpyArray {
  std::string descr;                // NumPy dtype string: "<f4", "<i8", "|u1", ...
  std::vector<std::int64_t> shape;  // empty for a 0-d array
  std::vector<unsigned char> data;  // prod(shape) * npy_item_size(descr) bytes, C order
  bool fortran_order = false;       // always false for arrays returned by read_npy
};

// Returns the size in bytes of one element of `descr` ("<f4" -> 4, "|u1" -> 1).
// Throws std::invalid_argument when `descr` is not a fixed-size numeric, bool or bytes dtype.
std::size_t npy_item_size(const std::string& descr);

// Writes a C-order .npy file (format 1.0, header padded to a multiple of 64 bytes).
// `bytes` must equal prod(shape) * npy_item_size(descr). Throws std::invalid_argument on a
// bad descr, shape or size, and std::runtime_error naming `path` when the file cannot be
// written.
void write_npy(const std::string& path, const std::string& descr,
               const std::vector<std::int64_t>& shape, const void* data, std::size_t bytes);

// Reads a .npy file. Throws std::runtime_error naming `path` when the file cannot be read, is
// not a .npy file, is big-endian or Fortran-ordered, or holds fewer or more data bytes than
// its header promises.
NpyArray read_npy(const std::string& path);

// Reads a .npy file from the open descriptor `fd` (a regular file; read with pread, so its
// offset is unchanged); `name` names it in errors. The header is read and checked against the
// file's size before anything is allocated: a header over 1 MiB, a size that does not match
// the declared shape, or more than `max_data_bytes` of data throws std::runtime_error.
NpyArray read_npy(int fd, const std::string& name, std::size_t max_data_bytes);

}  // namespace lockstep::io
