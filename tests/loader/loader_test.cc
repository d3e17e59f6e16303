// The loader's failure modes: each must name the file, the tensor, what was expected and found.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/check.h"
#include "loader/checkpoint.h"
#include "loader/json_config.h"

namespace moeserve::loader {
namespace {
namespace fs = std::filesystem;

struct FakeTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  size_t elem_size;
};

// Writes a safetensors file; `header_override` replaces the JSON header when non-empty and
// `truncate_by` drops bytes from the end.
void WriteSafetensors(const fs::path& path, const std::vector<FakeTensor>& tensors,
                      const std::string& header_override = "", size_t truncate_by = 0) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& t : tensors) {
    size_t n = t.elem_size;
    for (auto d : t.shape) n *= static_cast<size_t>(d);
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string h = header_override.empty() ? header.dump() : header_override;
  std::string data(offset, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  std::ofstream out(path, std::ios::binary);
  uint64_t len = h.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
  out << h;
  out.write(data.data(),
            static_cast<std::streamsize>(data.size() - std::min(truncate_by, data.size())));
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moeserve_loader_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ErrorOf(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  }

  fs::path dir_;
};

const std::vector<FakeTensor> kTensors = {
    {"a.weight", "BF16", {4, 3}, 2}, {"b.bias", "F32", {5}, 4}, {"c.ids", "I64", {2}, 8}};

TEST_F(LoaderTest, LoadsSingleFileAndTakesExactShapes) {
  WriteSafetensors(dir_ / "model.safetensors", kTensors);
  Checkpoint ckpt(dir_.string());
  EXPECT_EQ(ckpt.tensors().size(), 3u);
  StrictLoader loader(ckpt);
  const TensorInfo& a = loader.Take("a.weight", {4, 3}, {DType::kBF16});
  EXPECT_EQ(a.num_bytes, 24u);
  EXPECT_EQ(a.data[1], static_cast<uint8_t>(7));
  loader.Take("b.bias", {5}, {DType::kBF16, DType::kF32});
  loader.Ignore("test ids", [](const std::string& n) { return n == "c.ids"; });
  EXPECT_EQ(loader.Finish(), 1u);
}

TEST_F(LoaderTest, MissingTensorNamesItAndTheExpectation) {
  WriteSafetensors(dir_ / "model.safetensors", kTensors);
  Checkpoint ckpt(dir_.string());
  StrictLoader loader(ckpt);
  const std::string e = ErrorOf([&] { loader.Take("q_norm.weight", {6144}, {DType::kBF16}); });
  EXPECT_NE(e.find("missing tensor q_norm.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[6144]"), std::string::npos) << e;
}

TEST_F(LoaderTest, WrongShapeNamesFileTensorExpectedFound) {
  WriteSafetensors(dir_ / "model.safetensors", kTensors);
  Checkpoint ckpt(dir_.string());
  StrictLoader loader(ckpt);
  const std::string e = ErrorOf([&] { loader.Take("a.weight", {3, 4}, {DType::kBF16}); });
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("a.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("expected shape [3, 4], found [4, 3]"), std::string::npos) << e;
}

TEST_F(LoaderTest, WrongDtypeNamesBoth) {
  WriteSafetensors(dir_ / "model.safetensors", kTensors);
  Checkpoint ckpt(dir_.string());
  StrictLoader loader(ckpt);
  const std::string e = ErrorOf([&] { loader.Take("b.bias", {5}, {DType::kBF16}); });
  EXPECT_NE(e.find("b.bias: expected dtype BF16, found F32"), std::string::npos) << e;
}

TEST_F(LoaderTest, UnexpectedTensorIsAnError) {
  WriteSafetensors(dir_ / "model.safetensors", kTensors);
  Checkpoint ckpt(dir_.string());
  StrictLoader loader(ckpt);
  loader.Take("a.weight", {4, 3}, {DType::kBF16});
  loader.Take("b.bias", {5}, {DType::kF32});
  const std::string e = ErrorOf([&] { loader.Finish(); });
  EXPECT_NE(e.find("1 unexpected tensor"), std::string::npos) << e;
  EXPECT_NE(e.find("c.ids"), std::string::npos) << e;
}

TEST_F(LoaderTest, TruncatedFileNamesTheTensorThatRunsPastTheEnd) {
  WriteSafetensors(dir_ / "model.safetensors", kTensors, "", 3);
  const std::string e = ErrorOf([&] { Checkpoint ckpt(dir_.string()); });
  EXPECT_NE(e.find("truncated file"), std::string::npos) << e;
  EXPECT_NE(e.find("c.ids"), std::string::npos) << e;
}

TEST_F(LoaderTest, CorruptHeaders) {
  WriteSafetensors(dir_ / "model.safetensors", kTensors, "{not json");
  EXPECT_NE(ErrorOf([&] { Checkpoint c(dir_.string()); }).find("corrupt header"),
            std::string::npos);
  WriteSafetensors(dir_ / "model.safetensors", kTensors,
                   R"({"x":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})");
  EXPECT_NE(ErrorOf([&] { Checkpoint c(dir_.string()); }).find("unsupported dtype Q9"),
            std::string::npos);
  WriteSafetensors(dir_ / "model.safetensors", kTensors,
                   R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})");
  EXPECT_NE(ErrorOf([&] { Checkpoint c(dir_.string()); }).find("needs 12"), std::string::npos);
  // A header length larger than the file.
  {
    std::ofstream out(dir_ / "model.safetensors", std::ios::binary);
    const char len[8] = {char(0xff), char(0xff), 0, 0, 0, 0, 0, 0};
    out.write(len, 8);
    out << "{}";
  }
  EXPECT_NE(ErrorOf([&] { Checkpoint c(dir_.string()); }).find("exceeds the file size"),
            std::string::npos);
}

TEST_F(LoaderTest, ShardedIndex) {
  WriteSafetensors(dir_ / "model-00001-of-00002.safetensors", {kTensors[0]});
  WriteSafetensors(dir_ / "model-00002-of-00002.safetensors", {kTensors[1], kTensors[2]});
  nlohmann::json index = {{"metadata", {{"total_size", 60}}},
                          {"weight_map",
                           {{"a.weight", "model-00001-of-00002.safetensors"},
                            {"b.bias", "model-00002-of-00002.safetensors"},
                            {"c.ids", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();
  Checkpoint ckpt(dir_.string());
  EXPECT_EQ(ckpt.tensors().size(), 3u);
  EXPECT_NE(ckpt.Find("c.ids")->file.find("00002"), std::string::npos);

  index["weight_map"]["c.ids"] = "model-00001-of-00002.safetensors";
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();
  EXPECT_NE(ErrorOf([&] { Checkpoint c(dir_.string()); }).find("c.ids is mapped to model-00001"),
            std::string::npos);

  index["weight_map"]["c.ids"] = "model-00003-of-00002.safetensors";
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();
  EXPECT_NE(ErrorOf([&] { Checkpoint c(dir_.string()); }).find("does not exist"),
            std::string::npos);
}

TEST_F(LoaderTest, NoWeightsAtAll) {
  EXPECT_NE(ErrorOf([&] { Checkpoint c(dir_.string()); }).find("neither model.safetensors"),
            std::string::npos);
}

TEST_F(LoaderTest, JsonConfigErrorsNameKeyAndFile) {
  std::ofstream(dir_ / "config.json") << R"({"hidden_size": "big", "layers": 2})";
  const auto j = JsonConfig::FromFile((dir_ / "config.json").string());
  EXPECT_EQ(j.Get<int>("layers"), 2);
  EXPECT_EQ(j.GetOr<int>("absent", 7), 7);
  EXPECT_NE(ErrorOf([&] { j.Get<int>("hidden_size"); }).find("\"hidden_size\" has the wrong type"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { j.Get<int>("vocab_size"); }).find("missing required key \"vocab_size\""),
            std::string::npos);
}

}  // namespace
}  // namespace moeserve::loader
