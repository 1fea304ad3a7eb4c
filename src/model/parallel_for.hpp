// parallel_for: the model module's chunked loop over a range on a few threads (the CPU engine's
// projections, the random checkpoint writer, the screened lm_head's packing).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace thrive::model {

// Runs body(begin, end) over [0, n) in chunks on up to `max_threads` threads (0: as many as
// hardware_concurrency).
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& body, int max_threads = 0) {
  const int64_t chunks = (n + grain - 1) / std::max<int64_t>(grain, 1);
  const int64_t cap = max_threads > 0 ? max_threads : int64_t(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = int(std::min<int64_t>(chunks, cap));
  if (threads <= 1) {
    body(int64_t(0), n);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t c; (c = next.fetch_add(1)) < chunks;) body(c * grain, std::min(n, (c + 1) * grain));
  };
  std::vector<std::thread> pool;
  try {
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  } catch (const std::system_error&) {
    // No more threads (a pids limit, say): the started ones and this one share the chunks.
  }
  worker();
  for (auto& t : pool) t.join();
}

}  // namespace thrive::model
