#pragma once
// train's entry: argv -> parse -> resolve -> validate -> the launcher, evolution or a training
// run (or --help, --version).

namespace yolo {

int train_main(int argc, char** argv);

}  // namespace yolo
