// engine + saver: a closed round's save is written off the engine's lock by
// the saver's thread, its version published once written; a restarted engine
// resumes the job from its fragments' files; a job whose fragment file is
// corrupt is reported by name and left out while the others resume.
#include "services/aggregator/engine.hpp"

#include "libs/audit/record.hpp"
#include "libs/auth/token.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/diloco/grant/grant.hpp"
#include "libs/diloco/grant/stage_spec.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/layout/layout.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/job_store.hpp"
#include "services/aggregator/wire.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <limits>
#include <mutex>

using namespace loom;
using namespace loom::aggregator;
namespace fs = std::filesystem;

namespace {

const site_key site0{"site-0", key_source::diloco};

// A data dir with the token key, engines over it, and grants signed with it.
struct deployment {
  files::temp_dir dir;
  std::string token_key;
  std::mutex mu;
  std::vector<audit::record> audited;

  deployment() {
    layout::paths paths{dir.path()};
    REQUIRE(files::make_dirs(dir.path() + "/keys").ok());
    REQUIRE(auth::create_token_key(paths.token_key()).ok());
    token_key = auth::load_token_key(paths.token_key()).value();
  }
  engine_options options() {
    engine_options o{dir.path(), "aggregator@test", "cloud",
                     [this](audit::record r) {
                       std::lock_guard l(mu);
                       audited.push_back(std::move(r));
                     },
                     nullptr};
    o.token_key = token_key;
    return o;
  }
  // This deployment's stage `job`/pretrain on site-0: 64 values in 2 fragments, fp32 downlink.
  v1::AggregationGrant grant(const std::string& job) {
    v1::AggregationGrant g;
    g.set_job(job);
    g.set_stage("pretrain");
    g.set_tenant("default");
    g.set_stage_dir(dir.path() + "/jobs/" + job + "/pretrain");
    g.add_sites("site-0");
    auto* s = g.mutable_spec();
    s->set_job(diloco::aggregation_name(job, "pretrain"));
    s->set_flat_size(64);
    s->set_fragments(2);
    s->set_sync_every(2);
    s->set_codec("fp32");
    s->set_init_seed(3);
    g.set_expires_unix(std::numeric_limits<std::int32_t>::max());
    diloco::sign_grant(&g, token_key);
    return g;
  }
  std::vector<audit::record> records(const std::string& action) {
    std::lock_guard l(mu);
    std::vector<audit::record> out;
    for (const auto& r : audited)
      if (r.action == action) out.push_back(r);
    return out;
  }
};

// Starts the job of grant `g` and closes round 0 of fragment 0 with site-0's delta.
std::string start_and_close(engine& e, const v1::AggregationGrant& g) {
  const auto spec = from_wire(g.spec()).value();
  REQUIRE(e.start(spec, g, "trainer", nanos(0)).ok());
  REQUIRE(e.join(spec.job, "site-0", site0).ok());
  const std::vector<float> delta(32, 0.01f);
  auto q = codec::encode(codec::codec_id::fp32, delta).value();
  const std::string payload(reinterpret_cast<const char*>(q.data()), q.size());
  delta_header h;
  h.job = spec.job;
  h.meta = {"site-0", 0, 0, 0, delta.size(), 100};
  h.codec = "fp32";
  h.payload_bytes = payload.size();
  h.payload_sha256 = std::string(crypto::as_view(crypto::sha256(payload)));
  auto out = e.submit(h, payload, site0, nanos(1));
  REQUIRE(std::holds_alternative<delta_outcome>(out));
  REQUIRE(std::get<delta_outcome>(out).closed);
  return spec.job;
}

std::string params(engine& e, const std::string& job, std::uint32_t p) {
  auto got = e.pull(job, "site-0", p, 0, true, site0);
  REQUIRE_MESSAGE(got.ok(), got.err().to_string());
  return *got->payload;
}

}  // namespace

TEST_CASE("a closed round's save is written by the saver, its version published once written, and a restart resumes from the files") {
  deployment d;
  const auto g = d.grant("job-1");
  std::string job, theta0, theta1;
  {
    engine e(d.options());
    job = start_and_close(e, g);
    e.flush_saves();
    auto update = e.pull(job, "site-0", 0, 0, false, site0).value();
    CHECK(update.has_update);
    CHECK(update.header.version == 1);
    const std::string job_dir = d.dir.path() + "/aggregator/" + job;
    CHECK(fs::exists(job_dir + "/fragment-0-v1.bin"));
    CHECK_FALSE(fs::exists(job_dir + "/fragment-0-v0.bin"));
    CHECK(fs::exists(job_dir + "/fragment-1-v0.bin"));
    theta0 = params(e, job, 0);
    theta1 = params(e, job, 1);
  }
  engine again(d.options());
  CHECK(again.load_saved(nanos(0)) == std::vector<std::string>{job});
  CHECK(params(again, job, 0) == theta0);
  CHECK(params(again, job, 1) == theta1);
  auto join = again.join(job, "site-0", site0).value();
  CHECK(join.versions == std::vector<std::uint64_t>{1, 0});
  CHECK(join.last_round == std::vector<std::int64_t>{0, -1});  // its delta is inside the saved step
}

TEST_CASE("a job whose fragment file is corrupt is not resumed, the error naming the file and the job, and the other jobs are") {
  deployment d;
  std::string broken, fine;
  {
    engine e(d.options());
    broken = start_and_close(e, d.grant("job-1"));
    fine = start_and_close(e, d.grant("job-2"));
  }  // the engine writes what is queued before it goes
  const std::string frag = d.dir.path() + "/aggregator/" + broken + "/fragment-1-v0.bin";
  std::string bytes = files::read_file(frag).value();
  bytes[bytes.size() / 2] ^= 0x01;
  REQUIRE(files::write_atomic(frag, bytes).ok());

  engine again(d.options());
  CHECK(again.load_saved(nanos(0)) == std::vector<std::string>{fine});
  const auto failed = d.records("aggregation.resume_failed");
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].reason.find("aggregation " + broken + ": fragment file " + frag + ": SHA-256") != std::string::npos);
  CHECK(again.join(fine, "site-0", site0).ok());
  CHECK(again.join(broken, "site-0", site0).code() == errc::not_found);
}
