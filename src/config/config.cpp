#include "thrive/config/config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/ranges.h>

#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive::config {
namespace {

std::string home_default() {
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.thrive";
}

}  // namespace

int64_t parse_int(const std::string& what, const std::string& value, int64_t min_value,
                  int64_t max_value) {
  errno = 0;
  char* end = nullptr;
  long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || end == value.c_str() || *end != '\0' || errno == ERANGE)
    fail(ErrorCategory::kUsage, "{}={}: expected an integer in [{}, {}]", what, value,
         min_value, max_value);
  if (parsed < min_value || parsed > max_value)
    fail(ErrorCategory::kUsage, "{}={}: expected an integer in [{}, {}]", what, value,
         min_value, max_value);
  return parsed;
}

double parse_double(const std::string& what, const std::string& value, double min_value,
                    double max_value) {
  errno = 0;
  char* end = nullptr;
  double parsed = std::strtod(value.c_str(), &end);
  if (value.empty() || end == value.c_str() || *end != '\0' || errno == ERANGE ||
      !std::isfinite(parsed) || parsed < min_value || parsed > max_value)
    fail(ErrorCategory::kUsage, "{}={}: expected a number in [{}, {}]", what, value, min_value,
         max_value);
  return parsed;
}

void ModelDims::validate() const {
  auto positive = [](const char* name, int64_t v) {
    if (v <= 0) fail(ErrorCategory::kUsage, "{}={}: expected a positive integer", name, v);
  };
  positive("THRIVE_HIDDEN", hidden);
  positive("THRIVE_INTERMEDIATE", intermediate);
  positive("THRIVE_NUM_HEADS", num_heads);
  positive("THRIVE_NUM_KV_HEADS", num_kv_heads);
  positive("THRIVE_HEAD_DIM", head_dim);
  positive("THRIVE_VOCAB", vocab);
  positive("THRIVE_MAX_POSITION", max_position);
  if (hidden % num_heads != 0)
    fail(ErrorCategory::kUsage,
         "THRIVE_HIDDEN={}: expected a multiple of THRIVE_NUM_HEADS={} (hidden is split across "
         "query heads)",
         hidden, num_heads);
  if (num_heads % num_kv_heads != 0)
    fail(ErrorCategory::kUsage,
         "THRIVE_NUM_HEADS={}: expected a multiple of THRIVE_NUM_KV_HEADS={} (GQA groups)",
         num_heads, num_kv_heads);
  if (head_dim % 2 != 0)
    fail(ErrorCategory::kUsage, "THRIVE_HEAD_DIM={}: expected an even number (RoPE pairs halves)",
         head_dim);
  if (!(rope_theta > 1.0))
    fail(ErrorCategory::kUsage, "THRIVE_ROPE_THETA={}: expected a number > 1", rope_theta);
  if (!(rms_eps > 0.0 && rms_eps < 1.0))
    fail(ErrorCategory::kUsage, "THRIVE_RMS_EPS={}: expected a number in (0, 1)", rms_eps);
}

const std::vector<Config::Knob>& Config::knobs() {
  static const std::vector<Knob> table = {
      {"HIDDEN", "2048", "elements", "hidden_size of the model (Qwen3-1.7B)"},
      {"INTERMEDIATE", "6144", "elements", "intermediate_size (MLP width)"},
      {"NUM_HEADS", "16", "count", "query heads"},
      {"NUM_KV_HEADS", "8", "count", "key/value heads (GQA); must divide NUM_HEADS"},
      {"HEAD_DIM", "128", "elements", "per-head dimension; even"},
      {"VOCAB", "151936", "elements", "vocab_size (softmax row width)"},
      {"MAX_POSITION", "40960", "positions", "rows of the RoPE cos/sin cache"},
      {"ROPE_THETA", "1000000", "-", "RoPE base frequency"},
      {"RMS_EPS", "1e-6", "-", "RMSNorm epsilon"},
      {"HOME", "~/.thrive", "path", "memory.db, kernel archive, compile cache"},
      {"DEVICE", "auto", "cpu|cuda|auto", "backend to optimize for"},
      {"AGENT", "search", "search|llm", "agent driving the inner loop (llm: see the README's LLM agents section)"},
      {"ROUNDS", "6", "rounds", "optimizer rounds per op and shape, per pass"},
      {"PASSES", "1", "passes", "passes over all ops (pass 2 starts from memory)"},
      {"TARGET_SPEEDUP", "2.0", "x", "speedup over eager that counts as reaching the target"},
      {"PEAK_BW_GBPS", "0", "GB/s", "memory bandwidth ceiling; 0 = measure with a copy kernel"},
      {"CANDIDATE_TIMEOUT_S", "120", "s", "wall-clock limit of one candidate's evaluation"},
      {"WORKER_MEMORY_MB", "0", "MiB", "address-space limit of a CPU candidate's worker; 0 = half "
                                       "of physical memory"},
      {"CONFINE", "1", "0/1", "confine CPU candidates: their own exec'd process, no fork/exec/network/signals to "
                              "others, file metadata or machine settings (seccomp), no capabilities, no file writes "
                              "and no reads outside the system's libraries and the compiled kernels (Landlock), no "
                              "environment but OpenMP's and the locale's, inherited files closed; 0 runs them in "
                              "THRIVE's worker, where they can read its API keys: for debugging only"},
      {"BENCH_MAX_S", "1.0", "s", "time cap of one timing loop"},
      {"BENCH_MIN_REPS", "10", "count", "minimum timed repetitions"},
      {"BENCH_NOISE", "0.02", "fraction", "stop timing once the median's 95% CI half-width "
                                          "relative to it is below this"},
      {"MIN_GAIN", "0.02", "fraction", "relative margin a candidate must beat the best by"},
      {"MAX_SHAPE_BYTES", "0", "bytes", "skip shapes whose minimum traffic exceeds this; "
                                        "0 = 256 MiB on cpu, unlimited on cuda"},
      {"THREADS", "0", "count", "CPU kernel threads; 0 = all online cores"},
      {"CXX", "c++", "command", "host compiler for CPU candidates"},
      {"CPU_EXECUTOR", "", "path", "program a confined CPU candidate runs in; empty = thrive-cpu-executor beside thrive"},
      {"SEED", "0", "-", "RNG seed for verification inputs; 0 = fresh entropy every check"},
      {"LOG_LEVEL", "info", "trace..off", "log level (logs go to stderr)"},
  };
  return table;
}

const std::vector<Config::Knob>& Config::other_variables() {
  static const std::vector<Knob> table = {
      // read by the outer loop (`optimize --system`) when --r-t / --a-t are not given
      {"ACCEPT_RT", "0.3", "fraction", "outer loop: keep a change if T'/T_best > 1 + r_t"},
      {"ACCEPT_AT", "0.3", "x start", "outer loop: or if T' - T_best > a_t (T in multiples of the "
                                       "starting system's throughput)"},
      // read by the LLM agents (`--agent llm`; the README's LLM agents section)
      {"LLM_PROVIDER", "anthropic|openai", "-", "anthropic when ANTHROPIC_API_KEY is set, else openai"},
      {"LLM_BASE_URL", "provider's", "URL", "e.g. http://localhost:8000/v1 for a local OpenAI-compatible "
                                            "server"},
      {"MODEL", "-", "name", "model for every role without its own THRIVE_MODEL_<ROLE>"},
      {"MODEL_<ROLE>", "THRIVE_MODEL", "name", "model of one role: KERNEL_GENERATOR, KERNEL_OPTIMIZER, "
                                               "KERNEL_REPAIRER, PROFILER_ANALYST, ORCHESTRATOR"},
      {"EFFORT", "medium", "low|medium|high", "2048, 4096 or 8192 output tokens per model call"},
      {"PER_RUN_USD", "5", "USD", "budget of one run; it stops cleanly there, keeping the best kernel"},
      {"LLM_WALL_S", "1800", "s", "wall-clock cap of one LLM-agent run"},
      {"LLM_MAX_TURNS", "16", "count", "model calls per role conversation (1 to 1000)"},
      {"LLM_PRICES", "config/llm_prices.json", "path", "USD per million input and output tokens per model"},
      {"PROMPTS_DIR", "prompts/roles", "path", "the roles' system prompts (<role>.md)"},
  };
  return table;
}

std::pair<std::string, std::string> Config::variable(const std::string& name,
                                                     const std::function<const char*(const char*)>& getenv_fn) {
  for (const char* prefix : {"THRIVE_", "RSI_"}) {
    std::string var = prefix + name;
    const char* v = getenv_fn ? getenv_fn(var.c_str()) : std::getenv(var.c_str());
    if (v != nullptr) return {var, v};
  }
  return {"", ""};
}

Config Config::from_env(const std::function<const char*(const char*)>& getenv_fn) {
  auto get = [&](const std::string& name) { return variable(name, getenv_fn); };
  Config c;
  c.home = home_default();
  auto read_int = [&](const char* name, auto& field, int64_t lo, int64_t hi) {
    auto [var, value] = get(name);
    if (!var.empty()) field = static_cast<std::remove_reference_t<decltype(field)>>(
                          parse_int(var, value, lo, hi));
  };
  auto read_double = [&](const char* name, double& field, double lo, double hi) {
    auto [var, value] = get(name);
    if (!var.empty()) field = parse_double(var, value, lo, hi);
  };
  auto read_string = [&](const char* name, std::string& field) {
    auto [var, value] = get(name);
    if (!var.empty()) {
      if (value.find_first_not_of(" \t\n\r\f\v") == std::string::npos)
        fail(ErrorCategory::kUsage, "{}='{}': expected a non-empty value", var, value);
      field = value;
    }
  };
  constexpr int64_t kBig = int64_t{1} << 40;
  read_int("HIDDEN", c.model.hidden, 1, kBig);
  read_int("INTERMEDIATE", c.model.intermediate, 1, kBig);
  read_int("NUM_HEADS", c.model.num_heads, 1, 4096);
  read_int("NUM_KV_HEADS", c.model.num_kv_heads, 1, 4096);
  read_int("HEAD_DIM", c.model.head_dim, 2, 65536);
  read_int("VOCAB", c.model.vocab, 1, kBig);
  read_int("MAX_POSITION", c.model.max_position, 1, int64_t{1} << 24);
  read_double("ROPE_THETA", c.model.rope_theta, 1.0, 1e12);
  read_double("RMS_EPS", c.model.rms_eps, 1e-30, 1.0);
  // Enumerated values are checked here too, so the message names the variable
  // (THRIVE_DEVICE=gpu or RSI_DEVICE=gpu), not the field validate() sees.
  auto read_choice = [&](const char* name, std::string& field, std::span<const std::string_view> allowed) {
    read_string(name, field);
    auto [var, value] = get(name);
    require_choice(field, allowed, var + "=" + value);
  };
  static constexpr std::array<std::string_view, 2> kAgents{"search", "llm"};
  read_string("HOME", c.home);
  read_choice("DEVICE", c.device, kDevices);
  read_choice("AGENT", c.agent, kAgents);
  read_int("ROUNDS", c.rounds, 0, 10000);
  read_int("PASSES", c.passes, 1, 1000);
  read_double("TARGET_SPEEDUP", c.target_speedup, 1e-6, 1e9);
  read_double("PEAK_BW_GBPS", c.peak_bw_gbps, 0.0, 1e9);
  read_double("CANDIDATE_TIMEOUT_S", c.candidate_timeout_s, 0.1, 86400.0);
  read_int("WORKER_MEMORY_MB", c.worker_memory_mb, 0, int64_t{1} << 30);
  {
    int64_t confine = c.confine ? 1 : 0;
    read_int("CONFINE", confine, 0, 1);
    c.confine = confine != 0;
  }
  read_double("BENCH_MAX_S", c.bench_max_s, 1e-3, 3600.0);
  read_int("BENCH_MIN_REPS", c.bench_min_reps, 3, 1000000);
  read_double("BENCH_NOISE", c.bench_noise, 1e-6, 1.0);
  read_double("MIN_GAIN", c.min_gain, 0.0, 10.0);
  read_int("MAX_SHAPE_BYTES", c.max_shape_bytes, 0, int64_t{1} << 50);
  read_int("THREADS", c.threads, 0, 4096);
  read_string("CXX", c.cxx);
  {  // empty = the default (found beside thrive); otherwise an executable file, checked now
    auto [var, value] = get("CPU_EXECUTOR");
    if (!var.empty() && !value.empty()) {
      if (!is_executable_file(value))
        fail(ErrorCategory::kUsage, "{}={}: expected the path of the thrive-cpu-executor program (an executable file)",
             var, value);
      c.cpu_executor = value;
    }
  }
  {
    auto [var, value] = get("SEED");
    if (!var.empty()) c.seed = static_cast<uint64_t>(parse_int(var, value, 0, INT64_MAX));
  }
  read_choice("LOG_LEVEL", c.log_level, kLogLevels);
  c.validate();
  return c;
}

void require_choice(std::string_view value, std::span<const std::string_view> choices, const std::string& label) {
  for (const auto c : choices)
    if (value == c) return;
  fail(ErrorCategory::kUsage, "{}: expected one of {}", label, fmt::join(choices, ", "));
}

void Config::validate() const {
  model.validate();
  require_choice(device, kDevices, "device=" + device);
  if (agent != "search" && agent != "llm")
    fail(ErrorCategory::kUsage, "agent={}: expected search or llm", agent);
  if (rounds < 0) fail(ErrorCategory::kUsage, "rounds={}: expected an integer >= 0", rounds);
  if (passes < 1) fail(ErrorCategory::kUsage, "passes={}: expected an integer >= 1", passes);
  require_choice(log_level, kLogLevels, "THRIVE_LOG_LEVEL=" + log_level);
}

}  // namespace thrive::config
