#include "libs/files/output.hpp"

#include "libs/files/confine.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

namespace fs = std::filesystem;
using loom::errc;
using loom::files::check_output;
using loom::files::output_kind;
using loom::files::output_rules;

TEST_CASE("an output may be a new file, and an existing one only with force") {
  loom::files::temp_dir d("loom-output");
  const std::string f = d.path() + "/tok.json";
  CHECK(check_output(f, {}).ok());
  REQUIRE(loom::files::write_atomic(f, "x").ok());
  auto st = check_output(f, {});
  CHECK(st.code() == errc::already_exists);
  CHECK(st.err().message == "--out " + f + " exists: pass --force to replace it");
  output_rules force;
  force.force = true;
  CHECK(check_output(f, force).ok());
  CHECK(check_output(d.path(), force).code() == errc::already_exists);  // a directory is never replaced by a file
  CHECK(check_output("", {}).code() == errc::invalid_argument);
}

TEST_CASE("an output is never one of the inputs, a file under an input directory or a link to an input") {
  loom::files::temp_dir d("loom-output");
  REQUIRE(loom::files::make_dirs(d.path() + "/corpus/sub").ok());
  const std::string in = d.path() + "/corpus/sub/a.txt";
  REQUIRE(loom::files::write_atomic(in, "text").ok());
  output_rules r;
  r.force = true;  // refused whatever the flags
  r.inputs = {in};
  auto same = check_output(in, r);
  CHECK(same.code() == errc::invalid_argument);
  CHECK(same.err().message.find("is the input " + in) != std::string::npos);
  // Another name for it: relative, with "..", through a link.
  const auto cwd = fs::current_path();
  fs::current_path(d.path() + "/corpus");
  CHECK(check_output("sub/../sub/a.txt", r).code() == errc::invalid_argument);
  fs::current_path(cwd);
  REQUIRE(::symlink(in.c_str(), (d.path() + "/link").c_str()) == 0);
  CHECK(check_output(d.path() + "/link", r).code() == errc::invalid_argument);
  // An input directory: an existing file under it is one of the inputs; a new file is not.
  r.inputs = {d.path() + "/corpus"};
  CHECK(check_output(in, r).code() == errc::invalid_argument);
  CHECK(check_output(d.path() + "/corpus/new.json", r).ok());
  CHECK(check_output(d.path() + "/out.json", r).ok());
}

TEST_CASE("the caller's forbidden places are asked for where the name lies and where a link leads") {
  loom::files::temp_dir d("loom-output");
  REQUIRE(loom::files::make_dirs(d.path() + "/secret").ok());
  REQUIRE(loom::files::make_dirs(d.path() + "/open").ok());
  output_rules r;
  r.force = true;
  std::vector<std::string> asked;
  const std::string secret = fs::canonical(d.path()).string() + "/secret";
  r.refuse = [&](const std::string& loc) -> loom::status {
    asked.push_back(loc);
    if (loom::files::within(secret, loc)) return loom::make_error(errc::permission_denied, loc + " is secret");
    return loom::ok_status();
  };
  CHECK(check_output(d.path() + "/secret/key", r).code() == errc::permission_denied);
  CHECK(check_output(d.path() + "/open/../secret/key", r).code() == errc::permission_denied);
  // A link in an open place that leads into the secret one, dangling or not.
  REQUIRE(::symlink((d.path() + "/secret/key").c_str(), (d.path() + "/open/innocent").c_str()) == 0);
  asked.clear();
  CHECK(check_output(d.path() + "/open/innocent", r).code() == errc::permission_denied);
  CHECK(asked.size() == 2);
  // A directory on the way that is a link.
  REQUIRE(::symlink((d.path() + "/secret").c_str(), (d.path() + "/open/door").c_str()) == 0);
  CHECK(check_output(d.path() + "/open/door/key", r).code() == errc::permission_denied);
  CHECK(check_output(d.path() + "/open/fine.json", r).ok());
}

TEST_CASE("a directory output may exist, but not as a file") {
  loom::files::temp_dir d("loom-output");
  output_rules r;
  r.kind = output_kind::directory;
  CHECK(check_output(d.path(), r).ok());
  CHECK(check_output(d.path() + "/new/run", r).ok());
  REQUIRE(loom::files::write_atomic(d.path() + "/file", "x").ok());
  CHECK(check_output(d.path() + "/file", r).code() == errc::already_exists);
}
