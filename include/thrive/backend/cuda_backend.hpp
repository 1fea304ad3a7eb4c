// The CUDA backend: candidate .cu sources compiled at run time by NVRTC for the
// device's own architecture (sm_90 on the H200), loaded and launched with the driver
// API by the kernel's launch plan, timed with CUDA events and CUDA graphs.
//
// libcuda and libnvrtc are opened with dlopen at run time, so the binary starts (and
// the CPU backend works) on machines without a driver or GPU. Compiled CUBINs are
// cached under $THRIVE_HOME/cache/cuda by a hash of source, options, arch and NVRTC
// version. Create one only inside a sandbox worker: a candidate's fault poisons the
// context (reported as Error(kDevice)).
#pragma once

#include <memory>
#include <string>

#include "thrive/backend/backend.hpp"

namespace thrive::backend {

/// True when this build includes the CUDA backend (the toolkit's headers were found).
bool cuda_compiled_in();

/// Cheap probe without initialising the driver (safe before fork): libcuda.so.1 can be
/// opened and an NVIDIA device node exists. Fills `why` when it returns false.
bool cuda_probably_available(std::string* why);

/// What NVRTC made of one source: `ok` with the CUBIN, or the log of the failure.
struct NvrtcOutput {
  bool ok = false;
  std::string log;     ///< NVRTC's log (ptxas -v resource lines included)
  std::string cubin;   ///< the CUBIN bytes when ok
};

/// Compiles `source` with NVRTC for `arch` (e.g. "sm_90") with the backend's own options
/// and ABI header (kernels/cuda/thrive_cuda.cuh). Needs libnvrtc but no driver or GPU, so
/// CI checks every CUDA template compiles. Throws Error(kBackend) when NVRTC cannot be
/// loaded or the build has no CUDA toolkit.
NvrtcOutput nvrtc_compile(const std::string& source, const std::string& arch);

/// Creates the CUDA backend on device 0. Throws Error(kBackend) naming the missing
/// piece (no driver, no device, no NVRTC) when it cannot.
std::unique_ptr<Backend> make_cuda_backend(const config::Config& cfg);

}  // namespace thrive::backend
