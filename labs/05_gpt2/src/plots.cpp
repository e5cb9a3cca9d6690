// Lab 05's two charts: the loss curves of the modes, and their throughput.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "common/plot.h"
#include "experiment.h"

namespace lab05 {

bool write_plots(const std::vector<ModeResult>& results, const std::string& directory, const std::string& title) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    std::cerr << "lab05: no plots: cannot create '" << directory << "': " << error.message() << "\n";
    return false;
  }
  // The data travels inline as gnuplot "datablocks" (no temporary files); the output files and the title
  // travel as the script's arguments ARG1, ARG2, ARG3: data, never gnuplot code, whatever their characters.
  std::ostringstream script;
  script << "set terminal svg size 900,520 dynamic background rgb 'white'\n";
  for (const auto& r : results) {
    script << "$" << speedlabs::to_string(r.mode) << " << EOD\n";
    for (const auto& s : r.steps) script << s.step << ' ' << std::setprecision(9) << s.loss << '\n';
    script << "EOD\n";
  }
  script << "$speed << EOD\n";
  for (const auto& r : results) script << speedlabs::to_string(r.mode) << ' ' << r.tokens_per_s << '\n';
  script << "EOD\n"
         << "set output ARG1\nset title 'Training loss per step: '.ARG3\nset xlabel 'step'\nset ylabel 'loss (nat)'\n"
         << "set grid\nset key top right\nplot ";
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string name = speedlabs::to_string(results[i].mode);
    script << (i ? ", " : "") << "$" << name << " using 1:2 with lines lw 2 dt " << i + 1 << " title '" << name << "'";
  }
  script << "\nunset output\nset output ARG2\n"
         << "set title 'Throughput (median step): '.ARG3\nset xlabel 'precision'\n"
         << "set ylabel 'tokens/s'\nset key off\nset style fill solid 0.7\nset boxwidth 0.6\nset yrange [0:*]\n"
         << "plot $speed using 0:2:xtic(1) with boxes, '' using 0:2:(sprintf('%.0f', $2)) with labels offset 0,1\n"
         << "unset output\n";
  std::string failure;
  const auto written =
      speedlabs::write_svgs(script.str(), directory, {"lab05_loss", "lab05_tokens_per_s"}, {title}, failure);
  if (written.empty()) std::cerr << "lab05: no plots: " << failure << "\n";
  return !written.empty();
}

}  // namespace lab05
