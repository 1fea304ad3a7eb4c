// CpuBackend in the test process: compile (and its cache), compile failures,
// launching through the ABI, timing, memory helpers, and make_backend.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "tests/support/test_support.hpp"
#include "thrive/backend/backend.hpp"
#include "thrive/backend/cpu_backend.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive::backend {
namespace {

class CpuBackendTest : public ::testing::Test {
 protected:
  test::TempDir home;
  config::Config cfg = test::fast_config(home.path());
  CpuBackend backend{cfg};

  KernelSource kernel(const std::string& body, const std::string& prelude = "") {
    return KernelSource::parse(test::kernel_text("softmax", body, prelude), "test.cpp");
  }
};

// Reports what arrived through ThriveArgs: writes the scalars and dims into tensor 0
// (as doubles) and returns dims[0] + num_tensors.
const char* kEcho = R"(
  double* o = (double*)a->tensors[0];
  o[0] = a->scalars[0];
  o[1] = (double)a->dims[1];
  o[2] = (double)a->num_dims;
  o[3] = (double)a->num_scalars;
  o[4] = (double)a->workspace_bytes;
  o[5] = (double)a->num_threads;
  o[6] = (double)(((uintptr_t)a->workspace) % 64 == 0);
  return (int)a->dims[0] + a->num_tensors;
)";

TEST_F(CpuBackendTest, DescribesTheDevice) {
  const auto& d = backend.device();
  EXPECT_EQ(d.backend, "cpu");
  EXPECT_FALSE(d.name.empty());
  EXPECT_FALSE(d.arch.empty());
  EXPECT_FALSE(d.driver.empty());
  EXPECT_GE(d.compute_units, 1);
  EXPECT_GT(d.cache_bytes, 0);
  EXPECT_EQ(d.key().rfind("cpu:", 0), 0u) << d.key();
  EXPECT_EQ(d.key().find(' '), std::string::npos) << d.key();
}

TEST_F(CpuBackendTest, CompilesOnceThenServesFromCache) {
  const auto k = kernel(kEcho);
  auto first = backend.compile(k);
  ASSERT_TRUE(first.module) << first.log;
  EXPECT_FALSE(first.cached);
  EXPECT_GT(first.compile_s, 0.0);
  auto second = backend.compile(k);
  ASSERT_TRUE(second.module) << second.log;
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.compile_s, 0.0);
  // A fresh backend on the same THRIVE_HOME shares the cache.
  CpuBackend other(cfg);
  EXPECT_TRUE(other.compile(k).cached);
  // A different source is a different cache entry.
  EXPECT_FALSE(backend.compile(kernel(std::string(kEcho) + "\n// changed")).cached);
}

TEST_F(CpuBackendTest, LaunchPassesArgumentsAndReturnsTheKernelStatus) {
  auto c = backend.compile(kernel(kEcho));
  ASSERT_TRUE(c.module) << c.log;
  void* out = backend.allocate(8 * sizeof(double));
  void* ws = backend.allocate(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(out) % 64, 0u);
  LaunchArgs args;
  args.tensors = {out, nullptr, nullptr};
  args.dims = {39, 11};
  args.scalars = {2.5};
  args.workspace = ws;
  args.workspace_bytes = 1000;
  EXPECT_EQ(backend.launch(*c.module, args), 39 + 3);
  double got[8];
  backend.download(got, out, sizeof got);
  EXPECT_EQ(got[0], 2.5);
  EXPECT_EQ(got[1], 11.0);
  EXPECT_EQ(got[2], 2.0);
  EXPECT_EQ(got[3], 1.0);
  EXPECT_EQ(got[4], 1000.0);
  EXPECT_EQ(got[5], double(backend.device().compute_units));
  EXPECT_EQ(got[6], 1.0);
  backend.release(out);
  backend.release(ws);
}

TEST_F(CpuBackendTest, SyntaxErrorGivesNullModuleAndTheCompilerLog) {
  auto c = backend.compile(kernel("return 0 +;"));
  EXPECT_FALSE(c.module);
  EXPECT_NE(c.log.find("error"), std::string::npos) << c.log;
  EXPECT_FALSE(c.cached);
  // A failure is not cached as a success.
  EXPECT_FALSE(backend.compile(kernel("return 0 +;")).module);
}

TEST_F(CpuBackendTest, MissingEntrySymbolGivesNullModuleNamingTheEntry) {
  auto c = backend.compile(KernelSource::parse(test::kernel_with_missing_entry(), "e.cpp"));
  EXPECT_FALSE(c.module);
  EXPECT_NE(c.log.find("the_entry"), std::string::npos) << c.log;
  // Defined but not exported (hidden visibility) is missing too.
  const std::string hidden =
      "// @thrive op: softmax\n// @thrive entry: f\n#include \"thrive_cpu.h\"\n"
      "extern \"C\" int f(const ThriveArgs*) { return 0; }\n";
  auto h = backend.compile(KernelSource::parse(hidden, "h.cpp"));
  EXPECT_FALSE(h.module);
  EXPECT_NE(h.log.find("'f'"), std::string::npos) << h.log;
}

// A kernel is untrusted text: the compiler must not read a file it names by path and quote it
// in the log that goes back to the agent, through an #include or through the assembler
// (.incbin, put in the assembly by a section name: no asm statement needed).
TEST_F(CpuBackendTest, KernelsCannotReadFilesThroughTheCompilerOrTheAssembler) {
  const std::string secret = home.path() + "/secret.txt";
  write_file_atomic(secret, "SECRET hunter2\n");
  auto inc = backend.compile(kernel("return 0;", "#include \"" + secret + "\"\n"));
  EXPECT_FALSE(inc.module);
  EXPECT_NE(inc.log.find("refused before compiling: line"), std::string::npos) << inc.log;
  EXPECT_EQ(inc.log.find("hunter2"), std::string::npos) << inc.log;
  const std::string section = "__attribute__((section(\".data\\n.incbin \\\"" + secret + "\\\"\\n#\"))) int leak = 2;\n";
  auto incbin = backend.compile(kernel("return leak;", section));
  EXPECT_FALSE(incbin.module);
  EXPECT_NE(incbin.log.find("refused after compiling: assembly line"), std::string::npos) << incbin.log;
  EXPECT_NE(incbin.log.find(".incbin"), std::string::npos) << incbin.log;
  EXPECT_EQ(incbin.log.find("hunter2"), std::string::npos) << incbin.log;
  // the same kernel without the injected directive compiles: the refusal is the directive's
  auto plain = backend.compile(kernel("return leak;", "__attribute__((section(\".data\"))) int leak = 2;\n"));
  EXPECT_TRUE(plain.module) << plain.log;
  // a header by a plain name that resolves outside the allowed directories (a link planted in
  // THRIVE's include directory): the preprocessor's own list of what it read refuses it
  std::filesystem::create_symlink(secret, home.path() + "/cache/cpu/include/planted.h");
  auto planted = backend.compile(kernel("return 0;", "#include \"planted.h\"\n"));
  EXPECT_FALSE(planted.module);
  EXPECT_NE(planted.log.find("refused before compiling: the source reads"), std::string::npos) << planted.log;
  EXPECT_EQ(planted.log.find("hunter2"), std::string::npos) << planted.log;
  // a #line naming the file: no diagnostic quotes its lines (no caret lines at all)
  auto line = backend.compile(kernel("return 0;", "#line 1 \"" + secret + "\"\nint broken = ;\n#line 40\n"));
  EXPECT_FALSE(line.module);
  EXPECT_EQ(line.log.find("hunter2"), std::string::npos) << line.log;
  // and no staged assembly or object is left behind in the cache
  for (const auto& e : std::filesystem::directory_iterator(home.path() + "/cache/cpu"))
    EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
}

TEST_F(CpuBackendTest, RefusesKernelsOfAnotherBackend) {
  auto k = kernel("return 0;");
  k.backend = "cuda";
  auto c = backend.compile(k);
  EXPECT_FALSE(c.module);
  EXPECT_NE(c.log.find("cuda"), std::string::npos) << c.log;
}

TEST_F(CpuBackendTest, InstantiatedTemplateParametersReachTheCompiler) {
  const std::string tmpl =
      "// @thrive op: softmax\n// @thrive entry: k\n"
      "// @thrive param WIDTH values=4,8,16 default=8\n#include \"thrive_cpu.h\"\n"
      "#ifndef WIDTH\n#define WIDTH 8\n#endif\n"
      "THRIVE_EXPORT int k(const ThriveArgs*) { return WIDTH; }\n";
  const auto t = KernelSource::parse(tmpl, "t.cpp");
  for (const char* width : {"4", "16"}) {
    auto c = backend.compile(t.instantiate({{"WIDTH", width}}));
    ASSERT_TRUE(c.module) << c.log;
    EXPECT_EQ(backend.launch(*c.module, LaunchArgs{}), std::atoi(width));
  }
  auto d = backend.compile(t.instantiate({}));
  ASSERT_TRUE(d.module) << d.log;
  EXPECT_EQ(backend.launch(*d.module, LaunchArgs{}), 8);
}

TEST_F(CpuBackendTest, TimeUsMeasuresTheBody) {
  EXPECT_GT(backend.time_us([] {}), 0.0);
  const double slept = backend.time_us([] { usleep(2000); });
  EXPECT_GE(slept, 2000.0);
  EXPECT_LT(slept, 2e6);
}

TEST_F(CpuBackendTest, MemoryHelpers) {
  auto* p = static_cast<uint8_t*>(backend.allocate(100));
  backend.memset(p, 0xAB, 100);
  uint8_t host[100];
  backend.download(host, p, 100);
  for (uint8_t b : host) ASSERT_EQ(b, 0xAB);
  for (int i = 0; i < 100; ++i) host[i] = uint8_t(i);
  backend.upload(p, host, 100);
  uint8_t back[100];
  backend.download(back, p, 100);
  EXPECT_EQ(std::memcmp(host, back, 100), 0);
  backend.release(p);
  void* zero = backend.allocate(0);
  EXPECT_NE(zero, nullptr);
  backend.release(zero);
}

TEST(CpuBackendSetup, BrokenCompilerIsABackendError) {
  test::TempDir home;
  auto cfg = test::fast_config(home.path());
  cfg.cxx = "/nonexistent/c++";
  try {
    CpuBackend b(cfg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kBackend);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/c++"), std::string::npos) << e.what();
  }
  cfg.cxx = "false";
  try {
    CpuBackend b(cfg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kBackend);
    EXPECT_NE(std::string(e.what()).find("THRIVE_CXX=false"), std::string::npos) << e.what();
    EXPECT_TRUE(test::is_one_line(e.what())) << e.what();
  }
}

TEST(CpuBackendSetup, UnwritableHomeIsAStorageError) {
  test::TempDir dir;
  const std::string file = test::write_text(dir.path() + "/plain-file", "x");
  auto cfg = test::fast_config(file + "/home");
  try {
    CpuBackend b(cfg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kStorage);
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

TEST(MakeBackend, ResolvesNames) {
  test::TempDir home;
  const auto cfg = test::fast_config(home.path());
  EXPECT_EQ(resolve_backend_name("cpu"), "cpu");
  EXPECT_EQ(make_backend("cpu", cfg)->device().backend, "cpu");
  try {
    make_backend("gpu", cfg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kUsage);
    EXPECT_NE(std::string(e.what()).find("gpu"), std::string::npos);
  }
}

}  // namespace
}  // namespace thrive::backend
