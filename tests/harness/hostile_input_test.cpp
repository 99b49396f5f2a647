// Hostile files: every reader (corpus entries, case files, baselines) gives a
// value or one line naming the file, without aborting, hanging, overflowing the
// stack or reading without bound. tests/harness/hostile_cli_test.sh runs the
// same classes through the real `assay replay` and `assay triage`.
#include "harness/json_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>

#include <fmt/format.h>

#include "harness/baseline.h"
#include "harness/corpus.h"
#include "harness/executor.h"
#include "harness/spec.h"
#include "properties/gemm.h"

namespace assay {
namespace {
namespace fs = std::filesystem;

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("assay_hostile_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_ / "locked", fs::perms::owner_all, ec);
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  // A valid corpus entry's JSON, with `edit` applied.
  nlohmann::json entry() const {
    Case c = make_gemm_case(3, 4, 5, false, true, 1, 0, 1, 0, 2, 0, 0, 0, ValueClass::kSmallInt, 9);
    c.variant = "tiled";
    return {{"assay_entry", 1},
            {"case", c.to_json()},
            {"found", {{"verdict", {{"variant", "tiled"}, {"passed", false}, {"failures", nlohmann::json::array()}}}}},
            {"replay", "assay replay x"}};
  }
  // The one-line error every hostile file must give.
  static void expect_one_line(const Status& s, const std::string& file, const std::string& needle) {
    ASSERT_FALSE(s.ok()) << file;
    const std::string& m = s.message();
    EXPECT_NE(m.find(file), std::string::npos) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.find('\x1b'), std::string::npos) << "a raw escape character in: " << m;
    EXPECT_LT(m.size(), 2000u) << m;
  }
  fs::path dir_;
};

// Bounded in time too: a reader that blocks (a FIFO) fails the test instead of hanging it.
template <typename F>
auto within(double seconds, F f) {
  auto fut = std::async(std::launch::async, f);
  if (fut.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << "reader did not return within " << seconds << " s";
    std::_Exit(1);  // a blocked thread cannot be joined
  }
  return fut.get();
}

TEST_F(HostileInputTest, OutOfRangeNumbersAreOneLineErrors) {
  const std::string bare = write("bare.json", "9e372");
  expect_one_line(read_entry(bare).status(), bare, "number out of range");
  auto e = entry();
  std::string text = e.dump();
  text.replace(text.find("\"assay_entry\":1"), 15, "\"assay_entry\":1e400");
  const std::string in_entry = write("in_entry.json", text);
  expect_one_line(read_entry(in_entry).status(), in_entry, "$.assay_entry: number out of range");
  const std::string neg = write("neg.json", R"({"a": [1, -2e999]})");
  expect_one_line(read_json_file(neg).status(), neg, "$.a[1]: number out of range");
  write("baselines/gemm.json", R"({"op": "gemm", "ratios": {"tiled": {"fp32/normal": 1e309}}})");
  expect_one_line(load_baseline(dir_.string(), "gemm").status(), "gemm.json",
                  "$.ratios.tiled[\"fp32/normal\"]: number out of range");
}

TEST_F(HostileInputTest, DeepNestingIsRefusedWithoutRecursion) {
  for (const char* open : {"[", "{\"a\":"}) {
    std::string deep;
    for (int i = 0; i < 200000; ++i) deep += open;
    const std::string p = write(std::string("deep") + (open[0] == '[' ? "a" : "o") + ".json", deep);
    expect_one_line(read_entry(p).status(), p, "nested deeper than 256 levels");
  }
  std::string ok_depth = std::string(200, '[') + std::string(200, ']');
  EXPECT_TRUE(parse_json_text(ok_depth, "x").ok());
}

TEST_F(HostileInputTest, SizeIsCheckedBeforeReading) {
  const std::string big = (dir_ / "big.json").string();
  const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, (off_t{2} << 30)), 0);  // 2 GiB, sparse: costs nothing to make
  ::close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  expect_one_line(read_entry(big).status(), big, "larger than the 64 MiB limit");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0)
      << "the file was read before its size was checked";
  expect_one_line(within(5, [] { return read_entry("/dev/zero"); }).status(), "/dev/zero", "character device");
  auto small = read_file_bounded(write("small.json", std::string(100, ' ')), 10);
  expect_one_line(small.status(), "small.json", "larger than");
}

TEST_F(HostileInputTest, FifosDevicesAndFoldersAreRefusedWithoutBlocking) {
  const std::string fifo = (dir_ / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  expect_one_line(within(5, [&] { return read_entry(fifo); }).status(), fifo, "a FIFO");
  auto none = load_baseline(dir_.string(), "x");  // no baseline at all is fine, not an error
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->has_value());
  fs::create_directories(dir_ / "folder.json");
  expect_one_line(read_entry((dir_ / "folder.json").string()).status(), "folder.json", "a directory");
  expect_one_line(read_entry("/dev/null").status(), "/dev/null", "character device");
  // A FIFO where a baseline should be.
  fs::create_directories(dir_ / "baselines");
  const std::string bfifo = (dir_ / "baselines" / "gemm.json").string();
  ASSERT_EQ(::mkfifo(bfifo.c_str(), 0644), 0);
  expect_one_line(within(5, [&] { return load_baseline(dir_.string(), "gemm"); }).status(), bfifo, "a FIFO");
}

TEST_F(HostileInputTest, LinksThatCannotBeFollowedAreOneLineAndTheWalkGoesOn) {
  fs::create_directories(dir_ / "corpus" / "gemm");
  const auto good = write("corpus/gemm/good.json", entry().dump());
  fs::create_symlink("loop_b.json", dir_ / "corpus" / "gemm" / "loop_a.json");
  fs::create_symlink("loop_a.json", dir_ / "corpus" / "gemm" / "loop_b.json");
  fs::create_symlink("nowhere.json", dir_ / "corpus" / "gemm" / "broken.json");
  fs::create_directory_symlink("..", dir_ / "corpus" / "gemm" / "up");  // a folder cycle
  fs::create_symlink("dirloop", dir_ / "corpus" / "dirloop");          // a link to itself, no .json
  std::vector<std::string> problems;
  auto files = list_entries({(dir_ / "corpus").string()}, &problems);
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_EQ(files->size(), 4u);  // good, loop_a, loop_b, broken: each read on its own
  int bad = 0;
  for (const auto& f : *files) {
    auto e = read_entry(f);
    if (f == good) {
      EXPECT_TRUE(e.ok()) << e.status().message();
      continue;
    }
    ++bad;
    expect_one_line(e.status(), f, "symbolic link that cannot be followed");
  }
  EXPECT_EQ(bad, 3);
  // A folder that cannot be listed: one problem line, the rest still listed.
  if (::geteuid() != 0) {
    fs::create_directories(dir_ / "locked");
    fs::create_directories(dir_ / "corpus2" / "gemm");
    write("corpus2/gemm/good.json", entry().dump());
    fs::create_directory_symlink(dir_ / "locked", dir_ / "corpus2" / "locked_link");
    fs::create_directories(dir_ / "corpus2" / "sub");
    fs::permissions(dir_ / "corpus2" / "sub", fs::perms::none);
    std::vector<std::string> p2;
    auto f2 = list_entries({(dir_ / "corpus2").string()}, &p2);
    fs::permissions(dir_ / "corpus2" / "sub", fs::perms::owner_all);
    ASSERT_TRUE(f2.ok());
    EXPECT_EQ(f2->size(), 1u);
    ASSERT_EQ(p2.size(), 1u);
    EXPECT_NE(p2[0].find("cannot list"), std::string::npos) << p2[0];
  }
}

TEST_F(HostileInputTest, WronglyTypedFieldsAreOneLineErrors) {
  struct Mutation {
    const char* name;
    std::function<void(nlohmann::json&)> edit;
    const char* needle;
  };
  const std::vector<Mutation> cases = {
      {"verdict_string", [](auto& j) { j["found"]["verdict"] = "fail"; }, "$.found.verdict: expected an object"},
      {"verdict_array", [](auto& j) { j["found"]["verdict"] = nlohmann::json::array(); }, "$.found.verdict"},
      {"passed_string", [](auto& j) { j["found"]["verdict"]["passed"] = "no"; }, "$.found.verdict.passed"},
      {"failures_obj", [](auto& j) { j["found"]["verdict"]["failures"] = 3; }, "$.found.verdict.failures"},
      {"found_number", [](auto& j) { j["found"] = 7; }, "$.found: expected an object"},
      {"replay_number", [](auto& j) { j["replay"] = 7; }, "$.replay: expected a string"},
      {"format_string", [](auto& j) { j["assay_entry"] = "1"; }, "$.assay_entry"},
      {"format_huge", [](auto& j) { j["assay_entry"] = 18446744073709551615ull; }, "newer than this assay reads"},
      {"format_negative", [](auto& j) { j["assay_entry"] = -3; }, "$.assay_entry"},
      {"params_array", [](auto& j) { j["case"]["params"]["m"] = nlohmann::json::array({1}); },
       "$.params.m: expected a number, boolean or string"},
      {"params_object", [](auto& j) { j["case"]["params"]["x"] = nlohmann::json::object(); }, "$.params.x"},
      {"params_key", [](auto& j) { j["case"]["params"]["a\nb"] = 1; }, "parameter names"},
      {"shape_float", [](auto& j) { j["case"]["tensors"][0]["shape"][0] = 2.5; }, "shape[0]: expected an integer"},
      {"shape_huge", [](auto& j) { j["case"]["tensors"][0]["shape"][0] = 18446744073709551615ull; }, "out of range"},
      {"dtype_escape", [](auto& j) { j["case"]["tensors"][0]["dtype"] = "\x1b[31m"; }, "unknown dtype"},
      {"tensors_null", [](auto& j) { j["case"]["tensors"] = nullptr; }, "$.tensors: expected an array"},
      {"seed_number", [](auto& j) { j["case"]["tensors"][0]["values"]["seed"] = 5; }, "seed: expected a string"},
      {"case_string", [](auto& j) { j["case"] = "x"; }, "expected an object"},
  };
  for (const auto& m : cases) {
    nlohmann::json j = entry();
    m.edit(j);
    const std::string p = write(std::string(m.name) + ".json", j.dump());
    expect_one_line(read_entry(p).status(), p, m.needle);
  }
}

TEST_F(HostileInputTest, WronglyTypedOpParamsAreCleanErrors) {
  const OpSpec* spec = find_spec("gemm_batched");
  ASSERT_NE(spec, nullptr);
  Case c;
  c.op = "gemm_batched";
  c.params = {{"m", 2}, {"n", 2}, {"k", 2}, {"batch", 1}, {"pad_in", 0}, {"alpha", 1.0}, {"beta", 0.0},
              {"trans_a", 1}};
  expect_one_line(validate_case(*spec, c, "f.json"), "f.json", "trans_a");
  // Every op: a generated case with each parameter in turn given every other
  // scalar type, and with its tensors taken away, is ok or a one-line error
  // naming the file; never an exception or a crash.
  for (const OpSpec* op : all_specs()) {
    const Case base = generate_case(*op, GenPlan{}, 7);
    ASSERT_TRUE(validate_case(*op, base, "f.json").ok()) << op->name() << ": " << base.summary();
    for (const auto& [key, value] : base.params.items()) {
      for (const nlohmann::json& bad : {nlohmann::json(true), nlohmann::json("x"), nlohmann::json(-1),
                                        nlohmann::json(2.5), nlohmann::json(1e300),
                                        nlohmann::json(18446744073709551615ull)}) {
        Case c2 = base;
        c2.params[key] = bad;
        const Status st = validate_case(*op, c2, "f.json");
        if (!st.ok()) expect_one_line(st, "f.json", "");
      }
    }
    Case empty = base;
    empty.tensors.clear();
    expect_one_line(validate_case(*op, empty, "f.json"), "f.json", "");
  }
}

TEST_F(HostileInputTest, MalformedBaselinesAreOneLineErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([1, 2])", "$: expected an object"},
      {R"({"ratios": 3})", "$.ratios: missing or not an object"},
      {R"({"ratios": {"tiled": 3}})", "$.ratios.tiled: expected an object"},
      {R"({"ratios": {"tiled": {"k": "x"}}})", "$.ratios.tiled.k: expected a number"},
      {R"({"ratios": {"tiled": {"k": -1}}})", "a ratio must be 0 or more"},
      {R"({"op": 5, "ratios": {}})", "$.op: expected a string"},
      {R"({"ratios": {}, "accepted": []})", "$.accepted: expected an object"},
      {R"({"ratios": {}, "accepted": {"cases": "many"}})", "$.accepted.cases"},
      {R"({"ratios": {}, "accepted": {"seed": -5}})", "$.accepted.seed"},
      {R"({"ratios": {}, "ratios": {}})", "duplicate key"},
      {R"({"ratios": {"\u001b[2J": 1}})", "x1b[2J"},  // a key holding an escape character
  };
  for (const auto& [text, needle] : cases) {
    write("baselines/gemm.json", text);
    expect_one_line(load_baseline(dir_.string(), "gemm").status(), "gemm.json", needle);
  }
  write("baselines/gemm.json", R"({"ratios": {"tiled": {"fp32/normal": 1.5}}, "accepted": {"cases": 10}})");
  auto ok = load_baseline(dir_.string(), "gemm");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_DOUBLE_EQ((*ok)->ratios["tiled"]["fp32/normal"], 1.5);
}

TEST_F(HostileInputTest, SyntaxAndEncodingErrorsAreOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"{\"a\": 1} trailing", "not valid JSON"},
      {std::string("{\"a\": \"\0\"}", 10), "not valid JSON"},
      {"{\"a\": \"\xff\xfe\"}", "not valid JSON"},
      {"{\"a\": \"\\ud800\"}", "not valid JSON"},
      {"\xef\xbb\xbf{}", "$.assay_entry"},  // a BOM is skipped by the parser; then it is simply not an entry
      {"{\"a\": 1, \"a\": 2}", "$.a: duplicate key"},
      {"[1,2,3]", "$: expected an object"},
      {"{\"a\":\n\n\n 01}", "not valid JSON"},
      {"NaN", "not valid JSON"},
      {"{\"\x1b]0;pwned\x07\": [}", "not valid JSON"},  // no raw ESC in the message: expect_one_line
  };
  int i = 0;
  for (const auto& [text, needle] : cases) {
    const std::string p = write("syntax" + std::to_string(i++) + ".json", text);
    expect_one_line(read_entry(p).status(), p, needle);
  }
}

TEST_F(HostileInputTest, PrintableEscapesControlsAndKeepsUtf8) {
  EXPECT_EQ(printable("a\nb\r\t"), "a\\nb\\r\\t");
  EXPECT_EQ(printable("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(printable("\xc2\x9b" "2J"), "\\xc2\\x9b2J");  // C1 CSI
  EXPECT_EQ(printable("\xe2\x82\xac"), "\xe2\x82\xac");    // the euro sign passes
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");           // a cut sequence does not
  EXPECT_EQ(printable(std::string(300, 'x'), 10), std::string(10, 'x') + "...");
}

TEST_F(HostileInputTest, VerdictFromJsonIsTotal) {
  for (const auto& j : {nlohmann::json(3), nlohmann::json("x"), nlohmann::json::array(),
                        nlohmann::json({{"failures", 3}}), nlohmann::json({{"failures", {1, "x", nullptr}}}),
                        nlohmann::json({{"failures", {{{"kind", 3}, {"count", "x"}}}}, {"metrics", 3}}),
                        nlohmann::json({{"metrics", {{"max_ratio", "x"}, {"exact_tier", 3}, {"key", 4}}}})}) {
    EXPECT_NO_THROW(static_cast<void>(Verdict::from_json(j))) << j.dump();
  }
  EXPECT_FALSE(Verdict::from_json(nlohmann::json(3)).passed());  // unreadable is never a pass
  Verdict v;
  v.variant = "x";
  v.failures.push_back({FailureKind::kContext, "", 0, -1, "gpu gone"});
  EXPECT_EQ(Verdict::from_json(v.to_json()).failures.at(0).kind, FailureKind::kContext);
}

TEST_F(HostileInputTest, StaleTempFilesOfDeadWritersAreCleaned) {
  fs::create_directories(dir_ / "gemm");
  // pid 2^22 + 1 is above the kernel's pid_max limit: no such process.
  write("gemm/.abc.json.tmp.4194305.0000beef", "{");
  const std::string live = fmt::format("gemm/.abc.json.tmp.{}.0000beef", ::getpid());
  write(live, "{");
  write("gemm/keep.json", "{}");
  std::vector<std::string> removed;
  EXPECT_EQ(clean_stale_temps(dir_.string(), &removed), 1);
  EXPECT_FALSE(fs::exists(dir_ / "gemm/.abc.json.tmp.4194305.0000beef"));
  EXPECT_TRUE(fs::exists(dir_ / live)) << "a live writer's file was removed";
  EXPECT_TRUE(fs::exists(dir_ / "gemm/keep.json"));
}

TEST_F(HostileInputTest, ReplaceEntryKeepsTheFailureAtEveryStep) {
  Case big = make_gemm_case(5, 6, 7, false, false, 1, 0, 1, 0, 2, 0, 0, 0, ValueClass::kSmallInt, 3);
  big.variant = "tiled";
  Case small = make_gemm_case(1, 1, 1, false, false, 1, 0, 1, 0, 2, 0, 0, 0, ValueClass::kSmallInt, 3);
  small.variant = "tiled";
  auto first = replace_entry(dir_.string(), "", big, {{"shrink", {{"state", "pending"}}}});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(fs::exists(*first));
  auto second = replace_entry(dir_.string(), *first, small, {{"shrink", {{"state", "done"}}}});
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(fs::exists(*second));
  EXPECT_FALSE(fs::exists(*first)) << "the unshrunk entry should be replaced";
  // Same id (nothing shrank): the entry is rewritten with the new provenance.
  auto third = replace_entry(dir_.string(), *second, small, {{"shrink", {{"state", "limit"}}}});
  ASSERT_TRUE(third.ok());
  auto e = read_entry(*third);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->found["shrink"]["state"], "limit");
}

}  // namespace
}  // namespace assay
