// The MCP server's protocol handling without a client library: JSON-RPC framing,
// lifecycle, version negotiation, error codes, tool results with isError. The full
// client round trip (official MCP Python SDK) is tests/mcp/test_mcp_sdk.py.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "tests/support/test_support.hpp"
#include "thrive/mcp/server.hpp"

namespace thrive {
namespace {

class McpServer : public ::testing::Test {
 protected:
  test::TempDir home;
  config::Config cfg = test::fast_config(home.path());
  memory::Store store{home.path() + "/memory.db"};
  tools::Toolbox tools{cfg, store, "cpu"};
  mcp::Server server{tools, "test"};

  nlohmann::json call(const std::string& method, nlohmann::json params = nullptr, int id = 1) {
    nlohmann::json m = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
    if (!params.is_null()) m["params"] = std::move(params);
    auto r = server.handle(m);
    EXPECT_TRUE(r.has_value()) << method;
    return r ? *r : nlohmann::json();
  }
  void initialize(const std::string& version = "2025-06-18") {
    auto r = call("initialize", {{"protocolVersion", version}, {"capabilities", nlohmann::json::object()},
                                 {"clientInfo", {{"name", "gtest"}, {"version", "1"}}}});
    ASSERT_TRUE(r.contains("result")) << r.dump();
  }
  nlohmann::json tool(const std::string& name, nlohmann::json args) {
    initialize();
    auto r = call("tools/call", {{"name", name}, {"arguments", std::move(args)}}, 9);
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r["result"];
  }
};

TEST_F(McpServer, InitializeEchoesASupportedVersionElseOffersTheNewest) {
  for (const auto& v : mcp::protocol_versions()) {
    auto r = call("initialize", {{"protocolVersion", v}, {"capabilities", nlohmann::json::object()}});
    EXPECT_EQ(r["result"]["protocolVersion"], v);
  }
  auto r = call("initialize", {{"protocolVersion", "2030-01-01"}, {"capabilities", nlohmann::json::object()}});
  EXPECT_EQ(r["result"]["protocolVersion"], mcp::protocol_versions().back());
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "thrive");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  EXPECT_EQ(r["id"], 1);
  EXPECT_EQ(r["jsonrpc"], "2.0");
}

TEST_F(McpServer, InitializeWithoutAVersionIsInvalidParams) {
  auto r = call("initialize", nlohmann::json::object());
  EXPECT_EQ(r["error"]["code"], mcp::kInvalidParams) << r.dump();
}

TEST_F(McpServer, ToolsBeforeInitializeAreRefusedButPingIsAnswered) {
  EXPECT_EQ(call("tools/list")["error"]["code"], mcp::kInvalidRequest);
  EXPECT_EQ(call("ping")["result"], nlohmann::json::object());
  EXPECT_FALSE(server.initialized());
}

TEST_F(McpServer, NotificationsAndClientResponsesGetNoReply) {
  EXPECT_FALSE(server.handle({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}));
  EXPECT_FALSE(server.handle({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"},
                              {"params", {{"requestId", 3}}}}));
  EXPECT_FALSE(server.handle({{"jsonrpc", "2.0"}, {"id", 5}, {"result", nlohmann::json::object()}}));
}

TEST_F(McpServer, MalformedMessagesGetTheJsonRpcErrorCodes) {
  auto parse = nlohmann::json::parse(*server.handle_line("{not json"));
  EXPECT_EQ(parse["error"]["code"], mcp::kParseError);
  EXPECT_TRUE(parse["id"].is_null());
  EXPECT_FALSE(server.handle_line("   \r\n"));
  EXPECT_EQ((*server.handle(nlohmann::json(42)))["error"]["code"], mcp::kInvalidRequest);
  EXPECT_EQ((*server.handle({{"jsonrpc", "1.0"}, {"id", 1}, {"method", "ping"}}))["error"]["code"],
            mcp::kInvalidRequest);
  EXPECT_EQ((*server.handle({{"jsonrpc", "2.0"}, {"id", 1}, {"method", 7}}))["error"]["code"],
            mcp::kInvalidRequest);
  EXPECT_EQ((*server.handle({{"jsonrpc", "2.0"}, {"id", {1, 2}}, {"method", "ping"}}))["error"]["code"],
            mcp::kInvalidRequest);
  EXPECT_EQ((*server.handle({{"jsonrpc", "2.0"}, {"id", 1}}))["error"]["code"], mcp::kInvalidRequest);
  EXPECT_EQ(call("resources/list")["error"]["code"], mcp::kMethodNotFound);
  EXPECT_EQ((*server.handle(nlohmann::json::array()))["error"]["code"], mcp::kInvalidRequest);
}

TEST_F(McpServer, HostileLinesGetErrorsAndTheServerKeepsServing) {
  const std::string ping = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}";
  const std::vector<std::string> hostile = {
      "{\"jsonrpc\":2,\"method\":\"x\"}",             // jsonrpc not a string (notification)
      "{\"jsonrpc\":2,\"id\":1,\"method\":\"x\"}",  // ... and as a request
      "\xff\xfe{",                                     // invalid UTF-8
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"a\":\"\xff\"}}",
      std::string(200000, '[') + std::string(200000, ']'),  // nesting far beyond any message
      "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
      "\"2025-06-18\",\"clientInfo\":{\"name\":5}}}",
  };
  for (const auto& line : hostile) {
    std::optional<std::string> reply;
    ASSERT_NO_THROW(reply = server.handle_line(line)) << line.substr(0, 80);
    if (reply) {
      EXPECT_TRUE(nlohmann::json::accept(*reply)) << *reply;
    }
    auto pong = server.handle_line(ping);
    ASSERT_TRUE(pong.has_value());
    EXPECT_EQ(nlohmann::json::parse(*pong)["result"], nlohmann::json::object()) << line.substr(0, 80);
  }
  auto deep = nlohmann::json::parse(*server.handle_line(std::string(100, '[') + std::string(100, ']')));
  EXPECT_EQ(deep["error"]["code"], mcp::kInvalidRequest);
}

TEST_F(McpServer, ParamsCannotNameFilesOutsideTheArchive) {
  const std::string evil = "// @thrive params: Y=/../../../../../tmp/thrive-pwned\n" +
                           test::kernel_text("rmsnorm_residual", test::rmsnorm_body());
  auto r = tool("benchmark", {{"op", "rmsnorm_residual"}, {"source", evil}});
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("param Y"), std::string::npos)
      << r["content"][0]["text"];
  EXPECT_FALSE(std::filesystem::exists("/tmp/thrive-pwned.cpp"));
}

TEST_F(McpServer, UnknownArgumentsAreToolErrorsAsTheSchemaSays) {
  auto r = tool("get_op_spec", {{"op", "softmax"}, {"verbose", true}});
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("verbose"), std::string::npos);
}

TEST_F(McpServer, TwoSourcesWithTheSameParamsKeepSeparateRecords) {
  const std::string a = "// @thrive params: VEC=8\n" + test::kernel_text("rmsnorm_residual", test::rmsnorm_body());
  const std::string b = "// @thrive params: VEC=8\n" +
                        test::kernel_text("rmsnorm_residual", test::rmsnorm_body("(void)0;"));
  auto ra = tool("benchmark", {{"op", "rmsnorm_residual"}, {"source", a}});
  auto rb = tool("benchmark", {{"op", "rmsnorm_residual"}, {"source", b}});
  ASSERT_FALSE(ra["isError"].get<bool>()) << ra.dump();
  ASSERT_FALSE(rb["isError"].get<bool>()) << rb.dump();
  EXPECT_NE(ra["structuredContent"]["kernel_id"], rb["structuredContent"]["kernel_id"]);
  EXPECT_EQ(store.kernels().size(), 2u);
}

TEST_F(McpServer, ALongNonAsciiCompilerLogDoesNotSinkAPassingKernel) {
  std::string warnings;
  for (int i = 0; i < 60; ++i) warnings += "#warning \"" + std::string(200, 'x') + "\u00e9\u00e9\u00e9\"\n";
  const std::string src = test::kernel_text("rmsnorm_residual", test::rmsnorm_body(), warnings);
  auto r = tool("benchmark", {{"op", "rmsnorm_residual"}, {"source", src}});
  ASSERT_FALSE(r["isError"].get<bool>()) << r["content"][0]["text"].get<std::string>().substr(0, 400);
  EXPECT_GT(r["structuredContent"]["compile_log"].get<std::string>().size(), 8000u);
  EXPECT_EQ(store.kernels().size(), 1u);
}

TEST_F(McpServer, BatchesAnswerEveryRequestInOrder) {
  nlohmann::json batch = nlohmann::json::array(
      {{{"jsonrpc", "2.0"}, {"id", "a"}, {"method", "ping"}},
       {{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
       {{"jsonrpc", "2.0"}, {"id", "b"}, {"method", "nope"}}});
  auto r = server.handle(batch);
  ASSERT_TRUE(r && r->is_array());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0]["id"], "a");
  EXPECT_EQ((*r)[1]["error"]["code"], mcp::kMethodNotFound);
}

TEST_F(McpServer, ToolsListGivesEveryToolAnObjectSchema) {
  initialize();
  auto r = call("tools/list");
  const auto& tools_list = r["result"]["tools"];
  ASSERT_EQ(tools_list.size(), 9u);
  for (const auto& t : tools_list) {
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t.dump();
    EXPECT_FALSE(t["description"].get<std::string>().empty());
    for (const auto& req : t["inputSchema"].value("required", nlohmann::json::array()))
      EXPECT_TRUE(t["inputSchema"]["properties"].contains(req)) << t["name"] << " requires " << req;
  }
}

TEST_F(McpServer, UnknownToolIsInvalidParamsAndBadArgumentsAreToolErrors) {
  initialize();
  EXPECT_EQ(call("tools/call", {{"name", "rm_rf"}})["error"]["code"], mcp::kInvalidParams);
  EXPECT_EQ(call("tools/call", {{"name", "verify"}, {"arguments", 3}})["error"]["code"],
            mcp::kInvalidParams);
  auto missing = tool("verify", {{"op", "softmax"}});
  EXPECT_TRUE(missing["isError"].get<bool>());
  EXPECT_NE(missing["content"][0]["text"].get<std::string>().find("source"), std::string::npos);
  auto typed = tool("get_op_spec", {{"op", 5}});
  EXPECT_TRUE(typed["isError"].get<bool>());
  auto other_op = tool("compile", {{"op", "rope"}, {"source", test::kernel_text("softmax", "return 0;")}});
  EXPECT_TRUE(other_op["isError"].get<bool>());
  EXPECT_NE(other_op["structuredContent"]["error"].get<std::string>().find("softmax"), std::string::npos);
  auto not_a_kernel = tool("compile", {{"op", "softmax"}, {"source", "int main() {}"}});
  EXPECT_TRUE(not_a_kernel["isError"].get<bool>());
  auto bad_card = tool("record_strategy", {{"id", "x"}, {"title", "t"}, {"traits", {"sorting"}},
                                           {"set", {{"VEC", "8"}}}});
  EXPECT_TRUE(bad_card["isError"].get<bool>());
  EXPECT_NE(bad_card["content"][0]["text"].get<std::string>().find("sorting"), std::string::npos);
}

TEST_F(McpServer, AWrongKernelIsAToolResultWithItsVerdict) {
  auto r = tool("verify", {{"op", "rmsnorm_residual"},
                           {"source", test::kernel_text("rmsnorm_residual",
                                                        test::rmsnorm_body("for (int64_t i = 0; i < T * H; ++i) out[i] = 0;"))}});
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_EQ(r["structuredContent"]["status"], "incorrect");
  EXPECT_GT(r["structuredContent"]["verify"]["max_rel_err"].get<double>(), 0.0);
  EXPECT_FALSE(r["structuredContent"]["kernel_id"].get<std::string>().empty());
}

TEST_F(McpServer, ACorrectKernelIsVerifiedAndBenchmarkedIntoMemory) {
  const std::string src = test::kernel_text("rmsnorm_residual", test::rmsnorm_body());
  auto v = tool("verify", {{"op", "rmsnorm_residual"}, {"source", src}});
  EXPECT_FALSE(v["isError"].get<bool>()) << v.dump();
  auto b = tool("benchmark", {{"op", "rmsnorm_residual"}, {"source", src}});
  ASSERT_FALSE(b["isError"].get<bool>()) << b.dump();
  EXPECT_GT(b["structuredContent"]["eager_us"].get<double>(), 0.0);
  auto board = tool("leaderboard", {{"op", "rmsnorm_residual"}});
  ASSERT_EQ(board["structuredContent"]["entries"].size(), 1u);
  EXPECT_EQ(board["structuredContent"]["entries"][0]["kernel_id"], b["structuredContent"]["kernel_id"]);
}

TEST_F(McpServer, ServeWritesOneLinePerResponseAndNothingForNotifications) {
  std::FILE* in = tmpfile();
  std::FILE* out = tmpfile();
  const std::string input =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
      "\n"
      "[1,2\n"
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";  // last line without newline
  std::fwrite(input.data(), 1, input.size(), in);
  std::rewind(in);
  server.serve(in, out);
  std::rewind(out);
  std::vector<nlohmann::json> lines;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, out)) lines.push_back(nlohmann::json::parse(buf));
  std::fclose(in);
  std::fclose(out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["id"], 1);
  EXPECT_EQ(lines[1]["error"]["code"], mcp::kParseError);
  EXPECT_EQ(lines[2]["id"], 2);
}

}  // namespace
}  // namespace thrive
