// Shared set-up of the subcommands: configuration from env + flags, logging, the
// memory store and the toolbox. One subcommand per file under src/cli/commands/.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "thrive/agents/agent.hpp"
#include "thrive/config/config.hpp"
#include "thrive/memory/store.hpp"
#include "thrive/tools/toolbox.hpp"

namespace thrive::cli {

/// Flags shared by several subcommands; empty/negative = not given (env applies).
struct CommonFlags {
  std::string home;
  std::string device;
  std::string log_level;
};

/// Process-wide state built lazily after parsing.
class Context {
 public:
  CommonFlags flags;
  /// The named options given on the command line ("--home"). The common flags among them
  /// (--home, --device, --log-level) replace their variables: config() then does not read
  /// THRIVE_HOME. Filled by refuse_bad_values.
  std::set<std::string> given_flags;
  /// The words after `--`: refuse_bad_values requires each to be a command's FILE.
  std::vector<std::string> after_dashes;
  std::string command_line;   ///< argv joined, recorded with results
  int exit_code = 0;          ///< set by a command whose candidate failed (1)

  /// Config from the environment with the common flags applied, validated.
  config::Config& config();
  /// Opens $THRIVE_HOME/memory.db (creating THRIVE_HOME). Throws Error(kStorage).
  memory::Store& store();
  /// For the commands that only read memory (leaderboard, memory show/cards/kernels/export):
  /// an existing memory.db opened read-only (memory::Store::open_read_only: left
  /// byte-identical; an older schema is opened read-write, which upgrades it), otherwise an
  /// empty in-memory store, so reading creates neither THRIVE_HOME nor the file. Throws
  /// Error(kStorage) for a home that could never hold a memory or a file that is not one.
  memory::Store& read_store();
  /// $THRIVE_HOME/memory.db, whether or not it exists (for messages).
  std::string store_path();
  /// Toolbox on the resolved backend.
  tools::Toolbox& toolbox();

 private:
  std::unique_ptr<config::Config> config_;
  std::unique_ptr<memory::Store> store_, read_only_store_, empty_store_;
  std::unique_ptr<tools::Toolbox> toolbox_;
};

/// Points fd 1 at stderr and returns a stream on the original stdout, so everything printed
/// from now on (progress, tables, candidate output) goes to stderr and only what the caller
/// writes to the returned stream reaches stdout (MCP's protocol, `--json` documents).
/// Throws Error(kInternal) when the descriptors cannot be duplicated.
std::FILE* take_stdout(const char* what);

/// Refuses an output path that is empty or would replace THRIVE_HOME's memory itself (memory.db
/// and its journal files, the kernel archive, the compile cache), also through links or `..`:
/// Error(kUsage) naming `flag` and the path. Every command's output file goes through it.
void check_output_path(Context& ctx, const std::string& path, const char* flag);

/// For a results file written only after a long run (--json-out of bench, tune and demo): what
/// check_output_path refuses, plus a folder, an existing non-regular file (a device such as
/// /dev/full, a FIFO) and a folder where no file can be created (a probe file is created and
/// removed), all before any work. Error(kUsage) or Error(kStorage) naming `flag` and the path.
void check_results_file(Context& ctx, const std::string& path, const char* flag);

/// Refuses, in `app` and every subcommand parsed under it, an option given an empty or blank
/// value (`--gen ""` would otherwise read as 0, `--home ""` fall back to THRIVE_HOME, `--home " "`
/// create a directory named " ") or, for a named option, a value that is another option (CLI11
/// takes the next word as the value: `--home --json` would be a home named "--json"):
/// Error(kUsage) naming the flag and the value. main() runs it once the command line is parsed,
/// before any command's callback.
void refuse_bad_values(const CLI::App& app, Context& ctx);

/// A CLI11 parse error's text as the one-line usage message: an option given twice reads
/// "--batch given 2 times: expected it once" (CLI11 says "--batch: At Most 1 required but
/// received 2"); CLI11's list of leftover words ("The following arguments were not expected: B
/// A", joined last first) reads "these words were not expected here: A B", in the command line's
/// order; any other text is returned as it is.
std::string usage_message(const std::string& cli11_text);

/// Adds --home/--device/--log-level to `app`.
void add_common_flags(CLI::App& app, CommonFlags& flags, bool with_device);

// One registration function per subcommand (src/cli/commands/<name>.cpp).
void register_ops(CLI::App& app, Context& ctx);
void register_optimize(CLI::App& app, Context& ctx);
void register_leaderboard(CLI::App& app, Context& ctx);
void register_verify(CLI::App& app, Context& ctx);
void register_bench(CLI::App& app, Context& ctx);
void register_memory(CLI::App& app, Context& ctx);
void register_env(CLI::App& app, Context& ctx);
void register_tune(CLI::App& app, Context& ctx);
void register_mcp(CLI::App& app, Context& ctx);
void register_demo(CLI::App& app, Context& ctx);
void register_model(CLI::App& app, Context& ctx);
void register_e2e(CLI::App& app, Context& ctx);

/// One line of live progress of an agent's task, prefixed "[tag]" (e.g. "pass 1", "cold 2").
void print_progress(const std::string& tag, const agents::Progress& p);

/// Formats microseconds for people: "12.3 µs", "4.56 ms".
std::string format_us(double us);

/// Reads the 1-minute load average (bench::load_average_1min), prints bench::busy_cpu_note's
/// warning for `tb`'s backend and this machine's hardware threads when it has one, and returns
/// the load read (NaN where it cannot be read), for a command that records it.
double print_busy_cpu_note(tools::Toolbox& tb);

}  // namespace thrive::cli
