#include "data/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "data/image_io.h"

namespace yolo {
namespace {

// JPEG by content (SOI marker FFD8), as PIL's im.format: a PNG named .jpg is a PNG.
bool is_jpeg_content(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[2] = {0, 0};
  in.read(reinterpret_cast<char*>(head), 2);
  return in && head[0] == 0xFF && head[1] == 0xD8;
}

bool ends_with_jpeg_marker(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || in.tellg() < 2) return false;
  in.seekg(-2, std::ios::end);
  unsigned char tail[2] = {0, 0};
  in.read(reinterpret_cast<char*>(tail), 2);
  return tail[0] == 0xFF && tail[1] == 0xD9;
}

// Parses one token as a finite float; false on junk, NaN or inf.
bool parse_float(const std::string& tok, float& out) {
  char* end = nullptr;
  const float v = std::strtof(tok.c_str(), &end);
  if (end == tok.c_str() || *end != '\0' || !std::isfinite(v)) return false;
  out = v;
  return true;
}

// Returns an error message, or "" when the label file is fine.
std::string parse_labels(const std::string& label_path, int nc, Labels& out, int& duplicates) {
  std::ifstream in(label_path);
  if (!in) return "cannot read label file " + label_path;
  std::string line;
  int line_no = 0;
  std::set<std::tuple<float, float, float, float, float>> seen;
  duplicates = 0;
  while (std::getline(in, line)) {
    ++line_no;
    // A UTF-8 byte-order mark, as Windows editors write it, is no part of the first value.
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    std::istringstream ss(line);
    std::vector<std::string> toks;
    for (std::string t; ss >> t;) toks.push_back(t);
    if (toks.empty()) continue;
    const std::string at = label_path + ":" + std::to_string(line_no) + ": ";
    std::vector<float> v(toks.size());
    for (size_t i = 0; i < toks.size(); ++i) {
      if (!parse_float(toks[i], v[i])) {
        return at + "value '" + toks[i] + "' is not a finite number";
      }
    }
    Label lb;
    if (v.size() == 5) {
      lb = {v[0], v[1], v[2], v[3], v[4]};
    } else if (v.size() > 6 && v.size() % 2 == 1) {  // polygon: class x1 y1 x2 y2 ...
      float x1 = 1e9f, y1 = 1e9f, x2 = -1e9f, y2 = -1e9f;
      for (size_t i = 1; i + 1 < v.size(); i += 2) {
        x1 = std::min(x1, v[i]), x2 = std::max(x2, v[i]);
        y1 = std::min(y1, v[i + 1]), y2 = std::max(y2, v[i + 1]);
      }
      lb = {v[0], (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1};
      v = {lb.cls, lb.cx, lb.cy, lb.w, lb.h};
    } else {
      return at + "labels need 5 columns (class cx cy w h), found " + std::to_string(v.size());
    }
    for (float x : v) {
      if (x < 0) return at + "negative label value " + std::to_string(x);
    }
    for (size_t i = 1; i < v.size(); ++i) {
      if (v[i] > 1) {
        return at + "coordinate " + std::to_string(v[i]) +
               " is out of bounds (must be normalised to 0..1)";
      }
    }
    if (lb.cls != std::floor(lb.cls)) return at + "class id " + toks[0] + " is not an integer";
    if (lb.cls >= nc) {
      return at + "class id " + toks[0] + " exceeds the dataset's nc=" + std::to_string(nc) +
             " (valid ids 0.." + std::to_string(nc - 1) + ")";
    }
    if (!seen.insert({lb.cls, lb.cx, lb.cy, lb.w, lb.h}).second) {
      ++duplicates;
      continue;
    }
    out.push_back(lb);
  }
  return "";
}

}  // namespace

VerifiedImage verify_image_label(const std::string& image_path, const std::string& label_path,
                                 int nc) {
  VerifiedImage r;
  r.image = image_path;
  auto fail = [&](const std::string& why) {
    r.corrupt = true;
    r.labels.clear();
    r.message = "ignoring corrupt image/label " + image_path + ": " + why;
    return r;
  };
  // Checked without opening: a directory reads as empty and a FIFO blocks the reader forever.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(image_path, ec)) {
    return fail("not a regular file (a directory, device or FIFO?)");
  }
  cv::Mat im;  // as imread decodes it (EXIF orientation applied), plain JPEGs at read_image's speed
  try {
    im = read_image(image_path);
  } catch (const std::runtime_error& e) {
    // read_image's reason, less the path the message already names.
    std::string why = e.what();
    if (why.rfind(image_path + ": ", 0) == 0) why = why.substr(image_path.size() + 2);
    return fail(why);
  }
  r.height = im.rows;
  r.width = im.cols;
  if (r.height < 10 || r.width < 10) {
    return fail("image size " + std::to_string(r.width) + "x" + std::to_string(r.height) +
                " is under 10 pixels");
  }
  if (is_jpeg_content(image_path) && !ends_with_jpeg_marker(image_path)) {
    return fail("truncated JPEG (no FFD9 end marker); re-save or remove the file");
  }
  const auto label_type = std::filesystem::status(label_path, ec).type();
  if (label_type != std::filesystem::file_type::regular) {
    // As YOLOv5 (os.path.isfile): the image counts as unlabelled, and a path that is there but
    // is no file is named.
    r.label_missing = true;
    if (label_type != std::filesystem::file_type::not_found) {
      r.message = label_path + ": not a regular file (a directory, device or FIFO?); " +
                  image_path + " counts as missing its labels";
    }
    return r;
  }
  // A label file that is there but cannot be read is corrupt, as YOLOv5 counts it: training its
  // image as background would teach the model that its objects are not there.
  std::ifstream probe(label_path);
  if (!probe) return fail("cannot read label file " + label_path + " (permissions?)");
  probe.close();
  int duplicates = 0;
  const std::string err = parse_labels(label_path, nc, r.labels, duplicates);
  if (!err.empty()) return fail(err);
  if (duplicates > 0) {
    r.message = image_path + ": " + std::to_string(duplicates) + " duplicate labels removed";
  }
  r.label_empty = r.labels.empty();
  return r;
}

}  // namespace yolo
