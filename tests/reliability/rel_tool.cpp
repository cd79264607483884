// Helper for the reliability scripts: tiny datasets, hand-made (hostile) checkpoint archives and
// a checkpoint checker, so the shell tests need neither Python packages nor a trained model.
//   rel_tool dataset ROOT [NTRAIN NVAL]   64 px images + labels, ROOT/data.yaml (3 classes)
//   rel_tool image FILE                   one 64x64 image, format from the extension
//   rel_tool pickle OUT KIND [ARG]        zip archive whose data.pkl is KIND (hostile_pickle.h)
//   rel_tool check FILE...                load_checkpoint each; exit 1 naming the first failure;
//                                         prints each one's class names and model YAML size
//   rel_tool video FILE FRAMES W H        a W x H video (codec by extension: .avi MJPG, else
//                                         mp4v); exit 77 without OpenCV's videoio
#include <yaml-cpp/yaml.h>

#include <iostream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#ifdef YOLO_WITH_OPENCV_VIDEOIO
#include <opencv2/videoio.hpp>
#endif
#include <string>

#include "../data/test_helpers.h"
#include "hostile_pickle.h"
#include "utils/core/io/checkpoint.h"

namespace {

int make_dataset(const std::string& root, int ntrain, int nval) {
  yolo::test::make_split(root, "train", ntrain, 64, 64, 3);
  yolo::test::make_split(root, "val", nval, 64, 64, 3);
  YAML::Emitter e;  // quotes whatever the path holds (spaces, quotes, ';')
  e << YAML::BeginMap << YAML::Key << "path" << YAML::Value << root << YAML::Key << "train"
    << YAML::Value << "images/train" << YAML::Key << "val" << YAML::Value << "images/val"
    << YAML::Key << "names" << YAML::Value << YAML::Flow << YAML::BeginSeq << "a"
    << "b"
    << "c" << YAML::EndSeq << YAML::EndMap;
  yolo::test::write_text(root + "/data.yaml", std::string(e.c_str()) + "\n");
  return 0;
}

int check(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    const yolo::Checkpoint c = yolo::load_checkpoint(argv[i]);
    std::string names;
    for (const std::string& n : c.names) names += (names.empty() ? "" : ",") + n;
    std::cout << "ok " << argv[i] << " epoch " << c.epoch << " (" << c.model.size()
              << " tensors) nc " << c.nc << " names [" << names << "] model_yaml "
              << c.model_yaml.size() << " bytes\n";
  }
  return 0;
}

int make_video(const std::string& path, int frames, int w, int h) {
#ifdef YOLO_WITH_OPENCV_VIDEOIO
  const bool avi = path.size() > 4 && path.substr(path.size() - 4) == ".avi";
  cv::VideoWriter out(path,
                      avi ? cv::VideoWriter::fourcc('M', 'J', 'P', 'G')
                          : cv::VideoWriter::fourcc('m', 'p', '4', 'v'),
                      10, cv::Size(w, h));
  if (!out.isOpened()) throw std::runtime_error(path + ": cannot write a video here");
  for (int k = 0; k < frames; ++k) {
    cv::Mat im(h, w, CV_8UC3, cv::Scalar(20, 120, 220));
    cv::circle(im, {(k * 3) % w, h / 2}, h / 4, cv::Scalar(240, 240, 240), -1);
    out.write(im);
  }
  return 0;
#else
  (void)path, (void)frames, (void)w, (void)h;
  std::cerr << "rel_tool: this build reads and writes no video\n";
  return 77;
#endif
}

int run(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "dataset" && (argc == 3 || argc == 5)) {
    return make_dataset(argv[2], argc == 5 ? std::stoi(argv[3]) : 4,
                        argc == 5 ? std::stoi(argv[4]) : 2);
  }
  if (cmd == "image" && argc == 3) {
    yolo::test::write_image(argv[2], cv::Mat(64, 64, CV_8UC3, cv::Scalar(20, 120, 220)));
    return 0;
  }
  if (cmd == "pickle" && (argc == 4 || argc == 5)) {
    yolo::test::write_pickle_archive(argv[2], argv[3], argc == 5 ? argv[4] : "true");
    return 0;
  }
  if (cmd == "check" && argc > 2) return check(argc, argv);
  if (cmd == "video" && argc == 6) {
    return make_video(argv[2], std::stoi(argv[3]), std::stoi(argv[4]), std::stoi(argv[5]));
  }
  std::cerr << "usage: rel_tool dataset ROOT [NTRAIN NVAL] | image FILE | pickle OUT KIND [ARG]"
               " | check FILE... | video FILE FRAMES W H\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "rel_tool: " << e.what() << "\n";
    return 1;
  }
}
