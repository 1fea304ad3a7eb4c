// thrive memory show | cards | kernels [--op OP] | export FILE | import FILE | reset
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/json.hpp"
#include "thrive/core/files.hpp"
#include "thrive/ops/op.hpp"

namespace thrive::cli {
namespace {
// Renames `from` to `to` unless `to` exists (rename_no_replace: a concurrent reset's backup is
// never replaced). Returns false when `to` exists or `from` does not; Error(kStorage) for any
// other failure.
bool move_aside(const std::string& from, const std::string& to) {
  const int err = rename_no_replace(from, to);
  if (err == 0) return true;
  if (err == EEXIST || err == ENOENT) return false;
  fail(ErrorCategory::kStorage, "{}: cannot move aside to {} ({})", from, to, std::strerror(err));
}
}  // namespace

void register_memory(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("memory", "Inspect, share or reset long-term memory");
  cmd->require_subcommand(1);
  add_common_flags(*cmd, ctx.flags, false);

  static bool show_json = false;
  auto* show = cmd->add_subcommand("show", "Counts, devices and their copy-bandwidth ceilings");
  show->add_flag("--json", show_json, "JSON output");
  show->callback([&ctx] {
    auto summary = ctx.read_store().summary();
    summary["path"] = ctx.store_path();  // the in-memory stand-in's is ":memory:"
    if (show_json) {
      fmt::print("{}\n", summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      return;
    }
    fmt::print("memory {}\n  runs {}, candidate attempts {}, kernels {}, best-kernel entries {}, strategy cards {} "
               "(evidence rows {})\n", summary["path"].get<std::string>(), summary["runs"].get<int64_t>(),
               summary["attempts"].get<int64_t>(), summary["kernels"].get<int64_t>(),
               summary["best_entries"].get<int64_t>(), summary["cards"].get<int64_t>(),
               summary["evidence_rows"].get<int64_t>());
    if (summary["devices"].empty()) {
      fmt::print("  no device measured yet (its copy-bandwidth ceiling is measured by the first bench or optimize)\n");
      return;
    }
    fmt::print("  {:<40} {:>12}  {}\n", "device", "ceiling", "measured (UTC)");
    for (const auto& d : summary["devices"])
      fmt::print("  {:<40} {:>7.1f} GB/s  {}\n", d["device"].get<std::string>(), d["peak_bw_gbps"].get<double>(),
                 d["measured_at"].get<std::string>());
    fmt::print("ceiling: the copy bandwidth measured on buffers larger than the last-level cache (DRAM on a CPU, HBM on a GPU), the 100% of every %peak figure\n");
  });

  static bool cards_json = false;
  auto* cards = cmd->add_subcommand("cards", "Strategy cards with their evidence");
  cards->add_flag("--json", cards_json, "JSON output");
  cards->callback([&ctx] {
    auto& store = ctx.read_store();
    auto all = store.cards();
    auto ev = store.evidence();
    if (cards_json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& c : all) {
        nlohmann::json j = c;
        j["evidence"] = nlohmann::json::array();
        for (const auto& e : ev)
          if (e.card_id == c.id) j["evidence"].push_back(e);
        out.push_back(j);
      }
      fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
      return;
    }
    if (all.empty()) {
      fmt::print("no strategy cards in {} (the built-in ones are written into it by the first verify, bench, tune or "
                 "optimize)\n", ctx.store_path());
      return;
    }
    // card id, backend, the evidence's successes and failures, its best gain over eager, title,
    // settings: columns as wide as their longest entry (learned cards' ids run past 30 characters)
    size_t id_w = 4, back_w = 4;
    for (const auto& c : all) id_w = std::max(id_w, c.id.size()), back_w = std::max(back_w, c.backend.size());
    fmt::print("{:<{}} {:<{}} {:>5} {:>6} {:>7}  {}\n", "card", id_w, "back", back_w, "ok", "failed", "best",
               "title, settings");
    for (const auto& c : all) {
      int s = 0, f = 0;
      double best = 0;
      for (const auto& e : ev)
        if (e.card_id == c.id) s += e.successes, f += e.failures, best = std::max(best, e.best_gain);
      fmt::print("{:<{}} {:<{}} {:>5} {:>6} {:>7}  {} {}\n", c.id, id_w, c.backend, back_w, s, f,
                 best > 0 ? fmt::format("{:.2f}x", best) : std::string("-"), c.title, c.set.dump());
    }
    fmt::print("ok/failed: the card's changes that passed verification and were kept, or not; best: the largest "
               "parent time / child time one of its changes gave ('-': none measured yet)\n");
  });

  static std::string kernels_op;
  auto* kernels = cmd->add_subcommand("kernels", "Every recorded kernel: its latest measurement per op and shape class");
  kernels->add_option("--op", kernels_op, "Only this op");
  kernels->callback([&ctx] {
    const auto rows = ctx.read_store().kernels(kernels_op);
    // an op neither THRIVE nor this memory knows is a usage error, not an empty list (memory may
    // hold an op this build no longer has, from an import)
    if (!kernels_op.empty() && rows.empty()) ops::find_op(kernels_op);
    if (rows.empty()) {
      fmt::print("no kernel measurements{} in {}\n", kernels_op.empty() ? "" : " of " + kernels_op, ctx.store_path());
      return;
    }
    fmt::print("{:<21} {:<11} {:>11} {:>8} {} {}\n", "op", "shape", "time", "speedup", "status", "kernel");
    for (const auto& k : rows)
      fmt::print("{:<21} {:<11} {:>11} {:>7.2f}x {} {}\n", k.op, k.shape_class, format_us(k.time_us),
                 k.speedup, k.verified ? "verified" : "unverified", k.kernel_id);
  });

  static std::string export_path;
  auto* exp = cmd->add_subcommand("export", "Write memory as JSON (to share with a team)");
  exp->add_option("FILE", export_path, "Output file")->required();
  exp->callback([&ctx] {
    check_output_path(ctx, export_path, "memory export");
    write_file_atomic(export_path, ctx.read_store().export_json().dump(
                                       1, ' ', false, nlohmann::json::error_handler_t::replace));
    fmt::print("exported {} to {}\n", ctx.store_path(), export_path);
  });

  static std::string import_path;
  auto* imp = cmd->add_subcommand("import", "Merge a JSON export (never replaces a faster kernel)");
  imp->add_option("FILE", import_path, "Export file")->required();
  imp->callback([&ctx] {
    std::string why;
    auto doc = parse_json_bounded(read_file(import_path), 64, &why);
    if (doc.is_discarded())
      fail(ErrorCategory::kInput, "{}: {}; expected a `thrive memory export` file", import_path, json_kind(doc, why));
    // Where there is no memory yet, into an empty in-memory store first: a document the import
    // refuses then creates no THRIVE_HOME or memory.db (into an empty store both imports judge
    // alike). An existing memory is judged by the real import, one transaction: a refusal
    // changes nothing (a device it already knows is skipped there, not checked).
    std::error_code ec;
    const auto db = std::filesystem::status(ctx.store_path(), ec);  // through a link to its file
    if (!std::filesystem::is_regular_file(db) || std::filesystem::file_size(ctx.store_path(), ec) == 0)
      memory::Store(":memory:").import_json(doc);
    auto s = ctx.store().import_json(doc);
    fmt::print("imported {}: {} cards added, {} evidence rows merged, {} kernels added; best kernels: {} added, "
               "{} replaced by a faster import, {} kept\n",
               import_path, s.cards_added, s.evidence_merged, s.kernels_added, s.best_added, s.best_replaced,
               s.best_kept);
  });

  cmd->add_subcommand("reset", "Move memory.db aside (kept as a backup) and start empty")
      ->callback([&ctx] {
        namespace fs = std::filesystem;
        auto& cfg = ctx.config();
        const std::string path = memory::default_store_path(cfg.home);
        // what the reading commands call a storage error is one here too
        std::error_code ec;
        const auto home = fs::status(cfg.home, ec);
        if (ec && ec != std::errc::no_such_file_or_directory)
          fail(ErrorCategory::kStorage, "THRIVE_HOME={}: cannot look at it ({})", cfg.home, ec.message());
        if (fs::exists(home) && !fs::is_directory(home))
          fail(ErrorCategory::kStorage, "THRIVE_HOME={}: expected a directory", cfg.home);
        const auto db = fs::symlink_status(path, ec);
        if (ec && ec != std::errc::no_such_file_or_directory)
          fail(ErrorCategory::kStorage, "{}: cannot look at it ({})", path, ec.message());
        if (!fs::exists(db)) {
          fmt::print("no memory at {}\n", path);
          return;
        }
        if (fs::is_directory(fs::status(path, ec)))
          fail(ErrorCategory::kStorage, "{}: a directory; expected the memory's SQLite file", path);
        // Not while another process has the store open (an optimize, e2e, import or MCP server):
        // its writes would go on into the moved file, the backup (memory::store_lock_path)
        const auto lock = memory::lock_store_exclusive(path);
        if (!lock.is_open())
          fail(ErrorCategory::kStorage,
               "{}: in use by another thrive process (it holds {}); reset when that process has finished", path,
               memory::store_lock_path(path));
        // A backup is never replaced: a second reset in the same second takes the next free name.
        const std::string stamp = path + ".bak-" + memory::now_iso8601();
        std::string backup = stamp;
        for (int n = 2;; ++n) {
          if (!fs::exists(fs::symlink_status(backup, ec)) && !fs::exists(fs::symlink_status(backup + "-wal", ec)) &&
              !fs::exists(fs::symlink_status(backup + "-shm", ec)) && move_aside(path, backup))
            break;
          if (!fs::exists(fs::symlink_status(path, ec))) {  // another reset moved it meanwhile
            fmt::print("no memory at {}\n", path);
            return;
          }
          if (n > 1000) fail(ErrorCategory::kStorage, "{}: no free backup name from {} to {}-1000", path, stamp, stamp);
          backup = stamp + "-" + std::to_string(n);
        }
        for (const char* suffix : {"-wal", "-shm"}) move_aside(path + suffix, backup + suffix);
        fmt::print("memory reset: previous store kept as {}\n", backup);
      });
  // The common flags (--home, --log-level) belong to `memory`; after its command word they fall
  // through to it, so `memory show --home X` works as `memory --home X show` does
  for (auto* sub : cmd->get_subcommands({})) sub->fallthrough();
}

}  // namespace thrive::cli
