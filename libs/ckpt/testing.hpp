// Test helpers for libs/ckpt: a temp directory under /tmp removed on scope exit.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace loom::ckpt::testing {

class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = "/tmp/loom-ckpt-test-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~temp_dir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace loom::ckpt::testing
