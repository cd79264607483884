// val: evaluates weights on a dataset split, printing YOLOv5's results table (val.py flags).
// Under torchrun every rank validates a share of the batches.
#include <algorithm>

#include "utils/core/app_main.h"
#include "utils/distributed/ddp_setup.h"
#include "utils/eval/val_main.h"

int main(int argc, char** argv) {
  return yolo::run_app("val", [&] {
    const yolo::DistContext ranks = yolo::start_distributed_eval();
    return yolo::val_main(argc, argv,
                          {ranks.exchange(), std::max(ranks.env().local_rank, 0),
                           std::max(ranks.env().local_world_size, 1)});
  });
}
