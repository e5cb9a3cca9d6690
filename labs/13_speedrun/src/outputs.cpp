// The speedrun's table, chart and record.
#include "outputs.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "common/errors.h"
#include "common/files.h"
#include "common/format.h"
#include "common/peaks.h"
#include "common/plot.h"
#include "common/table.h"

namespace lab13 {

using speedlabs::fixed;

namespace {

std::vector<const Contender*> sides(const Outcome& o) {
  std::vector<const Contender*> all = {&o.baseline, &o.trainer};
  for (const Contender& p : o.peers) all.push_back(&p);
  return all;
}

}  // namespace

void print_outcome(const Outcome& o) {
  speedlabs::Table table;
  table.left("trainer", 16).right("steps", 7).right("seconds", 10).right("init s", 8).right("tokens/s", 10);
  table.right("final val", 10).gap(2).left("outcome", 0);
  for (const Contender* c : sides(o)) {
    const double s = c->total_ms() / 1000.0;
    const double tokens = static_cast<double>(c->sequences() * c->config.recipe.seq);
    table.add_row({c->name, std::to_string(c->steps()), fixed(s, 2), fixed(c->init_ms / 1000.0, 2),
                   fixed(s > 0 ? tokens / s : 0.0, 0), c->curve.empty() ? "-" : fixed(c->curve.back().val_loss, 3),
                   c->reached ? "reached the target" : c->failure});
  }
  std::cout << "\n";
  table.print(std::cout);
  std::cout << "  score (baseline seconds / trainer seconds): "
            << (o.score > 0 ? fixed(o.score, 2) + "x" : "0 (" + o.score_reason + ")") << "\n";
}

void require_record_writable(const std::string& path) {
  if (speedlabs::is_stream_path(path)) throw speedlabs::UsageError("--record-to needs a file, not '" + path + "'");
  speedlabs::require_writable(path);
}

namespace {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  return out.str();
}

// The vector instruction sets of the flags line that decide a CPU's speed here.
std::vector<std::string> vector_isas(const std::string& flags) {
  std::vector<std::string> isas;
  std::istringstream words(flags);
  for (std::string w; words >> w;) {
    if (w == "fma" || w == "avx" || w == "avx2" || w == "asimd" || w == "sve" || w.rfind("avx512", 0) == 0 ||
        w.rfind("amx", 0) == 0) {
      isas.push_back(w);
    }
  }
  return isas;
}

void write_chart(const Outcome& o, const std::string& directory, double target) {
  std::ostringstream script;
  script << "set terminal svg size 900,520 dynamic background rgb 'white'\n";
  std::string plots;
  for (const Contender* c : sides(o)) {
    if (c->curve.empty()) continue;
    script << "$" << c->name << " << EOD\n";
    for (const Point& p : c->curve) script << p.seconds << ' ' << std::setprecision(9) << p.val_loss << '\n';
    script << "EOD\n";
    plots += "$" + c->name + " using 1:2 with linespoints lw 2 title '" + (c == &o.trainer ? "your trainer" : c->name) +
             "', ";
  }
  script << "set output ARG1\nset title 'Validation loss against timed seconds: '.ARG2\n"
         << "set xlabel 'seconds (init, steps, weights(); validation not timed)'\nset ylabel 'validation loss (nat)'\n"
         << "set grid\nset key top right\n"
         << "plot " << plots << target << " with lines dt 2 title 'target'\nunset output\n";
  std::string failure;
  const auto written = speedlabs::write_svgs(script.str(), directory, {"lab13_speedrun"},
                                             {"score " + (o.score > 0 ? fixed(o.score, 2) + "x" : "0")}, failure);
  if (written.empty()) {
    std::cerr << "lab13: no chart: " << failure << "\n";
  } else {
    std::cout << "chart written to " << written.front() << "\n";
  }
}

// Each Python peer's seconds to the target (null when it did not get there), and why not.
nlohmann::json peers_of(const Outcome& o) {
  nlohmann::json peers = nlohmann::json::object();
  for (const Contender& p : o.peers) {
    peers[p.name] = {{"seconds", p.reached ? nlohmann::json(p.total_ms() / 1000.0) : nlohmann::json(nullptr)},
                     {"failure", p.failure}};
  }
  return peers;
}

// Every side's validations as [timed seconds, loss]: what docs/speedrun.md plots.
nlohmann::json curves_of(const Outcome& o) {
  nlohmann::json curves = nlohmann::json::object();
  for (const Contender* c : sides(o)) {
    nlohmann::json curve = nlohmann::json::array();
    for (const Point& point : c->curve) curve.push_back({point.seconds, point.val_loss});
    curves[c->name] = curve;
  }
  return curves;
}

}  // namespace

nlohmann::json record_of(const Outcome& o, const Config& config) {
  const speedlabs::CpuDescription cpu = speedlabs::describe_this_cpu();
  return {{"date", utc_now()},
          {"cpu", cpu.model_name},
          {"cores", cpu.cores},
          {"logical_cpus", o.contention.cores},
          {"isas", vector_isas(cpu.flags)},
          {"commit", config.commit.empty() ? "unknown" : config.commit},
          {"config",
           {{"layers", config.n_layer},
            {"width", config.n_embd},
            {"heads", config.n_head},
            {"context", config.block},
            {"batch", config.recipe.batch},
            {"seq", config.recipe.seq},
            {"decay_steps", config.recipe.decay_steps},
            {"target", config.target},
            {"step_cap", config.step_cap},
            {"eval_every", config.eval_every}}},
          {"score", o.score},
          {"score_reason", o.score_reason},
          {"baseline_s", o.baseline.total_ms() / 1000.0},
          {"trainer_s", o.trainer.total_ms() / 1000.0},
          {"baseline_steps", o.baseline.steps()},
          {"trainer_steps", o.trainer.steps()},
          {"peers", peers_of(o)},
          {"curves", curves_of(o)},
          {"busy", o.contention.busy()},
          {"techniques", o.trainer.trainer->techniques()},
          {"ablation", o.ablation}};
}

void write_outputs(const Outcome& o, const Config& config) {
  if (!config.plots_dir.empty()) write_chart(o, config.plots_dir, config.target);
  if (config.record_to.empty()) return;
  std::string old;
  if (std::filesystem::exists(config.record_to)) old = speedlabs::read_file(config.record_to);
  if (!old.empty() && old.back() != '\n') old += '\n';
  speedlabs::write_file_atomically(config.record_to, old + record_of(o, config).dump() + "\n");
  std::cout << "record appended to " << config.record_to << "\n";
}

}  // namespace lab13
