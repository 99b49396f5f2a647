// libFuzzer target for the file readers: every byte string given to the
// bounded JSON parser, then to the corpus-entry, case, baseline and verdict
// readers, must give a value or a one-line printable error; never a crash, a
// sanitizer report, an uncaught exception or a stack overflow. Built and run by
// ci/fuzz-readers.sh (clang, -fsanitize=fuzzer,address,undefined); seeds in tests/fuzz/corpus.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "harness/baseline.h"
#include "harness/case.h"
#include "harness/corpus.h"
#include "harness/json_file.h"
#include "harness/verdict.h"

namespace {

void check_message(const assay::Status& s) {
  if (s.ok()) return;
  const std::string& m = s.message();
  // One line, printable: no newline, no escape character reaches a terminal.
  if (m.find('\n') != std::string::npos || m.find('\x1b') != std::string::npos || m.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = assay::parse_json_text(text, "fuzz.json");
  check_message(j.status());
  if (!j.ok()) return 0;
  const nlohmann::json copy = *j;  // deep copies and dumps recurse: the depth limit must cover them
  static_cast<void>(copy.dump());
  auto e = assay::entry_from_json(copy, "fuzz.json");
  check_message(e.status());
  if (e.ok()) {
    static_cast<void>(e->c.to_json().dump());
    static_cast<void>(e->c.id());
    static_cast<void>(e->c.summary());
  }
  auto c = assay::Case::from_json(*j, "fuzz.json");
  check_message(c.status());
  if (c.ok()) static_cast<void>(c->summary());
  auto b = assay::baseline_from_json(*j, "fuzz.json", "gemm");
  check_message(b.status());
  const assay::Verdict v = assay::Verdict::from_json(*j);
  static_cast<void>(v.summary());
  static_cast<void>(v.to_json().dump());
  if (j->is_object())
    if (auto it = j->find("verdict"); it != j->end()) static_cast<void>(assay::Verdict::from_json(*it).summary());
  static_cast<void>(assay::printable(text));
  return 0;
}
