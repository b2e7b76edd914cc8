// A fresh directory under /tmp (or $TMPDIR), removed with everything in it
// when the object goes out of scope. For tests, benchmarks and scratch work.
// Aborts if the directory cannot be made: nothing sensible can follow.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace loom::files {

class temp_dir {
 public:
  explicit temp_dir(const std::string& prefix = "loom") {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/" + prefix + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) std::abort();
    path_ = buf.data();
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace loom::files
