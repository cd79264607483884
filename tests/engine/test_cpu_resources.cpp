// The CPU thread plan: intra-op threads and loader workers chosen together.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "utils/engine/cpu_resources.h"

TEST(Threads, PlanChoosesComputeThreadsAndLoaderWorkersTogether) {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const std::string saved = omp ? omp : "";
  unsetenv("OMP_NUM_THREADS");
  const int cpus = yolo::usable_cpus();
  yolo::ThreadPlan p = yolo::plan_threads(false, 8, false, 1, 16);
  EXPECT_EQ(p.intra_op, cpus);
  EXPECT_EQ(p.workers, 0);
  EXPECT_NE(p.line.find("loaded in the step"), std::string::npos) << p.line;
  p = yolo::plan_threads(false, 1, true, 1, 16);  // --workers 1 on the command line
  EXPECT_EQ(p.workers, 1);
  p = yolo::plan_threads(true, 8, false, 1, 16);
  EXPECT_EQ(p.workers, std::min(cpus, 8));
  p = yolo::plan_threads(true, 8, false, 1, 1);  // batch 1: no workers, as YOLOv5
  EXPECT_EQ(p.workers, 0);
  p = yolo::plan_threads(false, 8, false, 2, 16);  // two ranks share the cores
  EXPECT_EQ(p.intra_op, std::max(1, cpus / 2));
  setenv("OMP_NUM_THREADS", "3", 1);
  p = yolo::plan_threads(false, 8, false, 1, 16);
  EXPECT_EQ(p.intra_op, 3);
  EXPECT_NE(p.line.find("OMP_NUM_THREADS"), std::string::npos) << p.line;
  if (omp) {
    setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  } else {
    unsetenv("OMP_NUM_THREADS");
  }
}
