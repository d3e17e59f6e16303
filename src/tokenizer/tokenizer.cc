#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "core/check.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoders.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/unicode.h"

namespace moeserve::tokenizer {
namespace {

nlohmann::json ReadJson(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("tokenizer: cannot open ", what, " '", path, "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::exception& e) {
    Fail("tokenizer: ", what, " '", path, "' is not valid JSON: ", e.what());
  }
}

// bos_token / eos_token are either a string or an AddedToken object {"content": ...}.
std::optional<std::string> ConfigTokenString(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  Fail("tokenizer_config.json: '", key, "' must be a string or an object with 'content'");
}

bool JsonBool(const nlohmann::json& obj, const char* key, bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) Fail("tokenizer added_tokens: '", key, "' must be a boolean");
  return it->get<bool>();
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::FromFile(const std::string& tokenizer_json_path,
                              const std::string& tokenizer_config_path) {
  nlohmann::json tok = ReadJson(tokenizer_json_path, "tokenizer.json");
  nlohmann::json config;
  if (!tokenizer_config_path.empty()) {
    config = ReadJson(tokenizer_config_path, "tokenizer_config.json");
  }
  return FromJson(tok, config);
}

Tokenizer Tokenizer::FromModelDir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path json = fs::path(dir) / "tokenizer.json";
  fs::path config = fs::path(dir) / "tokenizer_config.json";
  if (!fs::exists(json)) Fail("tokenizer: no tokenizer.json in '", dir, "'");
  return FromFile(json.string(), fs::exists(config) ? config.string() : "");
}

Tokenizer Tokenizer::FromJson(const nlohmann::json& j, const nlohmann::json& config) {
  if (!j.is_object()) Fail("tokenizer.json: top level must be an object");
  Tokenizer t;
  const auto& model = j.contains("model") ? j["model"] : nlohmann::json();
  if (!model.is_object()) Fail("tokenizer.json: missing 'model'");
  std::string model_type = model.value("type", std::string("BPE"));
  if (model_type != "BPE") Fail("tokenizer: unsupported model type '", model_type, "'");
  t.model_ = std::make_unique<BpeModel>(model);
  t.normalizer_ = MakeNormalizer(j.value("normalizer", nlohmann::json()));
  t.pre_tokenizer_ = MakePreTokenizer(j.value("pre_tokenizer", nlohmann::json()));
  t.post_processor_ = MakePostProcessor(j.value("post_processor", nlohmann::json()));
  t.decoder_ = MakeDecoder(j.value("decoder", nlohmann::json()));
  for (const char* unsupported : {"truncation", "padding"}) {
    if (j.contains(unsupported) && !j[unsupported].is_null()) {
      Fail("tokenizer: '", unsupported, "' is not supported (set it to null)");
    }
  }

  // Added tokens. An id already given by the model vocab wins over the declared one, as in the
  // reference's AddedVocabulary.
  t.added_tokens_ = std::make_unique<std::vector<AddedToken>>();
  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  std::unordered_set<std::string> special_contents;
  int64_t max_added_id = -1;
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) Fail("tokenizer added_tokens: must be an array");
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string()) {
        Fail("tokenizer added_tokens: each entry needs a string 'content'");
      }
      AddedToken tok;
      tok.content = a["content"].get<std::string>();
      if (tok.content.empty()) continue;  // the reference ignores empty tokens
      tok.special = JsonBool(a, "special", false);
      tok.single_word = JsonBool(a, "single_word", false);
      tok.lstrip = JsonBool(a, "lstrip", false);
      tok.rstrip = JsonBool(a, "rstrip", false);
      tok.normalized = JsonBool(a, "normalized", !tok.special);
      if (auto model_id = t.model_->TokenToId(tok.content)) {
        tok.id = *model_id;
      } else if (a.contains("id") && a["id"].is_number_integer() && a["id"].get<int64_t>() >= 0 &&
                 a["id"].get<int64_t>() < (int64_t(1) << 31) - 1) {
        tok.id = a["id"].get<int32_t>();
      } else {
        Fail("tokenizer added_tokens: token '", tok.content, "' has no valid id");
      }
      max_added_id = std::max<int64_t>(max_added_id, tok.id);
      if (tok.special) special_contents.insert(tok.content);
      t.added_by_id_[tok.id] = t.added_tokens_->size();
      t.added_tokens_->push_back(tok);
    }
  }
  // The matchers list special tokens first, then the others (the reference's order).
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& tok : *t.added_tokens_) {
      if (tok.special != (pass == 0)) continue;
      if (tok.normalized) {
        std::string pattern = tok.content;
        if (t.normalizer_) t.normalizer_->Normalize(pattern);
        normalized.push_back(tok);
        normalized_patterns.push_back(pattern);
      } else {
        raw.push_back(tok);
        raw_patterns.push_back(tok.content);
      }
    }
  }
  t.raw_matcher_ = std::make_unique<AddedTokenMatcher>(std::move(raw), std::move(raw_patterns));
  t.normalized_matcher_ =
      std::make_unique<AddedTokenMatcher>(std::move(normalized), std::move(normalized_patterns));

  t.id_limit_ = std::max<size_t>(t.model_->IdLimit(), size_t(max_added_id + 1));
  t.special_.assign(t.id_limit_, false);
  for (const auto& content : special_contents) {
    for (const auto& tok : *t.added_tokens_) {
      if (tok.content == content) t.special_[size_t(tok.id)] = true;
    }
  }
  for (size_t id = 0; id < t.id_limit_; ++id) {
    const std::string* s = t.DecodeToken(int32_t(id));
    if (s && special_contents.count(*s)) t.special_[id] = true;
  }
  if (t.decoder_ && t.decoder_->IsByteLevel()) {
    t.byte_level_bytes_.resize(t.id_limit_);
    for (size_t id = 0; id < t.id_limit_; ++id) {
      const std::string* s = t.DecodeToken(int32_t(id));
      if (s) t.byte_level_bytes_[id] = ByteLevelTokenBytes(*s);
    }
  }

  if (!config.is_null()) {
    if (!config.is_object()) Fail("tokenizer_config.json: top level must be an object");
    t.config_ = config;
    auto resolve = [&](const char* key) -> std::optional<int32_t> {
      auto s = ConfigTokenString(config, key);
      if (!s) return std::nullopt;
      auto id = t.TokenToId(*s);
      if (!id) Fail("tokenizer_config.json: ", key, " '", *s, "' is not a token");
      return id;
    };
    t.bos_id_ = resolve("bos_token");
    t.eos_id_ = resolve("eos_token");
    // transformers rebuilds the post-processor from these flags when the config sets them.
    if (config.contains("add_bos_token") || config.contains("add_eos_token")) {
      bool add_bos = config.value("add_bos_token", false);
      bool add_eos = config.value("add_eos_token", false);
      if (add_bos && !t.bos_id_) Fail("tokenizer_config.json: add_bos_token without bos_token");
      if (add_eos && !t.eos_id_) Fail("tokenizer_config.json: add_eos_token without eos_token");
      t.post_processor_ = MakeBosEosProcessor(add_bos ? t.bos_id_ : std::nullopt,
                                              add_eos ? t.eos_id_ : std::nullopt);
    }
  }
  return t;
}

void Tokenizer::PreTokenizeAndModel(std::string_view text, bool at_input_start,
                                    std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  thread_local Pieces pieces;
  pieces.arena.assign(text);
  pieces.spans.assign(1, Pieces::Span{0, text.size()});
  pieces.origin = at_input_start ? 0 : std::string::npos;
  pieces.byte_level_pending = false;
  if (pre_tokenizer_) pre_tokenizer_->PreTokenize(pieces, true);
  for (const auto& span : pieces.spans) {
    model_->Tokenize(pieces.View(span), pieces.byte_level_pending, ids);
  }
}

void Tokenizer::EncodeSegment(std::string_view text, bool at_input_start,
                              std::vector<int32_t>& ids) const {
  std::string normalized(text);
  if (normalizer_) normalizer_->Normalize(normalized);
  if (normalized_matcher_->Empty()) {
    PreTokenizeAndModel(normalized, at_input_start, ids);
    return;
  }
  std::vector<AddedTokenMatcher::Piece> splits;
  normalized_matcher_->Split(normalized, splits);
  for (const auto& s : splits) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else if (s.end > s.begin) {
      PreTokenizeAndModel(std::string_view(normalized).substr(s.begin, s.end - s.begin),
                          at_input_start && s.begin == 0, ids);
    }
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!IsValidUtf8(text)) {
    repaired = Utf8Lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (raw_matcher_->Empty()) {
    EncodeSegment(text, true, ids);
  } else {
    std::vector<AddedTokenMatcher::Piece> splits;
    raw_matcher_->Split(text, splits);
    for (const auto& s : splits) {
      if (s.id >= 0) {
        ids.push_back(s.id);
      } else if (s.end > s.begin) {
        EncodeSegment(text.substr(s.begin, s.end - s.begin), s.begin == 0, ids);
      }
    }
  }
  if (add_special_tokens && post_processor_) post_processor_->Process(ids);
  return ids;
}

const std::string* Tokenizer::DecodeToken(int32_t id) const {
  auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return &(*added_tokens_)[it->second].content;
  return model_->IdToToken(id);
}

bool Tokenizer::SkipOnDecode(int32_t id, bool skip_special_tokens) const {
  if (id < 0 || size_t(id) >= id_limit_) return true;
  return skip_special_tokens && special_[size_t(id)];
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_limit_) return "";
  if (!byte_level_bytes_.empty()) return byte_level_bytes_[size_t(id)];
  const int32_t one[] = {id};
  return Decode(one, /*skip_special_tokens=*/false);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  if (!byte_level_bytes_.empty()) {
    std::string bytes;
    for (int32_t id : ids) {
      if (!SkipOnDecode(id, skip_special_tokens)) bytes += byte_level_bytes_[size_t(id)];
    }
    return Utf8Lossy(bytes);
  }
  std::vector<std::string> tokens;
  for (int32_t id : ids) {
    if (SkipOnDecode(id, skip_special_tokens)) continue;
    if (const std::string* s = DecodeToken(id)) tokens.push_back(*s);
  }
  std::string out;
  if (decoder_) {
    decoder_->DecodeChain(tokens);
    for (const auto& s : tokens) out += s;
    return out;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out += ' ';
    out += tokens[i];
  }
  return out;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  for (const auto& tok : *added_tokens_) {
    if (tok.content == token) return tok.id;
  }
  return model_->TokenToId(token);
}

std::string Tokenizer::IdToToken(int32_t id) const {
  const std::string* s = DecodeToken(id);
  return s ? *s : std::string();
}

size_t Tokenizer::VocabSize() const {
  return id_limit_;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && size_t(id) < id_limit_ && special_[size_t(id)];
}

}  // namespace moeserve::tokenizer
