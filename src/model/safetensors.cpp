#include "thrive/model/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "thrive/core/error.hpp"
#include "thrive/core/json.hpp"
#include "thrive/core/files.hpp"
#include "thrive/ops/dtype.hpp"

namespace thrive::model {
namespace {

// Every StDtype with its header spelling and bits per element, in the enum's order (the
// reference crate's Dtype list: huggingface/safetensors, safetensors/src/tensor.rs).
struct DtypeRow {
  StDtype dtype;
  const char* name;
  int bits;
};
constexpr DtypeRow kDtypes[] = {
    {StDtype::kBF16, "BF16", 16},         {StDtype::kF16, "F16", 16},          {StDtype::kF32, "F32", 32},
    {StDtype::kF64, "F64", 64},           {StDtype::kI8, "I8", 8},             {StDtype::kU8, "U8", 8},
    {StDtype::kI16, "I16", 16},           {StDtype::kU16, "U16", 16},          {StDtype::kI32, "I32", 32},
    {StDtype::kU32, "U32", 32},           {StDtype::kI64, "I64", 64},          {StDtype::kU64, "U64", 64},
    {StDtype::kBool, "BOOL", 8},          {StDtype::kF8E4M3, "F8_E4M3", 8},    {StDtype::kF8E5M2, "F8_E5M2", 8},
    {StDtype::kF8E8M0, "F8_E8M0", 8},     {StDtype::kC64, "C64", 64},          {StDtype::kF4, "F4", 4},
    {StDtype::kF6E2M3, "F6_E2M3", 6},     {StDtype::kF6E3M2, "F6_E3M2", 6},
};
constexpr bool dtypes_in_enum_order() {
  for (size_t i = 0; i < std::size(kDtypes); ++i)
    if (size_t(kDtypes[i].dtype) != i) return false;
  return true;
}
static_assert(dtypes_in_enum_order(), "kDtypes is indexed by StDtype");
const DtypeRow& dtype_row(StDtype d) { return kDtypes[size_t(d)]; }

StDtype dtype_from(const std::string& file, const std::string& tensor, const std::string& name) {
  for (const auto& r : kDtypes)
    if (name == r.name) return r.dtype;
  fail(ErrorCategory::kInput, "{}: tensor '{}' has dtype '{}': not a safetensors dtype (BF16, F16, F32, F64, I8 to "
       "I64, U8 to U64, BOOL, F8_E4M3, F8_E5M2, F8_E8M0, C64, F4, F6_E2M3, F6_E3M2)", file, tensor, name);
}

// IEEE binary16 to binary32 (subnormals, inf and NaN included).
float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalize
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      u = sign | uint32_t(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

int st_dtype_bits(StDtype d) { return dtype_row(d).bits; }
int st_dtype_bytes(StDtype d) { return dtype_row(d).bits % 8 == 0 ? dtype_row(d).bits / 8 : 0; }
const char* st_dtype_name(StDtype d) { return dtype_row(d).name; }
bool st_dtype_is_float(StDtype d) { return d == StDtype::kBF16 || d == StDtype::kF16 || d == StDtype::kF32; }
void check_float_dtype(const std::string& file, const StTensorInfo& t) {
  if (!st_dtype_is_float(t.dtype))
    fail(ErrorCategory::kInput, "{}: tensor '{}' has dtype {}: THRIVE reads weights stored as BF16, F16 or F32", file,
         t.name, st_dtype_name(t.dtype));
}

int64_t StTensorInfo::elements() const {
  // a zero dimension first: the product of the others may not fit (the loader bounds the nonzero case)
  if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {
// Reads exactly `n` bytes at `offset` of `fd` (pread, EINTR retried). Error(kInput) naming the
// file and `what` when it ends early (it shrank after it was opened) or the read fails.
void read_exact(int fd, const std::string& path, uint8_t* dst, size_t n, int64_t offset, const std::string& what) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = pread(fd, dst + done, n - done, off_t(offset + int64_t(done)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(ErrorCategory::kInput, "{}: cannot read {} ({})", path, what, std::strerror(errno));
    if (r == 0) {
      struct stat st {};
      const std::string now = fstat(fd, &st) == 0 ? fmt::format("the file is {} bytes now", st.st_size)
                                                   : std::string("the file ended");
      fail(ErrorCategory::kInput, "{}: {}, too short for {} (reading its bytes {} to {} of the file): it shrank after "
           "it was opened (rewritten or truncated meanwhile?)", path, now, what, offset, offset + int64_t(n));
    }
    done += size_t(r);
  }
}
}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO in place of the file would block open() until a writer came. Read with
  // pread, not mapped: a file truncated while it is read is then an error naming it, not SIGBUS.
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) fail(ErrorCategory::kInput, "{}: cannot open ({})", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd_);
    fail(ErrorCategory::kInput, "{}: not a regular file", path);
  }
  size_ = size_t(st.st_size);
  opened_ = st;
  if (size_ < 8) {
    close(fd_);
    fail(ErrorCategory::kInput, "{}: {} bytes, too short for a safetensors header (8-byte length first)", path, size_);
  }
  try {
    uint8_t len[8];
    read_exact(fd_, path, len, 8, 0, "the header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | len[i];  // little-endian
    // the reference crate's limit, 100,000,000 bytes (HeaderTooLarge)
    if (n > size_ - 8 || n > uint64_t(100000000))
      fail(ErrorCategory::kInput, "{}: header length {} exceeds the file ({} bytes) or 100,000,000 bytes: truncated or "
           "not safetensors", path, n, size_);
    data_start_ = int64_t(8 + n);
    const int64_t data_bytes = int64_t(size_) - data_start_;
    std::string header(size_t(n), '\0');
    read_exact(fd_, path, reinterpret_cast<uint8_t*>(header.data()), size_t(n), 8, "the header");
    // a header is a JSON object from its first byte (the reference crate's InvalidHeaderStart:
    // no byte-order mark, no leading space; trailing spaces pad it to 8 bytes)
    if (header.empty() || header[0] != '{')
      fail(ErrorCategory::kInput, "{}: the header starts with {}: expected '{{' (a safetensors header is a JSON object "
           "from its first byte)", path, header.empty() ? std::string("nothing (length 0)")
                                                         : fmt::format("byte 0x{:02x}", uint8_t(header[0])));
    std::string why;
    auto j = parse_json_bounded(header, 64, &why);
    if (!j.is_object())
      fail(ErrorCategory::kInput, "{}: the header is {}, expected a JSON object", path, json_kind(j, why));
    std::vector<std::tuple<int64_t, int64_t, std::string>> spans;  // [begin, end), tensor
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "__metadata__") {
        // the format's "free form text-to-text map" (the reference crate reads it as one and
        // refuses the file otherwise)
        const auto& meta = it.value();
        if (meta.is_null()) continue;  // the reference crate reads it as an optional map
        bool strings = meta.is_object();
        if (strings)
          for (const auto& [k, v] : meta.items()) strings = strings && v.is_string();
        if (!strings)
          fail(ErrorCategory::kInput, "{}: \"__metadata__\" is {}: expected an object of strings to strings", path,
               json_excerpt(meta, 200));
        continue;
      }
      const auto& e = it.value();
      const std::string& name = it.key();
      if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
          !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
          e["data_offsets"].size() != 2)
        fail(ErrorCategory::kInput, "{}: tensor '{}': expected {{dtype, shape, data_offsets: [begin, end]}}", path, name);
      StTensorInfo t;
      t.name = name;
      t.dtype = dtype_from(path, name, e["dtype"].get<std::string>());
      for (const auto& d : e["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          fail(ErrorCategory::kInput, "{}: tensor '{}': shape {} has a dimension that is not a non-negative integer",
               path, name, e["shape"].dump());
        t.shape.push_back(d.get<int64_t>());
      }
      // Offsets as unsigned 64-bit values, bounded by the data section before any signed use (a value
      // past 2^63 would turn negative and pass the range check)
      uint64_t off[2] = {0, 0};
      for (int i = 0; i < 2; ++i) {
        const auto& o = e["data_offsets"][size_t(i)];
        if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
          fail(ErrorCategory::kInput, "{}: tensor '{}': data_offsets {} are not non-negative integers", path, name,
               e["data_offsets"].dump());
        off[i] = o.get<uint64_t>();
      }
      if (off[0] > off[1] || off[1] > uint64_t(data_bytes))
        fail(ErrorCategory::kInput, "{}: tensor '{}': data_offsets [{}, {}] lie outside the data section ({} bytes)",
             path, name, off[0], off[1], data_bytes);
      t.begin = int64_t(off[0]);
      t.end = int64_t(off[1]);
      // The shape's bit count, saturated past the data section's size (a product of large
      // dimensions would otherwise wrap, even in 128 bits)
      __int128 bits = st_dtype_bits(t.dtype);
      for (int64_t d : t.shape) bits = bits > 8 * __int128(data_bytes) ? bits : bits * d;
      // a zero dimension makes 0 bits even where it comes after the saturation point
      if (std::find(t.shape.begin(), t.shape.end(), int64_t{0}) != t.shape.end()) bits = 0;
      // sub-byte dtypes (F4, F6_*) must fill whole bytes (the reference crate's MisalignedSlice)
      if (bits % 8 != 0)
        fail(ErrorCategory::kInput, "{}: tensor '{}': shape {} of {} ({} bits per element) is not a whole number of "
             "bytes", path, name, e["shape"].dump(), st_dtype_name(t.dtype), st_dtype_bits(t.dtype));
      if (bits / 8 != __int128(t.end - t.begin))
        fail(ErrorCategory::kInput, "{}: tensor '{}': {} bytes for shape {} of {} ({} bits per element): "
             "the offsets lie about its size", path, name, t.end - t.begin, e["shape"].dump(), st_dtype_name(t.dtype),
             st_dtype_bits(t.dtype));
      spans.emplace_back(t.begin, t.end, name);
      tensors_[name] = std::move(t);
    }
    // In data order the tensors must tile the data section exactly: no overlap (two tensors
    // sharing bytes), no hole before or between them, nothing after the last (the reference
    // crate's InvalidOffset and MetadataIncompleteBuffer: bytes no tensor owns make a polyglot
    // file, or a truncated or appended one). Empty tensors take no bytes.
    std::sort(spans.begin(), spans.end());
    int64_t covered = 0;
    std::string before;  // the tensor ending at `covered`
    for (const auto& [b, e, n] : spans) {
      if (b < covered)
        fail(ErrorCategory::kInput, "{}: tensors '{}' (bytes {} to {}) and '{}' (bytes {} to {}) overlap in the data "
             "section", path, before, tensors_.at(before).begin, covered, n, b, e);
      if (b > covered)
        fail(ErrorCategory::kInput, "{}: bytes {} to {} of the data section belong to no tensor ({}): the tensors "
             "must cover the data section with no hole", path, covered, b,
             before.empty() ? "before the first tensor, '" + n + "'" : "between '" + before + "' and '" + n + "'");
      if (e > covered || before.empty()) covered = e, before = n;
    }
    if (covered != data_bytes)
      fail(ErrorCategory::kInput, "{}: the data section holds {} bytes but its tensors end at byte {}: {} trailing "
           "bytes belong to no tensor (a file appended to, or a header that lies about its offsets)", path, data_bytes,
           covered, data_bytes - covered);
  } catch (...) {
    close(fd_);
    fd_ = -1;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) close(fd_);
}

const StTensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(ErrorCategory::kInput, "{}: no tensor named '{}'", path_, name);
  return it->second;
}

void SafetensorsFile::check_unchanged() const {
  struct stat st {};
  if (fstat(fd_, &st) != 0)
    fail(ErrorCategory::kInput, "{}: cannot check the file after reading it ({})", path_, std::strerror(errno));
  const auto same_time = [](const timespec& a, const timespec& b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; };
  const auto when = [](const struct stat& x) {
    return fmt::format("{} bytes, modified {}.{:09d}, status changed {}.{:09d}", x.st_size, x.st_mtim.tv_sec,
                       x.st_mtim.tv_nsec, x.st_ctim.tv_sec, x.st_ctim.tv_nsec);
  };
  if (st.st_size != opened_.st_size || !same_time(st.st_mtim, opened_.st_mtim) || !same_time(st.st_ctim, opened_.st_ctim))
    fail(ErrorCategory::kInput, "{}: the file changed while it was read ({} when opened; {} now): the weights read may "
         "mix two versions; run again once it is written", path_, when(opened_), when(st));
}

std::vector<uint8_t> SafetensorsFile::bytes(const std::string& name) const {
  const auto& t = info(name);
  std::vector<uint8_t> out(size_t(t.end - t.begin));
  read_exact(fd_, path_, out.data(), out.size(), data_start_ + t.begin, "tensor '" + name + "'");
  return out;
}

std::vector<float> SafetensorsFile::to_f32(const std::string& name) const {
  const auto& t = info(name);
  check_float_dtype(path_, t);
  const size_t esize = size_t(st_dtype_bytes(t.dtype));
  std::vector<float> out(size_t(t.elements()));
  // read and convert 16 MiB at a time: no second copy of a large tensor (the 1.7B model's
  // embedding is 622 MB in bf16) in memory
  constexpr size_t kChunk = size_t(16) << 20;
  std::vector<uint8_t> buf(std::min(kChunk, out.size() * esize));
  for (size_t first = 0; first < out.size();) {
    const size_t count = std::min(kChunk / esize, out.size() - first);
    read_exact(fd_, path_, buf.data(), count * esize, data_start_ + t.begin + int64_t(first * esize),
               "tensor '" + name + "'");
    const uint8_t* p = buf.data();
    for (size_t i = 0; i < count; ++i) {
      if (t.dtype == StDtype::kF32) {
        std::memcpy(&out[first + i], p + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[first + i] = t.dtype == StDtype::kBF16 ? ops::bf16_to_float(h) : f16_to_f32(h);
      }
    }
    first += count;
  }
  return out;
}

// The parent directory first (StagedFile creates its temporary file there).
static const std::string& with_parent(const std::string& path) {
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  return path;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, const std::vector<StTensorInfo>& layout,
                                     const std::map<std::string, std::string>& metadata)
    : file_(with_parent(path)) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  int64_t off = 0;
  for (const auto& t : layout) {
    if (st_dtype_bytes(t.dtype) == 0)
      fail(ErrorCategory::kInternal, "{}: tensor '{}': this writer writes byte-sized dtypes, not {}", path, t.name,
           st_dtype_name(t.dtype));
    const int64_t n = t.elements() * st_dtype_bytes(t.dtype);
    h[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  expected_ = off;
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  file_.write(len, 8);
  file_.write(header.data(), header.size());
}

void SafetensorsWriter::append(const void* bytes, size_t n) {
  if (written_ + int64_t(n) > expected_)
    fail(ErrorCategory::kInternal, "{}: {} data bytes written, the layout declares {}", file_.path(), written_ + n, expected_);
  file_.write(bytes, n);
  written_ += int64_t(n);
}

void SafetensorsWriter::close() {
  if (written_ != expected_)
    fail(ErrorCategory::kInternal, "{}: {} data bytes written, the layout declares {}", file_.path(), written_, expected_);
  file_.close();
}

void write_safetensors(const std::string& path, const std::vector<StTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<StTensorInfo> layout;
  for (const auto& t : tensors) {
    StTensorInfo i;
    i.name = t.name;
    i.dtype = t.dtype;
    i.shape = t.shape;
    if (i.elements() * st_dtype_bytes(t.dtype) != int64_t(t.bytes.size()))
      fail(ErrorCategory::kInternal, "write_safetensors: tensor '{}' has {} bytes, its shape needs {}", t.name,
           t.bytes.size(), i.elements() * st_dtype_bytes(t.dtype));
    layout.push_back(std::move(i));
  }
  SafetensorsWriter w(path, layout, metadata);
  for (const auto& t : tensors) w.append(t.bytes.data(), t.bytes.size());
  w.finish();
}

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::map<std::string, std::string> listed;  // the index's weight_map: tensor -> shard file
  const std::string index = dir + "/model.safetensors.index.json";
  // transformers' from_pretrained order: a single model.safetensors first, then the sharded index.
  // A dangling symlink counts as present (its open names it), not as absent: a half-linked
  // checkpoint must not fall through to whatever other *.safetensors the directory holds.
  const auto present = [](const std::string& p) { return fs::exists(fs::symlink_status(p)); };
  if (present(dir + "/model.safetensors")) {
    files.push_back("model.safetensors");
  } else if (present(index)) {
    std::string why;
    // a real index is at most a few MiB (a weight_map line per tensor); a parse takes about 20
    // times a file's size in memory
    auto j = parse_json_bounded(read_file(index, uintmax_t(64) << 20), 64, &why);
    if (!j.is_object()) fail(ErrorCategory::kInput, "{}: expected a JSON object, got {}", index, json_kind(j, why));
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail(ErrorCategory::kInput, "{}: expected a \"weight_map\" object (tensor name -> shard file)", index);
    if (j["weight_map"].empty()) fail(ErrorCategory::kInput, "{}: \"weight_map\" is empty: it names no tensor", index);
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        fail(ErrorCategory::kInput, "{}: weight_map['{}'] must be a file name in the directory", index, tensor);
      // a file name cannot hold a NUL: the OS would open the name cut there (escaped as \u0000)
      if (file.get<std::string>().find('\0') != std::string::npos)
        fail(ErrorCategory::kInput, "{}: weight_map['{}'] holds a NUL byte (\\u0000): not a file name", index, tensor);
      if (std::find(files.begin(), files.end(), file.get<std::string>()) == files.end())
        files.push_back(file.get<std::string>());
      listed[tensor] = file.get<std::string>();
    }
  } else {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors") files.push_back(e.path().filename());
    std::sort(files.begin(), files.end());
    if (ec) fail(ErrorCategory::kInput, "{}: cannot list the checkpoint directory ({})", dir, ec.message());
  }
  if (files.empty()) fail(ErrorCategory::kInput, "{}: no *.safetensors file (and no model.safetensors.index.json)", dir);
  for (const auto& f : files) {
    files_.push_back(std::make_unique<SafetensorsFile>(dir + "/" + f));
    for (const auto& [name, info] : files_.back()->tensors()) {
      if (where_.count(name))
        fail(ErrorCategory::kInput, "{}: tensor '{}' is in both {} and {}", dir, name, where_[name]->path(),
             files_.back()->path());
      where_[name] = files_.back().get();
    }
  }
  // the index and the shards agree: a tensor the index places is in that shard (an index left
  // from another export would otherwise load a tensor from wherever it happens to be)
  for (const auto& [tensor, file] : listed) {
    auto it = where_.find(tensor);
    if (it == where_.end())
      fail(ErrorCategory::kInput, "{}: weight_map places '{}' in {}, which has no such tensor", index, tensor, file);
    if (it->second->path() != dir + "/" + file)
      fail(ErrorCategory::kInput, "{}: weight_map places '{}' in {}, but it is in {}", index, tensor, file,
           it->second->path());
  }
}

const StTensorInfo& Checkpoint::info(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail(ErrorCategory::kInput, "{}: the checkpoint has no tensor '{}'", dir_, name);
  return it->second->info(name);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;
}

const std::string& Checkpoint::file_of(const std::string& name) const {
  info(name);
  return where_.at(name)->path();
}

void Checkpoint::check_unchanged() const {
  for (const auto& f : files_) f->check_unchanged();
}

std::vector<float> Checkpoint::to_f32(const std::string& name) const {
  info(name);
  return where_.at(name)->to_f32(name);
}

}  // namespace thrive::model
