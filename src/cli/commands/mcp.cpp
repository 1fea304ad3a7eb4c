// thrive mcp: serve THRIVE's tools over the Model Context Protocol on stdio.
// stdout carries protocol messages only: the process's fd 1 is pointed at stderr
// before anything else runs (logs, compiler output, a candidate that prints), and the
// protocol writes to a private duplicate of the original stdout.
#include <unistd.h>

#include <cstdio>

#include <spdlog/spdlog.h>

#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"
#include "thrive/mcp/server.hpp"

namespace thrive::cli {

void register_mcp(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "mcp", "Serve the kernel tools over the Model Context Protocol (stdio, JSON-RPC 2.0)");
  add_common_flags(*cmd, ctx.flags, true);
  cmd->callback([&ctx] {
    std::FILE* protocol = take_stdout("mcp");
    // Open memory and the device before the first message, so a bad THRIVE_HOME or a
    // missing GPU is one clear error at start-up rather than a failure per tool call.
    auto& tb = ctx.toolbox();
    spdlog::info("mcp: serving {} tools on stdio ({} backend, {})",
                 mcp::Server::tool_definitions().size(), tb.backend_name(), tb.device_key());
    mcp::Server server(tb, THRIVE_VERSION_STRING);
    server.serve(stdin, protocol);
    std::fclose(protocol);
  });
}

}  // namespace thrive::cli
