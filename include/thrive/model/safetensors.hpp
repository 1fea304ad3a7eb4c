// Reading and writing Hugging Face safetensors files.
//
// Format (https://huggingface.co/docs/safetensors): an unsigned 64-bit little-endian N, then N
// bytes of UTF-8 JSON mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (byte offsets relative to the first byte after the header; an optional "__metadata__" maps
// strings to strings), then the data, little-endian, row-major. Sharded checkpoints add
// model.safetensors.index.json whose "weight_map" names the file holding each tensor.
//
// Every structural fact is checked before any tensor is used: header length within the file
// and at most 100,000,000 bytes (the reference's HeaderTooLarge), JSON an object from the
// header's first byte ('{': InvalidHeaderStart), no key twice, each entry with a known dtype,
// a non-negative shape of a whole number of bytes, offsets ordered, inside the data section and
// matching shape x element size, no two tensors overlapping, the tensors covering the data
// section with no hole and no trailing byte (the reference implementation's InvalidOffset and
// MetadataIncompleteBuffer errors: "the last offset must be the end of the file",
// huggingface/safetensors), "__metadata__" null or a map of strings to strings. Violations
// throw Error(kInput) naming the file and tensor.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "thrive/core/files.hpp"

namespace thrive::model {

/// Element types of a safetensors header, in safetensors' spelling ("BF16", "F16", "F32", "F64",
/// "I8" ... "U64", "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "C64", and the sub-byte "F4",
/// "F6_E2M3", "F6_E3M2": the reference crate's Dtype list). THRIVE's weights are read as BF16,
/// F16 or F32 (st_dtype_is_float); a tensor of another dtype may sit in a checkpoint (an integer
/// buffer, MX scales THRIVE does not use) and is refused only when read.
enum class StDtype {
  kBF16, kF16, kF32, kF64, kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64, kBool, kF8E4M3, kF8E5M2,
  kF8E8M0, kC64, kF4, kF6E2M3, kF6E3M2
};
/// Bits per element of `d` (4 to 64).
int st_dtype_bits(StDtype d);
/// Bytes per element of `d` (1 to 8), or 0 for the sub-byte dtypes (F4, F6_E2M3, F6_E3M2).
int st_dtype_bytes(StDtype d);
/// The header's spelling of `d`: "BF16", "F16", "F32", "F64", "I8", ..., "BOOL", "F8_E4M3", ..., "F6_E3M2".
const char* st_dtype_name(StDtype d);
/// True for the dtypes THRIVE converts to float32: BF16, F16, F32.
bool st_dtype_is_float(StDtype d);

/// One tensor's entry in a header.
struct StTensorInfo {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  ///< byte offsets in the data section
  int64_t elements() const;
};
/// Error(kInput) naming `file`, the tensor and its dtype unless `t` is BF16, F16 or F32 (the
/// dtypes THRIVE reads weights from; to_f32 and the engine's header check both call it).
void check_float_dtype(const std::string& file, const StTensorInfo& t);

/// A safetensors file, validated at open and read with pread (not mapped: a file truncated while
/// it is read gives an Error(kInput) naming it, where a mapping would kill the process with SIGBUS).
/// Holds the file open while it lives.
class SafetensorsFile {
 public:
  /// Opens and validates `path`. Throws Error(kInput) naming the file (missing, unreadable,
  /// truncated header, malformed JSON, bad entry) and the tensor where one is at fault.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, StTensorInfo>& tensors() const { return tensors_; }
  /// The entry of `name`; Error(kInput) naming the file when absent.
  const StTensorInfo& info(const std::string& name) const;
  /// Error(kInput) naming the file when its size, modification or status-change time differ
  /// from when it was opened: it was written while being read, and what was read may mix two
  /// versions (a rewrite in place that keeps the size included, where the file system's time
  /// stamps move: a rewrite within one tick of a coarse clock goes unseen). Call it after the last read.
  void check_unchanged() const;
  /// The raw bytes of `name`, little-endian as stored (end - begin bytes). Error(kInput) naming
  /// the file and tensor when the file has shrunk since it was opened or cannot be read.
  std::vector<uint8_t> bytes(const std::string& name) const;
  /// `name` converted to float32, row-major. Error(kInput) naming the file, tensor and dtype when
  /// its dtype is not BF16, F16 or F32, or as bytes() when the read falls short.
  std::vector<float> to_f32(const std::string& name) const;

 private:
  std::string path_;
  int fd_ = -1;
  size_t size_ = 0;
  struct stat opened_ {};  // fstat at open: size and times, for check_unchanged
  int64_t data_start_ = 0;
  std::map<std::string, StTensorInfo> tensors_;
};

/// A tensor to write: bytes already in `dtype`'s little-endian encoding.
struct StTensorOut {
  std::string name;
  StDtype dtype = StDtype::kBF16;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Streams a safetensors file: the layout (names, dtypes, shapes, in data order) is fixed up
/// front, the data follows tensor by tensor (a multi-GB checkpoint never sits in memory). Written
/// under a unique temporary name beside `path` (StagedFile) and renamed into place by finish(),
/// or by close() then commit() (to check other files before anything is replaced). Throws
/// Error(kStorage) naming the path when writing fails, Error(kInternal) when more or fewer bytes
/// arrive than the layout declares.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, const std::vector<StTensorInfo>& layout,
                    const std::map<std::string, std::string>& metadata = {});
  /// Appends the next `n` data bytes (any split across calls).
  void append(const void* bytes, size_t n);
  /// Checks every declared byte arrived and flushes the temporary file to disk.
  void close();
  /// Renames it into place (StagedFile::commit: `replace` false refuses an existing path).
  void commit(bool replace = true) { file_.commit(replace); }
  /// close(), then commit().
  void finish() {
    close();
    commit();
  }

 private:
  StagedFile file_;
  int64_t expected_ = 0, written_ = 0;
};

/// Writes `tensors` to `path` in one go (SafetensorsWriter). The header is padded with spaces
/// to a multiple of 8 bytes. Errors as SafetensorsWriter.
void write_safetensors(const std::string& path, const std::vector<StTensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// All tensors of a checkpoint directory, in transformers' from_pretrained order:
/// model.safetensors, else the files named by model.safetensors.index.json's weight_map, else
/// (neither present) every *.safetensors file in the directory. Throws Error(kInput) naming the
/// directory or file at fault: a tensor present in two files, an empty weight_map, a tensor
/// the weight_map places in a shard that does not hold it, or an index file over 64 MiB.
class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir);
  /// The entry of `name` and the file holding it; Error(kInput) naming the tensor when absent.
  const StTensorInfo& info(const std::string& name) const;
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<float> to_f32(const std::string& name) const;
  const std::string& file_of(const std::string& name) const;
  /// SafetensorsFile::check_unchanged for every file: call it once all weights are read.
  void check_unchanged() const;
  /// The number of files (model.safetensors, the index's shards, or every *.safetensors).
  size_t file_count() const { return files_.size(); }
  /// Every tensor name, sorted.
  std::vector<std::string> names() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
  std::string dir_;
};

}  // namespace thrive::model
