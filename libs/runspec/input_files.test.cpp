// The one rule on a run spec's files, on real files: outside the roots,
// the wrong kind of file (a device, a FIFO, a directory for a file key, a
// file for a directory key) and a file over its kind's cap are refused naming
// the key, the path and the roots or the cap; read_input never reads past the cap.
#include "libs/runspec/input_files.hpp"
#include "libs/runspec/schema.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

using namespace loom;
using namespace loom::runspec;
namespace fs = std::filesystem;

namespace {

struct dir_fixture {
  files::temp_dir tmp{"loom-input-files"};
  std::string root() const { return tmp.path() + "/in"; }
  dir_fixture() {
    fs::create_directories(root() + "/snap");
    REQUIRE(files::write_atomic(root() + "/held.txt", "some held-out text\n").ok());
  }
  // A sparse file of `bytes` (no disk used).
  std::string sparse(const std::string& name, std::uint64_t bytes) const {
    const std::string p = root() + "/" + name;
    const int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    ::close(fd);
    return p;
  }
};

bool has(const status& st, const std::string& text) {
  return !st.ok() && st.err().message.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE_FIXTURE(dir_fixture, "a path outside the roots is refused naming the key, the path and the roots") {
  files::root_set roots({root()});
  CHECK(check_input(roots, "hpo.validation", root() + "/held.txt").ok());
  for (const std::string p : {"/etc/services", "/dev/zero"}) {
    auto st = check_input(roots, "hpo.validation", p);
    CHECK(st.code() == errc::permission_denied);
    CHECK(has(st, "hpo.validation: " + p + " is outside the allowed roots (" + root() + ")"));
  }
  auto all = check_inputs(roots, {{"data.text", root() + "/held.txt"}, {"hpo.validation", "/etc/services"}}, "stage s: ");
  CHECK(all.code() == errc::permission_denied);
  CHECK(has(all, "stage s: hpo.validation: /etc/services is outside"));
  CHECK(has(all, "--import-root"));  // where a stage may read from
  CHECK(check_input(roots, "data.text", root() + "/missing.txt").code() == errc::not_found);
}

TEST_CASE_FIXTURE(dir_fixture, "a device, a FIFO or a directory is no text file, and a file is no checkpoint directory") {
  files::root_set dev({"/dev"});
  auto zero = check_input(dev, "hpo.validation", "/dev/zero");
  CHECK(zero.code() == errc::invalid_argument);
  CHECK(has(zero, "hpo.validation /dev/zero is a character device, not a regular file: hpo.validation names a "
                  "held-out text file"));
  REQUIRE(::mkfifo((root() + "/fifo").c_str(), 0600) == 0);
  files::root_set roots({root()});
  CHECK(has(check_input(roots, "data.text", root() + "/fifo"), "is a FIFO, not a regular file"));
  CHECK(has(check_input(roots, "data.sft", root() + "/snap"), "is a directory, not a regular file"));
  CHECK(has(check_input(roots, "model.init_from", root() + "/held.txt"), "is a regular file, not a directory"));
  CHECK(check_input(roots, "reward.model", root() + "/snap").ok());
  // read_input refuses them too, without waiting on the FIFO for a writer.
  CHECK(read_input("data.text", root() + "/fifo").code() == errc::invalid_argument);
  CHECK(read_input("hpo.validation", "/dev/zero").code() == errc::invalid_argument);
}

TEST_CASE_FIXTURE(dir_fixture, "a file over its kind's cap is refused naming the size, the cap and the reason") {
  files::root_set roots({root()});
  const std::string big = sparse("big.txt", (16ull << 20) + 1);
  auto st = check_input(roots, "hpo.validation", big);
  CHECK(st.code() == errc::invalid_argument);
  CHECK(has(st, "over the 16 MiB allowed for a held-out text file: every segment of every trial reads"));
  CHECK(check_input(roots, "data.text", big).ok());  // a corpus may be larger
  const std::string huge = sparse("huge.txt", (1ull << 30) + 1);
  CHECK(has(check_input(roots, "data.text", huge), "1.00 GiB, over the 1 GiB allowed for a text file"));
  CHECK(has(check_input(roots, "data.tokenizer", sparse("tok.json", (64ull << 20) + 1)), "64 MiB"));
  auto read = read_input("hpo.validation", big);
  CHECK(read.code() == errc::invalid_argument);
  auto ok = read_input("hpo.validation", root() + "/held.txt");
  REQUIRE(ok.ok());
  CHECK(*ok == "some held-out text\n");
  CHECK(describe_cap(16ull << 20) == "16 MiB");
}

TEST_CASE_FIXTURE(dir_fixture, "a key that is not a path key is a broken invariant, not a file to judge") {
  files::root_set roots({root()});
  CHECK(check_input(roots, "data.dataset", root() + "/held.txt").code() == errc::internal);
  CHECK(read_input("train.steps", root() + "/held.txt").code() == errc::internal);
}
