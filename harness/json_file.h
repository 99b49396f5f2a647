// One bounded, total reader for every JSON file assay reads (corpus entries,
// case files, baselines, triage inputs). Whatever the file holds, the result is
// a value or a one-line error "<file>: <json path>: <what is wrong>": never an
// exception, an abort, a hang or a stack overflow.
//  - regular files only: FIFOs (which block), devices (/dev/zero never ends),
//    directories and broken or looping links are refused before opening;
//  - the size is checked before reading and at most limit + 1 bytes are read;
//  - a SAX parser builds the document iteratively under a depth limit, because
//    copying or destroying a deeply nested nlohmann value recurses;
//  - numbers outside double range, invalid UTF-8 and duplicate keys are errors.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "harness/status.h"

namespace assay {

struct JsonLimits {
  size_t max_bytes = size_t{64} << 20;  ///< largest file accepted, bytes (inclusive)
  int max_depth = 256;                  ///< deepest nesting of arrays and objects accepted (inclusive)
  size_t max_values = size_t{1} << 22;  ///< most values (scalars and containers) in one document (inclusive)
};

/// Parses `text`; errors read "<where>: <json path>: <what>".
StatusOr<nlohmann::json> parse_json_text(std::string_view text, const std::string& where,
                                         const JsonLimits& limits = {});

/// Reads `path` as a regular file of at most limits.max_bytes bytes.
/// Errors: kNotFound when nothing is at `path`, kDataLoss otherwise.
StatusOr<std::string> read_file_bounded(const std::string& path, size_t max_bytes = size_t{64} << 20);

/// read_file_bounded, then parse_json_text.
StatusOr<nlohmann::json> read_json_file(const std::string& path, const JsonLimits& limits = {});

/// `s` made safe to echo on one terminal line: control characters (newlines,
/// ESC of terminal escape sequences), DEL and invalid UTF-8 become \n, \xNN;
/// longer than `max_len` bytes is cut with "...".
std::string printable(std::string_view s, size_t max_len = 200);

/// A JSON path component for a key: .name when it is an identifier, else ["..."] escaped.
std::string json_path_key(std::string_view key);

}  // namespace assay
