#pragma once
// Runs an app's body and turns exceptions into the exit statuses of docs/ARCHITECTURE.md: 2 for
// usage errors (bad flag or value), 1 for any other failure, each with a one-paragraph message on
// stderr.
#include <functional>

namespace yolo {

int run_app(const char* app, const std::function<int()>& body);

}  // namespace yolo
