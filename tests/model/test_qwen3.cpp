// The Qwen3 configuration, random checkpoints and the float32 CPU engine, checked against an
// independent float64 implementation of the architecture written here from HF's modeling_qwen3
// description (not the engine's code), plus KV-cache consistency and batch independence.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "tests/support/test_support.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"
#include "thrive/model/qwen3.hpp"

namespace thrive::model {
namespace {

using Vec = std::vector<double>;

// Whole-sequence float64 forward of `tokens`; logits of the last position.
Vec reference_logits(const Qwen3Config& c, const Qwen3Weights& w, const std::vector<int32_t>& tokens) {
  const int64_t n = int64_t(tokens.size()), H = c.hidden, D = c.head_dim, NQ = c.heads, NKV = c.kv_heads;
  auto norm = [&](const double* x, int64_t width, const std::vector<float>& g) {
    double ss = 0;
    for (int64_t i = 0; i < width; ++i) ss += x[i] * x[i];
    const double inv = 1.0 / std::sqrt(ss / double(width) + c.rms_eps);
    Vec y(static_cast<size_t>(width));
    for (int64_t i = 0; i < width; ++i) y[size_t(i)] = x[i] * inv * g[size_t(i)];
    return y;
  };
  auto matvec = [&](const Vec& x, const std::vector<float>& m, int64_t out) {
    const int64_t in = int64_t(x.size());
    Vec y(static_cast<size_t>(out), 0.0);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) y[size_t(o)] += double(m[size_t(o * in + i)]) * x[size_t(i)];
    return y;
  };
  auto rope = [&](double* v, int64_t pos) {  // rotate_half form: x * cos + rotate_half(x) * sin
    Vec r(static_cast<size_t>(D));
    for (int64_t i = 0; i < D; ++i) {
      const int64_t f = i % (D / 2);
      const double a = double(pos) / std::pow(c.rope_theta, 2.0 * double(f) / double(D));
      const double rot = i < D / 2 ? -v[i + D / 2] : v[i - D / 2];
      r[size_t(i)] = v[i] * std::cos(a) + rot * std::sin(a);
    }
    std::copy(r.begin(), r.end(), v);
  };
  std::vector<Vec> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) x[size_t(t)].assign(w.embed.begin() + tokens[size_t(t)] * H, w.embed.begin() + (tokens[size_t(t)] + 1) * H);
  for (const auto& L : w.layers) {
    std::vector<Vec> q(static_cast<size_t>(n)), k(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const Vec h = norm(x[size_t(t)].data(), H, L.input_norm);
      q[size_t(t)] = matvec(h, L.q, NQ * D);
      k[size_t(t)] = matvec(h, L.k, NKV * D);
      v[size_t(t)] = matvec(h, L.v, NKV * D);
      for (int64_t hd = 0; hd < NQ; ++hd) {
        Vec y = norm(q[size_t(t)].data() + hd * D, D, L.q_norm);
        std::copy(y.begin(), y.end(), q[size_t(t)].begin() + hd * D);
        rope(q[size_t(t)].data() + hd * D, t);
      }
      for (int64_t hd = 0; hd < NKV; ++hd) {
        Vec y = norm(k[size_t(t)].data() + hd * D, D, L.k_norm);
        std::copy(y.begin(), y.end(), k[size_t(t)].begin() + hd * D);
        rope(k[size_t(t)].data() + hd * D, t);
      }
    }
    for (int64_t t = 0; t < n; ++t) {
      Vec att(static_cast<size_t>(NQ * D), 0.0);
      for (int64_t hd = 0; hd < NQ; ++hd) {
        const int64_t g = hd / (NQ / NKV);
        Vec s(static_cast<size_t>(t + 1));
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[size_t(t)][size_t(hd * D + d)] * k[size_t(j)][size_t(g * D + d)];
          s[size_t(j)] = dot / std::sqrt(double(D));
          m = std::max(m, s[size_t(j)]);
        }
        for (auto& e : s) sum += (e = std::exp(e - m));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t d = 0; d < D; ++d) att[size_t(hd * D + d)] += s[size_t(j)] / sum * v[size_t(j)][size_t(g * D + d)];
      }
      const Vec o = matvec(att, L.o, H);
      for (int64_t i = 0; i < H; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
    }
    for (int64_t t = 0; t < n; ++t) {
      const Vec h = norm(x[size_t(t)].data(), H, L.post_norm);
      Vec gate = matvec(h, L.gate, c.intermediate);
      const Vec up = matvec(h, L.up, c.intermediate);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const Vec down = matvec(gate, L.down, H);
      for (int64_t i = 0; i < H; ++i) x[size_t(t)][size_t(i)] += down[size_t(i)];
    }
  }
  const Vec last = norm(x.back().data(), H, w.final_norm);
  return matvec(last, c.tie_embeddings ? w.embed : w.lm_head, c.vocab);
}

double max_abs_diff(const std::vector<float>& a, const Vec& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]));
  return m;
}
double max_abs(const Vec& b) {
  double m = 0;
  for (double v : b) m = std::max(m, std::abs(v));
  return m;
}

class Qwen3Tiny : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir;
    cfg_ = Qwen3Config::preset("tiny");
    cfg_.tie_embeddings = false;  // exercise lm_head too
    init_checkpoint(cfg_, dir_->path(), 7);
  }
  static void TearDownTestSuite() { delete dir_; }
  static test::TempDir* dir_;
  static Qwen3Config cfg_;
};
test::TempDir* Qwen3Tiny::dir_ = nullptr;
Qwen3Config Qwen3Tiny::cfg_;

TEST_F(Qwen3Tiny, ConfigRoundTripsThroughConfigJson) {
  const auto c = Qwen3Config::load(dir_->path());
  EXPECT_EQ(c.hidden, cfg_.hidden);
  EXPECT_EQ(c.layers, cfg_.layers);
  EXPECT_EQ(c.kv_heads, cfg_.kv_heads);
  EXPECT_EQ(c.head_dim, cfg_.head_dim);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(Qwen3Config::preset("qwen3-1.7b").parameters(), 1720574976);  // 1.72B with the tied head
}

TEST_F(Qwen3Tiny, PrefillMatchesAnIndependentFloat64Forward) {
  const auto c = Qwen3Config::load(dir_->path());
  auto w = load_weights(c, dir_->path());
  const std::vector<int32_t> prompt = {5, 17, 200, 3, 99, 42, 7};
  const Vec ref = reference_logits(c, w, prompt);
  CpuQwen3Engine e(c, w, 1, 32);
  const auto got = e.prefill({prompt});
  EXPECT_LT(max_abs_diff(got[0], ref), 1e-4 * std::max(1.0, max_abs(ref)));
}

// Qwen3-0.6B and -4B have heads x head_dim != hidden_size (16 x 128 against 1024; 32 x 128
// against 2560): q_proj widens the stream and o_proj narrows it back. The same float64 check on a
// tiny model of that kind (4 heads of 32 against hidden 64, GQA 4:1), read back from its files.
TEST(Qwen3Checkpoint, PrefillMatchesFloat64WhenHeadsTimesHeadDimIsNotHidden) {
  test::TempDir dir;
  auto cfg = Qwen3Config::preset("tiny");
  cfg.head_dim = 32, cfg.kv_heads = 1;
  init_checkpoint(cfg, dir.path(), 11);
  const auto c = Qwen3Config::load(dir.path());
  ASSERT_NE(c.heads * c.head_dim, c.hidden);
  auto w = load_weights(c, dir.path());
  const std::vector<int32_t> prompt = {1, 250, 9, 64, 64, 3};
  const Vec ref = reference_logits(c, w, prompt);
  CpuQwen3Engine e(c, w, 1, 16);
  const auto got = e.prefill({prompt});
  EXPECT_LT(max_abs_diff(got[0], ref), 1e-4 * std::max(1.0, max_abs(ref)));
}

// Greedy takes the largest finite logit; a row with none (weights that overflow float32) is an
// error, not token 0 (std::max_element's answer for a row of NaN).
TEST_F(Qwen3Tiny, GreedyRefusesARowWithNoFiniteLogit) {
  const auto c = Qwen3Config::load(dir_->path());
  CpuQwen3Engine e(c, load_weights(c, dir_->path()), 1, 32);
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(e.nonfinite_logits(), 0);
  EXPECT_EQ(e.greedy({{1.f, 2.f}}), std::vector<int32_t>{1});
  EXPECT_EQ(e.greedy({{nan, 1.f, 3.f, nan, 3.f}}), std::vector<int32_t>{2});
  // the skipped logits are counted, the first named, for the harness's warning
  EXPECT_EQ(e.nonfinite_logits(), 2);
  EXPECT_EQ(e.first_nonfinite_logit(), "sequence 0's logit 0 at greedy call 1");
  EXPECT_THROW(e.greedy({{nan, nan, inf}}), Error);
}

// Finite but huge weights: greedy's error names where the hidden state first overflowed.
TEST_F(Qwen3Tiny, NoFiniteLogitNamesTheLayerWhereTheHiddenStateOverflowed) {
  const auto c = Qwen3Config::load(dir_->path());
  const auto expect_greedy_error = [&](Qwen3Weights w, const std::string& mention) {
    CpuQwen3Engine e(c, std::move(w), 2, 32);
    const auto logits = e.prefill({{1, 2, 3}, {4}});
    try {
      (void)e.greedy(logits);
      FAIL() << "greedy chose from a row of NaN";
    } catch (const Error& err) {
      EXPECT_EQ(err.category(), ErrorCategory::kInput);
      EXPECT_NE(std::string(err.what()).find(mention), std::string::npos) << err.what();
    }
  };
  // layer 1's post-attention norm weights at 1e30: its gate/up products pass float32's range
  auto w = load_weights(c, dir_->path());
  for (float& g : w.layers[1].post_norm) g = 1e30f;
  expect_greedy_error(w, "greedy: sequence 0 has no finite logit (every one NaN or infinite): its hidden state first "
                         "held a NaN or infinity after layer 1 (model.layers.1.*) at position 0");
  // a forward pass that stayed finite blames the final norm or the lm_head product
  CpuQwen3Engine e(c, load_weights(c, dir_->path()), 1, 32);
  (void)e.prefill({{1, 2}});
  try {
    (void)e.greedy({{std::nanf(""), std::nanf("")}});
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("stayed finite through every layer"), std::string::npos) << err.what();
  }
}

TEST_F(Qwen3Tiny, DecodeThroughTheKvCacheEqualsARecomputedPrefill) {
  const auto c = Qwen3Config::load(dir_->path());
  auto w = load_weights(c, dir_->path());
  CpuQwen3Engine e(c, w, 2, 32);
  // ragged batch: two prompts of different lengths
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3, 4}, {9, 8}};
  auto logits = e.prefill(prompts);
  std::vector<std::vector<int32_t>> seq = prompts;
  for (int step = 0; step < 3; ++step) {
    const auto next = e.greedy(logits);
    for (int b = 0; b < 2; ++b) seq[size_t(b)].push_back(next[size_t(b)]);
    logits = e.decode(next);
  }
  for (int b = 0; b < 2; ++b) {
    CpuQwen3Engine one(c, w, 1, 32);
    const auto full = one.prefill({seq[size_t(b)]});
    double diff = 0, scale = 1;
    for (size_t i = 0; i < full[0].size(); ++i) {
      diff = std::max(diff, double(std::abs(full[0][i] - logits[size_t(b)][i])));
      scale = std::max(scale, double(std::abs(full[0][i])));
    }
    EXPECT_LT(diff, 1e-4 * scale) << "sequence " << b;
  }
  // every stage that ran was timed
  for (const char* s : {"embedding", "qkv_gemm", "qk_norm", "rope", "attention", "o_gemm", "residual_norm",
                        "mlp_gate_up_gemm", "swiglu", "mlp_down_gemm", "lm_head", "sampling"})
    EXPECT_GT(e.stages().calls.count(s), 0u) << s;
}

TEST_F(Qwen3Tiny, BadTokensBatchesAndContextsAreUsageErrors) {
  const auto c = Qwen3Config::load(dir_->path());
  auto w = load_weights(c, dir_->path());
  CpuQwen3Engine e(c, w, 1, 4);
  EXPECT_THROW(e.prefill({{int32_t(c.vocab)}}), Error);
  EXPECT_THROW(e.prefill({{1}, {2}}), Error);
  EXPECT_THROW(e.prefill({{}}), Error);
  e.prefill({{1, 2, 3, 4}});
  EXPECT_THROW(e.decode({1}), Error);  // position 4 is past the context of 4
  EXPECT_THROW(CpuQwen3Engine(c, w, 1 << 20, 4096, int64_t(1) << 30), Error);  // the cache does not fit
}

// config.json's torch_dtype names the dtype the weights were written in.
TEST(Qwen3Checkpoint, ConfigNamesTheDtypeOfTheWeights) {
  const auto cfg = Qwen3Config::preset("tiny");
  for (const auto& [dtype, name] : {std::pair{StDtype::kF32, "float32"}, std::pair{StDtype::kBF16, "bfloat16"}}) {
    test::TempDir dir;
    init_checkpoint(cfg, dir.path(), 1, dtype);
    EXPECT_EQ(nlohmann::json::parse(read_file(dir.path() + "/config.json"))["torch_dtype"], name);
    EXPECT_EQ(Checkpoint(dir.path()).info("model.norm.weight").dtype, dtype);
  }
}

// A checkpoint that disagrees with its config.json, and config.json files that are wrong.
TEST(Qwen3Checkpoint, WrongTensorsAndConfigsAreInputErrorsNamingTheCulprit) {
  test::TempDir dir;
  auto cfg = Qwen3Config::preset("tiny");
  init_checkpoint(cfg, dir.path(), 1);
  // config.json now claims a wider model than the tensors hold
  auto j = nlohmann::json::parse(read_file(dir.path() + "/config.json"));
  j["intermediate_size"] = 256;
  test::write_text(dir.path() + "/config.json", j.dump());
  try {
    (void)load_weights(Qwen3Config::load(dir.path()), dir.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(e.what()).find("mlp.gate_proj.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[256,64]"), std::string::npos) << e.what();
  }
  const auto bad_config = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& mention) {
    auto c = Qwen3Config::preset("tiny").to_json();
    edit(c);
    test::write_text(dir.path() + "/config.json", c.dump());
    try {
      (void)Qwen3Config::load(dir.path());
      FAIL() << mention;
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput) << e.what();
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
    }
  };
  bad_config([](auto& c) { c["architectures"] = {"LlamaForCausalLM"}; c["model_type"] = "llama"; }, "Qwen3ForCausalLM");
  // a model_type of another JSON type is an input error too, not a JSON type error
  bad_config([](auto& c) { c.erase("architectures"); c["model_type"] = 5; }, "model_type 5");
  // one field naming Qwen3 does not cover the other naming something else
  bad_config([](auto& c) { c["model_type"] = "llama"; }, "\"llama\"");
  bad_config([](auto& c) { c["architectures"] = {"Qwen3MoeForCausalLM"}; }, "Qwen3MoeForCausalLM");
  bad_config([](auto& c) { c.erase("architectures"); c.erase("model_type"); }, "expected Qwen3ForCausalLM / qwen3");
  bad_config([](auto& c) { c["num_experts"] = 128; }, "\"num_experts\" is 128");
  bad_config([](auto& c) { c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}}; }, "quantization_config");
  bad_config([](auto& c) { c.erase("hidden_size"); }, "hidden_size");
  bad_config([](auto& c) { c["num_key_value_heads"] = 3; }, "multiple");
  bad_config([](auto& c) { c["head_dim"] = "sixteen"; }, "head_dim");
  // past int64: said as written, not wrapped to -1
  bad_config([](auto& c) { c["hidden_size"] = UINT64_MAX; }, "\"hidden_size\" is 18446744073709551615");
  // What transformers would fill in from its own defaults is asked for, not guessed
  bad_config([](auto& c) { c.erase("head_dim"); }, "\"head_dim\"");
  bad_config([](auto& c) { c.erase("num_key_value_heads"); }, "\"num_key_value_heads\"");
  bad_config([](auto& c) { c.erase("rope_theta"); }, "rope_parameters");
  // What this engine does not implement is refused, not read past
  bad_config([](auto& c) { c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; }, "YaRN");
  bad_config([](auto& c) { c["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; }, "\"linear\"");
  bad_config([](auto& c) { c["rope_scaling"] = "yarn"; }, "expected null or an object");
  bad_config([](auto& c) {
    c.erase("rope_theta");
    c["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e6}};
  }, "rope_parameters");
  bad_config([](auto& c) { c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}}; }, "disagree");
  bad_config([](auto& c) {
    c["rope_parameters"] = {{"full_attention", {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}}}};
  }, "\"rope_parameters\".\"full_attention\" is");
  bad_config([](auto& c) { c["rope_parameters"] = {{"full_attention", 5}}; }, "\"full_attention\" is 5");
  bad_config([](auto& c) { c["use_sliding_window"] = true; }, "sliding-window");
  bad_config([](auto& c) { c["use_sliding_window"] = "no"; }, "use_sliding_window");
  bad_config([](auto& c) { c["layer_types"] = {"full_attention", "sliding_attention"}; }, "layer_types\"[1]");
  bad_config([](auto& c) { c["layer_types"] = {"full_attention"}; }, "2 entries");
  bad_config([](auto& c) { c["tie_word_embeddings"] = 1; }, "tie_word_embeddings");
  bad_config([](auto& c) { c["partial_rotary_factor"] = 0.5; }, "partial_rotary_factor");
  bad_config([](auto& c) { c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6},
                                                   {"partial_rotary_factor", 0.25}}; }, "partial_rotary_factor");
  // a layer count the tensors do not match, either way, before any layout of it is built
  const auto bad_layers = [&](int64_t layers, const std::string& mention) {
    auto c = Qwen3Config::preset("tiny");
    c.layers = layers;
    try {
      (void)load_weights(c, dir.path());
      FAIL() << layers;
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput) << e.what();
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
  };
  bad_layers(2000000000, "model.layers.1999999999.input_layernorm.weight");
  bad_layers(1, "more layers");
  bad_layers(3, "num_hidden_layers 3 is more than the checkpoint holds (its 24 tensors in 1 file(s) reach layer 1 at most)");
  // files with no tensor at all are said as such, not blamed on num_hidden_layers
  {
    test::TempDir hollow;
    write_safetensors(hollow.path() + "/model.safetensors", {});
    try {
      (void)load_weights(cfg, hollow.path());
      FAIL() << "a checkpoint with no tensor loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput) << e.what();
      EXPECT_NE(std::string(e.what()).find("its 1 safetensors file(s) hold no tensor at all"), std::string::npos)
          << e.what();
    }
  }
  // A tiny checkpoint in shards found by their *.safetensors names, part-N holding one small
  // tensor of the test's choosing; and a load that must be refused with every `mentions`.
  const auto add_shard = [&](const test::TempDir& d, int part, const std::string& tensor) {
    if (!std::filesystem::exists(d.path() + "/part-1.safetensors")) {
      init_checkpoint(cfg, d.path(), 1);
      std::filesystem::rename(d.path() + "/model.safetensors", d.path() + "/part-1.safetensors");
    }
    write_safetensors(d.path() + "/part-" + std::to_string(part) + ".safetensors",
                      {{tensor, StDtype::kF32, {4}, std::vector<uint8_t>(16)}});
  };
  const auto expect_refused = [&](const test::TempDir& d, const std::vector<std::string>& mentions) {
    try {
      (void)load_weights(cfg, d.path());
      ADD_FAILURE() << "loaded; expected: " << mentions.at(0);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput) << e.what();
      for (const auto& m : mentions) EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what();
    }
  };
  // a Qwen2-style q_proj bias is refused, not dropped
  {
    test::TempDir biased;
    add_shard(biased, 2, "model.layers.1.self_attn.q_proj.bias");
    expect_refused(biased, {"'model.layers.1.self_attn.q_proj.bias' is a bias"});
  }
  // any tensor of a layer past num_hidden_layers is refused, not only the input norm the count is
  // read from; a tensor the engine does not read otherwise is ignored (with a warning)
  {
    test::TempDir deeper;
    add_shard(deeper, 2, "extra.weight");
    EXPECT_NO_THROW((void)load_weights(cfg, deeper.path()));
    add_shard(deeper, 3, "model.layers.2.mlp.down_proj.weight");
    expect_refused(deeper, {"'model.layers.2.mlp.down_proj.weight' belongs to layer 2", "part-3.safetensors"});
  }
  // an eps float32 rounds to zero would normalize a zero row to NaN; a huge config.json is refused
  // unread; a huge architecture name is cut in the message
  bad_config([](auto& c) { c["rms_norm_eps"] = 1e-100; }, "rms_norm_eps 1e-100 must be in [1.18e-38, 1)");
  bad_config([](auto& c) { c["padding"] = std::string(size_t(5) << 20, ' '); }, "expected at most 4194304 bytes");
  {
    std::string message;
    bad_config([&](auto& c) { c["model_type"] = std::string(100000, 'q'); }, "expected Qwen3ForCausalLM / qwen3");
    try {
      auto c = Qwen3Config::preset("tiny").to_json();
      c["model_type"] = std::string(100000, 'q');
      test::write_text(dir.path() + "/config.json", c.dump());
      (void)Qwen3Config::load(dir.path());
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_LT(message.size(), size_t(1000)) << message.substr(0, 300);
  }
  test::write_text(dir.path() + "/config.json", "{not json");
  try {
    (void)Qwen3Config::load(dir.path());
    FAIL() << "config.json that is not JSON loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInput) << e.what();
    // the parser's reason and place, not only "not a JSON object"
    EXPECT_NE(std::string(e.what()).find("parse error at line 1"), std::string::npos) << e.what();
  }
  test::write_text(dir.path() + "/config.json", "[]");
  try {
    (void)Qwen3Config::load(dir.path());
    FAIL() << "config.json holding an array loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("got a JSON array"), std::string::npos) << e.what();
  }
  test::write_text(dir.path() + "/config.json", R"({"hidden_size": 64, "hidden_size": 128})");
  try {
    (void)Qwen3Config::load(dir.path());
    FAIL() << "a repeated key loaded";
  } catch (const Error& e) {  // not the last value silently, then blamed on the tensors' shapes
    EXPECT_NE(std::string(e.what()).find("key \"hidden_size\" appears twice"), std::string::npos) << e.what();
  }
  const auto missing = [](const std::string& path, const std::string& mention) {
    try {
      (void)Qwen3Config::load(path);
      FAIL() << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput) << e.what();
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
  };
  missing(dir.path() + "/config.json", "not a directory");
  missing(dir.path() + "/nowhere", "no such directory");
  std::filesystem::remove(dir.path() + "/config.json");
  missing(dir.path(), "config.json: missing");
  EXPECT_THROW(Qwen3Config::preset("qwen9"), Error);
}

// The two ways transformers writes a Qwen3 config.json both load, with the same numbers: the
// 4.x form (top-level rope_theta, rope_scaling null) and the 5.x form (rope_parameters), each with
// the fields a real checkpoint carries and this engine reads past (sliding_window with
// use_sliding_window false, layer_types all full_attention); absent optional fields take
// Qwen3Config's defaults.
TEST(Qwen3Checkpoint, BothTransformersConfigFormsLoad) {
  test::TempDir dir;
  const auto load_edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto c = Qwen3Config::preset("tiny").to_json();
    edit(c);
    test::write_text(dir.path() + "/config.json", c.dump());
    return Qwen3Config::load(dir.path());
  };
  const auto v4 = load_edited([](auto& c) {
    c["rope_theta"] = 5e5;
    c["rope_scaling"] = nullptr;
    c["use_sliding_window"] = false;
    c["sliding_window"] = 4096;
    c["max_window_layers"] = 28;
    c["partial_rotary_factor"] = 1;  // an integer 1 is every dimension too
  });
  EXPECT_EQ(v4.rope_theta, 5e5);
  const auto v5 = load_edited([](auto& c) {
    c.erase("rope_theta");
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}, {"partial_rotary_factor", 1.0}};
    c["layer_types"] = {"full_attention", "full_attention"};
    c["sliding_window"] = nullptr;
    c["dtype"] = "bfloat16";
  });
  EXPECT_EQ(v5.rope_theta, 5e5);
  EXPECT_EQ(v5.heads, v4.heads);
  // both forms at once, agreeing; a scaling object that names the default type
  EXPECT_EQ(load_edited([](auto& c) {
              c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c["rope_theta"]}};
              c["rope_scaling"] = {{"rope_type", "default"}};
            }).rope_theta, 1e6);
  const auto bare = load_edited([](auto& c) {
    c.erase("tie_word_embeddings");
    c.erase("rms_norm_eps");
    c.erase("max_position_embeddings");
  });
  EXPECT_FALSE(bare.tie_embeddings);  // Qwen3Config's default; Qwen3-1.7B's file says true
  EXPECT_EQ(bare.rms_eps, 1e-6);
  EXPECT_EQ(bare.max_position, 32768);
  // transformers 5's per-layer-type form: the full-attention layers' entry is read
  const auto per_type = load_edited([](auto& c) {
    c.erase("rope_theta");
    c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 2e5}}},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  });
  EXPECT_EQ(per_type.rope_theta, 2e5);
}

TEST(Qwen3Checkpoint, ANaNWeightIsAnInputErrorNamingTheTensor) {
  test::TempDir dir;
  const auto cfg = Qwen3Config::preset("tiny");
  init_checkpoint(cfg, dir.path(), 1);
  const std::string file = dir.path() + "/model.safetensors";
  int64_t at = 0;
  {
    SafetensorsFile f(file);
    const auto& t = f.info("model.norm.weight");
    ASSERT_EQ(t.dtype, StDtype::kBF16);
    const std::string bytes = read_file(file);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(bytes[size_t(i)]);
    at = int64_t(8 + n) + t.begin + 2 * 3;  // element 3
  }
  std::string bytes = read_file(file);
  bytes[size_t(at)] = char(0xc0), bytes[size_t(at) + 1] = char(0x7f);  // bf16 0x7fc0: a quiet NaN
  test::write_text(file, bytes);
  try {
    (void)load_weights(Qwen3Config::load(dir.path()), dir.path());
    FAIL() << "a NaN weight loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(e.what()).find("model.norm.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("element 3"), std::string::npos) << e.what();
  }
}

// A checkpoint may carry tensors the engine does not load, in any safetensors dtype (an I64
// buffer); one it loads must be BF16, F16 or F32, said from the headers before any weight is read.
TEST(Qwen3Checkpoint, ExtraTensorsOfAnyDtypeAreIgnoredAUsedOneMustBeFloat) {
  test::TempDir dir;
  const auto cfg = Qwen3Config::preset("tiny");
  init_checkpoint(cfg, dir.path(), 1);
  std::vector<StTensorOut> extra = {{"model.rotary_emb.position_ids", StDtype::kI64, {1, 4}, std::vector<uint8_t>(32)},
                                    {"model.extra.scale", StDtype::kBF16, {2}, std::vector<uint8_t>(4)}};
  write_safetensors(dir.path() + "/extra.safetensors", extra);
  // model.safetensors takes precedence over other shards: move the weights into a two-shard index
  const std::string weights = dir.path() + "/model-1.safetensors";
  std::filesystem::rename(dir.path() + "/model.safetensors", weights);
  nlohmann::json index;
  for (const auto& name : Checkpoint(dir.path()).names())
    index["weight_map"][name] = name.starts_with("model.rotary_emb") || name.starts_with("model.extra")
                                    ? "extra.safetensors" : "model-1.safetensors";
  test::write_text(dir.path() + "/model.safetensors.index.json", index.dump());
  const auto loaded = load_weights(Qwen3Config::load(dir.path()), dir.path());
  EXPECT_EQ(loaded.final_norm.size(), size_t(cfg.hidden));
  // the final norm's bf16 bytes relabelled I16 (two bytes an element, as BF16): refused by name
  {
    SafetensorsFile f(weights);
    std::vector<StTensorOut> out;
    for (const auto& [name, info] : f.tensors()) {
      StTensorOut t{name, info.dtype, info.shape, f.bytes(name)};
      if (name == "model.norm.weight") t.dtype = StDtype::kI16;
      out.push_back(std::move(t));
    }
    write_safetensors(weights + ".new", out);
  }
  std::filesystem::rename(weights + ".new", weights);
  try {
    (void)load_weights(Qwen3Config::load(dir.path()), dir.path());
    FAIL() << "an I16 norm loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(e.what()).find(weights + ": tensor 'model.norm.weight' has dtype I16: THRIVE reads weights "
                                         "stored as BF16, F16 or F32"), std::string::npos) << e.what();
  }
}

// The CPU engine's weights, KV cache, logits and activations must fit the memory the process
// can have: past it Linux's overcommit would end the run in the OOM killer, not in bad_alloc.
TEST(Qwen3Checkpoint, TheCpuEngineMustFitTheHostsAvailableMemory) {
  const auto cfg = Qwen3Config::preset("qwen3-1.7b");
  const auto b = cpu_engine_bytes(cfg, 2, 1000, 24);
  EXPECT_EQ(b.weights, 4.0 * double(cfg.parameters()));
  EXPECT_EQ(b.kv_cache, cpu_kv_cache_bytes(cfg, 2, 1023));  // 23 decode steps past the prompt
  EXPECT_EQ(b.logits, 2.0 * 2 * 151936 * 4);
  EXPECT_EQ(b.activations, 1000.0 * 4 * (3 * 2048 + 2 * 2048 + 2 * 1024 + 2 * 6144));
  const auto need = int64_t(b.total());
  EXPECT_NO_THROW(check_cpu_host_memory(cfg, 2, 1000, 24, need + 1));
  EXPECT_NO_THROW(check_cpu_host_memory(cfg, 2, 1000, 24, -1));  // unknown: no check
  try {
    check_cpu_host_memory(cfg, 2, 1000, 24, need - (int64_t(1) << 20));
    FAIL() << "a run past the available memory passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kUsage);
    const std::string m = e.what();
    EXPECT_NE(m.find("batch 2 x prompt 1000 + gen 24: the CPU engine needs"), std::string::npos) << m;
    EXPECT_NE(m.find(fmt::format("float32 weights {:.4g} GB + KV cache {:.4g} GB + logits {:.4g} GB", b.weights / 1e9,
                                 b.kv_cache / 1e9, b.logits / 1e9)), std::string::npos) << m;
    EXPECT_NE(m.find("MemAvailable"), std::string::npos) << m;
  }
  // a huge vocabulary at a large batch: the logits alone (the KV cache is small) are refused
  auto wide = Qwen3Config::preset("tiny");
  wide.vocab = 4194304;
  EXPECT_THROW(check_cpu_host_memory(wide, 1600, 1, 0, int64_t(24) << 30), Error);
  // this machine's figure is read (Linux: /proc/meminfo), in bytes
  EXPECT_GT(host_available_bytes(), int64_t(1) << 20);
}

// MemAvailable, or the least room of a limited cgroup v2 group from the process's own up to the
// root, where that is lower (a container's limit); reclaimable page cache does not count.
TEST(Qwen3Checkpoint, AvailableMemoryIsTheLowerOfMemAvailableAndTheCgroupsRoom) {
  test::TempDir dir;
  const std::string root = dir.path() + "/";
  std::filesystem::create_directories(root + "proc/self");
  std::filesystem::create_directories(root + "sys/fs/cgroup/pod/box");
  test::write_text(root + "proc/meminfo", "MemTotal:       64000000 kB\nMemFree:  1000 kB\nMemAvailable:   32000000 kB\n");
  EXPECT_EQ(host_available_bytes(root), int64_t(32000000) * 1024);  // no cgroup file yet
  test::write_text(root + "proc/self/cgroup", "0::/pod/box\n");
  const std::string box = root + "sys/fs/cgroup/pod/box/", pod = root + "sys/fs/cgroup/pod/";
  test::write_text(box + "memory.max", "max\n");
  test::write_text(box + "memory.current", "1000\n");
  EXPECT_EQ(host_available_bytes(root), int64_t(32000000) * 1024);  // unlimited group
  test::write_text(box + "memory.max", "8000000000\n");
  EXPECT_EQ(host_available_bytes(root), 8000000000 - 1000);
  // page cache the kernel reclaims first is room: the working set is current - inactive_file
  test::write_text(box + "memory.current", "7000000000\n");
  test::write_text(box + "memory.stat", "anon 1000000000\nfile 6000000000\ninactive_file 5000000000\n");
  EXPECT_EQ(host_available_bytes(root), 8000000000 - 2000000000);
  // a tighter limit on the parent group (the leaf unlimited) holds too
  test::write_text(box + "memory.max", "max\n");
  test::write_text(pod + "memory.max", "3000000000\n");
  test::write_text(pod + "memory.current", "2500000000\n");
  EXPECT_EQ(host_available_bytes(root), 500000000);
  test::write_text(pod + "memory.current", "9000000000\n");  // over its limit: nothing left
  EXPECT_EQ(host_available_bytes(root), 0);
  test::TempDir none;
  EXPECT_EQ(host_available_bytes(none.path() + "/"), -1);
  // cgroup v1 (a hybrid host): the memory controller's line, its limit near 2^63 where unlimited
  test::write_text(root + "proc/self/cgroup", "9:name=systemd:/\n4:memory,other:/job/7\n0::/\n");
  const std::string v1 = root + "sys/fs/cgroup/memory/job/7/";
  std::filesystem::create_directories(v1);
  test::write_text(v1 + "memory.limit_in_bytes", "9223372036854771712\n");
  test::write_text(v1 + "memory.usage_in_bytes", "12000000000\n");
  EXPECT_EQ(host_available_bytes(root), int64_t(32000000) * 1024);
  test::write_text(v1 + "memory.limit_in_bytes", "16000000000\n");
  test::write_text(v1 + "memory.stat", "cache 4000000000\ninactive_file 1\ntotal_inactive_file 3000000000\n");
  EXPECT_EQ(host_available_bytes(root), 16000000000 - 9000000000);
}

// The parameter count is the layout's element count, in closed form (tied and untied heads).
TEST(Qwen3Checkpoint, ParametersAreTheLayoutsElements) {
  for (const bool tie : {true, false}) {
    auto cfg = Qwen3Config::preset("tiny");
    cfg.tie_embeddings = tie;
    int64_t n = 0;
    for (const auto& t : cfg.tensor_layout(StDtype::kBF16)) n += t.elements();
    EXPECT_EQ(cfg.parameters(), n) << "tie " << tie;
  }
  auto deep = Qwen3Config::preset("tiny");
  deep.layers = int64_t(1) << 40;  // no layout built: immediate
  EXPECT_GT(deep.parameters(), int64_t(1) << 40);
}

TEST(Qwen3Checkpoint, SameSeedSameFileOtherSeedOtherWeights) {
  test::TempDir a, b, c;
  const auto cfg = Qwen3Config::preset("tiny");
  init_checkpoint(cfg, a.path(), 3);
  init_checkpoint(cfg, b.path(), 3);
  init_checkpoint(cfg, c.path(), 4);
  EXPECT_EQ(read_file(a.path() + "/model.safetensors"), read_file(b.path() + "/model.safetensors"));
  EXPECT_NE(read_file(a.path() + "/model.safetensors"), read_file(c.path() + "/model.safetensors"));
}

}  // namespace
}  // namespace thrive::model
