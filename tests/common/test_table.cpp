// common/table: headers and cells padded to their columns, numbers in each column's format.
#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>

#include "common/table.h"

namespace {

using speedlabs::Table;

std::string printed(const Table& table) {
  std::ostringstream out;
  table.print(out);
  return out.str();
}

TEST(Table, PadsEachCellToItsColumnOnItsSide) {
  Table table;
  table.left("name", 6).right("ms", 8, speedlabs::fixed_digits(3)).right("note", 6);
  table.add_row({"relu", 1.5, "fast"});
  EXPECT_EQ(printed(table),
            "  name        ms  note\n"
            "  relu     1.500  fast\n");
}

TEST(Table, FormatsNumbersByTheirColumn) {
  Table table("");
  table.right("x", 6, speedlabs::fixed_digits(0, "x"))
      .right("e", 10, speedlabs::scientific_digits(2))
      .right("g", 10, speedlabs::significant_digits(4))
      .right("%", 7, speedlabs::fixed_digits(1, "%"));
  table.add_row({3.0, 0.00123, 3.14159265, 12.34});
  EXPECT_EQ(printed(table),
            "     x         e         g      %\n"
            "    3x  1.23e-03     3.142  12.3%\n");
}

TEST(Table, TextCellsPrintAsTheyAreAndALongCellOverflows) {
  Table table("");
  table.left("a", 3).right("b", 4);
  table.add_row({"toolong", "n/a"});
  EXPECT_EQ(printed(table), "a     b\ntoolong n/a\n");
}

TEST(Table, AColumnOfWidthZeroTakesJustItsText) {
  Table table("");
  table.right("n", 3).left("note", 0);
  table.add_row({"1", "a longer note"});
  EXPECT_EQ(printed(table), "  nnote\n  1a longer note\n");
}

TEST(Table, AShortRowStopsAfterItsLastCell) {
  Table table("");
  table.left("a", 4).right("b", 4);
  table.add_row({"x"});
  EXPECT_EQ(printed(table), "a      b\nx   \n");
}

TEST(Table, AGapSeparatesTwoColumnsHeadersIncluded) {
  Table table("");
  table.right("ms", 4).gap(3).left("memory", 0);
  table.add_row({"1.5", "2 MiB"});
  EXPECT_EQ(printed(table), "  ms   memory\n 1.5   2 MiB\n");
  EXPECT_EQ(table.width(), 4 + 3);
}

TEST(Table, UnderlinesTheHeaderWhenAsked) {
  Table table("");
  table.left("a", 4).underline(6);
  EXPECT_EQ(printed(table), "a   \n------\n");
}

TEST(Table, PrintsRowByRowLikeAWholeTable) {
  Table table;
  table.left("op", 5).right("n", 4, speedlabs::fixed_digits(0));
  std::ostringstream out;
  table.print_header(out);
  table.print_row(out, {"add", 7.0});
  table.add_row({"add", 7.0});
  EXPECT_EQ(out.str(), printed(table));
  EXPECT_EQ(table.width(), 2 + 5 + 4);
}

TEST(Table, RefusesMoreCellsThanColumns) {
  Table table;
  table.left("a", 4);
  EXPECT_THROW(table.add_row({"x", "y"}), std::invalid_argument);
  std::ostringstream out;
  EXPECT_THROW(table.print_row(out, {"x", "y"}), std::invalid_argument);
}

}  // namespace
