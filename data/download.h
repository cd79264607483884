#pragma once
// Fetching a dataset archive (YOLOv5's `download:` .zip URL) with curl and unzip, run directly
// from argv (never through a shell, so URLs and paths cannot inject commands).
#include <string>
#include <vector>

namespace yolo {

// Runs argv[0] (looked up in PATH) with the given arguments and waits at most timeout_s seconds
// (killed after). Returns its exit status; 127 when it cannot be started, 124 on timeout.
// Its stdout/stderr go to `log_path` when given (else inherited).
int run_program(const std::vector<std::string>& argv, int timeout_s,
                const std::string& log_path = "");

// True when `name` is an executable found in PATH.
bool program_available(const std::string& name);

// True for an http(s)/file URL ending in .zip.
bool is_download_url(const std::string& s);

// Downloads `url` (a .zip) and unzips it into the parent folder of `root` (archives hold the
// dataset's top folder, e.g. coco128/). Throws std::runtime_error saying what to fetch and where
// to unpack it when curl/unzip are missing, the fetch fails (offline) or the archive is bad.
void download_dataset(const std::string& url, const std::string& root, int timeout_s = 3600);

}  // namespace yolo
