#include "server/response_writer.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "server/api_error.h"

namespace moeserve::server {
namespace {

// Runs a generation to its end, feeding every update to the writer. Aborts the engine requests
// and returns false when the client disconnects; throws 503 when the server gives up (drain
// deadline).
bool RunToEnd(ServingContext& ctx, Generation& gen, const ClientConnection& conn,
              ResponseWriter& writer) {
  while (!gen.done()) {
    for (ChoiceUpdate& u : gen.Next(std::chrono::milliseconds(50))) writer.Absorb(u);
    if (gen.done()) break;
    if (ctx.abort_all.load()) {
      gen.AbortAll();
      throw ApiError(503, "the server is shutting down: the request was aborted",
                     "service_unavailable");
    }
    if (conn.Closed()) {
      gen.AbortAll();
      return false;
    }
  }
  return true;
}

// An SSE body pumped by the transport. At the drain deadline every unfinished choice gets a
// final "abort" update, then the writer's closing events. A client that goes away aborts the
// generation.
class GenerationStream final : public StreamSource {
 public:
  GenerationStream(std::unique_ptr<Generation> gen, std::shared_ptr<ResponseWriter> writer)
      : gen_(std::move(gen)), writer_(std::move(writer)) {}

  bool Poll(std::string& out) override {
    std::vector<ChoiceUpdate> updates = gen_->Next(std::chrono::milliseconds(0));
    if (!updates.empty()) writer_->Stream(updates, *gen_, out);
    if (!gen_->done()) return false;
    writer_->StreamEnd(*gen_, out);
    return true;
  }
  void Abort(std::string& out) override {
    if (Poll(out)) return;
    std::vector<ChoiceUpdate> last = gen_->AbortWithUpdates();
    writer_->Stream(last, *gen_, out);
    writer_->StreamEnd(*gen_, out);
  }
  void Cancel() override { gen_->AbortAll(); }
  void SetWakeup(std::function<void()> wake) override { gen_->SetWakeup(std::move(wake)); }

 private:
  std::unique_ptr<Generation> gen_;
  std::shared_ptr<ResponseWriter> writer_;
};

}  // namespace

void Respond(ServingContext& ctx, const HttpRequest& req, HttpResponse& res,
             std::unique_ptr<Generation> gen, std::shared_ptr<ResponseWriter> writer, bool stream) {
  if (stream) {
    res.content_type = "text/event-stream";
    res.SetHeader("Cache-Control", "no-cache");
    res.stream = std::make_shared<GenerationStream>(std::move(gen), std::move(writer));
    return;
  }
  if (!RunToEnd(ctx, *gen, req.connection, *writer)) {
    res.status = 499;  // the client closed; nobody reads this
    return;
  }
  res.SetContent(DumpJson(writer->Body(*gen)), "application/json");
}

std::string RandomId(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace moeserve::server
