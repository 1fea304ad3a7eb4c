// Model Context Protocol server: THRIVE's agent tools for any MCP client.
//
// Transport: the MCP stdio transport (newline-delimited JSON-RPC 2.0 messages, one per
// line, UTF-8, no embedded newlines). Lifecycle: `initialize` with protocol-version
// negotiation, `notifications/initialized`, then `tools/list`, `tools/call` and `ping`.
// Source: the Model Context Protocol specification, revisions 2024-11-05 to 2025-11-25
// (https://modelcontextprotocol.io/specification), sections Base Protocol, Lifecycle,
// Transports (stdio) and Server Features / Tools.
//
// The tools are the ones every THRIVE agent uses (tools::Toolbox): candidates go
// through the same sandbox, verifier, benchmark protocol and memory. A failed candidate
// is a tool result with isError = true (and its verdict as structured content), never a
// protocol error; protocol errors are reserved for malformed JSON-RPC.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "thrive/tools/toolbox.hpp"

namespace thrive::mcp {

/// Protocol revisions this server negotiates, oldest to newest. An `initialize` that
/// asks for one of them gets it back; any other request gets the newest.
const std::vector<std::string>& protocol_versions();

/// JSON-RPC 2.0 error codes (JSON-RPC 2.0 specification, section 5.1).
enum ErrorCode : int {
  kParseError = -32700,
  kInvalidRequest = -32600,
  kMethodNotFound = -32601,
  kInvalidParams = -32602,
  kInternalError = -32603,
};

class Server {
 public:
  /// `tools` must outlive the server. `version` is reported as serverInfo.version.
  Server(tools::Toolbox& tools, std::string version);

  /// The tool definitions of `tools/list`: name, title, description and an input JSON
  /// Schema (draft 2020-12 subset: type, properties, required, enum, items) per tool.
  /// Built once per process.
  static const nlohmann::json& tool_definitions();

  /// Handles one parsed message: a request (returns its response), a notification
  /// (returns nullopt) or a batch array (returns the array of responses, or nullopt
  /// when it held only notifications). Never throws: failures become JSON-RPC errors.
  std::optional<nlohmann::json> handle(const nlohmann::json& message);

  /// Handles one line of the stdio transport; a line that is not JSON gets a
  /// kParseError response with id null. Blank lines are ignored (nullopt).
  std::optional<std::string> handle_line(const std::string& line);

  /// Reads messages from `in` line by line until EOF and writes each response line to
  /// `out` (flushed per message). Returns the number of messages handled.
  int serve(std::FILE* in, std::FILE* out);

  /// True once `initialize` has been answered.
  bool initialized() const { return initialized_; }

 private:
  static nlohmann::json build_tool_definitions();
  nlohmann::json handle_request(const nlohmann::json& message);
  nlohmann::json call_tool(const std::string& name, const nlohmann::json& args);
  tools::Toolbox& tools_;
  std::string version_;
  std::string protocol_;
  bool initialized_ = false;
};

}  // namespace thrive::mcp
