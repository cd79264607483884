// detect_boxes WEIGHTS IMAGE [CONF [IMGSZ]]: prints each detection as the detect program's
// --save-txt --save-conf line (class cx cy w h conf, normalised to the image).
#include <yolo/detector.h>

#include <iostream>
#include <opencv2/imgcodecs.hpp>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: detect_boxes WEIGHTS IMAGE [CONF [IMGSZ]]\n";
    return 2;
  }
  yolo::DetectorOptions options;
  options.device = "cpu";
  if (argc > 3) options.conf_thres = std::stof(argv[3]);
  if (argc > 4) options.imgsz = std::stoi(argv[4]);
  yolo::Detector detector(argv[1], options);
  const cv::Mat image = cv::imread(argv[2]);
  if (image.empty()) {
    std::cerr << argv[2] << ": cannot read the image\n";
    return 1;
  }
  const float w = image.cols, h = image.rows;
  for (const yolo::Detection& d : detector.detect(image)) {
    std::cout << d.class_id << " " << (d.x1 + d.x2) / 2 / w << " " << (d.y1 + d.y2) / 2 / h << " "
              << (d.x2 - d.x1) / w << " " << (d.y2 - d.y1) / h << " " << d.confidence << "\n";
  }
}
