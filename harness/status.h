// Status and StatusOr: errors are values in the library; only tests assert.
// Modelled on absl::Status. Library code never calls exit().
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace assay {

/// Broad error classes; they map onto the CLI's exit codes (see README).
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  ///< bad input from the user or a file (exit 2)
  kNotFound,         ///< a named op, variant or file does not exist (exit 2)
  kUnavailable,      ///< no GPU, missing library feature (skip, or exit 3)
  kInternal,         ///< a CUDA / cuBLAS / cuDNN call failed (exit 3)
  kDataLoss,         ///< a corrupt corpus entry (exit 2)
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "invalid-argument: <message>", one line.
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() {
  return {};
}
inline Status invalid_argument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status not_found(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status unavailable(std::string m) {
  return {StatusCode::kUnavailable, std::move(m)};
}
inline Status internal_error(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}
inline Status data_loss(std::string m) {
  return {StatusCode::kDataLoss, std::move(m)};
}

/// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace assay

#define ASSAY_CONCAT_INNER_(a, b) a##b
#define ASSAY_CONCAT_(a, b) ASSAY_CONCAT_INNER_(a, b)

/// Returns from the enclosing function if `expr` yields a non-ok Status.
#define ASSAY_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::assay::Status assay_status_ = (expr);        \
    if (!assay_status_.ok()) return assay_status_; \
  } while (false)

#define ASSAY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

/// `ASSAY_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define ASSAY_ASSIGN_OR_RETURN(lhs, expr) \
  ASSAY_ASSIGN_OR_RETURN_IMPL_(ASSAY_CONCAT_(assay_statusor_, __LINE__), lhs, expr)
