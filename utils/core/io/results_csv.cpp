#include "utils/core/io/results_csv.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace yolo {

std::vector<std::string> val_metric_columns(const LossNames& losses) {
  std::vector<std::string> c = {"metrics/precision", "metrics/recall", "metrics/mAP_0.5",
                                "metrics/mAP_0.5:0.95"};
  for (const auto& l : losses) c.push_back("val/" + l);
  return c;
}

std::vector<std::string> results_csv_columns(const LossNames& losses) {
  std::vector<std::string> c = {"epoch"};
  for (const auto& l : losses) c.push_back("train/" + l);
  const std::vector<std::string> val = val_metric_columns(losses);
  c.insert(c.end(), val.begin(), val.end());
  c.insert(c.end(), {"x/lr0", "x/lr1", "x/lr2"});
  return c;
}

namespace {

std::string join_cells(const std::vector<std::string>& cells) {
  std::string line;
  for (const auto& c : cells) line += c + ",";
  if (!line.empty()) line.pop_back();
  return line;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) {
    const auto b = cell.find_first_not_of(" \t\r");
    const auto e = cell.find_last_not_of(" \t\r");
    out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

std::vector<double> parse_row(const std::vector<std::string>& cells, const ResultsTable& table,
                              const std::string& where) {
  if (cells.size() != table.columns.size()) {
    throw std::runtime_error(where + "expected " + std::to_string(table.columns.size()) +
                             " comma-separated values as in the header, got " +
                             std::to_string(cells.size()));
  }
  std::vector<double> row;
  for (size_t c = 0; c < cells.size(); ++c) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(cells[c].c_str(), &end);
    if (cells[c].empty() || end != cells[c].c_str() + cells[c].size()) {
      throw std::runtime_error(where + "value '" + cells[c] + "' of column '" + table.columns[c] +
                               "' is not a number");
    }
    row.push_back(v);
  }
  return row;
}

}  // namespace

void append_csv_row(const std::string& path, const std::vector<std::string>& columns,
                    const std::vector<double>& values) {
  if (values.size() != columns.size()) {
    throw std::logic_error(path + ": " + std::to_string(values.size()) + " values for " +
                           std::to_string(columns.size()) + " columns");
  }
  const bool exists = std::filesystem::exists(path);
  std::ofstream f(path, std::ios::app);
  if (!f) throw std::runtime_error(path + ": cannot write results");
  char buf[64];
  if (!exists) {
    std::vector<std::string> head;
    for (const auto& c : columns) {
      std::snprintf(buf, sizeof(buf), "%20s", c.c_str());
      head.emplace_back(buf);
    }
    f << join_cells(head) << "\n";
  }
  std::vector<std::string> cells;
  for (double v : values) {
    std::snprintf(buf, sizeof(buf), "%20.5g", v);
    cells.emplace_back(buf);
  }
  f << join_cells(cells) << "\n";
  if (!f.flush()) throw std::runtime_error(path + ": write failed (disk full?)");
}

size_t ResultsTable::column(const std::string& name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return i;
  }
  throw std::runtime_error(path + ":1: no column '" + name + "' in the header");
}

std::vector<double> ResultsTable::values(const std::string& name) const {
  const size_t c = column(name);
  std::vector<double> out;
  for (const auto& r : rows) out.push_back(r[c]);
  return out;
}

ResultsTable read_results_csv(const std::string& csv_path) {
  std::ifstream in(csv_path);
  if (!in) throw std::runtime_error("cannot open results file '" + csv_path + "'");
  ResultsTable table;
  table.path = csv_path;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::vector<std::string> cells = split_csv_line(line);
    if (table.columns.empty()) {
      table.columns = cells;
      continue;
    }
    table.rows.push_back(parse_row(cells, table, csv_path + ":" + std::to_string(line_no) + ": "));
  }
  if (table.columns.empty()) {
    throw std::runtime_error(csv_path + ":1: empty results file, expected a header line");
  }
  return table;
}

}  // namespace yolo
