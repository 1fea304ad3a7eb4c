#include "tests/support/test_support.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "thrive/backend/embedded.hpp"
#include "thrive/memory/store.hpp"
#include "thrive/tools/toolbox.hpp"

extern char** environ;

namespace thrive::test {

TempDir::TempDir() {
  std::string tmpl = "/tmp/thrive-test-XXXXXX";
  char* made = mkdtemp(tmpl.data());
  path_ = made ? made : "/tmp/thrive-test-fallback";
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ec);
  std::filesystem::remove_all(path_, ec);
}

config::Config fast_config(const std::string& home) {
  config::Config c;
  c.home = home;
  c.bench_max_s = 0.05;
  c.bench_min_reps = 5;
  c.bench_noise = 0.05;
  c.candidate_timeout_s = 60.0;
  c.peak_bw_gbps = 0.0;
  return c;
}

config::ModelDims small_model() {
  config::ModelDims m;
  m.hidden = 256;
  m.intermediate = 384;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 64;
  m.vocab = 3000;
  m.max_position = 2048;
  return m;
}

std::vector<std::string> small_model_env() {
  const auto m = small_model();
  return {"THRIVE_HIDDEN=" + std::to_string(m.hidden),
          "THRIVE_INTERMEDIATE=" + std::to_string(m.intermediate),
          "THRIVE_NUM_HEADS=" + std::to_string(m.num_heads),
          "THRIVE_NUM_KV_HEADS=" + std::to_string(m.num_kv_heads),
          "THRIVE_HEAD_DIM=" + std::to_string(m.head_dim),
          "THRIVE_VOCAB=" + std::to_string(m.vocab),
          "THRIVE_MAX_POSITION=" + std::to_string(m.max_position)};
}

CommandResult run_thrive(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  TempDir io;
  const std::string out_path = io.path() + "/out", err_path = io.path() + "/err";
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<std::string> inherited;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      if (kv.rfind("THRIVE_", 0) == 0 || kv.rfind("RSI_", 0) == 0)
        inherited.push_back(kv.substr(0, kv.find('=')));
    }
    for (const auto& name : inherited) unsetenv(name.c_str());
    // CLI tests exercise the CPU backend, also on a machine with a GPU (where the
    // default device "auto" would pick cuda); a test may still set THRIVE_DEVICE.
    setenv("THRIVE_DEVICE", "cpu", 1);
    for (const auto& e : env) putenv(strdup(e.c_str()));
    FILE* o = freopen(out_path.c_str(), "w", stdout);
    FILE* e = freopen(err_path.c_str(), "w", stderr);
    (void)o;
    (void)e;
    std::vector<char*> argv = {const_cast<char*>(THRIVE_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(THRIVE_BINARY, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

std::string kernel_text(const std::string& op, const std::string& body, const std::string& prelude) {
  return "// @thrive op: " + op + "\n// @thrive backend: cpu\n// @thrive entry: k\n"
         "#include \"thrive_cpu.h\"\n#include <math.h>\n" + prelude + "\n"
         "THRIVE_EXPORT int k(const ThriveArgs* a) {\n" + body + "\n}\n";
}

std::string rmsnorm_body(const std::string& epilogue) {
  return R"(
  const uint16_t* x = (const uint16_t*)a->tensors[0];
  uint16_t* res = (uint16_t*)a->tensors[1];
  const uint16_t* w = (const uint16_t*)a->tensors[2];
  uint16_t* out = (uint16_t*)a->tensors[3];
  const int64_t T = a->dims[0], H = a->dims[1];
  const double eps = a->scalars[0];
  for (int64_t r = 0; r < T; ++r) {
    double sumsq = 0.0;
    for (int64_t c = 0; c < H; ++c) {
      float v = thrive_bf16_to_f32(x[r * H + c]) + thrive_bf16_to_f32(res[r * H + c]);
      res[r * H + c] = thrive_f32_to_bf16(v);
      double s = thrive_bf16_to_f32(res[r * H + c]);
      sumsq += s * s;
    }
    const float inv = (float)(1.0 / sqrt(sumsq / (double)H + eps));
    for (int64_t c = 0; c < H; ++c)
      out[r * H + c] = thrive_f32_to_bf16(thrive_bf16_to_f32(res[r * H + c]) * inv *
                                          thrive_bf16_to_f32(w[c]));
  }
)" + epilogue + "\n  return 0;";
}

std::string cuda_kernel(const std::string& launch, const std::string& body, const std::string& prelude,
                        const std::string& op) {
  return "// @thrive op: " + op + "\n// @thrive backend: cuda\n// @thrive entry: k\n// @thrive launch: " + launch +
         "\n#include \"thrive_cuda.cuh\"\n" + prelude + "\nextern \"C\" __global__ void k(ThriveCudaArgs a) {\n" +
         body + "\n}\n";
}

std::string cuda_rmsnorm_body() {
  return R"(
#ifndef WRITE_OUT
#define WRITE_OUT(i) true
#endif
  const long long T = a.dims[0], H = a.dims[1];
  const long long r = blockIdx.x;
  if (r >= T) return;
  const unsigned short* x = (const unsigned short*)a.tensors[0] + r * H;
  unsigned short* res = (unsigned short*)a.tensors[1] + r * H;
  const unsigned short* w = (const unsigned short*)a.tensors[2];
  unsigned short* out = (unsigned short*)a.tensors[3] + r * H;
  __shared__ float part[256];
  float s = 0.f;
  for (long long i = threadIdx.x; i < H; i += blockDim.x) {
    unsigned short v = thrive_f32_to_bf16(thrive_bf16_to_f32(x[i]) + thrive_bf16_to_f32(res[i]));
    res[i] = v;
    float f = thrive_bf16_to_f32(v);
    s += f * f;
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  const float inv = rsqrtf(part[0] / (float)H + (float)a.scalars[0]);
  for (long long i = threadIdx.x; i < H; i += blockDim.x)
    if (WRITE_OUT(i)) out[i] = thrive_f32_to_bf16(thrive_bf16_to_f32(res[i]) * inv * thrive_bf16_to_f32(w[i]));
)";
}

void expect_adversarial_verdict(const std::string& backend, const AdversarialCase& c, const std::string& text) {
  TempDir home;
  auto cfg = fast_config(home.path());
  cfg.model = small_model();
  cfg.peak_bw_gbps = c.peak_gbps;
  cfg.candidate_timeout_s = c.timeout_s;
  memory::Store store(home.path() + "/memory.db");
  tools::Toolbox tools(cfg, store, backend);
  const auto shape = ops::find_op(c.op).bench_shapes(cfg.model).front();
  const auto k = backend::KernelSource::parse(text, c.name);
  const auto r = tools.benchmark(k, shape);
  ::testing::Test::RecordProperty("verdict", std::string(sandbox::status_name(r.status)) + ": " + r.detail);
  EXPECT_TRUE(c.expect.count(r.status)) << c.name << ": " << sandbox::status_name(r.status) << " (" << r.detail
                                        << ")" << r.compile_log.substr(0, 1500);
  if (c.peak_gbps > 0) {
    EXPECT_TRUE(r.bench.below_floor) << c.name;
  }
  // the verdict, with its figures, is in the kernel archive
  const auto doc = nlohmann::json::parse(slurp(home.path() + "/kernels/" + c.op + "/" + tools.kernel_id(k) + ".json"),
                                         nullptr, false);
  const auto& attempts = doc.is_object() ? doc["attempts"][shape.label] : nlohmann::json();
  ASSERT_TRUE(attempts.is_array() && !attempts.empty()) << c.name << ": no archived attempt";
  EXPECT_EQ(attempts.back().value("status", ""), sandbox::status_name(r.status));
  EXPECT_TRUE(attempts.back().contains("verify")) << c.name << ": figures kept with the verdict";
}

std::string kernel_with_missing_entry() {
  return "// @thrive op: softmax\n// @thrive entry: the_entry\n#include \"thrive_cpu.h\"\n"
         "THRIVE_EXPORT int another_name(const ThriveArgs*) { return 0; }\n";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string write_text(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  return path;
}

bool is_one_line(const std::string& s) {
  const auto nl = s.find('\n');
  return nl == std::string::npos || nl + 1 == s.size();
}

bool has_embedded(const std::string& relative_path) {
  for (const auto& p : backend::embedded_paths(relative_path))
    if (p == relative_path) return true;
  return false;
}

}  // namespace thrive::test
