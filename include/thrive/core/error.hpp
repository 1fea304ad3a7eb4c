// thrive::Error: the one exception type THRIVE throws across module boundaries.
//
// Expected failures of a *candidate kernel* are not exceptions: they are a
// sandbox::Status recorded by the loop. Error is for misuse (bad configuration,
// bad command-line values, unusable memory store) and for infrastructure faults
// (the compiler is missing, the CUDA driver failed). Each carries a category so
// `main` can map it to an exit code (see src/cli/main.cpp).
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace thrive {

/// What kind of failure an Error reports; `main` maps each to an exit code.
enum class ErrorCategory {
  kUsage,     ///< bad flag, bad environment value, unknown op: exit 2
  kInput,     ///< bad file content (kernel file, JSON import): exit 3
  kStorage,   ///< THRIVE_HOME not writable, memory.db corrupted or foreign: exit 4
  kBackend,   ///< compiler/driver failure outside a candidate: exit 5
  kDevice,    ///< sticky device fault (illegal address, ...) raised while a candidate ran: exit 6
  kInternal,  ///< a THRIVE bug: exit 70
};

/// Returns the stable lowercase name of a category ("usage", "input", ...).
const char* category_name(ErrorCategory category);

/// Exit code for a category (2, 3, 4, 5, 70; see ErrorCategory).
int exit_code(ErrorCategory category);

/// The exception THRIVE throws. `what()` is a single line: the message names the
/// offending value and what was expected.
class Error : public std::runtime_error {
 public:
  Error(ErrorCategory category, const std::string& message)
      : std::runtime_error(message), category_(category) {}
  ErrorCategory category() const { return category_; }

 private:
  ErrorCategory category_;
};

/// Throws Error{category, fmt::format(format, args...)}.
template <typename... Args>
[[noreturn]] void fail(ErrorCategory category, fmt::format_string<Args...> format,
                       Args&&... args) {
  throw Error(category, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace thrive
