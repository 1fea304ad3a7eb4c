// Long- and short-term memory in one SQLite database ($THRIVE_HOME/memory.db).
//
// Long-term: strategy cards with per-(op, shape class, backend) evidence; the kernel
// library (every verified measurement, and the best kernel per op x shape class x
// device); measured device ceilings. Short-term: the runs and their attempts (the
// trajectory an agent reads back). WAL journaling and a busy timeout let several
// `thrive optimize` processes share one store; every write is one transaction, so a
// killed process leaves every committed row intact.
//
// The file is stamped with PRAGMA application_id 0x54485256 ("THRV"); a file that is
// not SQLite, or SQLite of another application, is refused with Error(kStorage) and
// left untouched.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "thrive/core/files.hpp"

struct sqlite3;

namespace thrive::memory {

/// A strategy card: one change to a template's parameters, for ops with given traits.
struct StrategyCard {
  std::string id;
  std::string title;
  std::string description;
  std::string backend;                    ///< "cpu" / "cuda"
  std::vector<std::string> traits;        ///< ops::trait_name values it applies to
  std::vector<std::string> bottlenecks;   ///< analyst diagnoses it addresses
  nlohmann::json set;                     ///< {"PARAM": "value", ...}
  std::string origin = "builtin";         ///< builtin | learned | imported
};

/// Evidence of one card on one op and shape class.
struct CardEvidence {
  std::string card_id, op, shape_class, backend;
  int successes = 0;          ///< verified and faster than its parent
  int failures = 0;           ///< slower, or failed compile/verify
  double sum_log_gain = 0;    ///< sum of ln(parent_time / child_time) over verified tries
  double best_gain = 0;       ///< best parent_time / child_time seen
  std::string last_seen;      ///< ISO-8601 UTC
};

/// One verified (or attempted) kernel measurement at one shape on one device.
struct KernelRecord {
  std::string kernel_id;      ///< canonical key: op.backend.arch.dtype.params
  std::string op, shape_class, device_key, backend;
  std::string params;         ///< params_to_string form
  std::string source;
  double time_us = 0;         ///< median
  double eager_us = 0;        ///< eager baseline median at the same shape, same run
  double speedup = 0;         ///< eager_us / time_us
  double bandwidth_gbps = 0;
  double percent_of_peak = 0;
  double max_rel_err = 0;
  bool verified = false;
  std::string parent_id;      ///< kernel it was derived from ("" for a seed)
  std::string card_id;        ///< card that produced it ("" for a seed)
  std::string command;        ///< command that reproduces the measurement
  nlohmann::json metrics;     ///< full EvalResult JSON
  std::string created_at;
};

/// One attempt in a run (the short-term trajectory).
struct Attempt {
  int64_t run_id = 0;
  std::string op, shape_class, device_key;
  int pass = 1, round = 0;
  std::string phase;          ///< generate | repair | optimize | recall
  std::string kernel_id, card_id, change;
  std::string status;         ///< sandbox::status_name
  double time_us = 0, speedup = 0;
  std::string notes;          ///< analyst diagnosis and verdict detail
  std::string created_at;
  /// The benchmark method it was measured with (bench::kMeasurementFooting when recorded; 0 for
  /// attempts recorded before footings were, or with none): stored beside the attempt in the
  /// attempt_measure table when not 0, with timing_verdict.
  int footing = 0;
  /// Whether its verdict was a timing (it passed, so it was measured; or it was rejected as
  /// "suspect timing": faster than the copy ceiling allows), not a verdict on the code. Read as
  /// false for attempts recorded before it was.
  bool timing_verdict = false;
};

/// One change the outer loop tried on a system (model + harness shape) on a device.
struct SystemChange {
  std::string system_key, device_key, metric;  ///< system_key: checkpoint and harness shape
  std::string stage, specialist, change;
  std::string config_before, config_after;     ///< SystemConfig as JSON
  double t_before = 0, t_after = 0;            ///< T, multiples of the run's starting throughput
  bool accepted = false;
  std::string verdict, created_at;
};

/// Counts from import_json. best_added: (op, shape, device) entries that had no best kernel here;
/// best_replaced: ones whose best an imported, faster kernel replaced; best_kept: ones that kept theirs.
struct ImportSummary {
  int cards_added = 0, evidence_merged = 0, kernels_added = 0, best_added = 0, best_replaced = 0, best_kept = 0;
};

class Store {
 public:
  /// Opens or creates the store at `path`. Throws Error(kStorage) naming the path for
  /// an unwritable location, a non-SQLite file, or a database of another application.
  explicit Store(const std::string& path);
  /// How open_read_only went.
  enum class ReadOpen {
    kOpened,       ///< a current memory, open read-only
    kNoMemory,     ///< the file holds no tables (empty, or a fresh SQLite file): nothing to read
    kOlderSchema,  ///< a memory of an older schema, which only the read-write open upgrades
  };
  /// Opens the existing memory at `path` for reading only (PRAGMA query_only: no switch to
  /// WAL, no schema upgrade, no write lock, so the file keeps its bytes, and a writer in another
  /// process is not waited for in WAL mode; as the last connection it checkpoints a WAL left by
  /// others into the file and removes the -wal/-shm files, as any SQLite connection does).
  /// Returns it when `how` is kOpened, else nullptr.
  /// Throws Error(kStorage) naming the path, leaving the file untouched, for a file that is not
  /// SQLite, a database of another application, a newer schema, or one SQLite cannot open.
  /// A writing call on the returned store throws Error(kStorage) (read-only database).
  static std::unique_ptr<Store> open_read_only(const std::string& path, ReadOpen& how);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  const std::string& path() const { return path_; }

  // Device ceilings.
  std::optional<double> peak_bandwidth_gbps(const std::string& device_key);
  void set_peak_bandwidth_gbps(const std::string& device_key, double gbps);

  // Cards and evidence.
  /// Inserts the card unless one with its id exists (builtin seeding is idempotent).
  /// Returns whether it was inserted: one statement, so of concurrent writers of one id
  /// exactly one gets true.
  bool add_card(const StrategyCard& card);
  std::vector<StrategyCard> cards(const std::string& backend = "");
  std::vector<CardEvidence> evidence(const std::string& card_id = "");
  /// Adds one outcome. `gain` = parent_time / child_time (0 when it did not verify).
  void record_card_outcome(const std::string& card_id, const std::string& op,
                           const std::string& shape_class, const std::string& backend,
                           bool success, double gain);

  // Kernel library.
  /// Records a measurement (replacing the same kernel_id/shape/device row) and, when it
  /// is verified, `may_become_best`, and faster than the current best for (op, shape,
  /// device), makes it the best. Returns true when it became the best. A caller that judged
  /// the kernel no real gain (the search agent's candidate whose paired re-measurement was
  /// within the parent's spread) passes may_become_best = false: the row is kept for the
  /// record (its metrics say "best_eligible": false, so demote_kernel never promotes it
  /// either), and the best, which `thrive leaderboard` and later runs read, stays the kernel
  /// that search kept. `replaces`: the id of a kernel the caller measured this one against and
  /// found slower (the search agent's parent, beaten in paired timing); where that kernel is the
  /// current best, this one takes its place whatever the two stored times say (they may come from
  /// a busier and a quieter machine; the paired verdict timed both together). Throws
  /// Error(kInput) for a verified kernel without a positive, finite time, or an id that already
  /// names a different source.
  bool record_kernel(const KernelRecord& k, bool may_become_best = true, const std::string& replaces = "");
  std::optional<KernelRecord> best(const std::string& op, const std::string& shape_class,
                                   const std::string& device_key);
  /// Marks kernel `kernel_id` at (`shape_class`, `device_key`) unverified (a re-verification
  /// found it wrong, or it no longer compiles or crashed) and, if it was the best there, makes
  /// the fastest other verified kernel of that op, shape and device that may be best (not one
  /// recorded with may_become_best = false) the best (or none). The
  /// row itself is kept, for the record. Returns whether a best entry changed.
  bool demote_kernel(const std::string& kernel_id, const std::string& shape_class,
                     const std::string& device_key);
  /// Best kernels, one per (op, shape class, device), ordered by op and shape.
  std::vector<KernelRecord> leaderboard(const std::string& device_key = "");
  /// Every recorded kernel measurement for `op` ("" = all), newest first.
  std::vector<KernelRecord> kernels(const std::string& op = "");

  // Runs and trajectories.
  int64_t begin_run(const std::string& command, const std::string& device_key,
                    const std::string& agent);
  void end_run(int64_t run_id);

  // The outer loop's record: every change tried, and the best configuration per system, device
  // and metric (the next run starts from it).
  void record_system_change(const SystemChange& c);
  /// Changes of `system_key` ("" = all), oldest first.
  std::vector<SystemChange> system_changes(const std::string& system_key = "");
  void set_best_system(const std::string& system_key, const std::string& device_key, const std::string& metric,
                       const std::string& config);
  /// The stored best configuration (JSON), "" when none.
  std::string best_system(const std::string& system_key, const std::string& device_key, const std::string& metric);
  void record_attempt(const Attempt& a);
  /// Attempts of (op, shape, device) in run `run_id` (0 = all runs), oldest first.
  std::vector<Attempt> trajectory(int64_t run_id, const std::string& op,
                                  const std::string& shape_class, const std::string& device_key);

  // Sharing.
  nlohmann::json export_json();
  /// Merges an export: cards added if new, evidence summed, kernels added, the best
  /// replaced only by a faster verified kernel. All or nothing (one transaction).
  /// Throws Error(kInput) naming the malformed entry ("kernels[3]") and field; kernel times
  /// must lie in 0.001-1e9 µs.
  ImportSummary import_json(const nlohmann::json& doc);

  /// Counts for `thrive memory show`.
  nlohmann::json summary();

 private:
  /// import_json's body; sets `where` to the entry it is reading ("kernels[3]") for the error.
  ImportSummary import_entries(const nlohmann::json& doc, std::string& where);
  void exec(const std::string& sql);
  /// (PRAGMA application_id, number of schema objects) of the open file.
  std::pair<int, int> identify();
  /// Throws kStorage: the file belongs to another application (left untouched).
  [[noreturn]] void refuse_foreign(int app_id) const;
  Store() = default;  // open_read_only's
  FileLock lock_;  // the shared advisory lock on store_lock_path(path_) of a read-write store
  sqlite3* db_ = nullptr;
  std::string path_;
};

/// $THRIVE_HOME/memory.db.
std::string default_store_path(const std::string& home);

/// The advisory lock file beside a memory store (`db_path` + ".lock"). Every read-write Store
/// holds a shared flock(2) on it for its lifetime (taken before SQLite opens the file);
/// `thrive memory reset` takes it exclusively (lock_store_exclusive) before it moves the store
/// aside, so it never moves a store that another process is writing.
std::string store_lock_path(const std::string& db_path);
/// Takes the exclusive lock on store_lock_path(db_path) without waiting. Returns it held (released
/// when the returned lock goes), or holding nothing (is_open() false) when another process holds
/// the store open. Throws Error(kStorage) naming the lock file when it cannot be created or locked.
FileLock lock_store_exclusive(const std::string& db_path);

/// Current UTC time, ISO-8601 ("2026-11-30T05:10:33Z").
std::string now_iso8601();

void to_json(nlohmann::json& j, const StrategyCard& c);
void from_json(const nlohmann::json& j, StrategyCard& c);
void to_json(nlohmann::json& j, const KernelRecord& k);
void from_json(const nlohmann::json& j, KernelRecord& k);
void to_json(nlohmann::json& j, const CardEvidence& e);
void to_json(nlohmann::json& j, const Attempt& a);

}  // namespace thrive::memory
