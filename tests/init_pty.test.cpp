// Cross-process: `loom init` on a terminal (issue 31 item 4), driven through a
// real pseudo-terminal (forkpty): each question is printed with its default,
// Enter keeps it, a typed answer is checked as its flag would be; a bad
// answer ends the set-up naming it, before anything is written; the answers
// taken are what `loom up` then reads (endpoints.json). The prompts are waited
// for by their text, each within a bounded time — never a fixed sleep.
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// `loom --data-dir DIR init` on a pty; the test reads what it prints and types answers.
class terminal {
 public:
  explicit terminal(const std::string& data_dir) {
    const std::string loom = bin("loom");
    pid_ = ::forkpty(&fd_, nullptr, nullptr, nullptr);
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::execl(loom.c_str(), loom.c_str(), "--data-dir", data_dir.c_str(), "init", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~terminal() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);  // only the child this test started, by pid
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }

  // Reads until `text` has been printed (after what earlier waits consumed); false after `limit`.
  bool wait_for(const std::string& text, std::chrono::seconds limit = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (seen_.find(text, from_) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !read_some(static_cast<int>(left.count()))) return false;
    }
    from_ = seen_.find(text, from_) + text.size();
    return true;
  }
  void type(const std::string& line) {
    const std::string s = line + "\r";  // Enter on a terminal
    REQUIRE(::write(fd_, s.data(), s.size()) == static_cast<ssize_t>(s.size()));
  }
  // Everything it printed until it exits; its exit code (-1 after `limit`).
  int finish(std::chrono::seconds limit = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!read_some(200)) {
        int st = 0;
        if (::waitpid(pid_, &st, WNOHANG) == pid_) {
          reaped_ = true;
          while (read_some(50)) {
          }
          return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
      }
    }
    return -1;
  }
  const std::string& output() const { return seen_; }

 private:
  bool read_some(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return false;
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof buf);  // EIO once the child has gone
    if (n <= 0) return false;
    seen_.append(buf, static_cast<std::size_t>(n));
    return true;
  }
  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  std::string seen_;
  std::size_t from_ = 0;
};

}  // namespace

TEST_CASE("loom init on a terminal asks each question with its default, takes typed answers, and loom up reads them") {
  temp_dir scratch("loom-init-pty");
  const std::string home = scratch.path() + "/fresh";
  terminal t(home);
  const std::vector<std::pair<std::string, std::string>> dialogue = {
      {"cloud or site [cloud]: ", ""},
      {"zone [local]: ", "lab"},
      {"listen address (127.0.0.1, 0.0.0.0 or one of this host's) [127.0.0.1]: ", ""},
      {"port range FIRST-LAST (empty: any free port): ", ""},
      {"trainer processes [1]: ", "2"},
      {"store: sqlite, or a postgresql:// URL [sqlite]: ", ""},
      {"template of the first job (`loom templates` lists them) [pretrain-tiny]: ", ""},
  };
  for (const auto& [question, answer] : dialogue) {
    INFO("waiting for: " << question << "\nprinted so far:\n" << t.output());
    REQUIRE(t.wait_for(question));
    t.type(answer);
  }
  const int code = t.finish();
  INFO(t.output());
  REQUIRE(code == 0);
  auto e = layout::read_endpoints(home + "/endpoints.json");
  REQUIRE(e.ok());
  CHECK(e->zone == "lab");
  CHECK(e->trainers == 2);
  CHECK(fs::exists(home + "/admin.token"));
  // Again on a terminal, every default now the answer given: Enter throughout changes nothing.
  terminal again(home);
  for (const char* q : {"cloud or site [cloud]: ", "zone [lab]: ", "[127.0.0.1]: ", "(empty: any free port): ",
                        "trainer processes [2]: ", "[sqlite]: ", "[pretrain-tiny]: "}) {
    INFO("waiting for: " << q << "\nprinted so far:\n" << again.output());
    REQUIRE(again.wait_for(q));
    again.type("");
  }
  REQUIRE(again.finish() == 0);
  INFO(again.output());
  CHECK(again.output().find(" created ") == std::string::npos);
  CHECK(again.output().find(" changed ") == std::string::npos);
  CHECK(again.output().find("set-up       unchanged") != std::string::npos);
}

TEST_CASE("loom init on a terminal: a bad answer is named as its flag would be, and nothing is written") {
  temp_dir scratch("loom-init-pty");
  const std::string home = scratch.path() + "/fresh";
  {
    terminal t(home);
    REQUIRE(t.wait_for("cloud or site [cloud]: "));
    t.type("moon");
    const int code = t.finish();
    INFO(t.output());
    CHECK(code != 0);
    CHECK(t.output().find("answer cloud or site, not moon") != std::string::npos);
  }
  {
    terminal t(home);
    for (const char* q : {"cloud or site [cloud]: ", "zone [local]: ", "[127.0.0.1]: ", "(empty: any free port): "}) {
      REQUIRE(t.wait_for(q));
      t.type("");
    }
    REQUIRE(t.wait_for("trainer processes [1]: "));
    t.type("lots");
    const int code = t.finish();
    INFO(t.output());
    CHECK(code != 0);
    CHECK(t.output().find("--trainers") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(home + "/endpoints.json"));
  CHECK_FALSE(fs::exists(home + "/admin.token"));
}
