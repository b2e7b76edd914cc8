#include "libs/files/confine.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

namespace fs = std::filesystem;
using loom::errc;
using loom::files::confined;
using loom::files::open_confined;

namespace {

// <tmp>/in (the root) with in/a.txt, in/sub/b.txt; <tmp>/input/c.txt and
// <tmp>/out/secret.txt beside it (outside the root).
struct tree {
  loom::files::temp_dir tmp{"loom-confine"};
  std::string root = fs::canonical(tmp.path()).string() + "/in";
  tree() {
    for (const auto* f : {"/in/a.txt", "/in/sub/b.txt", "/input/c.txt", "/out/secret.txt"}) {
      fs::create_directories(fs::path(tmp.path() + f).parent_path());
      REQUIRE(loom::files::write_atomic(tmp.path() + f, std::string("content of ") + f).ok());
    }
  }
  std::string out() const { return fs::canonical(tmp.path()).string() + "/out"; }
};

std::string read_fd(int fd) {
  std::string s(256, '\0');
  const ssize_t n = ::read(fd, s.data(), s.size());
  s.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  ::close(fd);
  return s;
}

}  // namespace

TEST_CASE("a file under a root is allowed and comes back canonical") {
  tree t;
  auto r = confined({t.root}, t.root + "/sub/../a.txt");
  REQUIRE(r.ok());
  CHECK(*r == t.root + "/a.txt");
  CHECK(confined({"/nonexistent-root", t.root}, t.root + "/sub/b.txt").ok());
  CHECK(confined({t.root}, t.root).ok());  // the root itself
}

TEST_CASE("a symbolic link to a file outside every root is refused naming the path, its target and the roots") {
  tree t;
  fs::create_symlink(t.out() + "/secret.txt", t.root + "/shadow");
  fs::create_symlink("/etc/passwd", t.root + "/passwd");
  for (const auto& [link, target] : {std::pair{t.root + "/shadow", t.out() + "/secret.txt"},
                                     std::pair{t.root + "/passwd", fs::canonical("/etc/passwd").string()}}) {
    auto r = confined({t.root}, link);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::permission_denied);
    CHECK(r.err().message.find(link) != std::string::npos);
    CHECK(r.err().message.find(target) != std::string::npos);
    CHECK(r.err().message.find("(" + t.root + ")") != std::string::npos);
    auto fd = open_confined({t.root}, link, O_RDONLY);
    CHECK(fd.code() == errc::permission_denied);
  }
}

TEST_CASE("a symbolic link that stays inside a root is followed") {
  tree t;
  fs::create_symlink("sub/b.txt", t.root + "/link-to-b");
  auto r = confined({t.root}, t.root + "/link-to-b");
  REQUIRE(r.ok());
  CHECK(*r == t.root + "/sub/b.txt");
  auto fd = open_confined({t.root}, t.root + "/link-to-b", O_RDONLY);
  REQUIRE(fd.ok());
  CHECK(read_fd(*fd) == "content of /in/sub/b.txt");
}

TEST_CASE("a root is a whole path component: a sibling whose name starts with it is outside") {
  tree t;
  auto r = confined({t.root}, t.root + "put/c.txt");  // <tmp>/input/c.txt
  CHECK(r.code() == errc::permission_denied);
  CHECK(confined({t.root}, t.root + "/../out/secret.txt").code() == errc::permission_denied);
  CHECK(loom::files::within("/srv/in", "/srv/in/x"));
  CHECK(loom::files::within("/srv/in", "/srv/in"));
  CHECK_FALSE(loom::files::within("/srv/in", "/srv/input"));
  CHECK_FALSE(loom::files::within("/srv/in", "/srv"));
  CHECK(loom::files::within("/", "/etc/passwd"));
}

TEST_CASE("a missing path is not_found inside a root and permission_denied outside, so nothing outside is probed") {
  tree t;
  CHECK(confined({t.root}, t.root + "/no/such/file").code() == errc::not_found);
  CHECK(confined({t.root}, t.out() + "/no-such-file").code() == errc::permission_denied);
  CHECK(confined({t.root}, t.out() + "/secret.txt").code() == errc::permission_denied);
  CHECK(confined({t.root}, "/no/such/corpus").code() == errc::permission_denied);
}

TEST_CASE("no roots refuse everything, and a relative path is invalid") {
  tree t;
  auto r = confined({}, t.root + "/a.txt");
  CHECK(r.code() == errc::permission_denied);
  CHECK(r.err().message.find("(none configured)") != std::string::npos);
  CHECK(confined({t.root}, "in/a.txt").code() == errc::invalid_argument);
  CHECK(confined({"relative/root"}, t.root + "/a.txt").code() == errc::permission_denied);
}

TEST_CASE("a root given through a symbolic link contains what lies under its target") {
  tree t;
  const std::string alias = t.tmp.path() + "/alias";
  fs::create_directory_symlink(t.root, alias);
  auto r = confined({alias}, alias + "/a.txt");
  REQUIRE(r.ok());
  CHECK(*r == t.root + "/a.txt");
  CHECK(confined({alias}, t.root + "/sub/b.txt").ok());
}

TEST_CASE("open_confined opens files and directories inside and leaves no descriptor behind when it refuses") {
  tree t;
  auto fd = open_confined({t.root}, t.root + "/a.txt", O_RDONLY);
  REQUIRE(fd.ok());
  CHECK(read_fd(*fd) == "content of /in/a.txt");
  auto dir = open_confined({t.root}, t.root + "/sub", O_RDONLY | O_DIRECTORY);
  REQUIRE(dir.ok());
  ::close(*dir);
  auto count_fds = [] {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  fs::create_symlink(t.out(), t.root + "/outdir");
  const auto before = count_fds();
  for (int i = 0; i < 10; ++i)
    CHECK(open_confined({t.root}, t.root + "/outdir/secret.txt", O_RDONLY).code() == errc::permission_denied);
  CHECK(open_confined({t.root}, t.root + "/missing.txt", O_RDONLY).code() == errc::not_found);
  CHECK(count_fds() == before);
}

TEST_CASE("a root set answers as confined and sees roots created or moved after it was made") {
  tree t;
  const std::string later = fs::canonical(t.tmp.path()).string() + "/later";
  loom::files::root_set roots({t.root, later});
  auto a = roots.confined(t.root + "/sub/../a.txt");
  REQUIRE(a.ok());
  CHECK(*a == t.root + "/a.txt");
  CHECK(roots.confined(t.out() + "/secret.txt").code() == errc::permission_denied);
  CHECK(roots.confined("relative.txt").code() == errc::invalid_argument);
  CHECK(roots.confined(t.root + "/missing.txt").code() == errc::not_found);
  // A root that did not exist when the set was made: found once it does.
  fs::create_directories(later);
  REQUIRE(loom::files::write_atomic(later + "/d.txt", "d").ok());
  CHECK(roots.confined(later + "/d.txt").ok());
  // A root moved away: nothing under either name is allowed, as confined() says.
  const std::string moved = fs::canonical(t.tmp.path()).string() + "/moved";
  fs::rename(t.root, moved);
  CHECK(roots.confined(t.root + "/a.txt").code() == errc::permission_denied);
  CHECK(confined({t.root, later}, t.root + "/a.txt").code() == errc::permission_denied);
  CHECK(roots.confined(moved + "/a.txt").code() == errc::permission_denied);
}

TEST_CASE("make_confined_dirs makes a directory inside a root and nothing through a link that leads out") {
  tree t;
  auto made = loom::files::make_confined_dirs({t.root}, t.root + "/x/y/../z", 0700);
  REQUIRE_MESSAGE(made.ok(), made.err().message);
  CHECK(*made == t.root + "/x/z");
  CHECK(fs::is_directory(t.root + "/x/z"));
  CHECK((fs::status(t.root + "/x").permissions() & fs::perms::group_all) == fs::perms::none);
  CHECK(loom::files::make_confined_dirs({t.root}, t.root + "/x/z").value() == t.root + "/x/z");  // already there
  // A link inside the root that leads out: refused naming where it leads, nothing made behind it.
  fs::create_symlink(t.out(), t.root + "/away");
  auto away = loom::files::make_confined_dirs({t.root}, t.root + "/away/new/deeper");
  CHECK(away.code() == errc::permission_denied);
  CHECK(away.err().message.find("leads to " + t.out()) != std::string::npos);
  CHECK_FALSE(fs::exists(t.out() + "/new"));
  // Outside the roots altogether, or not absolute.
  CHECK(loom::files::make_confined_dirs({t.root}, t.out() + "/new").code() == errc::permission_denied);
  CHECK_FALSE(fs::exists(t.out() + "/new"));
  CHECK(loom::files::make_confined_dirs({t.root}, "relative/dir").code() == errc::invalid_argument);
}
