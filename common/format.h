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

/// @p value in scientific notation with @p digits digits after the point: scientific(0.0001, 1) is "1.0e-04".
/// @param value  the number
/// @param digits digits after the decimal point
inline std::string scientific(double value, int digits) {
  std::ostringstream text;
  text << std::scientific << std::setprecision(digits) << value;
  return text.str();
}

/// Bytes in a mebibyte (2^20): the labs' memory columns and observations are in MiB.
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

/// @p bytes in mebibytes: to_mib(3 << 20) is 3.0.
/// @param bytes  a byte count
inline double to_mib(double bytes) { return bytes / kBytesPerMiB; }

/// A byte count in binary units: format_bytes(1536) is "1.5 KiB", format_bytes(3 << 30) is "3.0 GiB".
inline std::string format_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? fixed(bytes, 0) + " bytes" : fixed(bytes, 1) + " " + units[unit];
}

}  // namespace speedlabs
