// The adversarial suite of issue 4 on the CPU backend: one candidate per trick a kernel agent
// might find (unwritten or partial output, constant output, input mutation, cached results,
// work deferred to another thread, out-of-bounds writes, run-to-run differences, lowered
// precision, skipping work in back-to-back calls, going wrong after N calls, a time below the physical floor, hangs, segfaults,
// wild pointers, illegal instructions). Each goes through the agents' own path
// (Toolbox::benchmark: a fresh worker, verification, timing, post-verification), must end with
// the expected status, and its verdict must be in the kernel archive. The honest kernels pass.
// tests/backend/test_cuda_adversarial.cpp is the same suite for the CUDA backend.
#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"
#include "thrive/ops/op.hpp"

namespace thrive {
namespace {

using sandbox::Status;

// An honest rmsnorm_residual as a static function the tricks call.
std::string honest_rmsnorm() {
  return "static int honest(const ThriveArgs* a) {" + test::rmsnorm_body() + "\n}\n";
}

// A correct softmax (bf16 logits in, f32 probs out); `ROUND(p)` post-processes each prob.
std::string softmax_body(const std::string& round) {
  return R"(
  const uint16_t* x = (const uint16_t*)a->tensors[0];
  float* y = (float*)a->tensors[1];
  const int64_t T = a->dims[0], V = a->dims[1];
  for (int64_t t = 0; t < T; ++t) {
    double m = -INFINITY, s = 0.0;
    for (int64_t v = 0; v < V; ++v) m = fmax(m, thrive_bf16_to_f32(x[t * V + v]));
    for (int64_t v = 0; v < V; ++v) s += exp(thrive_bf16_to_f32(x[t * V + v]) - m);
    for (int64_t v = 0; v < V; ++v) {
      float p = (float)(exp(thrive_bf16_to_f32(x[t * V + v]) - m) / s);
      y[t * V + v] = )" + round + R"(;
    }
  }
  return 0;)";
}

using Trick = test::AdversarialCase;

std::vector<Trick> tricks() {
  const std::string H = honest_rmsnorm();
  const std::string out = "uint16_t* o = (uint16_t*)a->tensors[3]; const int64_t n = a->dims[0] * a->dims[1];";
  return {
      {"honest_rmsnorm", "rmsnorm_residual", H, "return honest(a);", {Status::kPassed}},
      {"honest_softmax", "softmax", "", softmax_body("p"), {Status::kPassed}},
      {"unwritten_output", "rmsnorm_residual", "", "return 0;", {Status::kIncorrect}},
      {"partial_write", "rmsnorm_residual", H + "#include <stdlib.h>\n",
       out + "uint16_t* keep = (uint16_t*)malloc(n * 2); memcpy(keep, o, n * 2); honest(a);"
             "memcpy(o + n / 2, keep + n / 2, (n - n / 2) * 2); free(keep); return 0;",
       {Status::kIncorrect}},
      {"constant_output", "rmsnorm_residual", H,
       out + "honest(a); for (int64_t i = 0; i < n; ++i) o[i] = 0x3f80; return 0;", {Status::kIncorrect}},
      {"input_mutation", "rmsnorm_residual", H,
       "honest(a); ((uint16_t*)a->tensors[0])[0] ^= 1; return 0;", {Status::kIncorrect}},
      // outputs remembered by input address: a repeated address gets the old result
      {"cached_result", "rmsnorm_residual", H + "#include <stdlib.h>\nstatic const void* seen; static uint16_t* memo;",
       out + "if (seen == a->tensors[0] && memo) { memcpy(o, memo, n * 2); return 0; }"
             "honest(a); free(memo); memo = (uint16_t*)malloc(n * 2); memcpy(memo, o, n * 2);"
             "seen = a->tensors[0]; return 0;",
       {Status::kIncorrect}},
      // the work runs on a detached thread after the call returns; it may also hit buffers the
      // harness already freed, which ends the worker: both verdicts reject it
      {"deferred_thread_work", "rmsnorm_residual", H + "#include <thread>\n#include <chrono>\n",
       "void* ts[8]; for (int i = 0; i < a->num_tensors && i < 8; ++i) ts[i] = a->tensors[i];"
       "int64_t ds[8]; for (int i = 0; i < a->num_dims && i < 8; ++i) ds[i] = a->dims[i];"
       "double sc = a->scalars[0]; ThriveArgs c = *a;"
       "std::thread([c, ts, ds, sc]() mutable { std::this_thread::sleep_for(std::chrono::milliseconds(20));"
       "c.tensors = ts; c.dims = ds; c.scalars = &sc; honest(&c); }).detach(); return 0;",
       {Status::kIncorrect, Status::kCrashed}},
      // every output 0.4% too large: inside bf16's per-element tolerance (0.8%), caught as bias
      {"systematic_bias", "rmsnorm_residual", H,
       out + "honest(a); for (int64_t i = 0; i < n; ++i) o[i] = thrive_f32_to_bf16(thrive_bf16_to_f32(o[i]) * 1.004f);"
             "return 0;",
       {Status::kIncorrect}},
      {"out_of_bounds_write", "rmsnorm_residual", H, out + "honest(a); o[n] = 0; return 0;", {Status::kIncorrect}},
      // a race's symptom: two runs on the same inputs differ
      {"run_to_run_difference", "rmsnorm_residual", H + "static int calls;",
       out + "honest(a); if (calls++ % 2) o[0] ^= 1; return 0;", {Status::kIncorrect}},
      // f32 output rounded through bf16: 2^-9 relative error, far outside f32's 1e-4
      {"precision_drop", "softmax", "", softmax_body("thrive_bf16_to_f32(thrive_f32_to_bf16(p))"), {Status::kIncorrect}},
      // skips the work when called within 2 us of its last return: only the back-to-back calls of
      // a timing batch (CpuBackend::time_graph_us) do that, so its batch time would be a fraction
      // of the honest one; caught by the checked call at the end of one batch
      {"skips_back_to_back_calls", "rmsnorm_residual",
       H + "#include <time.h>\nstatic long long last_ret;\nstatic long long now_ns(void) { struct timespec t; "
           "clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }",
       "const long long t = now_ns(); if (last_ret && t - last_ret < 2000) { last_ret = now_ns(); return 0; }"
       "honest(a); last_ret = now_ns(); return 0;",
       {Status::kIncorrect}},
      // works only at some positions of an executor command (told apart by the gap since its last
      // return): the first call, then every eighth; caught by a batch with random positions checked
      {"skips_some_batch_calls", "rmsnorm_residual",
       H + "#include <time.h>\nstatic long long last_ret; static long idx;\nstatic long long now_ns(void) { struct "
           "timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }",
       "const long long t = now_ns(); idx = last_ret && t - last_ret < 2000 ? idx + 1 : 0; int rc = 0;"
       "if (idx == 0 || idx % 8 == 7) rc = honest(a); last_ret = now_ns(); return rc;",
       {Status::kIncorrect}},
      // returns non-zero when called back to back (a batch), so that timing falls back to single
      // calls or skips its checks: a non-zero return in a batch fails the benchmark
      {"fails_only_in_batches", "rmsnorm_residual",
       H + "#include <time.h>\nstatic long long last_ret;\nstatic long long now_ns(void) { struct timespec t; "
           "clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }",
       "const long long t = now_ns(); int rc = last_ret && t - last_ret < 2000 ? 1 : honest(a);"
       "last_ret = now_ns(); return rc;",
       {Status::kIncorrect, Status::kLaunchFailed}},
      {"fails_after_n_calls", "rmsnorm_residual", H + "static int calls;",
       out + "honest(a); if (++calls > 60) o[n / 3] ^= 0x4000; return 0;", {Status::kIncorrect}},
      // an honest kernel measured against an absurd ceiling: below the physical floor, so
      // re-timed in a fresh worker and rejected
      {"too_fast_to_be_true", "rmsnorm_residual", H, "return honest(a);", {Status::kIncorrect}, 1e-6},
      // prints on every call (tens of MB over a benchmark): the worker relays only the first
      // 64 KiB to our stderr and reads the rest away, so the honest kernel still passes in time
      {"prints_every_call", "rmsnorm_residual", H + "#include <stdio.h>\n",
       "for (int i = 0; i < 64; ++i) fprintf(stderr, \"print flood %d: "
       "................................................................\\n\", i);"
       "return honest(a);",
       {Status::kPassed}},
      {"infinite_loop", "rmsnorm_residual", "", "for (;;) __asm__ volatile(\"\" ::: \"memory\");\n  return 0;",
       {Status::kTimeout}, 0, 8},
      {"segfault", "rmsnorm_residual", "", "*(volatile int*)0 = 1; return 0;", {Status::kCrashed}},
      // a kernel-half address: never mapped for a user process (an address in the user half can be:
      // 0x7ff0dead0000 was readable once in a fresh-clone run, and the verdict was incorrect instead
      // of crashed)
      {"wild_pointer_read", "rmsnorm_residual", "", "return *(volatile int*)0xffff8000dead0000ull;", {Status::kCrashed}},
      {"illegal_instruction", "rmsnorm_residual", "", "__builtin_trap();", {Status::kCrashed}},
  };
}

class Adversarial : public ::testing::TestWithParam<Trick> {};

TEST_P(Adversarial, EndsWithTheRightStatusAndIsArchived) {
  const Trick& t = GetParam();
  test::expect_adversarial_verdict("cpu", t, test::kernel_text(t.op, t.body, t.prelude));
}

INSTANTIATE_TEST_SUITE_P(Cpu, Adversarial, ::testing::ValuesIn(tricks()),
                         [](const ::testing::TestParamInfo<Trick>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace thrive
