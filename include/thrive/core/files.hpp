// Small filesystem helpers shared by the modules that persist artefacts.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace thrive {

/// Reads a whole regular file of at most `max_bytes` (default 1 GiB; a caller that parses the
/// text passes what that file can sensibly hold: a parse takes about 20 times its size in memory);
/// throws Error(kInput) naming the path when it cannot, when it is larger (naming its size and the
/// limit), or when the path is a directory, device, FIFO or socket.
std::string read_file(const std::string& path, uintmax_t max_bytes = uintmax_t(1) << 30);

/// Writes via a temporary file and rename(2), so readers never see a torn file: a StagedFile
/// beside the target (a unique name created exclusively, so concurrent writers of one path,
/// threads of one process included, never share one), not synced to disk (the callers' files are
/// caches and logs, rewritten when lost). Creates parent directories (Error(kStorage) naming the directory
/// and its error when one cannot be made); writes through a symlink to an existing file (that
/// file replaced, the link kept), while a dangling link is itself replaced by the file. Throws
/// Error(kStorage) naming the path, also when it exists and is not a regular file (a device,
/// FIFO, directory).
void write_file_atomic(const std::string& path, const std::string& content);

/// A file written under a unique temporary name beside `path` ("." + its name + "." + six random
/// letters and digits, created exclusively (O_EXCL, as mkstemp): never through an existing name,
/// link or FIFO, so concurrent writers, threads of one process included, never share one) and
/// renamed onto `path` by commit(); removed when never committed. Its mode is an ordinary new
/// file's: 0666 less the umask, or as a directory's default ACL says. Errors: Error(kStorage) naming
/// the path when the file cannot be created, written or renamed.
class StagedFile {
 public:
  explicit StagedFile(const std::string& path);
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  /// Writes all of `n` bytes; Error(kStorage) when the file system refuses.
  void write(const void* bytes, size_t n);
  /// Flushes to disk (fsync; with `sync` false, only to the kernel) and closes the temporary file.
  void close(bool sync = true);
  /// Renames the closed temporary file onto `path`. With `replace`, what is at `path` is
  /// swapped out as a directory entry: a symlink there is replaced itself, its target left
  /// alone. Without it, Error(kStorage) "exists" when `path` exists (renameat2
  /// RENAME_NOREPLACE; a check first where the file system lacks it). `sync` as for close().
  void commit(bool replace, bool sync = true);
  /// Closes it and leaves the temporary file where it is (the caller owns that name now).
  void release() {
    close();
    committed_ = true;
  }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

/// Removes the temporary files StagedFile(`path`) instances left when their process was killed
/// (regular files named like them: "." + the name + "." + mkstemp's six letters and digits; a
/// link or another name is left alone). Only where no StagedFile for `path` is being written
/// (the caller holds a lock on the directory).
void remove_stale_staged_files(const std::string& path);

/// Renames `from` to `to` unless `to` exists (renameat2 RENAME_NOREPLACE: no window in which
/// another process's `to` could be replaced; where the file system lacks it, a check first).
/// Returns 0, or the errno of the failure: EEXIST when `to` exists, ENOENT when `from` does not.
int rename_no_replace(const std::string& from, const std::string& to);

/// True when `path` names a regular file (a symlink followed) that this process may execute
/// (access(2) X_OK); false for a directory, a missing path or one it cannot stat. Throws nothing.
bool is_executable_file(const std::string& path);

/// Throws Error(kStorage) naming `path` when it exists and is neither a regular file nor a
/// symlink (a directory, FIFO, device or socket): what StagedFile::commit must not replace.
void check_replaceable(const std::string& path);

/// Creates `dir` (and parents) and checks it is writable; throws Error(kStorage)
/// "THRIVE_HOME=<dir>: not writable (<reason>)" style messages using `what`.
void ensure_writable_dir(const std::string& dir, const std::string& what);

/// An advisory lock held with flock(2) on an open file or directory: the descriptor, closed
/// (which releases the lock) when its holder goes. Move-only; a FileLock that holds nothing has
/// is_open() false. Used where THRIVE processes must take turns per THRIVE_HOME or directory: a
/// memory store and its reset, the copy-bandwidth measurement, a checkpoint directory's init.
class FileLock {
 public:
  enum class Mode { kShared, kExclusive };
  /// What acquire() did: locked at once; locked after waiting for another holder; not locked
  /// because another holds a conflicting lock (only without waiting); not locked for another
  /// reason (error() has flock's errno, or EBADF when the file is not open).
  enum class Outcome { kLocked, kWaited, kBusy, kFailed };
  FileLock() = default;
  /// Opens `path` to lock it, taking no lock yet: a regular file, created (mode 0644 less the
  /// umask) when missing and never opened through a symlink (O_NOFOLLOW: a link planted there
  /// fails with ELOOP; an existing file this user may only read is opened read-only, which flock
  /// allows), or with `directory`, an existing directory (O_DIRECTORY). Throws nothing:
  /// on failure is_open() is false and error() is open(2)'s errno.
  explicit FileLock(const std::string& path, bool directory = false);
  FileLock(FileLock&& o) noexcept;
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();
  /// Takes the lock in `mode`. Without `wait` it returns kBusy at once while another open file
  /// description holds a conflicting lock. With `wait` it first tries without waiting, and when
  /// busy calls `on_wait` once (to say why nothing happens) and blocks until it gets the lock:
  /// kWaited. On kFailed the file stays open and error() says why: flock's errno, or for a file
  /// that is not open, open's errno (EBADF after release() or a move).
  Outcome acquire(Mode mode, bool wait, const std::function<void()>& on_wait = {});
  /// Closes the file, releasing any lock.
  void release();
  bool is_open() const { return fd_ >= 0; }
  /// The errno of the last failure (open or flock), 0 when none.
  int error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1, error_ = 0;
};

/// 64-bit FNV-1a of `data` as 16 hex digits.
std::string fnv1a_hex(const std::string& data);

/// `text` as valid UTF-8 of at most `max_bytes` bytes: invalid sequences become '?', and
/// the cut never splits a character (compiler logs quoted into JSON).
std::string utf8_prefix(const std::string& text, size_t max_bytes);

}  // namespace thrive
