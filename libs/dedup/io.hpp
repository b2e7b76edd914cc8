// Scratch files of one dedup job (internal to libs/dedup): a private directory
// removed with everything in it when its last owner lets go, and buffered
// readers/writers of raw record files. Records are written in the host's byte
// order: the files never outlive the process that wrote them.
// Each object is used by one thread; scratch hands out names thread-safely.
#pragma once

#include "libs/files/buffered_reader.hpp"
#include "libs/status/status.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace loom::dedup::detail {

class scratch {
 public:
  // mkdtemp("<parent>/loom-dedup-XXXXXX"); parent "" = $TMPDIR or /tmp.
  static result<std::shared_ptr<scratch>> create(const std::string& parent);
  ~scratch();
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;

  std::string new_path(const char* tag);  // a fresh file name inside the directory
  const std::string& dir() const { return dir_; }

  std::atomic<std::uint64_t> bytes_written{0};

 private:
  explicit scratch(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::atomic<std::uint64_t> next_{0};
};

// errno after a failed call on `path` -> error (ENOSPC -> resource_exhausted).
error io_error(const char* what, const std::string& path);

// Sequential writer with its own buffer.
class out_file {
 public:
  static result<out_file> create(std::string path, std::size_t buffer_bytes, scratch* owner);
  out_file(out_file&& o) noexcept;
  out_file& operator=(out_file&& o) noexcept;
  ~out_file();

  status write(const void* data, std::size_t n);
  status flush();  // hands buffered bytes to the kernel (no fsync)
  status close();  // flushes; REQUIRES: no write after close
  const std::string& path() const { return path_; }

 private:
  out_file() = default;
  int fd_ = -1;
  std::string path_;
  std::vector<char> buf_;
  std::size_t used_ = 0;
  scratch* owner_ = nullptr;
};

// Sequential reader with its own buffer, plus positioned reads (libs/files).
using in_file = files::buffered_reader;

}  // namespace loom::dedup::detail
