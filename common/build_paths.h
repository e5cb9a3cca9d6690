/// @file common/build_paths.h
/// @brief Where this build's checkout, programs and configured Python are, for the code that needs them.
///
/// The paths live in one generated source (build_paths.cpp.in, filled in by CMake), not in the compile flags
/// of every target: a flag that holds a checkout's path differs between two clones of the same commit, and
/// then ccache cannot reuse one clone's compiles for the other.
#pragma once
#include <string>

namespace speedlabs {

/// The checkout this build was configured from: the labs' READMEs, gnuplot scripts and predictions are read
/// from there.
const std::string& source_dir();

/// The Python with torch found when the build was configured; empty when there was none.
const std::string& configured_python();

/// The path of one of this build's programs (lab05, tokenize, ...): the folder every program is built into.
std::string program_path(const std::string& name);

}  // namespace speedlabs
