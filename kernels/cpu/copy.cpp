// The bandwidth ceiling: a parallel copy of dims[0] bytes from tensors[0] to
// tensors[1]. glibc's memcpy uses non-temporal stores for large blocks, so the
// figure is the DRAM read + write rate the kernels compete against.
// @thrive op: copy
// @thrive backend: cpu
// @thrive entry: thrive_copy
#include <omp.h>

#include "thrive_cpu.h"

THRIVE_EXPORT int thrive_copy(const ThriveArgs* args) {
  const char* src = (const char*)args->tensors[0];
  char* dst = (char*)args->tensors[1];
  const int64_t n = args->dims[0];
#pragma omp parallel num_threads(args->num_threads)
  {
    const int64_t parts = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t chunk = (n / parts + 63) / 64 * 64;
    const int64_t begin = id * chunk < n ? id * chunk : n;
    const int64_t end = begin + chunk < n ? begin + chunk : n;
    if (end > begin) memcpy(dst + begin, src + begin, (size_t)(end - begin));
  }
  return 0;
}
