// assets: the console's front end (services/console/assets/*), embedded in the
// binary at build time (cmake/embed_assets.cmake writes assets_data.cpp), so
// the service serves exactly the files it was built with and nothing is
// fetched from any other origin. Read-only data; thread-safe.
#pragma once

#include <string_view>

namespace loom::console {

struct asset {
  std::string_view path;          // "/app.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view bytes;
};

// The asset served at `path` ("/" is /index.html); nullptr when none.
const asset* find_asset(std::string_view path);

}  // namespace loom::console
