// Loopback sync fixture for the cdc_tests binary only: a CURVE context with a
// ZAP handler admitting "alice" (libs/wire/test_util.hpp), a served root
// with one dataset directory, a receiving directory, and helpers to start a
// server and compare trees.
#pragma once

#include "libs/cdc/manifest.hpp"
#include "libs/cdc/sync_client.hpp"
#include "libs/cdc/sync_server.hpp"
#include "libs/cdc/test_data.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/wire/test_util.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

namespace loom::cdc::test {

struct sync_fixture {
  wire::test::curve_fixture curve;  // ctx + ZAP handler first, destroyed last
  files::temp_dir served{"loom-cdc-src"};
  files::temp_dir received{"loom-cdc-dst"};
  const std::string dataset = "corpus";

  std::string src() const { return served.path() + "/" + dataset; }
  std::string dst() const { return received.path(); }

  std::unique_ptr<sync_server> start(sync_server_options o = {}) {
    o.root = served.path();
    auto s = sync_server::start(curve.ctx, curve.server, curve.domain, std::move(o));
    REQUIRE_MESSAGE(s.ok(), s.err().to_string());
    return std::move(*s);
  }

  sync_client client(sync_client_options o = {}) { return sync_client(curve.ctx, curve.alice, curve.server.public_z85, o); }
};

// path -> sha256 hex of every file under `dir`, the sync directory left out.
inline std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (auto it = std::filesystem::recursive_directory_iterator(dir); it != std::filesystem::recursive_directory_iterator(); ++it) {
    if (it.depth() == 0 && it->path().filename() == sync_dir_name) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    std::string rel = it->path().string().substr(dir.size() + 1);
    out[rel] = crypto::sha256_hex(get(dir, rel));
  }
  return out;
}

inline std::size_t count_files(const std::string& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); it != std::filesystem::recursive_directory_iterator(); ++it)
    n += it->is_regular_file();
  return n;
}

}  // namespace loom::cdc::test
