// write_file_atomic: whole files only, also with several writers of one path at once (threads of
// one process: the temporary name was once the path plus the process id, which such writers
// shared), the umask left alone and an ordinary new file's mode, no temporary files left behind,
// links written through, non-files refused. FileLock: flock(2) turns between open files,
// waiting with one message, never opened through a link.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_support.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

TEST(WriteFileAtomic, ConcurrentWritersOfOnePathLeaveOneWholeFileAndNoTemporaries) {
  test::TempDir dir;
  const std::string path = dir.path() + "/kernel.cubin";
  constexpr int kThreads = 8, kRounds = 40;
  // each writer's content is 256 KiB of its own letter: a torn or mixed file has two letters
  std::vector<std::string> contents;
  for (int t = 0; t < kThreads; ++t) contents.emplace_back(size_t(256 * 1024), char('a' + t));
  const mode_t mask = umask(022);  // a known process umask while the writers run (put back at the end)
  std::vector<std::thread> writers;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t)
    writers.emplace_back([&, t] {
      try {
        for (int r = 0; r < kRounds; ++r) write_file_atomic(path, contents[size_t(t)]);
      } catch (const Error& e) {
        errors[size_t(t)] = e.what();
      }
    });
  for (auto& w : writers) w.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  // the writers left the umask alone (StagedFile once read it by setting it, umask(0), and threads
  // doing that at once could leave it at 0), and the file has an ordinary new file's mode
  EXPECT_EQ(umask(mask), mode_t(022));
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, mode_t(0644));
  const std::string got = read_file(path);
  ASSERT_EQ(got.size(), contents[0].size());
  EXPECT_EQ(got.find_first_not_of(got[0]), std::string::npos) << "a torn file: more than one writer's bytes";
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"kernel.cubin"});
}

// Many small writes from 16 threads, each to its own file: the umask(0)/umask(mask) pair StagedFile
// once used to read the umask left the process umask at 000 in 4 of 15 such runs on a 2-core
// machine (a review's reproduction, 2026-12-02), and files of mode 0666 in others.
TEST(WriteFileAtomic, ManyThreadsLeaveTheUmaskAndTheModesAlone) {
  test::TempDir dir;
  constexpr int kThreads = 16, kFiles = 400;
  const mode_t mask = umask(022);
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < kFiles; ++i) write_file_atomic(dir.path() + "/f" + std::to_string(t) + "." + std::to_string(i % 8), "x");
    });
  for (auto& w : writers) w.join();
  EXPECT_EQ(umask(mask), mode_t(022));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    struct stat st {};
    ASSERT_EQ(stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, mode_t(0644)) << e.path();
    ++files;
  }
  EXPECT_EQ(files, kThreads * 8);  // and no temporary file left
}

TEST(WriteFileAtomic, ReplacesWritesThroughALinkAndRefusesNonFiles) {
  test::TempDir dir;
  const std::string path = dir.path() + "/sub/dir/log.txt";
  write_file_atomic(path, "first");  // parent directories created
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
  // a link is written through: the target replaced, the link kept
  const std::string link = dir.path() + "/link.txt";
  fs::create_symlink(path, link);
  write_file_atomic(link, "third");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(path), "third");
  // a directory or a FIFO is refused by name, and left as it was
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& bad : {dir.path() + "/sub", fifo}) {
    try {
      write_file_atomic(bad, "x");
      ADD_FAILURE() << bad << " written";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kStorage);
      EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_directory(dir.path() + "/sub"));
  EXPECT_THROW(write_file_atomic("", "x"), Error);
  // a parent that cannot be made a directory is named with its own error
  try {
    write_file_atomic(dir.path() + "/sub/dir/log.txt/inner/x", "x");
    ADD_FAILURE() << "written under a file";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kStorage);
    EXPECT_NE(std::string(e.what()).find("cannot create its directory " + dir.path() + "/sub/dir/log.txt/inner (Not a directory)"),
              std::string::npos)
        << e.what();
  }
  // no temporary file is left beside the files
  EXPECT_EQ(names_in(dir.path() + "/sub/dir"), std::vector<std::string>{"log.txt"});
}

// Two FileLocks on one path are two open file descriptions, so their flock(2) locks conflict as
// two processes' would: shared beside shared, exclusive alone; a waiter says so once and gets the
// lock when the holder goes; a moved lock stays held.
TEST(FileLock, TakesTurnsWaitsOnceAndMovesHeld) {
  test::TempDir dir;
  const std::string path = dir.path() + "/x.lock";
  FileLock a(path), b(path);
  ASSERT_TRUE(a.is_open()) << std::strerror(a.error());
  ASSERT_TRUE(fs::is_regular_file(path));
  EXPECT_EQ(a.acquire(FileLock::Mode::kShared, false), FileLock::Outcome::kLocked);
  EXPECT_EQ(b.acquire(FileLock::Mode::kShared, false), FileLock::Outcome::kLocked);
  b.release();
  FileLock c(path);
  EXPECT_EQ(c.acquire(FileLock::Mode::kExclusive, false), FileLock::Outcome::kBusy);
  // the holder moves: still held (c stays busy), the moved-from one holds nothing
  FileLock moved(std::move(a));
  EXPECT_FALSE(a.is_open());
  EXPECT_EQ(a.acquire(FileLock::Mode::kShared, false), FileLock::Outcome::kFailed);
  EXPECT_EQ(a.error(), EBADF);
  EXPECT_EQ(c.acquire(FileLock::Mode::kExclusive, false), FileLock::Outcome::kBusy);
  std::atomic<bool> released{false};
  std::thread holder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    released = true;
    moved.release();
  });
  int messages = 0;
  const auto got = c.acquire(FileLock::Mode::kExclusive, true, [&] { ++messages; });
  holder.join();
  EXPECT_EQ(got, FileLock::Outcome::kWaited);
  EXPECT_TRUE(released);
  EXPECT_EQ(messages, 1);
  FileLock d(path);
  EXPECT_EQ(d.acquire(FileLock::Mode::kShared, false), FileLock::Outcome::kBusy);
  c = FileLock{};  // assignment releases what c held
  EXPECT_EQ(d.acquire(FileLock::Mode::kShared, false), FileLock::Outcome::kLocked);
}

// A lock file this user may only read (another user's, made by a `sudo thrive memory reset`) is
// opened read-only and locked all the same: flock needs no write access. Root may write any
// file, so this needs another user.
TEST(FileLock, LocksAFileItMayOnlyRead) {
  if (geteuid() == 0) GTEST_SKIP() << "runs as root, which may write any file";
  test::TempDir dir;
  const std::string path = dir.path() + "/x.lock";
  test::write_text(path, "");
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  FileLock a(path), b(path);
  ASSERT_TRUE(a.is_open()) << std::strerror(a.error());
  EXPECT_EQ(a.acquire(FileLock::Mode::kExclusive, false), FileLock::Outcome::kLocked);
  EXPECT_EQ(b.acquire(FileLock::Mode::kShared, false), FileLock::Outcome::kBusy);
}

// A link planted at the lock's path is not followed (its target is neither created nor locked);
// a directory is locked only as one, and a missing one is an error, not a created file.
TEST(FileLock, RefusesLinksAndLocksDirectories) {
  test::TempDir dir;
  const std::string target = dir.path() + "/elsewhere", link = dir.path() + "/x.lock";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  FileLock through(link);
  EXPECT_FALSE(through.is_open());
  EXPECT_EQ(through.error(), ELOOP);
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(through.acquire(FileLock::Mode::kExclusive, true), FileLock::Outcome::kFailed);
  EXPECT_EQ(through.error(), ELOOP);  // open's reason survives a failed acquire

  FileLock d1(dir.path(), true), d2(dir.path(), true);
  ASSERT_TRUE(d1.is_open()) << std::strerror(d1.error());
  EXPECT_EQ(d1.acquire(FileLock::Mode::kExclusive, false), FileLock::Outcome::kLocked);
  EXPECT_EQ(d2.acquire(FileLock::Mode::kExclusive, false), FileLock::Outcome::kBusy);
  FileLock missing(dir.path() + "/none", true);
  EXPECT_FALSE(missing.is_open());
  EXPECT_EQ(missing.error(), ENOENT);
  EXPECT_FALSE(fs::exists(dir.path() + "/none"));
  FileLock not_dir(link + "x", true);
  EXPECT_FALSE(not_dir.is_open());
}

// A directory THRIVE writes into: made with its parents, or refused naming the path and why (a
// dangling link says so, not create_directories' "File exists").
TEST(EnsureWritableDir, MakesDirectoriesAndNamesWhatIsInTheWay) {
  test::TempDir dir;
  EXPECT_NO_THROW(ensure_writable_dir(dir.path() + "/a/b", "--out"));
  EXPECT_TRUE(fs::is_directory(dir.path() + "/a/b"));
  const std::string dangling = dir.path() + "/gone", file = dir.path() + "/file";
  ASSERT_EQ(symlink((dir.path() + "/nowhere").c_str(), dangling.c_str()), 0);
  test::write_text(file, "x");
  const std::string loop = dir.path() + "/loop";
  ASSERT_EQ(symlink(loop.c_str(), loop.c_str()), 0);
  for (const auto& [path, why] : {std::pair{dangling, std::string("a symbolic link to a path that does not exist")},
                                  std::pair{loop, std::string("a symbolic link in a loop")},
                                  std::pair{file, std::string("expected a writable directory")}}) {
    try {
      ensure_writable_dir(path, "--out");
      ADD_FAILURE() << path << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kStorage);
      EXPECT_NE(std::string(e.what()).find("--out=" + path + ": expected a writable directory"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/nowhere"));
}

}  // namespace
}  // namespace thrive
