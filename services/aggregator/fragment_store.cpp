#include "services/aggregator/fragment_store.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "loom/v1/aggregator.pb.h"

#include <cstring>

namespace loom::aggregator {
namespace {

constexpr std::string_view magic = "LOOMAGF2";

std::string_view chars(std::span<const float> v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

std::size_t total(const std::vector<std::span<const float>>& pieces) {
  std::size_t n = 0;
  for (auto s : pieces) n += s.size();
  return n;
}

}  // namespace

std::string fragment_name(std::uint32_t p, std::uint64_t version) {
  return "fragment-" + std::to_string(p) + "-v" + std::to_string(version) + ".bin";
}

result<fragment_file> save_fragment(const std::string& dir, const fragment_source& f) {
  loom::v1::AggregationFragment h;
  h.set_job(f.job);
  h.set_fragment(f.fragment);
  h.set_version(f.version);
  h.set_params(total(f.params));
  h.set_momentum(total(f.momentum));
  h.set_residual(f.residual.size());
  for (const auto& [site, round] : f.last_round) {
    auto* w = h.add_last_round();
    w->set_site(site);
    w->set_last_round(round);
  }
  if (f.held) {
    auto* w = h.mutable_held();
    w->set_fragment(f.held->header.fragment);
    w->set_version(f.held->header.version);
    w->set_round(f.held->header.round);
    w->set_contributors(f.held->header.contributors);
    w->set_codec(f.held->header.codec);
    w->set_payload_bytes(f.held->payload->size());
  }
  const std::string header = h.SerializeAsString();
  std::string head(magic);
  const std::uint64_t len = header.size();
  head.append(reinterpret_cast<const char*>(&len), sizeof len);  // little-endian hosts only (x86-64, arm64)
  head += header;

  std::vector<std::string_view> parts{head};
  for (auto s : f.params) parts.push_back(chars(s));
  for (auto s : f.momentum) parts.push_back(chars(s));
  parts.push_back(chars(f.residual));
  if (f.held) parts.push_back(*f.held->payload);
  crypto::sha256_stream sha;
  std::uint64_t bytes = 0;
  for (auto part : parts) {
    sha.update(part);
    bytes += part.size();
  }
  fragment_file out{f.fragment, f.version, fragment_name(f.fragment, f.version), "", bytes};
  out.sha256 = std::string(crypto::as_view(sha.finish()));
  if (auto st = files::write_atomic_parts(dir + "/" + out.name, parts, 0600); !st) return st.err();
  return out;
}

result<held_update> held_from(const std::string& where, const std::string& job, std::uint32_t fragment,
                              std::uint64_t version, std::uint64_t round, std::uint32_t contributors,
                              std::string codec, std::string payload) {
  auto shared = std::make_shared<const std::string>(std::move(payload));
  auto head = codec::inspect({reinterpret_cast<const std::byte*>(shared->data()), shared->size()});
  if (!head || version == 0)
    return make_error(errc::corruption, where + ": held update of fragment " + std::to_string(fragment) +
                                            " is not a payload");
  held_update u;
  u.header = {job, fragment, version, version - 1, update_kind::outer_update, std::move(codec), head->n,
              shared->size(), std::string(crypto::as_view(crypto::sha256(*shared))), round, contributors};
  u.payload = std::move(shared);
  return u;
}

status load_fragment(const std::string& dir, const fragment_file& entry, const diloco::fragment_plan& plan,
                     saved_state& s) {
  const std::string path = dir + "/" + entry.name;
  auto bad = [&](const std::string& what) {
    return make_error(errc::corruption, "aggregation " + s.spec.job + ": fragment file " + path + ": " + what);
  };
  auto bytes = files::read_file(path);
  if (!bytes)
    return bad(bytes.code() == errc::not_found ? "missing (the manifest names it)" : bytes.err().message);
  const std::string& b = *bytes;
  if (b.size() != entry.bytes)
    return bad("holds " + std::to_string(b.size()) + " bytes, the manifest says " + std::to_string(entry.bytes));
  if (crypto::as_view(crypto::sha256(b)) != entry.sha256) return bad("SHA-256 differs from the manifest's");
  if (b.size() < magic.size() + 8 || std::string_view(b).substr(0, magic.size()) != magic)
    return bad("does not start with " + std::string(magic));
  std::uint64_t len = 0;
  std::memcpy(&len, b.data() + magic.size(), sizeof len);
  const std::size_t at = magic.size() + 8;
  loom::v1::AggregationFragment h;
  if (len > b.size() - at || !h.ParseFromArray(b.data() + at, static_cast<int>(len)))
    return bad("the header does not parse");
  const std::uint32_t p = entry.fragment;
  if (h.job() != s.spec.job || h.fragment() != p || h.version() != entry.version)
    return bad("holds job " + h.job() + " fragment " + std::to_string(h.fragment()) + " version " +
               std::to_string(h.version()) + ", the manifest names fragment " + std::to_string(p) + " version " +
               std::to_string(entry.version));
  const std::uint64_t n = plan.size(static_cast<int>(p));
  const std::uint64_t m = s.momentum.empty() ? 0 : n;
  const std::uint64_t held = h.has_held() ? h.held().payload_bytes() : 0;
  if (h.params() != n || h.momentum() != m || h.residual() != n ||
      b.size() - at - len != (2 * n + m) * sizeof(float) + held)
    return bad("its sizes are not fragment " + std::to_string(p) + "'s (" + std::to_string(n) + " values" +
               (m ? ", with momentum" : ", no momentum") + ")");

  const char* src = b.data() + at + len;
  for (auto* full : {&s.params, &s.momentum}) {
    if (full->empty()) continue;
    for (const auto& r : plan.ranges(static_cast<int>(p))) {
      std::memcpy(full->data() + r.offset, src, r.count * sizeof(float));
      src += r.count * sizeof(float);
    }
  }
  std::size_t offset = 0;  // e_p's place among every fragment's residuals
  for (std::uint32_t q = 0; q < p; ++q) offset += plan.size(static_cast<int>(q));
  std::memcpy(s.residual.data() + offset, src, n * sizeof(float));
  src += n * sizeof(float);
  for (const auto& w : h.last_round())
    for (auto& site : s.sites)
      if (site.id == w.site()) site.last_round[p] = w.last_round();
  if (h.has_held()) {
    const auto& w = h.held();
    auto u = held_from(path, s.spec.job, p, w.version(), w.round(), w.contributors(), w.codec(),
                       std::string(src, held));
    if (!u) return u.err();
    s.held.push_back(std::move(*u));
  }
  return ok_status();
}

}  // namespace loom::aggregator
