// API-key authentication: the comparison itself.
//
// Policy (README "Authentication"): with --api-key set, every route needs
// `Authorization: Bearer <key>` except the ones a load balancer or a monitor probes without
// credentials: /health, /metrics, /version (marked public in route_table.cc). So /v1/*,
// /tokenize and /detokenize (which run the tokenizer and the chat template on the caller's
// input) are protected, and so is any route added later unless its table entry says public.
//
// The comparison hashes both sides with SHA-256 and compares the digests without an early exit,
// so its time depends on neither the key's length nor how many leading bytes a guess got right.
#pragma once

#include <string_view>

namespace moeserve::server {

// True when the Authorization header value is exactly "Bearer <key>". Constant-time in the key.
bool AuthorizationMatches(std::string_view authorization_header, std::string_view key);
// True when an `x-api-key` header value (the Anthropic clients' way) is exactly the key.
// Constant-time in the key.
bool ApiKeyHeaderMatches(std::string_view x_api_key_header, std::string_view key);

}  // namespace moeserve::server
