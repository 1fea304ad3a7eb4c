// LLM chat clients for the LLM agents (issue 8): the Anthropic Messages API with tool use and
// OpenAI-compatible chat completions with function calling (OpenAI, vLLM, llama.cpp's server,
// Ollama), over libcurl, with one provider-neutral conversation model.
//
// Wire formats, from the providers' public documentation:
//   Anthropic: POST {base}/v1/messages, headers x-api-key, anthropic-version: 2023-06-01;
//     body {model, max_tokens, system, messages: [{role: user|assistant, content: [blocks]}],
//     tools: [{name, description, input_schema}]}; blocks text {text}, tool_use {id, name,
//     input}, tool_result {tool_use_id, content, is_error}; reply {content: [blocks],
//     stop_reason, usage: {input_tokens, output_tokens}}.
//   OpenAI: POST {base}/chat/completions (base includes /v1), header Authorization: Bearer;
//     body {model, max_tokens (max_completion_tokens at api.openai.com, which deprecated
//     max_tokens), messages: [{role: system|user|assistant|tool, content,
//     tool_calls: [{id, type: function, function: {name, arguments (a JSON string)}}],
//     tool_call_id}], tools: [{type: function, function: {name, description, parameters}}]};
//     reply {choices: [{message: {content, tool_calls}, finish_reason}], usage:
//     {prompt_tokens, completion_tokens}}.
// Resilience: HTTP 429 and 5xx, connection failures, timeouts and empty, truncated or
// malformed 2xx bodies are retried with exponential backoff (Retry-After honoured, capped);
// 401 and 403 fail at once with one message; other 4xx fail with the body's excerpt. The API
// key never appears in a message, log line or stored record (it is scrubbed from bodies too).
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace thrive::agents::llm {

/// A tool call the model asked for.
struct ToolCall {
  std::string id, name;
  nlohmann::json input;  ///< the arguments object (an OpenAI string that is not JSON: a string)
};

/// One conversation turn. role "user": text; "assistant": text and calls; "tool": the result
/// of the call `tool_id` (text, is_error).
struct Message {
  std::string role;
  std::string text;
  std::vector<ToolCall> calls;
  std::string tool_id;
  bool is_error = false;
};

/// A model's reply and what it cost in tokens.
struct Reply {
  std::string text;
  std::vector<ToolCall> calls;
  int64_t input_tokens = 0, output_tokens = 0;  ///< -1: the reply gave no usable count (integer in [0, 1e8])
  std::string stop_reason;  ///< provider's: end_turn, tool_use, max_tokens, stop, tool_calls, length
};

/// A tool the model may call: name, description, JSON Schema of its arguments object.
struct ToolSpec {
  std::string name, description;
  nlohmann::json schema;
};

/// Transport limits. Times in seconds.
struct HttpOptions {
  double connect_timeout_s = 10;
  double timeout_s = 300;      ///< whole request, read included
  int max_retries = 4;         ///< after the first attempt
  double backoff_s = 1;        ///< first wait; doubles per retry
  double max_wait_s = 60;      ///< cap on one wait, Retry-After included
};

/// One HTTP exchange: status (0 when no response: `error` says why), body (at most 16 MiB:
/// a larger reply is cut off and reads as no response), Retry-After.
struct HttpResponse {
  long status = 0;
  std::string body, error;
  double retry_after_s = -1;  ///< the Retry-After header in seconds, -1 when absent
};

/// One POST through libcurl (no retry). Never throws for network failures: they come back as
/// status 0 with `error`.
HttpResponse http_post(const std::string& url, const std::vector<std::string>& headers, const std::string& body,
                       const HttpOptions& o);

/// A chat client for one provider.
class Client {
 public:
  virtual ~Client() = default;
  /// One completion. Error(kUsage) for a rejected key (401/403); Error(kBackend) for a refused
  /// request (another 4xx), exhausted retries or a reply that cannot be read.
  virtual Reply complete(const std::string& model, const std::string& system, const std::vector<Message>& messages,
                         const std::vector<ToolSpec>& tools, int max_tokens) = 0;
  virtual std::string provider() const = 0;
  /// HTTP requests sent so far (retries included).
  int requests() const { return requests_; }
  /// No request or retry wait runs past `t` (the run's wall-clock cap); Error(kBackend) once
  /// it has passed.
  void set_deadline(std::chrono::steady_clock::time_point t) { deadline_ = t; }

 protected:
  int requests_ = 0;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
};

/// "anthropic" or "openai"; base_url without a trailing slash (Anthropic:
/// https://api.anthropic.com; OpenAI: https://api.openai.com/v1). Error(kUsage) for an
/// unknown provider or an empty key where the provider needs one (a local OpenAI-compatible
/// server may take none).
std::unique_ptr<Client> make_client(const std::string& provider, const std::string& base_url, const std::string& api_key,
                                    const HttpOptions& o);

/// Request bodies and reply parsers (exposed for tests). Parsers throw Error(kBackend) with
/// what is missing when a 2xx body is not a reply of that API.
nlohmann::json anthropic_request(const std::string& model, const std::string& system,
                                 const std::vector<Message>& messages, const std::vector<ToolSpec>& tools,
                                 int max_tokens);
Reply anthropic_reply(const std::string& body);
nlohmann::json openai_request(const std::string& model, const std::string& system, const std::vector<Message>& messages,
                              const std::vector<ToolSpec>& tools, int max_tokens);
Reply openai_reply(const std::string& body);

}  // namespace thrive::agents::llm
