// Small filesystem helpers shared by the modules that persist artefacts.
#pragma once

#include <string>

namespace thrive {

/// Reads a whole regular file (at most 1 GiB); throws Error(kInput) naming the path when it
/// cannot, or when the path is a directory, device, FIFO or socket.
std::string read_file(const std::string& path);

/// Writes via a temporary file and rename(2), so readers never see a torn file.
/// Creates parent directories; writes through a symlink to its target. Throws Error(kStorage)
/// naming the path, also when it exists and is not a regular file (a device, FIFO, directory).
void write_file_atomic(const std::string& path, const std::string& content);

/// Creates `dir` (and parents) and checks it is writable; throws Error(kStorage)
/// "THRIVE_HOME=<dir>: not writable (<reason>)" style messages using `what`.
void ensure_writable_dir(const std::string& dir, const std::string& what);

/// 64-bit FNV-1a of `data` as 16 hex digits.
std::string fnv1a_hex(const std::string& data);

/// `text` as valid UTF-8 of at most `max_bytes` bytes: invalid sequences become '?', and
/// the cut never splits a character (compiler logs quoted into JSON).
std::string utf8_prefix(const std::string& text, size_t max_bytes);

}  // namespace thrive
