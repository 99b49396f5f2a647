#include "harness/json_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

namespace assay {
namespace fs = std::filesystem;
using nlohmann::json;

std::string printable(std::string_view s, size_t max_len) {
  std::string o;
  size_t i = 0;
  while (i < s.size()) {
    if (o.size() >= max_len) {
      o += "...";
      break;
    }
    const auto b = static_cast<unsigned char>(s[i]);
    if (b == '\n') {
      o += "\\n", ++i;
    } else if (b == '\r') {
      o += "\\r", ++i;
    } else if (b == '\t') {
      o += "\\t", ++i;
    } else if (b < 0x20 || b == 0x7f) {
      o += fmt::format("\\x{:02x}", b), ++i;
    } else if (b < 0x80) {
      o += static_cast<char>(b), ++i;
    } else {
      // A well-formed UTF-8 sequence passes, except the C1 controls (U+0080..U+009F,
      // which some terminals read as escape introducers); anything else is escaped.
      size_t len = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 && b <= 0xDF ? 2 : 0;
      if (b >= 0xF5) len = 0;
      bool ok = len > 0 && i + len <= s.size();
      for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      if (ok && len == 2 && b == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0) ok = false;
      if (ok) {
        o.append(s.substr(i, len));
        i += len;
      } else {
        o += fmt::format("\\x{:02x}", b), ++i;
      }
    }
  }
  return o;
}

std::string json_path_key(std::string_view key) {
  bool ident = !key.empty() && key.size() <= 64 && !(key[0] >= '0' && key[0] <= '9');
  for (char ch : key)
    ident = ident && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_');
  if (ident) return "." + std::string(key);
  return "[" + json(printable(key, 64)).dump() + "]";
}

namespace {

// Builds the document like nlohmann's own DOM parser, but iteratively bounded:
// a depth and value limit, duplicate keys refused, and every error kept as a
// message (with the JSON path it happened at) instead of thrown.
class BoundedBuilder final : public nlohmann::json_sax<json> {
 public:
  BoundedBuilder(json& root, const JsonLimits& limits) : root_(root), limits_(limits) {}

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override { return value(json(std::move(v))); }
  bool binary(binary_t&) override { return fail("binary values are not JSON"); }

  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    const bool dup = f.node->contains(k);
    f.key = std::move(k);
    f.has_key = true;
    return dup ? fail("duplicate key") : true;
  }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override {
    // ex.what() is "[json.exception.parse_error.101] parse error at line 1, column 6: ..."; the id
    // prefix says nothing to a person.
    std::string what = ex.what();
    if (what.rfind("[json.exception.", 0) == 0) {
      const size_t close = what.find("] ");
      if (close != std::string::npos) what.erase(0, close + 2);
    }
    if (ex.id == 406)  // out_of_range: number overflow
      return fail(fmt::format("number out of range of a double: {}", printable(last_token, 40)));
    return fail(fmt::format("not valid JSON (byte {}): {}", position, printable(what, 160)));
  }

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& error_path() const { return error_path_; }

 private:
  struct Frame {
    json* node;
    std::string key;  // pending key (objects)
    bool has_key = false;
  };

  std::string path() const {
    // The element being parsed: in an array the next index, unless a child
    // container is open (then the last); in an object the last key.
    std::vector<std::string> segs;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      const bool top = i + 1 == stack_.size();
      if (f.node->is_array()) {
        const size_t n = f.node->size();
        segs.push_back(fmt::format("[{}]", top || n == 0 ? n : n - 1));
      } else if (f.has_key) {
        segs.push_back(json_path_key(f.key));
      }
    }
    std::string p = "$";
    const size_t keep_head = 8, keep_tail = 4;
    for (size_t i = 0; i < segs.size(); ++i) {
      if (segs.size() > keep_head + keep_tail && i == keep_head)
        p += fmt::format("...({} levels)...", segs.size() - keep_head - keep_tail);
      if (segs.size() > keep_head + keep_tail && i >= keep_head && i < segs.size() - keep_tail) continue;
      p += segs[i];
    }
    return p;
  }

  bool fail(std::string what) {
    if (error_.empty()) {
      error_ = std::move(what);
      error_path_ = path();
    }
    return false;
  }

  json* place(json&& v) {
    if (++values_ > limits_.max_values) {
      fail(fmt::format("more than {} values", limits_.max_values));
      return nullptr;
    }
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.node->is_array()) {
      f.node->push_back(std::move(v));
      return &f.node->back();
    }
    json& slot = (*f.node)[f.key];
    slot = std::move(v);
    return &slot;
  }

  bool value(json&& v) { return place(std::move(v)) != nullptr; }

  bool open(json&& container) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth)
      return fail(fmt::format("nested deeper than {} levels", limits_.max_depth));
    json* node = place(std::move(container));
    if (node == nullptr) return false;
    stack_.push_back({node, {}, false});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  json& root_;
  const JsonLimits& limits_;
  std::vector<Frame> stack_;
  size_t values_ = 0;
  std::string error_, error_path_;
};

const char* file_type_name(fs::file_type t) {
  switch (t) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    default:
      return "not a regular file";
  }
}

}  // namespace

StatusOr<json> parse_json_text(std::string_view text, const std::string& where, const JsonLimits& limits) {
  json root;
  BoundedBuilder b(root, limits);
  try {
    const bool ok = json::sax_parse(text.begin(), text.end(), &b, json::input_format_t::json, true, false);
    if (!ok || b.failed())
      return data_loss(fmt::format("{}: {}: {}", where, b.failed() ? b.error_path() : "$",
                                   b.failed() ? b.error() : "not valid JSON"));
  } catch (const std::exception& e) {  // bad_alloc, or an exception the SAX contract did not route to parse_error
    return data_loss(fmt::format("{}: $: cannot parse: {}", where, printable(e.what(), 160)));
  }
  return root;
}

StatusOr<std::string> read_file_bounded(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    const fs::file_status lst = fs::symlink_status(path, ec);
    if (fs::is_symlink(lst)) {
      // ELOOP (a link cycle) or a link to nothing.
      std::error_code ec2;
      static_cast<void>(fs::status(path, ec2));
      return data_loss(fmt::format("{}: a symbolic link that cannot be followed: {}", path,
                                   ec2 ? ec2.message() : "it points to nothing"));
    }
    if (!fs::exists(lst)) return not_found(fmt::format("{}: no such file", path));
    return data_loss(fmt::format("{}: cannot read: {}", path, ec ? ec.message() : "unknown error"));
  }
  if (!fs::is_regular_file(st))
    return data_loss(fmt::format("{}: {}, not a regular file", path, file_type_name(st.type())));
  // O_NONBLOCK: should the file be swapped for a FIFO after the check, open must not block on it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return data_loss(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) return data_loss(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  if (!S_ISREG(sb.st_mode)) return data_loss(fmt::format("{}: not a regular file", path));
  if (sb.st_size < 0 || static_cast<uint64_t>(sb.st_size) > max_bytes)
    return data_loss(fmt::format("{}: {} bytes, larger than the {} MiB limit", path, static_cast<int64_t>(sb.st_size),
                                 max_bytes >> 20));
  // Read at most max_bytes + 1: a file that grows (or lies about its size) still stops here.
  std::string text;
  text.resize(static_cast<size_t>(sb.st_size) + 1);
  size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (text.size() > max_bytes) break;
      text.resize(std::min(max_bytes + 1, text.size() * 2 + 4096));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return data_loss(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) return data_loss(fmt::format("{}: larger than the {} MiB limit", path, max_bytes >> 20));
  text.resize(got);
  return text;
}

StatusOr<json> read_json_file(const std::string& path, const JsonLimits& limits) {
  ASSAY_ASSIGN_OR_RETURN(std::string text, read_file_bounded(path, limits.max_bytes));
  return parse_json_text(text, path, limits);
}

}  // namespace assay
