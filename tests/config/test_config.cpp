// Config::from_env: Qwen3-1.7B defaults, THRIVE_* and RSI_* variables, and one-line
// kUsage errors that name the variable and its value.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/support/test_support.hpp"
#include "thrive/config/config.hpp"
#include "thrive/core/error.hpp"

namespace thrive {
namespace {

using Env = std::map<std::string, std::string>;

config::Config from(const Env& env) {
  return config::Config::from_env([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

// Every field, so two configurations can be compared as one string.
std::string describe(const config::Config& c) {
  const auto& m = c.model;
  return fmt::format(
      "{} {} {} {} {} {} {} {} {} | {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
      m.hidden, m.intermediate, m.num_heads, m.num_kv_heads, m.head_dim, m.vocab,
      m.max_position, m.rope_theta, m.rms_eps, c.home, c.device, c.agent, c.rounds, c.passes,
      c.target_speedup, c.peak_bw_gbps, c.candidate_timeout_s, c.bench_max_s, c.bench_min_reps,
      c.bench_noise, c.min_gain, c.max_shape_bytes, c.threads, c.cxx, c.seed, c.log_level);
}

TEST(Config, DefaultsAreQwen3_1_7B) {
  const auto c = from({});
  EXPECT_EQ(c.model.hidden, 2048);
  EXPECT_EQ(c.model.intermediate, 6144);
  EXPECT_EQ(c.model.num_heads, 16);
  EXPECT_EQ(c.model.num_kv_heads, 8);
  EXPECT_EQ(c.model.head_dim, 128);
  EXPECT_EQ(c.model.vocab, 151936);
  EXPECT_EQ(c.model.max_position, 40960);
  EXPECT_DOUBLE_EQ(c.model.rope_theta, 1.0e6);
  EXPECT_DOUBLE_EQ(c.model.rms_eps, 1.0e-6);
  EXPECT_EQ(c.device, "auto");
  EXPECT_EQ(c.agent, "search");
  EXPECT_EQ(c.rounds, 6);
  EXPECT_EQ(c.passes, 1);
  EXPECT_EQ(c.cxx, "c++");
  EXPECT_EQ(c.log_level, "info");
  EXPECT_NE(c.home.find(".thrive"), std::string::npos) << c.home;
  // The environment hook is the only source: the defaults validate.
  EXPECT_NO_THROW(c.validate());
}

TEST(Config, ReadsThriveVariables) {
  const auto c = from({{"THRIVE_HIDDEN", "1024"},
                       {"THRIVE_INTERMEDIATE", "3072"},
                       {"THRIVE_NUM_HEADS", "8"},
                       {"THRIVE_NUM_KV_HEADS", "4"},
                       {"THRIVE_HEAD_DIM", "64"},
                       {"THRIVE_VOCAB", "32000"},
                       {"THRIVE_ROPE_THETA", "10000"},
                       {"THRIVE_RMS_EPS", "1e-5"},
                       {"THRIVE_HOME", "/tmp/somewhere"},
                       {"THRIVE_DEVICE", "cpu"},
                       {"THRIVE_ROUNDS", "3"},
                       {"THRIVE_PASSES", "2"},
                       {"THRIVE_BENCH_MAX_S", "0.25"},
                       {"THRIVE_THREADS", "2"},
                       {"THRIVE_SEED", "42"},
                       {"THRIVE_LOG_LEVEL", "warn"}});
  EXPECT_EQ(c.model.hidden, 1024);
  EXPECT_EQ(c.model.intermediate, 3072);
  EXPECT_EQ(c.model.num_heads, 8);
  EXPECT_EQ(c.model.num_kv_heads, 4);
  EXPECT_EQ(c.model.head_dim, 64);
  EXPECT_EQ(c.model.vocab, 32000);
  EXPECT_DOUBLE_EQ(c.model.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.model.rms_eps, 1e-5);
  EXPECT_EQ(c.home, "/tmp/somewhere");
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.rounds, 3);
  EXPECT_EQ(c.passes, 2);
  EXPECT_DOUBLE_EQ(c.bench_max_s, 0.25);
  EXPECT_EQ(c.threads, 2);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_EQ(c.log_level, "warn");
}

TEST(Config, RsiAliasesAreAcceptedAndThriveWins) {
  EXPECT_EQ(from({{"RSI_HIDDEN", "1024"}}).model.hidden, 1024);
  EXPECT_EQ(from({{"RSI_ROUNDS", "9"}}).rounds, 9);
  EXPECT_EQ(from({{"RSI_HOME", "/tmp/rsi"}}).home, "/tmp/rsi");
  EXPECT_EQ(from({{"THRIVE_HIDDEN", "4096"}, {"RSI_HIDDEN", "1024"}}).model.hidden, 4096);
  EXPECT_EQ(from({{"THRIVE_ROUNDS", "2"}, {"RSI_ROUNDS", "9"}}).rounds, 2);
  // THRIVE_ wins even when the alias holds junk: the alias is never read.
  EXPECT_EQ(from({{"THRIVE_ROUNDS", "2"}, {"RSI_ROUNDS", "junk"}}).rounds, 2);
  // A bad alias is reported under its own name.
  try {
    from({{"RSI_HIDDEN", "abc"}});
    FAIL() << "RSI_HIDDEN=abc accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kUsage);
    EXPECT_NE(std::string(e.what()).find("RSI_HIDDEN=abc"), std::string::npos) << e.what();
  }
}

struct BadEnv {
  const char* name;
  Env env;
  std::string must_mention;   // "VAR=value" the message names
};

void PrintTo(const BadEnv& b, std::ostream* os) { *os << b.name; }

class ConfigRejects : public ::testing::TestWithParam<BadEnv> {};

TEST_P(ConfigRejects, WithOneLineUsageErrorNamingTheValue) {
  const auto& p = GetParam();
  try {
    from(p.env);
    FAIL() << p.name << ": accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.category(), ErrorCategory::kUsage) << what;
    EXPECT_NE(what.find(p.must_mention), std::string::npos) << what;
    EXPECT_TRUE(test::is_one_line(what)) << what;
    EXPECT_NE(what.find("expected"), std::string::npos) << "says what is expected: " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, ConfigRejects,
    ::testing::Values(
        BadEnv{"hidden_not_a_number", {{"THRIVE_HIDDEN", "abc"}}, "THRIVE_HIDDEN=abc"},
        BadEnv{"hidden_trailing_junk", {{"THRIVE_HIDDEN", "12abc"}}, "THRIVE_HIDDEN=12abc"},
        BadEnv{"hidden_empty", {{"THRIVE_HIDDEN", ""}}, "THRIVE_HIDDEN="},
        BadEnv{"hidden_overflow", {{"THRIVE_HIDDEN", "99999999999999999999999"}},
               "THRIVE_HIDDEN=99999999999999999999999"},
        BadEnv{"hidden_zero", {{"THRIVE_HIDDEN", "0"}}, "THRIVE_HIDDEN=0"},
        BadEnv{"rounds_negative", {{"THRIVE_ROUNDS", "-1"}}, "THRIVE_ROUNDS=-1"},
        BadEnv{"passes_zero", {{"THRIVE_PASSES", "0"}}, "THRIVE_PASSES=0"},
        BadEnv{"hidden_not_divisible_by_heads", {{"THRIVE_HIDDEN", "2050"}},
               "THRIVE_HIDDEN=2050"},
        BadEnv{"heads_not_divisible_by_kv_heads",
               {{"THRIVE_NUM_HEADS", "16"}, {"THRIVE_NUM_KV_HEADS", "3"}},
               "THRIVE_NUM_KV_HEADS=3"},
        BadEnv{"odd_head_dim", {{"THRIVE_HEAD_DIM", "127"}}, "THRIVE_HEAD_DIM=127"},
        BadEnv{"device_gpu", {{"THRIVE_DEVICE", "gpu"}}, "THRIVE_DEVICE=gpu"},
        BadEnv{"device_gpu_alias", {{"RSI_DEVICE", "gpu"}}, "RSI_DEVICE=gpu"},
        BadEnv{"agent_unknown", {{"THRIVE_AGENT", "magic"}}, "THRIVE_AGENT=magic"},
        BadEnv{"log_level_unknown", {{"THRIVE_LOG_LEVEL", "loud"}}, "THRIVE_LOG_LEVEL=loud"},
        BadEnv{"noise_nan", {{"THRIVE_BENCH_NOISE", "nan"}}, "THRIVE_BENCH_NOISE=nan"},
        BadEnv{"timeout_inf", {{"THRIVE_CANDIDATE_TIMEOUT_S", "inf"}},
               "THRIVE_CANDIDATE_TIMEOUT_S=inf"},
        BadEnv{"eps_too_big", {{"THRIVE_RMS_EPS", "2"}}, "THRIVE_RMS_EPS=2"},
        BadEnv{"home_empty", {{"THRIVE_HOME", ""}}, "THRIVE_HOME="},
        BadEnv{"seed_negative", {{"THRIVE_SEED", "-5"}}, "THRIVE_SEED=-5"}),
    [](const ::testing::TestParamInfo<BadEnv>& info) { return std::string(info.param.name); });

// Every documented knob except the free-form ones rejects junk, naming itself.
TEST(Config, EveryKnobRejectsJunkNamingItself) {
  for (const auto& knob : config::Config::knobs()) {
    if (knob.name == "HOME" || knob.name == "CXX") continue;  // any non-empty string goes
    const std::string var = "THRIVE_" + knob.name;
    SCOPED_TRACE(var);
    try {
      from({{var, "j@nk"}});
      ADD_FAILURE() << var << "=j@nk accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kUsage);
      EXPECT_NE(std::string(e.what()).find(var + "=j@nk"), std::string::npos) << e.what();
      EXPECT_TRUE(test::is_one_line(e.what())) << e.what();
    }
  }
}

// The documented defaults (docs/env.md, `thrive env`) are the real ones: setting every
// knob to its documented default changes nothing.
TEST(Config, DocumentedDefaultsMatchTheStruct) {
  const std::string baseline = describe(from({}));
  for (const auto& knob : config::Config::knobs()) {
    if (knob.name == "HOME") continue;  // "~/.thrive" is $HOME/.thrive, spelled for people
    SCOPED_TRACE(knob.name);
    config::Config c;
    ASSERT_NO_THROW(c = from({{"THRIVE_" + knob.name, knob.default_value}}));
    EXPECT_EQ(describe(c), baseline);
  }
}

TEST(Config, KnobNamesAreUnique) {
  std::map<std::string, int> seen;
  for (const auto& knob : config::Config::knobs()) EXPECT_EQ(++seen[knob.name], 1) << knob.name;
  EXPECT_GE(seen.size(), 20u);
}

TEST(Config, ValidateCatchesFlagValues) {
  auto c = from({});
  c.rounds = -1;
  EXPECT_THROW(c.validate(), Error);
  c = from({});
  c.device = "tpu";
  try {
    c.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kUsage);
    EXPECT_NE(std::string(e.what()).find("tpu"), std::string::npos) << e.what();
  }
  c = from({});
  c.model.head_dim = 0;
  EXPECT_THROW(c.validate(), Error);
}

TEST(Config, ParseHelpers) {
  EXPECT_EQ(config::parse_int("X", "17", 0, 100), 17);
  EXPECT_EQ(config::parse_int("X", "-3", -5, 100), -3);
  EXPECT_THROW(config::parse_int("X", "101", 0, 100), Error);
  EXPECT_THROW(config::parse_int("X", "5 ", 0, 100), Error);
  EXPECT_THROW(config::parse_int("X", "0x10", 0, 100), Error);
  EXPECT_DOUBLE_EQ(config::parse_double("Y", "2.5e-1", 0, 1), 0.25);
  EXPECT_THROW(config::parse_double("Y", "1.5", 0, 1), Error);
  EXPECT_THROW(config::parse_double("Y", "-inf", -1e300, 1), Error);
  try {
    config::parse_double("THRIVE_Y", "1,5", 0, 10);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("THRIVE_Y=1,5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace thrive
