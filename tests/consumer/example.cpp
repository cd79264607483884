#include <yolo/detector.h>
#include <yolo/train.h>

#include <iostream>
#include <opencv2/imgcodecs.hpp>

int main() {
  // Train yolov5n for 3 epochs on the built-in shapes data, printing mAP after each epoch.
  yolo::TrainCallbacks callbacks;
  callbacks.on_epoch_end = [](const yolo::EpochMetrics& m) {
    std::cout << "epoch " << m.epoch << ": mAP50 " << m.map50 << "\n";
  };
  const yolo::TrainResult run = yolo::train(
      yolo::TrainSettings::from_args({"--cfg", "yolov5n.yaml", "--epochs", "3", "--imgsz", "256"}),
      callbacks);

  // Detect objects in an image with the best weights.
  yolo::DetectorOptions options;
  options.conf_thres = 0.25f;
  yolo::Detector detector(run.best, options);
  const cv::Mat image = cv::imread("image.png");
  for (const yolo::Detection& d : detector.detect(image)) {
    std::cout << detector.names()[d.class_id] << " " << d.confidence << " at " << d.x1 << ","
              << d.y1 << " " << d.x2 << "," << d.y2 << "\n";
  }
}
