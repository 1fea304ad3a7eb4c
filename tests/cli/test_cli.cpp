// The thrive binary end to end: listing ops, exit codes and one-line error messages
// for bad flags, environment and files, storage refusals, verify verdicts, env docs.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>

#include <sqlite3.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.hpp"
#include "thrive/backend/backend.hpp"
#include "thrive/core/files.hpp"
#include "thrive/memory/store.hpp"

namespace thrive {
namespace {

class Cli : public ::testing::Test {
 protected:
  test::TempDir home;
  test::TempDir files;

  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    extra.push_back("THRIVE_HOME=" + home.path());
    return extra;
  }
  std::vector<std::string> small_env(std::vector<std::string> extra = {}) const {
    auto e = env(std::move(extra));
    for (const auto& kv : test::small_model_env()) e.push_back(kv);
    e.push_back("THRIVE_MAX_SHAPE_BYTES=1048576");  // keep verification shapes tiny
    return e;
  }
  std::string kernel_file(const std::string& name, const std::string& text) const {
    return test::write_text(files.path() + "/" + name, text);
  }
  // good.cpp: a correct rmsnorm_residual kernel
  std::string good_rmsnorm_file() const {
    return kernel_file("good.cpp", test::kernel_text("rmsnorm_residual", test::rmsnorm_body()));
  }
};

const std::vector<std::string> kOps = {"rmsnorm_residual", "swiglu_act", "rope", "softmax",
                                       "gqa_decode_attention"};

// A failed command prints exactly one line on stderr that names `value`.
void expect_one_line_error(const test::CommandResult& r, const std::string& value) {
  EXPECT_FALSE(r.err.empty());
  EXPECT_TRUE(test::is_one_line(r.err)) << "stderr:\n" << r.err;
  EXPECT_NE(r.err.find(value), std::string::npos) << "stderr:\n" << r.err;
}

TEST_F(Cli, OpsListsAllFive) {
  const auto r = test::run_thrive({"ops"}, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& op : kOps) EXPECT_NE(r.out.find(op), std::string::npos) << op << "\n" << r.out;
  EXPECT_NE(r.out.find("2048"), std::string::npos) << "Qwen3-1.7B hidden size shown";
}

// ops --spec prints a contract and writes nothing: no THRIVE_HOME, memory database or cache is
// created for it (it used to open the memory through the toolbox); an unknown op is a usage error.
TEST_F(Cli, OpsSpecCreatesNoHome) {
  const std::string fresh = home.path() + "/not-yet";
  const auto r = test::run_thrive({"ops", "--spec", "softmax", "--json"}, {"THRIVE_HOME=" + fresh, "THRIVE_DEVICE=cpu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j.value("op", ""), "softmax");
  EXPECT_EQ(j.value("backend", ""), "cpu");
  EXPECT_FALSE(j["template_params"].empty());
  EXPECT_FALSE(std::filesystem::exists(fresh));
  // without --json the same contract as text: tensors in ABI order, scalars, tolerances, the header
  const auto text = test::run_thrive({"ops", "--spec", "softmax"}, {"THRIVE_HOME=" + fresh, "THRIVE_DEVICE=cpu"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(nlohmann::json::parse(text.out, nullptr, false).is_discarded()) << "text, not JSON:\n" << text.out;
  for (const std::string& want : {std::string("Tensors, in ABI order"), std::string("  0  "),
                                  j["tensors"][0]["name"].get<std::string>(), std::string("Tolerance"),
                                  std::string("typedef struct ThriveArgs")})
    EXPECT_NE(text.out.find(want), std::string::npos) << want << "\n" << text.out;
  EXPECT_FALSE(std::filesystem::exists(fresh));
  const auto bad = test::run_thrive({"ops", "--spec", "softmaxx"}, {"THRIVE_HOME=" + fresh});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(fresh));
  // the common flags work here too: --log-level replaces a bad THRIVE_LOG_LEVEL, --device the variable
  const auto flagged = test::run_thrive({"ops", "--spec", "softmax", "--device", "cpu", "--log-level", "info"},
                                        {"THRIVE_HOME=" + fresh, "THRIVE_LOG_LEVEL=loud"});
  EXPECT_EQ(flagged.exit_code, 0) << flagged.err;
}

TEST_F(Cli, OpsJsonParses) {
  const auto r = test::run_thrive({"ops", "--json"}, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j.is_array());
  std::vector<std::string> names;
  for (const auto& o : j) {
    names.push_back(o.value("op", ""));
    EXPECT_FALSE(o["shapes"].empty());
    for (const auto& s : o["shapes"]) EXPECT_GT(s.value("min_bytes", int64_t{0}), 0);
  }
  EXPECT_EQ(names, kOps);
  // Model dims come from the environment.
  const auto small = test::run_thrive({"ops", "--json"}, env({"THRIVE_HIDDEN=512"}));
  ASSERT_EQ(small.exit_code, 0) << small.err;
  const auto js = nlohmann::json::parse(small.out);
  EXPECT_EQ(js[0]["shapes"][0]["min_bytes"], 1 * 512 * 2 * 4 + 512 * 2) << "rmsnorm T=1 at H=512";
}

// --json leaves stdout to the JSON document: progress and tables go to stderr.
TEST_F(Cli, OptimizeJsonIsTheOnlyThingOnStdout) {
  const auto r = test::run_thrive({"optimize", "--op", "rmsnorm_residual", "--shape", "T=1", "--rounds", "0", "--json"},
                                  env({"THRIVE_HIDDEN=256", "THRIVE_BENCH_MAX_S=0.02", "THRIVE_PEAK_BW_GBPS=100"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out.substr(0, 300);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0].value("shape", ""), "T=1");
  EXPECT_NE(r.err.find("Pass 1 results"), std::string::npos) << r.err.substr(0, 300);
}

TEST_F(Cli, UnknownOpIsUsageErrorListingValidOps) {
  const auto r = test::run_thrive({"optimize", "--op", "layernorm"}, env());
  EXPECT_EQ(r.exit_code, 2);
  expect_one_line_error(r, "layernorm");
  for (const auto& op : kOps) EXPECT_NE(r.err.find(op), std::string::npos) << r.err;
}

struct BadInvocation {
  const char* name;
  std::vector<std::string> args;
  std::vector<std::string> env;
  int exit_code;
  std::string must_mention;
};

void PrintTo(const BadInvocation& b, std::ostream* os) { *os << b.name; }

class CliRejects : public Cli, public ::testing::WithParamInterface<BadInvocation> {};

TEST_P(CliRejects, WithExitCodeAndOneLineMessage) {
  const auto& p = GetParam();
  const auto r = test::run_thrive(p.args, env(p.env));
  EXPECT_EQ(r.exit_code, p.exit_code) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  expect_one_line_error(r, p.must_mention);
  EXPECT_TRUE(r.out.empty()) << "nothing on stdout: " << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Usage, CliRejects,
    ::testing::Values(
        BadInvocation{"hidden_not_a_number", {"ops"}, {"THRIVE_HIDDEN=abc"}, 2, "THRIVE_HIDDEN=abc"},
        BadInvocation{"hidden_not_divisible_by_heads", {"ops"}, {"THRIVE_HIDDEN=2050"}, 2,
                      "THRIVE_HIDDEN=2050"},
        BadInvocation{"rsi_alias_bad", {"ops"}, {"RSI_ROUNDS=many"}, 2, "RSI_ROUNDS=many"},
        BadInvocation{"device_gpu", {"ops"}, {"THRIVE_DEVICE=gpu"}, 2, "THRIVE_DEVICE=gpu"},
        // THRIVE_CXX=false: should the flag slip through, the run stops at once (exit 5)
        // instead of optimizing.
        BadInvocation{"negative_rounds", {"optimize", "--op", "softmax", "--rounds", "-1"},
                      {"THRIVE_CXX=false"}, 2, "--rounds=-1"},
        BadInvocation{"zero_passes", {"optimize", "--op", "softmax", "--passes", "0"},
                      {"THRIVE_CXX=false"}, 2, "--passes=0"},
        BadInvocation{"unknown_op_for_verify", {"verify", "--op", "nope", "--kernel", "/dev/null"}, {},
                      2, "nope"},
        BadInvocation{"tune_unknown_param", {"tune", "--op", "softmax", "--grid", "NOPE=1"}, {}, 2,
                      "NOPE"},
        BadInvocation{"tune_undeclared_value", {"tune", "--op", "softmax", "--grid", "VEC=3"}, {}, 2,
                      "VEC=3"},
        BadInvocation{"tune_malformed_axis", {"tune", "--op", "softmax", "--grid", "VEC"}, {}, 2,
                      "'VEC'"},
        BadInvocation{"tune_too_many_points",
                      {"tune", "--op", "softmax", "--grid", "VEC=1,8,16", "--max-points", "2"}, {}, 2,
                      "3 points"},
        BadInvocation{"unknown_command", {"frobnicate"}, {}, 2, "frobnicate"},
        BadInvocation{"optimize_unknown_shape", {"optimize", "--op", "softmax", "--shape", "T=7"}, {}, 2, "T=7"},
        BadInvocation{"tune_unknown_shape", {"tune", "--op", "softmax", "--grid", "VEC=1", "--shape", "T=7"},
                      {}, 2, "T=7"},
        BadInvocation{"demo_zero_phases", {"demo", "--op", "softmax", "--phases", "0"}, {"THRIVE_CXX=false"}, 2,
                      "--phases=0"},
        BadInvocation{"demo_unknown_op", {"demo", "--op", "nope"}, {"THRIVE_CXX=false"}, 2, "nope"},
        BadInvocation{"demo_unknown_shape", {"demo", "--op", "softmax", "--shape", "T=7"}, {"THRIVE_CXX=false"}, 2,
                      "T=7"},
        BadInvocation{"demo_infinite_target", {"demo", "--op", "softmax", "--target-speedup", "inf"},
                      {"THRIVE_CXX=false"}, 2, "--target-speedup=inf"},
        BadInvocation{"demo_json_out_is_a_folder", {"demo", "--op", "softmax", "--json-out", "/tmp"},
                      {"THRIVE_CXX=false"}, 2, "/tmp"},
        BadInvocation{"demo_unknown_start", {"demo", "--op", "softmax", "--start", "random"}, {"THRIVE_CXX=false"}, 2,
                      "random"},
        BadInvocation{"e2e_bad_graphs", {"e2e", "--model", "/nonexistent", "--graphs", "maybe"}, {}, 2, "maybe"},
        BadInvocation{"e2e_bad_kernels", {"e2e", "--model", "/nonexistent", "--kernels", "fastest"}, {}, 2, "fastest"},
        BadInvocation{"e2e_engine_flags_on_cpu", {"e2e", "--model", "/nonexistent", "--device", "cpu", "--graphs", "off"},
                      {}, 2, "--graphs"},
        // without --device, THRIVE_DEVICE picks the engine, as for every other command
        BadInvocation{"e2e_thrive_device_cpu", {"e2e", "--model", "/nonexistent", "--graphs", "off"},
                      {"THRIVE_DEVICE=cpu"}, 2, "--graphs: the CPU engine"},
        BadInvocation{"e2e_thrive_device_named", {"e2e", "--model", "/nonexistent", "--graphs", "off"},
                      {"THRIVE_DEVICE=cpu"}, 2, "they apply to --device cuda (THRIVE_DEVICE=cpu)"},
        BadInvocation{"no_command", {}, {}, 2, "usage error: a command is required"},
        BadInvocation{"negative_seed", {"model", "init", "--preset", "tiny", "--out", "/tmp/x", "--seed", "-1"}, {}, 2,
                      "--seed -1"},
        BadInvocation{"unknown_flag_is_one_line", {"ops", "--bogus"}, {}, 2, "--bogus"},
        BadInvocation{"flag_not_a_number_is_one_line", {"e2e", "--model", "/nonexistent", "--batch", "abc"}, {}, 2,
                      "abc"},
        // an option given twice: CLI11's "At Most 1 required but received 2", said plainly
        BadInvocation{"option_given_twice", {"e2e", "--model", "/nonexistent", "--batch", "1", "--batch", "2"}, {}, 2,
                      "--batch given 2 times: expected it once"},
        // --json is a kernel file's result; the memory's kernels' results go to --json-out
        BadInvocation{"bench_json_without_kernel", {"bench", "--op", "all", "--json"}, {}, 2, "--json-out FILE"},
        BadInvocation{"e2e_dump_is_a_folder", {"e2e", "--model", "/nonexistent", "--dump", "/tmp/"}, {}, 2, "/tmp/"},
        // a prefix under a regular file: refused before the model is even opened, not after the run
        BadInvocation{"e2e_dump_under_a_file", {"e2e", "--model", "/nonexistent", "--dump", "/etc/passwd/x"}, {}, 2,
                      "cannot make its directory /etc/passwd"},
        BadInvocation{"e2e_empty_prompts_file", {"e2e", "--model", "/nonexistent", "--prompts-file", ""}, {}, 2,
                      "--prompts-file"},
        // the flag at fault alone, not the defaults of the others
        BadInvocation{"e2e_zero_batch", {"e2e", "--model", "/nonexistent", "--batch", "0"}, {}, 2,
                      "usage error: --batch 0: expected at least 1 sequence\n"},
        BadInvocation{"system_one_token", {"optimize", "--system", "--model", "/nonexistent", "--gen", "1"}, {}, 2,
                      "usage error: --gen 1: expected at least 2 generated tokens"},
        BadInvocation{"demo_empty_shape", {"demo", "--op", "softmax", "--shape", ""}, {"THRIVE_CXX=false"}, 2, "--shape"},
        BadInvocation{"missing_kernel_file",
                      {"verify", "--op", "softmax", "--kernel", "/nonexistent/k.cpp"}, {}, 3,
                      "/nonexistent/k.cpp"}),
    [](const auto& info) { return std::string(info.param.name); });

// model init onto a directory that already holds a checkpoint: refused (usage error naming the
// files and --force) with the checkpoint untouched; --force replaces config.json and
// model.safetensors; a directory with files init would not replace (a shard, an index) stays
// refused even with --force. A bad seed is refused before the directory is looked at.
// A model init that finds another one writing the same directory says it is waiting (it used to
// block silently), then writes once the other is done.
TEST_F(Cli, ModelInitSaysWhenItWaitsForAnotherInit) {
  const std::string dir = files.path() + "/locked";
  std::filesystem::create_directories(dir);
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);  // as a running init holds it
  auto init = std::async(std::launch::async, [&] {
    return test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir}, env());
  });
  EXPECT_EQ(init.wait_for(std::chrono::milliseconds(1500)), std::future_status::timeout);  // it waits
  EXPECT_FALSE(std::filesystem::exists(dir + "/config.json"));
  close(fd);  // the other init is done
  const auto r = init.get();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("another thrive model init is writing there; waiting"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/config.json"));
  // without a competitor: no such message
  const auto again = test::run_thrive({"model", "init", "--preset", "tiny", "--out", files.path() + "/free"}, env());
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err.find("waiting"), std::string::npos) << again.err;
}

TEST_F(Cli, ModelInitReplacesACheckpointOnlyWithForce) {
  const std::string dir = files.path() + "/ck";
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir}, env()).exit_code, 0);
  const auto weights = read_file(dir + "/model.safetensors"), config = read_file(dir + "/config.json");
  auto r = test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir, "--seed", "9"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  expect_one_line_error(r, "already holds a checkpoint (config.json, model.safetensors)");
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(dir + "/model.safetensors"), weights);
  EXPECT_EQ(read_file(dir + "/config.json"), config);
  r = test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir, "--seed", "x", "--force"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  expect_one_line_error(r, "--seed x");
  EXPECT_EQ(read_file(dir + "/model.safetensors"), weights);
  r = test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir, "--seed", "9", "--force"}, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_file(dir + "/model.safetensors"), weights);
  EXPECT_EQ(read_file(dir + "/config.json"), config);  // the same preset
  // a shard of another checkpoint beside it: never mixed, --force or not
  test::write_text(dir + "/model-00002-of-00002.safetensors", "x");
  const auto replaced = read_file(dir + "/model.safetensors");
  r = test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir, "--force"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  expect_one_line_error(r, "does not replace (model-00002-of-00002.safetensors)");
  EXPECT_EQ(read_file(dir + "/model.safetensors"), replaced);
  // a directory without a checkpoint is fine; its other files (also one named like the old
  // fixed temporary name, a link to another checkpoint's weights) are left alone
  const std::string other = files.path() + "/other";
  std::filesystem::create_directories(other);
  test::write_text(other + "/notes.txt", "mine");
  std::filesystem::create_symlink(dir + "/model.safetensors", other + "/model.safetensors.tmp");
  EXPECT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", other}, env()).exit_code, 0);
  EXPECT_EQ(read_file(other + "/notes.txt"), "mine");
  EXPECT_EQ(read_file(dir + "/model.safetensors"), replaced);
  EXPECT_TRUE(std::filesystem::is_symlink(other + "/model.safetensors.tmp"));
  EXPECT_FALSE(std::filesystem::is_symlink(other + "/model.safetensors"));
  // --force replaces a symlinked config.json or model.safetensors as a link, never its target
  const std::string linked = files.path() + "/linked";
  std::filesystem::create_directories(linked);
  std::filesystem::create_symlink(other + "/config.json", linked + "/config.json");
  std::filesystem::create_symlink(other + "/model.safetensors", linked + "/model.safetensors");
  const auto other_config = read_file(other + "/config.json"), other_weights = read_file(other + "/model.safetensors");
  r = test::run_thrive({"model", "init", "--preset", "tiny", "--out", linked, "--seed", "3", "--force"}, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(other + "/config.json"), other_config);
  EXPECT_EQ(read_file(other + "/model.safetensors"), other_weights);
  EXPECT_FALSE(std::filesystem::is_symlink(linked + "/config.json"));
  EXPECT_NE(read_file(linked + "/model.safetensors"), other_weights);
  // a config.json that is a directory: refused before the weights are replaced
  std::filesystem::remove(linked + "/config.json");
  std::filesystem::create_directories(linked + "/config.json");
  const auto linked_weights = read_file(linked + "/model.safetensors");
  r = test::run_thrive({"model", "init", "--preset", "tiny", "--out", linked, "--seed", "4", "--force"}, env());
  EXPECT_EQ(r.exit_code, 4) << r.err;
  expect_one_line_error(r, "config.json: exists and is not a regular file");
  EXPECT_EQ(read_file(linked + "/model.safetensors"), linked_weights);
  for (const auto& e : std::filesystem::directory_iterator(linked))
    EXPECT_EQ(e.path().filename().string().rfind(".", 0), std::string::npos) << "temporary file left: " << e.path();
  // what a killed run left (a temporary file of mkstemp's pattern) goes with the next run; a link
  // or another name of that shape stays
  const std::string killed = files.path() + "/killed";
  std::filesystem::create_directories(killed);
  test::write_text(killed + "/.model.safetensors.Ab12Cd", "partial");
  test::write_text(killed + "/.config.json.Ab12Cde", "mine");
  std::filesystem::create_symlink(other + "/notes.txt", killed + "/.config.json.Zz99Yy");
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", killed}, env()).exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(killed + "/.model.safetensors.Ab12Cd"));
  EXPECT_EQ(read_file(killed + "/.config.json.Ab12Cde"), "mine");
  EXPECT_TRUE(std::filesystem::is_symlink(killed + "/.config.json.Zz99Yy"));
  EXPECT_EQ(read_file(other + "/notes.txt"), "mine");
}

// Two model init runs at once into the same new directory: one writes the checkpoint, the other
// refuses (the directory lock), and the checkpoint is the one the successful run reports, whole.
TEST_F(Cli, ConcurrentModelInitsNeverMix) {
  for (int trial = 0; trial < 3; ++trial) {
    const std::string dir = files.path() + "/race" + std::to_string(trial);
    auto a = std::async(std::launch::async, [&] {
      return test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir, "--seed", "1"}, env());
    });
    auto b = test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir, "--seed", "2"}, env());
    const auto ra = a.get();
    ASSERT_EQ((ra.exit_code == 0) + (b.exit_code == 0), 1) << ra.err << b.err;
    EXPECT_EQ(ra.exit_code == 0 ? b.exit_code : ra.exit_code, 2);
    const std::string ref = files.path() + "/ref" + std::to_string(trial);
    ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", ref, "--seed", ra.exit_code == 0 ? "1" : "2"},
                               env()).exit_code, 0);
    EXPECT_EQ(read_file(dir + "/model.safetensors"), read_file(ref + "/model.safetensors"));
  }
}

// The e2e harness on the CPU engine with given prompts: --dump writes the prefill logits as raw
// float32 [B, vocab] and the greedy tokens; a prompts file that does not fit is an input error.
TEST_F(Cli, E2eTakesAPromptsFileAndDumpsLogitsAndTokens) {
  const std::string dir = files.path() + "/tiny";
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir}, env()).exit_code, 0);
  const auto prompts = test::write_text(files.path() + "/p.json", "[[1, 2, 3], [250]]");
  const std::string prefix = files.path() + "/dump";
  const auto r = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "2", "--prompt", "3", "--gen",
                                   "3", "--prompts-file", prompts, "--dump", prefix, "--json"},
                                  env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["tokens"].size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(read_file(prefix + ".tokens.json")), doc["tokens"]);
  EXPECT_EQ(read_file(prefix + ".logits.f32").size(), size_t(2 * 256 * 4));
  // the headroom's work counts the prompts as they ran, not --prompt tokens each: a stage then
  // never seems faster than the matrix ceiling by the ratio of the two
  const auto one_token = test::write_text(files.path() + "/one.json", "[[5]]");
  const auto short_run = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "1", "--prompt", "2000",
                                           "--gen", "2", "--prompts-file", one_token, "--json"}, env());
  ASSERT_EQ(short_run.exit_code, 0) << short_run.err;
  const auto ceil = nlohmann::json::parse(short_run.out)["ceilings"];
  EXPECT_LT(ceil["matrix_tflops"].get<double>(), 20 * ceil["matrix_tflops_measured"].get<double>()) << ceil.dump();
  const auto too_long = test::write_text(files.path() + "/long.json", "[[1, 2, 3, 4], [5]]");
  const auto bad = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "2", "--prompt", "3",
                                     "--prompts-file", too_long},
                                    env());
  EXPECT_EQ(bad.exit_code, 3) << bad.err;
  expect_one_line_error(bad, "prompt 0 is 4 ids long; expected a non-empty array of at most --prompt 3 ids");
  const auto numbers = test::write_text(files.path() + "/numbers.json", "[1, 2]");
  const auto flat = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "2", "--prompt", "3",
                                      "--prompts-file", numbers}, env());
  EXPECT_EQ(flat.exit_code, 3) << flat.err;
  expect_one_line_error(flat, "prompt 0 is not an array: 1;");
  // a file of another number of prompts says how many it holds and where the count comes from
  const auto two = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "1", "--prompt", "3",
                                     "--prompts-file", too_long}, env());
  EXPECT_EQ(two.exit_code, 3) << two.err;
  expect_one_line_error(two, "an array of 2 elements; expected a JSON array of 1 token-id array (one per sequence: --batch 1)");
  // a file far larger than --batch x --prompt ids can be is refused unread (its parse would take
  // about 20 times its size in memory)
  const auto huge = test::write_text(files.path() + "/huge.json", "[[1" + std::string(5000, ' ') + "]]");
  const auto big = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "1", "--prompt", "3",
                                     "--prompts-file", huge}, env());
  EXPECT_EQ(big.exit_code, 3) << big.err;
  EXPECT_NE(big.err.find("expected at most 4208 bytes"), std::string::npos) << big.err;
  const auto bad_id = test::write_text(files.path() + "/id.json", "[[1, 256], [5]]");
  EXPECT_EQ(test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "2", "--prompt", "3",
                              "--prompts-file", bad_id}, env()).exit_code, 3);
  // --gen 1: the token comes from prefill; the text says no decode step ran (not "0 ms per step")
  const auto one = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "2", "--prompt", "3", "--gen", "1"}, env());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("no decode step ran (--gen 1"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("ms per step over 0 steps"), std::string::npos) << one.out;
  // every sequence's greedy tokens are printed, not only the first one's
  for (const char* seq : {"greedy tokens of sequence 0: [", "greedy tokens of sequence 1: ["})
    EXPECT_NE(one.out.find(seq), std::string::npos) << seq << "\n" << one.out;
}

// The context a run needs is the prompt plus one position a decode step: --gen G feeds back G - 1
// tokens (the first comes from prefill, the last is never fed back), so a prompt may fill
// max_position_embeddings when --gen is 1, and one more token is refused by name before any work.
TEST_F(Cli, E2eNeedsPromptPlusGenMinusOnePositions) {
  const std::string dir = files.path() + "/tiny";
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir}, env()).exit_code, 0);
  auto config = nlohmann::json::parse(read_file(dir + "/config.json"));
  config["max_position_embeddings"] = 8;
  test::write_text(dir + "/config.json", config.dump(2));
  for (const auto& [prompt, gen] : {std::pair{"8", "1"}, std::pair{"6", "3"}, std::pair{"8", "0"}}) {
    const auto r = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--prompt", prompt, "--gen", gen, "--json"}, env());
    ASSERT_EQ(r.exit_code, 0) << prompt << " " << gen << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["tokens"][0].size(), size_t(std::stoi(gen))) << prompt << " " << gen;
  }
  const auto over = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--prompt", "6", "--gen", "4"}, env());
  EXPECT_EQ(over.exit_code, 2) << over.err;
  expect_one_line_error(over, "--prompt 6 --gen 4: a context of 9 positions");
  EXPECT_NE(over.err.find("max_position_embeddings 8"), std::string::npos) << over.err;
}

// Break-it findings (2026-11-30): hostile paths and files end in one clear line, never in a crash,
// a hang, a replaced device node or a lost memory.
TEST_F(Cli, HostileFilesAndPathsAreRefusedAndTheMemorySurvives) {
  { memory::Store created(home.path() + "/memory.db"); }  // reading commands create none
  const auto before = read_file(home.path() + "/memory.db");
  // an export onto the memory itself
  auto r = test::run_thrive({"memory", "export", home.path() + "/memory.db"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  expect_one_line_error(r, "memory.db");
  EXPECT_EQ(read_file(home.path() + "/memory.db"), before);
  // nor onto the files that guard it: a file put in place of the store's lock let `memory reset`
  // move the database away under a running optimize (break-it finding, 2026-12-07)
  for (const char* guard : {"/memory.db.lock", "/bandwidth.lock"}) {
    r = test::run_thrive({"memory", "export", home.path() + guard}, env());
    EXPECT_EQ(r.exit_code, 2) << guard << ": " << r.err;
    expect_one_line_error(r, guard + 1);
  }
  // nor is a benchmark's raw output
  r = test::run_thrive({"bench", "--op", "softmax", "--json-out", home.path() + "/memory.db"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(read_file(home.path() + "/memory.db"), before);
  // a results file that cannot be written is refused before the work, not after it (break-it
  // finding, 2026-12-07: tune ran its whole grid, then failed on /dev/full)
  for (const std::vector<std::string>& cmd : {std::vector<std::string>{"bench", "--op", "softmax"},
                                              {"tune", "--op", "softmax", "--grid", "VEC=1", "--shape", "T=1"}}) {
    auto argv = cmd;
    argv.insert(argv.end(), {"--json-out", "/dev/full"});
    r = test::run_thrive(argv, env());
    EXPECT_EQ(r.exit_code, 2) << cmd[0] << ": " << r.err;
    expect_one_line_error(r, "not a regular file");
  }
  // --json-out is the memory bench's; with --kernel it is refused, not silently ignored
  r = test::run_thrive({"bench", "--op", "softmax", "--kernel", files.path() + "/k.cpp", "--json-out",
                        files.path() + "/out.json"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  expect_one_line_error(r, "--json-out");
  EXPECT_FALSE(std::filesystem::exists(files.path() + "/out.json"));
  // a FIFO is neither read (it would block) nor replaced by an export
  const std::string fifo = files.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  r = test::run_thrive({"memory", "import", fifo}, env());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  r = test::run_thrive({"memory", "export", fifo}, env());
  EXPECT_EQ(r.exit_code, 4) << r.err;
  struct stat st{};
  ASSERT_EQ(stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  // a FIFO in place of the checkpoint's weights: refused, not a hang
  const std::string ck = files.path() + "/fifo_ck";
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", ck}, env()).exit_code, 0);
  std::filesystem::remove(ck + "/model.safetensors");
  ASSERT_EQ(mkfifo((ck + "/model.safetensors").c_str(), 0600), 0);
  r = test::run_thrive({"e2e", "--device", "cpu", "--model", ck, "--batch", "1", "--prompt", "2", "--gen", "1"}, env());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  // JSON nested 100000 deep: refused, not a stack overflow
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  r = test::run_thrive({"memory", "import", kernel_file("deep.json", deep)}, env());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  expect_one_line_error(r, "deep.json");
  // a valid document, a NUL byte, then garbage: refused (the parser would stop at the NUL), and
  // the same in a checkpoint's config.json
  const std::string nul_doc = std::string(R"({"format": "thrive-memory", "version": 1})") + '\0' + "garbage";
  r = test::run_thrive({"memory", "import", kernel_file("nul.json", nul_doc)}, env());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  expect_one_line_error(r, "nul.json");
  const std::string dir = files.path() + "/tiny";
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir}, env()).exit_code, 0);
  r = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "1", "--prompt", "4", "--prompts-file",
                        kernel_file("deep_prompts.json", deep)},
                       env());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  {
    const std::string nul_ck = files.path() + "/nul_ck";
    ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", nul_ck}, env()).exit_code, 0);
    std::ofstream(nul_ck + "/config.json", std::ios::app) << '\0' << "garbage";
    r = test::run_thrive({"e2e", "--device", "cpu", "--model", nul_ck, "--batch", "1", "--prompt", "2", "--gen", "1"}, env());
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
  }
  // an import whose kernel id is a path
  auto doc = nlohmann::json::parse(test::run_thrive({"memory", "export", files.path() + "/e.json"}, env()).exit_code == 0
                                       ? read_file(files.path() + "/e.json")
                                       : std::string("{}"));
  doc["kernels"] = nlohmann::json::array({{{"kernel_id", "../../x"}, {"op", "softmax"}, {"shape", "T=1"},
                                           {"device", "cpu:x"}, {"backend", "cpu"}, {"params", ""},
                                           {"source", "// @thrive op: softmax\n"}, {"time_us", 1.0},
                                           {"eager_us", 2.0}, {"speedup", 2.0}, {"verified", true}}});
  r = test::run_thrive({"memory", "import", kernel_file("path_id.json", doc.dump())}, env());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("kernel id \"../../x\""), std::string::npos) << r.err;  // refused for its id
  const auto kernels = test::run_thrive({"memory", "kernels"}, env());
  EXPECT_EQ(kernels.exit_code, 0) << kernels.err;
  EXPECT_EQ(kernels.out.find("../../x"), std::string::npos);
}

// The outer loop from the command line: recorded in memory, and a second run starts from the best
// system the first one found.
TEST_F(Cli, OptimizeSystemRecordsAndTheNextRunStartsFromTheBest) {
  const std::string dir = files.path() + "/tiny";
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir}, env()).exit_code, 0);
  const std::vector<std::string> args = {"optimize", "--system", "--model", dir, "--batch", "2", "--prompt", "8",
                                         "--gen", "4", "--budget", "2", "--json"};
  const auto first = test::run_thrive(args, env());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto a = nlohmann::json::parse(first.out);
  EXPECT_EQ(a["start"], nlohmann::json({{"threads", 0}, {"fuse_residual_norm", false}}));
  EXPECT_FALSE(a["stop_reason"].get<std::string>().empty());
  const auto second = test::run_thrive(args, env());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto b = nlohmann::json::parse(second.out);
  EXPECT_EQ(b["start"], a["best"]);
  for (const auto& it : b["iterations"])  // nothing the first run tried is tried again
    for (const auto& prev : a["iterations"]) EXPECT_NE(it["after"], prev["after"]);
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"optimize", "--system", "--model", dir, "--metric", "mix:3"},
           {"optimize", "--system"},
           {"optimize", "--op", "softmax", "--budget", "2"},
           {"optimize", "--system", "--model", dir, "--gen", "1"}}) {
    const auto r = test::run_thrive(bad, env());
    EXPECT_EQ(r.exit_code, 2) << bad.back() << ": " << r.err;
  }
}

// --agent on the outer loop: the CPU loop runs no agent (its kernels specialist only sets GEMM
// threads), so an LLM agent is not built (no LLM settings needed) and the run says so instead of
// ignoring the flag silently; a bad agent
// name is still refused. (On CUDA the agent runs the kernels specialist's inner loop and is made,
// with its LLM settings checked, before the first profile.)
TEST_F(Cli, OptimizeSystemSaysTheCpuLoopRunsNoAgent) {
  const std::string dir = files.path() + "/tiny";
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir}, env()).exit_code, 0);
  const std::vector<std::string> loop = {"optimize", "--system", "--device", "cpu", "--model", dir, "--prompt", "4",
                                         "--gen", "2", "--budget", "0"};
  auto args = loop;
  args.insert(args.end(), {"--agent", "llm"});
  auto r = test::run_thrive(args, env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--agent llm: the CPU outer loop runs no agent"), std::string::npos) << r.err;
  r = test::run_thrive(loop, env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("runs no agent"), std::string::npos) << r.err;
  args = loop;
  args.insert(args.end(), {"--agent", "gpt"});
  r = test::run_thrive(args, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("gpt"), std::string::npos) << r.err;
}

// What a break-it pass found on the outer loop and e2e (2026-11-30): a dump written through a
// link onto memory.db, empty numeric values read as 0, a stored configuration this machine
// cannot run, a nonsense bandwidth in an import, metrics spelt two ways.
TEST_F(Cli, OuterLoopAndE2eRefuseBadOutputsValuesAndStoredData) {
  const std::string dir = files.path() + "/tiny";
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir}, env()).exit_code, 0);
  const std::string db = home.path() + "/memory.db";
  { memory::Store created(db); }  // reading commands create none
  const auto db_size = std::filesystem::file_size(db);
  std::filesystem::create_symlink(db, files.path() + "/evil.logits.f32");
  auto r = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--gen", "2", "--dump", files.path() + "/evil"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::filesystem::file_size(db), db_size);
  // A KV cache that cannot fit is refused before the prompts are built (2^31 - 1 of them would
  // need tens of GB first)
  r = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", "2147483647", "--prompt", "1", "--gen", "1"},
                       env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("KV cache (2 x batch x context x 2 layers"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GB, more than the 17.18 GB the CPU engine allows"), std::string::npos) << r.err;
  // integer flags are decimal: CLI11 alone read 010 as octal 8 and took 0x10
  for (const char* v : {"010", "0x10"}) {
    r = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", v}, env());
    EXPECT_EQ(r.exit_code, 2) << v;
    EXPECT_NE(r.err.find(std::string("--batch ") + v + ": expected a decimal integer"), std::string::npos) << r.err;
  }
  for (const char* v : {"1e3", "99999999999"}) {  // CLI11's own refusal, said with flag and value
    r = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--batch", v}, env());
    EXPECT_EQ(r.exit_code, 2) << v;
    EXPECT_NE(r.err.find(std::string("--batch ") + v + ": not a number this flag takes"), std::string::npos) << r.err;
  }
  // a config.json that disagrees with the tensors is named as such, before the KV-cache limit
  // its numbers imply blames the command line
  {
    auto cfg = nlohmann::json::parse(read_file(dir + "/config.json"));
    const auto saved = cfg.dump();
    cfg["num_key_value_heads"] = 2147483648LL;
    cfg["num_attention_heads"] = 2147483648LL;
    test::write_text(dir + "/config.json", cfg.dump());
    r = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--gen", "2"}, env());
    test::write_text(dir + "/config.json", saved);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("config.json implies"), std::string::npos) << r.err;
  }
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"e2e", "--device", "cpu", "--model", dir, "--gen", ""},
           {"e2e", "--device", "cpu", "--model", dir, "--kernels", "best:"},
           {"e2e", "--device", "cpu", "--model", dir, "--fusions", "qk_rope_kv,"},
           {"e2e", "--device", "cuda", "--model", dir, "--fusions", "norm_residual,bogus"},
           {"e2e", "--device", "cuda", "--model", dir, "--gemv-rows", "x"},
           {"e2e", "--device", "cuda", "--model", dir, "--gemv-rows", "3"},
           {"e2e", "--device", "cuda", "--model", dir, "--pdl", "2"},
           {"e2e", "--device", "cuda", "--model", dir, "--decode-attention", "flash"},
           {"e2e", "--device", "cpu", "--model", dir, "--decode-attention", "op"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "ON"},
           // the persistent kernel cannot run with these: an error for "on" (auto would fall back)
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "on", "--batch", "8"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "on", "--gemv", "off"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "on", "--fusions", "qk_rope_kv,swiglu_down"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "on", "--decode-attention", "op"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-stages", "1"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-stages", "9"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-stages", "-1"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-stages", "2x"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-stages", "08"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-stages", "10"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-stages", ""},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-kv-prefetch", "yes"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-splits", "65"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-splits", "-1"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-splits", "09"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-splits", "4x"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-splits", "4"},
           {"e2e", "--device", "cpu", "--model", dir, "--persistent-splits", "0"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-blocks", "-1"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-blocks", "012"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-blocks", "12x"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-blocks", "12345"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-blocks", "4"},
           {"e2e", "--device", "cpu", "--model", dir, "--persistent-blocks", "0"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-stages", "4"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-kv-prefetch", "on"},
           {"e2e", "--device", "cpu", "--model", dir, "--persistent-kv-prefetch", "off"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-attention", "TC"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-attention", ""},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-attention", "cores"},
           {"e2e", "--device", "cpu", "--model", dir, "--persistent-attention", "tc"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-softmax", "Unified"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-softmax", ""},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-softmax", "merge"},
           {"e2e", "--device", "cpu", "--model", dir, "--persistent-softmax", "merge"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-weights", "EC12"},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent-weights", ""},
           {"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-weights", "ec12"},
           {"e2e", "--device", "cpu", "--model", dir, "--persistent-weights", "bf16"},
           {"e2e", "--device", "cpu", "--model", dir, "--persistent", "off"},
           {"optimize", "--system", "--model", dir, "--budget", ""},
           {"optimize", "--system", "--model", dir, "--r-t", "inf"},
           {"optimize", "--system", "--model", dir, "--metric", "mix: 0.5"},
           {"optimize", "--system", "--model", dir, "--metric", "mix:0x1p-1"}}) {
    r = test::run_thrive(args, env());
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
  }
  // The CPU engine refuses the CUDA engine's options by name: the ones given, not the whole list
  r = test::run_thrive({"e2e", "--device", "cpu", "--model", dir, "--pdl", "off", "--persistent-kv-prefetch", "on"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--pdl --persistent-kv-prefetch: the CPU engine"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--graphs"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--device auto chose cpu"), std::string::npos) << r.err;
  // with --device auto on a machine with no GPU, the message says auto chose the CPU
  if (backend::resolve_backend_name("auto") == "cpu") {
    r = test::run_thrive({"e2e", "--model", dir, "--kernels", "best", "--device", "auto"}, env());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("(--device auto chose cpu: no CUDA device here)"), std::string::npos) << r.err;
    // without --device, the message names the variable that chose auto
    r = test::run_thrive({"e2e", "--model", dir, "--kernels", "best"}, env({"THRIVE_DEVICE=auto"}));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("(THRIVE_DEVICE=auto chose cpu: no CUDA device here)"), std::string::npos) << r.err;
  }
  // the KV prefetch's default (off) may be spelled out with --persistent off: it asks for nothing,
  // so the run goes on to the GPU (a usage error would exit 2 before)
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-kv-prefetch", "off",
                        "--gen", "2", "--prompt", "4"},
                       env());
  EXPECT_NE(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.find("--persistent-kv-prefetch with --persistent off"), std::string::npos) << r.err;
  // the split count's bounds pass the CLI (then the run goes on, or stops at a missing GPU)
  for (const char* splits : {"1", "64"}) {
    r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-splits", splits, "--gen", "2",
                          "--prompt", "4"},
                         env());
    EXPECT_NE(r.exit_code, 2) << splits << ": " << r.err;
  }
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-splits", "100"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--persistent-splits 100: expected 0 (automatic) or a whole number of splits, 1 to 64"),
            std::string::npos)
      << r.err;
  // a count of three digits passes the CLI (then the run goes on, or stops at a missing GPU)
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-blocks", "132", "--gen", "2", "--prompt", "4"},
                       env());
  EXPECT_NE(r.exit_code, 2) << r.err;
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-blocks", "12345"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--persistent-blocks 12345: expected 0 (automatic) or a whole number of blocks, 1 to the SM count"),
            std::string::npos)
      << r.err;
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-attention", "simt"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--persistent-attention simt: expected tc or cores"), std::string::npos) << r.err;
  // asked for by name on a head dim the tensor-core parts do not take (the tiny preset's 16):
  // refused before any GPU work
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-attention", "tc"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("take head_dim 64 or 128, and " + dir + " has 16"), std::string::npos) << r.err;
  // the unified max combines the tensor-core parts: asked for with the CUDA-core parts, or on a
  // head dim the tensor-core parts do not take, an error before any GPU work; merge (the
  // default) spelled out goes on to the GPU
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-softmax", "softmax"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--persistent-softmax softmax: expected unified or merge"), std::string::npos) << r.err;
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-attention", "cores", "--persistent-softmax",
                        "unified"},
                       env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--persistent-softmax unified: it combines the tensor-core attention parts, and "
                       "--persistent-attention cores"),
            std::string::npos)
      << r.err;
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-softmax", "unified"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("which take head_dim 64 or 128, and " + dir + " has 16 (use --persistent-softmax merge)"),
            std::string::npos)
      << r.err;
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-softmax", "merge", "--gen", "2", "--prompt",
                        "4"},
                       env());
  EXPECT_NE(r.exit_code, 2) << r.err;
  // the weight stream's choices: a bad one named; bf16 and auto ask nothing of an off kernel, so
  // with --persistent off they go on to the GPU, while ec12 is refused there
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--batch", "8", "--persistent-weights", "ec12"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--persistent-weights ec12 with --batch 8: it sets the persistent decode kernel's weight stream"),
            std::string::npos)
      << r.err;
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent-weights", "int4"}, env());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--persistent-weights int4: expected auto, ec12 or bf16"), std::string::npos) << r.err;
  r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-weights", "ec12"}, env());
  EXPECT_NE(r.err.find("--persistent-weights with --persistent off"), std::string::npos) << r.err;
  for (const char* w : {"bf16", "auto"}) {
    r = test::run_thrive({"e2e", "--device", "cuda", "--model", dir, "--persistent", "off", "--persistent-weights", w, "--gen",
                          "2", "--prompt", "4"},
                         env());
    EXPECT_NE(r.exit_code, 2) << w << ": " << r.err;
  }
  // A stored best system with a thread count no machine has: reset with a warning, not obeyed
  const std::vector<std::string> loop = {"optimize", "--system", "--model", dir, "--batch", "1", "--prompt", "4",
                                         "--gen", "2", "--budget", "0", "--metric", "mix:1", "--json"};
  r = test::run_thrive(loop, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto first = nlohmann::json::parse(r.out);
  EXPECT_EQ(first["metric"], "decode");  // mix:1 is decode: one spelling in memory
  {
    memory::Store store(db);
    store.set_best_system(first["system_key"], first["device_key"], "decode", R"({"threads": 100000})");
  }
  r = test::run_thrive(loop, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["start"]["threads"], 0);
  EXPECT_NE(r.err.find("threads 100000"), std::string::npos) << r.err;
  // An import with a nonsense copy bandwidth is refused, and memory keeps working
  const nlohmann::json bad = {{"format", "thrive-memory"},
                              {"devices", {{{"device_key", "cpu:other"}, {"peak_bw_gbps", -5}}}}};
  r = test::run_thrive({"memory", "import", kernel_file("bw.json", bad.dump())}, env());
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(test::run_thrive({"leaderboard"}, env()).exit_code, 0);
}

TEST_F(Cli, HomeUnderARegularFileIsAStorageError) {
  const std::string file = test::write_text(files.path() + "/not-a-dir", "x");
  const auto r = test::run_thrive({"leaderboard"}, {"THRIVE_HOME=" + file + "/home"});
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  expect_one_line_error(r, file);
}

TEST_F(Cli, HomeInAReadOnlyDirectoryIsAStorageError) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions (covered by the regular-file case)";
  const std::string ro = files.path() + "/readonly";
  ASSERT_EQ(mkdir(ro.c_str(), 0500), 0);
  const auto r = test::run_thrive({"leaderboard"}, {"THRIVE_HOME=" + ro + "/home"});
  chmod(ro.c_str(), 0700);
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  expect_one_line_error(r, ro);
}

TEST_F(Cli, CorruptedMemoryIsRefusedAndLeftUnchanged) {
  std::string junk(4096, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = char((i * 131 + 7) % 251);
  const std::string db = test::write_text(home.path() + "/memory.db", junk);
  for (const auto& args : std::vector<std::vector<std::string>>{{"leaderboard"}, {"memory", "show"}}) {
    const auto r = test::run_thrive(args, env());
    EXPECT_EQ(r.exit_code, 4) << args[0] << ": " << r.out << r.err;
    expect_one_line_error(r, "not a SQLite database");
    EXPECT_NE(r.err.find(db), std::string::npos) << r.err;
    EXPECT_EQ(test::slurp(db), junk) << "memory.db modified by " << args[0];
  }
}

TEST_F(Cli, KernelFileWithoutEntryIsAnInputError) {
  const std::string k = kernel_file("no_entry.cpp",
                                    "// @thrive op: rmsnorm_residual\n// @thrive backend: cpu\n"
                                    "int k() { return 0; }\n");
  const auto r = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k}, small_env());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  expect_one_line_error(r, k);
  EXPECT_NE(r.err.find("entry"), std::string::npos) << r.err;
}

TEST_F(Cli, KernelFileForAnotherOpIsAnInputError) {
  const std::string k = kernel_file("softmax.cpp", test::kernel_text("softmax", "return 0;"));
  const auto r = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k}, small_env());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  expect_one_line_error(r, "softmax");
}

TEST_F(Cli, VerifyOfAWrongKernelExitsOne) {
  const std::string k = kernel_file(
      "zeros.cpp", test::kernel_text("rmsnorm_residual",
                                     test::rmsnorm_body("for (int64_t i = 0; i < T * H; ++i) out[i] = 0;")));
  const auto r = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k}, small_env());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("incorrect"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max_rel_err"), std::string::npos) << r.out;
  // the worst error is said to be over what was compared, beside the failed cases' own lines
  EXPECT_NE(r.out.find("(over the outputs compared;"), std::string::npos) << r.out;
  // a named shape that fits a whole verification is never said to be over its limit, even when
  // an earlier case failed and it was not reached
  const auto named = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k, "--shape", "T=16"}, small_env());
  EXPECT_EQ(named.exit_code, 1) << named.out << named.err;
  EXPECT_EQ(named.err.find("not verified whole"), std::string::npos) << named.err;
}

// A THRIVE_HOME that is not UTF-8 cannot travel in the CPU executor's JSON spec: a usage error
// naming the path, not an internal error (exit 70) from the JSON library
TEST_F(Cli, ANonUtf8HomeIsAUsageErrorForCpuCandidates) {
  const std::string k = good_rmsnorm_file();
  const auto r = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k},
                                  {"THRIVE_HOME=" + files.path() + "/h\xff", "THRIVE_DEVICE=cpu"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  expect_one_line_error(r, "not valid UTF-8");
}

// --shape names a shape to verify whole: rmsnorm_residual T=4096 at Qwen3-1.7B's hidden size is
// 64 MiB of traffic, over the 16 MiB up to which a shape joins unnamed, within the 512 MiB limit
TEST_F(Cli, VerifyOfANamedShapeRunsItWhole) {
  const std::string k = good_rmsnorm_file();
  const auto r = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k, "--shape", "T=4096"}, env());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("case T=4096 "), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("not verified whole"), std::string::npos) << r.err;
  const auto unnamed = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k}, env());
  EXPECT_EQ(unnamed.exit_code, 0) << unnamed.out << unnamed.err;
  EXPECT_EQ(unnamed.out.find("case T=4096 "), std::string::npos) << unnamed.out;
}

TEST_F(Cli, VerifyOfACorrectKernelExitsZero) {
  const std::string k = good_rmsnorm_file();
  const auto r = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k}, small_env());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(rmsnorm_residual): passed"), std::string::npos)
      << "verify names no shape it did not run: " << r.out;
}

// bench of a file on the CPU names its two figures for what they are there: a call per executor
// command (round trip included) and batches of calls, not CUDA's "launched" and "graph"
TEST_F(Cli, BenchOfAFileOnTheCpuNamesSingleCallsAndBatches) {
  const std::string k = good_rmsnorm_file();
  const auto r = test::run_thrive({"bench", "--op", "rmsnorm_residual", "--kernel", k}, small_env());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("  single   median "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("round trip included"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  batched  median "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the figure THRIVE ranks by"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("launched"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("graph"), std::string::npos) << r.out;
  // --json carries what the text's last line says: the eager time, the speedup, a new best or not
  const auto j = test::run_thrive({"bench", "--op", "rmsnorm_residual", "--kernel", k, "--json"}, small_env());
  ASSERT_EQ(j.exit_code, 0) << j.out << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_GT(doc.at("eager_us").get<double>(), 0.0);
  EXPECT_NEAR(doc.at("speedup").get<double>(), doc["eager_us"].get<double>() / doc.at("bench").at("graph_us").get<double>(),
              1e-9 * doc["speedup"].get<double>());
  EXPECT_TRUE(doc.at("new_best").is_boolean());
}

// verify --json carries what ran: the verification, and no benchmark or paired section of zeros
TEST_F(Cli, VerifyJsonHasNoSectionsForStepsThatDidNotRun) {
  const std::string k = good_rmsnorm_file();
  const auto r = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k, "--json"}, small_env());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("status"), "passed");
  EXPECT_FALSE(j.at("verify").at("cases").empty());
  for (const char* absent : {"bench", "paired", "post_verify", "occupancy", "registers_per_thread"})
    EXPECT_FALSE(j.contains(absent)) << absent;
}

TEST_F(Cli, VerifyOfACompileErrorExitsOneWithTheCompilerOutput) {
  const std::string k = kernel_file("broken.cpp", test::kernel_text("rmsnorm_residual", "return nope;"));
  const auto r = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", k}, small_env());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("compile_failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nope"), std::string::npos) << r.out;
  // the compiler's lines name the user's file, not the name the backend compiled it under,
  // include chains and --json's compile_log too
  EXPECT_NE(r.out.find("\n" + k + ":"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("kernel.cpp"), std::string::npos) << r.out;
  const std::string chain = kernel_file(
      "chain.cpp", test::kernel_text("rmsnorm_residual", test::rmsnorm_body(),
                                     "#include <vector>\nstatic int g() { std::vector<int> v; v.push_back(std::vector<int>{}); return 0; }\n"));
  for (const bool json : {false, true}) {
    std::vector<std::string> args = {"verify", "--op", "rmsnorm_residual", "--kernel", chain};
    if (json) args.push_back("--json");
    const auto c = test::run_thrive(args, small_env());
    EXPECT_EQ(c.exit_code, 1) << c.out << c.err;
    const std::string text = json ? nlohmann::json::parse(c.out)["compile_log"].get<std::string>() : c.out;
    EXPECT_NE(text.find("from " + chain + ":"), std::string::npos) << text;
    EXPECT_EQ(text.find("from kernel.cpp"), std::string::npos) << text;
    EXPECT_EQ(text.find("kernel.cpp"), std::string::npos) << text;
    if (json) {
      EXPECT_FALSE(nlohmann::json::parse(c.out).contains("verify")) << "a verification that never ran";
    }
  }
  // a chain's first line names the kernel when it includes the header directly
  const std::string direct = kernel_file("direct.cpp",
                                         "// @thrive op: rmsnorm_residual\n// @thrive backend: cpu\n// @thrive entry: k\n"
                                         "#define uint16_t 1\n#include \"thrive_cpu.h\"\n");
  const auto d = test::run_thrive({"verify", "--op", "rmsnorm_residual", "--kernel", direct}, small_env());
  EXPECT_EQ(d.exit_code, 1) << d.out << d.err;
  EXPECT_NE(d.out.find("In file included from " + direct + ":5"), std::string::npos) << d.out;
  EXPECT_EQ(d.out.find("kernel.cpp"), std::string::npos) << d.out;
}

TEST_F(Cli, EnvMarkdownListsEveryVariable) {
  const auto r = test::run_thrive({"env", "--markdown"}, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| `THRIVE_HIDDEN` | 2048 |"), std::string::npos) << r.out;
  for (const auto* table : {&config::Config::knobs(), &config::Config::other_variables()})
    for (const auto& knob : *table)
      EXPECT_NE(r.out.find("`THRIVE_" + knob.name + "`"), std::string::npos) << knob.name;
  EXPECT_EQ(r.out.rfind("| variable |", 0), 0u) << r.out;
  // the variables read outside Config are listed too (outer loop, LLM agents)
  for (const char* v : {"THRIVE_ACCEPT_RT", "THRIVE_ACCEPT_AT", "THRIVE_PER_RUN_USD", "THRIVE_LLM_MAX_TURNS"})
    EXPECT_NE(r.out.find(std::string("`") + v + "`"), std::string::npos) << v;
  // docs/env.md holds this very table
  const std::string doc = read_file(std::string(THRIVE_SOURCE_DIR) + "/docs/env.md");
  EXPECT_NE(doc.find(r.out), std::string::npos) << "docs/env.md is not the output of `thrive env --markdown`";
}

TEST_F(Cli, EmptyLeaderboardIsFine) {
  const auto r = test::run_thrive({"leaderboard", "--json"}, env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::array());
  EXPECT_NE(access((home.path() + "/memory.db").c_str(), F_OK), 0) << "a reading command created memory.db";
}

TEST_F(Cli, MemoryImportOfBadJsonIsAnInputError) {
  const std::string bad = test::write_text(files.path() + "/bad.json", "{not json");
  const auto r = test::run_thrive({"memory", "import", bad}, env());
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  expect_one_line_error(r, bad);
  const std::string malformed = test::write_text(
      files.path() + "/malformed.json",
      R"({"format": "thrive-memory", "evidence": [{"card_id": "c", "successes": "many"}]})");
  const auto m = test::run_thrive({"memory", "import", malformed}, env());
  EXPECT_EQ(m.exit_code, 3) << m.out << m.err;
  expect_one_line_error(m, "import");
}

TEST_F(Cli, TuneEvaluatesEveryPointRanksThemAndKeepsTheBestInMemory) {
  const std::string out = files.path() + "/tune.json";
  const auto r = test::run_thrive({"tune", "--op", "swiglu_act", "--grid", "VEC=1,8 UNROLL=1,4",
                                   "--base", "defaults", "--json-out", out},
                                  small_env());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Top 4 of 4 passing points"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(read_file(out));
  ASSERT_EQ(doc["points"].size(), 4u);
  double fastest = 1e300;
  for (const auto& p : doc["points"]) {
    EXPECT_EQ(p["status"], "passed") << p.dump();
    fastest = std::min(fastest, p["bench"]["median_us"].get<double>());
  }
  // The fastest point is now the best kernel of that shape in memory.
  const auto lb = test::run_thrive({"leaderboard", "--json"}, small_env());
  ASSERT_EQ(lb.exit_code, 0) << lb.err;
  const auto rows = nlohmann::json::parse(lb.out);
  ASSERT_EQ(rows.size(), 1u) << lb.out;
  EXPECT_EQ(rows[0]["op"], "swiglu_act");
  EXPECT_EQ(rows[0]["shape"], doc["shape"]);
  EXPECT_TRUE(rows[0]["verified"].get<bool>());
  // the table prints the whole device key, which --device-key then finds
  const std::string key = rows[0]["device"];
  const auto table = test::run_thrive({"leaderboard"}, small_env());
  EXPECT_NE(table.out.find(" " + key + " "), std::string::npos) << table.out;
  const auto by_key = test::run_thrive({"leaderboard", "--json", "--device-key", key}, small_env());
  EXPECT_EQ(nlohmann::json::parse(by_key.out).size(), 1u) << by_key.out << by_key.err;
  // empty values are usage errors, not another memory (`--home ""`) or every device
  std::filesystem::remove("empty-home.json");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"leaderboard", "--device-key", ""}, {"leaderboard", "--home", ""}, {"memory", "--home", "", "show"},
           {"memory", "--home", "", "reset"}, {"memory", "--home", "", "export", "empty-home.json"}}) {
    const auto empty = test::run_thrive(args, small_env());
    EXPECT_EQ(empty.exit_code, 2) << args[1] << ": " << empty.out;
    expect_one_line_error(empty, args[1] + " \"\"");
  }
  // and after the memory command's word, where --home falls through to `memory`
  const auto after = test::run_thrive({"memory", "show", "--home", ""}, small_env());
  EXPECT_EQ(after.exit_code, 2) << after.out;
  expect_one_line_error(after, "--home \"\"");
  // refused before the subcommand ran: nothing exported, the memory not moved aside
  EXPECT_FALSE(std::filesystem::exists("empty-home.json"));
  EXPECT_EQ(nlohmann::json::parse(test::run_thrive({"leaderboard", "--json"}, small_env()).out).size(), 1u);
  // and so is `--home=` before another word, which CLI11 would take as the value
  const auto eq = test::run_thrive({"leaderboard", "--home=", "--json"}, small_env());
  EXPECT_EQ(eq.exit_code, 2) << eq.out;
  expect_one_line_error(eq, "--home=");
  EXPECT_FALSE(std::filesystem::exists("--json"));
  // an option where the key belongs is a usage error naming it, not an empty answer for key "--json"
  const auto swapped = test::run_thrive({"leaderboard", "--device-key", "--json"}, small_env());
  EXPECT_EQ(swapped.exit_code, 2) << swapped.out;
  EXPECT_NE(swapped.err.find("--device-key --json: expected a value, not an option"), std::string::npos) << swapped.err;
}

// `memory reset` never replaces an earlier backup, an import that refuses its document creates no
// memory, and values CLI11 would take literally (blank, another option, words after `--`) are
// usage errors before any command runs (fourth break-it review).
TEST_F(Cli, ResetKeepsEveryBackupAndRefusedInputChangesNothing) {
  namespace fs = std::filesystem;
  const std::string home = files.path() + "/reset-home", db = home + "/memory.db";
  fs::create_directories(home);
  { memory::Store created(db); }
  {  // --home after the memory command's word works as before it (it falls through to `memory`)
    const auto shown = test::run_thrive({"memory", "show", "--home", home}, env());
    EXPECT_EQ(shown.exit_code, 0) << shown.err;
    EXPECT_NE(shown.out.find(db), std::string::npos) << shown.out;
  }
  {  // while another process (here: this one) has the store open, reset refuses and moves nothing
    memory::Store open(db);
    const auto busy = test::run_thrive({"memory", "--home", home, "reset"}, env());
    EXPECT_EQ(busy.exit_code, 4) << busy.err;
    EXPECT_NE(busy.err.find("in use by another thrive process"), std::string::npos) << busy.err;
    EXPECT_TRUE(fs::exists(db));
  }
  // decoys under every backup name a reset in the next seconds could take (TIME to the second)
  std::vector<std::string> decoys;
  for (int dt = -1; dt <= 20; ++dt) {
    const std::time_t t = std::time(nullptr) + dt;
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    decoys.push_back(db + ".bak-" + buf);
    write_file_atomic(decoys.back(), "decoy");
  }
  const auto reset = test::run_thrive({"memory", "--home", home, "reset"}, env());
  ASSERT_EQ(reset.exit_code, 0) << reset.err;
  for (const auto& d : decoys) EXPECT_EQ(read_file(d), "decoy") << d;
  EXPECT_FALSE(fs::exists(db));
  const auto kept = reset.out.substr(reset.out.find(db + ".bak-"));
  EXPECT_NE(kept.find("Z-2"), std::string::npos) << reset.out;  // the next free name
  // a backup is not an export target either
  const auto onto = test::run_thrive({"memory", "--home", home, "export", decoys[1]}, env());
  EXPECT_EQ(onto.exit_code, 2) << onto.out;
  EXPECT_EQ(read_file(decoys[1]), "decoy");

  // an import that refuses its document leaves no THRIVE_HOME and no memory.db behind
  const std::string doc = files.path() + "/no-format.json", fresh = files.path() + "/never";
  write_file_atomic(doc, R"({"cards":[],"kernels":[]})");
  const auto bad = test::run_thrive({"memory", "--home", fresh, "import", doc}, env());
  EXPECT_EQ(bad.exit_code, 3) << bad.out;
  EXPECT_FALSE(fs::exists(fresh));

  // blank values, options where a value belongs, words after `--`, unknown ops: usage errors, and
  // the memory they would have reset is still there
  { memory::Store created(db); }
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"memory", "--home", " ", "show"}, {"memory", "--home", "--log-level", "show"},
           {"memory", "reset", "--", "--home", home}, {"memory", "import", doc, "--", "--home", fresh},
           {"leaderboard", "--home", "--json"}, {"memory", "--home", home, "kernels", "--op", "nosuch"},
           {"memory", "--home", home, "--log-level", "bogus", "show"}}) {
    const auto r = test::run_thrive(args, env());
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(r.exit_code, 2) << line << ": " << r.out << r.err;
    EXPECT_TRUE(test::is_one_line(r.err)) << line << ": " << r.err;
  }
  EXPECT_TRUE(fs::exists(db));
  EXPECT_FALSE(fs::exists(fresh));
  EXPECT_FALSE(fs::exists("--log-level"));
  // one word after `--` that no FILE takes is not read as an option either
  for (const auto& args : std::vector<std::vector<std::string>>{{"memory", "--home", home, "reset", "--", "--home=" + fresh},
                                                                {"memory", "--home", home, "show", "--", "--log-level=debug"}}) {
    const auto r = test::run_thrive(args, env());
    EXPECT_EQ(r.exit_code, 2) << args[4] << ": " << r.out << r.err;
  }
  EXPECT_TRUE(fs::exists(db));
  // the flag's value is named as the flag, and a flag replaces its variable (also e2e's own --device)
  const auto named = test::run_thrive({"memory", "--home", home, "--log-level", "bogus", "show"}, env());
  expect_one_line_error(named, "--log-level bogus");
  const auto wins =
      test::run_thrive({"memory", "--home", home, "--log-level", "info", "show"}, env({"THRIVE_LOG_LEVEL=bogus"}));
  EXPECT_EQ(wins.exit_code, 0) << wins.err;
  const auto device = test::run_thrive({"e2e", "--model", files.path(), "--device", "gpu"}, env({"THRIVE_DEVICE=bogus"}));
  EXPECT_EQ(device.exit_code, 2) << device.err;
  expect_one_line_error(device, "--device gpu");
  // a blank THRIVE_HOME is refused like a blank --home
  const auto blank = test::run_thrive({"memory", "show"}, {"THRIVE_HOME= "});
  EXPECT_EQ(blank.exit_code, 2) << blank.err;

  // a backup of a memory.db link is a link: export through it would replace the real memory
  const std::string real_dir = files.path() + "/real", linked_home = files.path() + "/linked-home";
  fs::create_directories(real_dir);
  fs::create_directories(linked_home);
  { memory::Store created(real_dir + "/memory.db"); }
  fs::create_symlink(real_dir + "/memory.db", linked_home + "/memory.db");
  const auto moved = test::run_thrive({"memory", "--home", linked_home, "reset"}, env());
  ASSERT_EQ(moved.exit_code, 0) << moved.err;
  const auto backup_link = moved.out.substr(moved.out.find(linked_home), moved.out.find('\n') - moved.out.find(linked_home));
  const std::string before = read_file(real_dir + "/memory.db");
  const auto through = test::run_thrive({"memory", "--home", linked_home, "export", backup_link}, env());
  EXPECT_EQ(through.exit_code, 2) << backup_link << ": " << through.out << through.err;
  // nor through a link to that backup link, nor by naming the file it points to
  fs::create_symlink(backup_link, files.path() + "/to-backup.json");
  for (const auto& out : {files.path() + "/to-backup.json", real_dir + "/memory.db"}) {
    const auto r = test::run_thrive({"memory", "--home", linked_home, "export", out}, env());
    EXPECT_EQ(r.exit_code, 2) << out << ": " << r.out << r.err;
  }
  EXPECT_EQ(read_file(real_dir + "/memory.db"), before);
}

// The commands that only read memory answer from an empty memory on a fresh home without creating
// the home or memory.db; a later optimize still creates both.
TEST_F(Cli, ReadingCommandsCreateNoMemoryOnAFreshHome) {
  const std::string fresh = files.path() + "/fresh-home", db = fresh + "/memory.db";
  const auto table = test::run_thrive({"leaderboard", "--home", fresh}, env());
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("No verified kernels in " + db + " yet"), std::string::npos) << table.out;
  const auto rows = test::run_thrive({"leaderboard", "--json", "--home", fresh}, env());
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  EXPECT_EQ(nlohmann::json::parse(rows.out), nlohmann::json::array());
  const auto show = test::run_thrive({"memory", "--home", fresh, "show", "--json"}, env());
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const auto summary = nlohmann::json::parse(show.out);
  EXPECT_EQ(summary["path"], db);
  EXPECT_EQ(summary["kernels"], 0) << show.out;
  // without --json the same summary as text, the path first and the counts named
  const auto text = test::run_thrive({"memory", "--home", fresh, "show"}, env());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("memory " + db + "\n", 0), 0u) << text.out;
  for (const char* want : {"kernels 0", "strategy cards 0", "no device measured yet"})
    EXPECT_NE(text.out.find(want), std::string::npos) << want << "\n" << text.out;
  for (const char* sub : {"cards", "kernels"}) {  // an empty memory says so (it printed nothing)
    const auto r = test::run_thrive({"memory", "--home", fresh, sub}, env());
    EXPECT_EQ(r.exit_code, 0) << sub << ": " << r.err;
    EXPECT_NE(r.out.find(std::string(sub) == "cards" ? "no strategy cards in " : "no kernel measurements in "),
              std::string::npos)
        << r.out;
  }
  EXPECT_EQ(test::run_thrive({"memory", "--home", fresh, "export", files.path() + "/empty.json"}, env()).exit_code, 0);
  EXPECT_TRUE(nlohmann::json::parse(read_file(files.path() + "/empty.json")).is_object());
  EXPECT_FALSE(std::filesystem::exists(fresh)) << "a reading command created " << fresh;
}

// memory kernels and memory cards print a header line above their rows.
TEST_F(Cli, MemoryListingsHaveAHeader) {
  const nlohmann::json doc = {
      {"format", "thrive-memory"},
      {"cards", {{{"id", "c1"}, {"title", "wide loads"}, {"backend", "cpu"}, {"traits", nlohmann::json::array()},
                  {"set", {{"VEC", "16"}}}},
                 {{"id", "learned_cpu_attention_with_a_long_id_0123456789"}, {"title", "long id"}, {"backend", "cpu"},
                  {"traits", nlohmann::json::array()}, {"set", {{"VEC", "8"}}}}}},
      {"kernels", {{{"kernel_id", "k1"}, {"op", "softmax"}, {"shape", "T=1"}, {"device", "cpu:x"},
                    {"backend", "cpu"}, {"params", ""}, {"source", "// @thrive op: softmax\n"}, {"time_us", 1.0},
                    {"eager_us", 2.0}, {"speedup", 2.0}, {"verified", true}}}}};
  const std::string file = files.path() + "/listing.json";
  write_file_atomic(file, doc.dump());
  const auto imp = test::run_thrive({"memory", "import", file}, env());
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  const auto kernels = test::run_thrive({"memory", "kernels"}, env());
  ASSERT_EQ(kernels.exit_code, 0) << kernels.err;
  EXPECT_EQ(kernels.out.rfind("op ", 0), 0u) << kernels.out;  // the header first
  EXPECT_NE(kernels.out.find("speedup"), std::string::npos) << kernels.out;
  EXPECT_NE(kernels.out.find("k1"), std::string::npos) << kernels.out;
  const auto cards = test::run_thrive({"memory", "cards"}, env());
  ASSERT_EQ(cards.exit_code, 0) << cards.err;
  EXPECT_EQ(cards.out.rfind("card ", 0), 0u) << cards.out;
  EXPECT_NE(cards.out.find("wide loads"), std::string::npos) << cards.out;
  // the columns line up under the header, also past a long card id: each title starts where the
  // header's "title, settings" does, and each "x" of a best gain sits under the header's "best"'s
  // last letter
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = cards.out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(cards.out.substr(at, nl - at));
  ASSERT_EQ(lines.size(), 4u) << cards.out;  // the header, two cards, what the columns mean
  const size_t title = lines[0].find("title, settings"), best_end = lines[0].find("best") + 3;
  for (size_t i = 1; i < 3; ++i) {
    const size_t t = lines[i].find(i == 1 ? "wide loads" : "long id");
    EXPECT_EQ(t, title) << cards.out;
    // no evidence yet: "-", not "0.00x", at the column's end
    EXPECT_EQ(lines[i].rfind("- ", t), best_end) << cards.out;
  }
  EXPECT_EQ(lines[3].rfind("ok/failed:", 0), 0u) << cards.out;
}

// What a break-it pass found on the reading commands (2026-12-01): an export through a memory.db
// that is a symlink replaced the real memory with JSON, an export onto memory.db under a home
// spelt with a trailing slash wrote a JSON memory.db, and reading an existing memory could
// rewrite it (switched to WAL). Now the export is refused in each spelling and a reading
// command leaves the file byte-identical.
TEST_F(Cli, ExportNeverLandsOnTheMemoryAndReadingLeavesItAsItWas) {
  const std::string real_dir = files.path() + "/store", linked = files.path() + "/linked";
  std::filesystem::create_directories(real_dir);
  std::filesystem::create_directories(linked);
  const std::string real = real_dir + "/real.db";
  { memory::Store created(real); }
  std::filesystem::create_symlink(real, linked + "/memory.db");
  const std::string before = read_file(real);
  for (const auto& out : {linked + "/memory.db", real, linked + "/memory.db-wal", linked + "/./memory.db"}) {
    const auto r = test::run_thrive({"memory", "--home", linked, "export", out}, env());
    EXPECT_EQ(r.exit_code, 2) << out << ": " << r.out << r.err;
    expect_one_line_error(r, "memory.db");
  }
  EXPECT_EQ(read_file(real), before);
  // a fresh home with a trailing slash, or spelt relative to the working directory while the file
  // is absolute (run_thrive's working directory is this process's), or behind links to paths
  // that do not exist yet: refused, nothing created
  const std::string fresh = files.path() + "/fresh", rel = std::filesystem::relative(fresh).string();
  std::filesystem::create_symlink(files.path() + "/later", files.path() + "/home-link");
  std::filesystem::create_symlink(files.path() + "/later-store/real.db", linked + "/../dangling.db");
  const std::string dangling_home = files.path() + "/dangling-home";
  std::filesystem::create_directories(dangling_home);
  std::filesystem::create_symlink(files.path() + "/later-store/real.db", dangling_home + "/memory.db");
  for (const auto& [home_arg, out] : std::vector<std::pair<std::string, std::string>>{
           {fresh + "/", fresh + "/memory.db"}, {rel, fresh + "/memory.db"}, {fresh + "/", "./" + rel + "/./memory.db"},
           {rel + "/", fresh + "/kernels/k.json"}, {files.path() + "/home-link", files.path() + "/later/memory.db"},
           {dangling_home, files.path() + "/later-store/real.db"}, {dangling_home, files.path() + "/dangling.db"}}) {
    const auto r = test::run_thrive({"memory", "--home", home_arg, "export", out}, env());
    EXPECT_EQ(r.exit_code, 2) << home_arg << " -> " << out << ": " << r.out << r.err;
  }
  // ".." after a link is taken physically (L -> linked/sub, so L/.. is linked), and the home
  // itself or a directory holding it is not a file to export to
  std::filesystem::create_directories(linked + "/sub");
  std::filesystem::create_symlink(linked + "/sub", files.path() + "/L");
  for (const auto& [home_arg, out] : std::vector<std::pair<std::string, std::string>>{
           {linked, files.path() + "/L/../memory.db"}, {files.path() + "/L/..", real}, {linked, linked},
           {linked + "/sub", linked}}) {
    const auto r = test::run_thrive({"memory", "--home", home_arg, "export", out}, env());
    EXPECT_EQ(r.exit_code, 2) << home_arg << " -> " << out << ": " << r.out << r.err;
  }
  EXPECT_EQ(read_file(real), before);
  EXPECT_TRUE(std::filesystem::is_directory(linked));
  // a memory.db that cannot be looked at (a link loop) is a storage error, not an empty memory
  const std::string loop = files.path() + "/loop-home";
  std::filesystem::create_directories(loop);
  std::filesystem::create_symlink("memory.db", loop + "/memory.db");
  for (const auto& args : std::vector<std::vector<std::string>>{{"leaderboard", "--home", loop}, {"memory", "--home", loop, "show"}}) {
    const auto r = test::run_thrive(args, env());
    EXPECT_EQ(r.exit_code, 4) << args[0] << ": " << r.out << r.err;
    expect_one_line_error(r, loop + "/memory.db");
  }
  EXPECT_FALSE(std::filesystem::exists(fresh));
  EXPECT_FALSE(std::filesystem::exists(files.path() + "/later"));
  EXPECT_FALSE(std::filesystem::exists(files.path() + "/later-store"));
  // a file next to the memory is not the memory
  EXPECT_EQ(test::run_thrive({"memory", "--home", linked, "export", linked + "/memory.dbx"}, env()).exit_code, 0);
  // reading a rollback-journal memory keeps it so, byte for byte
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(real.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode=delete", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string journal = read_file(real);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"leaderboard", "--home", linked}, {"memory", "--home", linked, "show"}, {"memory", "--home", linked, "kernels"}})
    EXPECT_EQ(test::run_thrive(args, env()).exit_code, 0) << args[0];
  EXPECT_EQ(read_file(real), journal);
}

// thrive demo: a cold run on an empty memory, then a warm run on what it left. The warm run's
// first phase starts from the library (recalled and re-verified), the JSON holds both curves,
// and a demo home that already holds a memory is refused before anything runs.
TEST_F(Cli, DemoRunsColdThenWarmFromTheMemoryTheColdRunLeft) {
  const std::string out = files.path() + "/demo.json", demo_home = files.path() + "/demo-home";
  const auto r = test::run_thrive({"demo", "--op", "swiglu_act", "--shape", "T=16", "--rounds", "1", "--phases",
                                   "2", "--target-speedup", "1000", "--demo-home", demo_home, "--json-out", out},
                                  small_env());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[cold 1]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[warm 1]"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(read_file(out));
  EXPECT_EQ(doc["shape"], "T=16");
  for (const char* run : {"cold", "warm"}) {
    const auto& j = doc[run];
    ASSERT_EQ(j["curve"].size(), 2u) << run << ": target 1000x is never reached, so both phases run";
    EXPECT_EQ(j["phases_to_target"], -1);
    EXPECT_GT(j["best_speedup"].get<double>(), 0.0);
    EXPECT_LE(j["curve"][0]["elapsed_s"].get<double>(), j["curve"][1]["elapsed_s"].get<double>());
    EXPECT_GT(j["evaluations"].get<int>(), 0);
  }
  EXPECT_FALSE(doc["cold"]["curve"][0]["started_from_memory"].get<bool>());
  EXPECT_TRUE(doc["warm"]["curve"][0]["started_from_memory"].get<bool>());
  // the same home again: refused, the stored memory untouched
  const auto before = read_file(demo_home + "/memory.db");
  const auto again = test::run_thrive({"demo", "--op", "swiglu_act", "--demo-home", demo_home}, small_env());
  EXPECT_EQ(again.exit_code, 2) << again.out << again.err;
  EXPECT_NE(again.err.find("already holds a memory"), std::string::npos) << again.err;
  EXPECT_EQ(read_file(demo_home + "/memory.db"), before);
  // a bad shape is refused before anything is created
  const std::string fresh = files.path() + "/demo-bad-shape";
  const auto bad = test::run_thrive({"demo", "--op", "swiglu_act", "--shape", "T=7", "--demo-home", fresh}, small_env());
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(fresh + "/memory.db"));
}

TEST_F(Cli, NoSubcommandIsUsage) {
  const auto r = test::run_thrive({}, env());
  EXPECT_EQ(r.exit_code, 2);
  const auto v = test::run_thrive({"--version"}, env());
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("thrive"), std::string::npos);
}

// A flag before the command word is named with where it goes, and leftover words are listed in
// the command line's order (CLI11 lists them last first), before any command runs.
TEST_F(Cli, FlagBeforeTheCommandAndStrayWordsAreNamed) {
  const std::string home = files.path() + "/never-made";
  for (const auto& args : std::vector<std::vector<std::string>>{{"--home", home, "memory", "show"},
                                                                 {"--log-level=info", "--home", home, "memory", "show"},
                                                                 {"--json", "memory", "show"}}) {
    const auto r = test::run_thrive(args, env());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    expect_one_line_error(r, args[0].substr(0, args[0].find('=')) + " before the command");
    // --home and --log-level are `memory`'s flags (`memory show --help` does not list them);
    // --json is `memory show`'s
    const std::string where = args[0] == "--json" ? "memory show" : "memory";
    EXPECT_NE(r.err.find("(thrive " + where + " --help lists its flags)"), std::string::npos) << r.err;
  }
  // the hint names the subcommand whose flags they are (the command where the flag is the
  // command's, or not the subcommand's), or the command alone when none follows
  const auto init = test::run_thrive({"--seed", "3", "model", "init", "--out", home}, env());
  EXPECT_EQ(init.exit_code, 2) << init.err;
  EXPECT_NE(init.err.find("(thrive model init --help lists its flags)"), std::string::npos) << init.err;
  // a flag's value that is also a command's name is passed over
  for (const auto& [args, hint] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--json", "memory"}, "thrive memory --help"},
           {{"--home", "memory", "optimize", "--op", "all"}, "thrive optimize --help"},
           {{"--op", "model", "memory", "show"}, "thrive memory --help"},
           {{"--home", "memory", "memory", "show"}, "thrive memory --help"},
           {{"--out", "x", "model", "init"}, "thrive model init --help"},
           {{"--json", "optimize", "--op", "model"}, "thrive optimize --help"},
           {{"--", "model", "init"}, "thrive model init --help"}}) {
    const auto r = test::run_thrive(args, env());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("(" + hint + " lists its flags)"), std::string::npos) << args[0] << " " << args[1] << ": " << r.err;
  }
  // a mistyped or missing flag after the command points at that command's help, not the top level
  for (const auto& [args, hint] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"e2e", "--model", home, "--bacth", "4"}, "thrive e2e --help lists its flags"},
           {{"memory", "show", "--bogus"}, "thrive memory show --help lists its flags"},
           {{"memory", "show", "--home"}, "thrive memory --help lists its flags"},  // memory's flag, value missing
           {{"verify", "--op", "rmsnorm"}, "thrive verify --help lists its flags"}}) {
    const auto r = test::run_thrive(args, env());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("(" + hint + ")"), std::string::npos) << args[0] << " " << args[1] << ": " << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(home));
  const auto stray = test::run_thrive({"ops", "first", "second", "third"}, env());
  EXPECT_EQ(stray.exit_code, 2) << stray.out;
  expect_one_line_error(stray, "not expected here: first second third");
  // repeated words, and a word that is also an option's value, keep their places
  const auto again = test::run_thrive({"ops", "--spec", "softmax", "b", "softmax", "b"}, env());
  EXPECT_EQ(again.exit_code, 2) << again.out;
  expect_one_line_error(again, "not expected here: b softmax b");
  // --help and --version before a command still answer
  EXPECT_EQ(test::run_thrive({"--help"}, env()).exit_code, 0);
}

}  // namespace
}  // namespace thrive
