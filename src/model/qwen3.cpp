#include "thrive/model/qwen3.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "thrive/core/error.hpp"
#include "thrive/core/json.hpp"
#include "thrive/core/files.hpp"
#include "thrive/ops/dtype.hpp"
#include "src/model/parallel_for.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

namespace thrive::model {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// splitmix64: a seedable, splittable generator (Steele et al. 2014), so chunks of a tensor are
// filled in parallel and the file does not depend on the thread count.
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Standard normal by Box-Muller from two uniforms in (0, 1].
double normal(uint64_t& s) {
  const double u1 = (double(splitmix(s) >> 11) + 1.0) / 9007199254740992.0;
  const double u2 = double(splitmix(s) >> 11) / 9007199254740992.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

int64_t get_int(const nlohmann::json& j, const std::string& file, const char* key, bool required = true,
                int64_t fallback = 0) {
  if (!j.contains(key)) {
    if (required) fail(ErrorCategory::kInput, "{}: missing \"{}\"", file, key);
    return fallback;
  }
  if (!j[key].is_number_integer()) fail(ErrorCategory::kInput, "{}: \"{}\" is {}: expected an integer", file, key, j[key].dump());
  // past int64 (2^64 - 1 would read as -1): said as written, not wrapped
  if (j[key].is_number_unsigned() && j[key].get<uint64_t>() > uint64_t(INT64_MAX))
    fail(ErrorCategory::kInput, "{}: \"{}\" is {}: past the int64 range", file, key, j[key].dump());
  return j[key].get<int64_t>();
}

double get_double(const nlohmann::json& j, const std::string& file, const char* key, double fallback) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number()) fail(ErrorCategory::kInput, "{}: \"{}\" is {}: expected a number", file, key, j[key].dump());
  return j[key].get<double>();
}

bool get_bool(const nlohmann::json& j, const std::string& file, const char* key, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean()) fail(ErrorCategory::kInput, "{}: \"{}\" is {}: expected true or false", file, key, json_excerpt(j[key]));
  return j[key].get<bool>();
}

// A RoPE parameter object (transformers' "rope_scaling", or "rope_parameters" from transformers 5
// on) must be absent, null, or of rope_type "default" (older files say "type"): Qwen3's RoPE is
// unscaled, and YaRN, linear, dynamic NTK or llama3 scaling change every angle, so reading past
// one would give other logits than the checkpoint's model.
// `name`: where r is, for the message ("rope_scaling", "rope_parameters"."full_attention").
void check_rope_type(const nlohmann::json& r, const std::string& file, const std::string& name) {
  const char* type_key = r.contains("rope_type") ? "rope_type" : "type";
  if (!r.contains(type_key) || r[type_key] != "default")
    fail(ErrorCategory::kInput, "{}: {} is {}: this engine implements Qwen3's unscaled RoPE (rope_type \"default\"); "
         "YaRN, linear, dynamic and other RoPE scalings are not implemented", file, name, json_excerpt(r));
}

// j[key] when it is an object, null when absent or null; anything else is an input error.
const nlohmann::json* optional_object(const nlohmann::json& j, const std::string& file, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return nullptr;
  if (!j[key].is_object())
    fail(ErrorCategory::kInput, "{}: \"{}\" is {}: expected null or an object", file, key, json_excerpt(j[key]));
  return &j[key];
}

// The RoPE base: "rope_theta" (transformers before 5) or "rope_parameters"."rope_theta"
// (transformers 5). Required: Qwen3Config's default when it is absent has been 10000 while
// Qwen3's checkpoints give 1000000, so a guess would change every angle. transformers 5 also
// writes rope_parameters per layer type ({"full_attention": {...}, "sliding_attention": {...}});
// every layer here is full attention (check_full_attention), so the "full_attention" entry is
// the one read and checked.
double rope_theta_of(const nlohmann::json& j, const std::string& file) {
  if (const auto* scaling = optional_object(j, file, "rope_scaling")) check_rope_type(*scaling, file, "\"rope_scaling\"");
  const nlohmann::json* params = optional_object(j, file, "rope_parameters");
  if (params) {
    std::string name = "\"rope_parameters\"";
    if (!params->contains("rope_type") && !params->contains("type") && params->contains("full_attention")) {
      params = optional_object(*params, file + " rope_parameters", "full_attention");
      name += ".\"full_attention\"";
      if (!params) fail(ErrorCategory::kInput, "{}: {} is null: expected the full-attention layers' RoPE parameters",
                        file, name);
    }
    check_rope_type(*params, file, name);
  }
  // transformers rotates only head_dim x partial_rotary_factor dimensions when it is given
  for (const nlohmann::json* scope : {&j, params})
    if (scope && scope->contains("partial_rotary_factor") && (*scope)["partial_rotary_factor"] != 1.0)
      fail(ErrorCategory::kInput, "{}: \"partial_rotary_factor\" is {}: this engine rotates every dimension of a head "
           "(Qwen3: 1 or absent)", file, json_excerpt((*scope)["partial_rotary_factor"]));
  const bool top = j.contains("rope_theta"), nested = params && params->contains("rope_theta");
  if (!top && !nested)
    fail(ErrorCategory::kInput, "{}: missing \"rope_theta\" (or \"rope_parameters\".\"rope_theta\"): the RoPE base, "
         "1000000 in Qwen3's checkpoints", file);
  const double theta = top ? get_double(j, file, "rope_theta", 0) : 0;
  if (!nested) return theta;
  const double inner = get_double(*params, file + " rope_parameters", "rope_theta", 0);
  if (top && inner != theta)
    fail(ErrorCategory::kInput, "{}: \"rope_theta\" {} and \"rope_parameters\".\"rope_theta\" {} disagree", file, theta, inner);
  return inner;
}

// Every layer is full causal attention in Qwen3's checkpoints. Sliding-window layers
// ("use_sliding_window": true, or "sliding_attention" in "layer_types") are not implemented.
void check_full_attention(const nlohmann::json& j, const std::string& file, int64_t layers) {
  if (get_bool(j, file, "use_sliding_window", false))
    fail(ErrorCategory::kInput, "{}: \"use_sliding_window\" is true: sliding-window attention is not implemented "
         "(Qwen3's checkpoints set false)", file);
  if (!j.contains("layer_types") || j["layer_types"].is_null()) return;
  const auto& t = j["layer_types"];
  if (!t.is_array() || int64_t(t.size()) != layers)
    fail(ErrorCategory::kInput, "{}: \"layer_types\" is {}: expected an array of {} entries (num_hidden_layers)", file,
         json_excerpt(t), layers);
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] != "full_attention")
      fail(ErrorCategory::kInput, "{}: \"layer_types\"[{}] is {}: this engine implements \"full_attention\" layers "
           "only", file, i, json_excerpt(t[i]));
}

// out[r][o] = sum_i x[r][i] * w[o][i]: x [rows][in], w [out][in] (HF's Linear layout).
void linear(const float* x, int64_t rows, int64_t in, const std::vector<float>& w, int64_t out, float* y,
            int max_threads = 0) {
  parallel_for(out, std::max<int64_t>(1, 16384 / std::max<int64_t>(in, 1)), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const float* wr = w.data() + o * in;
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * in;
        float s = 0.f;
        for (int64_t i = 0; i < in; ++i) s += xr[i] * wr[i];
        y[r * out + o] = s;
      }
    }
  }, max_threads);
}

// y = x / sqrt(mean(x^2) + eps) * w over each row of `width`.
void rmsnorm(const float* x, int64_t rows, int64_t width, const std::vector<float>& w, double eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < width; ++i) ss += double(x[r * width + i]) * x[r * width + i];
    const float inv = float(1.0 / std::sqrt(ss / double(width) + eps));
    for (int64_t i = 0; i < width; ++i) y[r * width + i] = x[r * width + i] * inv * w[size_t(i)];
  }
}

}  // namespace

// ---- configuration ---------------------------------------------------------------------------

Qwen3Config Qwen3Config::preset(const std::string& name) {
  Qwen3Config c;
  if (name == "qwen3-1.7b") {
    c.hidden = 2048, c.intermediate = 6144, c.layers = 28, c.heads = 16, c.kv_heads = 8, c.head_dim = 128;
    c.vocab = 151936, c.max_position = 40960, c.rope_theta = 1e6, c.rms_eps = 1e-6, c.tie_embeddings = true;
  } else if (name == "tiny") {
    c.hidden = 64, c.intermediate = 128, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16;
    c.vocab = 256, c.max_position = 4096, c.rope_theta = 1e6, c.rms_eps = 1e-6, c.tie_embeddings = true;
  } else {
    fail(ErrorCategory::kUsage, "preset '{}': expected qwen3-1.7b or tiny", name);
  }
  return c;
}

void Qwen3Config::validate(const std::string& where) const {
  const std::pair<const char*, int64_t> positive[] = {
      {"hidden_size", hidden}, {"intermediate_size", intermediate}, {"num_hidden_layers", layers},
      {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads}, {"head_dim", head_dim},
      {"vocab_size", vocab}, {"max_position_embeddings", max_position}};
  for (const auto& [name, v] : positive)
    if (v < 1 || v > (int64_t(1) << 31)) fail(ErrorCategory::kInput, "{}: \"{}\" is {}: expected 1 to 2^31", where, name, v);
  if (heads % kv_heads != 0)
    fail(ErrorCategory::kInput, "{}: num_attention_heads {} is not a multiple of num_key_value_heads {} (GQA groups)",
         where, heads, kv_heads);
  if (head_dim % 2 != 0) fail(ErrorCategory::kInput, "{}: head_dim {} is odd: RoPE rotates halves", where, head_dim);
  if (!(rope_theta > 1.0)) fail(ErrorCategory::kInput, "{}: rope_theta {} must be > 1", where, rope_theta);
  // float32's smallest normal number: a smaller eps rounds to 0 or a denormal in the float32 and
  // bf16 kernels, and a row of zeros then normalizes to 0 x inf = NaN
  if (!(rms_eps >= 1.17549435e-38 && rms_eps < 1.0))
    fail(ErrorCategory::kInput, "{}: rms_norm_eps {} must be in [1.18e-38, 1) (at least float32's smallest normal "
         "number, below 1)", where, rms_eps);
}

Qwen3Config Qwen3Config::load(const std::string& dir) {
  const std::string file = dir + "/config.json";
  std::error_code ec;
  const auto dir_status = std::filesystem::status(dir, ec);
  if (!std::filesystem::exists(dir_status))
    fail(ErrorCategory::kInput, "{}: no such directory (expected a checkpoint directory: config.json and *.safetensors)", dir);
  if (!std::filesystem::is_directory(dir_status))
    fail(ErrorCategory::kInput, "{}: not a directory (expected a checkpoint directory: config.json and *.safetensors)", dir);
  if (!std::filesystem::exists(file)) fail(ErrorCategory::kInput, "{}: missing (a checkpoint directory holds config.json)", file);
  std::string why;
  auto j = parse_json_bounded(read_file(file, Qwen3Config::kMaxConfigJsonBytes), 64, &why);
  if (!j.is_object()) fail(ErrorCategory::kInput, "{}: expected a JSON object, got {}", file, json_kind(j, why));
  // What this engine implements: SiLU gating and bias-free attention projections.
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    fail(ErrorCategory::kInput, "{}: \"hidden_act\" is {}: this engine implements Qwen3's \"silu\"", file,
         json_excerpt(j["hidden_act"]));
  if (j.contains("attention_bias") && j["attention_bias"] != false)
    fail(ErrorCategory::kInput, "{}: \"attention_bias\" is {}: this engine implements Qwen3's bias-free "
         "projections (false)", file, json_excerpt(j["attention_bias"]));
  // Qwen3 by whichever of the two fields is there, and neither may name something else (compared
  // as JSON: a model_type of another type is simply not "qwen3", not a type error)
  const bool has_type = j.contains("model_type"), has_arch = j.contains("architectures");
  bool arch_qwen3 = false;
  if (has_arch && j["architectures"].is_array())
    for (const auto& a : j["architectures"]) arch_qwen3 = arch_qwen3 || (a.is_string() && a.get<std::string>() == "Qwen3ForCausalLM");
  if ((!has_type && !has_arch) || (has_type && j["model_type"] != "qwen3") || (has_arch && !arch_qwen3))
    fail(ErrorCategory::kInput, "{}: architectures {} / model_type {}: expected Qwen3ForCausalLM / qwen3", file,
         json_excerpt(j.value("architectures", nlohmann::json()), 200), json_excerpt(j.value("model_type", nlohmann::json()), 200));
  // Variants whose tensors this engine would misread: mixture-of-experts MLPs (Qwen3-MoE's
  // num_experts) and quantized weights (transformers' quantization_config: GPTQ, AWQ, FP8, ...)
  for (const char* key : {"num_experts", "quantization_config"})
    if (j.contains(key) && !j[key].is_null() && !(j[key].is_number() && j[key] == 0))
      fail(ErrorCategory::kInput, "{}: \"{}\" is {}: this engine implements dense Qwen3 with bf16, fp16 or fp32 "
           "weights", file, key, json_excerpt(j[key]));
  Qwen3Config c;
  // The shapes are required: transformers' Qwen3Config fills a missing one from its signature
  // (num_key_value_heads 32, head_dim 128 in 4.51), which is rarely the checkpoint's.
  c.hidden = get_int(j, file, "hidden_size");
  c.intermediate = get_int(j, file, "intermediate_size");
  c.layers = get_int(j, file, "num_hidden_layers");
  c.heads = get_int(j, file, "num_attention_heads");
  c.kv_heads = get_int(j, file, "num_key_value_heads");
  c.head_dim = get_int(j, file, "head_dim");
  c.vocab = get_int(j, file, "vocab_size");
  // Optional, with Qwen3Config's defaults (transformers 4.51 onwards): max_position_embeddings
  // only bounds the context here.
  c.max_position = get_int(j, file, "max_position_embeddings", false, 32768);
  c.rope_theta = rope_theta_of(j, file);
  c.rms_eps = get_double(j, file, "rms_norm_eps", 1e-6);
  c.tie_embeddings = get_bool(j, file, "tie_word_embeddings", false);
  check_full_attention(j, file, c.layers);
  c.validate(file);
  return c;
}

nlohmann::json Qwen3Config::to_json() const {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"model_type", "qwen3"},
          {"hidden_size", hidden},
          {"intermediate_size", intermediate},
          {"num_hidden_layers", layers},
          {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads},
          {"head_dim", head_dim},
          {"vocab_size", vocab},
          {"max_position_embeddings", max_position},
          {"rope_theta", rope_theta},
          {"rms_norm_eps", rms_eps},
          {"tie_word_embeddings", tie_embeddings},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"torch_dtype", "bfloat16"},
          {"bos_token_id", 0},
          {"eos_token_id", 1}};
}

std::vector<StTensorInfo> Qwen3Config::tensor_layout(StDtype dtype) const {
  std::vector<StTensorInfo> t;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    StTensorInfo i;
    i.name = std::move(name);
    i.dtype = dtype;
    i.shape = std::move(shape);
    t.push_back(std::move(i));
  };
  add("model.embed_tokens.weight", {vocab, hidden});
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {hidden});
    add(p + "self_attn.q_proj.weight", {heads * head_dim, hidden});
    add(p + "self_attn.k_proj.weight", {kv_heads * head_dim, hidden});
    add(p + "self_attn.v_proj.weight", {kv_heads * head_dim, hidden});
    add(p + "self_attn.o_proj.weight", {hidden, heads * head_dim});
    add(p + "self_attn.q_norm.weight", {head_dim});
    add(p + "self_attn.k_norm.weight", {head_dim});
    add(p + "post_attention_layernorm.weight", {hidden});
    add(p + "mlp.gate_proj.weight", {intermediate, hidden});
    add(p + "mlp.up_proj.weight", {intermediate, hidden});
    add(p + "mlp.down_proj.weight", {hidden, intermediate});
  }
  add("model.norm.weight", {hidden});
  if (!tie_embeddings) add("lm_head.weight", {vocab, hidden});
  return t;
}

int64_t Qwen3Config::parameters() const {
  // tensor_layout's element counts summed in closed form (no layout built: num_hidden_layers may
  // be absurd before check_checkpoint_fits has refused it), in double: exact below 2^53,
  // saturated past int64
  const double H = double(hidden), QD = double(heads * head_dim), KD = double(kv_heads * head_dim);
  const double per_layer = 2 * H + 2 * double(head_dim) + 2 * QD * H + 2 * KD * H + 3 * double(intermediate) * H;
  const double n = double(vocab) * H * (tie_embeddings ? 1 : 2) + H + double(layers) * per_layer;
  return n >= 9.2e18 ? INT64_MAX : int64_t(n);
}

// ---- checkpoints -----------------------------------------------------------------------------

void init_checkpoint(const Qwen3Config& cfg, const std::string& dir, uint64_t seed, StDtype dtype, bool replace) {
  cfg.validate("model init");
  if (dtype == StDtype::kF16) fail(ErrorCategory::kUsage, "model init: F16 checkpoints are read, not written; use bf16 or f32");
  ensure_writable_dir(dir, "--out");
  const auto layout = cfg.tensor_layout(dtype);
  const std::string weights = dir + "/model.safetensors";
  SafetensorsWriter w(weights, layout, {{"format", "pt"}, {"producer", "thrive model init"}});
  constexpr int64_t kChunk = int64_t(1) << 20;
  std::vector<uint8_t> bytes;
  for (size_t ti = 0; ti < layout.size(); ++ti) {
    const auto& t = layout[ti];
    const bool norm = t.shape.size() == 1;
    const int64_t n = t.elements(), esize = st_dtype_bytes(dtype);
    bytes.assign(size_t(n * esize), 0);
    parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        uint64_t s = seed * 0x2545f4914f6cdd1dull ^ (uint64_t(ti) << 40) ^ uint64_t(c);
        for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
          const float v = float(norm ? 1.0 + 0.1 * normal(s) : 0.02 * normal(s));
          if (dtype == StDtype::kF32) {
            std::memcpy(&bytes[size_t(i * 4)], &v, 4);
          } else {
            const uint16_t h = ops::float_to_bf16(v);
            std::memcpy(&bytes[size_t(i * 2)], &h, 2);
          }
        }
      }
    });
    w.append(bytes.data(), bytes.size());
  }
  w.close();
  StagedFile config(dir + "/config.json");
  auto doc = cfg.to_json();
  doc["torch_dtype"] = dtype == StDtype::kF32 ? "float32" : "bfloat16";  // what the weights are stored in
  const std::string text = doc.dump(2) + "\n";
  config.write(text.data(), text.size());
  config.close();
  // Nothing is replaced before both files are complete and both names can take them. The old
  // weights wait under a temporary name until config.json is in place too, so a failed second
  // rename puts them back instead of leaving new weights beside the old config.
  check_replaceable(weights);
  check_replaceable(config.path());
  std::error_code ec;
  std::string aside;
  if (replace && fs::exists(fs::symlink_status(weights, ec))) {
    StagedFile placeholder(weights);  // a unique name beside it, then the old entry moved onto it
    if (std::rename(weights.c_str(), placeholder.temp_path().c_str()) != 0)
      fail(ErrorCategory::kStorage, "{}: cannot move aside ({})", weights, std::strerror(errno));
    aside = placeholder.temp_path();  // the placeholder's destructor would remove it: keep the name only
    placeholder.release();
  }
  bool weights_in = false;
  try {
    w.commit(replace);
    weights_in = true;
    config.commit(replace);
  } catch (...) {
    if (!aside.empty()) std::rename(aside.c_str(), weights.c_str());  // the old weights back
    else if (weights_in) fs::remove(weights, ec);  // no old weights: none of this run's either
    throw;
  }
  if (!aside.empty()) fs::remove(aside, ec);
}

namespace {
// Error(kInput) naming the file and tensor unless the checkpoint's tensor has want's shape and a
// dtype the engine reads (BF16, F16 or F32; its header may hold others for tensors not loaded).
void check_tensor_entry(const Checkpoint& ck, const StTensorInfo& want) {
  const auto& have = ck.info(want.name);
  if (have.shape != want.shape)
    fail(ErrorCategory::kInput, "{}: tensor '{}' has shape {}: config.json implies {}", ck.file_of(want.name),
         want.name, nlohmann::json(have.shape).dump(), nlohmann::json(want.shape).dump());
  check_float_dtype(ck.file_of(want.name), have);
}
}  // namespace

namespace {
// True when any of p[0, n) is NaN or infinite: a branch-free pass over the exponent bits, which
// the compiler vectorizes (it runs over every weight at each load and over the residual stream
// after every CPU layer).
bool any_nonfinite(const float* p, size_t n) {
  uint32_t any = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, p + i, 4);
    any |= uint32_t((u & 0x7f800000u) == 0x7f800000u);
  }
  return any != 0;
}
}  // namespace

std::vector<float> load_tensor_f32(const Checkpoint& ck, const StTensorInfo& want) {
  check_tensor_entry(ck, want);
  auto v = ck.to_f32(want.name);
  // A NaN or infinite weight would spread through every later layer; no trained or THRIVE-made
  // checkpoint has one (the count and first index only when the pass finds one)
  int64_t bad = 0, first = -1;
  if (any_nonfinite(v.data(), v.size()))
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]) && bad++ == 0) first = int64_t(i);
  if (bad > 0)
    fail(ErrorCategory::kInput, "{}: tensor '{}' holds {} NaN or infinite values (the first at element {}): expected "
         "finite weights", ck.file_of(want.name), want.name, bad, first);
  return v;
}

void check_checkpoint_fits(const Checkpoint& ck, const Qwen3Config& cfg, const std::string& dir) {
  // Before the layout is built: an absurd num_hidden_layers would otherwise allocate gigabytes of
  // tensor names first. A layer left over would run the checkpoint as a shallower model.
  const auto layer_tensor = [](int64_t l) { return "model.layers." + std::to_string(l) + ".input_layernorm.weight"; };
  // N of a "model.layers.N." name (at most 9 digits), -1 for any other name
  const auto layer_of = [](const std::string& n) -> int64_t {
    if (!n.starts_with("model.layers.")) return -1;
    const auto digits = n.substr(13, n.find('.', 13) - 13);
    if (digits.empty() || digits.size() >= 10 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoll(digits);
  };
  const auto names = ck.names();
  if (names.empty())
    fail(ErrorCategory::kInput, "{}: its {} safetensors file(s) hold no tensor at all", dir, ck.file_count());
  if (!ck.has(layer_tensor(cfg.layers - 1))) {
    // what the files do hold: the deepest layer index among "model.layers.N." names
    int64_t deepest = -1;
    for (const auto& n : names) deepest = std::max(deepest, layer_of(n));
    fail(ErrorCategory::kInput, "{}: no tensor '{}': config.json's num_hidden_layers {} is more than the checkpoint "
         "holds (its {} tensors in {} file(s) {})", dir, layer_tensor(cfg.layers - 1), cfg.layers, names.size(),
         ck.file_count(), deepest < 0 ? std::string("name no model.layers.N tensor")
                                      : fmt::format("reach layer {} at most", deepest));
  }
  if (ck.has(layer_tensor(cfg.layers)))
    fail(ErrorCategory::kInput, "{}: tensor '{}' exists: the checkpoint holds more layers than config.json's "
         "num_hidden_layers {}", dir, layer_tensor(cfg.layers), cfg.layers);
  for (const auto& name : names)
    if (name.ends_with(".bias"))
      fail(ErrorCategory::kInput, "{}: tensor '{}' is a bias: this engine implements Qwen3's bias-free projections "
           "(config.json's attention_bias false)", dir, name);
  // Every tensor's shape from the headers alone (the layer count is the checkpoint's now, so the
  // layout is small): a config.json that disagrees with the weights is named here, before a KV
  // cache or batch limit computed from its numbers blames the command line.
  const auto layout = cfg.tensor_layout(StDtype::kBF16);
  for (const auto& want : layout) check_tensor_entry(ck, want);
  // A tensor of a layer past num_hidden_layers (any of its tensors, not only the input norm the
  // count was read from) is an error: the checkpoint would run as a shallower model. Any other
  // tensor the engine does not read (a tied checkpoint's lm_head.weight, rotary buffers) is named
  // in a warning, as transformers does.
  std::set<std::string> wanted;
  for (const auto& t : layout) wanted.insert(t.name);
  std::vector<std::string> unused;
  for (const auto& name : names) {
    if (wanted.count(name) > 0) continue;
    if (const int64_t layer = layer_of(name); layer >= cfg.layers)
      fail(ErrorCategory::kInput, "{}: tensor '{}' belongs to layer {}: the checkpoint holds more layers than "
           "config.json's num_hidden_layers {}", ck.file_of(name), utf8_prefix(name, 200), layer, cfg.layers);
    unused.push_back(name);
  }
  if (!unused.empty())
    spdlog::warn("{}: {} tensor(s) the Qwen3 engine does not read, ignored: {}{}", dir, unused.size(),
                 utf8_prefix(fmt::format("{}", fmt::join(unused.begin(), unused.begin() + std::min<size_t>(unused.size(), 5), ", ")), 600),
                 unused.size() > 5 ? ", ..." : "");
}

Qwen3Weights load_weights(const Qwen3Config& cfg, const std::string& dir) {
  Checkpoint ck(dir);
  check_checkpoint_fits(ck, cfg, dir);
  return load_weights(cfg, ck);
}

Qwen3Weights load_weights(const Qwen3Config& cfg, const Checkpoint& ck) {
  auto get = [&](const StTensorInfo& want) { return load_tensor_f32(ck, want); };
  const auto layout = cfg.tensor_layout(StDtype::kBF16);
  std::map<std::string, const StTensorInfo*> by_name;
  for (const auto& t : layout) by_name[t.name] = &t;
  Qwen3Weights w;
  w.embed = get(*by_name.at("model.embed_tokens.weight"));
  w.final_norm = get(*by_name.at("model.norm.weight"));
  if (!cfg.tie_embeddings) w.lm_head = get(*by_name.at("lm_head.weight"));
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    auto g = [&](const std::string& n) { return get(*by_name.at(p + n)); };
    Qwen3LayerWeights L;
    L.input_norm = g("input_layernorm.weight");
    L.q = g("self_attn.q_proj.weight");
    L.k = g("self_attn.k_proj.weight");
    L.v = g("self_attn.v_proj.weight");
    L.o = g("self_attn.o_proj.weight");
    L.q_norm = g("self_attn.q_norm.weight");
    L.k_norm = g("self_attn.k_norm.weight");
    L.post_norm = g("post_attention_layernorm.weight");
    L.gate = g("mlp.gate_proj.weight");
    L.up = g("mlp.up_proj.weight");
    L.down = g("mlp.down_proj.weight");
    w.layers.push_back(std::move(L));
  }
  ck.check_unchanged();  // a checkpoint rewritten while it was read may have mixed two versions
  return w;
}

// ---- the CPU engine --------------------------------------------------------------------------

double cpu_gemm_gflops() {
  const int64_t rows = 256, in = 1024, out = 1024;
  std::vector<float> x(size_t(rows * in), 0.5f), w(size_t(in * out), 0.25f), y(size_t(rows * out));
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    linear(x.data(), rows, in, w, out, y.data());
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0) best = std::max(best, 2.0 * double(rows * in * out) / s / 1e9);
  }
  return best;
}

double StageTimes::total_us() const {
  double t = 0;
  for (const auto& [k, v] : us) t += v;
  return t;
}

void check_cpu_kv_cache(const Qwen3Config& cfg, int64_t batch, int64_t max_context, int64_t max_cache_bytes) {
  if (batch < 1) fail(ErrorCategory::kUsage, "batch {}: expected >= 1", batch);
  if (max_context < 1 || max_context > cfg.max_position)
    fail(ErrorCategory::kUsage, "context {}: expected 1 to max_position_embeddings {}", max_context, cfg.max_position);
  const double need = cpu_kv_cache_bytes(cfg, batch, max_context);
  if (need > double(max_cache_bytes))
    fail(ErrorCategory::kUsage, "batch {} x context {}: the float32 KV cache (2 x batch x context x {} layers x {} KV "
         "heads x head_dim {}, from config.json, x 4 bytes) needs {:.4g} GB, more than the {:.4g} GB the CPU engine "
         "allows", batch, max_context, cfg.layers, cfg.kv_heads, cfg.head_dim, need / 1e9, double(max_cache_bytes) / 1e9);
}

int64_t decode_context(int64_t prompt, int64_t gen) { return prompt + std::max<int64_t>(gen - 1, 0); }

void check_decode_context(const Qwen3Config& cfg, int64_t prompt, int64_t gen) {
  if (decode_context(prompt, gen) > cfg.max_position)
    fail(ErrorCategory::kUsage, "--prompt {} --gen {}: a context of {} positions (the prompt's, then one a decode step: "
         "the last generated token is never fed back), more than max_position_embeddings {}",
         prompt, gen, decode_context(prompt, gen), cfg.max_position);
}

double cpu_kv_cache_bytes(const Qwen3Config& cfg, int64_t batch, int64_t max_context) {
  return 8.0 * double(batch) * double(cfg.layers) * double(max_context) * double(cfg.kv_heads) * double(cfg.head_dim);
}

namespace {
// The first integer of a text file (a cgroup's memory.max is "max" where unlimited: -1 then).
int64_t read_int_file(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  return in >> v && v >= 0 ? v : -1;
}
// The value of `key` in a "key value" per line file (memory.stat, /proc/meminfo), or -1.
int64_t read_keyed(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k, rest;
  int64_t v = 0;
  while (in >> k >> v) {
    std::getline(in, rest);
    if (k == key) return v >= 0 ? v : -1;
  }
  return -1;
}
}  // namespace

int64_t host_available_bytes(const std::string& root) {
  const int64_t kb = read_keyed(root + "proc/meminfo", "MemAvailable:");
  int64_t avail = kb >= 0 && kb < (int64_t(1) << 52) ? kb * 1024 : -1;
  // The process's memory cgroup: v2's "0::/PATH" line of /proc/self/cgroup, or v1's
  // "N:...memory...:/PATH". A limit may sit on any group from it up to the root (a systemd slice,
  // a container whose processes run in a child group). Each limited group's room is its limit
  // less its working set: usage less inactive file pages (page cache the kernel reclaims first,
  // as the kubelet counts it), so a recent multi-GB read does not count against the run.
  const auto walk = [&](std::string group, const std::string& fs, const char* limit_file, const char* usage_file,
                        const char* inactive_key) {
    while (true) {
      const std::string dir = root + fs + (group == "/" ? "" : group);
      const int64_t limit = read_int_file(dir + "/" + limit_file), usage = read_int_file(dir + "/" + usage_file);
      // v2 says "max" (read as -1) where unlimited, v1 a value near 2^63
      if (limit >= 0 && limit < (int64_t(1) << 62) && usage >= 0) {
        const int64_t inactive = std::max<int64_t>(0, read_keyed(dir + "/memory.stat", inactive_key));
        const int64_t left = std::max<int64_t>(0, limit - std::max<int64_t>(0, usage - inactive));
        avail = avail < 0 ? left : std::min(avail, left);
      }
      if (group == "/" || group.empty()) break;
      const auto slash = group.find_last_of('/');
      group = slash == 0 ? "/" : group.substr(0, slash);
    }
  };
  std::ifstream cg(root + "proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    const auto c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos || line.compare(c2 + 1, 1, "/") != 0) continue;
    const std::string group = line.substr(c2 + 1);
    bool memory = false;  // v1: "memory" among the line's comma-separated controllers
    std::stringstream controllers(line.substr(c1 + 1, c2 - c1 - 1));
    for (std::string c; std::getline(controllers, c, ',');) memory = memory || c == "memory";
    if (line.starts_with("0::"))
      walk(group, "sys/fs/cgroup", "memory.max", "memory.current", "inactive_file");
    else if (memory)
      walk(group, "sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file");
  }
  return avail;
}

CpuEngineBytes cpu_engine_bytes(const Qwen3Config& cfg, int64_t batch, int64_t prompt, int64_t gen) {
  CpuEngineBytes b;
  b.weights = 4.0 * double(cfg.parameters());
  b.kv_cache = cpu_kv_cache_bytes(cfg, batch, decode_context(prompt, gen));
  b.logits = (gen > 1 ? 2.0 : 1.0) * double(batch) * double(cfg.vocab) * 4;  // a decode step's only with gen > 1
  b.activations = double(prompt) * 4 *
                  (3.0 * double(cfg.hidden) + 2.0 * double(cfg.heads * cfg.head_dim) +
                   2.0 * double(cfg.kv_heads * cfg.head_dim) + 2.0 * double(cfg.intermediate));
  return b;
}

void check_cpu_host_memory(const Qwen3Config& cfg, int64_t batch, int64_t prompt, int64_t gen, int64_t available_bytes) {
  if (available_bytes < 0) return;
  const auto b = cpu_engine_bytes(cfg, batch, prompt, gen);
  if (b.total() > double(available_bytes))
    fail(ErrorCategory::kUsage, "batch {} x prompt {} + gen {}: the CPU engine needs {:.4g} GB (float32 weights {:.4g} "
         "GB + KV cache {:.4g} GB + logits {:.4g} GB + activations {:.4g} GB), more than the {:.4g} GB this process can "
         "allocate (MemAvailable in /proc/meminfo, or its memory cgroup's limit less its working set); use a smaller batch "
         "or context, or the CUDA engine (--device cuda)", batch, prompt, std::max<int64_t>(gen, 0), b.total() / 1e9,
         b.weights / 1e9, b.kv_cache / 1e9, b.logits / 1e9, b.activations / 1e9, double(available_bytes) / 1e9);
}

CpuQwen3Engine::CpuQwen3Engine(Qwen3Config cfg, Qwen3Weights weights, int batch, int64_t max_context,
                               int64_t max_cache_bytes)
    : cfg_(std::move(cfg)), w_(std::move(weights)), batch_(batch), max_context_(max_context) {
  check_cpu_kv_cache(cfg_, batch, max_context, max_cache_bytes);
  const int64_t per_side = int64_t(batch) * cfg_.layers * max_context * cfg_.kv_heads * cfg_.head_dim;
  k_cache_.assign(size_t(per_side), 0.f);
  v_cache_.assign(size_t(per_side), 0.f);
  pos_.assign(size_t(batch), 0);
  overflow_.assign(size_t(batch), std::string());
  for (int64_t i = 0; i < cfg_.head_dim / 2; ++i)
    inv_freq_.push_back(float(std::pow(cfg_.rope_theta, -2.0 * double(i) / double(cfg_.head_dim))));
}

std::vector<float> CpuQwen3Engine::forward(int b, const int32_t* tokens, int64_t n) {
  const int64_t H = cfg_.hidden, I = cfg_.intermediate, NQ = cfg_.heads, NKV = cfg_.kv_heads, D = cfg_.head_dim;
  const int64_t G = NQ / NKV, p0 = pos_[size_t(b)];
  if (p0 + n > max_context_)
    fail(ErrorCategory::kUsage, "sequence {}: position {} would pass the context of {}", b, p0 + n, max_context_);
  auto t0 = Clock::now();
  auto lap = [&](const char* stage) {
    const auto t1 = Clock::now();
    stages_.add(stage, std::chrono::duration<double, std::micro>(t1 - t0).count());
    t0 = t1;
  };
  std::vector<float> x(size_t(n * H)), nx(size_t(n * H)), q(size_t(n * NQ * D)), k(size_t(n * NKV * D)),
      v(size_t(n * NKV * D)), att(size_t(n * NQ * D)), o(size_t(n * H)), gate(size_t(n * I)), up(size_t(n * I)),
      scores(size_t(p0 + n));
  for (int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= cfg_.vocab)
      fail(ErrorCategory::kUsage, "token id {}: expected 0 to {}", tokens[t], cfg_.vocab - 1);
    std::copy_n(w_.embed.data() + int64_t(tokens[t]) * H, H, x.data() + t * H);
  }
  lap("embedding");
  const size_t layer_stride = size_t(max_context_ * NKV * D);
  const float scale = float(1.0 / std::sqrt(double(D)));
  for (int64_t l = 0; l < cfg_.layers; ++l) {
    const auto& L = w_.layers[size_t(l)];
    if (!(fuse_residual_norm_ && l > 0)) {  // fused: the previous layer's residual pass normed x already
      rmsnorm(x.data(), n, H, L.input_norm, cfg_.rms_eps, nx.data());
      lap("input_norm");
    }
    linear(nx.data(), n, H, L.q, NQ * D, q.data(), threads_);
    linear(nx.data(), n, H, L.k, NKV * D, k.data(), threads_);
    linear(nx.data(), n, H, L.v, NKV * D, v.data(), threads_);
    lap("qkv_gemm");
    rmsnorm(q.data(), n * NQ, D, L.q_norm, cfg_.rms_eps, q.data());
    rmsnorm(k.data(), n * NKV, D, L.k_norm, cfg_.rms_eps, k.data());
    lap("qk_norm");
    for (int64_t t = 0; t < n; ++t) {  // neox RoPE: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)
      const double p = double(p0 + t);
      for (int64_t i = 0; i < D / 2; ++i) {
        const double a = p * double(inv_freq_[size_t(i)]);
        const float c = float(std::cos(a)), s = float(std::sin(a));
        for (int64_t h = 0; h < NQ + NKV; ++h) {
          float* r = h < NQ ? q.data() + (t * NQ + h) * D : k.data() + (t * NKV + h - NQ) * D;
          const float x1 = r[i], x2 = r[i + D / 2];
          r[i] = x1 * c - x2 * s;
          r[i + D / 2] = x2 * c + x1 * s;
        }
      }
    }
    lap("rope");
    float* kc = k_cache_.data() + (size_t(b) * size_t(cfg_.layers) + size_t(l)) * layer_stride;
    float* vc = v_cache_.data() + (size_t(b) * size_t(cfg_.layers) + size_t(l)) * layer_stride;
    std::copy(k.begin(), k.end(), kc + p0 * NKV * D);
    std::copy(v.begin(), v.end(), vc + p0 * NKV * D);
    lap("kv_cache_write");
    for (int64_t t = 0; t < n; ++t) {
      const int64_t last = p0 + t;  // causal: keys 0 .. last
      for (int64_t h = 0; h < NQ; ++h) {
        const float* qh = q.data() + (t * NQ + h) * D;
        const int64_t g = h / G;
        float m = -INFINITY;
        for (int64_t j = 0; j <= last; ++j) {
          const float* kj = kc + (j * NKV + g) * D;
          float s = 0.f;
          for (int64_t d = 0; d < D; ++d) s += qh[d] * kj[d];
          scores[size_t(j)] = s * scale;
          m = std::max(m, scores[size_t(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= last; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - m));
        float* out = att.data() + (t * NQ + h) * D;
        std::fill(out, out + D, 0.f);
        for (int64_t j = 0; j <= last; ++j) {
          const float pj = float(scores[size_t(j)] / sum);
          const float* vj = vc + (j * NKV + g) * D;
          for (int64_t d = 0; d < D; ++d) out[d] += pj * vj[d];
        }
      }
    }
    lap("attention");
    linear(att.data(), n, NQ * D, L.o, H, o.data(), threads_);
    lap("o_gemm");
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    rmsnorm(x.data(), n, H, L.post_norm, cfg_.rms_eps, nx.data());
    lap("residual_norm");
    linear(nx.data(), n, H, L.gate, I, gate.data(), threads_);
    linear(nx.data(), n, H, L.up, I, up.data(), threads_);
    lap("mlp_gate_up_gemm");
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
    lap("swiglu");
    linear(gate.data(), n, I, L.down, H, o.data(), threads_);
    lap("mlp_down_gemm");
    if (fuse_residual_norm_ && l + 1 < cfg_.layers) {
      // one pass: x += o, then the next layer's input norm of each row (the same arithmetic as
      // the separate passes, so the results are bit-identical)
      const auto& next_norm = w_.layers[size_t(l + 1)].input_norm;
      for (int64_t r = 0; r < n; ++r) {
        float* xr = x.data() + r * H;
        const float* orow = o.data() + r * H;
        double ss = 0;
        for (int64_t i = 0; i < H; ++i) {
          xr[i] += orow[i];
          ss += double(xr[i]) * xr[i];
        }
        const float inv = float(1.0 / std::sqrt(ss / double(H) + cfg_.rms_eps));
        for (int64_t i = 0; i < H; ++i) nx[size_t(r * H + i)] = xr[i] * inv * next_norm[size_t(i)];
      }
      lap("mlp_residual_norm");
    } else {
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      lap("residual");
    }
    // Where finite but huge weights first overflow float32, for greedy's error (an H-float scan
    // a token a layer: noise beside the layer's n x H x (2 H + 3 I) multiply-adds)
    if (overflow_[size_t(b)].empty() && any_nonfinite(x.data(), x.size())) {
      int64_t t = 0;
      while (t + 1 < n && !any_nonfinite(x.data() + t * H, size_t(H))) ++t;
      overflow_[size_t(b)] = fmt::format("after layer {} (model.layers.{}.*) at position {}", l, l, p0 + t);
    }
  }
  pos_[size_t(b)] = p0 + n;
  rmsnorm(x.data() + (n - 1) * H, 1, H, w_.final_norm, cfg_.rms_eps, nx.data());
  lap("final_norm");
  std::vector<float> logits(size_t(cfg_.vocab));
  linear(nx.data(), 1, H, cfg_.tie_embeddings ? w_.embed : w_.lm_head, cfg_.vocab, logits.data(), threads_);
  lap("lm_head");
  return logits;
}

std::vector<std::vector<float>> CpuQwen3Engine::prefill(const std::vector<std::vector<int32_t>>& prompts) {
  if (int(prompts.size()) != batch_)
    fail(ErrorCategory::kUsage, "prefill: {} prompts for a batch of {}", prompts.size(), batch_);
  std::fill(pos_.begin(), pos_.end(), 0);
  std::fill(overflow_.begin(), overflow_.end(), std::string());
  std::vector<std::vector<float>> out;
  for (int b = 0; b < batch_; ++b) {
    if (prompts[size_t(b)].empty()) fail(ErrorCategory::kUsage, "prefill: prompt {} is empty", b);
    out.push_back(forward(b, prompts[size_t(b)].data(), int64_t(prompts[size_t(b)].size())));
  }
  return out;
}

std::vector<std::vector<float>> CpuQwen3Engine::decode(const std::vector<int32_t>& tokens) {
  if (int(tokens.size()) != batch_) fail(ErrorCategory::kUsage, "decode: {} tokens for a batch of {}", tokens.size(), batch_);
  std::vector<std::vector<float>> out;
  for (int b = 0; b < batch_; ++b) out.push_back(forward(b, &tokens[size_t(b)], 1));
  return out;
}

std::vector<int32_t> CpuQwen3Engine::greedy(const std::vector<std::vector<float>>& logits) {
  const auto t0 = Clock::now();
  std::vector<int32_t> ids;
  for (const auto& row : logits) {
    // the largest finite logit (NaN compares false: max_element would answer index 0 whatever
    // the row holds); a row with none is refused, as the CUDA engine's argmax refuses it
    int64_t best = -1, skipped = 0, first_skipped = -1;
    for (size_t i = 0; i < row.size(); ++i) {
      if (!std::isfinite(row[i])) {
        if (skipped++ == 0) first_skipped = int64_t(i);
      } else if (best < 0 || row[i] > row[size_t(best)]) {
        best = int64_t(i);
      }
    }
    if (best < 0) {
      // the forward pass recorded where the sequence's hidden state first left float32's range
      const size_t b = ids.size();
      const std::string& where = b < overflow_.size() ? overflow_[b] : std::string();
      fail(ErrorCategory::kInput, "greedy: sequence {} has no finite logit (every one NaN or infinite): {}: the "
           "weights overflow float32 (finite but huge values in the checkpoint?)", b,
           where.empty() ? std::string("its hidden state stayed finite through every layer, so the final norm or the "
                                       "lm_head product (") + (cfg_.tie_embeddings ? "the tied model.embed_tokens.weight"
                                                                                   : "lm_head.weight") + ") overflowed"
                         : "its hidden state first held a NaN or infinity " + where);
    }
    // a row it could choose from: its skipped logits counted, the first named
    if (skipped > 0 && first_nonfinite_.empty())
      first_nonfinite_ = fmt::format("sequence {}'s logit {} at greedy call {}", ids.size(), first_skipped, greedy_calls_);
    nonfinite_logits_ += skipped;
    ids.push_back(int32_t(best));
  }
  ++greedy_calls_;
  stages_.add("sampling", std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  return ids;
}

}  // namespace thrive::model
