// Safetensors reading and writing, and every malformed-file case named by issue 6: each is an
// Error(kInput) naming the file (and tensor) before anything is used.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/test_support.hpp"
#include "thrive/core/error.hpp"
#include "thrive/model/safetensors.hpp"
#include "thrive/ops/dtype.hpp"

namespace thrive::model {
namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A file from a raw header string and data bytes (to forge bad headers).
std::string raw_file(const std::string& path, const std::string& header, size_t data_bytes, uint64_t claimed_len = 0) {
  std::string s(8, '\0');
  const uint64_t n = claimed_len ? claimed_len : header.size();
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(n >> (8 * i));
  s += header;
  s.append(data_bytes, '\0');
  return test::write_text(path, s);
}

void expect_input_error(const std::string& path, const std::string& mention) {
  try {
    SafetensorsFile f(path);
    FAIL() << "accepted " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(Safetensors, RoundTripsEveryDtypeAndShape) {
  test::TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  std::vector<uint8_t> bf;
  for (float v : {1.0f, -2.5f, 0.125f, 3.0f, 7.0f, -0.5f}) {
    const uint16_t h = ops::float_to_bf16(v);
    bf.push_back(uint8_t(h));
    bf.push_back(uint8_t(h >> 8));
  }
  const std::vector<uint8_t> f16 = {0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00};  // 1, -2, smallest subnormal
  write_safetensors(path, {{"a.bf16", StDtype::kBF16, {2, 3}, bf},
                           {"b.f32", StDtype::kF32, {4}, f32_bytes({1.5f, -1.f, 0.f, 1e30f})},
                           {"c.f16", StDtype::kF16, {3}, f16},
                           {"d.empty", StDtype::kF32, {0, 5}, {}}},
                    {{"format", "pt"}});
  SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.info("a.bf16").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.to_f32("a.bf16"), (std::vector<float>{1.0f, -2.5f, 0.125f, 3.0f, 7.0f, -0.5f}));
  EXPECT_EQ(f.to_f32("b.f32"), (std::vector<float>{1.5f, -1.f, 0.f, 1e30f}));
  const auto h = f.to_f32("c.f16");
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.0f);
  EXPECT_FLOAT_EQ(h[2], 5.960464477539063e-08f);
  EXPECT_TRUE(f.to_f32("d.empty").empty());
  // the header is padded to 8 bytes, so the data is aligned
  EXPECT_THROW(f.info("missing"), Error);
}

TEST(Safetensors, MalformedFilesAreInputErrorsNamingTheFileAndTensor) {
  test::TempDir dir;
  const std::string d = dir.path();
  expect_input_error(test::write_text(d + "/short", "abc"), "too short");
  expect_input_error(raw_file(d + "/trunc", "{}", 0, 1000), "exceeds the file");
  expect_input_error(raw_file(d + "/notjson", "[1, 2]", 0), "the header starts with byte 0x5b: expected '{'");
  expect_input_error(raw_file(d + "/badjson", "{\"w\": tru}", 0), "syntax error");
  expect_input_error(raw_file(d + "/dtype", R"({"w":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}})", 2),
                     "'Q4_K': not a safetensors dtype");
  expect_input_error(raw_file(d + "/beyond", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8), "outside the data");
  expect_input_error(raw_file(d + "/lies", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 16), "lie about its size");
  expect_input_error(raw_file(d + "/overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 16),
                     "tensors 'a' (bytes 0 to 8) and 'b' (bytes 4 to 12) overlap");
  // a tensor named twice (JSON keeps the last entry silently) and a number past double's range
  expect_input_error(raw_file(d + "/twice", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                            R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
                     "key \"w\" appears twice");
  expect_input_error(raw_file(d + "/overflow", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,1e400]}})", 4),
                     "number overflow");
  expect_input_error(raw_file(d + "/negshape", R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0), "shape");
  expect_input_error(raw_file(d + "/noentry", R"({"w":{"dtype":"F32"}})", 0), "'w'");
  // offsets past 2^63 (negative as int64: they crashed the loader once) and past the header
  expect_input_error(raw_file(d + "/huge", R"({"w":{"dtype":"F32","shape":[2],)"
                                           R"("data_offsets":[18446742974197923840,18446742974197923848]}})", 16),
                     "outside the data");
  expect_input_error(raw_file(d + "/wrap", R"({"w":{"dtype":"F32","shape":[2],)"
                                           R"("data_offsets":[18446744073709551608,0]}})", 16), "outside the data");
  expect_input_error(raw_file(d + "/top", R"({"w":{"dtype":"F32","shape":[2],)"
                                          R"("data_offsets":[9223372036854775808,9223372036854775816]}})", 16),
                     "outside the data");
  // a shape whose byte count wraps even in 128 bits is not 0 bytes
  expect_input_error(raw_file(d + "/bigshape", R"({"w":{"dtype":"BF16","shape":[4611686018427387904,)"
                                               R"(4611686018427387904,16],"data_offsets":[0,0]}})", 0),
                     "lie about its size");
  expect_input_error(d + "/does-not-exist", "cannot open");
  // the tensors tile the data section: no hole before, between or after them (the reference
  // implementation's InvalidOffset / MetadataIncompleteBuffer); an empty tensor inside another's
  // bytes is an overlap; "__metadata__" maps strings to strings
  struct Forged {
    const char* name;
    std::string header;
    size_t data_bytes;
    const char* mention;
  };
  const std::string a4 = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  const Forged forged[] = {
      {"lead", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8,
       "bytes 0 to 4 of the data section belong to no tensor (before the first tensor, 'w')"},
      {"hole", "{" + a4 + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12,
       "bytes 4 to 8 of the data section belong to no tensor (between 'a' and 'b')"},
      {"trailing", "{" + a4 + "}", 6, "holds 6 bytes but its tensors end at byte 4: 2 trailing bytes"},
      {"nothing", "{}", 3, "holds 3 bytes but its tensors end at byte 0"},
      {"inside", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0],)"
                 R"("data_offsets":[4,4]}})", 8, "tensors 'a' (bytes 0 to 8) and 'z' (bytes 4 to 4) overlap"},
      {"meta-num", R"({"__metadata__":{"format":1}})", 0, "\"__metadata__\" is {\"format\":1}"},
      {"meta-list", R"({"__metadata__":["pt"]})", 0, "expected an object of strings"},
      // a sub-byte dtype must fill whole bytes (MisalignedSlice); the header at most 100,000,000 bytes
      {"f4-odd", R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2,
       "shape [3] of F4 (4 bits per element) is not a whole number of bytes"},
      {"f6-lies", R"({"w":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,4]}})", 4, "the offsets lie about its size"},
      // the header is a JSON object from its first byte (InvalidHeaderStart): no BOM, no leading space
      {"bom", "\xef\xbb\xbf{}", 0, "the header starts with byte 0xef: expected '{'"},
      {"space", " {}", 0, "the header starts with byte 0x20: expected '{'"},
      {"empty-header", "", 0, "the header starts with nothing (length 0)"},
  };
  for (const auto& f : forged) expect_input_error(raw_file(d + "/" + f.name, f.header, f.data_bytes), f.mention);
}

// Read with pread: a tensor larger than the 16 MiB conversion chunk comes back whole, and a
// file truncated after it was opened is an input error naming it (a mapping would SIGBUS).
TEST(Safetensors, LargeTensorsReadInChunksAndATruncatedFileIsAnError) {
  test::TempDir dir;
  const std::string path = dir.path() + "/big.safetensors";
  std::vector<float> v(size_t(5) << 20);  // 20 MiB of F32, and an odd BF16 tail
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 65536) - 7.f;
  std::vector<uint8_t> tail(2 * 3);
  for (int i = 0; i < 3; ++i) tail[size_t(2 * i + 1)] = 0x3f, tail[size_t(2 * i)] = 0x80;  // bf16 1.0
  write_safetensors(path, {{"big", StDtype::kF32, {int64_t(v.size())}, f32_bytes(v)}, {"tail", StDtype::kBF16, {3}, tail}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.to_f32("big"), v);
  EXPECT_EQ(f.to_f32("tail"), (std::vector<float>{1.f, 1.f, 1.f}));
  EXPECT_EQ(f.bytes("tail"), tail);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 2 * 3 - 4 * 1000);
  for (const std::string t : {"big", "tail"}) {
    try {
      (void)f.to_f32(t);
      FAIL() << "read " << t << " past the end of a truncated file";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput);
      EXPECT_NE(std::string(e.what()).find(fmt::format("{}: the file is {} bytes now, too short for tensor '{}'", path,
                                                       std::filesystem::file_size(path), t)),
                std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("shrank after it was opened"), std::string::npos) << e.what();
    }
  }
}

// A file written while it is read (a rewrite in place keeps its size) is caught by its times.
TEST(Safetensors, AFileChangedAfterItWasOpenedIsCaught) {
  test::TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  write_safetensors(path, {{"w", StDtype::kF32, {2}, f32_bytes({1.f, 2.f})}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.to_f32("w"), (std::vector<float>{1.f, 2.f}));
  EXPECT_NO_THROW(f.check_unchanged());
  {  // the same bytes count, other values, written in place (dd conv=notrunc)
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-4, std::ios::end);
    const float three = 3.f;
    io.write(reinterpret_cast<const char*>(&three), 4);
  }
  // a file system whose time stamps are coarse: move the modification time on explicitly
  std::filesystem::last_write_time(path, std::filesystem::last_write_time(path) + std::chrono::seconds(2));
  try {
    f.check_unchanged();
    FAIL() << "a file rewritten in place passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(e.what()).find(path + ": the file changed while it was read"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, EmptyTensorsAndAMetadataMapAreValid) {
  test::TempDir dir;
  // a null __metadata__ is absent (the reference reads an optional map)
  EXPECT_NO_THROW(SafetensorsFile(raw_file(dir.path() + "/null-meta", R"({"__metadata__":null})", 0)));
  // sub-byte dtypes in whole bytes: 4 F4 values in 2 bytes, 4 F6 values in 3
  EXPECT_NO_THROW(SafetensorsFile(raw_file(dir.path() + "/subbyte", R"({"a":{"dtype":"F4","shape":[2,2],)"
                                           R"("data_offsets":[0,2]},"b":{"dtype":"F6_E3M2","shape":[4],)"
                                           R"("data_offsets":[2,5]}})", 5)));
  const std::string path = raw_file(dir.path() + "/ok", R"({"__metadata__":{"format":"pt"},)"
                                    R"("e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                                    R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("z":{"dtype":"BF16","shape":[3,0],"data_offsets":[4,4]}})", 4);
  SafetensorsFile f(path);
  EXPECT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.to_f32("w"), std::vector<float>{0.f});
}

TEST(Safetensors, ATensorOfAnotherDtypeIsReadOnlyWhenUsed) {
  // a checkpoint may carry an integer buffer it does not load; reading one as weights is the error
  test::TempDir dir;
  const std::string path = raw_file(dir.path() + "/m", R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
                                    R"("w":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
                                    R"("f8":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[20,24]}})", 24);
  SafetensorsFile f(path);
  EXPECT_EQ(f.info("ids").dtype, StDtype::kI64);
  EXPECT_EQ(f.info("f8").dtype, StDtype::kF8E4M3);
  EXPECT_EQ(f.to_f32("w"), std::vector<float>{0.f});
  for (const std::string t : {"ids", "f8"}) {
    try {
      (void)f.to_f32(t);
      FAIL() << "read " << t;
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput);
      EXPECT_NE(std::string(e.what()).find(path + ": tensor '" + t + "' has dtype " + st_dtype_name(f.info(t).dtype) +
                                           ": THRIVE reads weights stored as BF16, F16 or F32"),
                std::string::npos)
          << e.what();
    }
  }
  // the names and sizes of every dtype (safetensors' spelling)
  EXPECT_STREQ(st_dtype_name(StDtype::kF8E5M2), "F8_E5M2");
  EXPECT_STREQ(st_dtype_name(StDtype::kF8E8M0), "F8_E8M0");
  EXPECT_EQ(st_dtype_bits(StDtype::kF4), 4);
  EXPECT_EQ(st_dtype_bytes(StDtype::kF6E2M3), 0);  // sub-byte
  EXPECT_EQ(st_dtype_bytes(StDtype::kC64), 8);
  EXPECT_EQ(st_dtype_bytes(StDtype::kU64), 8);
  EXPECT_EQ(st_dtype_bytes(StDtype::kBool), 1);
  EXPECT_EQ(st_dtype_bytes(StDtype::kBF16), 2);
}

TEST(Safetensors, ShardedCheckpointsFollowTheIndexAndRefuseDuplicates) {
  test::TempDir dir;
  const std::string d = dir.path();
  write_safetensors(d + "/part-1.safetensors", {{"x", StDtype::kF32, {1}, f32_bytes({1.f})}});
  write_safetensors(d + "/part-2.safetensors", {{"y", StDtype::kF32, {1}, f32_bytes({2.f})}});
  test::write_text(d + "/model.safetensors.index.json",
                   R"({"weight_map": {"x": "part-1.safetensors", "y": "part-2.safetensors"}})");
  Checkpoint ck(d);
  EXPECT_EQ(ck.to_f32("y"), std::vector<float>{2.f});
  EXPECT_NE(ck.file_of("x").find("part-1"), std::string::npos);
  try {
    (void)ck.info("z");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'z'"), std::string::npos) << e.what();
  }
  write_safetensors(d + "/part-2.safetensors", {{"x", StDtype::kF32, {1}, f32_bytes({3.f})}});
  try {
    Checkpoint dup(d);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in both"), std::string::npos) << e.what();
  }
  test::TempDir empty;
  EXPECT_THROW(Checkpoint{empty.path()}, Error);
}

TEST(Safetensors, TheIndexMustAgreeWithItsShards) {
  test::TempDir dir;
  const std::string d = dir.path();
  write_safetensors(d + "/part-1.safetensors", {{"x", StDtype::kF32, {1}, f32_bytes({1.f})}});
  write_safetensors(d + "/part-2.safetensors", {{"y", StDtype::kF32, {1}, f32_bytes({2.f})}});
  const auto refused = [&](const std::string& index, const std::string& mention) {
    test::write_text(d + "/model.safetensors.index.json", index);
    try {
      Checkpoint ck(d);
      FAIL() << index;
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput) << e.what();
      EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    }
  };
  refused(R"({"weight_map": {}})", "is empty");
  refused(R"({"weight_map": {"x": "part-2.safetensors", "y": "part-1.safetensors"}})",
          "places 'x' in part-2.safetensors, but it is in");
  refused(R"({"weight_map": {"x": "part-1.safetensors", "y": "part-2.safetensors", "q": "part-2.safetensors"}})",
          "places 'q' in part-2.safetensors, which has no such tensor");
  write_safetensors(d + "/part-2.safetensors", {{"y", StDtype::kF32, {1}, f32_bytes({2.f})},
                                                {"z", StDtype::kF32, {1}, f32_bytes({3.f})}});
  refused(R"({"weight_map": {"x": "part-1.safetensors", "y": "part-2.safetensors", "z": "part-1.safetensors"}})",
          "places 'z' in part-1.safetensors, but it is in");
  refused("[1]", "got a JSON array");
  refused(R"({"weight_map": {"x": "part-1.safetensors\u0000x", "y": "part-2.safetensors"}})", "holds a NUL byte");
  refused(R"({"weight_map": {"x": "part-1.safetensors", "x": "part-2.safetensors"}})", "key \"x\" appears twice");
  // a dangling index symlink is an error naming it, not a directory without an index
  std::filesystem::remove(d + "/model.safetensors.index.json");
  std::filesystem::create_symlink(d + "/gone.json", d + "/model.safetensors.index.json");
  try {
    Checkpoint ck(d);
    FAIL() << "a dangling index symlink was ignored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors.index.json"), std::string::npos) << e.what();
  }
  // a single model.safetensors is read before the index, as transformers does
  write_safetensors(d + "/model.safetensors", {{"w", StDtype::kF32, {1}, f32_bytes({4.f})}});
  Checkpoint single(d);
  EXPECT_TRUE(single.has("w"));
  EXPECT_FALSE(single.has("x"));
}

}  // namespace
}  // namespace thrive::model
