#include "libs/files/fault.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

using namespace loom;

TEST_CASE("the fsync fault point fails fsync with EIO while its file exists, and only under LOOM_FAULTS_DIR") {
  files::temp_dir dir("loom-fault");
  const std::string target = dir.path() + "/data";
  const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  const std::string faults = dir.path() + "/faults";
  REQUIRE(files::make_dirs(faults));
  std::ofstream(faults + "/fsync").put('1');

  // Not set: the point's file is never looked at.
  ::unsetenv("LOOM_FAULTS_DIR");
  CHECK_FALSE(files::fault_armed("fsync"));
  CHECK(files::fsync_fd(fd) == 0);

  ::setenv("LOOM_FAULTS_DIR", faults.c_str(), 1);
  CHECK(files::fault_armed("fsync"));
  errno = 0;
  CHECK(files::fsync_fd(fd) == -1);
  CHECK(errno == EIO);
  CHECK(files::fdatasync_fd(fd) == -1);
  // A durable write reports it, naming the file, and leaves no temp behind.
  auto w = files::write_atomic(dir.path() + "/out", "x");
  REQUIRE_FALSE(w.ok());
  CHECK(w.err().message.find("fsync") != std::string::npos);
  CHECK(w.err().message.find(dir.path() + "/out.tmp.") != std::string::npos);
  CHECK_FALSE(files::read_file(dir.path() + "/out").ok());

  // Disarmed: the same calls succeed again without a restart.
  ::unlink((faults + "/fsync").c_str());
  CHECK_FALSE(files::fault_armed("fsync"));
  CHECK(files::fsync_fd(fd) == 0);
  CHECK(files::write_atomic(dir.path() + "/out", "x").ok());
  ::unsetenv("LOOM_FAULTS_DIR");
  ::close(fd);
}

TEST_CASE("storage_fault: a full disk or an I/O error, by code or by the system's words, and nothing else") {
  CHECK(files::storage_fault(files::errno_error("write", "/d/x", ENOSPC)));
  CHECK(files::storage_fault(files::errno_error("fsync", "/d/x", EIO)));
  CHECK(files::storage_fault(files::errno_error("write", "/d/x", EDQUOT)));
  // Rewrapped by a layer above as internal, the words still tell.
  CHECK(files::storage_fault(make_error(errc::internal, files::errno_error("fsync", "/d/x", EIO).message)));
  CHECK(files::storage_fault(make_error(errc::internal, "stage: " + files::errno_error("write", "/d/x", ENOSPC).message)));
  CHECK_FALSE(files::storage_fault(files::errno_error("open", "/d/x", ENOENT)));
  CHECK_FALSE(files::storage_fault(files::errno_error("open", "/d/x", EACCES)));
  CHECK_FALSE(files::storage_fault(make_error(errc::invalid_argument, "bad config")));
  CHECK_FALSE(files::storage_fault(make_error(errc::internal, "the loss is NaN")));
}
