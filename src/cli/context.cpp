#include "src/cli/context.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>
#include <sstream>
#include <vector>

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "thrive/backend/backend.hpp"
#include "thrive/bench/bench.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive::cli {

namespace {
void check_values(const CLI::App& app, Context& ctx, std::vector<std::string>& positionals) {
  for (const auto* opt : app.get_options()) {
    if (opt->count() > 0 && opt->nonpositional()) ctx.given_flags.insert(opt->get_name());
    if (opt->count() > 0 && opt->get_positional())
      for (const auto& v : opt->results()) positionals.push_back(v);
    if (opt->count() == 0 || opt->get_expected_min() == 0) continue;  // flags take no value
    for (const auto& v : opt->results()) {
      if (v.find_first_not_of(" \t\n\r\f\v") == std::string::npos)
        fail(ErrorCategory::kUsage, "{} \"{}\": expected a value", opt->get_name(), v);
      if (!opt->get_positional() && v.rfind("--", 0) == 0)
        fail(ErrorCategory::kUsage, "{} {}: expected a value, not an option (give the value right after {})",
             opt->get_name(), v, opt->get_name());
      // CLI11 converts integers with base prefixes (0x10, 0b10, 0o10) and reads a leading 0 as
      // octal (`--batch 010` ran batch 8): an integer flag takes decimal digits only
      const std::string type = opt->get_type_name();
      if (type == "INT" || type == "UINT") {
        static const std::regex kDecimal(R"(^[+-]?[0-9]+$)");
        const size_t digits = v.find_first_not_of("+-");
        if (!std::regex_match(v, kDecimal))
          fail(ErrorCategory::kUsage, "{} {}: expected a decimal integer", opt->get_name(), v);
        if (v.size() - digits > 1 && v[digits] == '0')
          fail(ErrorCategory::kUsage, "{} {}: expected a decimal integer without leading zeros (it would be read as "
               "octal)", opt->get_name(), v);
      }
    }
  }
  for (const auto* sub : app.get_subcommands()) check_values(*sub, ctx, positionals);
}
}  // namespace

std::string usage_message(const std::string& cli11_text) {
  static const std::regex kAtMostOne(R"(^(\S+): At Most 1 required but received (\d+)$)");
  static const std::regex kNotExpected(R"(^The following arguments* (?:was|were) not expected: (.*)$)");
  static const std::regex kNoConversion(R"(^Could not convert: (\S+) = (.*)$)");
  std::smatch m;
  if (std::regex_match(cli11_text, m, kNoConversion))
    return fmt::format("{} {}: not a number this flag takes (not a number, or out of its range; integer flags take "
                       "decimal digits, at most 2147483647)", m[1].str(), m[2].str());
  if (cli11_text == "A subcommand is required")
    return "a command is required";
  if (std::regex_match(cli11_text, m, kAtMostOne))
    return fmt::format("{} given {} times: expected it once", m[1].str(), m[2].str());
  if (std::regex_match(cli11_text, m, kNotExpected)) {
    // CLI11 joins the leftover words last first: name them in the command line's order
    std::vector<std::string> words;
    std::istringstream in(m[1].str());
    for (std::string w; in >> w;) words.push_back(w);
    std::reverse(words.begin(), words.end());
    if (words.empty()) return "an empty word (\"\") was not expected here";
    return fmt::format("{} not expected here: {}", words.size() == 1 ? "this word was" : "these words were",
                       fmt::join(words, " "));
  }
  return cli11_text;
}

void refuse_bad_values(const CLI::App& app, Context& ctx) {
  std::vector<std::string> positionals;
  check_values(app, ctx, positionals);
  // CLI11 hands a word after `--` that no FILE takes back to the parent command, which reads it
  // as an option (`memory reset -- --home=X` would reset X)
  for (const auto& w : ctx.after_dashes)
    if (std::find(positionals.begin(), positionals.end(), w) == positionals.end())
      fail(ErrorCategory::kUsage, "-- {}: expected a FILE of this command after --", w);
}

void add_common_flags(CLI::App& app, CommonFlags& flags, bool with_device) {
  app.add_option("--home", flags.home, "THRIVE_HOME: memory.db, kernel archive, compile cache");
  if (with_device)
    app.add_option("--device", flags.device, "cpu | cuda | auto (THRIVE_DEVICE)");
  app.add_option("--log-level", flags.log_level, "trace|debug|info|warn|error|critical|off (THRIVE_LOG_LEVEL)");
}

config::Config& Context::config() {
  if (!config_) {
    // A flag replaces its variable: a bad THRIVE_LOG_LEVEL does not stop `--log-level info`, and
    // a bad flag value is named as the flag, not as the variable.
    if (!flags.device.empty()) config::require_choice(flags.device, config::kDevices, "--device " + flags.device);
    if (!flags.log_level.empty())
      config::require_choice(flags.log_level, config::kLogLevels, "--log-level " + flags.log_level);
    // The common flags, which set these settings here (e2e's own --device too: it picks the
    // engine's device itself). Other commands' flags (optimize's --rounds, e2e's --seed of the
    // prompts) are applied by those commands, some paths not at all: their variables stay read.
    static const std::set<std::string> kReplacing = {"--home", "--device", "--log-level"};
    auto c = config::Config::from_env([this](const char* var) -> const char* {
      // THRIVE_TARGET_SPEEDUP or RSI_TARGET_SPEEDUP -> --target-speedup: hidden when given
      const std::string v = var;
      std::string flag = "--" + v.substr(v.find('_') + 1);
      for (auto& ch : flag) ch = ch == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(ch)));
      return kReplacing.count(flag) > 0 && given_flags.count(flag) > 0 ? nullptr : std::getenv(var);
    });
    if (!flags.home.empty()) c.home = flags.home;
    if (!flags.device.empty()) c.device = flags.device;
    if (!flags.log_level.empty()) c.log_level = flags.log_level;
    c.validate();
    auto logger = spdlog::stderr_color_mt("thrive");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::from_str(c.log_level));
    config_ = std::make_unique<config::Config>(c);
  }
  return *config_;
}

memory::Store& Context::store() {
  if (!store_) {
    auto& c = config();
    ensure_writable_dir(c.home, "THRIVE_HOME");
    store_ = std::make_unique<memory::Store>(memory::default_store_path(c.home));
  }
  return *store_;
}

memory::Store& Context::read_store() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (store_) return *store_;
  if (read_only_store_) return *read_only_store_;
  const auto status = fs::status(store_path(), ec);
  // a link loop, a directory it may not enter: the read-write open reports it as a storage error
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) return store();
  ec.clear();
  if (fs::exists(status)) {
    // read-only: the file stays byte-identical; an older schema takes the read-write open,
    // which upgrades it
    auto how = memory::Store::ReadOpen::kOpened;
    read_only_store_ = memory::Store::open_read_only(store_path(), how);
    if (how == memory::Store::ReadOpen::kOpened) return *read_only_store_;
    if (how == memory::Store::ReadOpen::kOlderSchema) return store();
    // kNoMemory: an empty or fresh SQLite file, answered as an empty memory
  }
  // No memory yet. A home that could never hold one (under a regular file, in a read-only
  // directory) is still reported: store() raises its usual error. Otherwise an empty in-memory
  // stand-in answers, and nothing is created.
  fs::path p = fs::absolute(config().home, ec);
  while (!ec && !p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  if (ec || !fs::is_directory(p, ec) || access(p.c_str(), W_OK | X_OK) != 0) return store();
  if (!empty_store_) empty_store_ = std::make_unique<memory::Store>(":memory:");
  return *empty_store_;
}

std::string Context::store_path() { return memory::default_store_path(config().home); }

tools::Toolbox& Context::toolbox() {
  if (!toolbox_) {
    auto& c = config();
    const std::string backend = backend::resolve_backend_name(c.device);
    toolbox_ = std::make_unique<tools::Toolbox>(c, store(), backend);
  }
  return *toolbox_;
}

namespace {
// `in` as an absolute, normal path with every symlink along it followed, also one whose target
// does not exist yet (std::filesystem::weakly_canonical stops at the first component that does
// not exist, so a dangling link or a relative path under a missing directory stayed as spelt),
// and ".." taken physically, after the link before it (as the kernel does);
// at most 40 links, like the kernel's own limit. `follow_last` = false keeps a final link as is.
std::string resolve_links(const std::filesystem::path& in, bool follow_last = true) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path abs = fs::absolute(in, ec);  // not lexically_normal: ".." after a link is physical
  fs::path out = abs.root_path();
  std::deque<fs::path> todo;
  for (const auto& part : abs.relative_path()) todo.push_back(part);
  for (int links = 0; !todo.empty();) {
    const fs::path part = todo.front();
    todo.pop_front();
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      out = out.parent_path();
      continue;
    }
    const fs::path next = out / part;
    if (links < 40 && (follow_last || !todo.empty()) && fs::is_symlink(fs::symlink_status(next, ec))) {
      ++links;
      const fs::path target = fs::read_symlink(next, ec);
      if (target.is_absolute()) out = target.root_path();
      const auto rel = target.relative_path();
      std::vector<fs::path> parts(rel.begin(), rel.end());
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_front(*it);
      continue;
    }
    out = next;
  }
  return out.lexically_normal().string();
}
}  // namespace

void check_output_path(Context& ctx, const std::string& path, const char* flag) {
  namespace fs = std::filesystem;
  if (path.empty()) fail(ErrorCategory::kUsage, "{} \"\": expected a path", flag);
  // both sides resolved: symlinks (memory.db may be a link to the real file, which is what a
  // write through the link would replace, existing or not), "." and "..", doubled and trailing
  // separators, relative spellings
  const auto target = resolve_links(path);
  const fs::path home(ctx.config().home);
  const auto home_dir = resolve_links(home);
  const auto within = [](const std::string& p, const std::string& dir) {  // p is dir or under it
    return p == dir || p.compare(0, dir.size() + 1, dir + "/") == 0;
  };
  if (within(home_dir, target))
    fail(ErrorCategory::kUsage, "{} {}: THRIVE_HOME ({}) or a directory holding it; expected a file path outside it", flag,
         path, ctx.config().home);
  // the backups `memory reset` leaves next to memory.db (memory.db.bak-TIME[-N], with -wal/-shm),
  // and anything under one: the path as resolved and with its last link kept, and what each
  // backup resolves to (a backup of a memory.db link is a link to the real memory)
  const std::string backup_prefix = home_dir + "/memory.db.bak-";
  std::vector<std::string> backups;
  std::error_code ec;
  for (fs::directory_iterator it(home_dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind("memory.db.bak-", 0) == 0) backups.push_back(resolve_links(it->path()));
  for (const auto& t : {target, resolve_links(path, false)}) {
    bool hit = t.compare(0, backup_prefix.size(), backup_prefix) == 0;
    for (const auto& b : backups) hit = hit || within(t, b);
    if (hit)
      fail(ErrorCategory::kUsage, "{} {}: a backup of the memory in THRIVE_HOME ({}); expected a path outside it",
           flag, path, ctx.config().home);
  }
  for (const char* inside : {"memory.db", "kernels", "cache", "bandwidth.lock"}) {
    // resolved (through a memory.db link to its file) and the link itself under the resolved
    // home, each with SQLite's -wal/-shm/-journal and the store's .lock next to it (a file put in
    // place of the lock lets a second writer, or `memory reset`, in while a run holds it)
    bool hit = false;
    for (const auto& p : {resolve_links(home / inside), resolve_links(home / inside, false)}) {
      hit = hit || within(target, p);
      for (const char* side : {"-wal", "-shm", "-journal", ".lock"}) hit = hit || target == p + side;
    }
    if (hit)
      fail(ErrorCategory::kUsage, "{} {}: THRIVE_HOME's {} or a file beside it that guards it (the memory itself); expected a path outside it",
           flag, path, inside);
  }
}

void check_results_file(Context& ctx, const std::string& path, const char* flag) {
  check_output_path(ctx, path, flag);
  if (std::filesystem::is_directory(path)) fail(ErrorCategory::kUsage, "{} {}: is a folder; expected a file path", flag, path);
  // the results are written after the whole run: prove now that the file can be created
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && st.type() != std::filesystem::file_type::regular)
    fail(ErrorCategory::kUsage, "{} {}: exists and is not a regular file (a device, a FIFO); expected a file path", flag, path);
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) ensure_writable_dir(parent.string(), fmt::format("{}'s folder", flag));
  const std::string probe = path + ".probe." + std::to_string(getpid());
  if (!std::ofstream(probe))
    fail(ErrorCategory::kStorage, "{} {}: cannot create a file there ({})", flag, path, std::strerror(errno));
  std::filesystem::remove(probe, ec);
}

std::FILE* take_stdout(const char* what) {
  std::fflush(stdout);
  const int fd = dup(STDOUT_FILENO);
  if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
    fail(ErrorCategory::kInternal, "{}: cannot separate its output stream from stdout", what);
  std::FILE* out = fdopen(fd, "w");
  if (out == nullptr) fail(ErrorCategory::kInternal, "{}: cannot open its output stream", what);
  return out;
}

void print_progress(const std::string& tag, const agents::Progress& p) {
  std::string where = p.round > 0 ? fmt::format("round {}/{}", p.round, p.rounds) : "";
  std::string line = fmt::format("[{}] {:<21} {:<11} {:<11} {:<9}", tag, p.op, p.shape, where, p.phase);
  if (p.phase == "eager") {
    line += fmt::format(" eager baseline {}", format_us(p.time_us));
  } else if (p.phase == "done") {
    line += p.status == "passed"
                ? fmt::format(" best {} = {:.2f}x eager  [{}]", format_us(p.best_us), p.speedup, p.note)
                : " " + p.note;
  } else {
    if (!p.change.empty()) line += " " + p.change;
    if (!p.status.empty())
      line += fmt::format(" -> {}{}", p.status, p.time_us > 0 ? " " + format_us(p.time_us) : "");
    if (p.best_us > 0) line += fmt::format(" | best {} ({:.2f}x)", format_us(p.best_us), p.speedup);
    if (!p.note.empty()) line += "  " + p.note;
  }
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

double print_busy_cpu_note(tools::Toolbox& tb) {
  const double load = bench::load_average_1min();
  const auto note = bench::busy_cpu_note(tb.device().value("backend", ""), load,
                                         int64_t(std::thread::hardware_concurrency()));
  if (!note.empty()) fmt::print("{}\n", note);
  return load;
}

std::string format_us(double us) {
  if (us <= 0) return "-";
  if (us >= 10000) return fmt::format("{:.2f} ms", us / 1000);
  if (us >= 100) return fmt::format("{:.1f} us", us);
  return fmt::format("{:.2f} us", us);
}

}  // namespace thrive::cli
