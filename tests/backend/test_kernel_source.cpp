// KernelSource: the `@thrive` header format, template instantiation, content hash.
#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"
#include "thrive/backend/embedded.hpp"
#include "thrive/backend/kernel.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

#include <nlohmann/json.hpp>

namespace thrive::backend {
namespace {

const char* kCudaKernel = R"(// A two-pass softmax.
// @thrive op: softmax
// @thrive backend: cuda
// @thrive entry: pass1
// @thrive entry: pass2
// @thrive launch: entry=pass1 block=256 grid=T,ceil(V/1024) smem=4096
// @thrive launch: entry=pass2 block=128 grid=T
// @thrive params: BLOCK=256 VEC=4
extern "C" __global__ void pass1() {}
extern "C" __global__ void pass2() {}
)";

const char* kCpuTemplate = R"(// @thrive op: rmsnorm_residual
// @thrive backend: cpu
// @thrive entry: rmsnorm_k
// @thrive param BLOCK values=64,128,256 default=128 doc=columns per step, in elements
// @thrive param UNROLL values=1,2,4 default=1
#include "thrive_cpu.h"
#ifndef BLOCK
#define BLOCK 128
#endif
THRIVE_EXPORT int rmsnorm_k(const ThriveArgs* a) { return BLOCK * 0 + (a == 0); }
)";

TEST(KernelSource, ParsesEveryTag) {
  const auto k = KernelSource::parse(kCudaKernel, "softmax.cu");
  EXPECT_EQ(k.op, "softmax");
  EXPECT_EQ(k.backend, "cuda");
  EXPECT_EQ(k.entries, (std::vector<std::string>{"pass1", "pass2"}));
  ASSERT_EQ(k.launches.size(), 2u);
  EXPECT_EQ(k.launches[0].entry, "pass1");
  EXPECT_EQ(k.launches[0].block, "256");
  EXPECT_EQ(k.launches[0].grid[0], "T");
  EXPECT_EQ(k.launches[0].grid[1], "ceil(V/1024)");
  EXPECT_EQ(k.launches[0].grid[2], "1");
  EXPECT_EQ(k.launches[0].smem, "4096");
  EXPECT_EQ(k.launches[1].entry, "pass2");
  EXPECT_EQ(k.launches[1].block, "128");
  EXPECT_EQ(k.launches[1].grid[0], "T");
  EXPECT_EQ(k.launches[1].smem, "0");
  EXPECT_EQ(k.params, (Params{{"BLOCK", "256"}, {"VEC", "4"}}));
  EXPECT_TRUE(k.param_specs.empty());
  EXPECT_EQ(k.source, kCudaKernel);
}

TEST(KernelSource, ParsesParamDeclarations) {
  const auto k = KernelSource::parse(kCpuTemplate, "template.cpp");
  EXPECT_EQ(k.op, "rmsnorm_residual");
  EXPECT_EQ(k.backend, "cpu");
  EXPECT_EQ(k.entries, std::vector<std::string>{"rmsnorm_k"});
  ASSERT_EQ(k.param_specs.size(), 2u);
  EXPECT_EQ(k.param_specs[0].name, "BLOCK");
  EXPECT_EQ(k.param_specs[0].values, (std::vector<std::string>{"64", "128", "256"}));
  EXPECT_EQ(k.param_specs[0].default_value, "128");
  EXPECT_EQ(k.param_specs[0].doc, "columns per step, in elements");
  EXPECT_EQ(k.param_specs[1].name, "UNROLL");
  EXPECT_EQ(k.param_specs[1].default_value, "1");
  EXPECT_EQ(k.defaults(), (Params{{"BLOCK", "128"}, {"UNROLL", "1"}}));
}

TEST(KernelSource, SimplestTakesEachParametersFirstListedValue) {
  const auto k = KernelSource::parse(kCpuTemplate, "template.cpp");
  EXPECT_EQ(k.simplest(), (Params{{"BLOCK", "64"}, {"UNROLL", "1"}}));
  EXPECT_NE(k.simplest(), k.defaults());
  EXPECT_EQ(k.instantiate(k.simplest()).params, k.simplest());
}

TEST(KernelSource, BackendDefaultsToCpuAndSupportKernelTextParses) {
  const auto k = KernelSource::parse("// @thrive op: rope\n// @thrive entry: f\n", "x.cpp");
  EXPECT_EQ(k.backend, "cpu");
  const auto t = KernelSource::parse(test::kernel_text("softmax", "return 0;"), "t.cpp");
  EXPECT_EQ(t.op, "softmax");
  EXPECT_EQ(t.entries, std::vector<std::string>{"k"});
}

struct BadKernel {
  const char* name;
  std::string text;
  std::string must_mention;
};

void PrintTo(const BadKernel& b, std::ostream* os) { *os << b.name; }

class KernelSourceRejects : public ::testing::TestWithParam<BadKernel> {};

TEST_P(KernelSourceRejects, WithAnInputErrorNamingFileAndProblem) {
  const auto& p = GetParam();
  try {
    KernelSource::parse(p.text, "bad_kernel.cpp");
    FAIL() << "accepted:\n" << p.text;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.category(), ErrorCategory::kInput) << what;
    EXPECT_NE(what.find("bad_kernel.cpp"), std::string::npos) << what;
    EXPECT_NE(what.find(p.must_mention), std::string::npos) << what;
    EXPECT_TRUE(test::is_one_line(what)) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, KernelSourceRejects,
    ::testing::Values(
        BadKernel{"no_op", "// @thrive backend: cpu\n// @thrive entry: k\nint k;\n", "@thrive op"},
        BadKernel{"no_entry", "// @thrive op: softmax\n// @thrive backend: cpu\n", "@thrive entry"},
        BadKernel{"bad_backend", "// @thrive op: softmax\n// @thrive backend: metal\n// @thrive entry: k\n",
                  "metal"},
        BadKernel{"unknown_tag", "// @thrive op: softmax\n// @thrive flavour: vanilla\n// @thrive entry: k\n",
                  "flavour"},
        BadKernel{"param_default_not_a_value",
                  "// @thrive op: softmax\n// @thrive entry: k\n// @thrive param B values=1,2 default=3\n",
                  "default"},
        BadKernel{"param_without_values", "// @thrive op: softmax\n// @thrive entry: k\n// @thrive param B default=3\n",
                  "param"},
        BadKernel{"two_cpu_entries", "// @thrive op: softmax\n// @thrive backend: cpu\n// @thrive entry: a\n// @thrive entry: b\n",
                  "2 entries"},
        BadKernel{"entry_not_identifier", "// @thrive op: softmax\n// @thrive entry: 9lives\n", "9lives"},
        BadKernel{"launch_without_block",
                  "// @thrive op: softmax\n// @thrive backend: cuda\n// @thrive entry: k\n// @thrive launch: entry=k grid=T\n",
                  "block="},
        BadKernel{"launch_without_entry",
                  "// @thrive op: softmax\n// @thrive backend: cuda\n// @thrive entry: k\n// @thrive launch: block=64\n",
                  "entry="},
        BadKernel{"launch_of_undeclared_entry",
                  "// @thrive op: softmax\n// @thrive backend: cuda\n// @thrive entry: k\n// @thrive launch: entry=other block=64\n",
                  "other"},
        BadKernel{"cuda_without_launch_plan",
                  "// @thrive op: softmax\n// @thrive backend: cuda\n// @thrive entry: k\n",
                  "launch"},
        BadKernel{"params_not_key_value", "// @thrive op: softmax\n// @thrive entry: k\n// @thrive params: BLOCK\n",
                  "BLOCK"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(KernelSource, ErrorsNameTheLine) {
  try {
    KernelSource::parse("// x\n// @thrive op: softmax\n// @thrive backend: fpga\n", "f.cpp");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f.cpp:3"), std::string::npos) << e.what();
  }
}

TEST(KernelSource, InstantiatePrependsDefinesAndParsesBack) {
  const auto tmpl = KernelSource::parse(kCpuTemplate, "template.cpp");
  const auto k = tmpl.instantiate({{"BLOCK", "256"}});
  EXPECT_EQ(k.params, (Params{{"BLOCK", "256"}, {"UNROLL", "1"}}));
  EXPECT_TRUE(k.param_specs.empty());
  EXPECT_EQ(k.source.rfind("// @thrive op: rmsnorm_residual\n", 0), 0u) << k.source;
  const auto define_block = k.source.find("#define BLOCK 256\n");
  const auto define_unroll = k.source.find("#define UNROLL 1\n");
  const auto body = k.source.find("#include \"thrive_cpu.h\"");
  ASSERT_NE(define_block, std::string::npos) << k.source;
  ASSERT_NE(define_unroll, std::string::npos) << k.source;
  ASSERT_NE(body, std::string::npos) << k.source;
  EXPECT_LT(define_block, body);
  EXPECT_LT(define_unroll, body);
  EXPECT_EQ(k.source.find("@thrive param "), std::string::npos) << "template declarations dropped";

  const auto back = KernelSource::parse(k.source, "instantiated.cpp");
  EXPECT_EQ(back.op, "rmsnorm_residual");
  EXPECT_EQ(back.backend, "cpu");
  EXPECT_EQ(back.entries, std::vector<std::string>{"rmsnorm_k"});
  EXPECT_EQ(back.params, k.params);
  EXPECT_TRUE(back.param_specs.empty());
  EXPECT_EQ(params_to_string(back.params), "BLOCK=256,UNROLL=1");

  EXPECT_EQ(tmpl.instantiate({}).params, tmpl.defaults());
}

TEST(KernelSource, InstantiateKeepsCudaLaunchPlan) {
  std::string text = kCudaKernel;
  text += "// @thrive param BLOCK values=128,256 default=256\n";
  const auto k = KernelSource::parse(text, "t.cu").instantiate({{"BLOCK", "128"}});
  const auto back = KernelSource::parse(k.source, "t.cu");
  ASSERT_EQ(back.launches.size(), 2u);
  EXPECT_EQ(back.launches[0].grid[1], "ceil(V/1024)");
  EXPECT_EQ(back.launches[0].smem, "4096");
  EXPECT_EQ(back.launches[0].block, "256");
  EXPECT_EQ(back.entries, (std::vector<std::string>{"pass1", "pass2"}));
  EXPECT_EQ(back.params.at("BLOCK"), "128");
}

TEST(KernelSource, InstantiateRejectsUndeclaredAndOutOfRange) {
  const auto tmpl = KernelSource::parse(kCpuTemplate, "template.cpp");
  struct Case {
    Params values;
    std::string must_mention;
  };
  for (const auto& c : {Case{{{"WARP", "32"}}, "WARP"}, Case{{{"BLOCK", "100"}}, "BLOCK=100"},
                        Case{{{"UNROLL", ""}}, "UNROLL="}}) {
    try {
      tmpl.instantiate(c.values);
      ADD_FAILURE() << "accepted " << params_to_string(c.values);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput);
      EXPECT_NE(std::string(e.what()).find(c.must_mention), std::string::npos) << e.what();
      EXPECT_TRUE(test::is_one_line(e.what()));
    }
  }
  try {
    tmpl.instantiate({{"BLOCK", "100"}});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("64,128,256"), std::string::npos) << "lists the values: " << e.what();
  }
}

TEST(KernelSource, ContentHashIsStableAndTracksTheSource) {
  const auto a = KernelSource::parse(kCpuTemplate, "a.cpp");
  const auto b = KernelSource::parse(kCpuTemplate, "b.cpp");
  EXPECT_EQ(a.content_hash(), b.content_hash());
  EXPECT_EQ(a.content_hash().size(), 16u);
  EXPECT_EQ(a.content_hash(), fnv1a_hex(kCpuTemplate));
  const auto c = KernelSource::parse(std::string(kCpuTemplate) + "\n", "c.cpp");
  EXPECT_NE(a.content_hash(), c.content_hash());
  EXPECT_EQ(a.instantiate({{"BLOCK", "64"}}).content_hash(), a.instantiate({{"BLOCK", "64"}}).content_hash());
  EXPECT_NE(a.instantiate({{"BLOCK", "64"}}).content_hash(), a.instantiate({{"BLOCK", "256"}}).content_hash());
}

TEST(Files, Fnv1aKnownValues) {
  EXPECT_EQ(fnv1a_hex(""), "cbf29ce484222325");
  EXPECT_EQ(fnv1a_hex("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(fnv1a_hex("foobar"), "85944171f73967e8");
}

TEST(KernelSource, ParamsToString) {
  EXPECT_EQ(params_to_string({}), "");
  EXPECT_EQ(params_to_string({{"Z", "1"}, {"A", "x"}}), "A=x,Z=1");
}

// Embedded templates (written alongside this suite) must satisfy the format; each is
// checked only when present in this build.
TEST(KernelSource, EmbeddedCpuTemplatesParseAndInstantiate) {
  int checked = 0;
  for (const auto& path : embedded_paths("cpu/")) {
    const bool is_template = path.size() > 13 && path.substr(path.size() - 13) == "/template.cpp";
    const bool is_eager = path.size() > 10 && path.substr(path.size() - 10) == "/eager.cpp";
    if (!is_template && !is_eager) continue;
    SCOPED_TRACE(path);
    const std::string op = path.substr(4, path.rfind('/') - 4);
    KernelSource k;
    ASSERT_NO_THROW(k = KernelSource::parse(embedded_file(path), path));
    EXPECT_EQ(k.op, op);
    EXPECT_EQ(k.backend, "cpu");
    EXPECT_EQ(k.entries.size(), 1u);
    if (is_template) {
      EXPECT_FALSE(k.param_specs.empty()) << "a template declares its strategy space";
      const auto inst = k.instantiate({});
      EXPECT_EQ(KernelSource::parse(inst.source, path).params, k.defaults());
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no cpu templates embedded yet";
}

}  // namespace
}  // namespace thrive::backend

namespace thrive::backend {
namespace {

TEST(KernelSourceLimits, OverlongTagLineIsAnInputErrorNotACrash) {
  const std::string head = "// @thrive op: softmax\n// @thrive entry: k\n";
  EXPECT_THROW(KernelSource::parse(head + "// @thrive params: " + std::string(200000, 'x') + "\n",
                                   "long.cpp"),
               Error);
  // A long line without a tag is ordinary source.
  auto k = KernelSource::parse(head + std::string(200000, ' ') + "\n", "spaces.cpp");
  EXPECT_EQ(k.op, "softmax");
}

}  // namespace
}  // namespace thrive::backend

namespace thrive {
namespace {

TEST(Utf8Prefix, CutsOnCharacterBoundariesAndRepairsInvalidBytes) {
  const std::string e = "\xc3\xa9";  // é, two bytes
  EXPECT_EQ(utf8_prefix("abc", 10), "abc");
  EXPECT_EQ(utf8_prefix("a" + e + e, 4), "a" + e);   // never half of the second é
  EXPECT_EQ(utf8_prefix("a" + e + e, 5), "a" + e + e);
  EXPECT_EQ(utf8_prefix("a\xff" "b", 10), "a?b");      // invalid byte
  EXPECT_EQ(utf8_prefix("a\xc3", 10), "a?");          // truncated sequence
  EXPECT_TRUE(nlohmann::json::accept(nlohmann::json(utf8_prefix(std::string(5000, '\xe2'), 100)).dump()));
}

TEST(KernelParams, PathLikeOrOverlongValuesAreRefused) {
  auto parse = [](const std::string& params) {
    return backend::KernelSource::parse(
        "// @thrive params: " + params + "\n// @thrive op: softmax\n// @thrive backend: cpu\n"
        "// @thrive entry: k\n", "k.cpp");
  };
  EXPECT_NO_THROW(parse("VEC=8 EXP=fast SPLIT=1e-3"));
  for (const std::string& bad : std::vector<std::string>{"Y=/../../tmp/x", "Y=a..b", "Y=.hidden", "Y=a/b", "1X=2",
                                "A=" + std::string(60, 'a') + " B=" + std::string(60, 'b') +
                                    " C=" + std::string(60, 'c')})
    EXPECT_THROW(parse(bad), Error) << bad;
}

// include_policy_violation: what a kernel may include (an untrusted source must not make the
// compiler read a file by path), through the translation phases that could hide a directive.
TEST(IncludePolicy, HeadersByNameAreAllowedAndPathsMacrosAndProbesAreNot) {
  EXPECT_EQ(backend::include_policy_violation("#include <math.h>\n#include \"thrive_cpu.h\"\n#  include <immintrin.h>\n", false), "");
  EXPECT_EQ(backend::include_policy_violation("#include <c++-thing.hpp>\nint x; // #include \"/etc/passwd\"\n", false), "");
  EXPECT_EQ(backend::include_policy_violation("const char* s = \"#include </etc/passwd>\";\n", false), "");
  EXPECT_EQ(backend::include_policy_violation("auto r = R\"x(\n#include </etc/passwd>\n)x\";\n", false), "");
  const std::pair<const char*, const char*> refused[] = {
      {"#include \"/etc/passwd\"\n", "line 1: #include \"/etc/passwd\""},
      {"int a;\n#include <../secret.h>\n", "line 2: #include <../secret.h>"},
      {"#include \".env\"\n", "line 1"},
      {"#define P \"/etc/passwd\"\n#include P\n", "line 2: #include P"},
      {"#in\\\nclude \"/etc/passwd\"\n", "line 1"},             // a line splice inside the directive
      {"/* a */ # /* b */ include \"/x/y\"\n", "line 1"},          // comments around it
      {"%:include \"/etc/passwd\"\n", "line 1"},                   // the digraph
      {"#include_next <stdio.h>\n", "#include_next is not allowed"},
      {"#embed \"/etc/passwd\"\n", "#embed is not allowed"},
      {"int a;\n\n#if __has_include(\"/etc/passwd\")\n#endif\n", "line 3: __has_include is not allowed"},
      {"#include <math.h> junk\n", "line 1"},
      {"#include \"a\\b.h\"\n", "line 1"},
      {"#include <sys/mman.h>\n", "line 1"},  // a directory part, where subdirs is false (NVRTC)
      // an adversarial helper's bypasses of the first version (2026-12-07): GCC splices across
      // form feeds and vertical tabs, ends a line at a lone CR, skips a byte-order mark, reads
      // 1'0 as a number and 1.R"( as a number then a string
      {"#inc\\\f\nlude \"/x/y\"\n", "line 1"},
      {"#inc\\\v\nlude \"/x/y\"\n", "line 1"},
      {"int a;\r#include \"/x/y\"\n", "line 2"},
      {"\xEF\xBB\xBF#include \"/x/y\"\n", "line 1"},
      {"int z = 1'0 + '/*';\n#include \"/x/y\"\n// */\n", "line 2"},
      {"#define ZZ 1.R\"(\"\n#include \"/x/y\"\n// )\"\n", "line 2"},
  };
  for (const auto& [source, expected] : refused) {
    const std::string why = backend::include_policy_violation(source, false);
    EXPECT_NE(why.find(expected), std::string::npos) << source << " -> " << why;
  }
  // with subdirs (the CPU backend), relative paths of plain names pass, and nothing else new
  EXPECT_EQ(backend::include_policy_violation("#include <sys/mman.h>\n#include <bits/c++config.h>\n", true), "");
  for (const char* bad : {"#include </etc/passwd>\n", "#include <sys/../../etc/passwd>\n", "#include <sys//x.h>\n",
                          "#include <sys/.hidden.h>\n", "#include <./x.h>\n"})
    EXPECT_NE(backend::include_policy_violation(bad, true), "") << bad;
  // every kernel THRIVE ships passes it
  for (const auto& path : backend::embedded_paths()) {
    if (path.ends_with(".cpp") || path.ends_with(".cu")) {
      EXPECT_EQ(backend::include_policy_violation(backend::embedded_file(path), path.rfind("cpu/", 0) == 0), "") << path;
    }
  }
}

TEST(AssemblyPolicy, DirectivesThatReadFilesAreRefusedAnywhere) {
  EXPECT_EQ(backend::assembly_policy_violation("\t.text\n\t.globl f\nf:\n\tret\n\t.string \"a.incbinary b\"\n"), "");
  // after a comment GAS drops (an adversarial helper's bypass, 2026-12-07), or inside a string
  EXPECT_NE(backend::assembly_policy_violation("x:/**/.incbin \"/etc/passwd\"\n").find(".incbin"), std::string::npos);
  EXPECT_NE(backend::assembly_policy_violation("\t.string \"a.incbin b\"\n").find(".incbin"), std::string::npos);
  EXPECT_NE(backend::assembly_policy_violation("\t.text\n.incbin \"/etc/passwd\"\n").find("assembly line 2: .incbin"),
            std::string::npos);
  EXPECT_NE(backend::assembly_policy_violation("x: .INCLUDE \"f.s\"\n").find(".include"), std::string::npos);
  EXPECT_NE(backend::assembly_policy_violation("\tnop; .macro m\n").find(".macro"), std::string::npos);
  EXPECT_NE(backend::assembly_policy_violation("\t.rept 3\n").find(".rept"), std::string::npos);
}

}  // namespace
}  // namespace thrive
