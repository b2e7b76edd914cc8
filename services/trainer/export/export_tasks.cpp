#include "services/trainer/export/export_tasks.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace loom::trainer {
namespace {
namespace fs = std::filesystem;

bool ended(const std::string& state) { return state == "done" || state == "failed" || state == "cancelled"; }

void remove_dir(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace

status validate(export_request& r, const export_caller& c) {
  auto bad = [](const std::string& why) { return make_error(errc::invalid_argument, "StartModelExport: " + why); };
  if (r.version.empty()) return bad("no version");
  if (r.action != "check" && r.action != "export")
    return bad("action must be check or export, got \"" + r.action + "\"");
  if (r.action == "export") {
    if (r.format != "hf" && r.format != "gguf") return bad("--format must be hf or gguf, got \"" + r.format + "\"");
    if (r.format == "hf" && !r.type.empty() && r.type != "f32")
      return bad("--type is for --format gguf (a Hugging Face export is float32)");
    if (r.type.empty()) r.type = "f32";
    if (r.type != "f32" && r.type != "f16" && r.type != "q8_0")
      return bad("--type must be f32, f16 or q8_0, got \"" + r.type + "\"");
  } else if (!r.format.empty() || !r.type.empty()) {
    return bad("a check has no format or type");
  }
  if (r.max_loss && (!std::isfinite(*r.max_loss) || *r.max_loss <= 0))
    return bad("--max-loss must be a positive number");
  if (r.override_compliance) {
    if (!c.admin())
      return make_error(errc::permission_denied,
                        "overriding the compliance check needs the admin role (this token's role: " + c.role + ")");
    if (r.reason.empty()) return bad("a compliance override needs a reason (--reason TEXT)");
  }
  if (!r.held_out.empty() && r.held_out.front() != '/')
    return bad("--held-out " + r.held_out + " is not an absolute path (the trainer reads it on its own host)");
  return ok_status();
}

export_tasks::export_tasks(export_tasks_options o, export_body body) : opt_(std::move(o)), body_(std::move(body)) {
  // What a previous process of this trainer left: its tasks are forgotten.
  if (!opt_.root.empty()) {
    remove_dir(opt_.root);
    std::error_code ec;
    fs::create_directories(opt_.root, ec);
  }
  thread_ = std::thread([this] { run(); });
}

export_tasks::~export_tasks() { shutdown(); }

void export_tasks::shutdown() {
  {
    std::lock_guard lk(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    for (auto& [id, t] : tasks_) t->stop = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

result<export_info> export_tasks::start(export_request r, const export_caller& c) {
  if (auto st = validate(r, c); !st) return st.err();
  if (opt_.admit)
    if (auto st = opt_.admit(r); !st) return st.err();
  std::lock_guard lk(mu_);
  if (stopping_) return make_error(errc::unavailable, "this trainer is stopping");
  if (waiting_ >= opt_.max_waiting)
    return make_error(errc::resource_exhausted, "this trainer already has " + std::to_string(waiting_) +
                                                    " model checks or exports waiting or running (at most " +
                                                    std::to_string(opt_.max_waiting) + "): try again later");
  std::size_t mine = 0;
  for (const auto& [id, other] : tasks_)
    mine += !ended(other->info.state) && other->caller.tenant == c.tenant;
  if (mine >= opt_.max_waiting_per_tenant)
    return make_error(errc::resource_exhausted, "tenant " + c.tenant + " already has " + std::to_string(mine) +
                                                    " model checks or exports waiting or running on this trainer "
                                                    "(at most " + std::to_string(opt_.max_waiting_per_tenant) +
                                                    "): try again when one has ended");
  auto t = std::make_shared<task>();
  t->req = std::move(r);
  t->caller = c;
  t->info.id = "exp-" + crypto::to_hex(crypto::random_bytes(8));
  t->info.state = "queued";
  t->info.action = t->req.action;
  t->info.version = t->req.version;
  t->info.format = t->req.format;
  t->info.type = t->req.type;
  t->info.trainer = opt_.node;
  tasks_[t->info.id] = t;
  queue_.push_back(t);
  ++waiting_;
  cv_.notify_all();
  return t->info;
}

std::shared_ptr<export_tasks::task> export_tasks::find(const std::string& id, const export_caller& c) {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || (!c.admin() && it->second->caller.tenant != c.tenant)) return nullptr;
  return it->second;
}

result<export_info> export_tasks::get(const std::string& id, const export_caller& c) {
  std::lock_guard lk(mu_);
  retire(opt_.now());
  auto t = find(id, c);
  if (!t) return make_error(errc::not_found, "no model export " + id + " on this trainer (tenant " + c.tenant + ")");
  return t->info;
}

result<export_tasks::chunk> export_tasks::fetch(const std::string& id, const std::string& file, std::uint64_t offset,
                                                std::uint32_t max_bytes, const export_caller& c) {
  std::string path;
  export_file listed;
  {
    std::lock_guard lk(mu_);
    retire(opt_.now());
    auto t = find(id, c);
    if (!t) return make_error(errc::not_found, "no model export " + id + " on this trainer (tenant " + c.tenant + ")");
    if (t->info.state != "done")
      return make_error(t->info.state == "queued" || t->info.state == "running" ? errc::conflict : errc::not_found,
                        "model export " + id + " is " + t->info.state + ": nothing to fetch");
    // Only a file the export lists: the name is never joined to a path unchecked.
    auto it = std::find_if(t->info.files.begin(), t->info.files.end(), [&](const export_file& f) { return f.name == file; });
    if (it == t->info.files.end())
      return make_error(errc::not_found, "model export " + id + " has no file \"" + file + "\"" +
                                             (t->info.files.empty() ? " (its files were deleted, or it wrote none)" : ""));
    listed = *it;
    path = dir_of(id) + "/artefact/" + listed.name;
  }
  if (offset > listed.bytes)
    return make_error(errc::invalid_argument, "offset " + std::to_string(offset) + " is past the end of " + file +
                                                  " (" + std::to_string(listed.bytes) + " bytes)");
  const std::uint32_t want = std::min<std::uint32_t>(max_bytes ? max_bytes : default_chunk, max_chunk);
  const std::uint64_t n = std::min<std::uint64_t>(want, listed.bytes - offset);
  chunk out;
  out.offset = offset;
  out.file_bytes = listed.bytes;
  out.data.resize(n);
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::not_found, "model export " + id + ": " + file + " is gone (ended meanwhile?)");
  in.seekg(static_cast<std::streamoff>(offset));
  if (n && !in.read(out.data.data(), static_cast<std::streamsize>(n)))
    return make_error(errc::internal, "model export " + id + ": reading " + file + " failed");
  out.sha256 = crypto::sha256_hex(out.data);
  return out;
}

result<export_info> export_tasks::end(const std::string& id, const export_caller& c) {
  std::string remove;
  export_info info;
  {
    std::lock_guard lk(mu_);
    auto t = find(id, c);
    if (!t) return make_error(errc::not_found, "no model export " + id + " on this trainer (tenant " + c.tenant + ")");
    if (t->info.state == "queued") {
      std::erase(queue_, t);
      --waiting_;
      t->info.state = "cancelled";
      t->ended = opt_.now();
      ended_.push_back(id);
    } else if (t->info.state == "running") {
      t->stop = true;  // the runner marks it cancelled when the body returns
    } else if (!t->info.files.empty()) {
      t->info.files.clear();
      remove = dir_of(id);
    }
    info = t->info;
  }
  if (!remove.empty()) remove_dir(remove);
  return info;
}

void export_tasks::retire(std::chrono::steady_clock::time_point now) {
  for (const auto& id : ended_) {
    auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second->info.files.empty()) continue;
    if (now - it->second->ended < opt_.keep_files) break;  // ended_ is in end order
    it->second->info.files.clear();
    it->second->info.phase = "files deleted after " + std::to_string(opt_.keep_files.count()) + " s";
    remove_dir(dir_of(id));
  }
  while (ended_.size() > opt_.keep_finished) {
    remove_dir(dir_of(ended_.front()));
    tasks_.erase(ended_.front());
    ended_.pop_front();
  }
}

void export_tasks::run() {
  for (;;) {
    std::shared_ptr<task> t;
    {
      std::unique_lock lk(mu_);
      // Wakes at least every minute to delete what nobody fetched.
      cv_.wait_for(lk, std::chrono::minutes(1), [&] { return stopping_ || !queue_.empty(); });
      retire(opt_.now());
      if (stopping_) return;
      if (queue_.empty()) continue;
      t = queue_.front();
      queue_.pop_front();
      t->info.state = "running";
    }
    export_context ctx;
    ctx.stop = &t->stop;
    ctx.artefact_dir = dir_of(t->info.id) + "/artefact";
    ctx.update = [this, t](const std::function<void(export_info&)>& fn) {
      std::lock_guard lk(mu_);
      fn(t->info);
    };
    status outcome = ok_status();
    try {
      outcome = body_(t->req, t->caller, ctx);
    } catch (const std::exception& e) {  // a bug in a check must not take the trainer down
      outcome = make_error(errc::internal, std::string("the export stopped on an exception: ") + e.what());
    }
    bool drop_files = false;
    {
      std::lock_guard lk(mu_);
      --waiting_;
      t->ended = opt_.now();
      ended_.push_back(t->info.id);
      if (t->stop && !outcome.ok()) {
        t->info.state = "cancelled";
      } else if (!outcome.ok()) {
        t->info.state = "failed";
        t->info.error_code = outcome.code();
        t->info.error = outcome.err().message;
      } else {
        t->info.state = "done";
      }
      t->info.phase.clear();
      if (t->info.state != "done" || t->stop) {
        t->info.files.clear();
        drop_files = true;
      }
      if (t->stop && t->info.state == "done") drop_files = true;  // ended while finishing: nobody fetches it
    }
    if (drop_files) remove_dir(dir_of(t->info.id));
    std::fprintf(stderr, "trainer: model %s %s of %s for %s (tenant %s): %s%s\n", t->req.action.c_str(),
                 t->info.id.c_str(), t->req.version.c_str(), t->caller.principal.c_str(), t->caller.tenant.c_str(),
                 t->info.state.c_str(), outcome.ok() ? "" : (": " + outcome.err().message).c_str());
    std::fflush(stderr);
  }
}

}  // namespace loom::trainer
