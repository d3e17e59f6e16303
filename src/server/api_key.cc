#include "server/api_key.h"

#include <string>

#include "server/sha256.h"

namespace moeserve::server {
namespace {

// Compares every byte of both digests: no early exit, so the time says nothing about where
// they differ.
bool DigestsEqual(const Sha256Digest& a, const Sha256Digest& b) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = diff | (a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool AuthorizationMatches(std::string_view authorization_header, std::string_view key) {
  const std::string expected = "Bearer " + std::string(key);
  return DigestsEqual(Sha256(authorization_header), Sha256(expected));
}

bool ApiKeyHeaderMatches(std::string_view x_api_key_header, std::string_view key) {
  return DigestsEqual(Sha256(x_api_key_header), Sha256(key));
}

}  // namespace moeserve::server
