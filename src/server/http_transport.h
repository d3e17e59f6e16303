// The HTTP/1.1 transport under the routes: connections, parsing, limits, deadlines, streamed
// (chunked) responses and the drain. Boost.Beast parses; Boost.Asio runs every connection as a
// C++20 coroutine on one io thread, so a connection that is idle or trickling its request costs a
// coroutine and a buffer, never a thread. Handlers that block (engine work) run on a bounded
// worker pool; a streamed body is then pumped by its connection's coroutine, which sleeps until the
// engine posts output (StreamSource::SetWakeup), so a stream waiting for tokens holds no thread.
//
// What every connection gets (TransportLimits):
//  - at most max_connections open at once; one more is answered 503 and closed. Listen backlog
//    `backlog` (connections the kernel queues before accept).
//  - the request head (request line + headers) must be complete within header_timeout_s of the
//    connection becoming ready for a request, and its first byte must come within
//    keep_alive_timeout_s; otherwise the connection is closed. Deadlines cover the whole head and
//    the whole body, not each read, so trickling a byte at a time does not extend them.
//  - the head: at most max_header_bytes (431 as soon as more arrive, nothing more is buffered) and
//    max_header_count fields (431).
//  - the body: complete within body_timeout_s; at most max_body_bytes, Content-Length or chunked
//    alike (413 as soon as the announced length or the chunks counted so far pass the limit).
//  - strict framing: two Content-Length fields, Content-Length with Transfer-Encoding, or a
//    Transfer-Encoding that does not end in chunked -> 400 and the connection is closed (a
//    request a proxy frames differently must never be read as two).
//  - pipelined requests are read one after another from the connection's buffer and answered in
//    order.
//  - any error response closes the connection (after draining what the client still sends for up
//    to a second, so it gets to read the response).
//
// Threads: Run() runs the io thread on the caller; Shutdown() may be called from any other thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/client_connection.h"

namespace moeserve::server {

struct HttpRequest {
  std::string method;  // as sent, e.g. "POST"
  std::string target;  // request target as sent ("/v1/models?x=1")
  std::string path;    // target up to '?'
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  ClientConnection connection;  // for handlers that wait: has the client gone?

  // The first field of that name (case-insensitive); "" when absent.
  std::string Header(std::string_view name) const;
};

// A response body produced over time (SSE), pumped by the transport on its io thread.
class StreamSource {
 public:
  virtual ~StreamSource() = default;
  // Never blocks: appends the bytes ready now to `out`; true once the body is complete.
  virtual bool Poll(std::string& out) = 0;
  // The server gives up on the stream (drain deadline): appends the bytes that end it properly.
  virtual void Abort(std::string& out) = 0;
  // The client has gone: stop producing (abort the engine work).
  virtual void Cancel() = 0;
  // `wake` may be called from any thread when Poll may have new bytes; nullptr clears it.
  virtual void SetWakeup(std::function<void()> wake) = 0;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;
  std::string body;
  std::shared_ptr<StreamSource> stream;  // when set: a chunked body from the source, `body` unused

  void SetContent(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
  void SetHeader(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
};

struct TransportLimits {
  size_t max_connections = 2048;
  int backlog = 2048;
  size_t max_header_bytes = 16 << 10;  // request line + headers
  size_t max_header_count = 100;
  size_t max_body_bytes = 32u << 20;
  double header_timeout_s = 20;
  double body_timeout_s = 60;
  double keep_alive_timeout_s = 5;
  double write_timeout_s = 60;  // each write of a response; a client that stops reading is closed
  size_t worker_threads = 64;   // handlers that block run here
};

// Handles one request; runs on a worker thread and may block.
using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
// Decides how a request is answered; runs on the io thread and must not block. Either fills `res`
// and returns nullptr, or returns the handler to run on the worker pool.
using Router = std::function<Handler(const HttpRequest&, HttpResponse&)>;
// Builds an error body for the transport's own errors (400, 413, 431, 503, 505).
using ErrorResponder = std::function<void(int status, const std::string& message, HttpResponse&)>;

class HttpTransport {
 public:
  HttpTransport(TransportLimits limits, Router router, ErrorResponder error);
  ~HttpTransport();

  // Binds and listens; throws moeserve::Error when that fails. Returns the bound port.
  int Listen(const std::string& host, int port);
  // Serves until Shutdown has finished; returns once every handler has returned.
  void Run();

  // Graceful drain: stops accepting, closes connections between requests, lets running requests
  // (streams included) finish for up to drain_timeout_s. Then calls `on_deadline` (which makes
  // blocking handlers give up), ends every open stream with its Abort bytes, and logs what it
  // aborted. Returns when every connection is closed (at most ~1 s after the deadline); Run then
  // returns.
  void Shutdown(double drain_timeout_s, const std::function<void()>& on_deadline);

  // Requests being read, handled or answered (streams included).
  int active_requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace moeserve::server
