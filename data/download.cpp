#include "data/download.h"

#include <filesystem>
#include <stdexcept>

#include "utils/core/archive.h"
#include "utils/core/fetch.h"
#include "utils/core/log.h"

namespace fs = std::filesystem;

namespace yolo {

bool is_download_url(const std::string& s) { return is_archive_url(s); }

void download_dataset(const std::vector<DatasetDownload>& downloads) {
  for (const DatasetDownload& d : downloads) {
    const std::string manual = "; or download " + d.url + " yourself and unpack it into " + d.dir;
    if (!is_download_url(d.url)) {
      throw std::runtime_error("'" + d.url + "' is not an archive URL (.zip, .tar, .tar.gz)" +
                               manual);
    }
    const std::string archive = (fs::path(d.dir) / d.url.substr(d.url.rfind('/') + 1)).string();
    try {
      fetch_file(d.url, archive, fetch_options_from_env());
    } catch (const FetchError& e) {
      throw std::runtime_error(e.what() + manual);
    }
    log_info("Unpacking " + archive + " into " + d.dir + " ...");
    int64_t files = 0;
    try {
      files = unpack_archive(archive, d.dir);
    } catch (const std::exception& e) {
      std::error_code ec;
      fs::remove(archive, ec);
      throw std::runtime_error(e.what() + std::string("; the archive is removed") + manual);
    }
    std::error_code ec;
    fs::remove(archive, ec);
    log_info("Dataset: " + std::to_string(files) + " files unpacked into " + d.dir);
  }
}

}  // namespace yolo
