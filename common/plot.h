/// @file plot.h
/// @brief SVG charts through gnuplot, the one way every lab draws: started from an argv vector
/// (speedlabs::run_process, no shell), file names passed as the script's arguments (ARG1, ARG2, ...),
/// so a quote or a space in a path is data and never gnuplot code.
#pragma once
#include <string>
#include <vector>

namespace speedlabs {

/// Runs `gnuplot -c SCRIPT ARGS...`, where SCRIPT is @p script_path, or the text @p script fed on
/// gnuplot's standard input when @p script_path is empty.
/// @param script_path  a gnuplot script file, or "" to use @p script
/// @param script       the script's text (when @p script_path is "")
/// @param args         the script's ARG1, ARG2, ... (file names, titles)
/// @return "" when gnuplot ran and exited 0; otherwise why there is no chart (gnuplot missing, with the
///         package to install; failed, with its output; timed out), for a lab that goes on without it
std::string run_gnuplot(const std::string& script_path, const std::string& script, const std::vector<std::string>& args);

/// Writes @p data to `<directory>/<name>.dat` (atomically), runs `gnuplot -c SCRIPT <dat> <temporary svg>
/// <args...>` and renames the SVG to `<directory>/<name>.svg`, so a reader never sees half a chart.
/// @param script_path the gnuplot script file (it reads the data file as ARG1 and writes ARG2)
/// @param directory   where the data and the chart go (created if needed)
/// @param name        the files' name without extension
/// @param data        the data, as the script reads it
/// @param args        further arguments of the script (ARG3, ARG4, ...)
/// @param failure     set to why, when there is no chart
/// @return the SVG's path, or "" with @p failure set (gnuplot missing or failed: the lab goes on)
std::string plot_svg(const std::string& script_path, const std::string& directory, const std::string& name,
                     const std::string& data, const std::vector<std::string>& args, std::string& failure);

}  // namespace speedlabs
