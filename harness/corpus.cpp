#include "harness/corpus.h"
#include "harness/spec.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <chrono>
#include <cstdlib>
#include <random>

#include <fmt/format.h>

#include "harness/json_file.h"

namespace assay {
namespace fs = std::filesystem;

namespace {

// After a rename the new name lives in the folder's data: without an fsync of
// the folder a power cut can bring the old name (or none) back.
void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::string entry_path(const std::string& root, const Case& c) {
  return (fs::path(root) / c.op / (c.id() + ".json")).string();
}

Status write_file_atomic(const std::string& path, const std::string& text) {
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      return internal_error(fmt::format("cannot create folder {}: {}", target.parent_path().string(), ec.message()));
  }
  std::random_device rd;
  const std::string tmp =
      (target.parent_path() / fmt::format(".{}.tmp.{}.{:08x}", target.filename().string(), getpid(), rd())).string();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return internal_error(fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return internal_error(fmt::format("cannot write {}: {}", tmp, std::strerror(err)));
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return internal_error(fmt::format("cannot flush {}: {}", tmp, std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return internal_error(fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(err)));
  }
  fsync_dir(target.parent_path());
  return ok_status();
}

int clean_stale_temps(const std::string& root, std::vector<std::string>* removed) {
  // Temporary names are .<name>.tmp.<pid>.<random>: a writer that was killed
  // leaves one behind. Removed when that process is gone, or (a reused pid)
  // when it is older than an hour; a live writer's file is left alone.
  int n = 0;
  std::error_code ec;
  std::vector<fs::path> dirs = {fs::path(root)};
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (it->is_directory(ec2) && !it->is_symlink(ec2)) dirs.push_back(it->path());
  }
  const auto now = fs::file_time_type::clock::now();
  for (const auto& d : dirs) {
    std::error_code dec;
    for (auto it = fs::directory_iterator(d, dec); !dec && it != fs::directory_iterator(); it.increment(dec)) {
      const std::string name = it->path().filename().string();
      const size_t at = name.rfind(".tmp.");
      if (name.empty() || name[0] != '.' || at == std::string::npos) continue;
      std::error_code ec2;
      if (!it->is_regular_file(ec2) || it->is_symlink(ec2)) continue;
      const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
      const bool gone = pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
      const auto mtime = it->last_write_time(ec2);
      const bool old = !ec2 && now - mtime > std::chrono::hours(1);
      if ((gone || old) && fs::remove(it->path(), ec2)) {
        ++n;
        if (removed) removed->push_back(it->path().string());
      }
    }
  }
  return n;
}

StatusOr<std::string> write_entry(const std::string& root, const Case& c, const nlohmann::json& found) {
  const std::string path = entry_path(root, c);
  std::error_code ec;
  if (fs::exists(path, ec)) return path;  // content-addressed: same id, same case
  nlohmann::json j;
  j["assay_entry"] = kEntryFormat;
  j["case"] = c.to_json();
  j["found"] = found;
  j["replay"] = program_name() + " replay " + path;
  ASSAY_RETURN_IF_ERROR(write_file_atomic(path, j.dump(2) + "\n"));
  return path;
}

Status validate_case(const OpSpec& spec, const Case& c, const std::string& where) {
  try {
    Status s = spec.validate(c);
    if (!s.ok()) return invalid_argument(fmt::format("{}: {}", where, printable(s.message(), 400)));
    return ok_status();
  } catch (const std::exception& e) {
    // A validator that reads a parameter with .get<>() before checking its type.
    return invalid_argument(
        fmt::format("{}: $.case.params: a parameter of the wrong type for op '{}': {}", where, c.op, printable(e.what())));
  }
}

StatusOr<std::string> replace_entry(const std::string& root, const std::string& old_path, const Case& c,
                                    const nlohmann::json& found) {
  const std::string path = entry_path(root, c);
  std::error_code ec;
  if (path != old_path && fs::exists(path, ec)) {
    // Someone stored this very case already: keep theirs, drop ours.
  } else {
    nlohmann::json j;
    j["assay_entry"] = kEntryFormat;
    j["case"] = c.to_json();
    j["found"] = found;
    j["replay"] = "assay replay " + path;
    ASSAY_RETURN_IF_ERROR(write_file_atomic(path, j.dump(2) + "\n"));
  }
  // Only once the new entry is durable does the old one go: a crash in
  // between leaves both, never neither.
  if (!old_path.empty() && old_path != path) {
    fs::remove(old_path, ec);
    fsync_dir(fs::path(old_path).parent_path());
  }
  return path;
}

StatusOr<CorpusEntry> read_entry(const std::string& path) {
  ASSAY_ASSIGN_OR_RETURN(nlohmann::json j, read_json_file(path));
  return entry_from_json(std::move(j), path);
}

StatusOr<CorpusEntry> entry_from_json(nlohmann::json j, const std::string& path) {
  if (!j.is_object()) return data_loss(fmt::format("{}: $: expected an object, got {}", path, j.type_name()));
  auto fmt_it = j.find("assay_entry");
  if (fmt_it == j.end() || !fmt_it->is_number_integer())
    return data_loss(fmt::format("{}: $.assay_entry: missing or not an integer (not an assay corpus entry)", path));
  if (fmt_it->is_number_unsigned() ? fmt_it->get<uint64_t>() > static_cast<uint64_t>(kEntryFormat)
                                   : fmt_it->get<int64_t>() > kEntryFormat)
    return data_loss(fmt::format("{}: $.assay_entry: format {} is newer than this assay reads ({})", path,
                                 fmt_it->dump(), kEntryFormat));
  if (fmt_it->get<int64_t>() < 1)
    return data_loss(fmt::format("{}: $.assay_entry: format {} is not a format (1 or more)", path, fmt_it->dump()));
  auto case_it = j.find("case");
  if (case_it == j.end()) return data_loss(fmt::format("{}: $.case: missing", path));
  auto c = Case::from_json(*case_it, path + ": $.case");
  if (!c.ok()) return data_loss(c.status().message());
  CorpusEntry e;
  e.c = std::move(c).value();
  if (auto it = j.find("found"); it != j.end()) {
    // Free-form provenance, but the parts replay reads are type-checked here.
    if (!it->is_object())
      return data_loss(fmt::format("{}: $.found: expected an object, got {}", path, it->type_name()));
    if (auto vt = it->find("verdict"); vt != it->end()) {
      if (!vt->is_object())
        return data_loss(fmt::format("{}: $.found.verdict: expected an object, got {}", path, vt->type_name()));
      if (auto pt = vt->find("passed"); pt != vt->end()) {
        if (!pt->is_boolean())
          return data_loss(
              fmt::format("{}: $.found.verdict.passed: expected a boolean, got {}", path, pt->type_name()));
        e.stored_failure = !pt->get<bool>();
      }
      if (auto ft = vt->find("failures"); ft != vt->end() && !ft->is_array())
        return data_loss(
            fmt::format("{}: $.found.verdict.failures: expected an array, got {}", path, ft->type_name()));
    }
    e.found = std::move(*it);
  }
  if (auto it = j.find("replay"); it != j.end()) {
    if (!it->is_string())
      return data_loss(fmt::format("{}: $.replay: expected a string, got {}", path, it->type_name()));
    e.replay = it->get<std::string>();
  }
  e.path = path;
  return e;
}

StatusOr<std::vector<std::string>> list_entries(const std::vector<std::string>& paths,
                                                std::vector<std::string>* problems) {
  std::vector<std::string> out;
  auto problem = [&](std::string msg) {
    if (problems) problems->push_back(std::move(msg));
  };
  for (const auto& p : paths) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      std::error_code lec;
      if (fs::is_symlink(fs::symlink_status(p, lec))) {
        out.push_back(p);  // read_entry names what is wrong with the link
        continue;
      }
      return not_found(fmt::format("{}: no such file or folder", p));
    }
    if (!fs::is_directory(st)) {
      out.push_back(p);
      continue;
    }
    // An explicit walk instead of recursive_directory_iterator: a folder that
    // cannot be listed, a link loop or a link to nowhere is one line in
    // `problems` and the walk goes on. Links to folders are not followed (no
    // cycles); links named *.json are listed and read_entry judges them.
    std::vector<fs::path> todo = {fs::path(p)};
    size_t visited = 0;
    while (!todo.empty()) {
      const fs::path dir = todo.back();
      todo.pop_back();
      if (++visited > 100000) {
        problem(fmt::format("{}: more than 100000 folders, the rest not listed", p));
        break;
      }
      std::error_code dec;
      fs::directory_iterator it(dir, dec);
      if (dec) {
        problem(fmt::format("{}: cannot list: {}", dir.string(), dec.message()));
        continue;
      }
      for (; it != fs::directory_iterator(); it.increment(dec)) {
        const fs::path& ep = it->path();
        const std::string name = ep.filename().string();
        std::error_code fec;
        const bool link = it->is_symlink(fec);
        if (!link && it->is_directory(fec)) {
          if (name != "baselines") todo.push_back(ep);  // accuracy baselines are not corpus entries
          continue;
        }
        if (name.empty() || name.front() == '.' || ep.extension() != ".json") continue;
        out.push_back(ep.string());
      }
      if (dec) problem(fmt::format("{}: listing stopped: {}", dir.string(), dec.message()));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace assay
