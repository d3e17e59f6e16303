#include "server/http_transport.h"

#include <sys/resource.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <future>
#include <list>
#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "server/memory_release.h"
#include "server/worker_pool.h"

namespace moeserve::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

// Coroutine note: GCC 12 destroys temporaries of a conditional expression inside a co_await
// expression twice (a double free seen here). Build strings in named locals, then co_await.

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (beast::iequals(k, beast::string_view(name.data(), name.size()))) return v;
  return "";
}

namespace {

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

enum class State {
  kIdle,       // between requests: waiting for the first byte of the next one
  kHead,       // reading a request head
  kBody,       // reading a request body
  kHandling,   // the router or a worker is producing the response
  kStreaming,  // writing a streamed body
  kWriting,    // writing a whole response
  kClosing,    // answered; waiting for the client to stop sending before closing
};

struct Conn {
  explicit Conn(tcp::socket s) : stream(std::move(s)), wake(stream.get_executor()) {}
  beast::tcp_stream stream;
  asio::steady_timer wake;  // a streaming connection sleeps on it until the source has output
  State state = State::kIdle;
  bool woken = false;
  bool abort_stream = false;  // the drain deadline passed: end the stream now
};

std::string Reason(int status) {
  const beast::string_view r = http::obsolete_reason(static_cast<http::status>(status));
  if (r.empty() || r.front() == '<') return "Status";
  return std::string(r);
}

// The status line and fields. `content_length` < 0: chunked (or, for HTTP/1.0, close-delimited).
// A kept-alive connection announces its idle timeout: clients that honour the hint (undici, so
// Node's fetch and the openai package) then drop the socket before the server closes it, instead
// of racing the close with their next request ("Connection error" under load).
std::string ResponseHead(const HttpResponse& res, bool keep_alive, bool http10,
                         long long content_length, double keep_alive_s = 0) {
  std::string h = "HTTP/1.1 " + std::to_string(res.status) + " " + Reason(res.status) + "\r\n";
  if (!res.content_type.empty()) h += "Content-Type: " + res.content_type + "\r\n";
  for (const auto& [k, v] : res.headers) h += k + ": " + v + "\r\n";
  if (content_length >= 0)
    h += "Content-Length: " + std::to_string(content_length) + "\r\n";
  else if (!http10)
    h += "Transfer-Encoding: chunked\r\n";
  if (!keep_alive)
    h += "Connection: close\r\n";
  else if (http10)
    h += "Connection: keep-alive\r\n";
  if (keep_alive && keep_alive_s >= 1)
    h += "Keep-Alive: timeout=" + std::to_string(static_cast<long long>(keep_alive_s)) + "\r\n";
  return h + "\r\n";
}

std::string Chunk(const std::string& data) {
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

// The status a read error is answered with; 0: close without an answer (the client went away,
// a deadline passed, the server is shutting down).
int StatusForReadError(const error_code& ec) {
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) return 431;
  if (ec == http::error::body_limit) return 413;
  if (ec == http::error::end_of_stream || ec == http::error::partial_message) return 0;
  if (ec.category() == http::make_error_code(http::error::bad_method).category()) return 400;
  return 0;
}

}  // namespace

struct HttpTransport::Impl {
  Impl(TransportLimits l, Router r, ErrorResponder e)
      : limits(l),
        router(std::move(r)),
        error(std::move(e)),
        pool(std::max<size_t>(limits.worker_threads, 1), kMinWorkerThreads, kWorkerIdleExit,
             ReleaseThreadCache) {}

  awaitable<void> Accept();
  awaitable<void> Serve(std::shared_ptr<Conn> c);
  awaitable<bool> Pump(std::shared_ptr<Conn> c, StreamSource& src, std::string head, bool chunked);
  awaitable<void> Refuse(tcp::socket s);
  awaitable<void> SendError(Conn& c, int status, const std::string& message);
  awaitable<void> LingeringClose(beast::tcp_stream& s);
  // Runs `fn` on the worker pool; the coroutine resumes on the io thread once it has returned.
  awaitable<void> OnWorker(std::function<void()> fn);
  // Runs `fn` on the io thread and waits for it.
  void OnIo(std::function<void()> fn);

  TransportLimits limits;
  Router router;
  ErrorResponder error;
  asio::io_context ioc{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{ioc.get_executor()};
  tcp::acceptor acceptor{ioc};
  // Handlers that block. LIFO with idle threads ending (worker_pool.h): the threads that keep
  // per-thread memory are as many as the handlers running at once, not every one in rotation.
  static constexpr size_t kMinWorkerThreads = 4;
  static constexpr std::chrono::milliseconds kWorkerIdleExit{std::chrono::seconds(5)};
  WorkerPool pool;
  IdleTrim idle_trim;  // malloc's free pages, given back when the last request ends
  std::list<std::shared_ptr<Conn>> conns;  // io thread only
  std::atomic<int> active{0};
  std::atomic<bool> draining{false};
  bool aborting = false;  // io thread only: the drain deadline has passed
  Clock::time_point last_accept_warning{};
};

void HttpTransport::Impl::OnIo(std::function<void()> fn) {
  std::promise<void> done;
  asio::post(ioc, [&] {
    fn();
    done.set_value();
  });
  done.get_future().wait();
}

awaitable<void> HttpTransport::Impl::OnWorker(std::function<void()> fn) {
  // `fn` lives in this coroutine's frame until the worker has run it and resumed us.
  co_await asio::async_initiate<decltype(use_awaitable), void()>(
      [this, &fn](auto handler) {
        // The handler resumes the coroutine on the io thread, which must not run out of work
        // meanwhile (a tracked executor).
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto io = asio::prefer(ioc.get_executor(), asio::execution::outstanding_work.tracked);
        pool.Post([h, &fn, io] {
          fn();
          auto ex = asio::get_associated_executor(*h, io);
          asio::post(ex, std::move(*h));
        });
      },
      use_awaitable);
}

awaitable<void> HttpTransport::Impl::Accept() {
  for (;;) {
    error_code ec;
    tcp::socket s = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (!acceptor.is_open() || draining.load()) co_return;
      // Out of descriptors or similar: back off instead of spinning; say so once a second.
      if (Clock::now() - last_accept_warning > std::chrono::seconds(1)) {
        last_accept_warning = Clock::now();
        LogWarn("accept: ", ec.message());
      }
      asio::steady_timer t(ioc, std::chrono::milliseconds(50));
      co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    if (draining.load()) continue;
    s.set_option(tcp::no_delay(true), ec);
    if (conns.size() >= limits.max_connections) {
      asio::co_spawn(ioc, Refuse(std::move(s)), asio::detached);
      continue;
    }
    conns.push_front(std::make_shared<Conn>(std::move(s)));
    auto it = conns.begin();
    asio::co_spawn(ioc, Serve(*it), [this, it](std::exception_ptr e) {
      if (e) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          LogWarn("connection failed: ", x.what());
        }
      }
      conns.erase(it);
    });
  }
}

awaitable<void> HttpTransport::Impl::Refuse(tcp::socket s) {
  Conn c(std::move(s));
  const std::string message =
      "too many connections (--max-connections " + std::to_string(limits.max_connections) + ")";
  co_await SendError(c, 503, message);
  co_await LingeringClose(c.stream);
}

awaitable<void> HttpTransport::Impl::SendError(Conn& c, int status, const std::string& message) {
  HttpResponse res;
  res.status = status;
  error(status, message, res);
  std::string out =
      ResponseHead(res, /*keep_alive=*/false, false, static_cast<long long>(res.body.size())) +
      res.body;
  error_code ec;
  c.stream.expires_after(Seconds(std::min(limits.write_timeout_s, 5.0)));
  co_await asio::async_write(c.stream, asio::buffer(out), asio::redirect_error(use_awaitable, ec));
}

// Stops sending and reads (and drops) what the client still sends for up to a second before
// closing: closing with unread bytes makes the kernel reset the connection, and the client could
// lose the response it has not read yet.
awaitable<void> HttpTransport::Impl::LingeringClose(beast::tcp_stream& s) {
  error_code ec;
  s.socket().shutdown(tcp::socket::shutdown_send, ec);
  s.expires_after(std::chrono::seconds(1));
  std::vector<char> scratch(16 << 10);
  while (!ec)
    co_await s.async_read_some(asio::buffer(scratch), asio::redirect_error(use_awaitable, ec));
  s.close();
}

awaitable<void> HttpTransport::Impl::Serve(std::shared_ptr<Conn> c) {
  // Room for a whole head plus the start of a body; a head that does not fit is a 431.
  beast::flat_buffer buf(limits.max_header_bytes + (64 << 10));
  error_code ec;
  bool linger = false;  // answered and closing: let the client read the answer first
  for (;;) {
    c->state = State::kIdle;
    if (draining.load()) break;
    const Clock::time_point ready = Clock::now();
    if (buf.size() == 0) {
      c->stream.expires_after(Seconds(limits.keep_alive_timeout_s));
      const size_t n = co_await c->stream.async_read_some(buf.prepare(4096),
                                                          asio::redirect_error(use_awaitable, ec));
      if (ec) break;
      buf.commit(n);
    }
    c->state = State::kHead;
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(limits.max_body_bytes);
    c->stream.expires_at(ready + Seconds(limits.header_timeout_s));
    co_await http::async_read_header(c->stream, buf, parser,
                                     asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (const int status = StatusForReadError(ec)) {
        std::string message = "malformed request: " + ec.message();
        if (status == 431)
          message = "the request head is larger than " + std::to_string(limits.max_header_bytes) +
                    " bytes";
        else if (status == 413)
          message = "the request body is larger than the limit";
        co_await SendError(*c, status, message);
        linger = true;
      }
      break;
    }

    // From here the request counts as active (the drain waits for it).
    c->state = State::kBody;
    ++active;
    // Destroyed after this iteration's request and response (declared later), so a trim when
    // the count reaches 0 finds their memory freed.
    struct Active {
      Impl& im;
      ~Active() {
        if (--im.active == 0 && im.idle_trim.Due())
          im.pool.Post([&trim = im.idle_trim] { trim.Trim(); });
      }
    } counted{*this};

    const auto& h = parser.get();
    const size_t fields = static_cast<size_t>(std::distance(h.begin(), h.end()));
    std::string bad;
    int bad_status = 400;
    if (fields > limits.max_header_count) {
      bad_status = 431;
      bad = "more than " + std::to_string(limits.max_header_count) + " header fields";
    } else if (h.count(http::field::content_length) > 1) {
      bad = "more than one Content-Length field";
    } else if (h.count(http::field::transfer_encoding) > 1 ||
               (h.count(http::field::transfer_encoding) == 1 && !parser.chunked())) {
      bad = "Transfer-Encoding must be a single field ending in chunked";
    } else if (h.version() != 10 && h.version() != 11) {
      bad_status = 505;
      bad = "only HTTP/1.0 and HTTP/1.1 are served";
    }
    if (!bad.empty()) {
      co_await SendError(*c, bad_status, bad);
      linger = true;
      break;
    }
    if (!parser.is_done()) {
      if (beast::iequals(h[http::field::expect], "100-continue")) {
        static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        c->stream.expires_after(Seconds(limits.write_timeout_s));
        co_await asio::async_write(c->stream, asio::buffer(kContinue),
                                   asio::redirect_error(use_awaitable, ec));
        if (ec) break;
      }
      // A chunked body of unknown length would grow its string by doubling, copying the whole
      // body each time (1.5-2x the limit resident at once). Reserving the limit costs address
      // space only: pages become resident as bytes arrive. (Content-Length bodies reserve their
      // exact length already.)
      if (parser.chunked()) parser.get().body().reserve(limits.max_body_bytes);
      c->stream.expires_after(Seconds(limits.body_timeout_s));
      co_await http::async_read(c->stream, buf, parser, asio::redirect_error(use_awaitable, ec));
      if (ec) {
        if (const int status = StatusForReadError(ec)) {
          const std::string message = status == 413
                                          ? std::string("the request body is larger than the limit")
                                          : "malformed request body: " + ec.message();
          co_await SendError(*c, status, message);
          linger = true;
        }
        break;
      }
    }
    c->stream.expires_never();

    c->state = State::kHandling;
    const bool http10 = parser.get().version() == 10;
    const bool keep_alive = parser.get().keep_alive();
    HttpRequest req;
    {
      auto msg = parser.release();
      req.method = std::string(msg.method_string());
      req.target = std::string(msg.target());
      req.path = req.target.substr(0, req.target.find('?'));
      for (const auto& f : msg) req.headers.emplace_back(f.name_string(), f.value());
      req.body = std::move(msg.body());
      req.connection = ClientConnection(c->stream.socket().native_handle());
    }
    const bool head_only = req.method == "HEAD";

    HttpResponse res;
    Handler work;
    try {
      work = router(req, res);
    } catch (const std::exception& e) {
      res = HttpResponse{};
      res.status = 500;
      error(500, e.what(), res);
    }
    if (work) {
      co_await OnWorker([&] {
        try {
          work(req, res);
        } catch (const std::exception& e) {
          res = HttpResponse{};
          res.status = 500;
          error(500, e.what(), res);
        } catch (...) {
          res = HttpResponse{};
          res.status = 500;
          error(500, "unknown error", res);
        }
        ReleaseUnusedStack();
      });
    }

    const bool again = keep_alive && !draining.load();
    if (res.stream && !head_only) {
      c->state = State::kStreaming;
      const bool chunked = !http10;
      std::string head =
          ResponseHead(res, again && chunked, http10, -1, limits.keep_alive_timeout_s);
      const bool ok = co_await Pump(c, *res.stream, std::move(head), chunked);
      if (!ok || !chunked) break;
    } else {
      c->state = State::kWriting;
      if (res.stream) res.stream->Cancel();
      std::string out = ResponseHead(res, again, http10, static_cast<long long>(res.body.size()),
                                     limits.keep_alive_timeout_s);
      if (!head_only) out += res.body;
      c->stream.expires_after(Seconds(limits.write_timeout_s));
      co_await asio::async_write(c->stream, asio::buffer(out),
                                 asio::redirect_error(use_awaitable, ec));
      c->stream.expires_never();
      if (ec) break;
    }
    if (!again) {
      linger = true;
      break;
    }
  }
  c->state = State::kClosing;
  if (linger) co_await LingeringClose(c->stream);
  c->stream.close();
}

awaitable<bool> HttpTransport::Impl::Pump(std::shared_ptr<Conn> c, StreamSource& src,
                                          std::string head, bool chunked) {
  std::weak_ptr<Conn> weak = c;
  auto ex = c->stream.get_executor();
  src.SetWakeup([weak, ex] {
    asio::post(ex, [weak] {
      if (auto conn = weak.lock()) {
        conn->woken = true;
        conn->wake.cancel();
      }
    });
  });
  if (aborting) c->abort_stream = true;
  const ClientConnection client(c->stream.socket().native_handle());
  std::string out = std::move(head);  // the head goes out at once, before the first token
  bool ok = true;
  error_code ec;
  for (;;) {
    c->woken = false;
    std::string data;
    bool done;
    if (c->abort_stream) {
      src.Abort(data);
      done = true;
    } else {
      done = src.Poll(data);
    }
    if (!data.empty()) out += chunked ? Chunk(data) : data;
    if (done && chunked) out += "0\r\n\r\n";
    if (!out.empty()) {
      c->stream.expires_after(Seconds(limits.write_timeout_s));
      co_await asio::async_write(c->stream, asio::buffer(out),
                                 asio::redirect_error(use_awaitable, ec));
      c->stream.expires_never();
      out.clear();
      if (ec) {
        ok = false;
        break;
      }
    }
    if (done) break;
    if (client.Closed()) {
      ok = false;
      break;
    }
    if (!c->woken && !c->abort_stream) {
      // Woken early by the source; the timeout bounds how late a vanished client is noticed.
      c->wake.expires_after(std::chrono::milliseconds(50));
      co_await c->wake.async_wait(asio::redirect_error(use_awaitable, ec));
    }
  }
  src.SetWakeup(nullptr);
  if (!ok) src.Cancel();
  co_return ok;
}

HttpTransport::HttpTransport(TransportLimits limits, Router router, ErrorResponder error)
    : impl_(std::make_unique<Impl>(limits, std::move(router), std::move(error))) {}

HttpTransport::~HttpTransport() = default;

int HttpTransport::active_requests() const {
  return impl_->active.load();
}

int HttpTransport::Listen(const std::string& host, int port) {
  Impl& im = *impl_;
  // Every connection is a descriptor: make room for max_connections of them.
  rlimit rl{};
  const rlim_t want = im.limits.max_connections + 256;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
    rl.rlim_cur = std::min(want, rl.rlim_max);
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < want) {
      im.limits.max_connections = rl.rlim_cur > 512 ? rl.rlim_cur - 256 : rl.rlim_cur / 2;
      LogWarn("open-file limit ", rl.rlim_cur, ": serving at most ", im.limits.max_connections,
              " connections");
    }
  }
  try {
    tcp::resolver resolver(im.ioc);
    const auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive);
    if (results.empty()) Fail("cannot resolve ", host);
    const tcp::endpoint ep = results.begin()->endpoint();
    im.acceptor.open(ep.protocol());
    im.acceptor.set_option(tcp::acceptor::reuse_address(true));
    im.acceptor.bind(ep);
    im.acceptor.listen(im.limits.backlog);
    return im.acceptor.local_endpoint().port();
  } catch (const boost::system::system_error& e) {
    Fail("cannot listen on ", host, ":", port, ": ", e.what());
  }
}

void HttpTransport::Run() {
  Impl& im = *impl_;
  asio::co_spawn(im.ioc, im.Accept(), [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      LogError("the server stopped accepting connections: ", x.what());
    }
  });
  im.ioc.run();
  im.pool.Join();
}

void HttpTransport::Shutdown(double drain_timeout_s, const std::function<void()>& on_deadline) {
  Impl& im = *impl_;
  const Clock::time_point deadline = Clock::now() + Seconds(drain_timeout_s);
  im.draining = true;
  // No new connections; connections between requests or still sending a head are closed.
  im.OnIo([&im] {
    error_code ec;
    im.acceptor.close(ec);
    for (auto& c : im.conns)
      if (c->state == State::kIdle || c->state == State::kHead) c->stream.close();
  });
  while (im.active.load() > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (im.active.load() > 0) {
    im.OnIo([&] {
      im.aborting = true;
      int streams = 0, requests = 0;
      for (auto& c : im.conns) {
        if (c->state == State::kStreaming) {
          ++streams;
          c->abort_stream = true;
          c->wake.cancel();
        } else if (c->state == State::kBody || c->state == State::kHandling ||
                   c->state == State::kWriting) {
          ++requests;
        }
      }
      LogWarn("drain timeout (", drain_timeout_s, " s): aborting ", streams, " streams and ",
              requests, " other requests");
      on_deadline();
    });
    // Aborted streams write their last chunks, waiting handlers answer 503.
    const Clock::time_point grace = Clock::now() + std::chrono::milliseconds(900);
    while (im.active.load() > 0 && Clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Whatever is left (clients that do not read) is cut; Run returns once the handlers are done.
  im.OnIo([&im] {
    for (auto& c : im.conns) c->stream.close();
    im.guard.reset();
  });
}

}  // namespace moeserve::server
