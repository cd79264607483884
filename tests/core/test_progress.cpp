#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "utils/core/progress.h"

TEST(Progress, FormatsAsYolov5sTqdmBar) {
  EXPECT_EQ(yolo::format_progress("loss", 5, 20, 2.5, 80),
            "loss:  25%|██▌       | 5/20 [00:02<00:07, 2.00it/s, 32.0 img/s]");
  EXPECT_EQ(yolo::format_progress("", 20, 20, 10.0),
            "100%|██████████| 20/20 [00:10<00:00, 2.00it/s]");
  EXPECT_EQ(yolo::format_progress("", 1, 10, 4.0), " 10%|█         | 1/10 [00:04<00:36, 4.00s/it]");
  EXPECT_EQ(yolo::format_progress("", 0, 10, 0.0), "  0%|          | 0/10 [00:00<?, 0.00it/s]");
  EXPECT_EQ(yolo::format_duration(3725), "1:02:05");
  EXPECT_EQ(yolo::format_duration(65.9), "01:05");
}

// Not a terminal (a CI log, `> file`): plain lines, at most one per tenth of the work (and per
// interval, here 0 s), and the final state once; a short bar prints its final state alone; on a
// terminal: one line redrawn in place.
TEST(Progress, PlainLinesWhenNotATerminalAndOneRedrawnLineOnIt) {
  testing::internal::CaptureStdout();
  {
    yolo::ProgressBar bar(20, /*tty=*/0, /*plain_every=*/0);
    for (int i = 1; i <= 20; ++i) bar.update(i, "epoch");
    bar.close("epoch");
    bar.close("epoch");  // once only
  }
  const std::string plain = testing::internal::GetCapturedStdout();
  EXPECT_EQ(std::count(plain.begin(), plain.end(), '\n'), 11) << plain;
  EXPECT_EQ(plain.find('\r'), std::string::npos);
  EXPECT_NE(plain.find("epoch: 100%|██████████| 20/20"), std::string::npos) << plain;
  testing::internal::CaptureStdout();
  {
    yolo::ProgressBar bar(20, /*tty=*/0);  // done well within the 10 s between plain lines
    for (int i = 1; i <= 20; ++i) bar.update(i, "val");
    bar.close("val");
  }
  const std::string brief = testing::internal::GetCapturedStdout();
  EXPECT_EQ(std::count(brief.begin(), brief.end(), '\n'), 1) << brief;
  EXPECT_NE(brief.find("val: 100%"), std::string::npos) << brief;
  testing::internal::CaptureStdout();
  {
    yolo::ProgressBar bar(20, /*tty=*/1);
    for (int i = 1; i <= 20; ++i) bar.update(i, "epoch");
    bar.close("epoch");
  }
  const std::string tty = testing::internal::GetCapturedStdout();
  EXPECT_EQ(std::count(tty.begin(), tty.end(), '\n'), 1) << tty;
  EXPECT_EQ(std::count(tty.begin(), tty.end(), '\r'), 21);
  EXPECT_EQ(tty.back(), '\n');
}
