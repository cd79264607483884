// Helper for the reliability scripts: tiny datasets, hand-made (hostile) checkpoint archives and
// a checkpoint checker, so the shell tests need neither Python packages nor a trained model.
//   rel_tool dataset ROOT [NTRAIN NVAL]   64 px images + labels, ROOT/data.yaml (3 classes)
//   rel_tool image FILE                   one 64x64 image, format from the extension
//   rel_tool pickle OUT KIND [ARG]        zip archive whose data.pkl is KIND (hostile_pickle.h)
//   rel_tool check FILE...                load_checkpoint each; exit 1 naming the first failure
#include <yaml-cpp/yaml.h>

#include <iostream>
#include <opencv2/imgcodecs.hpp>
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
    std::cout << "ok " << argv[i] << " epoch " << c.epoch << " (" << c.model.size()
              << " tensors)\n";
  }
  return 0;
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
  std::cerr << "usage: rel_tool dataset ROOT [NTRAIN NVAL] | image FILE | pickle OUT KIND [ARG]"
               " | check FILE...\n";
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
