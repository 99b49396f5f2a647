// Corpus: stored failing cases, corpora/<op>/<id>.json, id = content hash of
// the case. Written atomically (temporary file in the same folder, fsync,
// rename), so concurrent writers and crashes never leave a torn entry.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/status.h"

namespace assay {

inline constexpr int kEntryFormat = 1;

struct CorpusEntry {
  Case c;
  nlohmann::json found;  ///< verdict, environment, campaign provenance (free-form object)
  std::string replay;    ///< one-line command that replays the entry
  std::string path;      ///< where it was read from or written to
};

/// Path an entry for `c` gets under `root`: <root>/<op>/<id>.json.
std::string entry_path(const std::string& root, const Case& c);

/// Writes atomically; an existing entry with the same id is kept (same case).
/// Returns the path.
StatusOr<std::string> write_entry(const std::string& root, const Case& c, const nlohmann::json& found);

/// Reads and validates one entry; errors name the file and the field.
StatusOr<CorpusEntry> read_entry(const std::string& path);

/// Expands files and folders (recursively, *.json) into a sorted list of entry paths.
StatusOr<std::vector<std::string>> list_entries(const std::vector<std::string>& paths);

/// Writes `text` to `path` atomically (tmp + fsync + rename).
Status write_file_atomic(const std::string& path, const std::string& text);

}  // namespace assay
