// The LLM agent (issue 8): the seed's roles (kernel-generator, kernel-optimizer, which may ask
// the profiler-analyst for a diagnosis, kernel-repairer, profiler-analyst, and in autonomous
// mode an orchestrator that delegates to them through a `task` tool) over an Anthropic or
// OpenAI-compatible model. The model never touches the shell or the filesystem: its only
// actions are the tools below, which call the same Toolbox the search agent uses (same sandbox,
// verifier, benchmark protocol and memory). Every model call is priced from its token counts
// and the price table; the run stops cleanly at the USD cap, the wall-clock cap or the rounds
// cap, keeping the best verified kernel found so far.
//
// Tools (the task's op and shape are implied): get_op_spec, compile {source}, verify {source},
// benchmark {source} (a passing kernel is recorded in memory; the fastest becomes the task's
// best), profile {source?}, read_memory, record_strategy {id, title, traits, set, ...};
// the optimizer also has ask_analyst {question}; the orchestrator has only task {role,
// instructions}. An unknown tool or bad arguments come back to the model as a tool error.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "thrive/agents/agent.hpp"
#include "thrive/agents/llm_client.hpp"

namespace thrive::agents {

/// USD per million tokens, input and output, per model (an editable JSON file:
/// {"models": {"<model>": {"input_usd_per_mtok": x, "output_usd_per_mtok": y}}}).
struct PriceTable {
  std::map<std::string, std::pair<double, double>> per_mtok;
  /// Error(kUsage) naming the file and the entry when it is not such a table.
  static PriceTable load(const std::string& path);
  /// USD of a call; Error(kUsage) when `model` has no entry (say which file to edit).
  double usd(const std::string& model, int64_t input_tokens, int64_t output_tokens) const;
  std::string path;
};

/// Everything the LLM agent needs besides the toolbox, read from the environment by
/// from_env(): THRIVE_LLM_PROVIDER (anthropic | openai; default anthropic when
/// ANTHROPIC_API_KEY is set, else openai), ANTHROPIC_API_KEY / OPENAI_API_KEY,
/// THRIVE_LLM_BASE_URL, THRIVE_MODEL_<ROLE> (RSI_MODEL_<ROLE> accepted; ROLE one of
/// KERNEL_GENERATOR, KERNEL_OPTIMIZER, KERNEL_REPAIRER, PROFILER_ANALYST, ORCHESTRATOR) else
/// THRIVE_MODEL, THRIVE_EFFORT (low | medium | high: 2048, 4096 or 8192 output tokens per call),
/// THRIVE_PER_RUN_USD (default 5), THRIVE_LLM_WALL_S (default 1800), THRIVE_LLM_MAX_TURNS
/// (model calls per conversation, default 16), THRIVE_LLM_PRICES (default
/// config/llm_prices.json of the source tree), THRIVE_PROMPTS_DIR (default prompts/roles).
struct LlmSettings {
  std::string provider, base_url, api_key;
  std::map<std::string, std::string> models;  ///< role -> model
  int max_tokens = 4096;
  double usd_cap = 5, wall_s = 1800;
  int max_turns = 16;
  bool autonomous = false;
  PriceTable prices;
  std::string prompts_dir;
  llm::HttpOptions http;
  /// Error(kUsage) naming the variable for a missing key or model, a bad number or effort, an
  /// unpriced model, a missing prompt file.
  static LlmSettings from_env(bool autonomous);
};

/// Spend of one role over a run.
struct RoleSpend {
  int calls = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  double usd = 0;
};

class LlmAgent : public Agent {
 public:
  /// `client` talks to the provider (tests pass one pointed at a local server).
  LlmAgent(tools::Toolbox& tools, LlmSettings settings, std::unique_ptr<llm::Client> client);
  std::string name() const override { return settings_.autonomous ? "llm-autonomous" : "llm"; }
  /// Runs the task: eager baseline, recall from memory, then (autonomous: the orchestrator
  /// decides) the generator until a kernel verifies, the repairer when none does, and
  /// task.rounds optimizer rounds. Throws Error only for infrastructure faults; model and tool
  /// failures end the conversation, not the run.
  TaskResult run(const Task& task, const ProgressSink& progress) override;

  /// Spend per role over every run of this agent; total_usd() their sum.
  const std::map<std::string, RoleSpend>& spend() const { return spend_; }
  double total_usd() const;
  /// Why the last run stopped early ("" when it did not): the USD, wall-clock or rounds cap.
  const std::string& stop_reason() const { return stop_reason_; }
  /// The first model-API failure over every run of this agent ("" when none): the API was
  /// unreachable or refused, or its reply could not be used, and that task's conversation ended.
  /// `thrive optimize` then exits 5 (a backend failure), since its tasks did not run as asked.
  const std::string& api_failure() const { return api_failure_; }
  /// The tools a role may call (exposed for tests and docs).
  static std::vector<llm::ToolSpec> tools_for(const std::string& role);

 private:
  struct Run;
  std::string converse(Run& run, const std::string& role, const std::string& user);
  std::string execute(Run& run, const std::string& role, const llm::ToolCall& call, bool& is_error);
  std::string system_prompt(const std::string& role) const;

  tools::Toolbox& tools_;
  LlmSettings settings_;
  std::unique_ptr<llm::Client> client_;
  std::map<std::string, RoleSpend> spend_;
  std::string stop_reason_;
  std::string api_failure_;
};

/// The agent `cfg.agent` names ("search" or "llm"; `autonomous` only with llm). Error(kUsage)
/// for another name or an LLM setting that is missing.
std::unique_ptr<Agent> make_agent(const std::string& name, tools::Toolbox& tools, bool autonomous);

}  // namespace thrive::agents
