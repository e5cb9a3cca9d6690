#include "plot.h"

#include <unistd.h>

#include <filesystem>

#include "common/files.h"
#include "common/process.h"

namespace lab07 {

namespace {
constexpr double kGnuplotTimeoutS = 60;
}

std::string plot_svg(const std::string& script, const std::string& directory, const std::string& name,
                     const std::string& data, const std::vector<std::string>& args, std::string& failure) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(directory, error);
  const fs::path dat = fs::path(directory) / (name + ".dat");
  const fs::path svg = fs::path(directory) / (name + ".svg");
  const fs::path temporary = fs::path(directory) / ("." + name + ".svg.tmp" + std::to_string(getpid()));
  if (!speedlabs::try_write_file_atomically(dat.string(), data)) {
    failure = "cannot write " + dat.string();
    return "";
  }
  std::vector<std::string> argv{"gnuplot", "-c", SPEEDLABS_SOURCE_DIR "/labs/07_profile/" + script, dat.string(),
                                temporary.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  speedlabs::ProcessOptions options;
  options.timeout_s = kGnuplotTimeoutS;
  speedlabs::ProcessResult result;
  try {
    result = speedlabs::run_process(argv, options);
  } catch (const std::exception& e) {
    failure = std::string(e.what()) + " (install gnuplot; Debian: gnuplot-nox)";
    return "";
  }
  if (!result.ok() || !fs::exists(temporary)) {
    fs::remove(temporary, error);
    failure = "gnuplot " + script + ": " + result.describe() + ": " + result.output;
    return "";
  }
  fs::rename(temporary, svg, error);
  if (error) {
    fs::remove(temporary, error);
    failure = "cannot write " + svg.string();
    return "";
  }
  return svg.string();
}

}  // namespace lab07
