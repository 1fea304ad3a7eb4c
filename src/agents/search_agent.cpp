#include "thrive/agents/search_agent.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "thrive/bench/bench.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive::agents {
namespace {

struct Current {
  backend::KernelSource kernel;
  sandbox::EvalResult result;
  std::string id;
  std::string parent_id;
  std::string card_id;
};

std::string describe_change(const backend::Params& from, const backend::Params& to) {
  std::string s;
  for (const auto& [k, v] : to) {
    auto it = from.find(k);
    if (it == from.end() || it->second != v)
      s += (s.empty() ? "" : ", ") + k + " " + (it == from.end() ? "?" : it->second) + "->" + v;
  }
  return s.empty() ? "no change" : s;
}

std::optional<ops::Trait> trait_of(const std::string& op) {
  for (const auto& o : ops::registry())
    if (o->name() == op) return o->trait();
  return std::nullopt;
}

}  // namespace

SearchAgent::SearchAgent(tools::Toolbox& tools, SearchWeights weights)
    : tools_(tools), weights_(weights) {}

std::vector<SearchAgent::Ranked> SearchAgent::rank_cards(
    const ops::Op& op, const std::string& shape_class, const backend::KernelSource& tmpl,
    const backend::Params& parent, const std::string& bottleneck,
    const std::set<std::string>& tried) {
  const std::string trait = ops::trait_name(op.trait());
  auto all_evidence = tools_.store().evidence();
  double total_n = 0;
  for (const auto& e : all_evidence) total_n += e.successes + e.failures;
  std::vector<Ranked> out;
  for (const auto& card : tools_.store().cards(tools_.backend_name())) {
    if (std::find(card.traits.begin(), card.traits.end(), trait) == card.traits.end()) continue;
    Ranked r;
    r.card = card;
    r.result = parent;
    bool applicable = card.set.is_object() && !card.set.empty(), changed = false;
    for (auto it = card.set.begin(); applicable && it != card.set.end(); ++it) {
      const std::string value = it->is_string() ? it->get<std::string>() : it->dump();
      auto spec = std::find_if(tmpl.param_specs.begin(), tmpl.param_specs.end(),
                               [&](const backend::ParamSpec& p) { return p.name == it.key(); });
      if (spec == tmpl.param_specs.end() ||
          std::find(spec->values.begin(), spec->values.end(), value) == spec->values.end()) {
        applicable = false;
        break;
      }
      changed = changed || r.result[it.key()] != value;
      r.result[it.key()] = value;
    }
    if (!applicable || !changed || tried.count(backend::params_to_string(r.result))) continue;
    double s = 0, f = 0, lg = 0;
    for (const auto& e : all_evidence) {
      if (e.card_id != card.id || e.backend != tools_.backend_name()) continue;
      double w = 0.25;
      if (e.op == op.name()) w = e.shape_class == shape_class ? 1.0 : 0.7;
      else if (auto t = trait_of(e.op); t && *t == op.trait()) w = 0.5;
      s += w * e.successes;
      f += w * e.failures;
      lg += w * e.sum_log_gain;
    }
    // a builtin change its author marked risky starts with that many failures
    f += tools_.card_prior_failures(card);
    const double n = s + f;
    r.success_rate = (s + 1.0) / (n + 2.0);
    r.expected_log_gain = (lg + weights_.prior_log_gain) / (n + 1.0);
    r.matches_bottleneck = std::find(card.bottlenecks.begin(), card.bottlenecks.end(),
                                     bottleneck) != card.bottlenecks.end();
    const double bonus = weights_.exploration * std::sqrt(std::log(total_n + 2.0) / (n + 1.0));
    r.score = (r.matches_bottleneck ? weights_.bottleneck_match : 1.0) * r.success_rate *
                  r.expected_log_gain + bonus;
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const Ranked& a, const Ranked& b) {
    return a.score != b.score ? a.score > b.score : a.card.id < b.card.id;
  });
  return out;
}

TaskResult SearchAgent::run(const Task& task, const ProgressSink& progress) {
  const auto start = std::chrono::steady_clock::now();
  const auto& op = ops::find_op(task.op);
  const auto& cfg = tools_.config();
  auto& store = tools_.store();
  const std::string& device = tools_.device_key();
  const std::string backend_name = tools_.backend_name();
  const auto tmpl = tools_.op_template(task.op);
  // The generator's starting point (and the base that repairs and distilled cards are stated
  // against): the template's defaults, or its simplest variant for a cold start (Task docs).
  const backend::Params start_params = task.start_simplest ? tmpl.simplest() : tmpl.defaults();

  TaskResult result;
  result.op = task.op;
  result.shape = task.shape.label;

  auto emit = [&](Progress p) {
    p.op = task.op;
    p.shape = task.shape.label;
    p.rounds = task.rounds;
    if (progress) progress(p);
  };
  // An attempt's time for its progress line: its benchmark figure when it passed, else 0 (a
  // failure after its benchmark shows no time, nor a best)
  const auto passed_us = [](const sandbox::EvalResult& r) {
    return r.status == sandbox::Status::kPassed ? r.bench.time_us() : 0.0;
  };

  const auto eager = tools_.eager(task.op, task.shape);
  result.eager_us = eager.bench.time_us();
  emit({.phase = "eager", .status = "passed", .time_us = result.eager_us,
        .note = "eager baseline (one pass per elementary op)"});

  // Everything this task has evaluated, in any run: never re-try a change, unless its verdict was
  // a timing (measured slower, or "suspect timing": faster than the ceiling allows) taken on
  // another benchmark footing (bench::kMeasurementFooting), which today's figures cannot be
  // compared with: such a change may be tried once more, and its new attempt is on today's
  // footing. Verdicts on the code (incorrect, compile error, crash, timeout) stand on any footing.
  // Attempts recorded before footings were (0) carry no verdict kind: theirs is read from the
  // status and the verdict detail, which follows " | " in the notes (or is the whole notes).
  const auto timing_verdict = [](const memory::Attempt& a) {
    if (a.footing != 0) return a.timing_verdict;
    const std::string suspect = tools::kSuspectTimingDetail;
    return a.status == sandbox::status_name(sandbox::Status::kPassed) ||
           (a.status == sandbox::status_name(sandbox::Status::kIncorrect) &&
            (a.notes.rfind(suspect, 0) == 0 || a.notes.find(" | " + suspect) != std::string::npos));
  };
  std::set<std::string> tried, stale;
  for (const auto& a : store.trajectory(0, task.op, task.shape.label, device)) {
    if (a.phase != "optimize" && a.phase != "repair") continue;
    if (a.footing != bench::kMeasurementFooting && timing_verdict(a)) stale.insert(a.change);
    else tried.insert(a.change);
  }
  for (const auto& c : tried) stale.erase(c);

  auto record_attempt = [&](const std::string& phase, int round, const backend::KernelSource& k,
                            const std::string& id, const std::string& card,
                            const sandbox::EvalResult& r, const std::string& notes) {
    ++result.attempts;
    auto a = tools_.attempt_record(k, task.shape.label, phase, r, result.eager_us);
    a.run_id = task.run_id;
    a.pass = task.pass;
    a.round = round;
    a.kernel_id = id;
    a.card_id = card;
    if (!notes.empty()) a.notes = notes + " | " + r.detail;
    store.record_attempt(a);
  };
  // may_become_best: false for a candidate this search reverted (its faster first time was not
  // a gain beyond the paired spread), so the library's best stays the kernel the search kept;
  // replaces: the parent a kept change beat (Store::record_kernel)
  auto record_kernel = [&](const Current& c, bool may_become_best, double eager_us, const std::string& replaces = "") {
    auto k = tools_.kernel_record(c.kernel, task.shape, c.result, eager_us, task.command);
    k.kernel_id = c.id;
    k.parent_id = c.parent_id;
    k.card_id = c.card_id;
    store.record_kernel(k, may_become_best, replaces);
  };
  auto evaluate = [&](const backend::KernelSource& k) { return tools_.benchmark(k, task.shape); };

  std::optional<Current> best;
  // 1. Recall: the best kernel of this exact task, re-verified before it is trusted;
  //    else the best kernel of the nearest shape of the same op on this device.
  std::vector<memory::KernelRecord> recall;
  if (auto b = tools_.best_or_nearest(op, task.shape)) recall.push_back(*b);
  for (const auto& rec : recall) {
    backend::KernelSource k;
    try {
      k = backend::KernelSource::parse(rec.source, "memory:" + rec.kernel_id);
    } catch (const Error& e) {
      emit({.phase = "recall", .status = "incorrect", .note = e.what()});
      continue;
    }
    auto r = evaluate(k);
    const std::string note = rec.shape_class == task.shape.label
                                 ? "recalled best from memory (" + rec.kernel_id + ")"
                                 : "recalled nearest-shape best (" + rec.shape_class + ")";
    record_attempt("recall", 0, k, rec.kernel_id, "", r, note);
    // The library's own best for this task failed its re-verification for a reason that is
    // the kernel's (wrong, no longer compiles, crashes), not the machine's (a timeout): it
    // stops being the best, so neither the leaderboard nor a later run trusts it.
    if (rec.shape_class == task.shape.label &&
        (r.status == sandbox::Status::kIncorrect || r.status == sandbox::Status::kCompileFailed ||
         r.status == sandbox::Status::kCrashed))
      store.demote_kernel(rec.kernel_id, rec.shape_class, device);
    emit({.phase = "recall", .change = note, .status = sandbox::status_name(r.status),
          .time_us = passed_us(r), .best_us = passed_us(r),
          .speedup = passed_us(r) > 0 ? result.eager_us / passed_us(r) : 0,
          .note = r.status == sandbox::Status::kPassed ? "" : r.detail});
    if (r.status == sandbox::Status::kPassed) {
      // The exact best keeps its stored id, so recording the best below replaces the stored
      // figures with today's measurement (an import may claim any time); a nearest-shape
      // kernel is recorded at this shape under its own id.
      best = Current{k, r, rec.shape_class == task.shape.label ? rec.kernel_id : tools_.kernel_id(k),
                     rec.parent_id, rec.card_id};
      result.recalled = true;
      break;
    }
  }

  // 2. Generator: the template's defaults (or its simplest variant), a correct kernel.
  std::string seed_failure;
  if (!best) {
    auto k = tmpl.instantiate(start_params);
    auto r = evaluate(k);
    record_attempt("generate", 0, k, tools_.kernel_id(k), "", r, "");
    emit({.phase = "generate", .change = task.start_simplest ? "template, simplest variant" : "template defaults", .status = sandbox::status_name(r.status),
          .time_us = passed_us(r), .best_us = passed_us(r),
          .speedup = passed_us(r) > 0 ? result.eager_us / passed_us(r) : 0,
          .note = r.status == sandbox::Status::kPassed ? "" : r.detail});
    if (r.status == sandbox::Status::kPassed) best = Current{k, r, tools_.kernel_id(k), "", ""};
    else seed_failure = r.detail;
  }
  // 3. Repairer for a failed seed: single changes from the defaults, cards that
  //    succeeded before first, at most three tries.
  if (!best) {
    auto ranked = rank_cards(op, task.shape.label, tmpl, start_params, "compute", tried);
    int tries = 0;
    for (const auto& cand : ranked) {
      if (tries++ >= 3) break;
      auto k = tmpl.instantiate(cand.result);
      auto r = evaluate(k);
      tried.insert(backend::params_to_string(cand.result));
      record_attempt("repair", 0, k, tools_.kernel_id(k), cand.card.id, r,
                     "seed failed: " + seed_failure);
      emit({.phase = "repair", .change = cand.card.title, .status = sandbox::status_name(r.status),
            .time_us = passed_us(r), .note = r.detail});
      if (r.status == sandbox::Status::kPassed) {
        best = Current{k, r, tools_.kernel_id(k), "", cand.card.id};
        break;
      }
    }
  }
  if (!best) {
    result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    emit({.phase = "done", .status = "incorrect", .note = "no correct kernel found"});
    return result;
  }
  record_kernel(*best, true, result.eager_us);
  const double first_verified_us = best->result.bench.time_us();
  auto speedup_of = [&](const Current& c) { return result.eager_us / c.result.bench.time_us(); };
  auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  if (speedup_of(*best) >= task.target_speedup) {
    result.round_reached_target = 0;
    result.seconds_to_target = since_start();
  }

  // 4. Optimizer: one change per round, chosen from memory and the latest profile.
  for (int round = 1; round <= task.rounds; ++round) {
    const auto prof = tools_.profile(op, task.shape, best->result.bench);
    auto ranked = rank_cards(op, task.shape.label, tmpl, best->kernel.params, prof.bottleneck, tried);
    if (ranked.empty()) {
      emit({.phase = "optimize", .round = round, .best_us = best->result.bench.time_us(),
            .speedup = speedup_of(*best), .note = "no untried change applies; stopping"});
      break;
    }
    const auto& pick = ranked.front();
    auto child = tmpl.instantiate(pick.result);
    const std::string change = describe_change(best->kernel.params, pick.result);
    auto r = evaluate(child);
    result.rounds_used = round;
    const std::string params_key = backend::params_to_string(pick.result);
    tried.insert(params_key);
    const std::string again_note =
        stale.count(params_key) ? "; tried before on an older benchmark footing, measured again" : "";
    bool passed = r.status == sandbox::Status::kPassed;
    auto beats_best = [&] {
      return passed && r.bench.time_us() < best->result.bench.time_us() * (1.0 - cfg.min_gain);
    };
    bool improved = beats_best();
    std::string remeasured, paired_verdict;
    if (improved) {
      // A win is measured once more, in a fresh worker on fresh inputs, and timed paired
      // and interleaved with the current best, before it is kept: the slower of the two
      // measurements counts, and the paired gain must exceed both MIN_GAIN and the
      // pairs' own spread (95% CI of the median time ratio).
      auto again = tools_.compare(child, best->kernel, task.shape);
      const bool again_ok = again.status == sandbox::Status::kPassed;
      const auto& p = again.paired;
      remeasured = again_ok ? fmt::format("; re-measured {:.4g} us (first {:.4g} us)", again.bench.time_us(),
                                          r.bench.time_us())
                            : "; re-measurement " + std::string(sandbox::status_name(again.status)) +
                                  ": " + again.detail;
      if (again_ok && p.pairs > 0)
        remeasured += fmt::format("; paired with the best over {} pairs: {:.4g} vs {:.4g} us, ratio "
                                  "{:.3f} +- {:.3f}",
                                  p.pairs, p.b_median_us, p.a_median_us, p.ratio, p.ratio_ci);
      if (!again_ok) {
        r = again;
        passed = false;
      } else if (again.bench.time_us() > r.bench.time_us()) {
        r = again;
      }
      improved = beats_best();
      if (improved && p.pairs > 0) {
        improved = p.ratio < 1.0 - cfg.min_gain && 1.0 - p.ratio > p.ratio_ci;
        if (!improved)
          paired_verdict = fmt::format("; paired with the parent: time ratio {:.3f} +- {:.3f}, not a gain "
                                       "beyond its spread", p.ratio, p.ratio_ci);
      }
      // The parent stays, and the pairs just timed it beside the child: where that differs from
      // its figure by more than 10% (a figure taken on a busier or quieter machine), the parent
      // takes the paired time, so later rounds and this round's verdict compare with today's.
      const double was = best->result.bench.time_us();
      if (!improved && again_ok && p.pairs > 0 && p.a_median_us > 0 && std::abs(p.a_median_us / was - 1.0) > 0.1) {
        bench::retime(best->result.bench, p.a_median_us);
        remeasured += fmt::format("; the parent re-timed beside it: {:.4g} us (its figure was {:.4g} us)",
                                  p.a_median_us, was);
      }
    }
    const double gain = passed ? best->result.bench.time_us() / r.bench.time_us() : 0.0;
    store.record_card_outcome(pick.card.id, task.op, task.shape.label, backend_name, improved, gain);
    const std::string notes = fmt::format("analyst: {}; card {} (score {:.3f}, {}){}{}", prof.notes,
                                          pick.card.id, pick.score, change, again_note, remeasured);
    record_attempt("optimize", round, child, tools_.kernel_id(child), pick.card.id, r, notes);
    Current cand{child, r, tools_.kernel_id(child), best->id, pick.card.id};
    if (passed) record_kernel(cand, improved, result.eager_us, improved ? best->id : "");
    std::string verdict;
    if (!passed)
      verdict = "repairer: backed out (" + std::string(sandbox::status_name(r.status)) + ")";
    else if (improved)
      verdict = fmt::format("kept: {:.2f}x faster than parent (confirmed by a second measurement)", gain);
    else
      verdict = fmt::format("reverted: {:.2f}x of parent (needs > {:.2f}x){}", gain,
                            1.0 / (1.0 - cfg.min_gain), paired_verdict);
    verdict += again_note;
    if (improved) {
      best = cand;
      result.rounds_to_best = round;
    }
    emit({.phase = passed ? "optimize" : "repair", .round = round,
          .change = pick.card.title + " [" + change + "]", .status = sandbox::status_name(r.status),
          .time_us = passed ? r.bench.time_us() : 0, .best_us = best->result.bench.time_us(),
          .speedup = speedup_of(*best),
          .note = passed ? verdict : verdict + ": " + r.detail.substr(0, 400)});
    if (result.round_reached_target < 0 && speedup_of(*best) >= task.target_speedup) {
      result.round_reached_target = round;
      result.seconds_to_target = since_start();
    }
  }

  distill_card(store, op, task.shape.label, backend_name, start_params, best->kernel.params,
               first_verified_us > 0 ? first_verified_us / best->result.bench.time_us() : 1.0);
  // 5. The figure the task reports: the best timed paired and interleaved with the eager
  //    baseline (the eager's one measurement at the start may have met other load on the
  //    machine); the stored best then carries that eager time and speedup.
  const auto confirmed = tools_.confirm_speedup(best->kernel, task.shape, best->result.bench, result.eager_us);
  if (confirmed.rejected) {  // wrong when paired: it stops being the best, and the task has none
    store.demote_kernel(best->id, task.shape.label, device);
    result.wall_s = since_start();
    emit({.phase = "paired", .change = "best vs eager, interleaved", .status = "incorrect", .note = confirmed.note});
    emit({.phase = "done", .status = "incorrect", .note = "the best failed its paired re-evaluation"});
    return result;
  }
  // the stored best keeps its benchmark time, with the eager time the paired ratio implies
  if (confirmed.pairs > 0) record_kernel(*best, true, best->result.bench.time_us() * confirmed.speedup);
  result.eager_us = confirmed.eager_us;
  emit({.phase = "paired", .change = "best vs eager, interleaved",
        .status = confirmed.pairs > 0 ? "passed" : "unpaired", .best_us = confirmed.best_us,
        .speedup = confirmed.speedup, .note = confirmed.note});
  result.best_us = confirmed.best_us;
  result.speedup = confirmed.speedup;
  result.bandwidth_gbps = confirmed.bandwidth_gbps;
  result.percent_of_peak = confirmed.percent_of_peak;
  result.best_kernel_id = best->id;
  result.best_params = backend::params_to_string(best->kernel.params);
  result.verified = true;
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  emit({.phase = "done", .status = "passed", .best_us = result.best_us, .speedup = result.speedup,
        .note = result.best_params});
  return result;
}

std::string SearchAgent::distill_card(memory::Store& store, const ops::Op& op, const std::string& shape_class,
                                      const std::string& backend, const backend::Params& defaults,
                                      const backend::Params& best, double gain) {
  nlohmann::json set = nlohmann::json::object();
  std::string changes;
  for (const auto& [name, value] : best) {
    auto d = defaults.find(name);
    if (d != defaults.end() && d->second == value) continue;
    set[name] = value;
    changes += (changes.empty() ? "" : ", ") + name + "=" + value;
  }
  if (set.size() < 2) return "";
  const std::string trait = ops::trait_name(op.trait());
  memory::StrategyCard card;
  card.id = "learned_" + backend + "_" + trait + "_" + fnv1a_hex(set.dump()).substr(0, 12);
  card.title = "Configuration learned on " + op.name() + " " + shape_class + ": " + changes;
  card.description = fmt::format(
      "Distilled from a task's trajectory: the verified best of {} at {} on the {} backend set these "
      "{} parameters together ({:.2f}x faster than the task's first verified kernel). Tried as one jump "
      "on ops with the {} trait.",
      op.name(), shape_class, backend, set.size(), gain, trait);
  card.backend = backend;
  card.traits = {trait};
  card.bottlenecks = {"memory", "compute", "traffic", "overhead", "parallelism"};
  card.set = set;
  card.origin = "learned";
  store.add_card(card);
  store.record_card_outcome(card.id, op.name(), shape_class, backend, true, std::max(gain, 1.0));
  return card.id;
}

}  // namespace thrive::agents
