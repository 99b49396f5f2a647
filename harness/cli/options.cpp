#include "harness/cli/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "harness/json_file.h"

namespace assay::cli {
namespace {

// The whole text is one decimal integer (optional '-'), within int64.
std::optional<int64_t> strict_int(const std::string& s) {
  if (s.empty() || s.size() > 24) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || end != s.c_str() + s.size()) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::string show(const std::string& s) {
  return printable(s, 40);
}

}  // namespace

CLI::Validator finite_number(double lo, bool open_low) {
  const std::string desc = fmt::format("NUMBER {} {:g}", open_low ? ">" : ">=", lo);
  return CLI::Validator(
      [lo, open_low](std::string& s) -> std::string {
        // Decimal only: digits, sign, point, exponent. strtod alone would take
        // "nan", "inf", hex floats and leading spaces.
        bool ok = !s.empty() && s.size() <= 64;
        for (char ch : s)
          ok = ok && ((ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '+' || ch == 'e' || ch == 'E');
        double v = 0;
        if (ok) {
          errno = 0;
          char* end = nullptr;
          v = std::strtod(s.c_str(), &end);
          ok = end == s.c_str() + s.size() && errno != ERANGE && std::isfinite(v);
        }
        if (!ok) return fmt::format("'{}' is not a finite decimal number", show(s));
        if (open_low ? !(v > lo) : !(v >= lo))
          return fmt::format("{} is out of range: must be {} {:g}", show(s), open_low ? ">" : ">=", lo);
        return {};
      },
      desc, "finite_number");
}

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        const auto v = strict_int(s);
        if (!v) return fmt::format("'{}' is not an integer", show(s));
        if (*v < lo || *v > hi) return fmt::format("{} is out of range [{}, {}]", *v, lo, hi);
        return {};
      },
      fmt::format("INT in [{}, {}]", lo, hi), "integer_in");
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        bool ok = !s.empty() && s.size() <= 20;
        for (char ch : s) ok = ok && ch >= '0' && ch <= '9';
        if (ok) {
          errno = 0;
          char* end = nullptr;
          std::strtoull(s.c_str(), &end, 10);
          ok = errno != ERANGE && end == s.c_str() + s.size();
        }
        if (!ok) return fmt::format("'{}' is not an integer in [0, 18446744073709551615]", show(s));
        return {};
      },
      "UINT64", "unsigned_integer");
}

Status parse_shard(const std::string& text, int& index, int& count) {
  const size_t slash = text.find('/');
  const auto bad = [&] {
    return invalid_argument(fmt::format("--shard '{}' is not of the form i/N with 0 <= i < N <= {}", show(text), 1 << 20));
  };
  if (slash == std::string::npos) return bad();
  const auto i = strict_int(text.substr(0, slash));
  const auto n = strict_int(text.substr(slash + 1));
  if (!i || !n || *n < 1 || *n > (1 << 20) || *i < 0 || *i >= *n) return bad();
  index = static_cast<int>(*i);
  count = static_cast<int>(*n);
  return ok_status();
}

std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& choices) {
  if (word.size() > 64) return std::nullopt;
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::optional<std::string> best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : choices) {
    size_t d = distance(word, c);
    if (c.rfind(word, 0) == 0 && word.size() >= 2) d = std::min<size_t>(d, 1);  // a prefix: "tri" -> "triage"
    if (d < best_d) best_d = d, best = c;
  }
  if (!best || best_d > std::max<size_t>(2, word.size() / 3)) return std::nullopt;
  return best;
}

std::optional<std::string> unknown_command(const CLI::App& app, int argc, const char* const* argv) {
  if (argc < 2 || argv[1] == nullptr || argv[1][0] == '-') return std::nullopt;
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return std::nullopt;
    if (!sub->get_group().empty()) names.push_back(sub->get_name());  // hidden ones are not suggested
  }
  std::string msg = fmt::format("unknown command '{}'", show(word));
  if (auto n = nearest(word, names)) msg += fmt::format(" (did you mean '{}'?)", *n);
  return msg;
}

std::string readable(const std::string& msg) {
  std::string out;
  size_t i = 0;
  while (i < msg.size()) {
    if (msg[i] >= '0' && msg[i] <= '9') {
      size_t j = i;
      while (j < msg.size() && ((msg[j] >= '0' && msg[j] <= '9') || msg[j] == '.')) ++j;
      const std::string num = msg.substr(i, j - i);
      size_t digits = 0;
      for (char ch : num) digits += ch != '.';
      if (digits > 24) {  // 2^64 (20 digits) stays as typed; DBL_MAX (309) does not
        out += fmt::format("{:g}", std::strtod(num.c_str(), nullptr));
      } else {
        out += num;
      }
      i = j;
    } else {
      out += msg[i++];
    }
  }
  return printable(out, 1000);
}

}  // namespace assay::cli
