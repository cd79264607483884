#include "utils/eval/yolo_txt.h"

#include <ATen/ATen.h>

#include <fstream>
#include <stdexcept>

namespace yolo {

void write_yolo_txt(const std::string& path, const at::Tensor& det, int64_t w0, int64_t h0,
                    bool save_conf) {
  const at::Tensor d = det.to(at::kFloat).cpu().contiguous();
  auto a = d.accessor<float, 2>();
  std::vector<Detection> rows;
  for (int64_t k = 0; k < d.size(0); ++k) {
    rows.push_back({a[k][0], a[k][1], a[k][2], a[k][3], a[k][4], static_cast<int>(a[k][5])});
  }
  write_yolo_txt(path, rows, w0, h0, save_conf);
}

void write_yolo_txt(const std::string& path, const std::vector<Detection>& det, int64_t w0,
                    int64_t h0, bool save_conf) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error(path + ": cannot write the labels");
  for (const Detection& d : det) {
    f << d.class_id << " " << (d.x1 + d.x2) / 2 / w0 << " " << (d.y1 + d.y2) / 2 / h0 << " "
      << (d.x2 - d.x1) / w0 << " " << (d.y2 - d.y1) / h0;
    if (save_conf) f << " " << d.confidence;
    f << "\n";
  }
  if (!f.flush()) throw std::runtime_error(path + ": write failed (disk full?)");
}

}  // namespace yolo
