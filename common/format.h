/// @file format.h
/// @brief Numbers as the labs' tables and observation texts print them.
#pragma once
#include <iomanip>
#include <sstream>
#include <string>

namespace speedlabs {

/// @p value in fixed-point notation with @p digits digits after the point: fixed(3.14159, 2) is "3.14".
/// @param value  the number
/// @param digits digits after the decimal point
inline std::string fixed(double value, int digits) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(digits) << value;
  return text.str();
}

}  // namespace speedlabs
