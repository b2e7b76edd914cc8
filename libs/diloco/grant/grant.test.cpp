// Aggregation grants: what verifies, and that no field of the grant or of its
// spec can be changed (or a site added) without the MAC failing.
#include "libs/diloco/grant/grant.hpp"

#include "libs/diloco/grant/stage_spec.hpp"
#include "loom/v1/aggregator.pb.h"

#include <doctest/doctest.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

using namespace loom;
namespace pb = google::protobuf;

namespace {

const std::string key(32, 'k');
constexpr std::int64_t now = 1'700'000'000;

v1::AggregationGrant sample(bool edge = true) {
  v1::AggregationGrant g;
  g.set_job("job-000007");
  g.set_stage("pretrain");
  g.set_tenant("acme");
  g.set_stage_dir("/data/jobs/job-000007/pretrain");
  if (edge) {
    g.add_sites("north");
    g.add_sites("south");
  } else {
    g.add_sites("site-0");
    g.add_sites("site-1");
  }
  g.set_edge_sites(edge);
  auto* s = g.mutable_spec();
  s->set_job(diloco::aggregation_name("job-000007", "pretrain"));
  s->set_gpt2_layers(2);
  s->set_fragments(2);
  s->set_init_seed(1337);
  s->set_max_delta_tokens(16 * 8 * 64);
  g.set_expires_unix(now + 3600);
  diloco::sign_grant(&g, key);
  return g;
}

// A value of field f that differs from the current one (a repeated field gets one more element).
void change(pb::Message& m, const pb::FieldDescriptor* f) {
  const pb::Reflection* r = m.GetReflection();
  if (f->is_repeated()) {
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) r->AddString(&m, f, "intruder");
    else FAIL("a repeated field of a type this test does not change: " << f->full_name());
    return;
  }
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32: r->SetInt32(&m, f, r->GetInt32(m, f) + 1); break;
    case pb::FieldDescriptor::CPPTYPE_INT64: r->SetInt64(&m, f, r->GetInt64(m, f) + 1); break;
    case pb::FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(&m, f, r->GetUInt32(m, f) + 1); break;
    case pb::FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(&m, f, r->GetUInt64(m, f) + 1); break;
    case pb::FieldDescriptor::CPPTYPE_BOOL: r->SetBool(&m, f, !r->GetBool(m, f)); break;
    case pb::FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(&m, f, r->GetFloat(m, f) + 0.5f); break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(&m, f, r->GetDouble(m, f) + 0.5); break;
    case pb::FieldDescriptor::CPPTYPE_STRING: r->SetString(&m, f, r->GetString(m, f) + "x"); break;
    case pb::FieldDescriptor::CPPTYPE_ENUM: r->SetEnumValue(&m, f, r->GetEnumValue(m, f) + 1); break;
    case pb::FieldDescriptor::CPPTYPE_MESSAGE: r->ClearField(&m, f); break;
  }
}

}  // namespace

TEST_CASE("a grant the scheduler signed verifies and gives its terms") {
  auto t = diloco::verify_grant(sample(), key, now);
  REQUIRE_MESSAGE(t.ok(), t.err().to_string());
  CHECK(t->job == "job-000007");
  CHECK(t->stage == "pretrain");
  CHECK(t->tenant == "acme");
  CHECK(t->stage_dir == "/data/jobs/job-000007/pretrain");
  CHECK(t->sites == std::vector<std::string>{"north", "south"});
  CHECK(t->edge_sites);
  CHECK(t->granted("south"));
  CHECK_FALSE(t->granted("east"));
  CHECK(t->expires_unix == now + 3600);
}

TEST_CASE("changing any field of a grant or of its spec, or adding a site, makes its MAC fail") {
  const auto good = sample();
  int changed = 0;
  const auto* gd = v1::AggregationGrant::descriptor();
  for (int i = 0; i < gd->field_count(); ++i) {
    const auto* f = gd->field(i);
    if (f->name() == "mac") continue;
    auto g = good;
    change(g, f);
    auto t = diloco::verify_grant(g, key, now);
    CHECK_MESSAGE(t.code() == errc::permission_denied, "grant field " << f->name() << " changed, still verifies");
    ++changed;
  }
  const auto* sd = v1::AggregationSpec::descriptor();
  for (int i = 0; i < sd->field_count(); ++i) {
    auto g = good;
    change(*g.mutable_spec(), sd->field(i));
    auto t = diloco::verify_grant(g, key, now);
    CHECK_MESSAGE(t.code() == errc::permission_denied, "spec field " << sd->field(i)->name() << " changed, still verifies");
    ++changed;
  }
  CHECK(changed == gd->field_count() - 1 + sd->field_count());
  // An unknown field (a newer sender's, or added by hand) is outside the terms: still the same grant.
  auto g = good;
  g.GetReflection()->MutableUnknownFields(&g)->AddVarint(99, 1);
  CHECK(diloco::verify_grant(g, key, now).ok());
}

TEST_CASE("a grant under another key, without a MAC, or expired is refused, a saved one is still read after expiry") {
  const auto g = sample();
  auto other = diloco::verify_grant(g, std::string(32, 'o'), now);
  CHECK(other.code() == errc::permission_denied);
  CHECK(other.err().message.find("MAC does not verify") != std::string::npos);
  auto none = g;
  none.clear_mac();
  CHECK(diloco::verify_grant(none, key, now).code() == errc::permission_denied);
  CHECK(diloco::verify_grant(v1::AggregationGrant{}, key, now).code() == errc::permission_denied);
  auto late = diloco::verify_grant(g, key, now + 3600);
  CHECK(late.code() == errc::permission_denied);
  CHECK(late.err().message.find("expired") != std::string::npos);
  CHECK(diloco::verify_grant(g, key, now + 3599).ok());
  CHECK(diloco::verify_grant_mac(g, key).ok());  // reloading a saved aggregation: expiry is the engine's
}

TEST_CASE("a signed grant that is not a whole one is invalid: this deployment's sites are site-0..N-1, spec.job is the stage's") {
  auto g = sample(false);
  CHECK(diloco::verify_grant(g, key, now).ok());
  g.set_sites(1, "north");
  diloco::sign_grant(&g, key);
  CHECK(diloco::verify_grant(g, key, now).code() == errc::invalid_argument);
  g = sample();
  g.mutable_spec()->set_job("other-job.pretrain");
  diloco::sign_grant(&g, key);
  CHECK(diloco::verify_grant(g, key, now).code() == errc::invalid_argument);
  g = sample();
  g.set_stage_dir("jobs/x");
  diloco::sign_grant(&g, key);
  CHECK(diloco::verify_grant(g, key, now).code() == errc::invalid_argument);
}
