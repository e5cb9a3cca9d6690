/// @file table.h
/// @brief The labs' printed tables: columns with a header, a width, an alignment and a number format.
///
/// A table is printed whole (add_row, then print) or line by line while it is measured (print_header, then
/// print_row), for tables whose rows carry a note on the line below or come from a long run.
#pragma once
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace speedlabs {

/// Which side of its column a cell keeps to.
enum class Align { left, right };

/// How a column prints a number cell.
struct NumberFormat {
  /// fixed: digits after the point (3.142); scientific: digits after the point (3.14e+00); significant: digits
  /// in all, as a stream prints a double by default (3.14159).
  enum class Style { fixed, scientific, significant };
  Style style = Style::fixed;  ///< the notation
  int digits = 2;              ///< see Style
  std::string suffix;          ///< printed right after the number: "x", "%", ""
};

/// @p digits digits after the point, then @p suffix: fixed_digits(1, "%") prints 12.5 as "12.5%".
NumberFormat fixed_digits(int digits, std::string suffix = "");
/// @p digits digits after the point in scientific notation: scientific_digits(2) prints 0.00123 as "1.23e-03".
NumberFormat scientific_digits(int digits);
/// @p digits significant digits, as an output stream prints a double with that precision.
NumberFormat significant_digits(int digits);

/// One column of a Table.
struct Column {
  std::string header;          ///< the column's title
  int width = 0;               ///< characters the column takes (a longer cell overflows); 0: as long as its cell
  Align align = Align::right;  ///< where the cell sits in the width
  NumberFormat format;         ///< how a number cell is printed
  int gap = 0;                 ///< spaces printed before the column, outside its width
};

/// One cell of a row: a text as it is, or a number that its column formats.
class Cell {
 public:
  /// A text cell.
  Cell(std::string text) : text_(std::move(text)) {}  // NOLINT(google-explicit-constructor): rows are lists
  /// A text cell.
  Cell(const char* text) : text_(text) {}  // NOLINT(google-explicit-constructor)
  /// A number cell, formatted by its column.
  Cell(double number) : number_(number) {}  // NOLINT(google-explicit-constructor)
  /// The cell as column @p column prints it, before padding.
  std::string text(const Column& column) const;

 private:
  std::string text_;
  std::optional<double> number_;
};

/// A table printed with aligned columns: each line starts with the table's indent, then every cell padded to
/// its column's width.
class Table {
 public:
  /// An empty table whose lines begin with @p indent.
  explicit Table(std::string indent = "  ") : indent_(std::move(indent)) {}
  /// Adds a left-aligned column.
  Table& left(std::string header, int width, NumberFormat format = {});
  /// Adds a right-aligned column.
  Table& right(std::string header, int width, NumberFormat format = {});
  /// Puts @p spaces spaces between the last column added and the next one, header included.
  Table& gap(int spaces);
  /// Prints a line of @p length dashes under the header (none by default).
  Table& underline(int length);
  /// Keeps a row for print(); it may have fewer cells than the table has columns.
  Table& add_row(std::vector<Cell> cells);
  /// The header line, its underline if any, then the kept rows.
  void print(std::ostream& out) const;
  /// The header line and its underline, for a table printed row by row.
  void print_header(std::ostream& out) const;
  /// One row, printed now.
  void print_row(std::ostream& out, const std::vector<Cell>& cells) const;
  /// The characters of a full row: the indent, every column's width and the gaps between them.
  int width() const;

 private:
  std::string line(const std::vector<Cell>& cells) const;

  std::string indent_;
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
  int underline_ = 0;
  int next_gap_ = 0;
};

}  // namespace speedlabs
