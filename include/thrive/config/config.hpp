// Configuration: model dimensions, search budgets, thresholds and paths.
//
// Every knob has an environment variable THRIVE_<NAME>; the seed's spelling
// RSI_<NAME> is accepted as an alias (THRIVE_ wins when both are set). Command-line
// flags override the environment. docs/env.md lists every variable with its
// default and unit; `Config::knobs()` is the single table both read from.
//
// Model defaults are Qwen3-1.7B's Hugging Face config.json: hidden_size 2048,
// intermediate_size 6144, num_attention_heads 16, num_key_value_heads 8,
// head_dim 128, vocab_size 151936, rope_theta 1000000, rms_norm_eps 1e-6,
// max_position_embeddings 40960.
#pragma once

#include <cstdint>
#include <functional>
#include <array>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace thrive::config {

/// The values --device / THRIVE_DEVICE take, and --log-level / THRIVE_LOG_LEVEL (spdlog's levels).
inline constexpr std::array<std::string_view, 3> kDevices{"cpu", "cuda", "auto"};
inline constexpr std::array<std::string_view, 7> kLogLevels{"trace", "debug", "info", "warn", "error", "critical", "off"};
/// Throws Error(kUsage) "`label`: expected one of A, B, ..." unless `value` is one of `choices`;
/// `label` names where the value came from and the value ("--device gpu", "THRIVE_DEVICE=gpu").
void require_choice(std::string_view value, std::span<const std::string_view> choices, const std::string& label);

/// Model dimensions the ops are instantiated at. Counts are elements, not bytes.
struct ModelDims {
  int64_t hidden = 2048;          ///< hidden_size (H)
  int64_t intermediate = 6144;    ///< intermediate_size (I)
  int64_t num_heads = 16;         ///< query heads (NQ)
  int64_t num_kv_heads = 8;       ///< key/value heads (NKV); NQ % NKV == 0 (GQA)
  int64_t head_dim = 128;         ///< per-head dimension (D)
  int64_t vocab = 151936;         ///< vocab_size (V)
  int64_t max_position = 40960;   ///< max_position_embeddings (rows of the RoPE cache)
  double rope_theta = 1.0e6;      ///< RoPE base
  double rms_eps = 1.0e-6;        ///< RMSNorm epsilon

  /// Throws Error(kUsage) naming the first inconsistent value (e.g. hidden not
  /// divisible by num_heads, head_dim odd, a non-positive dimension).
  void validate() const;
};

/// Everything a run is configured with. Units are in the member names.
struct Config {
  ModelDims model;
  std::string home;               ///< THRIVE_HOME; default $HOME/.thrive
  std::string device = "auto";    ///< cpu | cuda | auto
  std::string agent = "search";   ///< search (llm arrives with a later issue)
  int rounds = 6;                 ///< optimizer rounds per op and shape, per pass
  int passes = 1;                 ///< passes over all ops
  double target_speedup = 2.0;    ///< speedup over eager that counts as "reached"
  double peak_bw_gbps = 0.0;      ///< 0 = measure with a copy kernel, else override
  double candidate_timeout_s = 120.0;  ///< wall-clock limit per candidate evaluation
  int64_t worker_memory_mb = 0;        ///< address-space limit of a CPU worker, MiB; 0 = half of RAM
  bool confine = true;                 ///< confine CPU candidates (seccomp, Landlock, fds)
  double bench_max_s = 1.0;       ///< time cap of one timing loop
  int bench_min_reps = 10;        ///< minimum timed repetitions
  double bench_noise = 0.02;      ///< stop when the median's relative 95% CI half-width is below
  double min_gain = 0.02;         ///< a candidate must beat the best by this relative margin
  int64_t max_shape_bytes = 0;    ///< shapes whose minimum bytes exceed this are skipped (0 = backend default)
  int threads = 0;                ///< CPU kernel threads (0 = all online cores)
  std::string cxx = "c++";        ///< host compiler for CPU candidates
  std::string cpu_executor;       ///< the executor program of confined CPU candidates; "" = found beside thrive
  uint64_t seed = 0;              ///< 0 = fresh entropy for every check
  std::string log_level = "info"; ///< spdlog level

  /// Reads THRIVE_* (and RSI_* aliases) from `env` (use environ when null).
  /// Throws Error(kUsage) naming the variable, its value and the expected form.
  static Config from_env(const std::function<const char*(const char*)>& getenv_fn = nullptr);

  /// Checks ranges after flags are applied; throws Error(kUsage).
  void validate() const;

  /// One documented knob: variable name (without prefix), default, unit, meaning.
  struct Knob {
    std::string name, default_value, unit, meaning;
  };
  /// The variables from_env() reads: the first part of the table docs/env.md is generated from
  /// (`thrive env`).
  static const std::vector<Knob>& knobs();
  /// The rest of that table: variables read outside Config, by the outer loop (THRIVE_ACCEPT_RT,
  /// THRIVE_ACCEPT_AT: src/cli/commands/system.cpp) and the LLM agents (LlmSettings::from_env),
  /// which check them where they are read.
  static const std::vector<Knob>& other_variables();
  /// The variable from_env() reads for knob `name` (e.g. "DEVICE") and its value: THRIVE_<name>,
  /// else its alias RSI_<name>; {"", ""} when neither is set. `getenv_fn` as for from_env().
  static std::pair<std::string, std::string> variable(const std::string& name,
                                                      const std::function<const char*(const char*)>& getenv_fn = nullptr);
};

/// Parses an integer; throws Error(kUsage) "what=value: expected an integer ...".
int64_t parse_int(const std::string& what, const std::string& value, int64_t min_value,
                  int64_t max_value);
/// Parses a finite double; throws Error(kUsage) on junk, NaN, or out of range.
double parse_double(const std::string& what, const std::string& value, double min_value,
                    double max_value);

}  // namespace thrive::config
