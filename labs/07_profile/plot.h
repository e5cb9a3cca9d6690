/// @file labs/07_profile/plot.h
/// @brief SVG charts through gnuplot, started with speedlabs::run_process: the script is a file of the lab,
/// the data file and the output are passed to it as arguments (gnuplot -c script ARG1 ARG2 ...).
#pragma once
#include <string>
#include <vector>

namespace lab07 {

/// Writes @p data to `<directory>/<name>.dat` (atomically), runs
/// `gnuplot -c labs/07_profile/<script> <dat> <temporary svg> <args...>` and renames the SVG to
/// `<directory>/<name>.svg`, so a reader never sees half a chart.
/// @param script    the gnuplot script's file name in labs/07_profile/
/// @param directory where the data and the chart go (created if needed)
/// @param name      the files' name without extension
/// @param data      the data, one point per line, as the script reads it
/// @param args      further arguments of the script (ARG3, ARG4, ...)
/// @param failure   set to why, when there is no chart
/// @return the SVG's path, or "" with @p failure set (gnuplot missing or failed: the lab goes on)
std::string plot_svg(const std::string& script, const std::string& directory, const std::string& name,
                     const std::string& data, const std::vector<std::string>& args, std::string& failure);

}  // namespace lab07
