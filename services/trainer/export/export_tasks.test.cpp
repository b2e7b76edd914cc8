// export_tasks with a stand-in body (the real one, export_job, is exercised
// through `loom up` in tests/model_export*.test.cpp): requests are checked
// before anything is queued, an export belongs to its caller's tenant, a done
// export's files come back in hashed chunks, end() cancels or deletes, at most
// max_waiting wait, and unfetched files are deleted after keep_files.
#include "services/trainer/export/export_tasks.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <thread>

using namespace loom;
using namespace loom::trainer;
using namespace std::chrono_literals;

namespace {

const export_caller alice{"alice", "operator", "acme", "client"};
const export_caller bob{"bob", "operator", "globex", "client"};
const export_caller root{"root", "admin", "default", "client"};

export_request gguf(const std::string& version = "mv-000001") {
  export_request r;
  r.version = version;
  r.action = "export";
  r.format = "gguf";
  r.type = "q8_0";
  return r;
}

// Waits (at most 10 s) until the export's state is `state`.
export_info wait_for(export_tasks& t, const std::string& id, const std::string& state, const export_caller& c) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    auto i = t.get(id, c);
    REQUIRE(i.ok());
    if (i->state == state || std::chrono::steady_clock::now() > deadline) return *i;
    std::this_thread::sleep_for(5ms);
  }
}

// A body that writes one file of `bytes` bytes, or waits for stop when `hold`.
struct fake_body {
  std::size_t bytes = 10'000'000;
  std::shared_ptr<std::atomic<bool>> hold = std::make_shared<std::atomic<bool>>(false);
  export_body fn() const {
    return [bytes = bytes, hold = hold](const export_request& r, const export_caller&, export_context& ctx) -> status {
      while (hold->load() && !ctx.stop->load()) std::this_thread::sleep_for(1ms);
      if (ctx.stop->load()) return make_error(errc::unavailable, "cancelled");
      std::filesystem::create_directories(ctx.artefact_dir);
      std::string data(bytes, '\0');
      for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>((i * 7919) >> 3);
      const std::string name = "m-" + r.version + ".gguf";
      if (auto st = files::write_atomic(ctx.artefact_dir + "/" + name, data); !st) return st;
      ctx.update([&](export_info& i) {
        i.passed = true;
        i.recorded = true;
        i.files = {{name, bytes, crypto::sha256_hex(data)}};
      });
      return ok_status();
    };
  }
};

}  // namespace

TEST_CASE("a model export request is checked before anything is queued: fields, the admin's override, admit") {
  export_request r = gguf();
  r.type = "";
  CHECK(validate(r, alice).ok());
  CHECK(r.type == "f32");
  r = gguf();
  r.format = "onnx";
  CHECK(validate(r, alice).code() == errc::invalid_argument);
  r = gguf();
  r.format = "hf";
  r.type = "q8_0";
  auto hf = validate(r, alice);
  CHECK(hf.code() == errc::invalid_argument);
  CHECK(hf.err().message.find("--type is for --format gguf") != std::string::npos);
  r = gguf();
  r.override_compliance = true;
  r.reason = "legal said yes";
  auto op = validate(r, alice);
  CHECK(op.code() == errc::permission_denied);
  CHECK(op.err().message.find("needs the admin role") != std::string::npos);
  CHECK(validate(r, root).ok());
  r.reason = "";
  CHECK(validate(r, root).code() == errc::invalid_argument);
  r = gguf();
  r.held_out = "relative.txt";
  CHECK(validate(r, alice).code() == errc::invalid_argument);
  r = gguf();
  r.action = "check";
  CHECK(validate(r, alice).code() == errc::invalid_argument);  // a check has no format
  r.format = r.type = "";
  CHECK(validate(r, alice).ok());

  files::temp_dir dir{"loom-exports"};
  export_tasks_options o;
  o.root = dir.path() + "/exports";
  o.admit = [](const export_request& q) {
    return q.held_out.empty() ? ok_status() : make_error(errc::permission_denied, "--held-out: outside the roots");
  };
  export_tasks t(o, fake_body{}.fn());
  auto ex = gguf();
  ex.held_out = "/etc/passwd";
  CHECK(t.start(ex, alice).code() == errc::permission_denied);
}

TEST_CASE("an export belongs to its caller's tenant: another tenant's id is not_found, an admin sees it") {
  files::temp_dir dir{"loom-exports"};
  export_tasks_options o;
  o.root = dir.path() + "/exports";
  o.node = "trainer@test";
  export_tasks t(o, fake_body{}.fn());
  auto s = t.start(gguf(), alice);
  REQUIRE(s.ok());
  CHECK(s->id.rfind("exp-", 0) == 0);
  CHECK(s->trainer == "trainer@test");
  auto done = wait_for(t, s->id, "done", alice);
  REQUIRE(done.state == "done");
  REQUIRE(done.files.size() == 1);
  auto other = t.get(s->id, bob);
  CHECK(other.code() == errc::not_found);
  CHECK(other.err().message == "no model export " + s->id + " on this trainer (tenant globex)");
  CHECK(t.get("exp-0000000000000000", bob).err().message ==
        "no model export exp-0000000000000000 on this trainer (tenant globex)");  // the same words
  CHECK(t.fetch(s->id, done.files[0].name, 0, 0, bob).code() == errc::not_found);
  CHECK(t.end(s->id, bob).code() == errc::not_found);
  CHECK(t.get(s->id, root).ok());
  CHECK(std::filesystem::exists(o.root + "/" + s->id));  // bob's end() deleted nothing
}

TEST_CASE("a done export's file comes back in hashed chunks that make the whole file, and end() deletes it") {
  files::temp_dir dir{"loom-exports"};
  export_tasks_options o;
  o.root = dir.path() + "/exports";
  fake_body body;
  export_tasks t(o, body.fn());
  auto s = t.start(gguf(), alice);
  REQUIRE(s.ok());
  auto done = wait_for(t, s->id, "done", alice);
  REQUIRE(done.files.size() == 1);
  const auto& f = done.files[0];
  std::string got;
  while (got.size() < f.bytes) {
    auto c = t.fetch(s->id, f.name, got.size(), 0, alice);
    REQUIRE_MESSAGE(c.ok(), c.err().message);
    CHECK(c->offset == got.size());
    CHECK(c->file_bytes == f.bytes);
    CHECK(c->data.size() <= export_tasks::default_chunk);
    CHECK(c->sha256 == crypto::sha256_hex(c->data));
    REQUIRE_FALSE(c->data.empty());
    got += c->data;
  }
  CHECK(got.size() == body.bytes);
  CHECK(crypto::sha256_hex(got) == f.sha256);
  CHECK(t.fetch(s->id, f.name, f.bytes + 1, 0, alice).code() == errc::invalid_argument);
  CHECK(t.fetch(s->id, "../../etc/passwd", 0, 0, alice).code() == errc::not_found);  // only listed names
  CHECK(t.fetch(s->id, f.name, 0, 64u << 20, alice)->data.size() == export_tasks::max_chunk);
  auto ended = t.end(s->id, alice);
  REQUIRE(ended.ok());
  CHECK(ended->files.empty());
  CHECK_FALSE(std::filesystem::exists(o.root + "/" + s->id));
  CHECK(t.fetch(s->id, f.name, 0, 0, alice).code() == errc::not_found);
}

TEST_CASE("end() cancels a running export, at most max_waiting wait, and a new trainer process empties its root") {
  files::temp_dir dir{"loom-exports"};
  export_tasks_options o;
  o.root = dir.path() + "/exports";
  o.max_waiting = 2;
  REQUIRE(files::make_dirs(o.root + "/exp-left-by-a-dead-process").ok());
  fake_body body;
  body.hold->store(true);
  export_tasks t(o, body.fn());
  CHECK_FALSE(std::filesystem::exists(o.root + "/exp-left-by-a-dead-process"));
  auto a = t.start(gguf("mv-000001"), alice);
  auto b = t.start(gguf("mv-000002"), alice);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto c = t.start(gguf("mv-000003"), alice);
  CHECK(c.code() == errc::resource_exhausted);
  CHECK(c.err().message.find("at most 2") != std::string::npos);
  REQUIRE(wait_for(t, a->id, "running", alice).state == "running");
  CHECK(t.get(b->id, alice)->state == "queued");
  CHECK(t.fetch(a->id, "x", 0, 0, alice).code() == errc::conflict);
  CHECK(t.end(b->id, alice)->state == "cancelled");  // queued: cancelled at once
  REQUIRE(t.end(a->id, alice).ok());                // running: stopped at its next look
  CHECK(wait_for(t, a->id, "cancelled", alice).state == "cancelled");
  body.hold->store(false);
  auto d = t.start(gguf("mv-000004"), alice);
  REQUIRE(d.ok());
  CHECK(wait_for(t, d->id, "done", alice).state == "done");
}

TEST_CASE("one tenant cannot fill a trainer's export queue for the others") {
  files::temp_dir dir{"loom-exports"};
  export_tasks_options o;
  o.root = dir.path() + "/exports";
  o.max_waiting = 4;
  o.max_waiting_per_tenant = 2;
  fake_body body;
  body.hold->store(true);
  export_tasks t(o, body.fn());
  REQUIRE(t.start(gguf("mv-000001"), alice).ok());
  REQUIRE(t.start(gguf("mv-000002"), alice).ok());
  auto third = t.start(gguf("mv-000003"), alice);
  CHECK(third.code() == errc::resource_exhausted);
  CHECK(third.err().message.find("tenant acme already has 2") != std::string::npos);
  CHECK(t.start(gguf("mv-000004"), bob).ok());  // another tenant still gets in
  body.hold->store(false);
}

TEST_CASE("a done export nobody fetched has its files deleted after keep_files") {
  files::temp_dir dir{"loom-exports"};
  auto now = std::make_shared<std::atomic<std::int64_t>>(0);
  export_tasks_options o;
  o.root = dir.path() + "/exports";
  o.keep_files = 3600s;
  o.now = [now] { return std::chrono::steady_clock::time_point(std::chrono::seconds(now->load())); };
  export_tasks t(o, fake_body{1000}.fn());
  auto s = t.start(gguf(), alice);
  REQUIRE(s.ok());
  REQUIRE(wait_for(t, s->id, "done", alice).files.size() == 1);
  now->store(3599);
  CHECK(t.get(s->id, alice)->files.size() == 1);
  now->store(3601);
  auto late = t.get(s->id, alice);
  CHECK(late->files.empty());
  CHECK(late->phase == "files deleted after 3600 s");
  CHECK_FALSE(std::filesystem::exists(o.root + "/" + s->id));
}
