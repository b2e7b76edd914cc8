// The emitter under a failing disk: records wait in its queue (none is
// reported durable), the failure is logged once rather than per retry, and
// once the disk heals every record is spooled under gapless seqs.
#include "libs/audit/emitter.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>
#include <zmq.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace loom;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
// Sends this process's stderr to a file for its lifetime.
struct stderr_to_file {
  int saved = -1;
  explicit stderr_to_file(const std::string& path) {
    std::fflush(stderr);
    saved = ::dup(2);
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    ::dup2(::fileno(f), 2);
    std::fclose(f);
  }
  ~stderr_to_file() {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
  }
};

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("an emitter whose spool cannot sync holds its records, logs the failure once, and spools them all once the disk heals") {
  files::temp_dir tmp("loom-emitter");
  const std::string dir = tmp.path(), faults = dir + "/faults";
  fs::create_directories(faults);
  const std::string log = dir + "/stderr.log";
  ::setenv("LOOM_FAULTS_DIR", faults.c_str(), 1);
  { std::ofstream(faults + "/fsync") << ""; }
  {
    stderr_to_file capture(log);
    zmq::context_t ctx(1);
    audit::emitter_options o;
    o.source = "emitter-test@local";
    o.spool_dir = dir + "/spool";
    o.push_endpoint = "tcp://127.0.0.1:1";  // no audit service: records stay in the spool
    o.rpc_endpoint = "tcp://127.0.0.1:1";
    auto server = wire::generate_keypair();
    o.server_public = server.public_z85;
    o.mine = wire::generate_keypair();
    // Opened while the disk works; it fails from the first append on.
    fs::remove(faults + "/fsync");
    auto em = audit::emitter::start(ctx, o);
    REQUIRE(em.ok());
    { std::ofstream(faults + "/fsync") << ""; }
    for (int i = 0; i < 50; ++i) {
      audit::record r;
      r.action = "test.event";
      r.request_id = "req-" + std::to_string(i);
      (*em)->emit(std::move(r));
    }
    CHECK_FALSE((*em)->wait_spooled(1500ms));
    CHECK((*em)->spooled() == 0);
    CHECK((*em)->last_seq() == 0);
    fs::remove(faults + "/fsync");
    CHECK((*em)->wait_spooled(5s));
    CHECK((*em)->spooled() == 50);
    CHECK((*em)->last_seq() == 50);
    em->reset();
  }
  ::unsetenv("LOOM_FAULTS_DIR");
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  INFO(text.str());
  // 1.5 s of failing at a 20 ms..1 s backoff is a handful of tries, said once.
  CHECK(count_of(text.str(), "spool write failed") == 1);
  CHECK(count_of(text.str(), "spool writable again") == 1);
}
