// The yolo command: Ultralytics' key=value syntax gives the same options as the programs' flags,
// and each refusal names the key and what to do.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <sstream>

#include "utils/command/yolo_command.h"
#include "utils/core/errors.h"
#include "utils/core/paths.h"
#include "utils/engine/train_options.h"

using yolo::translate_yolo_command;
using yolo::UsageError;

namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// opt.yaml's text for a train command line.
std::string train_options(const std::vector<std::string>& argv) {
  std::vector<const char*> c;
  for (const auto& a : argv) c.push_back(a.c_str());
  yolo::Options o = yolo::parse_train_args(static_cast<int>(c.size()), c.data()).opt;
  o.given.clear();  // the order flags were given in is not an option
  o.args_yaml.clear();
  YAML::Emitter e;
  e << yolo::options_to_yaml(o);
  return e.c_str();
}

std::string refusal(const std::string& command) {
  try {
    translate_yolo_command(words(command));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(YoloCommand, TrainKeysResolveToTheSameOptionsAsTheFlags) {
  const yolo::YoloCommand c = translate_yolo_command(
      words("detect train model=yolo11n.pt data=coco8.yaml epochs=3 imgsz=320 batch=8 "
            "workers=0 cache=True rect=True val=False plots=False seed=3 close_mosaic=2 "
            "patience=5 cos_lr single_cls=False freeze=[0,1,2] device=cpu"));
  EXPECT_EQ(c.mode, "train");
  EXPECT_EQ(c.argv.front(), "train");
  const std::string flags = train_options(
      words("train --weights yolo11n.pt --data coco8.yaml --epochs 3 --imgsz 320 --batch-size 8 "
            "--workers 0 --cache ram --rect --noval --noplots --seed 3 --close-mosaic 2 "
            "--patience 5 --cos-lr --freeze 0 1 2 --device cpu --project runs/detect --name "
            "train --optimizer auto"));
  EXPECT_EQ(train_options(c.argv), flags);
  // args.yaml: the task, mode and keys as given.
  EXPECT_NE(c.args_yaml.find("task: detect\nmode: train\nmodel: yolo11n.pt\n"), std::string::npos)
      << c.args_yaml;
  EXPECT_NE(c.args_yaml.find("freeze: [0,1,2]\n"), std::string::npos) << c.args_yaml;
  // Hyperparameters: over the hyp file's, as --hyp-set.
  EXPECT_EQ(train_options(translate_yolo_command(words("train lr0=0.02 mosaic=0.5")).argv),
            train_options(words("train --project runs/detect --name train --optimizer auto "
                                "--hyp-set lr0=0.02 mosaic=0.5")));
  // A model YAML trains from scratch; project, name and optimizer given replace the defaults.
  const yolo::YoloCommand y = translate_yolo_command(words(
      "train model=yolov8n.yaml name=mine project=out optimizer=SGD hyp=hyp.scratch-high.yaml"));
  EXPECT_EQ(train_options(y.argv),
            train_options(words("train --cfg yolov8n.yaml --name mine --project out --optimizer "
                                "SGD --hyp hyp.scratch-high.yaml")));
}

TEST(YoloCommand, ResumeContinuesTheNamedRun) {
  EXPECT_EQ(
      translate_yolo_command(words("train resume model=runs/detect/train/weights/last.pt")).argv,
      words("train --resume runs/detect/train/weights/last.pt"));
  EXPECT_EQ(translate_yolo_command(words("train resume=True device=cpu")).argv,
            words("train --resume --device cpu"));
  EXPECT_EQ(translate_yolo_command(words("train resume=runs/x/last.pt")).argv,
            words("train --resume runs/x/last.pt"));
}

TEST(YoloCommand, ValPredictExportKeysMapOntoTheirFlags) {
  EXPECT_EQ(
      translate_yolo_command(words("val model=best.pt data=coco8.yaml conf=0.01 iou=0.6 "
                                   "split=test save_json batch=4 half=False end2end verbose"))
          .argv,
      words("val --weights best.pt --data coco8.yaml --conf-thres 0.01 --iou-thres 0.6 "
            "--task test --save-json --batch-size 4 --end2end --verbose --project runs/detect "
            "--name val"));
  EXPECT_EQ(translate_yolo_command(words("predict model=yolo26n.pt source=img/ imgsz=[480,640] "
                                         "classes=0,2 save=False show_labels=False "
                                         "show_conf=False line_width=2 max_det=10 save_txt"))
                .argv,
            words("detect --weights yolo26n.pt --source img/ --imgsz 480 640 --classes 0 2 "
                  "--nosave --hide-labels --hide-conf --line-thickness 2 --max-det 10 "
                  "--save-txt --project runs/detect --name predict"));
  EXPECT_EQ(translate_yolo_command(words("export model=best.pt format=ONNX opset=13 dynamic "
                                         "imgsz=320"))
                .argv,
            words("export --weights best.pt --include onnx --opset 13 --dynamic --imgsz 320"));
}

TEST(YoloCommand, RefusalsNameTheKeyAndWhatToDo) {
  EXPECT_NE(refusal("train epoch=3").find("unknown key 'epoch'"), std::string::npos);
  EXPECT_NE(refusal("train epoch=3").find("did you mean 'epochs'?"), std::string::npos);
  EXPECT_NE(refusal("train lr=0.1").find("did you mean 'lr0' or 'lrf'?"), std::string::npos);
  EXPECT_NE(refusal("train amp=False").find("amp: an Ultralytics setting this trainer does not"),
            std::string::npos);
  EXPECT_NE(refusal("val lr0=0.02").find("lr0: applies to yolo train, not val"), std::string::npos);
  EXPECT_NE(refusal("train lr0=0.02 lr0=0.03").find("given twice"), std::string::npos);
  EXPECT_NE(refusal("train source=img/").find("source: applies to yolo predict, not train"),
            std::string::npos);
  EXPECT_NE(refusal("segment train model=yolo11n-seg.pt").find("detects objects only"),
            std::string::npos);
  EXPECT_NE(refusal("trian model=x.pt").find("did you mean 'train'?"), std::string::npos);
  EXPECT_NE(refusal("track model=x.pt").find("'track' is not supported"), std::string::npos);
  EXPECT_NE(refusal("model=x.pt").find("needs a mode"), std::string::npos);
  EXPECT_NE(refusal("train --epochs 3").find("yolo takes key=value"), std::string::npos);
  EXPECT_NE(refusal("export model=best.pt format=engine").find("torchscript and onnx"),
            std::string::npos);
  EXPECT_NE(refusal("val model=yolo11n.yaml").find("needs trained weights"), std::string::npos);
  EXPECT_NE(refusal("train rect=maybe").find("rect=maybe: must be True or False"),
            std::string::npos);
  EXPECT_NE(refusal("train epochs=3 epochs=4").find("given twice"), std::string::npos);
  EXPECT_NE(refusal("train batch=0.7").find("fraction of GPU memory"), std::string::npos);
  EXPECT_NE(refusal("train imgsz=[640,480]").find("train takes one size"), std::string::npos);
  EXPECT_EQ(translate_yolo_command({}).mode, "help");
  EXPECT_EQ(translate_yolo_command(words("version")).mode, "version");
}

TEST(YoloCommand, HelpListsEveryKeyWithItsFlag) {
  const std::string help = yolo::yolo_help();
  for (const char* row : {"model", "--weights", "imgsz", "close_mosaic", "--close-mosaic", "format",
                          "--include", "show_conf", "--hide-conf"}) {
    EXPECT_NE(help.find(row), std::string::npos) << row;
  }
}

namespace {

// Ultralytics' package in the test environment (scripts/setup.sh --test-packages), or "".
std::string ultralytics_dir() {
  namespace fs = std::filesystem;
  const fs::path lib = fs::path(yolo::project_root()) / ".cache/test-venv-ultralytics/lib";
  std::error_code ec;
  if (!fs::is_directory(lib, ec)) return "";
  for (const auto& py : fs::directory_iterator(lib)) {
    const fs::path pkg = py.path() / "site-packages/ultralytics";
    if (fs::exists(pkg / "cfg/default.yaml")) return pkg.string();
  }
  return "";
}

}  // namespace

// Against Ultralytics' own settings file: every key it defines is taken or refused by name,
// never reported as unknown.
TEST(YoloCommand, EveryUltralyticsSettingIsTakenOrRefusedByName) {
  const std::string pkg = ultralytics_dir();
  if (pkg.empty())
    GTEST_SKIP() << "Ultralytics is not installed (scripts/setup.sh --test-packages)";
  const YAML::Node defaults = YAML::LoadFile(pkg + "/cfg/default.yaml");
  int keys = 0;
  for (const auto& kv : defaults) {
    const std::string key = kv.first.as<std::string>();
    ++keys;
    for (const char* mode : {"train", "val", "predict", "export"}) {
      const std::string why = refusal(std::string(mode) + " " + key + "=1");
      EXPECT_EQ(why.find("unknown key"), std::string::npos) << key << " in " << mode << ": " << why;
    }
  }
  EXPECT_GT(keys, 80);
}

// Our coco8.yaml and coco128.yaml hold Ultralytics' classes and download URLs.
TEST(YoloCommand, CocoYamlsMatchUltralytics) {
  const std::string pkg = ultralytics_dir();
  if (pkg.empty())
    GTEST_SKIP() << "Ultralytics is not installed (scripts/setup.sh --test-packages)";
  for (const char* name : {"coco8.yaml", "coco128.yaml"}) {
    const YAML::Node theirs = YAML::LoadFile(pkg + "/cfg/datasets/" + name);
    const YAML::Node ours = YAML::LoadFile(yolo::project_root() + "/configs/data/" + name);
    EXPECT_EQ(ours["download"].as<std::string>(), theirs["download"].as<std::string>()) << name;
    EXPECT_EQ(ours["train"].as<std::string>(), theirs["train"].as<std::string>()) << name;
    EXPECT_EQ(ours["val"].as<std::string>(), theirs["val"].as<std::string>()) << name;
    ASSERT_EQ(ours["names"].size(), theirs["names"].size()) << name;
    for (size_t i = 0; i < theirs["names"].size(); ++i) {
      EXPECT_EQ(ours["names"][i].as<std::string>(), theirs["names"][i].as<std::string>()) << name;
    }
  }
}
