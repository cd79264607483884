#pragma once
// train's entry: argv -> Options -> a training run (or --help).

namespace yolo {

int train_main(int argc, char** argv);

}  // namespace yolo
