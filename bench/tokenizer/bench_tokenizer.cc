// Single-thread encode throughput of moeserve's tokenizer.
// Usage: bench_tokenizer TOKENIZER_JSON TEXTS_JSON...   (TEXTS_JSON: a JSON array of strings)
// For each texts file prints MB/s of Encode over all strings (best of 3 passes, after a warm-up
// pass that fills the BPE cache, as a long-running server would have it).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_tokenizer TOKENIZER_JSON TEXTS_JSON...\n");
    return 2;
  }
  auto tok = moeserve::tokenizer::Tokenizer::FromFile(argv[1]);
  for (int f = 2; f < argc; ++f) {
    std::ifstream in(argv[f]);
    std::stringstream buffer;
    buffer << in.rdbuf();
    auto texts = nlohmann::json::parse(buffer.str()).get<std::vector<std::string>>();
    size_t bytes = 0;
    for (const auto& t : texts) bytes += t.size();
    double best_s = 1e30, cold_s = 0;
    size_t tokens = 0;
    for (int pass = 0; pass < 4; ++pass) {
      auto start = std::chrono::steady_clock::now();
      tokens = 0;
      for (const auto& t : texts) tokens += tok.Encode(t, false).size();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (pass == 0)
        cold_s = s;
      else
        best_s = std::min(best_s, s);
    }
    std::printf("moeserve  %-28s %8.2f MB  %9zu tokens  cold %7.2f MB/s  warm %7.2f MB/s\n",
                argv[f] + std::string(argv[f]).rfind('/') + 1, bytes / 1e6, tokens,
                bytes / 1e6 / cold_s, bytes / 1e6 / best_s);
  }
  return 0;
}
