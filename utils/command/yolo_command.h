#pragma once
// The `yolo` program: Ultralytics' command syntax, `yolo [detect] MODE key=value ...`, as a second
// front end onto train, val, detect and export. Each key is turned into the flag of the same
// option, and the program's own entry (train_main, val_main, detect_main, export_main) parses,
// resolves and validates it as it does its own command line: one road to the loop.
#include <string>
#include <vector>

namespace yolo {

// A `yolo` command line translated: the program it runs and that program's argv (argv[0] is the
// program's name).
struct YoloCommand {
  std::string mode;  // train, val, predict, export, help or version
  std::vector<std::string> argv;
  std::string args_yaml;  // train: the run's args.yaml (the keys given, as Ultralytics writes them)
};

// Translates `yolo`'s arguments (without argv[0]). Throws UsageError naming the key: an unknown
// key (with the closest known one), an Ultralytics key this trainer does not support, a key of
// another mode, a bad value, or a task other than detect.
YoloCommand translate_yolo_command(const std::vector<std::string>& args);

// The keys `yolo` takes, each with its flag and modes (docs/yolo_command.md lists them).
std::string yolo_help();

// `yolo`'s command line -> exit status.
int yolo_main(int argc, char** argv);

}  // namespace yolo
