#include "common/plot.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string_view>

#include "common/errors.h"
#include "common/files.h"
#include "common/process.h"

namespace speedlabs {

std::string run_gnuplot(const std::string& script_path, const std::string& script,
                        const std::vector<std::string>& args) {
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

namespace {

namespace fs = std::filesystem;

// One chart on its way: gnuplot writes `temporary`, a file created here for it alone, which is checked and
// renamed over `final_path` only when every chart of the script came out whole.
struct PendingChart {
  fs::path final_path;
  std::string temporary;
};

class PendingCharts {
 public:
  PendingCharts(const fs::path& directory, const std::vector<std::string>& names) {
    for (const auto& name : names) {
      const fs::path final_path = directory / (name + ".svg");
      if (const std::string what = not_a_regular_file(final_path.string()); !what.empty()) {
        throw RuntimeFailure("'" + final_path.string() + "' is " + what +
                             ": a chart only replaces a regular file, so nothing was written");
      }
      std::string pattern = (directory / ("." + name + ".XXXXXX.svg")).string();
      const int fd = ::mkstemps(pattern.data(), 4);  // O_CREAT | O_EXCL: a new file, never a planted link
      if (fd < 0) throw RuntimeFailure("cannot write a chart in '" + directory.string() + "'");
      ::close(fd);
      charts_.push_back({final_path, pattern});
    }
  }
  ~PendingCharts() {
    for (const auto& chart : charts_) ::unlink(chart.temporary.c_str());  // gone once renamed: harmless then
  }
  PendingCharts(const PendingCharts&) = delete;
  PendingCharts& operator=(const PendingCharts&) = delete;

  std::vector<std::string> temporaries() const {
    std::vector<std::string> paths;
    for (const auto& chart : charts_) paths.push_back(chart.temporary);
    return paths;
  }

  // Every chart whole, then every chart renamed into place.
  std::vector<std::string> commit() {
    for (const auto& chart : charts_) {
      if (!ends_an_svg(chart.temporary)) {
        throw RuntimeFailure("the chart '" + chart.final_path.string() +
                             "' came out cut short (is the disk full?): nothing was replaced");
      }
    }
    std::vector<std::string> written;
    for (const auto& chart : charts_) {
      std::error_code error;
      fs::rename(chart.temporary, chart.final_path, error);
      if (error)
        throw RuntimeFailure("cannot put the chart at '" + chart.final_path.string() + "': " + error.message());
      written.push_back(chart.final_path.string());
    }
    return written;
  }

 private:
  // gnuplot's SVG terminal closes every file with </svg>: a chart without it was cut short.
  static bool ends_an_svg(const std::string& path) {
    std::string text;
    try {
      text = read_file(path);
    } catch (const std::exception&) {
      return false;
    }
    const auto end = text.find_last_not_of(" \n\r\t");
    if (end == std::string::npos) return false;
    const std::string_view body(text.data(), end + 1);
    return body.size() >= 6 && body.substr(body.size() - 6) == "</svg>";
  }

  std::vector<PendingChart> charts_;
};

// Runs the script (a file, or text on stdin) with the charts' temporaries placed among its arguments by
// @p arguments, and puts the charts in place.
std::vector<std::string> render(const std::string& script_path, const std::string& script, const std::string& directory,
                                const std::vector<std::string>& names,
                                const std::function<std::vector<std::string>(std::vector<std::string>)>& arguments,
                                std::string& failure) {
  std::error_code error;
  fs::create_directories(directory, error);
  PendingCharts charts(directory, names);
  if (script_path.empty()) {
    failure = run_gnuplot("", script, arguments(charts.temporaries()));
  } else {
    failure = run_gnuplot(script_path, "", arguments(charts.temporaries()));
  }
  if (!failure.empty()) return {};
  return charts.commit();
}

}  // namespace

std::vector<std::string> write_svgs(const std::string& script, const std::string& directory,
                                    const std::vector<std::string>& names, const std::vector<std::string>& args,
                                    std::string& failure) {
  return render(
      "", script, directory, names,
      [&](std::vector<std::string> paths) {
        paths.insert(paths.end(), args.begin(), args.end());
        return paths;
      },
      failure);
}

std::string plot_svg(const std::string& script_path, const std::string& directory, const std::string& name,
                     const std::string& data, const std::vector<std::string>& args, std::string& failure) {
  std::error_code error;
  fs::create_directories(directory, error);
  const fs::path dat = fs::path(directory) / (name + ".dat");
  if (!try_write_file_atomically(dat.string(), data)) {
    throw RuntimeFailure("cannot write the chart's data '" + dat.string() +
                         "' (a full disk, or a path that is not a regular file): nothing was replaced");
  }
  const auto written = render(
      script_path, "", directory, {name},
      [&](std::vector<std::string> paths) {
        paths.insert(paths.begin(), dat.string());
        paths.insert(paths.end(), args.begin(), args.end());
        return paths;
      },
      failure);
  return written.empty() ? "" : written.front();
}

}  // namespace speedlabs
