// Shared test fixtures: a temporary THRIVE_HOME, a fast configuration, running the
// thrive binary, and small kernel sources.
#pragma once

#include <string>
#include <vector>

#include "thrive/config/config.hpp"

namespace thrive::test {

/// A fresh directory under /tmp, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Defaults with `home`, short timing loops and a fixed 5 s candidate timeout.
config::Config fast_config(const std::string& home);

/// Small model dims (hidden 256, intermediate 384, 4/2 heads of 64, vocab 3000) so
/// inner-loop tests run in seconds.
config::ModelDims small_model();

/// Result of running the thrive binary.
struct CommandResult {
  int exit_code = -1;
  std::string out;   ///< stdout
  std::string err;   ///< stderr
};

/// Runs THRIVE_BINARY with `args` and extra environment assignments ("K=V").
CommandResult run_thrive(const std::vector<std::string>& args,
                         const std::vector<std::string>& env = {});

/// A kernel file body for `op` with entry `k` whose function body is `body`
/// (the ABI header is included).
std::string kernel_text(const std::string& op, const std::string& body);

}  // namespace thrive::test
