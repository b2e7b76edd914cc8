#include "services/ingest/tasks.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/audit/record.hpp"
#include "libs/files/confine.hpp"
#include "libs/layout/dataset_dirs.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "services/ingest/importer/catalog.hpp"
#include "services/ingest/importer/importer.hpp"
#include "services/ingest/importer/staging.hpp"
#include "services/ingest/verify.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

namespace loom::ingest {
namespace {

std::uint64_t unix_ns_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        loom::wall_now().time_since_epoch())
                                        .count());
}

// The id prefix of a task kind: imp-000001, pull-000001, ver-000001.
std::string id_prefix(const std::string& kind) {
  return kind == "import" ? "imp" : kind == "verify" ? "ver" : kind;
}

bool terminal(const std::string& state) { return state == "succeeded" || state == "failed" || state == "cancelled"; }

// Every datasets root under `root`: the default tenant's (root itself) and
// each other tenant's (<root>/.tenant-*).
std::vector<std::string> all_tenant_roots(const std::string& root) {
  std::vector<std::string> out{root};
  std::error_code ec;
  for (std::filesystem::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().starts_with(layout::tenant_dir_prefix) && it->is_directory(ec))
      out.push_back(it->path().string());
  return out;
}

// The catalogue on the runner thread: opened on first use, migrated by the
// service at start-up (migrate again is a no-op and covers tests).
class catalog_conn {
 public:
  explicit catalog_conn(std::string url) : url_(std::move(url)) {}
  result<catalog*> get() {
    if (url_.empty()) return static_cast<catalog*>(nullptr);
    if (!cat_) {
      auto db = store::database::open(url_);
      if (!db) return db.err();
      if (auto st = store::migrate(**db, ingest_migrations()); !st) return st.err();
      db_ = std::move(*db);
      cat_ = std::make_unique<catalog>(*db_);
    }
    return cat_.get();
  }

 private:
  std::string url_;
  std::unique_ptr<store::database> db_;
  std::unique_ptr<catalog> cat_;
};

}  // namespace

task_runner::task_runner(task_runner_options o)
    : opt_(std::move(o)), ids_(opt_.state_dir.empty() ? "" : opt_.state_dir + "/task-ids.json") {
  if (!ids_.warning().empty()) std::fprintf(stderr, "loom-ingest: %s\n", ids_.warning().c_str());
  // Nothing runs yet in this process; an import of another process (the
  // command-line tool) holds its name's lock and keeps its entries.
  if (!opt_.datasets_root.empty())
    for (const auto& root : all_tenant_roots(opt_.datasets_root)) {
      auto removed = clean_stale(root);
      if (!removed)
        std::fprintf(stderr, "loom-ingest: cleaning %s/.staging: %s\n", root.c_str(), removed.err().to_string().c_str());
      else
        for (const auto& e : *removed)
          std::fprintf(stderr, "loom-ingest: removed %s/.staging/%s (left by an import that was killed)\n",
                       root.c_str(), e.c_str());
    }
  thread_ = std::thread([this] { run(); });
}

task_runner::~task_runner() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [id, t] : tasks_) t->stop = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

result<task_info> task_runner::enqueue(std::shared_ptr<task> t) {
  std::lock_guard lock(mu_);
  for (auto& [id, other] : tasks_)
    if (other->info.dataset == t->info.dataset && other->info.tenant == t->info.tenant &&
        !terminal(other->info.state))
      return make_error(errc::conflict, "dataset " + t->info.dataset + " already has task " + id + " (" +
                                            other->info.state + ")");
  auto id = ids_.next(id_prefix(t->info.kind));
  if (!id) return id.err();
  t->info.id = *id;
  t->info.state = "queued";
  tasks_[t->info.id] = t;
  queue_.push_back(t);
  cv_.notify_all();
  return t->info;
}

std::string task_runner::datasets_root(const std::string& tenant) const {
  return layout::tenant_datasets_root(opt_.datasets_root, tenant);
}

result<task_info> task_runner::start(const std::string& kind, const std::string& tenant, const std::string& dataset,
                                     const std::string& source, const std::string& principal, task_body body) {
  if (auto st = validate_dataset_name(dataset); !st) return st.err();
  if (tenant.empty()) return make_error(errc::invalid_argument, "a task needs the tenant whose dataset it works on");
  auto t = std::make_shared<task>();
  t->info.kind = kind;
  t->info.tenant = tenant;
  t->info.dataset = dataset;
  t->info.source = source;
  t->principal = principal;
  t->body = std::move(body);
  return enqueue(std::move(t));
}

result<task_info> task_runner::start_import(import_options opt, const std::string& tenant,
                                           const std::string& principal) {
  if (tenant.empty()) return make_error(errc::invalid_argument, "an import needs the tenant whose dataset it makes");
  opt.datasets_root = datasets_root(tenant);
  if (auto st = validate(opt); !st) return st.err();
  if (!opt_.import_roots.empty()) {
    auto inside = files::confined(opt_.import_roots, opt.source);
    if (!inside && inside.code() == errc::permission_denied)  // else not found: said below
      return make_error(errc::permission_denied,
                        "import: " + inside.err().message + " (`loom up --import-root DIR` adds a root; " +
                            opt_.import_roots.front() + " is always one)");
    opt.reader.roots = opt_.import_roots;
    // A filter model is read by this service too: under the same roots.
    for (const auto* model : {&opt.image_filter, &opt.text_filter}) {
      if (model->empty()) continue;
      auto ok = files::confined(opt_.import_roots, *model);
      if (!ok && ok.code() == errc::permission_denied)
        return make_error(errc::permission_denied, "import: the filter model " + ok.err().message);
    }
  }
  struct stat sb {};
  if (::stat(opt.source.c_str(), &sb) != 0)
    return make_error(errc::not_found, "import source " + opt.source + " does not exist (or is not readable by the ingest service)");
  auto t = std::make_shared<task>();
  t->info.kind = "import";
  t->info.tenant = tenant;
  t->info.dataset = opt.dataset;
  t->info.source = opt.source;
  t->principal = principal;
  t->body = [opt, tenant](task_context& ctx) mutable -> status {
    opt.stop = ctx.stop;
    opt.progress = [&ctx](const import_progress& p) {
      ctx.update([&](task_info& i) {
        i.phase = p.phase;
        i.files = p.files;
        i.bytes_read = p.bytes_read;
        i.documents = p.documents;
        i.kept = p.kept;
        i.rejected = p.rejected + p.quarantined;
        i.duplicates = p.duplicates;
        i.elapsed_s = p.elapsed_s;
        i.mb_per_s = p.elapsed_s > 0 ? p.bytes_read / p.elapsed_s / 1e6 : 0;
      });
    };
    auto sum = import_dataset(opt);
    if (!sum) return sum.err();
    auto report = report_json(*sum, opt);
    ctx.update([&](task_info& i) {
      i.phase = "done";
      i.files = sum->files;
      i.bytes_read = sum->bytes_read;
      i.documents = sum->documents;
      i.kept = sum->kept;
      i.rejected = sum->rejected + sum->quarantined + sum->reader_rejections;
      i.duplicates = sum->dedup.exact + sum->dedup.near;
      i.elapsed_s = sum->seconds;
      i.mb_per_s = sum->mb_per_s;
      i.tokens = sum->tokens;
      i.shards = static_cast<std::uint32_t>(sum->manifest.shards.size());
      i.report_json = report;
    });
    auto cat = ctx.open_catalog();
    if (!cat) return cat.err();
    if (*cat)
      if (auto st = (*cat)->record_import(tenant, *sum, static_cast<std::int64_t>(unix_ns_now())); !st)
        return make_error(st.err().code, "dataset published but not recorded in the catalogue: " + st.err().message);
    return ok_status();
  };
  return enqueue(std::move(t));
}

result<task_info> task_runner::start_verify(const std::string& tenant, const std::string& dataset,
                                           const std::string& principal) {
  if (auto st = validate_dataset_name(dataset); !st) return st.err();
  const std::string root = datasets_root(tenant);
  const std::string dir = root + "/" + dataset;
  struct stat sb {};
  if (::stat(dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode))
    return make_error(errc::not_found, "no dataset " + dataset + " (`loom data list` lists them)");
  return start("verify", tenant, dataset, dir, principal, [root, tenant, dataset](task_context& ctx) {
    return verify_dataset(ctx, root, tenant, dataset);
  });
}

std::optional<task_info> task_runner::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return std::nullopt;
  return it->second->info;
}

std::optional<task_info> task_runner::last_for(const std::string& tenant, const std::string& dataset) const {
  std::lock_guard lock(mu_);
  const task* best = nullptr;
  for (auto& [id, t] : tasks_)
    if (t->info.dataset == dataset && t->info.tenant == tenant &&
        (!best || t->info.started_unix_ns >= best->info.started_unix_ns))
      best = t.get();
  if (!best) return std::nullopt;
  return best->info;
}

result<task_info> task_runner::cancel(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return make_error(errc::not_found, "no task " + id);
  auto& t = *it->second;
  if (terminal(t.info.state)) return make_error(errc::conflict, "task " + id + " already " + t.info.state);
  t.stop = true;
  if (t.info.state == "queued") {
    for (auto q = queue_.begin(); q != queue_.end(); ++q)
      if ((*q)->info.id == id) {
        queue_.erase(q);
        break;
      }
    t.info.state = "cancelled";
    t.info.message = "cancelled before it started";
    t.info.finished_unix_ns = unix_ns_now();
    finished_.push_back(id);
  }
  return t.info;
}

status task_runner::record_dataset_dir(const std::string& tenant, const std::string& dataset,
                                       const std::string& import_id) {
  import_summary s;
  s.dataset = dataset;
  s.import_id = import_id;
  s.dir = datasets_root(tenant) + "/" + dataset;
  s.report_path = s.dir + "/" + std::string(report_file_name);
  auto m = shards::read_manifest(s.dir);
  if (!m) return m.err();
  s.manifest = std::move(*m);
  for (const auto& sh : s.manifest.shards) {
    s.documents += sh.docs;
    s.kept += sh.docs;
    s.tokens += sh.tokens;
  }
  // The true reject count of the pulled version: every line of its rejects.jsonl.
  (void)read_rejects(s.dir + "/" + std::string(rejects_file_name), 0, [&](reject_entry&&) {
    ++s.rejects;
    return true;
  });
  if (opt_.database_url.empty()) return ok_status();
  auto db = store::database::open(opt_.database_url);
  if (!db) return db.err();
  if (auto st = store::migrate(**db, ingest_migrations()); !st) return st;
  catalog cat(**db);
  return cat.record_import(tenant, s, static_cast<std::int64_t>(unix_ns_now()));
}

void task_runner::run() {
  catalog_conn conn(opt_.database_url);
  for (;;) {
    std::shared_ptr<task> t;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      t = queue_.front();
      queue_.pop_front();
      t->info.state = "running";
      t->info.started_unix_ns = unix_ns_now();
    }
    task_context ctx;
    ctx.stop = &t->stop;
    ctx.open_catalog = [&conn] { return conn.get(); };
    ctx.update = [this, &t](const std::function<void(task_info&)>& fn) {
      std::lock_guard lock(mu_);
      fn(t->info);
    };
    status outcome;
    try {
      outcome = t->body(ctx);
    } catch (const std::exception& e) {
      outcome = make_error(errc::internal, std::string("task crashed: ") + e.what());
    }
    finish(*t, outcome);
  }
}

void task_runner::finish(task& t, const status& outcome) {
  {
    std::lock_guard lock(mu_);
    t.info.finished_unix_ns = unix_ns_now();
    if (outcome.ok()) t.info.state = "succeeded";
    else if (t.stop.load()) t.info.state = "cancelled";
    else t.info.state = "failed";
    if (!outcome.ok()) t.info.message = outcome.err().to_string();
    finished_.push_back(t.info.id);
    while (finished_.size() > opt_.keep_finished) {
      tasks_.erase(finished_.front());
      finished_.pop_front();
    }
  }
  audit_outcome(t, outcome);
}

// The task's outcome as the service's own record (it ran the task); who
// asked for it rides in the payload ("requested_by"), as the request's own
// record (the gateway's) names them too.
void task_runner::audit_outcome(const task& t, const status& outcome) {
  if (!opt_.audit) return;
  const task_info& i = t.info;
  auto r = audit::service_record(
      opt_.node, opt_.zone, "ingest", "dataset." + i.kind, "",
      outcome.ok() ? i.kind + " of " + i.dataset + " " + i.state : outcome.err().to_string(),
      nlohmann::json{{"task", i.id},         {"tenant", i.tenant},         {"dataset", i.dataset},
                     {"source", i.source},
                     {"state", i.state},     {"files", i.files},           {"documents", i.documents},
                     {"kept", i.kept},       {"rejected", i.rejected},     {"duplicates", i.duplicates},
                     {"tokens", i.tokens},   {"shards", i.shards},         {"bytes_sent", i.bytes_sent},
                     {"seconds", i.elapsed_s}, {"requested_by", t.principal}}
          .dump());
  r.outcome = outcome.ok() ? audit::decision::allow : audit::decision::error;
  opt_.audit(std::move(r));
}

}  // namespace loom::ingest
