#pragma once
// A dataset YAML's `download:`: archive URLs (.zip, .tar, .tar.gz) fetched with the project's
// downloader (resumed, retried, with a progress bar) and unpacked with its archive reader (no
// entry outside the destination, bounded expansion). Scripts are never run.
#include <string>
#include <vector>

namespace yolo {

// One archive and the folder it unpacks into.
struct DatasetDownload {
  std::string url;
  std::string dir;  // absolute
};

// True for an http(s)/file URL of an archive the downloader unpacks.
bool is_download_url(const std::string& s);

// Fetches each archive into its folder, unpacks it there and removes it; a file:// archive, or
// one of the URL's name already in the folder, is unpacked from where it is and kept. Nothing
// already in the folder is replaced (unpack_archive). Throws
// std::runtime_error naming the URL, the folder to unpack it into by hand, and why (offline, a
// refused URL, a bad or hostile archive, a build without the libraries).
void download_dataset(const std::vector<DatasetDownload>& downloads);

}  // namespace yolo
