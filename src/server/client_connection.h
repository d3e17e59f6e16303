// Detects that an HTTP client went away while its request is still generating, so the request can
// be aborted at once (and its KV blocks freed) instead of running to max_tokens.
//
// cpp-httplib 0.11 (Debian's) gives handlers neither the socket nor an is-closed query, so the
// socket is found once per request by its address pair (the handler's Request has the local and
// remote address and port) among the process's open sockets, then polled: a peer that closed its
// side makes the socket readable with 0 bytes pending, or raises POLLRDHUP/POLLHUP/POLLERR.
// Clients do not pipeline requests, so no request bytes are expected while a response is pending.
#pragma once

#include <string>

namespace moeserve::server {

class ClientConnection {
 public:
  // Finds the socket of the connection local_addr:local_port <-> remote_addr:remote_port.
  ClientConnection(const std::string& local_addr, int local_port, const std::string& remote_addr,
                   int remote_port);
  // True once the peer has closed or reset the connection. False when the socket was not found.
  bool Closed() const;

 private:
  int fd_ = -1;
};

}  // namespace moeserve::server
