// Shared test fixtures: a temporary THRIVE_HOME, a fast configuration, running the
// thrive binary, and small kernel sources.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "thrive/config/config.hpp"
#include "thrive/sandbox/sandbox.hpp"

namespace thrive::test {

/// A fresh directory under /tmp, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Defaults with `home`, short timing loops and a fixed 5 s candidate timeout.
config::Config fast_config(const std::string& home);

/// Small model dims (hidden 256, intermediate 384, 4/2 heads of 64, vocab 3000) so
/// inner-loop tests run in seconds.
config::ModelDims small_model();

/// THRIVE_* assignments ("K=V") that make the binary use small_model() dims.
std::vector<std::string> small_model_env();

/// Result of running the thrive binary.
struct CommandResult {
  int exit_code = -1;
  std::string out;   ///< stdout
  std::string err;   ///< stderr
};

/// Runs THRIVE_BINARY with `args` and extra environment assignments ("K=V"). THRIVE_*
/// and RSI_* variables inherited from the test's own environment are removed first,
/// so only `env` configures the child.
CommandResult run_thrive(const std::vector<std::string>& args,
                         const std::vector<std::string>& env = {});

/// A CPU softmax kernel file that declares entry `the_entry` but exports `another_name`.
std::string kernel_with_missing_entry();

/// A kernel file body for `op` with entry `k` whose function body is `body`
/// (the ABI header and <math.h> are included; `prelude` goes before the function).
std::string kernel_text(const std::string& op, const std::string& body,
                        const std::string& prelude = "");

/// Function body of a correct rmsnorm_residual kernel (float math, double sum of
/// squares). `epilogue` runs after the computation and before `return 0;`, with
/// `x`, `res`, `w`, `out` (uint16_t*, x and w const) and `T`, `H` (int64_t) in scope.
std::string rmsnorm_body(const std::string& epilogue = "");

/// A CUDA kernel file for `op` with one entry `k(ThriveCudaArgs a)` whose body is `body`,
/// launched as `launch` ("entry=k block=... grid=... smem=..."); `prelude` goes before it.
std::string cuda_kernel(const std::string& launch, const std::string& body, const std::string& prelude = "",
                        const std::string& op = "rmsnorm_residual");

/// Body of a correct CUDA rmsnorm_residual for one block of 256 threads per row (grid T):
/// `a` is the ThriveCudaArgs; out is written last, in the loop `for (i = threadIdx.x; i < H;
/// i += blockDim.x)` when WRITE_OUT(i) (a macro the caller may define) is true.
std::string cuda_rmsnorm_body();

/// One candidate of the adversarial suites (tests/sandbox/test_adversarial.cpp for the CPU,
/// tests/backend/test_cuda_adversarial.cpp for CUDA): the trick's code and the statuses that
/// count as rejecting it for the right reason.
struct AdversarialCase {
  const char* name;
  const char* op;
  std::string prelude, body;          ///< before the entry / the entry's body
  std::set<sandbox::Status> expect;   ///< accepted outcomes (one, except where two are equally right)
  double peak_gbps = 0;               ///< copy-ceiling override (0: measured)
  double timeout_s = 60;              ///< candidate timeout, seconds
};

/// Runs kernel file text `text` (the case's code, wrapped by the caller for its backend)
/// through Toolbox::benchmark on `backend` ("cpu" or "cuda") at the op's first bench shape
/// of small_model() dims, in a fresh THRIVE_HOME, and checks with gtest that the status is one
/// of `c.expect`, that a ceiling override flagged the time below the floor, and that the
/// kernel archive holds the attempt with that status and its verification figures.
void expect_adversarial_verdict(const std::string& backend, const AdversarialCase& c, const std::string& text);

/// Whole contents of a file ("" when it cannot be read).
std::string slurp(const std::string& path);
/// Writes `content` to `path` (truncating); returns `path`.
std::string write_text(const std::string& path, const std::string& content);

/// True when `s` is one line: no '\n' except possibly a final one.
bool is_one_line(const std::string& s);

/// True when kernels/<relative_path> was embedded into this build.
bool has_embedded(const std::string& relative_path);

}  // namespace thrive::test
