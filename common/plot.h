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
std::string run_gnuplot(const std::string& script_path, const std::string& script,
                        const std::vector<std::string>& args);

/// Runs the gnuplot script text @p script, which writes one SVG chart to each of its first arguments (ARG1 for
/// names[0], ARG2 for names[1], ...), followed by @p args; every chart lands at `<directory>/<name>.svg`.
///
/// The charts are written the way --json is: gnuplot writes each into a new file of its own beside its final
/// path (created exclusively here, so no link planted in the folder can redirect it), each is checked whole
/// (it ends with `</svg>`: a full disk cuts it short), and only then are they renamed into place, all of
/// them or none. A chart's final path that is a symbolic link, a folder or a device is refused, never written
/// through.
/// @return the charts' paths, or none with @p failure set when gnuplot is missing or failed (the lab goes on
///         without charts; an earlier run's charts are kept)
/// @throws RuntimeFailure when a chart cannot be written whole (disk full, a final path that is not a regular
///         file, a rename refused): the user asked for it, so the run fails (exit 3), and nothing is replaced
std::vector<std::string> write_svgs(const std::string& script, const std::string& directory,
                                    const std::vector<std::string>& names, const std::vector<std::string>& args,
                                    std::string& failure);

/// Writes @p data to `<directory>/<name>.dat` (atomically), runs `gnuplot -c SCRIPT <dat> <temporary svg>
/// <args...>` and puts the SVG at `<directory>/<name>.svg` as write_svgs() does, so a reader never sees half a
/// chart. Throws RuntimeFailure as write_svgs() does.
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
