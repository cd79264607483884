#include "utils/eval/yolo_txt.h"

#include <ATen/ATen.h>

#include <fstream>
#include <stdexcept>

namespace yolo {

void write_yolo_txt(const std::string& path, const at::Tensor& det, int64_t w0, int64_t h0,
                    bool save_conf) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error(path + ": cannot write the labels");
  const at::Tensor d = det.to(at::kFloat).cpu().contiguous();
  auto a = d.accessor<float, 2>();
  for (int64_t k = 0; k < d.size(0); ++k) {
    const float x1 = a[k][0], y1 = a[k][1], x2 = a[k][2], y2 = a[k][3];
    f << static_cast<int>(a[k][5]) << " " << (x1 + x2) / 2 / w0 << " " << (y1 + y2) / 2 / h0 << " "
      << (x2 - x1) / w0 << " " << (y2 - y1) / h0;
    if (save_conf) f << " " << a[k][4];
    f << "\n";
  }
  if (!f.flush()) throw std::runtime_error(path + ": write failed (disk full?)");
}

}  // namespace yolo
