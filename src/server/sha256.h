// SHA-256 (FIPS 180-4), for comparing secrets by digest: the API key check hashes both sides so
// that the comparison takes the same time whatever the key's length or content.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace moeserve::server {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(std::string_view data);

}  // namespace moeserve::server
