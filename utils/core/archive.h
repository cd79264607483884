#pragma once
// Unpacking a downloaded dataset archive (.zip, .tar, .tar.gz) with libarchive, refusing what
// could harm the machine: entries that would land outside the destination (absolute names, "..",
// links), and archives that expand far beyond their size. Builds without libarchive compile this
// to a function that says so.
#include <cstdint>
#include <string>
#include <vector>

namespace yolo {

struct UnpackLimits {
  // The most bytes the entries may expand to; 0: max(2 GiB, 200 x the archive's size). JPEG
  // datasets unpack to about their archive's size and text labels to 5-10x; a zip bomb to
  // thousands of times.
  int64_t max_bytes = 0;
  int64_t max_entries = 10'000'000;
};

bool unpack_supported();

// True for an http(s) or file URL of an archive unpack_archive reads (.zip, .tar, .tar.gz,
// .tgz).
bool is_archive_url(const std::string& url);

// Unpacks `archive` into the folder `dest` (made when missing). Entries are written into a
// temporary folder inside `dest` and moved into place only once the whole archive has been read,
// so a refused or broken archive leaves `dest` as it was. Nothing already in `dest` is replaced:
// an entry whose place is taken (by a file with other bytes, a folder or a link) is not
// unpacked, and the paths kept are named in a warning and in `kept`. Returns the number of
// files read. Throws std::runtime_error naming the archive and the entry.
int64_t unpack_archive(const std::string& archive, const std::string& dest,
                       const UnpackLimits& limits = UnpackLimits(),
                       std::vector<std::string>* kept = nullptr);

}  // namespace yolo
