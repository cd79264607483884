#pragma once
// YOLOv5 v7.0's non_max_suppression: confidence = objectness x class score, class-offset batched
// NMS, optional multi-label, max_det per image; and the top-k selection of end-to-end heads (no
// NMS), which both entry points run when NmsOptions::end2end is set.
#include <ATen/core/Tensor.h>

#include <vector>

namespace yolo {

struct NmsOptions {
  double conf_thres = 0.25;
  double iou_thres = 0.45;
  std::vector<int> classes;  // keep only these classes (empty: all)
  bool agnostic = false;
  bool multi_label = false;
  int max_det = 300;
  // The prediction is an end-to-end head's (YOLO26's one-to-one): topk_detections runs in NMS's
  // place (iou_thres, multi_label and stable_ties are not used).
  bool end2end = false;
  // Equal confs in candidate order (box, then class), as the batched NMS ranks them. Off: in
  // argsort's order, which the CPU's recorded results depend on.
  bool stable_ties = false;
  // non_max_suppression_batched on a device ranks the candidates of as many images at a time as
  // keep images x boxes x classes under this many elements, so that its peak memory is bounded
  // (about 128 MiB per score table) whatever the batch size.
  int64_t max_chunk_elements = int64_t{1} << 25;
};

// prediction (bs, N, 5+nc) as the model's eval output (xywh, obj, class scores). Returns one
// (n, 6) tensor per image: x1, y1, x2, y2, conf, class, in descending conf. Image by image, with
// host reads: what the CPU runs, and the reference for the batched version below.
std::vector<at::Tensor> non_max_suppression(const at::Tensor& prediction, const NmsOptions& opt);

// A batch's detections on the host: image i's rows, as non_max_suppression's, are
// kept.select(0, i).slice(0, 0, counts[i]).
struct BatchDetections {
  at::Tensor kept;  // (bs, r, 6) float32 on the CPU; rows past an image's count are padding
  std::vector<int64_t> counts;
  int64_t size() const { return static_cast<int64_t>(counts.size()); }
  at::Tensor image(int64_t i) const;
};

// non_max_suppression for the whole batch as tensor ops on the prediction's device (in float32,
// whatever its dtype), with one copy to the host at the end: on a GPU nothing else waits for the
// device. On the same float32 input it keeps what non_max_suppression with stable_ties keeps, in
// the same order, except that of candidates tied in conf at the 30000th place of an image's
// ranking another may enter NMS. Candidates are ranked a chunk of images at a time
// (NmsOptions::max_chunk_elements), which changes nothing in the result. On the CPU it runs
// non_max_suppression image by image (reads cost nothing there, and that pass looks only at the
// candidates it needs); `device_schedule` runs the GPU's tensor ops there too.
BatchDetections non_max_suppression_batched(const at::Tensor& prediction, const NmsOptions& opt,
                                            bool device_schedule = false);

// Ultralytics' post-processing of an end-to-end head, without NMS: the max_det anchors of highest
// class score, then the max_det highest (anchor, class) scores among them (the single best class
// of each with `agnostic`), kept where conf > conf_thres and the class is in `classes`; rows as
// non_max_suppression's, in descending conf. One copy of max_det rows per image to the host.
std::vector<at::Tensor> topk_detections(const at::Tensor& prediction, const NmsOptions& opt);

// Greedy NMS of xyxy `boxes` with `scores` on their own device; returns kept indices in
// descending score order (torchvision.ops.nms semantics). With max_keep >= 0 it stops once that
// many are kept: the result is the first max_keep of the full answer, found without comparing
// the boxes ranked after them.
at::Tensor nms(const at::Tensor& boxes, const at::Tensor& scores, double iou_thres,
               int64_t max_keep = -1);

}  // namespace yolo
