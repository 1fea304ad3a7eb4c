// thrive: the command-line entry. One top-level catch maps errors to exit codes:
// 0 ok, 1 a candidate kernel failed (verify/bench), 2 usage, 3 bad input file,
// 4 storage, 5 backend, 70 internal.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"

int main(int argc, char** argv) {
  thrive::cli::Context ctx;
  for (int i = 0; i < argc; ++i) ctx.command_line += (i ? " " : "") + std::string(argv[i]);
  CLI::App app{"THRIVE: profile, optimize and verify LLM inference kernels (no training)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("thrive ") + THRIVE_VERSION_STRING);
  thrive::cli::register_ops(app, ctx);
  thrive::cli::register_optimize(app, ctx);
  thrive::cli::register_leaderboard(app, ctx);
  thrive::cli::register_verify(app, ctx);
  thrive::cli::register_bench(app, ctx);
  thrive::cli::register_tune(app, ctx);
  thrive::cli::register_mcp(app, ctx);
  thrive::cli::register_demo(app, ctx);
  thrive::cli::register_memory(app, ctx);
  thrive::cli::register_env(app, ctx);
  thrive::cli::register_model(app, ctx);
  thrive::cli::register_e2e(app, ctx);
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  const auto is_command = [&](const char* w) { return std::find(names.begin(), names.end(), w) != names.end(); };
  // CLI11 answers an unknown first word with "A subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-' && !is_command(argv[1])) {
    fmt::print(stderr, "thrive: usage error: unknown command '{}': expected one of {}\n", argv[1], fmt::join(names, ", "));
    return 2;
  }
  // A flag (or `--`, `-`) before the command word (`thrive --home DIR bench ...`): every flag belongs
  // to a command, and CLI11 would list the stray words (in reverse order) as unexpected. The hint
  // names the command the line most likely meant, with its subcommand when the next word is one
  // (`thrive model init --help`, whose flags those are): the first command word followed by one of
  // its subcommands, else the first command word that is not right after a flag (the value of
  // `--home memory` is not a command), else the first command word.
  if (argc > 1 && argv[1][0] == '-') {
    const std::string a = argv[1], name = a.substr(0, a.find('='));
    if (name != "--help" && name != "-h" && name != "--version") {
      const auto subcommand_after = [&](int i) {
        if (i + 1 >= argc) return false;
        const auto subs = app.get_subcommand(argv[i])->get_subcommands({});
        return std::any_of(subs.begin(), subs.end(), [&](const CLI::App* c) { return c->get_name() == argv[i + 1]; });
      };
      const auto after_flag = [&](int i) {
        const std::string prev = argv[i - 1];
        return prev.size() > 1 && prev[0] == '-' && prev.find('=') == std::string::npos;
      };
      int pick = -1, first = -1, unflagged = -1;
      for (int i = 1; i < argc && pick < 0; ++i) {
        if (!is_command(argv[i])) continue;
        if (first < 0) first = i;
        if (unflagged < 0 && !after_flag(i)) unflagged = i;
        if (subcommand_after(i)) pick = i;
      }
      if (pick < 0) pick = unflagged >= 0 ? unflagged : first;
      // the help that lists the flag: the subcommand's, or its command's where the flag is the
      // command's (`memory show` takes --home from `memory`)
      const std::string flag_name = name.substr(0, name.find('='));
      const bool sub_has_it = pick >= 0 && subcommand_after(pick) &&
                              (name == "--" || name == "-" ||
                               app.get_subcommand(argv[pick])->get_subcommand(argv[pick + 1])->get_option_no_throw(flag_name) != nullptr);
      const std::string where = pick < 0 ? "COMMAND" : sub_has_it ? std::string(argv[pick]) + " " + argv[pick + 1] : argv[pick];
      fmt::print(stderr, "thrive: usage error: {} before the command: {} (thrive {} --help lists its flags)\n",
                 name, name == "--" || name == "-" ? "only a command's words may follow it" : "a flag follows the command it belongs to",
                 where);
      return 2;
    }
  }
  // CLI11 reads `--home= X` as --home X (the next word becomes the value); an empty value after
  // '=' is refused here, naming the flag, like `--home ""` (refuse_bad_values)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {  // only a command's FILE may follow (refuse_bad_values)
      ctx.after_dashes.assign(argv + i + 1, argv + argc);
      break;
    }
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=' && a.find('=') == a.size() - 1) {
      fmt::print(stderr, "thrive: usage error: {}: expected a value after '='\n", a);
      return 2;
    }
  }
  // every option's value checked once the whole line is parsed, before any command runs
  app.parse_complete_callback([&app, &ctx] { thrive::cli::refuse_bad_values(app, ctx); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {  // one line, like every other error
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fflush(stdout);
    // the help of the deepest command parsed before the error, which lists the flags it takes, or
    // of the command above it that owns the flag the message names (`memory show --home` is
    // `memory`'s flag, which `memory show --help` does not list)
    std::vector<const CLI::App*> chain{&app};
    while (!chain.back()->get_subcommands().empty()) chain.push_back(chain.back()->get_subcommands().front());
    const std::string what = e.what();
    const size_t dash = what.find("--");
    const std::string flag = dash == std::string::npos ? "" : what.substr(dash, what.find_first_of(" =:,'\"", dash) - dash);
    size_t owner = chain.size() - 1;
    if (flag.size() > 2 && chain[owner]->get_option_no_throw(flag) == nullptr)
      for (size_t i = owner; i-- > 0;)  // up to thrive itself (--version, --home before the command)
        if (chain[i]->get_option_no_throw(flag) != nullptr) {
          owner = i;
          break;
        }
    std::string where;
    for (size_t i = 1; i <= owner; ++i) where += " " + chain[i]->get_name();
    fmt::print(stderr, "thrive: usage error: {} (thrive{} --help lists {})\n", thrive::cli::usage_message(e.what()),
               where, where.empty() ? "the commands and flags" : "its flags");
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {  // e.g. a symlink loop in a given path
    std::fflush(stdout);
    fmt::print(stderr, "thrive: input error: {}\n", e.what());
    return thrive::exit_code(thrive::ErrorCategory::kInput);
  } catch (const thrive::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "thrive: {} error: {}\n", thrive::category_name(e.category()), e.what());
    return thrive::exit_code(e.category());
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    fmt::print(stderr, "thrive: backend error: out of host memory (shapes larger than this machine can hold: "
               "THRIVE_* model dimensions for the kernel commands, config.json and --batch/--prompt/--gen for "
               "e2e)\n");
    return thrive::exit_code(thrive::ErrorCategory::kBackend);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "thrive: internal error: {}\n", e.what());
    return 70;
  }
  return ctx.exit_code;
}
