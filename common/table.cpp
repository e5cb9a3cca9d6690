#include "common/table.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "common/format.h"

namespace speedlabs {

NumberFormat fixed_digits(int digits, std::string suffix) {
  return {NumberFormat::Style::fixed, digits, std::move(suffix)};
}

NumberFormat scientific_digits(int digits) { return {NumberFormat::Style::scientific, digits, ""}; }

NumberFormat significant_digits(int digits) { return {NumberFormat::Style::significant, digits, ""}; }

std::string Cell::text(const Column& column) const {
  if (!number_) return text_;
  const NumberFormat& format = column.format;
  switch (format.style) {
    case NumberFormat::Style::fixed:
      return fixed(*number_, format.digits) + format.suffix;
    case NumberFormat::Style::scientific:
      return scientific(*number_, format.digits) + format.suffix;
    case NumberFormat::Style::significant:
      break;
  }
  std::ostringstream text;
  text << std::setprecision(format.digits) << *number_;
  return text.str() + format.suffix;
}

Table& Table::left(std::string header, int width, NumberFormat format) {
  columns_.push_back({std::move(header), width, Align::left, std::move(format), std::exchange(next_gap_, 0)});
  return *this;
}

Table& Table::right(std::string header, int width, NumberFormat format) {
  columns_.push_back({std::move(header), width, Align::right, std::move(format), std::exchange(next_gap_, 0)});
  return *this;
}

Table& Table::gap(int spaces) {
  next_gap_ = spaces;
  return *this;
}

Table& Table::underline(int length) {
  underline_ = length;
  return *this;
}

Table& Table::add_row(std::vector<Cell> cells) {
  if (cells.size() > columns_.size()) throw std::invalid_argument("Table::add_row: more cells than columns");
  rows_.push_back(std::move(cells));
  return *this;
}

void Table::print(std::ostream& out) const {
  print_header(out);
  for (const auto& row : rows_) print_row(out, row);
}

void Table::print_header(std::ostream& out) const {
  std::vector<Cell> headers;
  for (const auto& column : columns_) headers.emplace_back(column.header);
  out << line(headers) << "\n";
  if (underline_ > 0) out << std::string(underline_, '-') << "\n";
}

void Table::print_row(std::ostream& out, const std::vector<Cell>& cells) const {
  if (cells.size() > columns_.size()) throw std::invalid_argument("Table::print_row: more cells than columns");
  out << line(cells) << "\n";
}

int Table::width() const {
  int total = static_cast<int>(indent_.size());
  for (const auto& column : columns_) total += column.gap + column.width;
  return total;
}

std::string Table::line(const std::vector<Cell>& cells) const {
  std::string text = indent_;
  for (size_t i = 0; i < cells.size(); ++i) {
    const Column& column = columns_[i];
    const std::string cell = cells[i].text(column);
    const std::string padding(std::max<size_t>(column.width, cell.size()) - cell.size(), ' ');
    text += std::string(column.gap, ' ');
    text += column.align == Align::left ? cell + padding : padding + cell;
  }
  return text;
}

}  // namespace speedlabs
