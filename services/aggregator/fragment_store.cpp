#include "services/aggregator/fragment_store.hpp"

#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/object.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/status/unix_time.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/limits.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

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
  h.set_theta_norm(f.theta_norm);
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
  const std::string path = dir + "/" + out.name;
  if (auto keys = atrest::sealing_keys()) {  // θ_p is the global model: sealed at rest as a checkpoint is
    auto w = atrest::sealed_writer::create(path, *keys, loom::wall_now(), 0600);
    if (!w) return w.err();
    for (auto part : parts)
      if (auto st = (*w)->append(part); !st) return st.err();
    if (auto done = (*w)->finish(); !done) return done.err();
  } else if (auto st = files::write_atomic_parts(path, parts, 0600); !st) {
    return st.err();
  }
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

result<fragment_read> read_fragment(const std::string& dir, const fragment_file& entry,
                                    const diloco::fragment_plan& plan, const std::string& job, bool momentum,
                                    fragment_want want, fragment_values reuse) {
  const std::string path = dir + "/" + entry.name;
  std::string unsealed_error;  // a sealed chunk that failed: the first thing wrong, whatever the read was for
  auto bad = [&](const std::string& what) {
    return make_error(errc::corruption, "aggregation " + job + ": fragment file " + path + ": " +
                                            (unsealed_error.empty() ? what : unsealed_error));
  };
  // Plain, or sealed at rest (read through its keys one verified chunk at a
  // time: the plaintext is what the manifest's size and SHA-256 describe).
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return bad(errno == ENOENT ? "missing (the manifest names it)" : std::strerror(errno));
  std::unique_ptr<atrest::sealed_reader> sealed;
  std::uint64_t size = 0;
  if (atrest::is_sealed_file(path)) {
    auto keys = atrest::process_keys();
    if (!keys) return bad("sealed at rest, and this process has no keys at rest");
    auto r = atrest::sealed_reader::open(path, *keys);
    if (!r) return bad(r.err().message);
    sealed = std::move(*r);
    size = sealed->size();
  } else {
    struct stat st{};
    if (::fstat(::fileno(f.get()), &st) != 0) return bad(std::strerror(errno));
    size = static_cast<std::uint64_t>(st.st_size);
  }
  if (size != entry.bytes)
    return bad("holds " + std::to_string(size) + " bytes, the manifest says " + std::to_string(entry.bytes));
  crypto::sha256_stream sha;
  std::uint64_t left = size;
  std::vector<char> scratch;
  auto read_n = [&](char* to, std::uint64_t n) -> bool {
    if (!sealed) return std::fread(to, 1, n, f.get()) == n;
    while (n > 0) {
      auto got = sealed->read(to, n);
      if (!got) {
        unsealed_error = got.err().message;
        return false;
      }
      if (*got == 0) return false;
      to += *got;
      n -= *got;
    }
    return true;
  };
  // Reads `bytes` into dst (scratch when null: hashed, then dropped).
  auto take = [&](char* dst, std::uint64_t bytes) -> bool {
    if (bytes > left) return false;
    constexpr std::uint64_t chunk = 8u << 20;
    while (bytes > 0) {
      const std::uint64_t n = std::min(bytes, chunk);
      char* to = dst;
      if (!to) {
        scratch.resize(n);
        to = scratch.data();
      }
      if (!read_n(to, n)) return false;
      sha.update(std::string_view(to, n));
      if (dst) dst += n;
      bytes -= n;
      left -= n;
    }
    return true;
  };
  char head[magic.size() + 8];
  if (!take(head, sizeof head) || std::string_view(head, magic.size()) != magic)
    return bad("does not start with " + std::string(magic));
  std::uint64_t len = 0;
  std::memcpy(&len, head + magic.size(), sizeof len);
  std::string header(len <= left ? len : 0, '\0');
  loom::v1::AggregationFragment h;
  if (len > left || !take(header.data(), len) || !h.ParseFromString(header)) return bad("the header does not parse");
  const std::uint32_t p = entry.fragment;
  if (h.job() != job || h.fragment() != p || h.version() != entry.version)
    return bad("holds job " + h.job() + " fragment " + std::to_string(h.fragment()) + " version " +
               std::to_string(h.version()) + ", the manifest names fragment " + std::to_string(p) + " version " +
               std::to_string(entry.version));
  const std::uint64_t n = plan.size(static_cast<int>(p));
  const std::uint64_t m = momentum ? n : 0;
  const std::uint64_t held = h.has_held() ? h.held().payload_bytes() : 0;
  if (h.params() != n || h.momentum() != m || h.residual() != n || left != (2 * n + m) * sizeof(float) + held)
    return bad("its sizes are not fragment " + std::to_string(p) + "'s (" + std::to_string(n) + " values" +
               (m ? ", with momentum" : ", no momentum") + ")");

  fragment_read out;
  if (want.values) out.values = std::move(reuse);
  auto tensor = [&](std::vector<float>& v, std::uint64_t count) {
    if (!want.values) return take(nullptr, count * sizeof(float));
    v.resize(count);
    return take(reinterpret_cast<char*>(v.data()), count * sizeof(float));
  };
  std::string payload;
  const bool keep_held = want.values || want.held;
  if (keep_held) payload.resize(held);
  if (!tensor(out.values.params, n) || !tensor(out.values.momentum, m) || !tensor(out.values.residual, n) ||
      !take(keep_held ? payload.data() : nullptr, held))
    return bad("ends early");
  if (crypto::as_view(sha.finish()) != entry.sha256) return bad("SHA-256 differs from the manifest's");
  out.theta_norm = h.has_theta_norm() ? h.theta_norm() : std::numeric_limits<double>::quiet_NaN();
  if (want.values) out.theta_norm = l2_norm(out.values.params);
  for (const auto& w : h.last_round()) out.last_round.emplace_back(w.site(), w.last_round());
  if (h.has_held()) {
    const auto& w = h.held();
    if (keep_held) {
      auto u = held_from(path, job, p, w.version(), w.round(), w.contributors(), w.codec(), std::move(payload));
      if (!u) return u.err();
      out.held = std::move(*u);
    } else {  // what a pull answers with is read with the payload, when it is wanted
      held_update u;
      u.header.job = job;
      u.header.fragment = p;
      u.header.version = w.version();
      out.held = std::move(u);
    }
  }
  return out;
}

}  // namespace loom::aggregator
