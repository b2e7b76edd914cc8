#include "services/scheduler/sites/site_store.hpp"

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

constexpr const char* site_columns =
    "SELECT name, state, created_unix_ns, enrolled_unix_ns, revoked_unix_ns, last_contact_unix_ns, revoke_reason, "
    "link_json, datasets_json FROM sites";

site_rec site_of(const store::row& r) {
  auto t = [&](std::size_t i) { return r.get_text(i).ok() ? *r.get_text(i) : std::string(); };
  auto i = [&](std::size_t k) { return r.get_i64(k).ok() ? *r.get_i64(k) : 0; };
  return site_rec{t(0), t(1), {}, from_ns(i(2)), from_ns(i(3)), from_ns(i(4)), from_ns(i(5)), t(6), t(7), t(8)};
}

status keys_into(store::transaction& tx, std::vector<site_rec>& sites) {
  auto rows = tx.query("SELECT site, service, public_key FROM site_keys ORDER BY site, service");
  if (!rows) return rows.err();
  for (const auto& r : *rows)
    for (auto& s : sites)
      if (s.name == *r.get_text(0)) s.keys[*r.get_text(1)] = *r.get_text(2);
  return {};
}

status one_row(result<std::int64_t> r, const std::string& site) {
  if (!r) return r.err();
  if (*r == 0) return make_error(errc::not_found, "no site " + site);
  return {};
}
}  // namespace

const store::migration& sites_migration() {
  // Times are unix nanoseconds (0 = not yet). A revoked site keeps its keys
  // (so another site cannot take them over) but they leave the allow-list.
  static const store::migration m{
      .owner = "scheduler",
      .version = 5,
      .description = "sites, site_keys, site_tokens: edge sites enrolled with one-time tokens",
      .sql = R"sql(
CREATE TABLE sites (
  name TEXT NOT NULL PRIMARY KEY,
  state TEXT NOT NULL CHECK (state IN ('pending', 'enrolled', 'revoked')),
  created_unix_ns BIGINT NOT NULL,
  enrolled_unix_ns BIGINT NOT NULL DEFAULT 0,
  revoked_unix_ns BIGINT NOT NULL DEFAULT 0,
  last_contact_unix_ns BIGINT NOT NULL DEFAULT 0,
  revoke_reason TEXT NOT NULL DEFAULT '',
  row_version BIGINT NOT NULL DEFAULT 1
);
CREATE TABLE site_keys (
  public_key TEXT NOT NULL PRIMARY KEY,
  site TEXT NOT NULL REFERENCES sites (name),
  service TEXT NOT NULL,
  UNIQUE (site, service)
);
CREATE TABLE site_tokens (
  token_sha256 TEXT NOT NULL PRIMARY KEY,
  site TEXT NOT NULL REFERENCES sites (name),
  issued_by TEXT NOT NULL DEFAULT '',
  issued_unix_ns BIGINT NOT NULL,
  expires_unix_ns BIGINT NOT NULL,
  used_unix_ns BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX site_tokens_by_site ON site_tokens (site);
)sql"};
  return m;
}

const store::migration& site_reports_migration() {
  static const store::migration m{
      .owner = "scheduler",
      .version = 9,
      .description = "sites.link_json, sites.datasets_json: link state and datasets reported by edge sites",
      .sql = R"sql(
ALTER TABLE sites ADD COLUMN link_json TEXT NOT NULL DEFAULT '';
ALTER TABLE sites ADD COLUMN datasets_json TEXT NOT NULL DEFAULT '';
)sql"};
  return m;
}

status save_site_report(store::transaction& tx, const std::string& site, const std::string& link_json,
                        const std::string& datasets_json, time_point now) {
  auto r = datasets_json.empty()
               ? tx.exec("UPDATE sites SET link_json = $1, last_contact_unix_ns = $2 WHERE name = $3",
                         {link_json, ns(now), site})
               : tx.exec("UPDATE sites SET link_json = $1, datasets_json = $2, last_contact_unix_ns = $3 "
                         "WHERE name = $4",
                         {link_json, datasets_json, ns(now), site});
  return one_row(std::move(r), site);
}

result<std::vector<site_rec>> load_sites(store::transaction& tx) {
  auto rows = tx.query(std::string(site_columns) + " ORDER BY name");
  if (!rows) return rows.err();
  std::vector<site_rec> out;
  for (const auto& r : *rows) out.push_back(site_of(r));
  if (auto st = keys_into(tx, out); !st) return st.err();
  return out;
}

result<std::optional<site_rec>> find_site(store::transaction& tx, const std::string& name) {
  auto rows = tx.query(std::string(site_columns) + " WHERE name = $1", {name});
  if (!rows) return rows.err();
  if (rows->empty()) return std::optional<site_rec>{};
  std::vector<site_rec> one{site_of(rows->front())};
  if (auto st = keys_into(tx, one); !st) return st.err();
  return std::optional<site_rec>{std::move(one.front())};
}

status ensure_site(store::transaction& tx, const std::string& name, time_point now) {
  auto r = tx.exec("INSERT INTO sites (name, state, created_unix_ns) VALUES ($1, 'pending', $2) "
                   "ON CONFLICT (name) DO NOTHING",
                   {name, ns(now)});
  if (!r) return r.err();
  return {};
}

status insert_site_token(store::transaction& tx, const std::string& token_sha256, const std::string& site,
                         const std::string& issued_by, time_point issued, time_point expires) {
  auto r = tx.exec("INSERT INTO site_tokens (token_sha256, site, issued_by, issued_unix_ns, expires_unix_ns) "
                   "VALUES ($1, $2, $3, $4, $5)",
                   {token_sha256, site, issued_by, ns(issued), ns(expires)});
  if (!r) return r.err();
  return {};
}

result<std::optional<site_token_rec>> find_site_token(store::transaction& tx, const std::string& token_sha256) {
  auto rows = tx.query("SELECT site, issued_unix_ns, expires_unix_ns, used_unix_ns FROM site_tokens "
                       "WHERE token_sha256 = $1",
                       {token_sha256});
  if (!rows) return rows.err();
  if (rows->empty()) return std::optional<site_token_rec>{};
  const auto& r = rows->front();
  return std::optional<site_token_rec>{
      site_token_rec{*r.get_text(0), from_ns(*r.get_i64(1)), from_ns(*r.get_i64(2)), *r.get_i64(3) != 0}};
}

result<bool> use_site_token(store::transaction& tx, const std::string& token_sha256, time_point now) {
  auto r = tx.exec("UPDATE site_tokens SET used_unix_ns = $1 WHERE token_sha256 = $2 AND used_unix_ns = 0",
                   {ns(now), token_sha256});
  if (!r) return r.err();
  return *r == 1;
}

status replace_site_keys(store::transaction& tx, const std::string& site,
                         const std::map<std::string, std::string>& keys) {
  if (auto r = tx.exec("DELETE FROM site_keys WHERE site = $1", {site}); !r) return r.err();
  for (const auto& [service, key] : keys) {
    auto owner = tx.query("SELECT site FROM site_keys WHERE public_key = $1", {key});
    if (!owner) return owner.err();
    if (!owner->empty())
      return make_error(errc::already_exists, "the key of service " + service + " is already enrolled by site " +
                                                  *owner->front().get_text(0));
    auto r = tx.exec("INSERT INTO site_keys (public_key, site, service) VALUES ($1, $2, $3)", {key, site, service});
    if (!r) return r.err();
  }
  return {};
}

status mark_site_enrolled(store::transaction& tx, const std::string& site, time_point now) {
  return one_row(tx.exec("UPDATE sites SET state = 'enrolled', enrolled_unix_ns = $1, last_contact_unix_ns = $1, "
                         "row_version = row_version + 1 WHERE name = $2",
                         {ns(now), site}),
                 site);
}

status mark_site_revoked(store::transaction& tx, const std::string& site, const std::string& reason, time_point now) {
  return one_row(tx.exec("UPDATE sites SET state = 'revoked', revoked_unix_ns = $1, revoke_reason = $2, "
                         "row_version = row_version + 1 WHERE name = $3",
                         {ns(now), reason, site}),
                 site);
}

}  // namespace loom::scheduler
