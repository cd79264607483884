#include "data/download.h"

#include <filesystem>
#include <stdexcept>

#include "utils/core/archive.h"
#include "utils/core/fetch.h"
#include "utils/core/format.h"
#include "utils/core/log.h"

namespace fs = std::filesystem;

namespace yolo {

bool is_download_url(const std::string& s) { return is_archive_url(s); }

namespace {

// The local file a file:// URL names ("" for other URLs).
std::string local_file(const std::string& url) {
  if (url.rfind("file://", 0) != 0) return "";
  std::string path = url.substr(7);
  if (path.rfind("localhost/", 0) == 0) path = path.substr(9);
  return path;
}

}  // namespace

void download_dataset(const std::vector<DatasetDownload>& downloads) {
  for (const DatasetDownload& d : downloads) {
    const std::string manual =
        "; or download " + one_line(d.url) + " yourself and unpack it into " + one_line(d.dir);
    if (!is_download_url(d.url)) {
      throw std::runtime_error("'" + one_line(d.url) +
                               "' is not an archive URL (.zip, .tar, .tar.gz)" + manual);
    }
    // The user's own archives are read where they are and never removed: a file:// URL, or an
    // archive of the URL's name already in the folder. Only an archive fetched here is removed
    // once unpacked.
    std::error_code ec;
    std::string archive = local_file(d.url);
    bool ours = false;
    if (!archive.empty()) {
      if (!fs::is_regular_file(archive, ec)) {
        throw std::runtime_error("download: " + one_line(d.url) + ": no file at " +
                                 one_line(archive) + "; fix the URL in the data YAML");
      }
      log_info("Unpacking " + one_line(archive) + " into " + one_line(d.dir) +
               " (the archive is kept) ...");
    } else {
      archive = (fs::path(d.dir) / d.url.substr(d.url.rfind('/') + 1)).string();
      if (fs::is_regular_file(archive, ec)) {
        log_info("Unpacking " + one_line(archive) + ", already there, into " + one_line(d.dir) +
                 " instead of downloading " + one_line(d.url) + " (the archive is kept) ...");
      } else {
        try {
          fetch_file(d.url, archive, fetch_options_from_env());
        } catch (const FetchError& e) {
          throw std::runtime_error(e.what() + manual);
        }
        ours = true;
        log_info("Unpacking " + one_line(archive) + " into " + one_line(d.dir) + " ...");
      }
    }
    int64_t files = 0;
    try {
      files = unpack_archive(archive, d.dir);
    } catch (const std::exception& e) {
      if (ours) fs::remove(archive, ec);
      throw std::runtime_error(
          e.what() +
          std::string(ours ? "; the archive is removed" : "; the archive is kept as it was") +
          (ours || !local_file(d.url).empty()
               ? manual
               : "; remove it to download " + one_line(d.url) + " again"));
    }
    if (ours) fs::remove(archive, ec);
    log_info("Dataset: " + std::to_string(files) + " files unpacked into " + one_line(d.dir));
  }
}

}  // namespace yolo
