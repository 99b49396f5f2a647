#include "harness/corpus.h"
#include "harness/spec.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

namespace assay {
namespace fs = std::filesystem;

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
  return ok_status();
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

StatusOr<CorpusEntry> read_entry(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.size() > (64u << 20)) return data_loss(fmt::format("{}: larger than 64 MiB, not a corpus entry", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message is one line: "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    return data_loss(fmt::format("{}: not valid JSON (byte {}): {}", path, e.byte, e.what()));
  }
  if (!j.is_object()) return data_loss(fmt::format("{}: $: expected an object", path));
  auto fmt_it = j.find("assay_entry");
  if (fmt_it == j.end() || !fmt_it->is_number_integer())
    return data_loss(fmt::format("{}: $.assay_entry: missing or not an integer (not an assay corpus entry)", path));
  if (fmt_it->get<int64_t>() > kEntryFormat)
    return data_loss(fmt::format("{}: $.assay_entry: format {} is newer than this assay reads ({})", path,
                                 fmt_it->get<int64_t>(), kEntryFormat));
  auto case_it = j.find("case");
  if (case_it == j.end()) return data_loss(fmt::format("{}: $.case: missing", path));
  auto c = Case::from_json(*case_it, path + ": $.case");
  if (!c.ok()) return data_loss(c.status().message());
  CorpusEntry e;
  e.c = std::move(c).value();
  if (auto it = j.find("found"); it != j.end()) e.found = *it;
  if (auto it = j.find("replay"); it != j.end() && it->is_string()) e.replay = it->get<std::string>();
  e.path = path;
  return e;
}

StatusOr<std::vector<std::string>> list_entries(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) return not_found(fmt::format("{}: no such file or folder", p));
    if (fs::is_directory(st)) {
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        if (it->is_directory() && it->path().filename() == "baselines") {
          it.disable_recursion_pending();  // accuracy baselines are not corpus entries
          continue;
        }
        if (it->is_regular_file() && it->path().extension() == ".json" && it->path().filename().string().front() != '.')
          out.push_back(it->path().string());
      }
      if (ec) return internal_error(fmt::format("{}: cannot list: {}", p, ec.message()));
    } else {
      out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace assay
