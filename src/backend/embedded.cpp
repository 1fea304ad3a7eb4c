#include "thrive/backend/embedded.hpp"

#include <map>

#include "thrive/core/error.hpp"

namespace thrive::backend {
namespace detail {
const std::map<std::string, std::string>& embedded_table();
}

const std::string& embedded_file(const std::string& relative_path) {
  const auto& table = detail::embedded_table();
  auto it = table.find(relative_path);
  if (it == table.end())
    fail(ErrorCategory::kInternal, "kernels/{} is not embedded in this build", relative_path);
  return it->second;
}

std::vector<std::string> embedded_paths(const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& [path, content] : detail::embedded_table())
    if (path.rfind(prefix, 0) == 0) out.push_back(path);
  return out;
}

}  // namespace thrive::backend
