// Writes a float32 .npy (NumPy format 1.0), so any script can load what moeserve computed.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "core/check.h"

namespace moeserve::apps {

inline void WriteNpyF32(const std::string& path, const float* data, size_t rows, size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) Fail("cannot write ", path);
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const uint16_t len = static_cast<uint16_t>(header.size());
  bool ok = std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(&len, 2, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data, sizeof(float), rows * cols, f) == rows * cols;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) Fail("error writing ", path);
}

}  // namespace moeserve::apps
