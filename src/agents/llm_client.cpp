// LLM chat clients: see include/thrive/agents/llm_client.hpp for the wire formats.
#include "thrive/agents/llm_client.hpp"

#include <curl/curl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"
#include "thrive/core/json.hpp"

namespace thrive::agents::llm {
namespace {

void curl_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Reply bodies over 16 MiB are refused (returning less than given aborts the transfer).
constexpr size_t kMaxReplyBytes = size_t(16) << 20;
size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  if (body->size() + size * n > kMaxReplyBytes) return 0;
  body->append(data, size * n);
  return size * n;
}

// Retry-After: delta-seconds (RFC 9110 section 10.2.3); an HTTP-date is treated as absent.
size_t on_header(char* data, size_t size, size_t n, void* user) {
  const std::string line(data, size * n);
  static const std::string key = "retry-after:";
  if (line.size() > key.size()) {
    std::string head = line.substr(0, key.size());
    std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (head == key) {
      try {
        size_t used = 0;
        const double v = std::stod(line.substr(key.size()), &used);
        if (v >= 0 && std::isfinite(v)) *static_cast<double*>(user) = v;
      } catch (const std::exception&) {
      }
    }
  }
  return size * n;
}

// `text` with every occurrence of `secret` replaced, control characters as spaces (one-line
// messages), cut to `max` bytes on a UTF-8 boundary.
std::string scrub(std::string text, const std::string& secret, size_t max = 400) {
  if (secret.size() >= 4) {
    // the key as sent, and as a server may echo it JSON-escaped (\u002d for '-', either case)
    std::vector<std::string> forms = {secret, "", ""};
    for (unsigned char c : secret) {
      const bool plain = std::isalnum(c) != 0;
      forms[1] += plain ? std::string(1, char(c)) : fmt::format("\\u{:04x}", c);
      forms[2] += plain ? std::string(1, char(c)) : fmt::format("\\u{:04X}", c);
    }
    for (const auto& f : forms)
      for (size_t at = text.find(f); at != std::string::npos; at = text.find(f, at)) text.replace(at, f.size(), "<key>");
  }
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  if (text.size() > max) text = utf8_prefix(text, max) + "...";
  return text;
}

// A provider's wire format: the request body of a conversation, the reply of a 2xx body.
using BuildRequest = std::function<nlohmann::json(const std::string& model, const std::string& system,
                                                  const std::vector<Message>& messages,
                                                  const std::vector<ToolSpec>& tools, int max_tokens)>;
using ParseReply = Reply (*)(const std::string& body);

// The client of either provider: the wire format's request POSTed with retries, then its parser.
class HttpClient final : public Client {
 public:
  HttpClient(std::string provider, std::string url, std::vector<std::string> headers, std::string key, HttpOptions o,
             BuildRequest build, ParseReply parse)
      : provider_(std::move(provider)), url_(std::move(url)), headers_(std::move(headers)), key_(std::move(key)),
        o_(o), build_(std::move(build)), parse_(parse) {}

  std::string provider() const override { return provider_; }
  Reply complete(const std::string& model, const std::string& system, const std::vector<Message>& messages,
                 const std::vector<ToolSpec>& tools, int max_tokens) override {
    return post(build_(model, system, messages, tools, max_tokens));
  }

 private:
  // The reply body of a 2xx answer that parse_ accepts, after retries.
  Reply post(const nlohmann::json& request) {
    const std::string body = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::string last;
    for (int attempt = 0; attempt <= o_.max_retries; ++attempt) {
      auto o = o_;
      if (deadline_) {  // the run's wall-clock cap bounds every request and every wait
        const double left = std::chrono::duration<double>(*deadline_ - std::chrono::steady_clock::now()).count();
        if (left <= 0) fail(ErrorCategory::kBackend, "{}: the wall-clock cap was reached during retries", provider());
        o.timeout_s = std::min(o.timeout_s, left);
        o.connect_timeout_s = std::min(o.connect_timeout_s, left);
      }
      ++requests_;
      const auto r = http_post(url_, headers_, body, o);
      double wait = o_.backoff_s * std::pow(2.0, attempt);
      if (r.status == 401 || r.status == 403)
        fail(ErrorCategory::kUsage, "{} rejected the API key (HTTP {}) at {}: check the key's environment variable",
             provider(), r.status, url_);
      if (r.status >= 200 && r.status < 300) {
        try {
          return parse_(r.body);
        } catch (const Error& e) {  // empty, truncated or malformed: transient on some servers
          last = fmt::format("unreadable reply ({})", scrub(e.what(), key_));
        }
      } else if (r.status == 0) {
        last = "no response: " + scrub(r.error, key_);
      } else if (r.status == 429 || r.status >= 500) {
        last = fmt::format("HTTP {}: {}", r.status, scrub(r.body, key_));
        if (r.retry_after_s >= 0) wait = r.retry_after_s;
      } else {  // a request this model will not take (too long, say): ends the conversation, not THRIVE
        fail(ErrorCategory::kBackend, "{} refused the request (HTTP {}) at {}: {}", provider(), r.status, url_,
             scrub(r.body, key_));
      }
      if (attempt == o_.max_retries) break;
      wait = std::min(wait, o_.max_wait_s);
      spdlog::warn("llm: {} (attempt {} of {}); retrying in {:.1f} s", last, attempt + 1, o_.max_retries + 1, wait);
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
    fail(ErrorCategory::kBackend, "{} at {}: {} after {} attempts", provider(), url_, last, o_.max_retries + 1);
  }

  std::string provider_, url_;
  std::vector<std::string> headers_;
  std::string key_;
  HttpOptions o_;
  BuildRequest build_;
  ParseReply parse_;
};

nlohmann::json parse_reply_json(const std::string& body, const char* api) {
  if (body.empty()) fail(ErrorCategory::kBackend, "{}: empty reply body", api);
  auto j = parse_json_bounded(body);
  if (!j.is_object()) fail(ErrorCategory::kBackend, "{}: the reply is not a JSON object ({} bytes)", api, body.size());
  return j;
}

// obj[key] when it is a string, else "" (a null or missing field reads as empty).
std::string str_field(const nlohmann::json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : std::string();
}

// A token count the reply reports: an integer in [0, 1e8], else -1 (unknown: the agent charges
// an estimate, so a missing, negative or fractional count cannot lower the bill).
int64_t token_count(const nlohmann::json& usage, const char* key) {
  if (!usage.is_object() || !usage.contains(key) || !usage[key].is_number_integer()) return -1;
  if (usage[key].is_number_unsigned()) {
    const auto v = usage[key].get<uint64_t>();
    return v <= 100000000u ? int64_t(v) : -1;
  }
  const auto v = usage[key].get<int64_t>();
  return v >= 0 && v <= 100000000 ? v : -1;
}

}  // namespace

HttpResponse http_post(const std::string& url, const std::vector<std::string>& headers, const std::string& body,
                       const HttpOptions& o) {
  curl_init_once();
  HttpResponse r;
  CURL* c = curl_easy_init();
  if (c == nullptr) {
    r.error = "curl_easy_init failed";
    return r;
  }
  curl_slist* hs = nullptr;
  for (const auto& h : headers) hs = curl_slist_append(hs, h.c_str());
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.retry_after_s);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(o.connect_timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, long(o.timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    r.error = curl_easy_strerror(rc);
    r.status = 0;
  } else {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  }
  curl_slist_free_all(hs);
  curl_easy_cleanup(c);
  return r;
}

std::unique_ptr<Client> make_client(const std::string& provider, const std::string& base_url, const std::string& api_key,
                                    const HttpOptions& o) {
  std::string base = base_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (!base.empty() && base.rfind("http://", 0) != 0 && base.rfind("https://", 0) != 0)
    fail(ErrorCategory::kUsage, "THRIVE_LLM_BASE_URL={}: expected an http:// or https:// URL", base.substr(0, 80));
  if (provider == "anthropic") {
    if (api_key.empty())
      fail(ErrorCategory::kUsage, "--agent llm with the Anthropic API needs ANTHROPIC_API_KEY (it is empty or unset)");
    if (base.empty()) base = "https://api.anthropic.com";
    return std::make_unique<HttpClient>(
        "anthropic", base + "/v1/messages",
        std::vector<std::string>{"x-api-key: " + api_key, "anthropic-version: 2023-06-01",
                                 "content-type: application/json"},
        api_key, o, anthropic_request, anthropic_reply);
  }
  if (provider == "openai") {
    if (base.empty()) {
      if (api_key.empty())
        fail(ErrorCategory::kUsage, "--agent llm with the OpenAI API needs OPENAI_API_KEY, or THRIVE_LLM_BASE_URL for "
             "a local OpenAI-compatible server");
      base = "https://api.openai.com/v1";
    }
    std::vector<std::string> headers = {"content-type: application/json"};
    if (!api_key.empty()) headers.push_back("Authorization: Bearer " + api_key);
    const std::string url = base + "/chat/completions";
    // OpenAI's own API deprecated max_tokens and its reasoning models refuse it; local servers
    // (vLLM, llama.cpp, Ollama) read max_tokens.
    const bool completion_tokens = url.find("://api.openai.com/") != std::string::npos;
    auto build = [completion_tokens](const std::string& model, const std::string& system,
                                     const std::vector<Message>& messages, const std::vector<ToolSpec>& tools,
                                     int max_tokens) {
      auto req = openai_request(model, system, messages, tools, max_tokens);
      if (completion_tokens) {
        req["max_completion_tokens"] = req["max_tokens"];
        req.erase("max_tokens");
      }
      return req;
    };
    return std::make_unique<HttpClient>("openai", url, headers, api_key, o, build, openai_reply);
  }
  fail(ErrorCategory::kUsage, "THRIVE_LLM_PROVIDER={}: expected anthropic or openai", provider);
}

nlohmann::json anthropic_request(const std::string& model, const std::string& system,
                                 const std::vector<Message>& messages, const std::vector<ToolSpec>& tools,
                                 int max_tokens) {
  nlohmann::json msgs = nlohmann::json::array();
  for (const auto& m : messages) {
    nlohmann::json blocks = nlohmann::json::array();
    if (m.role == "tool") {
      blocks.push_back({{"type", "tool_result"}, {"tool_use_id", m.tool_id}, {"content", m.text}, {"is_error", m.is_error}});
    } else {
      if (!m.text.empty()) blocks.push_back({{"type", "text"}, {"text", m.text}});
      for (const auto& c : m.calls)
        blocks.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", c.input.is_object() ? c.input : nlohmann::json::object()}});
    }
    // tool results travel in a user turn; consecutive ones share it
    const std::string role = m.role == "assistant" ? "assistant" : "user";
    if (!msgs.empty() && msgs.back()["role"] == role && m.role == "tool" && msgs.back()["content"].back()["type"] == "tool_result")
      for (auto& b : blocks) msgs.back()["content"].push_back(b);
    else
      msgs.push_back({{"role", role}, {"content", blocks}});
  }
  nlohmann::json t = nlohmann::json::array();
  for (const auto& s : tools) t.push_back({{"name", s.name}, {"description", s.description}, {"input_schema", s.schema}});
  nlohmann::json req = {{"model", model}, {"max_tokens", max_tokens}, {"system", system}, {"messages", msgs}};
  if (!t.empty()) req["tools"] = t;
  return req;
}

Reply anthropic_reply(const std::string& body) {
  const auto j = parse_reply_json(body, "Anthropic Messages API");
  if (!j.contains("content") || !j["content"].is_array())
    fail(ErrorCategory::kBackend, "Anthropic Messages API: the reply has no content array");
  Reply r;
  for (const auto& b : j["content"]) {
    const std::string type = str_field(b, "type");
    if (type == "text" && b.contains("text") && b["text"].is_string()) {
      r.text += b["text"].get<std::string>();
    } else if (type == "tool_use") {
      if (!b.contains("id") || !b["id"].is_string() || !b.contains("name") || !b["name"].is_string())
        fail(ErrorCategory::kBackend, "Anthropic Messages API: a tool_use block without id or name");
      r.calls.push_back({b["id"].get<std::string>(), b["name"].get<std::string>(),
                         b.contains("input") ? b["input"] : nlohmann::json::object()});
    }
  }
  r.stop_reason = str_field(j, "stop_reason");
  r.input_tokens = token_count(j.contains("usage") ? j["usage"] : nlohmann::json(), "input_tokens");
  r.output_tokens = token_count(j.contains("usage") ? j["usage"] : nlohmann::json(), "output_tokens");
  return r;
}

nlohmann::json openai_request(const std::string& model, const std::string& system, const std::vector<Message>& messages,
                              const std::vector<ToolSpec>& tools, int max_tokens) {
  nlohmann::json msgs = nlohmann::json::array();
  if (!system.empty()) msgs.push_back({{"role", "system"}, {"content", system}});
  for (const auto& m : messages) {
    if (m.role == "tool") {
      msgs.push_back({{"role", "tool"}, {"tool_call_id", m.tool_id}, {"content", (m.is_error ? "ERROR: " : "") + m.text}});
    } else if (m.role == "assistant") {
      nlohmann::json a = {{"role", "assistant"}, {"content", m.text}};
      if (!m.calls.empty()) {
        a["tool_calls"] = nlohmann::json::array();
        for (const auto& c : m.calls)
          a["tool_calls"].push_back({{"id", c.id}, {"type", "function"},
                                     {"function", {{"name", c.name}, {"arguments", c.input.is_string() ? c.input.get<std::string>() : c.input.dump()}}}});
      }
      msgs.push_back(a);
    } else {
      msgs.push_back({{"role", "user"}, {"content", m.text}});
    }
  }
  nlohmann::json t = nlohmann::json::array();
  for (const auto& s : tools)
    t.push_back({{"type", "function"}, {"function", {{"name", s.name}, {"description", s.description}, {"parameters", s.schema}}}});
  nlohmann::json req = {{"model", model}, {"max_tokens", max_tokens}, {"messages", msgs}};
  if (!t.empty()) req["tools"] = t;
  return req;
}

Reply openai_reply(const std::string& body) {
  const auto j = parse_reply_json(body, "OpenAI chat completions");
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty() || !j["choices"][0].is_object() ||
      !j["choices"][0].contains("message") || !j["choices"][0]["message"].is_object())
    fail(ErrorCategory::kBackend, "OpenAI chat completions: the reply has no choices[0].message");
  const auto& msg = j["choices"][0]["message"];
  Reply r;
  if (msg.contains("content") && msg["content"].is_string()) r.text = msg["content"].get<std::string>();
  if (msg.contains("tool_calls") && msg["tool_calls"].is_array())
    for (const auto& c : msg["tool_calls"]) {
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
          !c["function"]["name"].is_string())
        fail(ErrorCategory::kBackend, "OpenAI chat completions: a tool call without function.name");
      ToolCall call;
      call.id = str_field(c, "id");
      call.name = c["function"]["name"].get<std::string>();
      const nlohmann::json args = c["function"].contains("arguments") ? c["function"]["arguments"] : nlohmann::json("{}");
      if (args.is_string()) {
        auto parsed = parse_json_bounded(args.get<std::string>());
        call.input = parsed.is_discarded() ? args : parsed;  // not JSON: kept as the string, refused by the tool
      } else {
        call.input = args;
      }
      r.calls.push_back(call);
    }
  r.stop_reason = str_field(j["choices"][0], "finish_reason");
  r.input_tokens = token_count(j.contains("usage") ? j["usage"] : nlohmann::json(), "prompt_tokens");
  r.output_tokens = token_count(j.contains("usage") ? j["usage"] : nlohmann::json(), "completion_tokens");
  return r;
}

}  // namespace thrive::agents::llm
