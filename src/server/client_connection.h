// Detects that an HTTP client went away while its request is still generating, so the request can
// be aborted at once (and its KV blocks freed) instead of running to max_tokens.
//
// The transport hands each request its connection's socket; this polls it: a peer that closed its
// side makes the socket readable with 0 bytes pending, or raises POLLRDHUP/POLLHUP/POLLERR. Bytes
// of a pipelined next request are left in place (peeked, not read).
#pragma once

namespace moeserve::server {

class ClientConnection {
 public:
  ClientConnection() = default;  // no socket: never closed
  explicit ClientConnection(int fd) : fd_(fd) {}
  // True once the peer has closed or reset the connection.
  bool Closed() const;

 private:
  int fd_ = -1;
};

}  // namespace moeserve::server
