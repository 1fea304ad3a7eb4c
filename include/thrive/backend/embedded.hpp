// Files under kernels/ embedded into the binary at build time (cmake/embed.cmake),
// so templates, eager baselines, cards and ABI headers travel with `thrive`.
#pragma once

#include <string>
#include <vector>

namespace thrive::backend {

/// Content of kernels/<relative_path> (e.g. "cpu/softmax/template.cpp").
/// Throws Error(kInternal) naming the path when it was not embedded.
const std::string& embedded_file(const std::string& relative_path);

/// Relative paths of all embedded files that start with `prefix`, sorted.
std::vector<std::string> embedded_paths(const std::string& prefix = "");

}  // namespace thrive::backend
