#include "services/ingest/verify.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/shards/check.hpp"
#include "services/ingest/importer/catalog.hpp"
#include "services/ingest/tasks.hpp"

#include <nlohmann/json.hpp>

#include <chrono>

namespace loom::ingest {
namespace {

// Where manifest.json and the catalogue disagree about a shard.
void compare(const shards::manifest& m, const std::vector<shard_row>& rows, std::vector<shards::shard_problem>& out) {
  for (std::size_t i = 0; i < std::max(m.shards.size(), rows.size()); ++i) {
    if (i >= m.shards.size()) {
      out.push_back({rows[i].name, "is in the catalogue but not in manifest.json"});
      continue;
    }
    const auto& s = m.shards[i];
    if (i >= rows.size() || rows[i].name != s.name)
      out.push_back({s.name, "is in manifest.json but not in the catalogue at position " + std::to_string(i + 1)});
    else if (rows[i].sha256 != s.sha256 || static_cast<std::uint64_t>(rows[i].bytes) != s.bytes)
      out.push_back({s.name, "has a manifest.json entry that disagrees with the catalogue (SHA-256 or size)"});
  }
}

}  // namespace

status verify_dataset(task_context& ctx, const std::string& datasets_root, const std::string& tenant,
                      const std::string& dataset) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = datasets_root + "/" + dataset;
  ctx.update([](task_info& i) { i.phase = "hash"; });
  std::vector<shards::shard_problem> problems;
  auto cat = ctx.open_catalog();
  if (!cat) return cat.err();
  std::string import_id;
  std::vector<shard_row> rows;
  if (*cat) {
    auto row = (*cat)->dataset(tenant, dataset);
    if (!row) return row.err();
    if (!*row) return make_error(errc::not_found, "no dataset " + dataset + " in the catalogue");
    import_id = (*row)->import_id;
    auto sh = (*cat)->shards(tenant, dataset);
    if (!sh) return sh.err();
    rows = std::move(*sh);
  }
  auto m = shards::read_manifest(dir);
  if (!m) problems.push_back({"manifest.json", m.code() == errc::not_found ? "is missing" : m.err().message});
  std::uint64_t hashed = 0;
  if (m) {
    if (*cat) compare(*m, rows, problems);
    std::vector<shards::shard_info> all = m->shards;
    for (auto& f : shards::media_as_files(*m)) all.push_back(std::move(f));
    for (const auto& s : all) {  // one at a time: progress between shards
      auto p = shards::check_shards(dir, {&s, 1}, shards::check_depth::full, ctx.stop);
      if (!p) return make_error(p.code(), "verify of dataset " + dataset + " stopped");
      problems.insert(problems.end(), p->begin(), p->end());
      hashed += s.bytes;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ctx.update([&](task_info& i) {
        ++i.shards;
        i.bytes_read = hashed;
        i.elapsed_s = secs;
        i.mb_per_s = secs > 0 ? hashed / secs / 1e6 : 0;
      });
    }
  }
  nlohmann::json found = nlohmann::json::array();
  for (const auto& p : problems) found.push_back({{"shard", p.shard}, {"what", p.what}});
  ctx.update([&](task_info& i) {
    i.phase = "done";
    i.report_json =
        nlohmann::json{{"dataset", dataset}, {"shards", i.shards}, {"bytes", hashed}, {"problems", found}}.dump();
  });
  const std::string damage = shards::describe(problems, 20);
  if (*cat) {
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         loom::wall_now().time_since_epoch()).count();
    if (auto st = (*cat)->record_verify(tenant, dataset, import_id, damage, now); !st) return st;
  }
  if (!problems.empty()) return make_error(errc::corruption, "dataset " + dataset + " is damaged: " + damage);
  return ok_status();
}

}  // namespace loom::ingest
