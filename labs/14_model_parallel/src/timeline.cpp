// The pipeline's timeline as SVG, drawn from the measured start and end of every operation on every stage.
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <vector>

#include "experiment.h"
#include "pipeline.h"

namespace lab14 {

std::string timeline_svg(const nlohmann::json& run, int stages) {
  const int m = run.at("micro_batches").get<int>();
  const std::string schedule = run.at("schedule").get<std::string>();
  const auto times = run.at("times").back().get<std::vector<int64_t>>();  // the last step
  const size_t per_stage = times.size() / static_cast<size_t>(stages);
  int64_t start = times[0], end = times[0];
  for (int s = 0; s < stages; ++s) {
    start = std::min(start, times[s * per_stage]);
    for (size_t i = 1; i < per_stage; ++i) end = std::max(end, times[s * per_stage + i]);
  }
  const double width = 900, left = 90, row = 40, top = 40;
  const double scale = (width - left - 10) / static_cast<double>(std::max<int64_t>(end - start, 1));
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << top + row * stages + 40
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"10\" y=\"20\">" << schedule << ", " << stages << " stages, M = " << m
      << ": forward (blue), backward (orange), idle (blank); measured, last step, " << (end - start) / 1e6
      << " ms</text>\n";
  for (int s = 0; s < stages; ++s) {
    const double y = top + row * s;
    svg << "<text x=\"10\" y=\"" << y + row / 2 + 4 << "\">stage " << s << "</text>\n"
        << "<rect x=\"" << left << "\" y=\"" << y + 4 << "\" width=\"" << width - left - 10 << "\" height=\"" << row - 8
        << "\" fill=\"#f4f4f4\" stroke=\"#ccc\"/>\n";
    const auto ops = schedule_for(schedule, s, stages, m);
    for (size_t k = 0; k < ops.size(); ++k) {
      const int64_t a = times[s * per_stage + 1 + 2 * k], b = times[s * per_stage + 2 + 2 * k];
      const double x0 = left + (a - start) * scale, w = std::max(1.0, (b - a) * scale);
      const bool fwd = ops[k].kind == PipeOp::forward;
      svg << "<rect x=\"" << x0 << "\" y=\"" << y + 4 << "\" width=\"" << w << "\" height=\"" << row - 8 << "\" fill=\""
          << (fwd ? "#4c78a8" : "#f58518") << "\" stroke=\"white\"/>\n"
          << "<text x=\"" << x0 + w / 2 - 4 << "\" y=\"" << y + row / 2 + 4 << "\" fill=\"white\">"
          << ops[k].micro_batch << "</text>\n";
    }
  }
  svg << "<text x=\"" << left << "\" y=\"" << top + row * stages + 20 << "\">time &#8594;</text>\n</svg>\n";
  return svg.str();
}

}  // namespace lab14
