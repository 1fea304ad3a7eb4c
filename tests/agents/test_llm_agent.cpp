// The LLM agent offline: a local HTTP server inside the test speaks the Anthropic Messages and
// OpenAI chat-completions wire formats (as their public documentation defines them) and replays
// scripted model turns, including tool calls that carry real kernel source, so the whole loop
// runs without a network: the happy path to a verified kernel on both APIs, autonomous mode,
// 429 with Retry-After, 5xx, malformed, empty and truncated replies, a read timeout, unknown
// tools and bad arguments, a model that never calls a tool or never stops, an invalid key (one
// clear error, no retries, the key never echoed) and the USD budget stop.
#include <gtest/gtest.h>

#include <algorithm>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include "tests/support/test_support.hpp"
#include "thrive/agents/llm_agent.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive {
namespace {

using nlohmann::json;

// An HTTP/1.1 server on 127.0.0.1 that answers POSTs from a script, in arrival order, one
// thread per connection (so a delayed answer does not hold up the client's retry).
class FakeServer {
 public:
  struct Response {
    int status = 200;
    std::string body;
    std::vector<std::string> headers;
    int delay_ms = 0;
    bool truncate = false;  ///< announce the full length, send half, close
  };
  struct Request {
    std::string path, head, body;
  };

  FakeServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd_, 16);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    for (auto& t : workers_) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void push(Response r) {
    std::lock_guard<std::mutex> g(mu_);
    script_.push_back(std::move(r));
  }
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> g(mu_);
    return requests_;
  }

 private:
  void loop() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) break;
      workers_.emplace_back([this, c] {
        serve(c);
        close(c);
      });
    }
  }
  void serve(int c) {
    std::string data;
    char buf[65536];
    size_t header_end = std::string::npos, want = 0;
    while (true) {
      const ssize_t n = read(c, buf, sizeof buf);
      if (n <= 0) return;
      data.append(buf, size_t(n));
      if (header_end == std::string::npos && (header_end = data.find("\r\n\r\n")) != std::string::npos) {
        std::string lower = data.substr(0, header_end);
        for (auto& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        const auto at = lower.find("content-length:");
        want = at == std::string::npos ? 0 : std::stoul(lower.substr(at + 15));
      }
      if (header_end != std::string::npos && data.size() >= header_end + 4 + want) break;
    }
    Request req;
    req.head = data.substr(0, header_end);
    req.path = req.head.substr(req.head.find(' ') + 1);
    req.path = req.path.substr(0, req.path.find(' '));
    req.body = data.substr(header_end + 4, want);
    Response r;
    {
      std::lock_guard<std::mutex> g(mu_);
      requests_.push_back(req);
      if (script_.empty()) {
        r.status = 500;
        r.body = R"({"error": "no scripted response left"})";
      } else {
        r = script_.front();
        script_.pop_front();
      }
    }
    if (r.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(r.delay_ms));
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
                      std::to_string(r.body.size()) + "\r\nConnection: close\r\n";
    for (const auto& h : r.headers) out += h + "\r\n";
    out += "\r\n" + (r.truncate ? r.body.substr(0, r.body.size() / 2) : r.body);
    (void)!write(c, out.data(), out.size());
  }

  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> workers_;  // touched by the accept thread only, joined after it
  std::mutex mu_;
  std::deque<Response> script_;
  std::vector<Request> requests_;
};

// ---- scripted model turns ----

json usage(int64_t in = 100, int64_t out = 50) { return {{"input_tokens", in}, {"output_tokens", out}}; }

std::string anthropic_tool(const std::string& id, const std::string& name, json input, json u = usage()) {
  return json{{"id", "msg_" + id}, {"type", "message"}, {"role", "assistant"}, {"model", "test-model"},
              {"content", {{{"type", "text"}, {"text", "calling " + name}},
                           {{"type", "tool_use"}, {"id", id}, {"name", name}, {"input", input}}}},
              {"stop_reason", "tool_use"}, {"usage", u}}
      .dump();
}
std::string anthropic_text(const std::string& text, json u = usage()) {
  return json{{"id", "msg_t"}, {"type", "message"}, {"role", "assistant"}, {"model", "test-model"},
              {"content", {{{"type", "text"}, {"text", text}}}}, {"stop_reason", "end_turn"}, {"usage", u}}
      .dump();
}
std::string openai_tool(const std::string& id, const std::string& name, const json& input) {
  return json{{"id", "chatcmpl-1"}, {"object", "chat.completion"},
              {"choices", {{{"index", 0}, {"finish_reason", "tool_calls"},
                            {"message", {{"role", "assistant"}, {"content", nullptr},
                                         {"tool_calls", {{{"id", id}, {"type", "function"},
                                                          {"function", {{"name", name}, {"arguments", input.dump()}}}}}}}}}}},
              {"usage", {{"prompt_tokens", 120}, {"completion_tokens", 60}}}}
      .dump();
}
std::string openai_text(const std::string& text) {
  return json{{"id", "chatcmpl-2"}, {"object", "chat.completion"},
              {"choices", {{{"index", 0}, {"finish_reason", "stop"}, {"message", {{"role", "assistant"}, {"content", text}}}}}},
              {"usage", {{"prompt_tokens", 80}, {"completion_tokens", 20}}}}
      .dump();
}

std::string good_kernel() { return test::kernel_text("rmsnorm_residual", test::rmsnorm_body("")); }

class LlmAgentTest : public ::testing::Test {
 protected:
  test::TempDir home;
  config::Config cfg = [&] {
    auto c = test::fast_config(home.path());
    c.model = test::small_model();
    return c;
  }();
  memory::Store store{home.path() + "/memory.db"};
  tools::Toolbox tools{cfg, store, "cpu"};
  FakeServer server;
  const std::string key = "sk-test-SECRET-KEY-123456";

  agents::LlmSettings settings(bool autonomous = false) {
    agents::LlmSettings s;
    s.autonomous = autonomous;
    for (const char* role : {"kernel-generator", "kernel-optimizer", "kernel-repairer", "profiler-analyst", "orchestrator"})
      s.models[role] = "test-model";
    s.prices.per_mtok["test-model"] = {3.0, 15.0};
    s.prices.path = "test";
    s.prompts_dir = std::string(THRIVE_SOURCE_DIR) + "/prompts/roles";
    s.max_turns = 6;
    s.usd_cap = 1.0;
    s.http.backoff_s = 0.01;
    s.http.timeout_s = 5;
    return s;
  }
  agents::LlmAgent agent(const std::string& provider, agents::LlmSettings s) {
    auto base = provider == "openai" ? server.url() + "/v1" : server.url();
    return agents::LlmAgent(tools, s, agents::llm::make_client(provider, base, key, s.http));
  }
  agents::Task task(int rounds = 1) {
    const auto& op = ops::find_op("rmsnorm_residual");
    return {op.name(), tools.shapes_for(op).front(), rounds, 1, 0, "test", 2.0};
  }
  void push(const std::string& body, int status = 200) { server.push({status, body, {}, 0, false}); }
};

TEST_F(LlmAgentTest, AnthropicHappyPathReachesAVerifiedKernelAndPricesEveryCall) {
  push(anthropic_tool("t1", "get_op_spec", json::object()));
  push(anthropic_tool("t2", "benchmark", {{"source", good_kernel()}}));
  push(anthropic_text("a scalar kernel, verified"));
  push(anthropic_text("no faster idea this round"));  // the optimizer round
  auto a = agent("anthropic", settings());
  std::vector<agents::Progress> events;
  const auto r = a.run(task(), [&](const agents::Progress& p) { events.push_back(p); });
  EXPECT_TRUE(r.verified);
  EXPECT_GT(r.best_us, 0);
  EXPECT_GT(r.speedup, 0);
  // the reported speedup is the best paired with the eager baseline, and the stored best says so
  const auto paired = std::find_if(events.begin(), events.end(), [](const auto& p) { return p.phase == "paired"; });
  ASSERT_NE(paired, events.end());
  EXPECT_NE(paired->status, "incorrect") << paired->note;
  if (paired->status == "passed") {
    EXPECT_NEAR(r.eager_us / r.best_us, r.speedup, 0.5 * r.speedup);
  }
  const auto stored = store.best("rmsnorm_residual", task().shape.label, tools.device_key());
  ASSERT_TRUE(stored.has_value());
  EXPECT_NEAR(stored->speedup, r.speedup, 1e-9 * r.speedup);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].path, "/v1/messages");
  EXPECT_NE(reqs[0].head.find("anthropic-version: 2023-06-01"), std::string::npos);
  EXPECT_NE(reqs[0].head.find("x-api-key: " + key), std::string::npos);
  const auto first = json::parse(reqs[0].body);
  EXPECT_EQ(first["model"], "test-model");
  EXPECT_FALSE(first["system"].get<std::string>().empty());
  EXPECT_EQ(first["tools"].size(), 7u);  // the generator's tools
  EXPECT_TRUE(first["tools"][0].contains("input_schema"));
  // The benchmark's result went back as a tool_result for tool_use t2, not an error
  const auto third = json::parse(reqs[2].body);
  const auto& last = third["messages"].back();
  EXPECT_EQ(last["role"], "user");
  EXPECT_EQ(last["content"][0]["type"], "tool_result");
  EXPECT_EQ(last["content"][0]["tool_use_id"], "t2");
  EXPECT_EQ(last["content"][0]["is_error"], false) << last.dump().substr(0, 600);
  EXPECT_EQ(json::parse(reqs[3].body)["tools"].size(), 8u);  // the optimizer also has ask_analyst
  // 4 calls of 100 input and 50 output tokens at $3 / $15 per million
  EXPECT_NEAR(a.total_usd(), 4 * (100 * 3.0 + 50 * 15.0) / 1e6, 1e-12);
  EXPECT_EQ(a.spend().at("kernel-generator").calls, 3);
  EXPECT_EQ(a.spend().at("kernel-optimizer").calls, 1);
  EXPECT_TRUE(a.stop_reason().empty());
  EXPECT_TRUE(store.best("rmsnorm_residual", task().shape.label, tools.device_key()).has_value());
}

// A best that goes wrong by the time it is paired with the eager baseline (here: once a flag file
// exists, made after its benchmark) is rejected there, and the task then reports no kernel: no
// time, speedup, kernel or bandwidth, on its progress lines as in its result (its paired line
// printed "best 87.44 us (0.00x)").
TEST_F(LlmAgentTest, ABestRejectedWhenPairedReportsNoTime) {
  const std::string flag = home.path() + "/paired-now";
  const std::string late = test::kernel_text(
      "rmsnorm_residual", test::rmsnorm_body("if (access(\"" + flag + "\", F_OK) == 0) out[0] ^= 0x4000;"),
      "#include <unistd.h>\n");
  push(anthropic_tool("t1", "benchmark", {{"source", late}}));
  push(anthropic_text("verified"));
  push(anthropic_text("no faster idea this round"));
  std::atomic<bool> stop{false};
  std::thread flagger([&] {  // once the benchmark's result went back to the model
    while (!stop && server.requests().size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    test::write_text(flag, "");
  });
  auto a = agent("anthropic", settings());
  std::vector<agents::Progress> events;
  const auto r = a.run(task(), [&](const agents::Progress& p) { events.push_back(p); });
  stop = true;
  flagger.join();
  EXPECT_FALSE(r.verified);
  EXPECT_EQ(r.best_us, 0.0);
  EXPECT_EQ(r.speedup, 0.0);
  EXPECT_EQ(r.bandwidth_gbps, 0.0);
  EXPECT_TRUE(r.best_kernel_id.empty());
  const auto paired = std::find_if(events.begin(), events.end(), [](const auto& p) { return p.phase == "paired"; });
  ASSERT_NE(paired, events.end());
  EXPECT_EQ(paired->status, "incorrect") << paired->note;
  EXPECT_EQ(paired->best_us, 0.0);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().phase, "done");
  EXPECT_EQ(events.back().best_us, 0.0);
  EXPECT_FALSE(store.best("rmsnorm_residual", task().shape.label, tools.device_key()).has_value())
      << "the rejected kernel is no longer the stored best";
}

TEST_F(LlmAgentTest, OpenAiHappyPathWithFunctionCalling) {
  server.push({200, openai_tool("c1", "verify", {{"source", good_kernel()}}), {}, 0, false});
  server.push({200, openai_tool("c2", "benchmark", {{"source", good_kernel()}}), {}, 0, false});
  server.push({200, openai_text("done"), {}, 0, false});
  server.push({200, openai_text("nothing better"), {}, 0, false});
  auto a = agent("openai", settings());
  const auto r = a.run(task(), {});
  EXPECT_TRUE(r.verified);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].path, "/v1/chat/completions");
  EXPECT_NE(reqs[0].head.find("Authorization: Bearer " + key), std::string::npos);
  const auto second = json::parse(reqs[1].body);
  EXPECT_EQ(second["messages"][0]["role"], "system");
  EXPECT_EQ(second["tools"][0]["type"], "function");
  const auto& msgs = second["messages"];
  EXPECT_EQ(msgs[msgs.size() - 2]["tool_calls"][0]["id"], "c1");
  EXPECT_TRUE(msgs[msgs.size() - 2]["tool_calls"][0]["function"]["arguments"].is_string());
  EXPECT_EQ(msgs.back()["role"], "tool");
  EXPECT_EQ(msgs.back()["tool_call_id"], "c1");
  EXPECT_NEAR(a.total_usd(), (2 * (120 * 3.0 + 60 * 15.0) + 2 * (80 * 3.0 + 20 * 15.0)) / 1e6, 1e-12);
}

TEST_F(LlmAgentTest, AutonomousOrchestratorDelegatesThroughTheTaskTool) {
  push(anthropic_tool("o1", "task", {{"role", "kernel-generator"}, {"instructions", "write a first kernel"}}));
  push(anthropic_tool("g1", "benchmark", {{"source", good_kernel()}}));  // the generator's turns
  push(anthropic_text("generated"));
  push(anthropic_tool("o2", "task", {{"role", "kernel-optimizer"}, {"instructions", "one round"}}));
  push(anthropic_text("nothing faster"));
  push(anthropic_tool("o3", "task", {{"role", "kernel-optimizer"}, {"instructions", "another"}}));  // over the cap
  push(anthropic_text("summary: one verified kernel"));
  auto a = agent("anthropic", settings(true));
  EXPECT_EQ(a.name(), "llm-autonomous");
  const auto r = a.run(task(1), {});
  EXPECT_TRUE(r.verified);
  EXPECT_EQ(r.rounds_used, 1);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 7u);
  EXPECT_EQ(json::parse(reqs[0].body)["tools"].size(), 1u);  // the orchestrator only delegates
  const auto last = json::parse(reqs[6].body)["messages"].back()["content"][0];
  EXPECT_EQ(last["is_error"], true);
  EXPECT_NE(last["content"].get<std::string>().find("rounds cap"), std::string::npos);
  EXPECT_EQ(a.spend().count("orchestrator"), 1u);
  EXPECT_EQ(a.spend().count("kernel-generator"), 1u);
}

TEST_F(LlmAgentTest, TransientFailuresAreRetriedAndRetryAfterIsHonoured) {
  server.push({429, R"({"type":"error","error":{"type":"rate_limit_error"}})", {"Retry-After: 1"}, 0, false});
  server.push({529, R"({"type":"error","error":{"type":"overloaded_error"}})", {}, 0, false});
  server.push({200, "{not json", {}, 0, false});
  server.push({200, "", {}, 0, false});
  server.push({200, anthropic_text("x"), {}, 0, true});  // truncated
  server.push({200, anthropic_text("late"), {}, 1500, false});
  server.push({200, anthropic_text("finally"), {}, 0, false});
  auto s = settings();
  s.http.timeout_s = 0.5;
  s.http.max_retries = 6;
  auto client = agents::llm::make_client("anthropic", server.url(), key, s.http);
  const auto t0 = std::chrono::steady_clock::now();
  const auto reply = client->complete("test-model", "sys", {{"user", "hi", {}, "", false}}, {}, 100);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(reply.text, "finally");
  EXPECT_EQ(client->requests(), 7);
  EXPECT_GE(waited, 1.0);  // Retry-After: 1
  // Out of retries: a clear backend error
  for (int i = 0; i < 3; ++i) server.push({503, "{}", {}, 0, false});
  s.http.max_retries = 2;
  auto few = agents::llm::make_client("anthropic", server.url(), key, s.http);
  try {
    few->complete("test-model", "sys", {{"user", "hi", {}, "", false}}, {}, 100);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kBackend);
    EXPECT_NE(std::string(e.what()).find("3 attempts"), std::string::npos) << e.what();
  }
}

TEST_F(LlmAgentTest, AnInvalidKeyIsOneClearErrorWithoutRetriesAndNeverEchoed) {
  server.push({401, json{{"error", {{"message", "invalid x-api-key " + key}}}}.dump(), {}, 0, false});
  auto a = agent("anthropic", settings());
  try {
    a.run(task(), {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kUsage);
    EXPECT_NE(std::string(e.what()).find("API key"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.requests().size(), 1u);
  // A refused request echoing the key, plainly or JSON-escaped: the key is scrubbed from the message
  std::string escaped;
  for (char ch : key) escaped += std::isalnum(static_cast<unsigned char>(ch)) ? std::string(1, ch) : "\\u002d";
  server.push({500, "{\"error\": \"bad key " + escaped + "\"}", {}, 0, false});
  auto one = agents::llm::make_client("anthropic", server.url(), key, [&] {
    auto o = settings().http;
    o.max_retries = 0;
    return o;
  }());
  try {
    one->complete("m", "s", {{"user", "hi", {}, "", false}}, {}, 10);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("SECRET"), std::string::npos) << e.what();
  }
  server.push({400, json{{"error", {{"message", "bad request from " + key}}}}.dump(), {}, 0, false});
  auto client = agents::llm::make_client("anthropic", server.url(), key, settings().http);
  try {
    client->complete("m", "s", {{"user", "hi", {}, "", false}}, {}, 10);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find(key), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("<key>"), std::string::npos) << e.what();
  }
}

TEST_F(LlmAgentTest, UnknownToolsAndBadArgumentsGoBackToTheModelAsToolErrors) {
  push(anthropic_tool("u1", "run_shell", {{"cmd", "rm -rf /"}}));
  push(anthropic_tool("u2", "benchmark", json::object()));                                // no source
  push(anthropic_tool("u3", "benchmark", {{"source", good_kernel()}, {"path", "/etc"}}));  // unknown argument
  push(anthropic_tool("u4", "verify", {{"source", test::kernel_text("softmax", "return 0;")}}));  // another op
  push(anthropic_tool("u5", "compile", {{"source", "not a kernel file"}}));
  push(anthropic_text("giving up"));
  push(anthropic_text("cannot repair"));  // the repairer
  push(anthropic_text("nothing"));        // the optimizer round
  auto a = agent("anthropic", settings());
  const auto r = a.run(task(), {});
  EXPECT_FALSE(r.verified);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 8u);
  const std::vector<std::string> expect = {"unknown tool 'run_shell'", "missing argument 'source'",
                                           "unknown argument 'path'", "the task is rmsnorm_residual", "error"};
  for (size_t i = 0; i < expect.size(); ++i) {
    const auto res = json::parse(reqs[i + 1].body)["messages"].back()["content"][0];
    EXPECT_EQ(res["is_error"], true) << i;
    EXPECT_NE(res["content"].get<std::string>().find(expect[i]), std::string::npos) << res.dump().substr(0, 400);
  }
}

TEST_F(LlmAgentTest, TurnsAreBoundedWhenTheModelNeverStops) {
  auto s = settings();
  s.max_turns = 3;
  for (int i = 0; i < 12; ++i) push(anthropic_tool(std::string(1, 'l').append(std::to_string(i)), "get_op_spec", json::object()));
  auto a = agent("anthropic", s);
  const auto r = a.run(task(1), {});
  EXPECT_FALSE(r.verified);
  // generator, repairer and one optimizer round: 3 model calls each, then the conversation ends
  EXPECT_EQ(server.requests().size(), 9u);
}

TEST_F(LlmAgentTest, TheUsdCapStopsTheRunCleanlyAndKeepsTheBestKernel) {
  auto s = settings();
  s.usd_cap = 0.01;
  push(anthropic_tool("b1", "benchmark", {{"source", good_kernel()}}, usage(1000, 100)));
  push(anthropic_text("ok", usage(3000, 300)));  // $0.0045 + $0.0135: over the cap
  for (int i = 0; i < 5; ++i) push(anthropic_text("should not be asked"));
  auto a = agent("anthropic", s);
  const auto r = a.run(task(3), {});
  EXPECT_TRUE(r.verified);  // the kernel found before the cap is kept
  EXPECT_EQ(server.requests().size(), 2u);
  EXPECT_NE(a.stop_reason().find("USD cap"), std::string::npos) << a.stop_reason();
  EXPECT_GT(a.total_usd(), 0.01);
}

// What a break-it pass found (2026-11-30): text cut inside a UTF-8 character, usage counts that
// lower the bill, a refused request mid-run, repeated tool ids, a server that never answers.
TEST_F(LlmAgentTest, HostileRepliesNeitherCrashNorCheatTheBudget) {
  std::string e_acute;
  for (int i = 0; i < 5000; ++i) e_acute += "\xc3\xa9";
  push(anthropic_tool("h1", "x" + e_acute.substr(0, 120), json::object(), usage(-100000000, -5)));
  push(anthropic_tool("h2", "record_strategy", {{"id", e_acute}, {"title", "t"}, {"traits", {"elementwise"}}, {"set", {{"VEC", "8"}}}}));
  // two calls with one id, the first a good benchmark
  server.push({200, json{{"id", "m"}, {"type", "message"}, {"role", "assistant"},
                         {"content", {{{"type", "tool_use"}, {"id", "dup"}, {"name", "benchmark"}, {"input", {{"source", good_kernel()}}}},
                                      {{"type", "tool_use"}, {"id", "dup"}, {"name", "get_op_spec"}, {"input", json::object()}}}},
                         {"stop_reason", "tool_use"}, {"usage", usage()}}.dump(), {}, 0, false});
  server.push({400, R"({"type":"error","error":{"message":"prompt is too long"}})", {}, 0, false});
  auto a = agent("anthropic", settings());
  agents::TaskResult r;
  ASSERT_NO_THROW(r = a.run(task(2), {}));
  EXPECT_TRUE(r.verified);  // the kernel benchmarked before the refusal is kept
  EXPECT_NE(a.stop_reason().find("HTTP 400"), std::string::npos) << a.stop_reason();
  // the unknown counts were charged as an estimate, not as -1e8 tokens
  EXPECT_GT(a.spend().at("kernel-generator").usd, 0);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  const auto sent = json::parse(reqs[3].body)["messages"];
  const auto& calls = sent[sent.size() - 2]["content"];
  EXPECT_NE(calls[0]["id"], calls[1]["id"]);  // repeated ids made unique
  EXPECT_TRUE(store.cards("cpu").size() > 0);
  for (const auto& c : store.cards("cpu")) EXPECT_LE(c.id.size(), 128u);  // the 10000-byte id was refused
  // A server that never answers within the run's wall-clock cap: the request gives up there
  server.push({200, anthropic_text("late"), {}, 4000, false});
  auto client = agents::llm::make_client("anthropic", server.url(), key, settings().http);
  client->set_deadline(std::chrono::steady_clock::now() + std::chrono::milliseconds(800));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(client->complete("m", "s", {{"user", "hi", {}, "", false}}, {}, 10), Error);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.5);
}

// The command line: the cold/warm demo with --agent llm against the local server reports its
// cost in USD per run and per role; missing settings are refused before any memory is made.
TEST_F(LlmAgentTest, DemoWithTheLlmAgentReportsCostInUsd) {
  // cold: generator (benchmark, answer), one optimizer round; warm: recalls, one optimizer round
  push(anthropic_tool("d1", "benchmark", {{"source", good_kernel()}}));
  push(anthropic_text("verified"));
  push(anthropic_text("no faster kernel"));
  push(anthropic_text("no faster kernel"));
  std::vector<std::string> env = {"THRIVE_HOME=" + home.path() + "/cli", "ANTHROPIC_API_KEY=" + key,
                                  "THRIVE_MODEL=claude-sonnet-4-5", "THRIVE_LLM_BASE_URL=" + server.url()};
  for (const auto& kv : test::small_model_env()) env.push_back(kv);
  const std::string json_out = home.path() + "/demo.json";
  const auto r = test::run_thrive({"demo", "--op", "rmsnorm_residual", "--shape", task().shape.label, "--phases", "1",
                                   "--rounds", "1", "--agent", "llm", "--json-out", json_out},
                                  env);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("cost USD"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(key), std::string::npos);
  EXPECT_EQ(r.err.find(key), std::string::npos);
  const auto doc = json::parse(read_file(json_out));
  // 4 calls of 100 + 50 tokens at claude-sonnet-4-5's $3 / $15 per million (config/llm_prices.json)
  EXPECT_NEAR(doc["cold"]["cost_usd"].get<double>() + doc["warm"]["cost_usd"].get<double>(), 4 * 0.00105, 1e-9);
  EXPECT_TRUE(doc["cold"]["spend_by_role"].contains("kernel-generator"));
  EXPECT_EQ(server.requests().size(), 4u);
  // No model configured: one usage error, no demo memory created
  const auto bad = test::run_thrive({"demo", "--op", "rmsnorm_residual", "--agent", "llm", "--demo-home",
                                     home.path() + "/never"},
                                    {"THRIVE_HOME=" + home.path() + "/cli2", "ANTHROPIC_API_KEY=" + key});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("THRIVE_MODEL_KERNEL_GENERATOR"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(home.path() + "/never"));
}

// An optimize whose model API fails (here: it refuses every request) did not do what was asked:
// it exits 5, a backend failure, naming the failure, not 0 (break-it finding, 2026-12-07).
TEST_F(LlmAgentTest, OptimizeExitsFiveWhenTheModelApiFails) {
  for (int i = 0; i < 6; ++i)
    server.push({400, json{{"type", "error"}, {"error", {{"message", "model not found"}}}}.dump(), {}, 0, false});
  std::vector<std::string> env = {"THRIVE_HOME=" + home.path() + "/cli", "ANTHROPIC_API_KEY=" + key,
                                  "THRIVE_MODEL=claude-sonnet-4-5", "THRIVE_LLM_BASE_URL=" + server.url()};
  for (const auto& kv : test::small_model_env()) env.push_back(kv);
  const auto r = test::run_thrive({"optimize", "--op", "rmsnorm_residual", "--shape", task().shape.label, "--rounds",
                                   "1", "--agent", "llm"},
                                  env);
  EXPECT_EQ(r.exit_code, 5) << r.err << r.out;
  EXPECT_NE(r.err.find("the LLM agent's tasks ended early: the model API failed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(key), std::string::npos);
}

TEST(LlmSettings, PricesModelsAndPromptsAreCheckedUpFront) {
  test::TempDir dir;
  const std::string prices = dir.path() + "/p.json";
  std::FILE* f = std::fopen(prices.c_str(), "w");
  std::fputs(R"({"models": {"m": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 2}}})", f);
  std::fclose(f);
  auto t = agents::PriceTable::load(prices);
  EXPECT_NEAR(t.usd("m", 1000000, 500000), 2.0, 1e-12);
  EXPECT_THROW(t.usd("unknown", 1, 1), Error);
  f = std::fopen(prices.c_str(), "w");
  std::fputs(R"({"models": {"m": {"input_usd_per_mtok": -1, "output_usd_per_mtok": 2}}})", f);
  std::fclose(f);
  EXPECT_THROW(agents::PriceTable::load(prices), Error);
  // The shipped table parses and prices the models it lists
  const auto shipped = agents::PriceTable::load(std::string(THRIVE_SOURCE_DIR) + "/config/llm_prices.json");
  EXPECT_GT(shipped.usd("claude-sonnet-4-5", 1000000, 0), 0);
  EXPECT_THROW(agents::llm::make_client("anthropic", "", "", {}), Error);  // no key
  EXPECT_THROW(agents::llm::make_client("gemini", "", "k", {}), Error);
  EXPECT_NO_THROW(agents::llm::make_client("openai", "http://127.0.0.1:1/v1", "", {}));  // a local server, no key
}

}  // namespace
}  // namespace thrive
