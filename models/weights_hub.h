#pragma once
// Released weights by name, as YOLOv5's and Ultralytics' programs fetch them: `--weights
// yolov5s.pt` or `model=yolo11n.pt` that is not a file is downloaded from its release (YOLOv5
// v7.0's assets, Ultralytics' assets) into a cache folder and checked before use.
#include <string>
#include <vector>

namespace yolo {

// The names this trainer fetches: yolov5{n,s,m,l,x}[6].pt, yolov8*.pt, yolo11*.pt, yolo26*.pt.
std::vector<std::string> released_weights();

// Where `name` is downloaded from: $YOLO_WEIGHTS_URL/<name> when that is set (a mirror), else its
// release asset; "" for a name that is not released weights.
std::string released_weights_url(const std::string& name);

// The folder downloads are kept in: $YOLO_WEIGHTS_DIR, else $XDG_CACHE_HOME/yolo_cpp/weights, else
// ~/.cache/yolo_cpp/weights.
std::string weights_cache_dir();

// `value` as the file to read: itself when it exists or is not a released name (the caller
// reports a missing file); else the cached download, fetched, checked (a zip pickle our loader
// reads) and moved into the cache first when it is missing. Throws std::runtime_error with one
// line naming the URL and the path to put the file at when the download fails.
std::string resolve_weights(const std::string& value);

}  // namespace yolo
