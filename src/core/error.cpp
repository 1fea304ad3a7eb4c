#include "thrive/core/error.hpp"

namespace thrive {

const char* category_name(ErrorCategory category) {
  switch (category) {
    case ErrorCategory::kUsage: return "usage";
    case ErrorCategory::kInput: return "input";
    case ErrorCategory::kStorage: return "storage";
    case ErrorCategory::kBackend: return "backend";
    case ErrorCategory::kDevice: return "device";
    case ErrorCategory::kInternal: return "internal";
  }
  return "internal";
}

int exit_code(ErrorCategory category) {
  switch (category) {
    case ErrorCategory::kUsage: return 2;
    case ErrorCategory::kInput: return 3;
    case ErrorCategory::kStorage: return 4;
    case ErrorCategory::kBackend: return 5;
    case ErrorCategory::kDevice: return 6;
    case ErrorCategory::kInternal: return 70;
  }
  return 70;
}

}  // namespace thrive
