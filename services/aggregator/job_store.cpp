#include "services/aggregator/job_store.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/limits.hpp"
#include "services/aggregator/wire.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace loom::aggregator {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view magic_v1 = "LOOMAGG1", magic_v2 = "LOOMAGG2";

error bad(const std::string& path, const std::string& what) {
  return make_error(errc::corruption, "aggregation state " + path + ": " + what);
}

// The manifest's job-level fields (the sites' last rounds are in the fragments' files).
void header_to_wire(const saved_state& s, loom::v1::AggregationState& h) {
  to_wire(s.spec, h.mutable_spec());
  for (const auto& site : s.sites) {
    auto* w = h.add_sites();
    w->set_id(site.id);
    w->set_key_id(site.key_id);
    w->set_phase(static_cast<std::uint32_t>(site.phase));
    w->set_accepted(site.accepted);
  }
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
}

// The job-level fields both formats share (format 1's sites carry their last rounds).
status header_from_wire(const std::string& path, const loom::v1::AggregationState& h, saved_state& s) {
  auto spec = from_wire(h.spec());
  if (!spec) return bad(path, spec.err().message);
  s.spec = std::move(*spec);
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
  return ok_status();
}

// Format 1: the whole job in one file, tensors after the header.
result<saved_state> load_v1(const std::string& path, const loom::v1::AggregationState& h, std::string_view tensors) {
  const std::uint64_t n = h.params() + h.momentum() + h.residual();
  std::uint64_t held_bytes = 0;
  for (const auto& w : h.held()) held_bytes += w.payload_bytes();
  if (tensors.size() != n * sizeof(float) + held_bytes)
    return bad(path, "holds " + std::to_string(tensors.size()) + " tensor bytes, the header says " +
                         std::to_string(n * sizeof(float) + held_bytes));
  if (crypto::as_view(crypto::sha256(tensors)) != h.tensors_sha256()) return bad(path, "tensor SHA-256 mismatch");
  saved_state s;
  if (auto st = header_from_wire(path, h, s); !st) return st.err();
  auto plan = make_plan(s.spec);
  if (!plan) return bad(path, plan.err().message);
  if (h.params() != plan->total() || h.residual() != plan->total() ||
      h.momentum() != (s.spec.outer.momentum != 0 ? plan->total() : 0))
    return bad(path, "its tensor sizes are not the job's (" + std::to_string(plan->total()) + " values)");
  std::vector<float> all(n);  // aligned: the tensors start wherever the header ends
  if (n) std::memcpy(all.data(), tensors.data(), n * sizeof(float));
  auto at = [&](std::uint64_t skip) { return std::span<const float>(all).subspan(skip, plan->total()); };
  const auto params = at(0), residual = at(h.params() + h.momentum());
  for (std::size_t p = 0, off = 0; p < std::size_t(plan->fragments()); off += plan->size(int(p)), ++p) {
    fragment_values v;
    const int q = static_cast<int>(p);
    v.params.resize(plan->size(q));
    plan->gather(q, params, v.params);
    if (h.momentum()) {
      v.momentum.resize(plan->size(q));
      plan->gather(q, at(h.params()), v.momentum);
    }
    const auto e = residual.subspan(off, plan->size(q));
    v.residual.assign(e.begin(), e.end());
    s.theta_norms.push_back(l2_norm(v.params));
    s.values.push_back(std::move(v));
  }
  std::size_t off = n * sizeof(float);
  for (const auto& w : h.held()) {
    auto u = held_from(path, s.spec.job, w.fragment(), w.version(), w.round(), w.contributors(), w.codec(),
                       std::string(tensors.substr(off, w.payload_bytes())));
    if (!u) return u.err();
    off += w.payload_bytes();
    s.held.push_back(std::move(*u));
  }
  s.versions.assign(h.versions().begin(), h.versions().end());
  return s;
}

// Format 2: the manifest, then each fragment's file it names.
result<saved_state> load_v2(const std::string& path, const loom::v1::AggregationState& h, bool with_values) {
  saved_state s;
  if (auto st = header_from_wire(path, h, s); !st) return st.err();
  auto plan = make_plan(s.spec);
  if (!plan) return bad(path, plan.err().message);
  const auto frags = static_cast<std::uint32_t>(plan->fragments());
  if (static_cast<std::uint32_t>(h.files_size()) != frags)
    return bad(path, "names " + std::to_string(h.files_size()) + " fragment files; the job has " +
                         std::to_string(frags) + " fragments");
  for (std::uint32_t p = 0; p < frags; ++p) {
    const auto& w = h.files(static_cast<int>(p));
    // The exact name a save gives it: nothing outside the job's directory is read.
    if (w.fragment() != p || w.name() != fragment_name(p, w.version()))
      return bad(path, "entry " + std::to_string(p) + " names '" + w.name() + "' for fragment " +
                           std::to_string(w.fragment()));
    s.files.push_back({p, w.version(), w.name(), w.sha256(), w.bytes()});
    s.versions.push_back(w.version());
  }
  for (auto& site : s.sites) site.last_round.assign(frags, -1);  // each fragment's file says
  const std::string dir = fs::path(path).parent_path().string();
  for (const auto& f : s.files) {
    auto r = read_fragment(dir, f, *plan, s.spec.job, s.spec.outer.momentum != 0, {with_values, with_values});
    if (!r) return r.err();
    for (const auto& [id, round] : r->last_round)
      for (auto& site : s.sites)
        if (site.id == id) site.last_round[f.fragment] = round;
    if (r->held) s.held.push_back(std::move(*r->held));
    s.theta_norms.push_back(r->theta_norm);
    if (with_values) s.values.push_back(std::move(r->values));
  }
  return s;
}

}  // namespace

std::string state_path(const std::string& data_dir, const std::string& job) {
  return data_dir + "/aggregator/" + job + "/state.bin";
}

status save_manifest(const std::string& path, const saved_state& s) {
  loom::v1::AggregationState h;
  header_to_wire(s, h);
  for (const auto& f : s.files) {
    h.add_versions(f.version);
    auto* w = h.add_files();
    w->set_fragment(f.fragment);
    w->set_version(f.version);
    w->set_name(f.name);
    w->set_sha256(f.sha256);
    w->set_bytes(f.bytes);
  }
  if (!s.grant.empty() && !h.mutable_grant()->ParseFromString(s.grant))
    return make_error(errc::internal, "aggregation state " + path + ": the grant to save does not parse");
  const std::string header = h.SerializeAsString();
  std::string file(magic_v2);
  const std::uint64_t len = header.size();
  file.append(reinterpret_cast<const char*>(&len), sizeof len);  // little-endian hosts only (x86-64, arm64)
  file += header;
  if (auto r = files::make_dirs(fs::path(path).parent_path().string()); !r) return r;
  return files::write_atomic(path, file, 0600);
}

result<saved_state> load_state(const std::string& path, bool with_values) {
  auto bytes = files::read_file(path);
  if (!bytes) return bytes.err();
  const std::string& b = *bytes;
  const std::string_view head = std::string_view(b).substr(0, magic_v1.size());
  if (b.size() < magic_v1.size() + 8 || (head != magic_v1 && head != magic_v2))
    return bad(path, "does not start with " + std::string(magic_v2) + " (or " + std::string(magic_v1) + ")");
  std::uint64_t len = 0;
  std::memcpy(&len, b.data() + magic_v1.size(), sizeof len);
  const std::size_t at = magic_v1.size() + 8;
  if (len > b.size() - at) return bad(path, "header length " + std::to_string(len) + " runs past the file");
  loom::v1::AggregationState h;
  if (!h.ParseFromArray(b.data() + at, static_cast<int>(len))) return bad(path, "the header does not parse");
  if (head == magic_v1) return load_v1(path, h, std::string_view(b).substr(at + len));
  if (at + len != b.size()) return bad(path, "holds bytes after its header");
  return load_v2(path, h, with_values);
}

void remove_strays(const std::string& state_file, const std::vector<fragment_file>& keep) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(state_file).parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    const bool kept = std::any_of(keep.begin(), keep.end(), [&](const fragment_file& f) { return f.name == name; });
    if ((name.rfind("fragment-", 0) == 0 && !kept) || name.find(".tmp.") != std::string::npos)
      fs::remove(e.path(), ec);
  }
}

status run_save(save_task& t) {
  job_files& jf = *t.files;
  const std::string dir = fs::path(jf.state_file).parent_path().string();
  auto written = save_fragment(dir, t.fragment);
  if (!written) return written.err();
  const std::uint32_t p = t.fragment.fragment;
  if (jf.files.size() <= p) jf.files.resize(p + 1);
  const fragment_file replaced = jf.files[p];
  jf.files[p] = *written;  // the file is whole: any later manifest may name it
  t.header.files = jf.files;
  if (auto st = save_manifest(jf.state_file, t.header); !st) return st;
  if (!replaced.name.empty() && replaced.name != written->name) {
    std::error_code ec;
    fs::remove(dir + "/" + replaced.name, ec);  // left behind on failure: a stray, removed on reload
  }
  return ok_status();
}

std::string retired_path(const std::string& data_dir, const std::string& job) {
  return data_dir + "/aggregator/" + job + "/retired";
}

namespace {
// Job directories under <data>/aggregator holding `file`, sorted.
std::vector<std::string> jobs_with(const std::string& data_dir, const char* file) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(data_dir + "/aggregator", ec), end; !ec && it != end; it.increment(ec))
    if (valid_job_name(it->path().filename().string()) && fs::exists(it->path() / file, ec))
      out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

std::vector<std::string> saved_jobs(const std::string& data_dir) { return jobs_with(data_dir, "state.bin"); }
std::vector<std::string> retired_jobs(const std::string& data_dir) { return jobs_with(data_dir, "retired"); }

}  // namespace loom::aggregator
