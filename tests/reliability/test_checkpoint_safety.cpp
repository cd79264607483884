// Loading a checkpoint or weights file never executes code: pickles that name Python globals
// (GLOBAL/STACK_GLOBAL/INST + REDUCE) are refused with a message naming the file, as are files
// that are not zips, truncated archives, archives from a newer format and zip bombs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../data/test_helpers.h"
#include "hostile_pickle.h"
#include "models/weights.h"
#include "utils/core/io/checkpoint.h"
#include "utils/core/io/torch_archive.h"

namespace fs = std::filesystem;
using yolo::test::TempDir;

namespace {

// Runs both loaders on `path`; each must throw a std::runtime_error naming the file and holding
// every string in `want`.
void expect_refused(const std::string& path, std::initializer_list<const char*> want) {
  for (int which = 0; which < 2; ++which) {
    try {
      if (which == 0) {
        yolo::load_checkpoint(path);
      } else {
        yolo::read_state_dict(path);
      }
      ADD_FAILURE() << (which ? "read_state_dict" : "load_checkpoint") << " accepted " << path;
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(path), std::string::npos) << m;
      for (const char* w : want) EXPECT_NE(m.find(w), std::string::npos) << "'" << w << "': " << m;
    }
  }
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST(CheckpointSafety, CraftedArchivesAreRealZips) {
  // The "refused" cases below must fail for their content, not for a malformed archive: an
  // empty dict written the same way loads as a pickle and fails only for the missing keys.
  TempDir d;
  const std::string p = d / "empty.pt";
  yolo::test::write_pickle_archive(p, "empty-dict", "");
  try {
    yolo::load_checkpoint(p);
    FAIL() << "an empty dict is not a checkpoint";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no 'epoch'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(yolo::read_state_dict(p).empty());
}

TEST(CheckpointSafety, GlobalsAreNeverCalled) {
  TempDir d;
  const std::string marker = d / "pwned";
  for (const char* kind : {"os-system", "eval", "inst", "stack-global"}) {
    SCOPED_TRACE(kind);
    const std::string p = d / (std::string(kind) + ".pt");
    const std::string code = std::string(kind) == "eval"
                                 ? "__import__('os').system('touch " + marker + "')"
                                 : "touch " + marker;
    yolo::test::write_pickle_archive(p, kind, code);
    expect_refused(p, {"code"});
    EXPECT_FALSE(fs::exists(marker)) << kind << " ran its payload";
  }
  // Checkpoints (LibTorch's unpickler) refuse protocol 4; weights files (the restricted
  // unpickler, which reads YOLOv5's pickled models) refuse the global it names.
  yolo::test::write_pickle_archive(d / "p4.pt", "protocol4", "touch " + marker);
  expect_refused(d / "p4.pt", {"p4.pt"});
  EXPECT_THROW(
      try { yolo::load_checkpoint(d / "p4.pt"); } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("protocol"), std::string::npos) << e.what();
        throw;
      },
      std::runtime_error);
  EXPECT_THROW(
      try { yolo::read_state_dict(d / "p4.pt"); } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("os.system"), std::string::npos) << e.what();
        throw;
      },
      std::runtime_error);
  EXPECT_FALSE(fs::exists(marker));
}

TEST(CheckpointSafety, NotAZip) {
  TempDir d;
  yolo::test::write_text(d / "text.pt", "this is not a checkpoint\n");
  expect_refused(d / "text.pt", {"zip"});
  yolo::test::write_text(d / "empty.pt", "");
  expect_refused(d / "empty.pt", {"zip"});
  // Legacy (pre-1.6) torch.save files start with a pickle, not "PK".
  yolo::test::write_text(d / "legacy.pt", "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8");
  expect_refused(d / "legacy.pt", {"zip"});
}

TEST(CheckpointSafety, TruncatedAtEveryLength) {
  TempDir d;
  yolo::Checkpoint c;
  c.epoch = 3;
  c.model["model.0.conv.weight"] = torch::randn({4, 3, 3, 3});
  c.opt = "epochs: 3\n";
  const std::string good = d / "good.pt";
  yolo::save_checkpoint(c, good);
  ASSERT_EQ(yolo::load_checkpoint(good).epoch, 3);
  const std::string bytes = read_all(good);
  // Every cut from a few bytes to one byte short: a refusal, never a crash or a wrong load.
  const std::string cut = d / "cut.pt";
  const size_t step = std::max<size_t>(1, bytes.size() / 97);
  for (size_t n = 4; n < bytes.size(); n += step) {
    yolo::test::write_text(cut, bytes.substr(0, n));
    SCOPED_TRACE(n);
    expect_refused(cut, {});
  }
  yolo::test::write_text(cut, bytes.substr(0, bytes.size() - 1));
  expect_refused(cut, {"truncated"});
}

TEST(CheckpointSafety, NewerFormatSaysSo) {
  TempDir d;
  yolo::test::write_pickle_archive(d / "newer.pt", "newer", "");
  expect_refused(d / "newer.pt", {"newer"});
}

// A zip member whose header claims more than the file could inflate to (a zip bomb: a few MB
// that would take GBs) is refused before anything is inflated, naming the file and the member;
// the reader would otherwise allocate the claim. A real checkpoint, stored uncompressed as
// torch.save stores it, passes whatever its size.
TEST(CheckpointSafety, ZipMemberClaimingTooMuchIsRefused) {
  TempDir d;
  yolo::Checkpoint c;
  c.epoch = 1;
  c.model["w"] = torch::randn({1 << 20});  // 4 MiB: over the fixed part of the bound
  c.opt = "epochs: 3\n";
  const std::string good = d / "good.pt";
  yolo::save_checkpoint(c, good);
  const std::string bytes = read_all(good);
  EXPECT_EQ(yolo::zip_inflation_problem(std::vector<char>(bytes.begin(), bytes.end())), "");
  // Each central-directory entry in turn claims 3 GiB uncompressed.
  size_t members = 0;
  for (size_t at = bytes.find("PK\x01\x02"); at != std::string::npos;
       at = bytes.find("PK\x01\x02", at + 4)) {
    std::string bomb = bytes;
    const char claim[4] = {0, 0, 0, '\xC0'};  // 0xC0000000, little-endian
    bomb.replace(at + 24, 4, claim, 4);
    const std::string p = d / ("bomb" + std::to_string(members++) + ".pt");
    yolo::test::write_text(p, bomb);
    SCOPED_TRACE(members);
    expect_refused(p, {"refused", "would inflate to 3221225472 bytes"});
  }
  EXPECT_GE(members, 3u);  // data.pkl, the tensor, version, ...
}
