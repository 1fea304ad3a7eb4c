// Agents: the seed's four roles (generator, optimizer, repairer, analyst) behind one
// interface. An agent runs one *task* — an op at one shape on one device — through
// seed -> (repair) -> optimize x N, using only the tools (tools::Toolbox). The search
// agent (search_agent.hpp) needs no network; LLM agents arrive with a later issue.
#pragma once

#include <functional>
#include <string>

#include "thrive/ops/op.hpp"
#include "thrive/tools/toolbox.hpp"

namespace thrive::agents {

/// One unit of inner-loop work.
struct Task {
  std::string op;
  ops::ShapeCase shape;
  int rounds = 6;             ///< optimizer rounds
  int pass = 1;               ///< 1-based pass number
  int64_t run_id = 0;
  std::string command;        ///< recorded with kernels, for reproduction
  double target_speedup = 2.0;
  /// Where the generator starts when memory has nothing for the task: false, the template's
  /// defaults; true, KernelSource::simplest() (every parameter at its first listed value), so
  /// the run gains nothing from tuning baked into the defaults (`thrive demo --start simplest`).
  bool start_simplest = false;
};

/// A progress event for live output (one line each).
struct Progress {
  std::string op, shape, phase;   ///< phase: eager | recall | generate | repair | optimize | paired | done
  int round = 0, rounds = 0;
  std::string change;             ///< card title / param change
  std::string status;             ///< sandbox status of the attempt
  double time_us = 0;             ///< this attempt (0 if it failed)
  double best_us = 0;             ///< best so far (0 while no kernel has passed)
  double speedup = 0;             ///< eager / best (0 while no kernel has passed)
  std::string note;
};
using ProgressSink = std::function<void(const Progress&)>;

/// What a task produced.
struct TaskResult {
  std::string op, shape;
  double eager_us = 0;            ///< µs a call: the eager baseline, paired with the best (Toolbox::confirm_speedup)
  double best_us = 0;             ///< µs a call: the best kernel, paired (its benchmark figure when unpaired)
  double speedup = 0;             ///< 1 / the median paired time ratio (about eager_us / best_us)
  double bandwidth_gbps = 0;
  double percent_of_peak = 0;
  std::string best_kernel_id;
  std::string best_params;
  bool recalled = false;          ///< started from a kernel in long-term memory
  int attempts = 0;
  int rounds_used = 0;
  int rounds_to_best = 0;         ///< round that found the final best (0 = seed/recall)
  int round_reached_target = -1;  ///< first round with speedup >= target (-1 = never)
  double seconds_to_target = -1;  ///< s from the task's start to that round's end (-1 = never)
  double wall_s = 0;
  bool verified = false;
};

class Agent {
 public:
  virtual ~Agent() = default;
  virtual std::string name() const = 0;
  /// Runs `task`. Candidate failures are recorded, never thrown; throws Error only
  /// for infrastructure faults (e.g. the eager baseline cannot run).
  virtual TaskResult run(const Task& task, const ProgressSink& progress) = 0;
};

}  // namespace thrive::agents
