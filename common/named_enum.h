/// @file named_enum.h
/// @brief One table per enum gives its values in order, their names and the parser of those names.
///
/// A lab names the values of its enums on the command line, in tables and in observation ids; one table
/// keeps the three from drifting apart (a value added to the enum but not to a hand-written switch, or
/// to the switch but not to the flag's list of choices).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "common/errors.h"

namespace speedlabs {

/// The values of @p Enum, in the order the lessons use them, with their names.
template <class Enum>
class EnumNames {
 public:
  /// @param what   what a value is, for messages ("precision", "rung")
  /// @param table  every value with its name, in order
  EnumNames(std::string what, std::vector<std::pair<Enum, std::string>> table)
      : what_(std::move(what)), table_(std::move(table)) {
    for (const auto& [value, name] : table_) {
      values_.push_back(value);
      names_.push_back(name);
    }
  }

  /// Every value, in order.
  const std::vector<Enum>& values() const { return values_; }

  /// Every name, in order (CLI::IsMember takes this list).
  const std::vector<std::string>& names() const { return names_; }

  /// The name of @p value.
  const std::string& name(Enum value) const {
    for (const auto& [candidate, name] : table_) {
      if (candidate == value) return name;
    }
    throw std::logic_error(what_ + " value " + std::to_string(static_cast<int>(value)) + " has no name");
  }

  /// The value named @p name; throws UsageError listing the choices for anything else.
  Enum parse(const std::string& name) const {
    for (const auto& [value, candidate] : table_) {
      if (candidate == name) return value;
    }
    std::string choices;
    for (size_t i = 0; i < names_.size(); ++i) {
      choices += (i == 0 ? "" : i + 1 == names_.size() ? " or " : ", ") + names_[i];
    }
    throw UsageError("unknown " + what_ + " '" + name + "': choose " + choices);
  }

 private:
  std::string what_;
  std::vector<std::pair<Enum, std::string>> table_;
  std::vector<Enum> values_;
  std::vector<std::string> names_;
};

}  // namespace speedlabs
