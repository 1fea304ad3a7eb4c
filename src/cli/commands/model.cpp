// thrive model init --preset qwen3-1.7b|tiny --out DIR [--seed S] [--dtype bf16|f32]: a random-
// weight Hugging Face checkpoint (config.json + model.safetensors).
// thrive e2e --model DIR --batch B --prompt P --gen G [--json]: the Qwen3 engine's throughput
// harness: prefill and decode tokens/s, ms per decode step, peak memory, per-stage breakdown.
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <random>

#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"
#include "thrive/model/qwen3.hpp"

namespace thrive::cli {
namespace {

struct InitFlags {
  std::string preset, out, dtype = "bf16";
  uint64_t seed = 0;
};

struct E2eFlags {
  std::string model, device = "cpu";
  int batch = 1, prompt = 16, gen = 16;
  uint64_t seed = 1;
  bool json = false;
};

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

void run_e2e(const E2eFlags& f) {
  if (f.device != "cpu")
    fail(ErrorCategory::kUsage, "--device {}: the engine runs on cpu in this build (the CUDA path is issue 6's next step)",
         f.device);
  if (f.batch < 1 || f.prompt < 1 || f.gen < 0)
    fail(ErrorCategory::kUsage, "--batch {} --prompt {} --gen {}: expected batch >= 1, prompt >= 1, gen >= 0", f.batch,
         f.prompt, f.gen);
  const auto cfg = model::Qwen3Config::load(f.model);
  if (int64_t(f.prompt) + f.gen > cfg.max_position)
    fail(ErrorCategory::kUsage, "--prompt {} + --gen {} exceeds max_position_embeddings {}", f.prompt, f.gen, cfg.max_position);
  auto t = std::chrono::steady_clock::now();
  auto weights = model::load_weights(cfg, f.model);
  const double load_ms = ms_since(t);
  model::CpuQwen3Engine engine(cfg, std::move(weights), f.batch, int64_t(f.prompt) + f.gen);
  std::mt19937_64 rng(f.seed);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(cfg.vocab - 1));
  std::vector<std::vector<int32_t>> prompts(size_t(f.batch));
  for (auto& p : prompts)
    for (int i = 0; i < f.prompt; ++i) p.push_back(tok(rng));

  t = std::chrono::steady_clock::now();
  auto logits = engine.prefill(prompts);
  auto next = engine.greedy(logits);
  const double prefill_ms = ms_since(t);
  const auto prefill_stages = engine.stages();
  engine.reset_stages();
  std::vector<std::vector<int32_t>> generated(size_t(f.batch));
  t = std::chrono::steady_clock::now();
  for (int s = 0; s < f.gen; ++s) {
    for (int b = 0; b < f.batch; ++b) generated[size_t(b)].push_back(next[size_t(b)]);
    if (s + 1 == f.gen) break;  // the last token needs no forward pass
    logits = engine.decode(next);
    next = engine.greedy(logits);
  }
  const double decode_ms = ms_since(t);
  const int steps = std::max(0, f.gen - 1);
  const auto decode_stages = engine.stages();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);

  // Stage shares of the measured wall time; "host_other" is what no stage timer covered
  // (loop control, allocation), so the rows add up to the wall time.
  auto breakdown = [](const model::StageTimes& st, double wall_ms) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& [name, us] : st.us)
      rows.push_back({{"stage", name}, {"ms", us / 1e3}, {"share", wall_ms > 0 ? us / 1e3 / wall_ms : 0.0},
                      {"calls", st.calls.at(name)}});
    const double other = std::max(0.0, wall_ms - st.total_us() / 1e3);
    rows.push_back({{"stage", "host_other"}, {"ms", other}, {"share", wall_ms > 0 ? other / wall_ms : 0.0}, {"calls", 0}});
    return rows;
  };
  nlohmann::json doc = {
      {"model", f.model}, {"device", "cpu"}, {"precision", "float32"}, {"parameters", cfg.parameters()},
      {"batch", f.batch}, {"prompt", f.prompt}, {"gen", f.gen}, {"load_ms", load_ms},
      {"prefill_ms", prefill_ms}, {"prefill_tokens_per_s", prefill_ms > 0 ? 1e3 * f.batch * f.prompt / prefill_ms : 0.0},
      {"decode_ms", decode_ms}, {"decode_steps", steps},
      {"decode_ms_per_step", steps > 0 ? decode_ms / steps : 0.0},
      {"decode_tokens_per_s", decode_ms > 0 ? 1e3 * f.batch * steps / decode_ms : 0.0},
      {"peak_rss_mb", double(ru.ru_maxrss) / 1024.0}, {"kv_cache_bytes", engine.cache_bytes()},
      {"prefill_stages", breakdown(prefill_stages, prefill_ms)}, {"decode_stages", breakdown(decode_stages, decode_ms)},
      {"tokens", generated}};
  if (f.json) {
    fmt::print("{}\n", doc.dump(2));
    return;
  }
  fmt::print("Qwen3 engine on cpu (float32): {} ({:.1f} M parameters), batch {}, prompt {}, gen {}\n", f.model,
             double(cfg.parameters()) / 1e6, f.batch, f.prompt, f.gen);
  fmt::print("prefill {:.1f} tokens/s ({:.1f} ms); decode {:.1f} tokens/s, {:.2f} ms per step over {} steps; "
             "peak RSS {:.0f} MB; weights loaded in {:.0f} ms\n",
             doc["prefill_tokens_per_s"].get<double>(), prefill_ms, doc["decode_tokens_per_s"].get<double>(),
             doc["decode_ms_per_step"].get<double>(), steps, doc["peak_rss_mb"].get<double>(), load_ms);
  for (const char* phase : {"prefill_stages", "decode_stages"}) {
    fmt::print("{:<18} {:>10} {:>7}\n", phase, "ms", "share");
    for (const auto& r : doc[phase])
      fmt::print("  {:<16} {:>10.3f} {:>6.1f}%\n", r["stage"].get<std::string>(), r["ms"].get<double>(),
                 100.0 * r["share"].get<double>());
  }
  fmt::print("greedy tokens of sequence 0: {}\n", nlohmann::json(generated[0]).dump());
}

}  // namespace

void register_model(CLI::App& app, Context&) {
  auto* cmd = app.add_subcommand("model", "Model checkpoints for the inference engine");
  cmd->require_subcommand(1);
  auto* init = cmd->add_subcommand("init", "Write a random-weight Qwen3 checkpoint (config.json + model.safetensors)");
  static InitFlags f;
  init->add_option("--preset", f.preset, "qwen3-1.7b | tiny")->required();
  init->add_option("--out", f.out, "Checkpoint directory to write")->required();
  init->add_option("--seed", f.seed, "Random seed (default 0)");
  init->add_option("--dtype", f.dtype, "bf16 (default) | f32");
  init->callback([] {
    if (f.dtype != "bf16" && f.dtype != "f32") fail(ErrorCategory::kUsage, "--dtype {}: expected bf16 or f32", f.dtype);
    const auto cfg = model::Qwen3Config::preset(f.preset);
    const auto t = std::chrono::steady_clock::now();
    model::init_checkpoint(cfg, f.out, f.seed, f.dtype == "bf16" ? model::StDtype::kBF16 : model::StDtype::kF32);
    fmt::print("wrote {}/config.json and {}/model.safetensors: {} preset, {:.1f} M parameters, {}, seed {} ({:.1f} s)\n",
               f.out, f.out, f.preset, double(cfg.parameters()) / 1e6, f.dtype, f.seed, ms_since(t) / 1e3);
  });
}

void register_e2e(CLI::App& app, Context&) {
  auto* cmd = app.add_subcommand("e2e", "Run the Qwen3 engine's prefill/decode throughput harness on a checkpoint");
  static E2eFlags f;
  cmd->add_option("--model", f.model, "Checkpoint directory (config.json + *.safetensors)")->required();
  cmd->add_option("--batch", f.batch, "Sequences decoded together (default 1)");
  cmd->add_option("--prompt", f.prompt, "Prompt tokens per sequence, random ids (default 16)");
  cmd->add_option("--gen", f.gen, "Tokens generated per sequence, greedy (default 16)");
  cmd->add_option("--seed", f.seed, "Seed of the random prompt ids (default 1)");
  cmd->add_option("--device", f.device, "cpu (the float32 reference engine)");
  cmd->add_flag("--json", f.json, "Print the full result as JSON");
  cmd->callback([] { run_e2e(f); });
}

}  // namespace thrive::cli
