#include "libs/diloco/grant/grant.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/diloco/grant/stage_spec.hpp"
#include "loom/v1/aggregator.pb.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <cstring>

namespace loom::diloco {
namespace {

namespace pb = google::protobuf;

// Domain separation: these bytes are MACed with the token key, which also
// signs bearer tokens ("lt1." ...); a grant's bytes can never read as one.
constexpr std::string_view grant_domain = "loom.aggregation_grant.v1\n";

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_bytes(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

void encode(const pb::Message& m, std::string& out, const pb::FieldDescriptor* skip);

// One value of field f (index k of a repeated field, -1 for a singular one).
void encode_value(const pb::Message& m, const pb::FieldDescriptor* f, int k, std::string& out) {
  const pb::Reflection* r = m.GetReflection();
  const bool rep = k >= 0;
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      put_u64(out, static_cast<std::uint64_t>(static_cast<std::int64_t>(rep ? r->GetRepeatedInt32(m, f, k) : r->GetInt32(m, f))));
      break;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      put_u64(out, static_cast<std::uint64_t>(rep ? r->GetRepeatedInt64(m, f, k) : r->GetInt64(m, f)));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      put_u64(out, rep ? r->GetRepeatedUInt32(m, f, k) : r->GetUInt32(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      put_u64(out, rep ? r->GetRepeatedUInt64(m, f, k) : r->GetUInt64(m, f));
      break;
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      put_u64(out, static_cast<std::uint64_t>(static_cast<std::int64_t>(rep ? r->GetRepeatedEnumValue(m, f, k)
                                                                                : r->GetEnumValue(m, f))));
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      out.push_back((rep ? r->GetRepeatedBool(m, f, k) : r->GetBool(m, f)) ? 1 : 0);
      break;
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      const float x = rep ? r->GetRepeatedFloat(m, f, k) : r->GetFloat(m, f);
      std::uint32_t bits = 0;
      std::memcpy(&bits, &x, 4);
      put_u64(out, bits);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
      const double x = rep ? r->GetRepeatedDouble(m, f, k) : r->GetDouble(m, f);
      std::uint64_t bits = 0;
      std::memcpy(&bits, &x, 8);
      put_u64(out, bits);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      put_bytes(out, rep ? r->GetRepeatedStringReference(m, f, k, &scratch) : r->GetStringReference(m, f, &scratch));
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      if (rep) {
        encode(r->GetRepeatedMessage(m, f, k), out, nullptr);
      } else {
        const bool present = r->HasField(m, f);
        out.push_back(present ? 1 : 0);
        if (present) encode(r->GetMessage(m, f), out, nullptr);
      }
      break;
  }
}

// Every field of m's type (not only those set), by number: number, type,
// then the value or, for a repeated field, the count and each value.
void encode(const pb::Message& m, std::string& out, const pb::FieldDescriptor* skip) {
  const pb::Descriptor* d = m.GetDescriptor();
  std::vector<const pb::FieldDescriptor*> fields;
  for (int i = 0; i < d->field_count(); ++i) fields.push_back(d->field(i));
  std::sort(fields.begin(), fields.end(), [](auto* a, auto* b) { return a->number() < b->number(); });
  put_bytes(out, d->full_name());
  for (const auto* f : fields) {
    if (f == skip) continue;
    put_u64(out, static_cast<std::uint64_t>(f->number()));
    put_u64(out, static_cast<std::uint64_t>(f->type()));
    if (f->is_repeated()) {
      const int n = m.GetReflection()->FieldSize(m, f);
      put_u64(out, static_cast<std::uint64_t>(n));
      for (int k = 0; k < n; ++k) encode_value(m, f, k, out);
    } else {
      encode_value(m, f, -1, out);
    }
  }
}

error denied(std::string why) { return make_error(errc::permission_denied, "aggregation grant: " + std::move(why)); }
error malformed(std::string why) { return make_error(errc::invalid_argument, "aggregation grant: " + std::move(why)); }

}  // namespace

bool grant_terms::granted(std::string_view site) const {
  return std::find(sites.begin(), sites.end(), site) != sites.end();
}

std::string grant_canonical(const loom::v1::AggregationGrant& g) {
  std::string out(grant_domain);
  encode(g, out, loom::v1::AggregationGrant::descriptor()->FindFieldByName("mac"));
  return out;
}

void sign_grant(loom::v1::AggregationGrant* g, std::string_view key) {
  g->set_mac(std::string(crypto::as_view(crypto::hmac_sha256(key, grant_canonical(*g)))));
}

result<grant_terms> verify_grant_mac(const loom::v1::AggregationGrant& g, std::string_view key) {
  if (g.mac().empty()) return denied("none given (an aggregation exists only for a stage the scheduler placed)");
  if (key.empty()) return denied("this service holds no token key to verify it with");
  const auto want = crypto::hmac_sha256(key, grant_canonical(g));
  if (!crypto::constant_time_equal(crypto::as_view(want), g.mac()))
    return denied("its MAC does not verify (not minted with this deployment's token key, or altered)");
  // Signed, so the scheduler made it; a malformed one is a bug there.
  if (g.job().empty() || g.stage().empty()) return malformed("names no job or stage");
  if (g.stage_dir().empty() || g.stage_dir().front() != '/')
    return malformed("stage_dir '" + g.stage_dir() + "' is not an absolute path");
  if (g.sites().empty() || g.sites_size() > 64) return malformed("must name 1 to 64 sites");
  if (!g.has_spec()) return malformed("has no spec");
  if (g.spec().job() != aggregation_name(g.job(), g.stage()))
    return malformed("spec.job '" + g.spec().job() + "' is not the aggregation of " + g.job() + "/" + g.stage());
  grant_terms t{g.job(), g.stage(), g.tenant(), g.stage_dir(), {g.sites().begin(), g.sites().end()}, g.edge_sites(),
                g.expires_unix()};
  for (std::size_t r = 0; r < t.sites.size(); ++r) {
    if (t.sites[r].empty()) return malformed("site " + std::to_string(r) + " has no name");
    if (!t.edge_sites && t.sites[r] != "site-" + std::to_string(r))
      return malformed("this deployment's site " + std::to_string(r) + " must be site-" + std::to_string(r) +
                       ", got '" + t.sites[r] + "'");
  }
  return t;
}

result<grant_terms> verify_grant(const loom::v1::AggregationGrant& g, std::string_view key, std::int64_t now_unix) {
  auto t = verify_grant_mac(g, key);
  if (!t) return t;
  if (now_unix >= t->expires_unix)
    return denied("the grant of " + t->job + "/" + t->stage + " expired " + std::to_string(now_unix - t->expires_unix) +
                  " s ago (at unix " + std::to_string(t->expires_unix) + ")");
  return t;
}

}  // namespace loom::diloco
