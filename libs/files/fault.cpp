#include "libs/files/fault.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <string>

namespace loom::files {
// getenv at each check (no cached copy, so a test can set it late): the
// points guard system calls that cost far more than a scan of the environment.
bool fault_armed(std::string_view point) {
  const char* dir = std::getenv("LOOM_FAULTS_DIR");
  if (!dir || !*dir) return false;
  struct stat st {};
  return ::stat((std::string(dir) + "/" + std::string(point)).c_str(), &st) == 0;
}

int fsync_fd(int fd) {
  if (fault_armed("fsync")) {
    errno = EIO;
    return -1;
  }
  return ::fsync(fd);
}

int fdatasync_fd(int fd) {
  if (fault_armed("fsync")) {
    errno = EIO;
    return -1;
  }
  return ::fdatasync(fd);
}

bool storage_fault(const error& e) {
  if (e.code == errc::resource_exhausted) return true;
  for (int n : {ENOSPC, EDQUOT, EFBIG, EIO})
    if (e.message.find(std::strerror(n)) != std::string::npos) return true;
  return false;
}

}  // namespace loom::files
