#pragma once
// detect's entry (YOLOv5 v7.0 detect.py's flags): argv -> DetectConfig -> run_detect.
namespace yolo {

// detect's command line (argv) -> exit status; throws UsageError for a bad flag or value.
int detect_main(int argc, char** argv);

}  // namespace yolo
