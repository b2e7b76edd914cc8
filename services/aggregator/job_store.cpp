#include "services/aggregator/job_store.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/wire.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace loom::aggregator {
namespace {

constexpr std::string_view magic = "LOOMAGG1";

void put_floats(std::string& out, const std::vector<float>& v) {
  const auto at = out.size();
  out.resize(at + v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(out.data() + at, v.data(), v.size() * sizeof(float));
}

error bad(const std::string& path, const std::string& what) {
  return make_error(errc::corruption, "aggregation state " + path + ": " + what);
}

}  // namespace

std::string state_path(const std::string& data_dir, const std::string& job) {
  return data_dir + "/aggregator/" + job + "/state.bin";
}

status save_state(const std::string& path, const saved_state& s) {
  loom::v1::AggregationState h;
  to_wire(s.spec, h.mutable_spec());
  for (auto v : s.versions) h.add_versions(v);
  for (const auto& site : s.sites) {
    auto* w = h.add_sites();
    w->set_id(site.id);
    w->set_key_id(site.key_id);
    w->set_phase(static_cast<std::uint32_t>(site.phase));
    w->set_accepted(site.accepted);
    for (auto r : site.last_round) w->add_last_round(r);
  }
  h.set_params(s.params.size());
  h.set_momentum(s.momentum.size());
  h.set_residual(s.residual.size());
  std::string tensors;
  tensors.reserve((s.params.size() + s.momentum.size() + s.residual.size()) * sizeof(float));
  put_floats(tensors, s.params);
  put_floats(tensors, s.momentum);
  put_floats(tensors, s.residual);
  for (const auto& held : s.held) {
    auto* w = h.add_held();
    w->set_fragment(held.header.fragment);
    w->set_version(held.header.version);
    w->set_round(held.header.round);
    w->set_contributors(held.header.contributors);
    w->set_codec(held.header.codec);
    w->set_payload_bytes(held.payload->size());
    tensors += *held.payload;
  }
  h.set_tensors_sha256(std::string(crypto::as_view(crypto::sha256(tensors))));
  h.set_restarts(s.restarts);
  const auto& st = s.stats;
  h.set_rounds_closed(st.rounds_closed);
  h.set_closed_by_quorum(st.closed_by_quorum);
  h.set_closed_by_deadline(st.closed_by_deadline);
  h.set_last_quorum_size(static_cast<std::uint32_t>(st.last_quorum_size));
  h.set_arrivals(st.arrivals);
  h.set_late_folded(st.late_folded);
  for (auto r : st.rejected) h.add_rejected(r);
  h.set_max_outer_step_s(st.max_outer_step_s);
  h.set_total_outer_step_s(st.total_outer_step_s);
  if (!s.grant.empty() && !h.mutable_grant()->ParseFromString(s.grant))
    return make_error(errc::internal, "aggregation state " + path + ": the grant to save does not parse");

  const std::string header = h.SerializeAsString();
  std::string file(magic);
  const std::uint64_t len = header.size();
  file.append(reinterpret_cast<const char*>(&len), sizeof len);  // little-endian hosts only (x86-64, arm64)
  file += header;
  file += tensors;
  if (auto r = files::make_dirs(std::filesystem::path(path).parent_path().string()); !r) return r;
  return files::write_atomic(path, file, 0600);
}

result<saved_state> load_state(const std::string& path) {
  auto bytes = files::read_file(path);
  if (!bytes) return bytes.err();
  const std::string& b = *bytes;
  if (b.size() < magic.size() + 8 || std::string_view(b).substr(0, magic.size()) != magic)
    return bad(path, "does not start with " + std::string(magic));
  std::uint64_t len = 0;
  std::memcpy(&len, b.data() + magic.size(), sizeof len);
  const std::size_t at = magic.size() + 8;
  if (len > b.size() - at) return bad(path, "header length " + std::to_string(len) + " runs past the file");
  loom::v1::AggregationState h;
  if (!h.ParseFromArray(b.data() + at, static_cast<int>(len))) return bad(path, "the header does not parse");
  const std::uint64_t n = h.params() + h.momentum() + h.residual();
  std::uint64_t held_bytes = 0;
  for (const auto& w : h.held()) held_bytes += w.payload_bytes();
  const std::string_view tensors = std::string_view(b).substr(at + len);
  if (tensors.size() != n * sizeof(float) + held_bytes)
    return bad(path, "holds " + std::to_string(tensors.size()) + " tensor bytes, the header says " +
                         std::to_string(n * sizeof(float) + held_bytes));
  if (crypto::as_view(crypto::sha256(tensors)) != h.tensors_sha256()) return bad(path, "tensor SHA-256 mismatch");
  auto spec = from_wire(h.spec());
  if (!spec) return bad(path, spec.err().message);
  saved_state s;
  s.spec = std::move(*spec);
  auto take = [&, off = std::size_t{0}](std::uint64_t count) mutable {
    std::vector<float> v(count);
    if (count) std::memcpy(v.data(), tensors.data() + off, count * sizeof(float));
    off += count * sizeof(float);
    return v;
  };
  s.params = take(h.params());
  s.momentum = take(h.momentum());
  s.residual = take(h.residual());
  std::size_t off = n * sizeof(float);
  for (const auto& w : h.held()) {
    held_update u;
    auto payload = std::make_shared<const std::string>(tensors.substr(off, w.payload_bytes()));
    off += w.payload_bytes();
    u.header = {s.spec.job, w.fragment(), w.version(), w.version() - 1, update_kind::outer_update, w.codec(),
                0, payload->size(), std::string(crypto::as_view(crypto::sha256(*payload))), w.round(),
                w.contributors()};
    auto head = codec::inspect({reinterpret_cast<const std::byte*>(payload->data()), payload->size()});
    if (!head || w.version() == 0) return bad(path, "held update of fragment " + std::to_string(w.fragment()) + " is not a payload");
    u.header.elements = head->n;
    u.payload = std::move(payload);
    s.held.push_back(std::move(u));
  }
  s.versions.assign(h.versions().begin(), h.versions().end());
  for (const auto& w : h.sites()) {
    if (w.phase() > static_cast<std::uint32_t>(site_phase::revoked)) return bad(path, "site " + w.id() + ": bad phase");
    s.sites.push_back({w.id(), w.key_id(), static_cast<site_phase>(w.phase()), w.accepted(),
                       {w.last_round().begin(), w.last_round().end()}});
  }
  auto& st = s.stats;
  st.rounds_closed = h.rounds_closed();
  st.closed_by_quorum = h.closed_by_quorum();
  st.closed_by_deadline = h.closed_by_deadline();
  st.last_quorum_size = static_cast<int>(h.last_quorum_size());
  st.arrivals = h.arrivals();
  st.late_folded = h.late_folded();
  for (int r = 0; r < std::min(reject_reason_count, h.rejected_size()); ++r) st.rejected[r] = h.rejected(r);
  st.max_outer_step_s = h.max_outer_step_s();
  st.total_outer_step_s = h.total_outer_step_s();
  s.restarts = h.restarts();
  if (h.has_grant()) s.grant = h.grant().SerializeAsString();
  return s;
}

std::string retired_path(const std::string& data_dir, const std::string& job) {
  return data_dir + "/aggregator/" + job + "/retired";
}

namespace {
// Job directories under <data>/aggregator holding `file`, sorted.
std::vector<std::string> jobs_with(const std::string& data_dir, const char* file) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(data_dir + "/aggregator", ec), end; !ec && it != end; it.increment(ec))
    if (valid_job_name(it->path().filename().string()) && std::filesystem::exists(it->path() / file, ec))
      out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

std::vector<std::string> saved_jobs(const std::string& data_dir) { return jobs_with(data_dir, "state.bin"); }
std::vector<std::string> retired_jobs(const std::string& data_dir) { return jobs_with(data_dir, "retired"); }

}  // namespace loom::aggregator
