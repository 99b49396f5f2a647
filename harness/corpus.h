// Corpus: stored failing cases, corpora/<op>/<id>.json, id = content hash of
// the case. Written atomically (temporary file in the same folder, fsync,
// rename), so concurrent writers and crashes never leave a torn entry.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/case.h"
#include "harness/spec.h"
#include "harness/status.h"

namespace assay {

inline constexpr int kEntryFormat = 1;

struct CorpusEntry {
  Case c;
  nlohmann::json found;  ///< verdict, environment, campaign provenance (free-form object)
  std::string replay;    ///< one-line command that replays the entry
  std::string path;      ///< where it was read from or written to
  bool stored_failure = false;  ///< found.verdict.passed is false: the entry records a failure
};

/// Path an entry for `c` gets under `root`: <root>/<op>/<id>.json.
std::string entry_path(const std::string& root, const Case& c);

/// spec.validate(c), made total: an exception from a validator (a parameter of
/// the wrong type read with .get<>()) is a one-line error too. `where` (the file)
/// prefixes the message.
Status validate_case(const OpSpec& spec, const Case& c, const std::string& where);

/// Writes atomically; an existing entry with the same id is kept (same case).
/// Returns the path.
StatusOr<std::string> write_entry(const std::string& root, const Case& c, const nlohmann::json& found);

/// Stores `c` (a shrunk case) in place of the entry at `old_path` (its unshrunk
/// case, stored when the failure was found; empty: none): the new entry is
/// written atomically, overwriting one of the same id, and only then is the old
/// one removed. Returns the new path.
StatusOr<std::string> replace_entry(const std::string& root, const std::string& old_path, const Case& c,
                                    const nlohmann::json& found);

/// Reads and validates one entry; errors name the file and the field.
StatusOr<CorpusEntry> read_entry(const std::string& path);

/// The checks of read_entry on a parsed document; `path` prefixes errors.
StatusOr<CorpusEntry> entry_from_json(nlohmann::json j, const std::string& path);

/// Expands files and folders (recursively, *.json) into a sorted list of entry paths.
/// Folders that cannot be listed add one line each to `problems` (if given) and
/// the walk goes on; only a named path that does not exist is an error.
StatusOr<std::vector<std::string>> list_entries(const std::vector<std::string>& paths,
                                                std::vector<std::string>* problems = nullptr);

/// Writes `text` to `path` atomically (tmp + fsync + rename + fsync of the folder).
Status write_file_atomic(const std::string& path, const std::string& text);

/// Removes temporary files left by killed writers in `root` and its direct
/// subfolders (<root>/<op>/); returns how many, appending their paths to `removed`.
int clean_stale_temps(const std::string& root, std::vector<std::string>* removed = nullptr);

}  // namespace assay
