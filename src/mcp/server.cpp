#include "thrive/mcp/server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "thrive/core/error.hpp"

namespace thrive::mcp {
namespace {

constexpr size_t kMaxSourceBytes = 1 << 20;  // a kernel file; anything larger is refused
constexpr int kMaxDepth = 64;                  // JSON nesting of one message

const char* const kInstructions =
    "THRIVE's kernel tools. Start with list_ops and get_op_spec (tensors in ABI order, "
    "template, tolerances). Submit a whole kernel file (the '// @thrive' header lines plus "
    "source, see docs/kernel-format.md) to compile, verify or benchmark; benchmark verifies "
    "first and records a passing kernel in memory. A rejected candidate comes back with "
    "isError and its verdict (status, error figures, compiler log).";

nlohmann::json rpc_error(const nlohmann::json& id, int code, const std::string& message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

nlohmann::json rpc_result(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

// A tool result: structured content plus the same as text for clients that only read text.
nlohmann::json tool_result(const std::string& summary, nlohmann::json structured, bool is_error) {
  std::string text = summary;
  if (!structured.empty())
    text += "\n" + structured.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  return {{"content", nlohmann::json::array({{{"type", "text"}, {"text", text}}})},
          {"structuredContent", std::move(structured)},
          {"isError", is_error}};
}

// ---- argument access: a bad argument is a tool error the model can correct ------------
std::string str_arg(const nlohmann::json& args, const char* name, bool required = true) {
  auto it = args.find(name);
  if (it == args.end() || it->is_null()) {
    if (required) fail(ErrorCategory::kUsage, "argument '{}' is required", name);
    return "";
  }
  if (!it->is_string())
    fail(ErrorCategory::kUsage, "argument '{}' must be a string, got {}", name, it->type_name());
  std::string v = it->get<std::string>();
  if (v.find('\0') != std::string::npos)
    fail(ErrorCategory::kUsage, "argument '{}' contains a NUL character", name);
  return v;
}

std::vector<std::string> str_list_arg(const nlohmann::json& args, const char* name, bool required) {
  auto it = args.find(name);
  if (it == args.end() || it->is_null()) {
    if (required) fail(ErrorCategory::kUsage, "argument '{}' is required", name);
    return {};
  }
  if (!it->is_array())
    fail(ErrorCategory::kUsage, "argument '{}' must be an array of strings, got {}", name,
         it->type_name());
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string())
      fail(ErrorCategory::kUsage, "argument '{}' must be an array of strings; found {}", name,
           v.type_name());
    out.push_back(v.get<std::string>());
    if (out.back().find('\0') != std::string::npos)
      fail(ErrorCategory::kUsage, "argument '{}' contains a NUL character", name);
  }
  return out;
}

nlohmann::json op_names() {
  nlohmann::json names = nlohmann::json::array();
  for (const auto& op : ops::registry()) names.push_back(op->name());
  return names;
}

nlohmann::json schema(nlohmann::json properties, std::vector<std::string> required) {
  nlohmann::json s = {{"type", "object"}, {"properties", std::move(properties)},
                      {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  return s;
}

nlohmann::json op_property() {
  return {{"type", "string"}, {"enum", op_names()}, {"description", "Op name (see list_ops)"}};
}
nlohmann::json source_property() {
  return {{"type", "string"},
          {"description", "The whole kernel file: '// @thrive op|backend|entry|launch' header lines "
                          "then the source (docs/kernel-format.md); at most 1 MiB"}};
}
nlohmann::json shape_property() {
  return {{"type", "string"},
          {"description", "Shape label from list_ops, e.g. T=4096 (default: the op's largest "
                          "benchmark shape that fits)"}};
}

// The verdict of one candidate evaluation, as structured content.
nlohmann::json verdict(const tools::Toolbox& tb, const backend::KernelSource& k,
                       const std::string& shape, const sandbox::EvalResult& r) {
  nlohmann::json j = r;
  if (r.bench.reps == 0) j.erase("bench");  // compile/verify only, or it never ran
  if (r.post_verify.cases.empty()) j.erase("post_verify");
  j["op"] = k.op;
  j["shape"] = shape;
  j["kernel_id"] = tb.kernel_id(k);
  j["backend"] = tb.backend_name();
  j["device"] = tb.device_key();
  return j;
}

std::string summary_of(const sandbox::EvalResult& r) {
  std::string s = sandbox::status_name(r.status);
  if (!r.detail.empty()) s += ": " + r.detail;
  return s;
}

}  // namespace

const std::vector<std::string>& protocol_versions() {
  static const std::vector<std::string> v = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
  return v;
}

Server::Server(tools::Toolbox& tools, std::string version)
    : tools_(tools), version_(std::move(version)) {}

const nlohmann::json& Server::tool_definitions() {
  static const nlohmann::json definitions = build_tool_definitions();
  return definitions;
}

nlohmann::json Server::build_tool_definitions() {
  using J = nlohmann::json;
  auto tool = [](const char* name, const char* title, const char* description, J input) {
    return J{{"name", name}, {"title", title}, {"description", description}, {"inputSchema", input}};
  };
  // Properties of the tools that take a kernel file at a shape (verify, benchmark, profile).
  const J kernel_at_shape = {{"op", op_property()}, {"source", source_property()}, {"shape", shape_property()}};
  J tools = J::array();
  tools.push_back(tool("list_ops", "List target ops",
                       "The target ops at the configured model dimensions: trait, summary, benchmark "
                       "shapes with their byte and flop model, backends; plus this server's backend "
                       "and device.",
                       schema(J::object(), {})));
  tools.push_back(tool("get_op_spec", "Op contract",
                       "One op's contract: formula, tensors in ABI order with dtypes, dims, scalars, "
                       "shapes, verification shapes, tolerances, the template's parameters and the "
                       "kernel ABI header for this backend.",
                       schema({{"op", op_property()}}, {"op"})));
  tools.push_back(tool("compile", "Compile a kernel",
                       "Compiles a kernel file in the sandbox. Returns the status, the compiler log and "
                       "resource usage (registers, spills, shared memory on CUDA).",
                       schema({{"op", op_property()}, {"source", source_property()}}, {"op", "source"})));
  tools.push_back(tool("verify", "Verify a kernel",
                       "Compiles and verifies a kernel against the float64 reference on fresh random "
                       "inputs at several shapes (ragged included), with poisoned outputs, guard "
                       "regions, unchanged-input and determinism checks. Returns per-case figures.",
                       schema(kernel_at_shape,
                              {"op", "source"})));
  tools.push_back(tool("benchmark", "Benchmark a kernel",
                       "Compiles, verifies and benchmarks a kernel at one shape (median with min/max, "
                       "launched and CUDA-graph times, GB/s, percent of the measured copy ceiling), "
                       "measures the eager baseline, and records a passing kernel in memory (the best "
                       "per op, shape and device is kept).",
                       schema(kernel_at_shape,
                              {"op", "source"})));
  tools.push_back(tool("profile", "Analyst diagnosis",
                       "Benchmarks a kernel (the given source, else the best kernel in memory for the "
                       "shape) and returns the analyst's reading: time against the roofline floor, "
                       "achieved bandwidth, parallelism, and the bottleneck (overhead, parallelism, "
                       "compute, traffic or memory).",
                       schema(kernel_at_shape,
                              {"op"})));
  tools.push_back(tool("read_memory", "Read memory",
                       "Long- and short-term memory for an op and shape: the best kernel on this "
                       "device, the strategy cards with their evidence, and the trajectory of attempts.",
                       schema({{"op", op_property()}, {"shape", shape_property()}}, {"op"})));
  tools.push_back(tool(
      "record_strategy", "Record a strategy card",
      "Adds a learned strategy card to long-term memory: a change (template parameters it sets) "
      "with the op traits and bottlenecks it addresses. The id must be new.",
      schema({{"id", {{"type", "string"}}},
              {"title", {{"type", "string"}}},
              {"description", {{"type", "string"}}},
              {"traits", {{"type", "array"},
                          {"items", {{"type", "string"}, {"enum", {"elementwise", "row_reduction", "attention"}}}}}},
              {"bottlenecks", {{"type", "array"}, {"items", {{"type", "string"}}}}},
              {"set", {{"type", "object"},
                       {"description", "Template parameters and values, e.g. {\"VEC\": \"8\"}"},
                       {"additionalProperties", {{"type", "string"}}}}}},
             {"id", "title", "traits", "set"})));
  tools.push_back(tool("leaderboard", "Leaderboard",
                       "The best verified kernel per op, shape and device: time (µs), speedup over "
                       "eager, GB/s, percent of the copy ceiling, kernel id.",
                       schema({{"op", op_property()}}, {})));
  return tools;
}

nlohmann::json Server::call_tool(const std::string& name, const nlohmann::json& args) {
  auto& tb = tools_;
  // The schemas say additionalProperties: false; a misspelt argument is an error, not ignored.
  for (const auto& def : tool_definitions()) {
    if (def["name"] != name) continue;
    const auto& props = def["inputSchema"]["properties"];
    for (auto it = args.begin(); it != args.end(); ++it)
      if (!props.contains(it.key())) {
        std::string known;
        for (auto p = props.begin(); p != props.end(); ++p) known += (known.empty() ? "" : ", ") + p.key();
        fail(ErrorCategory::kUsage, "{}: unknown argument '{}'; expected {}", name, it.key(),
             known.empty() ? "none" : known);
      }
  }
  // Every candidate a client submits is part of the task's trajectory (short-term memory).
  auto record_attempt = [&](const backend::KernelSource& k, const std::string& shape,
                            const sandbox::EvalResult& r, double eager_us) {
    tb.store().record_attempt(tb.attempt_record(k, shape, "mcp-" + name, r, eager_us));
  };
  auto kernel_arg = [&](const std::string& op) {
    const std::string source = str_arg(args, "source");
    if (source.size() > kMaxSourceBytes)
      fail(ErrorCategory::kUsage, "argument 'source' is {} bytes; at most {}", source.size(),
           kMaxSourceBytes);
    auto k = backend::KernelSource::parse(source, "mcp:" + name);
    if (k.op != op)
      fail(ErrorCategory::kUsage, "the source declares '@thrive op: {}' but argument 'op' is {}",
           k.op, op);
    return k;
  };
  auto op_arg = [&]() -> const ops::Op& { return ops::find_op(str_arg(args, "op")); };

  if (name == "list_ops") {
    nlohmann::json j = {{"ops", tools::ops_catalog(tb.config().model)},
                        {"backend", tb.backend_name()},
                        {"device", tb.device_key()}};
    return tool_result(fmt::format("{} ops on {}", j["ops"].size(), tb.device_key()), j, false);
  }
  if (name == "get_op_spec") {
    const auto& op = op_arg();
    return tool_result("spec of " + op.name(), tb.get_op_spec(op.name()), false);
  }
  if (name == "compile") {
    const auto& op = op_arg();
    auto k = kernel_arg(op.name());
    auto r = tb.compile(k);
    return tool_result(summary_of(r), verdict(tb, k, "", r), r.status != sandbox::Status::kPassed);
  }
  if (name == "verify") {
    const auto& op = op_arg();
    auto k = kernel_arg(op.name());
    const std::string named = str_arg(args, "shape", false);
    const auto shape = tb.shape_or_largest(op, named);
    auto r = tb.verify(k, shape, !named.empty());  // a named shape verified whole, as `thrive verify --shape`
    record_attempt(k, shape.label, r, 0);
    return tool_result(summary_of(r), verdict(tb, k, shape.label, r),
                       r.status != sandbox::Status::kPassed);
  }
  if (name == "benchmark") {
    const auto& op = op_arg();
    auto k = kernel_arg(op.name());
    const auto shape = tb.shape_or_largest(op, str_arg(args, "shape", false));
    auto sub = tb.submit(k, shape, "thrive mcp: benchmark " + op.name() + " " + shape.label);
    record_attempt(k, shape.label, sub.result, sub.eager_us);
    auto j = verdict(tb, k, shape.label, sub.result);
    const bool ok = sub.result.status == sandbox::Status::kPassed;
    std::string summary = summary_of(sub.result);
    if (ok) {
      j["eager_us"] = sub.eager_us;
      j["speedup_vs_eager"] = sub.record.speedup;
      j["time_us"] = sub.result.bench.time_us();
      j["new_best"] = sub.new_best;
      summary = fmt::format("passed: {:.2f} us, {:.1f} GB/s = {:.1f}% of the copy ceiling, {:.2f}x "
                            "eager{}",
                            sub.result.bench.time_us(), sub.result.bench.bandwidth_gbps,
                            sub.result.bench.percent_of_peak, sub.record.speedup,
                            sub.new_best ? " (new best in memory)" : "");
    }
    return tool_result(summary, j, !ok);
  }
  if (name == "profile") {
    const auto& op = op_arg();
    const auto shape = tb.shape_or_largest(op, str_arg(args, "shape", false));
    backend::KernelSource k;
    if (!str_arg(args, "source", false).empty()) {
      k = kernel_arg(op.name());
    } else {
      auto best = tb.store().best(op.name(), shape.label, tb.device_key());
      if (!best)
        fail(ErrorCategory::kUsage,
             "no kernel in memory for {} at {} on {}: pass 'source' or benchmark one first",
             op.name(), shape.label, tb.device_key());
      k = backend::KernelSource::parse(best->source, "memory:" + best->kernel_id);
    }
    auto r = tb.benchmark(k, shape);
    auto j = verdict(tb, k, shape.label, r);
    if (r.status != sandbox::Status::kPassed) return tool_result(summary_of(r), j, true);
    const auto p = tb.profile(op, shape, r.bench);
    j["profile"] = p;
    return tool_result("bottleneck: " + p.bottleneck + "; " + p.notes, j, false);
  }
  if (name == "read_memory") {
    const auto& op = op_arg();
    const auto shape = tb.shape_or_largest(op, str_arg(args, "shape", false));
    auto j = tb.read_memory(op.name(), shape.label);
    j["op"] = op.name();
    j["shape"] = shape.label;
    return tool_result(fmt::format("memory for {} at {}: {} cards, {} attempts", op.name(),
                                   shape.label, j["cards"].size(), j["trajectory"].size()),
                       j, false);
  }
  if (name == "record_strategy") {
    memory::StrategyCard c;
    c.id = str_arg(args, "id");
    c.title = str_arg(args, "title");
    c.description = str_arg(args, "description", false);
    c.backend = tb.backend_name();
    c.traits = str_list_arg(args, "traits", true);
    c.bottlenecks = str_list_arg(args, "bottlenecks", false);
    c.origin = "learned";
    auto set = args.find("set");
    if (set == args.end() || !set->is_object() || set->empty())
      fail(ErrorCategory::kUsage, "argument 'set' must be a non-empty object of parameter values");
    c.set = nlohmann::json::object();
    for (auto it = set->begin(); it != set->end(); ++it) {
      if (!it->is_string() && !it->is_number_integer())
        fail(ErrorCategory::kUsage, "set.{} must be a string (or integer) value, got {}", it.key(),
             it->type_name());
      c.set[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
    }
    tb.record_strategy(c);  // the card's checks: Toolbox::record_strategy
    return tool_result("recorded strategy card " + c.id, nlohmann::json(c), false);
  }
  if (name == "leaderboard") {
    std::string op = str_arg(args, "op", false);
    if (!op.empty()) op = ops::find_op(op).name();
    nlohmann::json j = {{"entries", tools::leaderboard_json(tb.store(), "", op)}};
    return tool_result(fmt::format("{} entries", j["entries"].size()), j, false);
  }
  // Unreachable: tools/call checks the name against tool_definitions() first.
  fail(ErrorCategory::kUsage, "unknown tool '{}'", name);
}

nlohmann::json Server::handle_request(const nlohmann::json& m) {
  const nlohmann::json& id = m["id"];
  const std::string method = m["method"].get<std::string>();
  const nlohmann::json params = m.contains("params") ? m["params"] : nlohmann::json::object();
  if (!params.is_object() && !params.is_array())
    return rpc_error(id, kInvalidParams, "params must be an object");

  if (method == "ping") return rpc_result(id, nlohmann::json::object());
  if (method == "initialize") {
    if (!params.is_object() || !params.contains("protocolVersion") ||
        !params["protocolVersion"].is_string())
      return rpc_error(id, kInvalidParams, "initialize: params.protocolVersion (string) is required");
    const std::string asked = params["protocolVersion"].get<std::string>();
    const auto& versions = protocol_versions();
    protocol_ = std::find(versions.begin(), versions.end(), asked) != versions.end() ? asked
                                                                                      : versions.back();
    initialized_ = true;
    std::string client = "unknown client";
    if (params.contains("clientInfo") && params["clientInfo"].is_object() &&
        params["clientInfo"].contains("name") && params["clientInfo"]["name"].is_string())
      client = params["clientInfo"]["name"].get<std::string>();
    spdlog::info("mcp: initialize from {} (asked {}, using {})", client, asked, protocol_);
    return rpc_result(id, {{"protocolVersion", protocol_},
                           {"capabilities", {{"tools", {{"listChanged", false}}}}},
                           {"serverInfo", {{"name", "thrive"}, {"title", "THRIVE kernel tools"},
                                           {"version", version_}}},
                           {"instructions", kInstructions}});
  }
  if (method != "tools/list" && method != "tools/call")
    return rpc_error(id, kMethodNotFound, "method not found: " + method);
  if (!initialized_)
    return rpc_error(id, kInvalidRequest, method + " before initialize: send initialize first");
  if (method == "tools/list") return rpc_result(id, {{"tools", tool_definitions()}});

  // tools/call
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string())
    return rpc_error(id, kInvalidParams, "tools/call: params.name (string) is required");
  const std::string name = params["name"].get<std::string>();
  const auto& defs = tool_definitions();
  if (std::none_of(defs.begin(), defs.end(), [&](const auto& d) { return d["name"] == name; }))
    return rpc_error(id, kInvalidParams, "unknown tool: " + name);
  nlohmann::json args = params.contains("arguments") ? params["arguments"] : nlohmann::json::object();
  if (args.is_null()) args = nlohmann::json::object();
  if (!args.is_object())
    return rpc_error(id, kInvalidParams, "tools/call: params.arguments must be an object");
  try {
    return rpc_result(id, call_tool(name, args));
  } catch (const Error& e) {
    // Bad arguments, malformed kernel files, storage refusals: the model can act on these.
    return rpc_result(id, tool_result(e.what(), {{"error", e.what()},
                                                 {"category", category_name(e.category())}},
                                      true));
  } catch (const std::exception& e) {
    return rpc_result(id, tool_result(std::string("internal error: ") + e.what(),
                                      {{"error", e.what()}}, true));
  }
}

std::optional<nlohmann::json> Server::handle(const nlohmann::json& message) {
  if (message.is_array()) {
    if (message.empty()) return rpc_error(nullptr, kInvalidRequest, "empty batch");
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : message)
      if (auto r = handle(m.is_array() ? nlohmann::json(nullptr) : m)) out.push_back(std::move(*r));
    if (out.empty()) return std::nullopt;
    return out;
  }
  if (!message.is_object()) return rpc_error(nullptr, kInvalidRequest, "a message must be a JSON object");
  const bool has_id = message.contains("id");
  const nlohmann::json id = has_id ? message["id"] : nlohmann::json(nullptr);
  const auto version = message.find("jsonrpc");
  if (version == message.end() || !version->is_string() || *version != "2.0")
    return rpc_error(has_id && (id.is_string() || id.is_number()) ? id : nullptr, kInvalidRequest,
                     "jsonrpc must be \"2.0\"");
  if (!message.contains("method")) {
    // A response from the client: this server sends no requests, so there is nothing to match.
    if (message.contains("result") || message.contains("error")) return std::nullopt;
    return rpc_error(has_id && (id.is_string() || id.is_number()) ? id : nullptr, kInvalidRequest,
                     "a request needs a method");
  }
  if (!message["method"].is_string())
    return rpc_error(has_id && (id.is_string() || id.is_number()) ? id : nullptr, kInvalidRequest,
                     "method must be a string");
  if (!has_id) {  // notification: never answered
    const std::string method = message["method"].get<std::string>();
    if (method == "notifications/initialized") spdlog::debug("mcp: client initialized");
    else spdlog::debug("mcp: notification {} ignored", method);
    return std::nullopt;
  }
  if (!id.is_string() && !id.is_number_integer())
    return rpc_error(nullptr, kInvalidRequest, "id must be a string or an integer");
  try {
    return handle_request(message);
  } catch (const std::exception& e) {
    return rpc_error(id, kInternalError, std::string("internal error: ") + e.what());
  }
}

std::optional<std::string> Server::handle_line(const std::string& line) {
  // Invalid UTF-8 (echoed in an error, or from a tool's compiler log) is replaced, never
  // a failed dump.
  auto dump = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  if (line.find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
  // Nesting deeper than any MCP message needs is refused before parsing: copying and
  // destroying deeply nested values recurses.
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : line) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  if (max_depth > kMaxDepth)
    return dump(rpc_error(nullptr, kInvalidRequest,
                          fmt::format("message nested {} levels deep; at most {}", max_depth, kMaxDepth)));
  nlohmann::json message;
  try {
    message = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    return dump(rpc_error(nullptr, kParseError, std::string("parse error: ") + e.what()));
  }
  std::optional<nlohmann::json> r;
  try {
    r = handle(message);
  } catch (const std::exception& e) {  // handle() should not throw; the session must survive
    r = rpc_error(nullptr, kInternalError, std::string("internal error: ") + e.what());
  }
  if (!r) return std::nullopt;
  return dump(*r);
}

int Server::serve(std::FILE* in, std::FILE* out) {
  int handled = 0;
  char* buf = nullptr;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&buf, &cap, in)) >= 0) {
    std::string line(buf, size_t(n));
    if (auto reply = handle_line(line)) {
      reply->push_back('\n');
      std::fwrite(reply->data(), 1, reply->size(), out);
      std::fflush(out);
    }
    ++handled;
  }
  std::free(buf);
  return handled;
}

}  // namespace thrive::mcp
