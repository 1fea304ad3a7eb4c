#include "thrive/memory/store.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <limits>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <thread>
#include <utility>

#include "thrive/core/error.hpp"
#include "thrive/core/json.hpp"
#include <cctype>
#include <cerrno>
#include <cstring>
#include "thrive/core/files.hpp"

namespace thrive::memory {
namespace {

constexpr int kApplicationId = 0x54485256;  // "THRV"
constexpr int kSchemaVersion = 1;

const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS devices(
  device_key TEXT PRIMARY KEY, peak_bw_gbps REAL NOT NULL, measured_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cards(
  id TEXT PRIMARY KEY, title TEXT NOT NULL, description TEXT NOT NULL, backend TEXT NOT NULL,
  traits TEXT NOT NULL, bottlenecks TEXT NOT NULL, set_params TEXT NOT NULL,
  origin TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS card_evidence(
  card_id TEXT NOT NULL, op TEXT NOT NULL, shape_class TEXT NOT NULL, backend TEXT NOT NULL,
  successes INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0,
  sum_log_gain REAL NOT NULL DEFAULT 0, best_gain REAL NOT NULL DEFAULT 0, last_seen TEXT,
  PRIMARY KEY(card_id, op, shape_class, backend));
CREATE TABLE IF NOT EXISTS kernels(
  kernel_id TEXT NOT NULL, op TEXT NOT NULL, shape_class TEXT NOT NULL, device_key TEXT NOT NULL,
  backend TEXT NOT NULL, params TEXT NOT NULL, source TEXT NOT NULL, time_us REAL NOT NULL,
  eager_us REAL NOT NULL, speedup REAL NOT NULL, bandwidth_gbps REAL NOT NULL,
  percent_of_peak REAL NOT NULL, max_rel_err REAL NOT NULL, verified INTEGER NOT NULL,
  parent_id TEXT NOT NULL, card_id TEXT NOT NULL, command TEXT NOT NULL, metrics TEXT NOT NULL,
  created_at TEXT NOT NULL, PRIMARY KEY(kernel_id, shape_class, device_key));
CREATE TABLE IF NOT EXISTS best(
  op TEXT NOT NULL, shape_class TEXT NOT NULL, device_key TEXT NOT NULL, kernel_id TEXT NOT NULL,
  PRIMARY KEY(op, shape_class, device_key));
CREATE TABLE IF NOT EXISTS runs(
  run_id INTEGER PRIMARY KEY AUTOINCREMENT, command TEXT NOT NULL, device_key TEXT NOT NULL,
  agent TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT);
CREATE TABLE IF NOT EXISTS attempts(
  id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER NOT NULL, op TEXT NOT NULL,
  shape_class TEXT NOT NULL, device_key TEXT NOT NULL, pass INTEGER NOT NULL,
  round INTEGER NOT NULL, phase TEXT NOT NULL, kernel_id TEXT NOT NULL, card_id TEXT NOT NULL,
  change TEXT NOT NULL, status TEXT NOT NULL, time_us REAL NOT NULL, speedup REAL NOT NULL,
  notes TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS attempts_by_task ON attempts(op, shape_class, device_key, run_id);
CREATE TABLE IF NOT EXISTS system_changes(
  id INTEGER PRIMARY KEY AUTOINCREMENT, system_key TEXT NOT NULL, device_key TEXT NOT NULL,
  metric TEXT NOT NULL, stage TEXT NOT NULL, specialist TEXT NOT NULL, change TEXT NOT NULL,
  config_before TEXT NOT NULL, config_after TEXT NOT NULL, t_before REAL NOT NULL,
  t_after REAL NOT NULL, accepted INTEGER NOT NULL, verdict TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS imported_evidence(
  origin TEXT NOT NULL, card_id TEXT NOT NULL, op TEXT NOT NULL, shape_class TEXT NOT NULL,
  backend TEXT NOT NULL, successes INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0,
  sum_log_gain REAL NOT NULL DEFAULT 0, best_gain REAL NOT NULL DEFAULT 0, last_seen TEXT,
  PRIMARY KEY(origin, card_id, op, shape_class, backend));
CREATE TABLE IF NOT EXISTS attempt_measure(
  attempt_id INTEGER PRIMARY KEY, footing INTEGER NOT NULL, timing_verdict INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS system_best(
  system_key TEXT NOT NULL, device_key TEXT NOT NULL, metric TEXT NOT NULL, config TEXT NOT NULL,
  updated_at TEXT NOT NULL, PRIMARY KEY(system_key, device_key, metric));
)SQL";

// A prepared statement with positional binds; finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql, const std::string& path) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
      fail(ErrorCategory::kStorage, "memory store {}: {} (in: {})", path, sqlite3_errmsg(db),
           sql.substr(0, 60));
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, const char* v) { return bind(i, std::string(v)); }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, std::isfinite(v) ? v : 1e308);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, int64_t(v)); }
  Stmt& bind(int i, bool v) { return bind(i, int64_t(v)); }
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(ErrorCategory::kStorage, "memory store {}: {}", path_, sqlite3_errmsg(db_));
  }
  std::string text(int c) const {
    const unsigned char* t = sqlite3_column_text(stmt_, c);
    // By length, not as a C string: a stored NUL must not cut the value short.
    return t ? std::string(reinterpret_cast<const char*>(t), size_t(sqlite3_column_bytes(stmt_, c))) : "";
  }
  double real(int c) const { return sqlite3_column_double(stmt_, c); }
  int64_t integer(int c) const { return sqlite3_column_int64(stmt_, c); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string path_;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back if an exception escapes.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {
    char* err = nullptr;
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown";
      sqlite3_free(err);
      fail(ErrorCategory::kStorage, "memory store: cannot begin a transaction: {}", msg);
    }
  }
  void commit() {
    char* err = nullptr;
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown";
      sqlite3_free(err);
      fail(ErrorCategory::kStorage, "memory store: commit failed: {}", msg);
    }
    done_ = true;
  }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

const char* kKernelColumns =
    "kernel_id, op, shape_class, device_key, backend, params, source, time_us, eager_us, "
    "speedup, bandwidth_gbps, percent_of_peak, max_rel_err, verified, parent_id, card_id, "
    "command, metrics, created_at";

KernelRecord read_kernel(const Stmt& s) {
  KernelRecord k;
  k.kernel_id = s.text(0);
  k.op = s.text(1);
  k.shape_class = s.text(2);
  k.device_key = s.text(3);
  k.backend = s.text(4);
  k.params = s.text(5);
  k.source = s.text(6);
  k.time_us = s.real(7);
  k.eager_us = s.real(8);
  k.speedup = s.real(9);
  k.bandwidth_gbps = s.real(10);
  k.percent_of_peak = s.real(11);
  k.max_rel_err = s.real(12);
  k.verified = s.integer(13) != 0;
  k.parent_id = s.text(14);
  k.card_id = s.text(15);
  k.command = s.text(16);
  k.metrics = nlohmann::json::parse(s.text(17), nullptr, false);
  if (k.metrics.is_discarded()) k.metrics = nlohmann::json::object();
  k.created_at = s.text(18);
  return k;
}

// Writes one kernels row; `verb` is "INSERT" or "INSERT OR REPLACE".
void insert_kernel(sqlite3* db, const std::string& path, const KernelRecord& k, const char* verb) {
  Stmt s(db, std::string(verb) + " INTO kernels(" + kKernelColumns +
                 ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
         path);
  s.bind(1, k.kernel_id).bind(2, k.op).bind(3, k.shape_class).bind(4, k.device_key);
  s.bind(5, k.backend).bind(6, k.params).bind(7, k.source).bind(8, k.time_us);
  s.bind(9, k.eager_us).bind(10, k.speedup).bind(11, k.bandwidth_gbps);
  s.bind(12, k.percent_of_peak).bind(13, k.max_rel_err).bind(14, k.verified);
  s.bind(15, k.parent_id).bind(16, k.card_id).bind(17, k.command).bind(18, k.metrics.dump());
  s.bind(19, k.created_at.empty() ? now_iso8601() : k.created_at);
  s.step();
}

StrategyCard read_card(const Stmt& s) {
  StrategyCard c;
  c.id = s.text(0);
  c.title = s.text(1);
  c.description = s.text(2);
  c.backend = s.text(3);
  c.traits = nlohmann::json::parse(s.text(4), nullptr, false).get<std::vector<std::string>>();
  c.bottlenecks = nlohmann::json::parse(s.text(5), nullptr, false).get<std::vector<std::string>>();
  c.set = nlohmann::json::parse(s.text(6), nullptr, false);
  c.origin = s.text(7);
  return c;
}

}  // namespace

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string default_store_path(const std::string& home) { return home + "/memory.db"; }

std::string store_lock_path(const std::string& db_path) { return db_path + ".lock"; }

FileLock lock_store_exclusive(const std::string& db_path) {
  FileLock lock(store_lock_path(db_path));
  if (!lock.is_open())
    fail(ErrorCategory::kStorage, "{}: cannot open the store's lock file ({})", lock.path(), std::strerror(lock.error()));
  switch (lock.acquire(FileLock::Mode::kExclusive, false)) {
    case FileLock::Outcome::kBusy: return FileLock{};
    case FileLock::Outcome::kFailed:
      fail(ErrorCategory::kStorage, "{}: cannot lock ({})", lock.path(), std::strerror(lock.error()));
    default: return lock;
  }
}

Store::Store(const std::string& path) : path_(path) {
  std::error_code exists_ec;
  // ":memory:" is SQLite's in-memory database, not a file in the working directory
  const bool existed = path != ":memory:" && std::filesystem::exists(path, exists_ec);
  if (exists_ec && exists_ec != std::errc::no_such_file_or_directory)
    fail(ErrorCategory::kStorage, "memory store {}: cannot look at it ({})", path, exists_ec.message());
  // The shared lock that keeps `memory reset` from moving the file while this store writes it
  // (waits while a reset holds it: a rename). Where no lock file can be made (a read-only
  // directory) the store cannot write there either; SQLite's open below reports that.
  if (path != ":memory:") {
    lock_ = FileLock(store_lock_path(path));
    const auto got = lock_.acquire(FileLock::Mode::kShared, true, [&] {
      spdlog::info("memory store {}: waiting for `thrive memory reset` (it holds {})", path, lock_.path());
    });
    if (got == FileLock::Outcome::kFailed) {
      // Said unless the store's directory is not writable (SQLite's open below fails there too,
      // and its one error line says why): a link or directory planted at the name, a lock file
      // no one may read
      const auto dir = std::filesystem::path(path).parent_path();
      const int err = lock_.error();
      if (access(dir.empty() ? "." : dir.c_str(), W_OK) == 0)
        spdlog::warn("memory store {}: cannot take its lock {} ({}); a `thrive memory reset` meanwhile would not see "
                     "this process", path, lock_.path(), std::strerror(err));
      lock_.release();
    }
  }
  int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    fail(ErrorCategory::kStorage, "memory store {}: cannot open ({}); expected a writable path",
         path, msg);
  }
  sqlite3_busy_timeout(db_, 30000);
  try {
    // A foreign or corrupt file is refused before anything is written to it.
    const auto [app_id, tables] = identify();
    if (existed && tables > 0 && app_id != kApplicationId) refuse_foreign(app_id);
    // Switching to WAL takes an exclusive lock; several processes opening a new
    // store at once contend for it, and SQLite does not always call the busy
    // handler here, so retry for as long as the busy timeout would have waited.
    for (int attempt = 0;; ++attempt) {
      char* err = nullptr;
      const int wal = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, &err);
      sqlite3_free(err);
      if (wal == SQLITE_OK) break;
      if ((wal != SQLITE_BUSY && wal != SQLITE_LOCKED) || attempt >= 3000)
        fail(ErrorCategory::kStorage, "memory store {}: cannot enable WAL ({})", path,
             sqlite3_errmsg(db_));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    exec("PRAGMA synchronous=NORMAL");
    exec("PRAGMA foreign_keys=ON");
    // Check-and-create under one write lock: of several processes that found
    // the file empty, exactly one creates the schema and the others see it.
    exec("BEGIN IMMEDIATE");
    try {
      const auto [locked_app_id, locked_tables] = identify();
      if (locked_tables == 0) {
        exec(kSchema);
        exec("PRAGMA application_id=" + std::to_string(kApplicationId));
        exec("PRAGMA user_version=" + std::to_string(kSchemaVersion));
      } else {
        if (locked_app_id != kApplicationId) refuse_foreign(locked_app_id);
        Stmt s(db_, "PRAGMA user_version", path_);
        int version = s.step() ? int(s.integer(0)) : 0;
        if (version > kSchemaVersion)
          fail(ErrorCategory::kStorage,
               "memory store {}: schema version {} is newer than this thrive understands ({}); "
               "left untouched",
               path, version, kSchemaVersion);
        exec(kSchema);  // every statement is IF NOT EXISTS: adds tables newer releases brought
      }
      // this memory's id, the origin of its own evidence in exports (random, made once)
      exec("INSERT OR IGNORE INTO meta(key, value) VALUES('store_id', lower(hex(randomblob(16))))");
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  } catch (const Error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    std::string what = e.what();
    if (what.find("file is not a database") != std::string::npos)
      fail(ErrorCategory::kStorage,
           "memory store {}: not a SQLite database (corrupted or foreign file); left untouched — "
           "move it aside or point THRIVE_HOME elsewhere",
           path);
    throw;
  }
}

namespace {
// Tables no reading command reads (the agents' attempt details): a memory made before they
// existed is still read as it is by the read-only open, and gets them at its next read-write open.
constexpr const char* kReaderOptionalTables[] = {"attempt_measure"};
// The tables kSchema creates that the reading commands need, read from its text ("CREATE TABLE IF
// NOT EXISTS name(") less kReaderOptionalTables, as a quoted SQL list and a count.
const std::vector<std::string>& schema_tables() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    const std::regex re(R"(CREATE TABLE IF NOT EXISTS (\w+)\()");
    const std::string schema = kSchema;
    for (auto it = std::sregex_iterator(schema.begin(), schema.end(), re); it != std::sregex_iterator(); ++it)
      if (std::find(std::begin(kReaderOptionalTables), std::end(kReaderOptionalTables), (*it)[1].str()) ==
          std::end(kReaderOptionalTables))
        out.push_back((*it)[1]);
    return out;
  }();
  return names;
}
std::string schema_table_list() {
  std::string list;
  for (const auto& n : schema_tables()) list += (list.empty() ? "'" : ",'") + n + "'";
  return list;
}
int64_t schema_table_count() { return int64_t(schema_tables().size()); }
// "file:" URI of `path` with `query` (SQLite's URI filenames: %-escapes for everything but
// unreserved characters and '/').
std::string sqlite_uri(const std::string& path, const std::string& query) {
  std::string out = "file:";
  for (const unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') out += char(c);
    else out += fmt::format("%{:02X}", unsigned(c));
  }
  return out + "?" + query;
}
}  // namespace

std::unique_ptr<Store> Store::open_read_only(const std::string& path, ReadOpen& how) {
  std::unique_ptr<Store> s(new Store());
  s->path_ = path;
  const auto refuse = [&](const std::string& why) {
    fail(ErrorCategory::kStorage, "memory store {}: {}; left untouched", path, why);
  };
  // Read-write without create (SQLite falls back to read-only where the file is not writable),
  // with query_only so no statement writes: a connection opened read-only cannot remove the WAL
  // index (-shm) and log (-wal) of a WAL memory when it closes, and left them behind, owned by
  // the reader; this one, as the last connection, checkpoints and removes them like any writer.
  // A file this process may not write (another user's, or mode 444) would be opened read-only,
  // and such a connection creates a WAL memory's -shm and -wal as this user and cannot remove
  // them: they then block the owner's writes. With no -shm there, no connection is open and the
  // WAL is checkpointed into the file, so the file alone is the memory: read it as immutable
  // (no locks, no side files). A writer that starts during the read is the one case it can
  // misread (reported as an error, never written). The same where the file is writable but its
  // directory is not (a read-only mount, another user's directory): there SQLite could not
  // create the WAL index and failed with "attempt to write a readonly database".
  std::error_code ec;
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const bool writable = access(path.c_str(), W_OK) == 0 && access(dir.empty() ? "." : dir.c_str(), W_OK) == 0;
  const bool immutable = !writable && !std::filesystem::exists(path + "-shm", ec);
  const int rc = immutable ? sqlite3_open_v2(sqlite_uri(path, "immutable=1").c_str(), &s->db_,
                                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr)
                           : sqlite3_open_v2(path.c_str(), &s->db_, SQLITE_OPEN_READWRITE, nullptr);
  if (rc != SQLITE_OK)
    refuse(fmt::format("cannot open for reading ({})", s->db_ ? sqlite3_errmsg(s->db_) : "out of memory"));
  sqlite3_busy_timeout(s->db_, 30000);
  s->exec("PRAGMA query_only=ON");
  try {
    const auto [app_id, tables] = s->identify();
    if (tables == 0) {
      how = ReadOpen::kNoMemory;
      return nullptr;
    }
    if (app_id != kApplicationId) s->refuse_foreign(app_id);
    Stmt v(s->db_, "PRAGMA user_version", path);
    const int version = v.step() ? int(v.integer(0)) : 0;
    if (version > kSchemaVersion)
      refuse(fmt::format("schema version {} is newer than this thrive understands ({})", version, kSchemaVersion));
    // every table of the current schema present: otherwise the read-write open adds the missing
    // ones (IF NOT EXISTS), as for any older memory
    Stmt t(s->db_, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN (" + schema_table_list() + ")", path);
    how = version == kSchemaVersion && t.step() && t.integer(0) == schema_table_count() ? ReadOpen::kOpened
                                                                                          : ReadOpen::kOlderSchema;
  } catch (const Error& e) {
    if (std::string(e.what()).find("file is not a database") != std::string::npos)
      refuse("not a SQLite database (corrupted or foreign file) — move it aside or point THRIVE_HOME elsewhere");
    throw;
  }
  if (how != ReadOpen::kOpened) return nullptr;
  return s;
}

std::pair<int, int> Store::identify() {
  // One statement, so both figures come from the same snapshot even while
  // another process is creating the schema.
  Stmt s(db_,
         "SELECT (SELECT application_id FROM pragma_application_id()), "
         "(SELECT count(*) FROM sqlite_master)",
         path_);
  if (!s.step()) return {0, 0};
  return {int(s.integer(0)), int(s.integer(1))};
}

void Store::refuse_foreign(int app_id) const {
  fail(ErrorCategory::kStorage,
       "memory store {}: a SQLite database of another application (application_id {:#x}, "
       "expected {:#x}); left untouched — point THRIVE_HOME elsewhere or move it aside",
       path_, app_id, kApplicationId);
}

Store::~Store() {
  if (db_) sqlite3_close(db_);
}

void Store::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    fail(ErrorCategory::kStorage, "memory store {}: {}", path_, msg);
  }
}

std::optional<double> Store::peak_bandwidth_gbps(const std::string& device_key) {
  Stmt s(db_, "SELECT peak_bw_gbps FROM devices WHERE device_key=?", path_);
  s.bind(1, device_key);
  if (s.step()) return s.real(0);
  return std::nullopt;
}

void Store::set_peak_bandwidth_gbps(const std::string& device_key, double gbps) {
  Stmt s(db_, "INSERT OR REPLACE INTO devices(device_key, peak_bw_gbps, measured_at) VALUES(?,?,?)",
         path_);
  s.bind(1, device_key).bind(2, gbps).bind(3, now_iso8601());
  s.step();
}

bool Store::add_card(const StrategyCard& c) {
  Stmt s(db_,
         "INSERT OR IGNORE INTO cards(id, title, description, backend, traits, bottlenecks, "
         "set_params, origin, created_at) VALUES(?,?,?,?,?,?,?,?,?)",
         path_);
  s.bind(1, c.id).bind(2, c.title).bind(3, c.description).bind(4, c.backend);
  s.bind(5, nlohmann::json(c.traits).dump()).bind(6, nlohmann::json(c.bottlenecks).dump());
  s.bind(7, c.set.dump()).bind(8, c.origin).bind(9, now_iso8601());
  s.step();
  return sqlite3_changes(db_) > 0;
}

std::vector<StrategyCard> Store::cards(const std::string& backend) {
  Stmt s(db_,
         "SELECT id, title, description, backend, traits, bottlenecks, set_params, origin FROM "
         "cards WHERE ?='' OR backend=? ORDER BY id",
         path_);
  s.bind(1, backend).bind(2, backend);
  std::vector<StrategyCard> out;
  while (s.step()) out.push_back(read_card(s));
  return out;
}

// This memory's own evidence and what imports brought from other memories (one snapshot per
// origin), summed per (card, op, shape class, backend).
std::vector<CardEvidence> Store::evidence(const std::string& card_id) {
  Stmt s(db_,
         "SELECT card_id, op, shape_class, backend, min(sum(successes), 2147483647), "
         "min(sum(failures), 2147483647), sum(sum_log_gain), "
         "max(best_gain), max(coalesce(last_seen, '')) FROM (SELECT card_id, op, shape_class, backend, successes, "
         "failures, sum_log_gain, best_gain, last_seen FROM card_evidence UNION ALL SELECT card_id, op, shape_class, "
         "backend, successes, failures, sum_log_gain, best_gain, last_seen FROM imported_evidence) "
         "WHERE ?='' OR card_id=? GROUP BY card_id, op, shape_class, backend ORDER BY card_id, op, shape_class, backend",
         path_);
  s.bind(1, card_id).bind(2, card_id);
  std::vector<CardEvidence> out;
  while (s.step())
    out.push_back({s.text(0), s.text(1), s.text(2), s.text(3), int(s.integer(4)),
                   int(s.integer(5)), s.real(6), s.real(7), s.text(8)});
  return out;
}

void Store::record_card_outcome(const std::string& card_id, const std::string& op,
                                const std::string& shape_class, const std::string& backend,
                                bool success, double gain) {
  Stmt s(db_,
         "INSERT INTO card_evidence(card_id, op, shape_class, backend, successes, failures, "
         "sum_log_gain, best_gain, last_seen) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9) "
         "ON CONFLICT(card_id, op, shape_class, backend) DO UPDATE SET "
         "successes=successes+?5, failures=failures+?6, sum_log_gain=sum_log_gain+?7, "
         "best_gain=max(best_gain, ?8), last_seen=?9",
         path_);
  s.bind(1, card_id).bind(2, op).bind(3, shape_class).bind(4, backend);
  s.bind(5, success ? 1 : 0).bind(6, success ? 0 : 1);
  s.bind(7, gain > 0 ? std::log(gain) : 0.0).bind(8, gain).bind(9, now_iso8601());
  s.step();
}

bool Store::record_kernel(const KernelRecord& k, bool may_become_best, const std::string& replaces) {
  if (k.verified && !(std::isfinite(k.time_us) && k.time_us > 0))
    fail(ErrorCategory::kInput, "memory store {}: kernel {} has time {} us; expected a positive, "
         "finite time for a verified kernel", path_, k.kernel_id, k.time_us);
  Transaction tx(db_);
  {
    // Ids carry a 64-bit hash of the source; should two sources still share one, the
    // stored kernel is kept rather than silently replaced by another program.
    Stmt same(db_, "SELECT source FROM kernels WHERE kernel_id=? AND shape_class=? AND device_key=?",
              path_);
    same.bind(1, k.kernel_id).bind(2, k.shape_class).bind(3, k.device_key);
    if (same.step() && same.text(0) != k.source)
      fail(ErrorCategory::kInput,
           "memory store {}: kernel id {} already names a different source; kept the stored one",
           path_, k.kernel_id);
  }
  KernelRecord marked;  // a row that may not be best says so, for demote_kernel too
  if (!may_become_best) {
    marked = k;
    if (!marked.metrics.is_object()) marked.metrics = nlohmann::json::object();
    marked.metrics["best_eligible"] = false;
  }
  insert_kernel(db_, path_, may_become_best ? k : marked, "INSERT OR REPLACE");
  bool became_best = false;
  if (may_become_best && k.verified && k.time_us > 0) {
    Stmt cur(db_,
             "SELECT k.time_us, k.kernel_id FROM best b JOIN kernels k ON k.kernel_id=b.kernel_id "
             "AND k.shape_class=b.shape_class AND k.device_key=b.device_key "
             "WHERE b.op=? AND b.shape_class=? AND b.device_key=?",
             path_);
    cur.bind(1, k.op).bind(2, k.shape_class).bind(3, k.device_key);
    // The best's own row may have just been re-measured; compare against stored times, unless
    // the caller timed this kernel beside the best and found it faster.
    became_best = !cur.step() || k.time_us < cur.real(0) || cur.text(1) == k.kernel_id ||
                  (!replaces.empty() && cur.text(1) == replaces);
    if (became_best) {
      Stmt s(db_, "INSERT OR REPLACE INTO best(op, shape_class, device_key, kernel_id) VALUES(?,?,?,?)",
             path_);
      s.bind(1, k.op).bind(2, k.shape_class).bind(3, k.device_key).bind(4, k.kernel_id);
      s.step();
    }
  }
  tx.commit();
  return became_best;
}

bool Store::demote_kernel(const std::string& kernel_id, const std::string& shape_class,
                          const std::string& device_key) {
  Transaction tx(db_);
  std::string op;
  {
    Stmt s(db_, "SELECT op FROM kernels WHERE kernel_id=? AND shape_class=? AND device_key=?", path_);
    s.bind(1, kernel_id).bind(2, shape_class).bind(3, device_key);
    if (!s.step()) return false;  // nothing stored under that key
    op = s.text(0);
  }
  {
    Stmt s(db_, "UPDATE kernels SET verified=0 WHERE kernel_id=? AND shape_class=? AND device_key=?", path_);
    s.bind(1, kernel_id).bind(2, shape_class).bind(3, device_key);
    s.step();
  }
  bool changed = false;
  {
    Stmt s(db_, "SELECT 1 FROM best WHERE op=? AND shape_class=? AND device_key=? AND kernel_id=?", path_);
    s.bind(1, op).bind(2, shape_class).bind(3, device_key).bind(4, kernel_id);
    changed = s.step();
  }
  if (changed) {
    Stmt del(db_, "DELETE FROM best WHERE op=? AND shape_class=? AND device_key=?", path_);
    del.bind(1, op).bind(2, shape_class).bind(3, device_key);
    del.step();
    Stmt next(db_,
              "INSERT INTO best(op, shape_class, device_key, kernel_id) SELECT op, shape_class, device_key, "
              "kernel_id FROM kernels WHERE op=? AND shape_class=? AND device_key=? AND verified=1 AND "
              "time_us > 0 AND COALESCE(json_extract(metrics, '$.best_eligible'), 1) != 0 "
              "ORDER BY time_us LIMIT 1",
              path_);
    next.bind(1, op).bind(2, shape_class).bind(3, device_key);
    next.step();
  }
  tx.commit();
  return changed;
}

std::optional<KernelRecord> Store::best(const std::string& op, const std::string& shape_class,
                                        const std::string& device_key) {
  Stmt s(db_, std::string("SELECT ") + kKernelColumns +
                  " FROM kernels WHERE (kernel_id, shape_class, device_key) IN (SELECT kernel_id, "
                  "shape_class, device_key FROM best WHERE op=? AND shape_class=? AND device_key=?)",
         path_);
  s.bind(1, op).bind(2, shape_class).bind(3, device_key);
  if (s.step()) return read_kernel(s);
  return std::nullopt;
}

std::vector<KernelRecord> Store::leaderboard(const std::string& device_key) {
  Stmt s(db_, std::string("SELECT ") + kKernelColumns +
                  " FROM kernels WHERE (kernel_id, shape_class, device_key) IN (SELECT kernel_id, "
                  "shape_class, device_key FROM best WHERE ?='' OR device_key=?) "
                  "ORDER BY op, time_us",
         path_);
  s.bind(1, device_key).bind(2, device_key);
  std::vector<KernelRecord> out;
  while (s.step()) out.push_back(read_kernel(s));
  return out;
}

std::vector<KernelRecord> Store::kernels(const std::string& op) {
  Stmt s(db_, std::string("SELECT ") + kKernelColumns +
                  " FROM kernels WHERE ?='' OR op=? ORDER BY created_at DESC, op",
         path_);
  s.bind(1, op).bind(2, op);
  std::vector<KernelRecord> out;
  while (s.step()) out.push_back(read_kernel(s));
  return out;
}

int64_t Store::begin_run(const std::string& command, const std::string& device_key,
                         const std::string& agent) {
  Stmt s(db_, "INSERT INTO runs(command, device_key, agent, started_at) VALUES(?,?,?,?)", path_);
  s.bind(1, command).bind(2, device_key).bind(3, agent).bind(4, now_iso8601());
  s.step();
  return sqlite3_last_insert_rowid(db_);
}

void Store::record_system_change(const SystemChange& c) {
  Stmt s(db_,
         "INSERT INTO system_changes(system_key, device_key, metric, stage, specialist, change, config_before, "
         "config_after, t_before, t_after, accepted, verdict, created_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
         path_);
  s.bind(1, c.system_key).bind(2, c.device_key).bind(3, c.metric).bind(4, c.stage).bind(5, c.specialist);
  s.bind(6, c.change).bind(7, c.config_before).bind(8, c.config_after).bind(9, c.t_before).bind(10, c.t_after);
  s.bind(11, int64_t(c.accepted ? 1 : 0)).bind(12, c.verdict).bind(13, now_iso8601());
  s.step();
}

std::vector<SystemChange> Store::system_changes(const std::string& system_key) {
  Stmt s(db_,
         "SELECT system_key, device_key, metric, stage, specialist, change, config_before, config_after, t_before, "
         "t_after, accepted, verdict, created_at FROM system_changes WHERE ?1='' OR system_key=?1 ORDER BY id",
         path_);
  s.bind(1, system_key);
  std::vector<SystemChange> out;
  while (s.step()) {
    SystemChange c;
    c.system_key = s.text(0), c.device_key = s.text(1), c.metric = s.text(2), c.stage = s.text(3);
    c.specialist = s.text(4), c.change = s.text(5), c.config_before = s.text(6), c.config_after = s.text(7);
    c.t_before = s.real(8), c.t_after = s.real(9), c.accepted = s.integer(10) != 0, c.verdict = s.text(11);
    c.created_at = s.text(12);
    out.push_back(std::move(c));
  }
  return out;
}

void Store::set_best_system(const std::string& system_key, const std::string& device_key, const std::string& metric,
                            const std::string& config) {
  Stmt s(db_, "INSERT OR REPLACE INTO system_best(system_key, device_key, metric, config, updated_at) VALUES(?,?,?,?,?)",
         path_);
  s.bind(1, system_key).bind(2, device_key).bind(3, metric).bind(4, config).bind(5, now_iso8601());
  s.step();
}

std::string Store::best_system(const std::string& system_key, const std::string& device_key, const std::string& metric) {
  Stmt s(db_, "SELECT config FROM system_best WHERE system_key=? AND device_key=? AND metric=?", path_);
  s.bind(1, system_key).bind(2, device_key).bind(3, metric);
  return s.step() ? s.text(0) : std::string();
}

void Store::end_run(int64_t run_id) {
  Stmt s(db_, "UPDATE runs SET finished_at=? WHERE run_id=?", path_);
  s.bind(1, now_iso8601()).bind(2, run_id);
  s.step();
}

void Store::record_attempt(const Attempt& a) {
  Transaction tx(db_);
  Stmt s(db_,
         "INSERT INTO attempts(run_id, op, shape_class, device_key, pass, round, phase, kernel_id, "
         "card_id, change, status, time_us, speedup, notes, created_at) "
         "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
         path_);
  s.bind(1, a.run_id).bind(2, a.op).bind(3, a.shape_class).bind(4, a.device_key);
  s.bind(5, a.pass).bind(6, a.round).bind(7, a.phase).bind(8, a.kernel_id).bind(9, a.card_id);
  s.bind(10, a.change).bind(11, a.status).bind(12, a.time_us).bind(13, a.speedup);
  s.bind(14, a.notes).bind(15, now_iso8601());
  s.step();
  if (a.footing != 0) {
    Stmt f(db_, "INSERT INTO attempt_measure(attempt_id, footing, timing_verdict) VALUES(?,?,?)", path_);
    f.bind(1, int64_t(sqlite3_last_insert_rowid(db_))).bind(2, a.footing).bind(3, a.timing_verdict);
    f.step();
  }
  tx.commit();
}

std::vector<Attempt> Store::trajectory(int64_t run_id, const std::string& op,
                                       const std::string& shape_class,
                                       const std::string& device_key) {
  Stmt s(db_,
         "SELECT run_id, op, shape_class, device_key, pass, round, phase, kernel_id, card_id, "
         "change, status, time_us, speedup, notes, created_at, coalesce(m.footing, 0), "
         "coalesce(m.timing_verdict, 0) FROM attempts LEFT JOIN attempt_measure m ON m.attempt_id = "
         "attempts.id WHERE (?1=0 OR "
         "run_id=?1) AND op=?2 AND shape_class=?3 AND device_key=?4 ORDER BY attempts.id",
         path_);
  s.bind(1, run_id).bind(2, op).bind(3, shape_class).bind(4, device_key);
  std::vector<Attempt> out;
  while (s.step())
    out.push_back({s.integer(0), s.text(1), s.text(2), s.text(3), int(s.integer(4)),
                   int(s.integer(5)), s.text(6), s.text(7), s.text(8), s.text(9), s.text(10),
                   s.real(11), s.real(12), s.text(13), s.text(14), int(s.integer(15)), s.integer(16) != 0});
  return out;
}

nlohmann::json Store::summary() {
  auto count = [&](const char* table) {
    Stmt s(db_, std::string("SELECT count(*) FROM ") + table, path_);
    return s.step() ? s.integer(0) : 0;
  };
  nlohmann::json devices = nlohmann::json::array();
  Stmt s(db_, "SELECT device_key, peak_bw_gbps, measured_at FROM devices ORDER BY device_key", path_);
  while (s.step())
    devices.push_back({{"device", s.text(0)}, {"peak_bw_gbps", s.real(1)}, {"measured_at", s.text(2)}});
  return {{"path", path_},           {"cards", count("cards")},
          {"evidence_rows", int64_t(evidence().size())}, {"kernels", count("kernels")},
          {"best_entries", count("best")}, {"runs", count("runs")},
          {"attempts", count("attempts")}, {"devices", devices}};
}

nlohmann::json Store::export_json() {
  nlohmann::json doc = {{"format", "thrive-memory"}, {"version", kSchemaVersion},
                        {"exported_at", now_iso8601()}};
  doc["cards"] = cards();
  // Evidence per origin: this memory's own rows under its store id, and the snapshots imports
  // brought under theirs, so that an import elsewhere (or back here) replaces what it already has
  // from an origin instead of adding it again.
  nlohmann::json ev = nlohmann::json::array();
  {
    Stmt s(db_,
           "SELECT (SELECT value FROM meta WHERE key='store_id'), card_id, op, shape_class, backend, successes, "
           "failures, sum_log_gain, best_gain, coalesce(last_seen, '') FROM card_evidence UNION ALL SELECT origin, "
           "card_id, op, shape_class, backend, successes, failures, sum_log_gain, best_gain, coalesce(last_seen, '') "
           "FROM imported_evidence ORDER BY 2, 3, 4, 5, 1",
           path_);
    while (s.step())
      ev.push_back({{"origin", s.text(0)}, {"card_id", s.text(1)}, {"op", s.text(2)}, {"shape_class", s.text(3)},
                    {"backend", s.text(4)}, {"successes", s.integer(5)}, {"failures", s.integer(6)},
                    {"sum_log_gain", s.real(7)}, {"best_gain", s.real(8)}, {"last_seen", s.text(9)}});
  }
  doc["evidence"] = ev;
  doc["kernels"] = kernels();
  nlohmann::json best_rows = nlohmann::json::array();
  for (const auto& k : leaderboard()) best_rows.push_back({{"op", k.op}, {"shape_class", k.shape_class},
                                                           {"device_key", k.device_key}, {"kernel_id", k.kernel_id}});
  doc["best"] = best_rows;
  nlohmann::json devices = nlohmann::json::array();
  Stmt s(db_, "SELECT device_key, peak_bw_gbps, measured_at FROM devices", path_);
  while (s.step())
    devices.push_back({{"device_key", s.text(0)}, {"peak_bw_gbps", s.real(1)}, {"measured_at", s.text(2)}});
  doc["devices"] = devices;
  // The outer loop's record: every change tried and the best system per model, device, metric
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : system_changes())
    changes.push_back({{"system_key", c.system_key}, {"device_key", c.device_key}, {"metric", c.metric},
                       {"stage", c.stage}, {"specialist", c.specialist}, {"change", c.change},
                       {"config_before", c.config_before}, {"config_after", c.config_after}, {"t_before", c.t_before},
                       {"t_after", c.t_after}, {"accepted", c.accepted}, {"verdict", c.verdict},
                       {"created_at", c.created_at}});
  doc["system_changes"] = changes;
  nlohmann::json best_systems = nlohmann::json::array();
  Stmt b(db_, "SELECT system_key, device_key, metric, config, updated_at FROM system_best ORDER BY system_key", path_);
  while (b.step())
    best_systems.push_back({{"system_key", b.text(0)}, {"device_key", b.text(1)}, {"metric", b.text(2)},
                            {"config", b.text(3)}, {"updated_at", b.text(4)}});
  doc["system_best"] = best_systems;
  return doc;
}

// A malformed evidence, best or device entry is found only while writing; the transaction
// has rolled back by the time the handler runs, so a failed import changes nothing and
// reports kInput, naming the entry (`where`: "kernels[3]").
ImportSummary Store::import_json(const nlohmann::json& doc) {
  std::string where = "the document";
  try {
    return import_entries(doc, where);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCategory::kInput, "import: {}: malformed entry: {}", where, e.what());
  }
}

ImportSummary Store::import_entries(const nlohmann::json& doc, std::string& where) {
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "thrive-memory")
    fail(ErrorCategory::kInput, "import: 'format' is {}: expected \"thrive-memory\"",
         doc.is_object() ? (doc.contains("format") ? json_excerpt(doc["format"]) : std::string("missing"))
                         : std::string("(not an object)"));
  // each section an array (absent: empty), each entry named while it is read
  const auto section = [&doc](const char* name) {
    const auto v = doc.value(name, nlohmann::json::array());
    if (!v.is_array()) fail(ErrorCategory::kInput, "import: '{}' is {}: expected an array", name, json_excerpt(v));
    return v;
  };
  const auto cards = section("cards"), kernels = section("kernels"), best = section("best"),
             evidence = section("evidence"), devices = section("devices"), changes = section("system_changes"),
             best_systems = section("system_best");
  const auto at = [&where](const char* name, size_t i) { where = fmt::format("{}[{}]", name, i); };
  if (doc.contains("version") && doc["version"] != kSchemaVersion)
    fail(ErrorCategory::kInput, "import: version {}: expected {} (an export of this THRIVE's memory)",
         json_excerpt(doc["version"]), kSchemaVersion);
  ImportSummary sum;
  std::vector<StrategyCard> new_cards;
  std::vector<KernelRecord> new_kernels;
  for (size_t i = 0; i < cards.size(); ++i) at("cards", i), new_cards.push_back(cards[i].get<StrategyCard>());
  for (size_t i = 0; i < kernels.size(); ++i) {
    at("kernels", i);
    new_kernels.push_back(kernels[i].get<KernelRecord>());
    const auto& r = new_kernels.back();
    // µs: no kernel launch takes under a nanosecond or over 1,000 s (eager 0: not measured)
    const auto sane = [](double t) { return std::isfinite(t) && t >= 1e-3 && t <= 1e9; };
    if (!sane(r.time_us) || !(r.eager_us == 0 || sane(r.eager_us)))
      fail(ErrorCategory::kInput, "import: {}: kernel {} at {}: time_us={} eager_us={}: expected "
           "times from 0.001 to 1e9 µs (eager_us may be 0)", where, r.kernel_id, r.shape_class, r.time_us, r.eager_us);
    // the derived figures the leaderboard prints: finite, >= 0, and below any real device's
    const auto figure = [&](const char* name, double v, double hi) {
      if (!std::isfinite(v) || v < 0 || v > hi)
        fail(ErrorCategory::kInput, "import: {}: kernel {}: {}={}: expected a finite value in [0, {}]", where,
             r.kernel_id, name, v, hi);
    };
    figure("speedup", r.speedup, 1e6), figure("bandwidth_gbps", r.bandwidth_gbps, 1e6);
    figure("percent_of_peak", r.percent_of_peak, 1e4);
    figure("max_rel_err", r.max_rel_err, std::numeric_limits<double>::max());  // stored non-finite as 1e308
    // ids and op names name archive files: a plain charset and length, no path pieces
    auto plain = [](const std::string& s, size_t max, const char* extra) {
      if (s.empty() || s.size() > max) return false;
      for (char ch : s)
        if (ch == '\0' || (!std::isalnum(static_cast<unsigned char>(ch)) && !std::strchr(extra, ch))) return false;
      return s.find("..") == std::string::npos;
    };
    if (!plain(r.kernel_id, 512, "._=,~+-") || !plain(r.op, 64, "_"))
      fail(ErrorCategory::kInput, "import: kernel id {} of op {}: expected letters, digits and ._=,~+- (at most 512) "
           "and an op name of letters, digits and _", json_excerpt(r.kernel_id), json_excerpt(r.op));
    if (r.source.find("@thrive op:") == std::string::npos || r.source.size() > (16u << 20))
      fail(ErrorCategory::kInput, "import: kernel {}: expected a kernel source with a "
           "'// @thrive op:' line (at most 16 MiB)", r.kernel_id);
    // the record's op is its source's (a mismatch planted a best row under an op no kernel has)
    {
      const size_t at_op = r.source.find("@thrive op:") + std::strlen("@thrive op:");
      const size_t b = r.source.find_first_not_of(" \t", at_op);
      const size_t e = b == std::string::npos ? b : r.source.find_first_of(" \t\r\n", b);
      const std::string source_op = b == std::string::npos ? "" : r.source.substr(b, e == std::string::npos ? e : e - b);
      if (source_op != r.op)
        fail(ErrorCategory::kInput, "import: kernel {}: op {} but its source says '@thrive op: {}'; expected the same op",
             r.kernel_id, json_excerpt(r.op), json_excerpt(source_op));
    }
    // shape classes as THRIVE writes them: NAME=count pairs, each count a positive integer
    {
      bool ok = !r.shape_class.empty() && r.shape_class.size() <= 128;
      for (size_t b = 0; ok && b <= r.shape_class.size();) {
        size_t e = r.shape_class.find(',', b);
        if (e == std::string::npos) e = r.shape_class.size();
        const std::string pair = r.shape_class.substr(b, e - b);
        const size_t eq = pair.find('=');
        ok = eq != std::string::npos && eq > 0 && eq + 1 < pair.size() && eq + 11 >= pair.size() &&
             std::isalpha(static_cast<unsigned char>(pair[0])) &&
             std::all_of(pair.begin(), pair.begin() + long(eq), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }) &&
             std::all_of(pair.begin() + long(eq) + 1, pair.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
             std::stoll(pair.substr(eq + 1)) > 0;
        b = e + 1;
      }
      if (!ok)
        fail(ErrorCategory::kInput, "import: kernel {}: shape {}: expected NAME=count pairs joined by commas, each "
             "count a positive integer (e.g. T=16 or B=1,L=4096)", r.kernel_id, json_excerpt(r.shape_class));
    }
    // THRIVE's ids end in "~<hash>" or "src-<hash>", 16 hex digits of FNV-1a of the source:
    // an id whose source was edited afterwards names another program.
    const auto tail = r.kernel_id.size() >= 17 ? r.kernel_id.substr(r.kernel_id.size() - 17) : std::string();
    const bool hashed = (tail.size() == 17 && tail[0] == '~') ||
                        (r.kernel_id.size() >= 20 && r.kernel_id.compare(r.kernel_id.size() - 20, 4, "src-") == 0);
    if (hashed && r.kernel_id.substr(r.kernel_id.size() - 16) != fnv1a_hex(r.source))
      fail(ErrorCategory::kInput, "import: kernel {}: its source hashes to {}, not to the id's {}; "
           "expected the source the id was made from", r.kernel_id, fnv1a_hex(r.source),
           r.kernel_id.substr(r.kernel_id.size() - 16));
  }
  std::set<std::string> best_ids;
  for (size_t i = 0; i < best.size(); ++i)
    at("best", i), best_ids.insert(best[i].value("kernel_id", "") + "|" + best[i].value("shape_class", "") + "|" +
                                   best[i].value("device_key", ""));
  where = "the document";
  Transaction tx(db_);
  for (const auto& c : new_cards) {
    Stmt s(db_, "SELECT 1 FROM cards WHERE id=?", path_);
    s.bind(1, c.id);
    if (!s.step()) {
      add_card(c);
      ++sum.cards_added;
    }
  }
  for (size_t i = 0; i < evidence.size(); ++i) {
    at("evidence", i);
    const auto& e = evidence[i];
    auto count = [&](const char* key) {
      const auto v = e.value(key, nlohmann::json(0));
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1000000000)
        fail(ErrorCategory::kInput, "import: evidence of card {}: {}={}: expected an integer count 0..1e9",
             json_excerpt(e.value("card_id", nlohmann::json(""))), key, json_excerpt(v));
      return v.get<int64_t>();
    };
    count("successes"), count("failures");
    for (const char* key : {"sum_log_gain", "best_gain"}) {
      const auto v = e.value(key, nlohmann::json(0.0));
      if (!v.is_number() || !std::isfinite(v.get<double>()) || std::abs(v.get<double>()) > 1e6)
        fail(ErrorCategory::kInput, "import: evidence of card {}: {}={}: expected a finite number",
             json_excerpt(e.value("card_id", nlohmann::json(""))), key, json_excerpt(v));
    }
  }
  // Each row is a snapshot of one origin's counts (the exporting memory's store id; for an export
  // without origins, one made from the document's evidence, so re-importing it is still
  // idempotent). This memory's own rows coming back are skipped; another origin's replace the
  // snapshot kept from it when they hold more observations. So importing an export twice, or
  // one that already went A -> B -> A, counts each observation once.
  std::string own_id;
  {
    Stmt id(db_, "SELECT value FROM meta WHERE key='store_id'", path_);
    if (id.step()) own_id = id.text(0);
  }
  // (the digest of the rows in a canonical order: the same rows in another order are the same origin)
  std::vector<std::string> rows;
  for (const auto& e : evidence) rows.push_back(e.dump());
  std::sort(rows.begin(), rows.end());
  std::string joined;
  for (const auto& r : rows) joined += r + "\n";
  const std::string doc_origin = "document:" + fnv1a_hex(joined);
  for (size_t i = 0; i < evidence.size(); ++i) {
    at("evidence", i);
    const auto& e = evidence[i];
    const auto o = e.value("origin", nlohmann::json(""));
    if (!o.is_string() || o.get<std::string>().size() > 200)
      fail(ErrorCategory::kInput, "import: evidence of card {}: origin={}: expected a store id (a string)",
           json_excerpt(e.value("card_id", nlohmann::json(""))), json_excerpt(o));
    const std::string origin = o.get<std::string>().empty() ? doc_origin : o.get<std::string>();
    if (origin == own_id) continue;
    Stmt s(db_,
           "INSERT INTO imported_evidence(origin, card_id, op, shape_class, backend, successes, failures, "
           "sum_log_gain, best_gain, last_seen) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10) "
           "ON CONFLICT(origin, card_id, op, shape_class, backend) DO UPDATE SET "
           "successes=excluded.successes, failures=excluded.failures, sum_log_gain=excluded.sum_log_gain, "
           "best_gain=excluded.best_gain, last_seen=excluded.last_seen "
           "WHERE excluded.successes + excluded.failures > successes + failures",
           path_);
    s.bind(1, origin).bind(2, e.value("card_id", "")).bind(3, e.value("op", "")).bind(4, e.value("shape_class", ""));
    s.bind(5, e.value("backend", "")).bind(6, e.value("successes", 0)).bind(7, e.value("failures", 0));
    s.bind(8, e.value("sum_log_gain", 0.0)).bind(9, e.value("best_gain", 0.0));
    s.bind(10, e.value("last_seen", ""));
    s.step();
    if (sqlite3_changes(db_) > 0) ++sum.evidence_merged;
  }
  for (const auto& k : new_kernels) {
    at("kernels", size_t(&k - new_kernels.data()));
    Stmt exists(db_, "SELECT 1 FROM kernels WHERE kernel_id=? AND shape_class=? AND device_key=?", path_);
    exists.bind(1, k.kernel_id).bind(2, k.shape_class).bind(3, k.device_key);
    if (!exists.step()) {
      insert_kernel(db_, path_, k, "INSERT");
      ++sum.kernels_added;
    }
    if (!best_ids.count(k.kernel_id + "|" + k.shape_class + "|" + k.device_key) || !k.verified)
      continue;
    // Judge by the row as stored: an import never rewrites an existing measurement, so
    // a claimed time for a kernel id already here does not count.
    Stmt stored(db_, "SELECT time_us, verified FROM kernels WHERE kernel_id=? AND shape_class=? "
                "AND device_key=?", path_);
    stored.bind(1, k.kernel_id).bind(2, k.shape_class).bind(3, k.device_key);
    if (!stored.step() || stored.integer(1) == 0) continue;
    const double time_us = stored.real(0);
    Stmt cur(db_,
             "SELECT k.time_us FROM best b JOIN kernels k ON k.kernel_id=b.kernel_id AND "
             "k.shape_class=b.shape_class AND k.device_key=b.device_key WHERE b.op=? AND "
             "b.shape_class=? AND b.device_key=?",
             path_);
    cur.bind(1, k.op).bind(2, k.shape_class).bind(3, k.device_key);
    const bool had_best = cur.step();
    if (!had_best || time_us < cur.real(0)) {
      Stmt s(db_, "INSERT OR REPLACE INTO best(op, shape_class, device_key, kernel_id) VALUES(?,?,?,?)",
             path_);
      s.bind(1, k.op).bind(2, k.shape_class).bind(3, k.device_key).bind(4, k.kernel_id);
      s.step();
      ++(had_best ? sum.best_replaced : sum.best_added);
    } else {
      ++sum.best_kept;
    }
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    at("devices", i);
    const auto& d = devices[i];
    if (peak_bandwidth_gbps(d.value("device_key", ""))) continue;
    const auto bw_json = d.value("peak_bw_gbps", nlohmann::json());
    const double bw = bw_json.is_number() ? bw_json.get<double>() : 0.0;
    if (!(bw >= 0.1 && bw <= 1e6))  // GB/s: from a slow core's cache-less copy to far past any HBM
      fail(ErrorCategory::kInput, "import: device {}: peak_bw_gbps {}: expected a measured copy bandwidth in "
           "[0.1, 1e6] GB/s", d.value("device_key", "").substr(0, 80), json_excerpt(bw_json));
    Stmt s(db_, "INSERT INTO devices(device_key, peak_bw_gbps, measured_at) VALUES(?,?,?)", path_);
    s.bind(1, d.value("device_key", "")).bind(2, bw);
    s.bind(3, d.value("measured_at", now_iso8601()));
    s.step();
  }
  // The outer loop's record: short strings, configurations that are JSON objects, finite T.
  auto text = [](const nlohmann::json& e, const char* k, size_t max) {
    const std::string v = e.at(k).get<std::string>();
    if (v.size() > max || v.find('\0') != std::string::npos)
      fail(ErrorCategory::kInput, "import: system entry: '{}' is {} bytes or holds NUL; at most {}", k, v.size(), max);
    return v;
  };
  auto config = [&](const nlohmann::json& e, const char* k) {
    const std::string v = text(e, k, 4096);
    if (!parse_json_bounded(v).is_object())
      fail(ErrorCategory::kInput, "import: system entry: '{}' is {}: expected a JSON object", k, json_excerpt(v));
    return v;
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    at("system_changes", i);
    const auto& c = changes[i];
    SystemChange r;
    r.system_key = text(c, "system_key", 512), r.device_key = text(c, "device_key", 512), r.metric = text(c, "metric", 64);
    r.stage = text(c, "stage", 128), r.specialist = text(c, "specialist", 64), r.change = text(c, "change", 4096);
    r.config_before = config(c, "config_before"), r.config_after = config(c, "config_after");
    r.t_before = c.at("t_before").get<double>(), r.t_after = c.at("t_after").get<double>();
    r.accepted = c.at("accepted").get<bool>(), r.verdict = text(c, "verdict", 8192);
    if (!std::isfinite(r.t_before) || !std::isfinite(r.t_after) || r.t_before < 0 || r.t_after < 0)
      fail(ErrorCategory::kInput, "import: system change {}: T {} -> {}: expected finite values >= 0", r.change.substr(0, 80),
           r.t_before, r.t_after);
    Stmt dup(db_, "SELECT 1 FROM system_changes WHERE system_key=? AND device_key=? AND metric=? AND config_before=? "
                  "AND config_after=?", path_);
    dup.bind(1, r.system_key).bind(2, r.device_key).bind(3, r.metric).bind(4, r.config_before).bind(5, r.config_after);
    if (!dup.step()) record_system_change(r);  // re-importing the same export adds nothing
  }
  for (size_t i = 0; i < best_systems.size(); ++i) {
    at("system_best", i);
    const auto& b = best_systems[i];
    const std::string key = text(b, "system_key", 512), dev = text(b, "device_key", 512), metric = text(b, "metric", 64);
    const std::string cfg = config(b, "config");
    if (best_system(key, dev, metric).empty()) set_best_system(key, dev, metric, cfg);  // this memory's own best wins
  }
  tx.commit();
  return sum;
}

void to_json(nlohmann::json& j, const StrategyCard& c) {
  j = {{"id", c.id},         {"title", c.title},   {"description", c.description},
       {"backend", c.backend}, {"traits", c.traits}, {"bottlenecks", c.bottlenecks},
       {"set", c.set},       {"origin", c.origin}};
}

void from_json(const nlohmann::json& j, StrategyCard& c) {
  c.id = j.at("id").get<std::string>();
  c.title = j.at("title").get<std::string>();
  c.description = j.value("description", "");
  c.backend = j.at("backend").get<std::string>();
  c.traits = j.at("traits").get<std::vector<std::string>>();
  c.bottlenecks = j.value("bottlenecks", std::vector<std::string>{});
  c.set = j.at("set");
  if (!c.set.is_object()) throw nlohmann::json::type_error::create(302, "card 'set' must be an object", &j);
  c.origin = j.value("origin", "imported");
}

void to_json(nlohmann::json& j, const KernelRecord& k) {
  j = {{"kernel_id", k.kernel_id}, {"op", k.op}, {"shape", k.shape_class},
       {"device", k.device_key}, {"backend", k.backend}, {"params", k.params},
       {"source", k.source}, {"time_us", k.time_us}, {"eager_us", k.eager_us},
       {"speedup_vs_eager", k.speedup}, {"bandwidth_gbps", k.bandwidth_gbps},
       {"percent_of_peak", k.percent_of_peak}, {"max_rel_err", k.max_rel_err},
       {"verified", k.verified}, {"parent_id", k.parent_id}, {"card_id", k.card_id},
       {"command", k.command}, {"metrics", k.metrics}, {"created_at", k.created_at}};
}

void from_json(const nlohmann::json& j, KernelRecord& k) {
  k.kernel_id = j.at("kernel_id").get<std::string>();
  k.op = j.at("op").get<std::string>();
  k.shape_class = j.at("shape").get<std::string>();
  k.device_key = j.at("device").get<std::string>();
  k.backend = j.at("backend").get<std::string>();
  k.params = j.value("params", "");
  k.source = j.at("source").get<std::string>();
  k.time_us = j.at("time_us").get<double>();
  k.eager_us = j.value("eager_us", 0.0);
  k.speedup = j.value("speedup_vs_eager", 0.0);
  k.bandwidth_gbps = j.value("bandwidth_gbps", 0.0);
  k.percent_of_peak = j.value("percent_of_peak", 0.0);
  k.max_rel_err = j.value("max_rel_err", 0.0);
  k.verified = j.value("verified", false);
  k.parent_id = j.value("parent_id", "");
  k.card_id = j.value("card_id", "");
  k.command = j.value("command", "");
  k.metrics = j.value("metrics", nlohmann::json::object());
  k.created_at = j.value("created_at", "");
}

void to_json(nlohmann::json& j, const CardEvidence& e) {
  j = {{"card_id", e.card_id}, {"op", e.op}, {"shape_class", e.shape_class},
       {"backend", e.backend}, {"successes", e.successes}, {"failures", e.failures},
       {"sum_log_gain", e.sum_log_gain}, {"best_gain", e.best_gain}, {"last_seen", e.last_seen}};
}

void to_json(nlohmann::json& j, const Attempt& a) {
  j = {{"run_id", a.run_id}, {"op", a.op}, {"shape", a.shape_class}, {"pass", a.pass},
       {"round", a.round}, {"phase", a.phase}, {"kernel_id", a.kernel_id},
       {"card_id", a.card_id}, {"change", a.change}, {"status", a.status},
       {"time_us", a.time_us}, {"speedup", a.speedup}, {"notes", a.notes},
       {"created_at", a.created_at}};
}

}  // namespace thrive::memory
