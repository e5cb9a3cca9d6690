#include "common/plot.h"

#include <unistd.h>

#include <filesystem>

#include "common/errors.h"
#include "common/files.h"
#include "common/process.h"

namespace speedlabs {

std::string run_gnuplot(const std::string& script_path, const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"gnuplot", "-c", script_path.empty() ? "/dev/stdin" : script_path};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions options;
  options.input = script_path.empty() ? script : "";
  options.timeout_s = 60;  // a chart takes well under a second; a hung gnuplot must not hang the lab
  ProcessResult result;
  try {
    result = run_process(argv, options);
  } catch (const RuntimeFailure& e) {
    return std::string(e.what()) + " (install gnuplot; Debian: gnuplot-nox)";
  }
  return result.ok() ? "" : "gnuplot " + result.describe() + ": " + result.output;
}

std::string plot_svg(const std::string& script_path, const std::string& directory, const std::string& name,
                     const std::string& data, const std::vector<std::string>& args, std::string& failure) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(directory, error);
  const fs::path dat = fs::path(directory) / (name + ".dat");
  const fs::path svg = fs::path(directory) / (name + ".svg");
  const fs::path temporary = fs::path(directory) / ("." + name + ".svg.tmp" + std::to_string(getpid()));
  if (!try_write_file_atomically(dat.string(), data)) {
    failure = "cannot write " + dat.string();
    return "";
  }
  std::vector<std::string> script_args{dat.string(), temporary.string()};
  script_args.insert(script_args.end(), args.begin(), args.end());
  failure = run_gnuplot(script_path, "", script_args);
  if (failure.empty() && !fs::exists(temporary)) failure = "gnuplot " + script_path + " wrote no chart";
  if (!failure.empty()) {
    fs::remove(temporary, error);
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

}  // namespace speedlabs
