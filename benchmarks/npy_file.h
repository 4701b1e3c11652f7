// Reads a NumPy .npy file of uint8 in C order (format versions 1 to 3), the
// form benchmarks/capture_frames.py saves real frames in (data/frames/) and
// the codec tests' fixture (tests/kernels/codecs/data/) has. Header-only, no
// dependencies; errors are std::runtime_error naming the file.
#pragma once

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace obsaug {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

inline NpyArray read_npy_uint8(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  const auto fail = [&](const std::string& why) -> std::runtime_error {
    return std::runtime_error(path + ": not a uint8 C-order .npy file: " + why);
  };
  char magic[8];
  if (!in.read(magic, 8) || std::string(magic, 6) != "\x93NUMPY") throw fail("no NumPy magic");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t header_len = 0;
  unsigned char len_bytes[4] = {0, 0, 0, 0};
  if (major == 1) {
    if (!in.read(reinterpret_cast<char*>(len_bytes), 2)) throw fail("truncated header");
  } else if (major == 2 || major == 3) {
    if (!in.read(reinterpret_cast<char*>(len_bytes), 4)) throw fail("truncated header");
  } else {
    throw fail("format version " + std::to_string(major));
  }
  for (int k = 3; k >= 0; --k) header_len = (header_len << 8) | len_bytes[k];
  if (header_len > (1u << 20)) throw fail("header of " + std::to_string(header_len) + " bytes");
  std::string header(header_len, '\0');
  if (!in.read(&header[0], header_len)) throw fail("truncated header");
  const auto value_of = [&](const std::string& key) {
    const size_t at = header.find("'" + key + "':");
    if (at == std::string::npos) throw fail("no '" + key + "' in the header");
    return header.substr(at + key.size() + 3);
  };
  const std::string descr = value_of("descr");
  if (descr.find("'|u1'") != 0 && descr.find(" '|u1'") != 0) throw fail("dtype is not uint8");
  if (value_of("fortran_order").find("False") > 1) throw fail("Fortran order");
  std::string shape_text = value_of("shape");
  shape_text = shape_text.substr(shape_text.find('(') + 1);
  shape_text = shape_text.substr(0, shape_text.find(')'));
  NpyArray array;
  int64_t count = 1;
  size_t pos = 0;
  while (pos < shape_text.size()) {
    const size_t comma = shape_text.find(',', pos);
    const std::string dim =
        shape_text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (dim.find_first_of("0123456789") != std::string::npos) {
      array.shape.push_back(std::stoll(dim));
      count *= array.shape.back();
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  array.data.resize(static_cast<size_t>(count));
  if (!in.read(reinterpret_cast<char*>(array.data.data()), count) || in.gcount() != count)
    throw fail("fewer data bytes than its shape needs");
  return array;
}

}  // namespace obsaug
