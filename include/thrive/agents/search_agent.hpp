// The search agent: an expert system plus search over each op's template parameters,
// driven by long-term memory.
//
// - Generator: recalls the best verified kernel for (op, shape, device) from memory
//   (re-verified before it is trusted), else the best of the nearest shape, else the
//   template's defaults (the simplest correct kernel).
// - Analyst: Toolbox::profile names the bottleneck (overhead, parallelism, compute,
//   traffic, memory) from achieved vs peak bandwidth, time and parallelism.
// - Optimizer: ranks the applicable strategy cards — score = (bottleneck match ? 1.5 : 1)
//   x success rate x expected log-gain + exploration bonus, evidence weighted by
//   similarity (same op and shape 1.0, same op 0.7, same trait 0.5, any op 0.25), a builtin
//   card's prior_failures (cards.json) counted as failures — skips changes the trajectory
//   already tried, applies exactly ONE card per round.
// - Repairer: a failed change is backed out (the parent stays best) and the card is
//   charged a failure; a failed recall falls back to the template defaults, and failed
//   defaults to the three best-ranked single changes from them, one at a time.
#pragma once

#include <set>

#include "thrive/agents/agent.hpp"

namespace thrive::agents {

/// Ranking weights (documented in docs/architecture.md).
struct SearchWeights {
  double bottleneck_match = 1.5;
  double prior_log_gain = 0.10;   ///< expected ln(gain) of an untried card (~10%)
  double exploration = 0.05;      ///< UCB-style bonus coefficient
};

class SearchAgent final : public Agent {
 public:
  explicit SearchAgent(tools::Toolbox& tools, SearchWeights weights = {});
  std::string name() const override { return "search"; }
  TaskResult run(const Task& task, const ProgressSink& progress) override;

  /// One ranked card for a given parent (exposed for tests and `thrive memory cards`).
  struct Ranked {
    memory::StrategyCard card;
    backend::Params result;   ///< parent params with the card applied
    double score = 0;
    double success_rate = 0;
    double expected_log_gain = 0;
    bool matches_bottleneck = false;
  };
  /// Applicable cards for `op` at `shape_class` from `parent`, best first, excluding
  /// results in `tried` (params strings).
  std::vector<Ranked> rank_cards(const ops::Op& op, const std::string& shape_class,
                                 const backend::KernelSource& tmpl, const backend::Params& parent,
                                 const std::string& bottleneck,
                                 const std::set<std::string>& tried);

  /// Distills a task into long-term memory: when `best` differs from `defaults` in two or
  /// more parameters (single changes are cards already), a "learned" card that sets all of
  /// them at once, for the op's trait and this backend, with one success of ln(gain) evidence
  /// at (op, shape_class), where gain = the task's first verified time / its best time (>= 1).
  /// The id is derived from backend, trait and the params, so a later task that ends at the
  /// same configuration adds evidence to the same card. Returns the card id, or "" when
  /// nothing is distilled.
  static std::string distill_card(memory::Store& store, const ops::Op& op, const std::string& shape_class,
                                  const std::string& backend, const backend::Params& defaults,
                                  const backend::Params& best, double gain);

 private:
  tools::Toolbox& tools_;
  SearchWeights weights_;
};

}  // namespace thrive::agents
