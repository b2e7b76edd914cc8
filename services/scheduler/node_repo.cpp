#include "services/scheduler/node_repo.hpp"

#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"

namespace loom::scheduler {
namespace {
std::int64_t ns(time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
time_point from_ns(std::int64_t v) {
  return time_point(std::chrono::duration_cast<time_point::duration>(std::chrono::nanoseconds(v)));
}
}  // namespace

result<std::vector<node>> load_nodes(store::transaction& tx) {
  auto rows = tx.query(
      "SELECT id, service, zone, cpu_cores, gpus, memory_bytes, disk_bytes, gpu_model, endpoint, pid, version, "
      "registered_unix_ns, last_seen_unix_ns, draining FROM nodes ORDER BY id");
  if (!rows) return rows.err();
  std::vector<node> out;
  for (const auto& r : *rows) {
    auto t = [&](std::size_t i) { return r.get_text(i).ok() ? *r.get_text(i) : std::string(); };
    auto i = [&](std::size_t k) { return r.get_i64(k).ok() ? *r.get_i64(k) : 0; };
    node n;
    n.id = t(0);
    n.service = t(1);
    n.zone = t(2);
    n.resources = {static_cast<std::uint32_t>(i(3)), static_cast<std::uint32_t>(i(4)),
                   static_cast<std::uint64_t>(i(5)), static_cast<std::uint64_t>(i(6)), t(7)};
    n.endpoint = t(8);
    n.pid = static_cast<std::uint32_t>(i(9));
    n.version = t(10);
    n.registered = from_ns(i(11));
    n.last_seen = from_ns(i(12));
    n.draining = i(13) != 0;
    out.push_back(std::move(n));
  }
  return out;
}

status upsert_node(store::transaction& tx, const node& n) {
  auto r = tx.exec(
      "INSERT INTO nodes (id, service, zone, cpu_cores, gpus, memory_bytes, disk_bytes, gpu_model, endpoint, pid, "
      "version, registered_unix_ns, last_seen_unix_ns, draining) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) "
      "ON CONFLICT (id) DO UPDATE SET service = excluded.service, zone = excluded.zone, "
      "cpu_cores = excluded.cpu_cores, gpus = excluded.gpus, memory_bytes = excluded.memory_bytes, "
      "disk_bytes = excluded.disk_bytes, gpu_model = excluded.gpu_model, endpoint = excluded.endpoint, "
      "pid = excluded.pid, version = excluded.version, registered_unix_ns = excluded.registered_unix_ns, "
      "last_seen_unix_ns = excluded.last_seen_unix_ns, draining = excluded.draining, "
      "row_version = nodes.row_version + 1",
      {n.id, n.service, n.zone, std::int64_t{n.resources.cpu_cores}, std::int64_t{n.resources.gpus},
       static_cast<std::int64_t>(n.resources.memory_bytes), static_cast<std::int64_t>(n.resources.disk_bytes),
       n.resources.gpu_model, n.endpoint, std::int64_t{n.pid}, n.version, ns(n.registered), ns(n.last_seen),
       std::int64_t{n.draining ? 1 : 0}});
  if (!r) return r.err();
  return {};
}

status touch_nodes(store::transaction& tx, const std::vector<std::pair<std::string, time_point>>& seen) {
  for (const auto& [id, t] : seen) {
    auto r = tx.exec("UPDATE nodes SET last_seen_unix_ns = $1 WHERE id = $2", {ns(t), id});
    if (!r) return r.err();
  }
  return {};
}

status save_drained(store::transaction& tx, const std::string& id, bool drained) {
  const std::int64_t v = drained ? 1 : 0;
  auto b = tx.exec("UPDATE node_bindings SET drained = $1, row_version = row_version + 1 WHERE node_id = $2", {v, id});
  if (!b) return b.err();
  auto n = tx.exec("UPDATE nodes SET draining = $1, row_version = row_version + 1 WHERE id = $2", {v, id});
  if (!n) return n.err();
  if (*b == 0 && *n == 0) return make_error(errc::not_found, "no node " + id + " was ever registered");
  if (*b == 0) {  // a listed node that no key bound yet: its drain is kept all the same
    auto zone = tx.query("SELECT zone, registered_unix_ns FROM nodes WHERE id = $1", {id});
    if (!zone) return zone.err();
    if (zone->empty()) return make_error(errc::not_found, "no node " + id + " in the roster");
    const auto& row = zone->front();
    return save_binding(tx, id, node_binding{"", row.get_text(0).ok() ? *row.get_text(0) : std::string(), drained,
                                             from_ns(row.get_i64(1).ok() ? *row.get_i64(1) : 0)});
  }
  return {};
}

status delete_node(store::transaction& tx, const std::string& id) {
  auto r = tx.exec("DELETE FROM nodes WHERE id = $1", {id});
  if (!r) return r.err();
  return {};
}

const store::migration& node_bindings_migration() {
  static const store::migration m{
      .owner = "scheduler",
      .version = 10,
      .description = "node_bindings: each node id's CURVE key, zone and drain, kept when the roster forgets it",
      .sql = R"sql(
CREATE TABLE node_bindings (
  node_id TEXT NOT NULL PRIMARY KEY,
  peer TEXT NOT NULL DEFAULT '',
  zone TEXT NOT NULL,
  drained BIGINT NOT NULL DEFAULT 0 CHECK (drained IN (0, 1)),
  bound_unix_ns BIGINT NOT NULL,
  row_version BIGINT NOT NULL DEFAULT 1
);
INSERT INTO node_bindings (node_id, peer, zone, drained, bound_unix_ns)
  SELECT id, '', zone, draining, registered_unix_ns FROM nodes;
)sql"};
  return m;
}

result<std::vector<std::pair<std::string, node_binding>>> load_bindings(store::transaction& tx) {
  auto rows = tx.query("SELECT node_id, peer, zone, drained, bound_unix_ns FROM node_bindings ORDER BY node_id");
  if (!rows) return rows.err();
  std::vector<std::pair<std::string, node_binding>> out;
  for (const auto& r : *rows) {
    auto t = [&](std::size_t i) { return r.get_text(i).ok() ? *r.get_text(i) : std::string(); };
    auto i = [&](std::size_t k) { return r.get_i64(k).ok() ? *r.get_i64(k) : 0; };
    out.emplace_back(t(0), node_binding{t(1), t(2), i(3) != 0, from_ns(i(4))});
  }
  return out;
}

status save_binding(store::transaction& tx, const std::string& id, const node_binding& b) {
  auto r = tx.exec(
      "INSERT INTO node_bindings (node_id, peer, zone, drained, bound_unix_ns) VALUES ($1, $2, $3, $4, $5) "
      "ON CONFLICT (node_id) DO UPDATE SET peer = excluded.peer, zone = excluded.zone, drained = excluded.drained, "
      "bound_unix_ns = excluded.bound_unix_ns, row_version = node_bindings.row_version + 1",
      {id, b.peer, b.zone, std::int64_t{b.drained ? 1 : 0}, ns(b.bound)});
  if (!r) return r.err();
  return {};
}

}  // namespace loom::scheduler
