#include "thrive/core/files.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "thrive/core/error.hpp"

namespace thrive {
namespace fs = std::filesystem;

std::string read_file(const std::string& path, uintmax_t max_bytes) {
  // Only regular files: a FIFO or /dev/zero would block or grow without end.
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec) fail(ErrorCategory::kInput, "{}: cannot read ({})", path, ec.message());
  if (st.type() == fs::file_type::directory) fail(ErrorCategory::kInput, "{}: is a directory; expected a file", path);
  if (st.type() != fs::file_type::regular)
    fail(ErrorCategory::kInput, "{}: not a regular file (a device, FIFO or socket); expected a file", path);
  if (const auto size = fs::file_size(path, ec); !ec && size > max_bytes)
    fail(ErrorCategory::kInput, "{}: {} bytes; expected at most {} bytes for this file", path, size, max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCategory::kInput, "{}: cannot read ({})", path, std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file_atomic(const std::string& target, const std::string& content) {
  if (target.empty()) fail(ErrorCategory::kStorage, "cannot write to an empty path; expected a file path");
  std::error_code ec;
  // A symlink is written through (its target replaced), and only regular files are replaced:
  // renaming onto /dev/null or a FIFO would swap the node itself for a file.
  std::string path = target;
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    const auto resolved = fs::weakly_canonical(target, ec);
    if (ec) fail(ErrorCategory::kStorage, "{}: cannot resolve the link ({})", target, ec.message());
    path = resolved.string();
  }
  const auto st = fs::status(path, ec);
  if (!ec && fs::exists(st) && st.type() != fs::file_type::regular)
    fail(ErrorCategory::kStorage, "{}: exists and is not a regular file; expected a file path", target);
  // its directory's own error (a file in the way, no permission), not the temporary's later
  // "No such file or directory"
  if (const auto parent = fs::path(path).parent_path(); !parent.empty() && !fs::create_directories(parent, ec) && ec)
    fail(ErrorCategory::kStorage, "{}: cannot create its directory {} ({})", target, parent.string(), ec.message());
  StagedFile out(path);
  out.write(content.data(), content.size());
  out.commit(true, false);
}

StagedFile::StagedFile(const std::string& path) : path_(path) {
  const fs::path p(path);
  const auto dir = p.parent_path();
  const std::string stem = (dir.empty() ? std::string() : dir.string() + "/") + "." + p.filename().string() + ".";
  // What mkstemp does, but created with mode 0666: the kernel then applies the umask and a
  // directory's default ACL as for any new file. mkstemp's 0600 needed an fchmod from the umask,
  // and reading the umask means setting it (umask(2)): process-wide, so two threads doing that
  // at once could leave it 000 for good.
  static constexpr char kLetters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  int fd = -1, err = 0;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    std::string name = stem;
    for (int i = 0; i < 6; ++i) name += kLetters[rng() % 62];
    fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // never through a link
    err = errno;
    if (fd >= 0) tmp_ = name;
    else if (err != EEXIST) break;
  }
  if (fd < 0) fail(ErrorCategory::kStorage, "{}: cannot create a temporary file beside it ({})", path, std::strerror(err));
  f_ = fdopen(fd, "wb");
  if (f_ == nullptr) {
    err = errno;
    ::close(fd);
    unlink(tmp_.c_str());
    fail(ErrorCategory::kStorage, "{}: cannot write ({})", tmp_, std::strerror(err));
  }
}

StagedFile::~StagedFile() {
  if (f_ != nullptr) std::fclose(f_);
  if (!committed_) unlink(tmp_.c_str());
}

void StagedFile::write(const void* bytes, size_t n) {
  if (f_ == nullptr || std::fwrite(bytes, 1, n, f_) != n)
    fail(ErrorCategory::kStorage, "{}: write failed ({})", tmp_, std::strerror(errno));
}

void StagedFile::close(bool sync) {
  if (f_ == nullptr) return;
  const bool ok = std::fflush(f_) == 0 && (!sync || fsync(fileno(f_)) == 0);
  const int err = errno;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed) fail(ErrorCategory::kStorage, "{}: cannot finish writing ({})", path_, std::strerror(err));
}

void StagedFile::commit(bool replace, bool sync) {
  close(sync);
  if (replace) {
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      fail(ErrorCategory::kStorage, "{}: cannot rename into place ({})", path_, std::strerror(errno));
  } else if (const int err = rename_no_replace(tmp_, path_); err != 0) {
    fail(ErrorCategory::kStorage, "{}: cannot rename into place ({})", path_,
         err == EEXIST ? "it exists; expected to create it" : std::strerror(err));
  }
  committed_ = true;
}

void remove_stale_staged_files(const std::string& path) {
  const fs::path p(path);
  std::string stem = ".";  // built in steps: GCC 12 warns (-Wrestrict, falsely) on "." + name + "."
  stem += p.filename().string();
  stem += '.';
  std::error_code ec;
  for (fs::directory_iterator it(p.parent_path().empty() ? fs::path(".") : p.parent_path(), ec), end;
       !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != stem.size() + 6 || !name.starts_with(stem) ||
        !std::all_of(name.begin() + long(stem.size()), name.end(), [](char c) { return std::isalnum((unsigned char)c); }))
      continue;
    std::error_code e2;
    if (it->symlink_status(e2).type() == fs::file_type::regular) fs::remove(it->path(), e2);
  }
}

int rename_no_replace(const std::string& from, const std::string& to) {
  if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  std::error_code ec;  // a file system without RENAME_NOREPLACE: check, then rename
  if (fs::exists(fs::symlink_status(to, ec))) return EEXIST;
  return std::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

void check_replaceable(const std::string& path) {
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return;
  if (st.type() != fs::file_type::regular && st.type() != fs::file_type::symlink)
    fail(ErrorCategory::kStorage, "{}: exists and is not a regular file or a link; expected a file path", path);
}

void ensure_writable_dir(const std::string& dir, const std::string& what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    // a link to nowhere, or to itself: create_directories says only "File exists"
    std::error_code link_ec, target_ec;
    const bool broken = fs::is_symlink(fs::symlink_status(dir, link_ec)) && !fs::exists(dir, target_ec);
    fail(ErrorCategory::kStorage, "{}={}: expected a writable directory ({})", what, dir,
         !broken ? (ec ? ec.message() : "not a directory")
         : target_ec.value() == ELOOP ? "a symbolic link in a loop"
                                      : "a symbolic link to a path that does not exist");
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    fail(ErrorCategory::kStorage, "{}={}: expected a writable directory ({})", what, dir,
         std::strerror(errno));
}

std::string utf8_prefix(const std::string& text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (!ok) len = 1;
    if (out.size() + (ok ? len : 1) > max_bytes) break;
    if (ok) out.append(text, i, len);
    else out.push_back('?');
    i += len;
  }
  return out;
}

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

std::string fnv1a_hex(const std::string& data) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64-bit offset basis
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

FileLock::FileLock(const std::string& path, bool directory) : path_(path) {
  fd_ = directory ? ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                  : ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  // a lock file another user made (a `sudo thrive memory reset`): flock needs no write access
  if (fd_ < 0 && errno == EACCES && !directory) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd_ < 0) error_ = errno;
}

FileLock::FileLock(FileLock&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_), error_(o.error_) { o.fd_ = -1; }

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_), fd_ = o.fd_, error_ = o.error_;
    o.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() { release(); }

void FileLock::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

FileLock::Outcome FileLock::acquire(Mode mode, bool wait, const std::function<void()>& on_wait) {
  if (fd_ < 0) {
    if (error_ == 0) error_ = EBADF;  // (open's errno, where it failed, says more)
    return Outcome::kFailed;
  }
  const int op = mode == Mode::kShared ? LOCK_SH : LOCK_EX;
  int rc;
  do rc = ::flock(fd_, op | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc == 0) return Outcome::kLocked;
  if (errno != EWOULDBLOCK) {
    error_ = errno;
    return Outcome::kFailed;
  }
  if (!wait) return Outcome::kBusy;
  if (on_wait) on_wait();
  do rc = ::flock(fd_, op);
  while (rc != 0 && errno == EINTR);
  if (rc == 0) return Outcome::kWaited;
  error_ = errno;
  return Outcome::kFailed;
}

}  // namespace thrive
