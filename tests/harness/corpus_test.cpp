// Corpus: atomic, content-addressed entries; round trip; concurrent writers;
// every bad file gives one line naming the file and field.
#include "harness/corpus.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "properties/gemm.h"

namespace assay {
namespace {
namespace fs = std::filesystem;

class CorpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("assay_corpus_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write_raw(const std::string& name, const std::string& text) {
    fs::create_directories(dir_);
    std::ofstream(dir_ / name) << text;
  }
  fs::path dir_;
};

Case corpus_sample(uint64_t seed = 9) {
  Case c = make_gemm_case(3, 4, 5, false, true, 1, 0, 1, 0, 2, 0, 0, 0, ValueClass::kSmallInt, seed);
  c.variant = "tiled";
  return c;
}

TEST_F(CorpusTest, RoundTrip) {
  const Case c = corpus_sample();
  auto path = write_entry(dir_.string(), c, {{"note", "x"}});
  ASSERT_TRUE(path.ok()) << path.status().to_string();
  EXPECT_EQ(*path, (dir_ / "gemm" / (c.id() + ".json")).string());
  auto e = read_entry(*path);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->c.to_json(), c.to_json());
  EXPECT_EQ(e->found["note"], "x");
  EXPECT_EQ(e->replay, "assay replay " + *path);
}

TEST_F(CorpusTest, ConcurrentWritersLeaveWholeEntries) {
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) ASSERT_TRUE(write_entry(dir_.string(), corpus_sample(i % 10), {{"writer", t}}).ok());
    });
  for (auto& t : ts) t.join();
  auto files = list_entries({dir_.string()});
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 10u);  // content-addressed: 10 distinct cases
  for (const auto& f : *files) EXPECT_TRUE(read_entry(f).ok()) << f;
  for (const auto& p : fs::recursive_directory_iterator(dir_))
    EXPECT_EQ(p.path().filename().string().find(".tmp"), std::string::npos) << "temporary file left behind";
}

TEST_F(CorpusTest, BadFilesGiveOneLineErrorsNamingFileAndField) {
  write_raw("truncated.json", R"({"assay_entry": 1, "case": {"format": 1, "op": "gemm", "tens)");
  write_raw("notjson.json", "hello");
  write_raw("newer.json", R"({"assay_entry": 7, "case": {}})");
  write_raw("wrongtype.json", R"({"assay_entry": 1, "case": {"format": 1, "op": "gemm", "tensors": "x"}})");
  write_raw("noentry.json", R"({"case": {}})");
  const std::vector<std::pair<std::string, std::string>> expect = {
      {"truncated.json", "not valid JSON"},
      {"notjson.json", "not valid JSON"},
      {"newer.json", "newer than this assay reads"},
      {"wrongtype.json", "$.tensors: expected an array"},
      {"noentry.json", "$.assay_entry"},
  };
  for (const auto& [name, needle] : expect) {
    auto e = read_entry((dir_ / name).string());
    ASSERT_FALSE(e.ok()) << name;
    const std::string msg = e.status().message();
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  EXPECT_FALSE(read_entry((dir_ / "missing.json").string()).ok());
}

TEST_F(CorpusTest, ListEntriesExpandsFoldersAndRejectsMissingPaths) {
  ASSERT_TRUE(write_entry(dir_.string(), corpus_sample(1), {}).ok());
  ASSERT_TRUE(write_entry(dir_.string(), corpus_sample(2), {}).ok());
  auto files = list_entries({dir_.string()});
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 2u);
  EXPECT_FALSE(list_entries({(dir_ / "nope").string()}).ok());
}

}  // namespace
}  // namespace assay
