#include "services/ingest/importer/staging.hpp"

#include "libs/files/files.hpp"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <string_view>
#include <vector>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::ingest {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t id_length = 16;  // hex digits of an import id

// What a .staging entry of dataset `name` is: "" (not one), "new", "work" or "old".
std::string_view classify(std::string_view entry, std::string_view name) {
  if (entry.size() < name.size() + 1 + id_length || entry.substr(0, name.size()) != name ||
      entry[name.size()] != '.')
    return {};
  const std::string_view id = entry.substr(name.size() + 1, id_length);
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return {};
  const std::string_view rest = entry.substr(name.size() + 1 + id_length);
  if (rest.empty()) return "new";
  if (rest == ".work") return "work";
  if (rest == ".old") return "old";
  return {};
}

// The dataset name of a .staging entry <name>.<16 hex>[.work|.old]; "" when
// the entry is not one (lock files, anything else).
std::string owner_of(std::string_view entry) {
  for (std::string_view suffix : {".work", ".old"})
    if (entry.ends_with(suffix)) {
      entry.remove_suffix(suffix.size());
      break;
    }
  if (entry.size() < id_length + 2 || entry[entry.size() - id_length - 1] != '.') return {};
  const std::string_view name = entry.substr(0, entry.size() - id_length - 1);
  return classify(std::string(entry), name).empty() ? std::string() : std::string(name);
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

}  // namespace

status recover(const std::string& root, const std::string& name) {
  const std::string final_dir = root + "/" + name;
  if (exists(final_dir)) return ok_status();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root + "/.staging", ec)) {
    const std::string entry = e.path().filename().string();
    if (classify(entry, name) != "old") continue;
    if (::rename(e.path().c_str(), final_dir.c_str()) != 0) return files::errno_error("restore previous version to", final_dir);
    return files::fsync_dir(root);
  }
  // A listing that failed may hide the previous version: said, not taken for "none".
  if (ec && ec != std::errc::no_such_file_or_directory) return files::errno_error("list", root + "/.staging", ec.value());
  return ok_status();
}

result<std::vector<std::string>> clean_stale(const std::string& root) {
  const std::string stage_root = root + "/.staging";
  std::map<std::string, std::vector<std::string>> by_name;  // dataset -> its entries
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(stage_root, ec)) {
    const std::string entry = e.path().filename().string();
    if (auto name = owner_of(entry); !name.empty()) by_name[name].push_back(entry);
  }
  if (ec && ec != std::errc::no_such_file_or_directory) return files::errno_error("list", stage_root, ec.value());
  std::vector<std::string> removed;
  for (const auto& [name, entries] : by_name) {
    const std::string lock_path = stage_root + "/" + name + ".lock";
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return files::errno_error("open", lock_path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // a live import of `name`: its entries are its own
      ::close(fd);
      continue;
    }
    status st = recover(root, name);
    if (st)
      for (const auto& entry : entries)
        if (exists(stage_root + "/" + entry)) {  // recover() may have moved an .old back
          remove_tree(stage_root + "/" + entry);
          removed.push_back(entry);
        }
    ::close(fd);
    if (!st) return st.err();
  }
  return removed;
}

result<staging> staging::begin(const std::string& root, const std::string& name, const std::string& import_id) {
  const std::string stage_root = root + "/.staging";
  if (auto st = files::make_dirs(stage_root); !st) return st.err();
  staging s;
  s.root_ = root;
  s.name_ = name;
  const std::string lock_path = stage_root + "/" + name + ".lock";
  s.lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (s.lock_fd_ < 0) return files::errno_error("open", lock_path);
  if (::flock(s.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return make_error(errc::conflict, "dataset " + name + ": another import of it is running (" + lock_path + ")");
    return files::errno_error("lock", lock_path);
  }
  if (auto st = recover(root, name); !st) return st.err();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(stage_root, ec))
    if (!classify(e.path().filename().string(), name).empty()) remove_tree(e.path().string());
  s.final_ = root + "/" + name;
  s.dir_ = stage_root + "/" + name + "." + import_id;
  s.work_ = s.dir_ + ".work";
  s.old_ = s.dir_ + ".old";
  if (::mkdir(s.dir_.c_str(), 0755) != 0) return files::errno_error("mkdir", s.dir_);
  if (::mkdir(s.work_.c_str(), 0700) != 0) return files::errno_error("mkdir", s.work_);
  return s;
}

staging::staging(staging&& o) noexcept
    : root_(std::move(o.root_)),
      name_(std::move(o.name_)),
      dir_(std::move(o.dir_)),
      work_(std::move(o.work_)),
      final_(std::move(o.final_)),
      old_(std::move(o.old_)),
      lock_fd_(o.lock_fd_),
      published_(o.published_) {
  o.lock_fd_ = -1;
  o.dir_.clear();
  o.work_.clear();
}

staging::~staging() {
  // dir_ holds the new version when unpublished, the previous one after an
  // exchange, and nothing after a plain rename: in each case it goes. (old_ is
  // never removed here: after a failed fallback it may be the only copy.)
  if (!work_.empty()) remove_tree(work_);
  if (!dir_.empty()) remove_tree(dir_);
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

status staging::publish() {
  if (published_) return make_error(errc::invalid_argument, "staging: publish called twice");
  if (auto st = files::fsync_dir(dir_); !st) return st;
  const std::string stage_root = root_ + "/.staging";
  if (!exists(final_)) {
    if (::rename(dir_.c_str(), final_.c_str()) != 0) return files::errno_error("publish to", final_);
    published_ = true;
    return files::fsync_dir(root_);
  }
  if (::renameat2(AT_FDCWD, dir_.c_str(), AT_FDCWD, final_.c_str(), RENAME_EXCHANGE) == 0) {
    published_ = true;  // dir_ now holds the previous version; removed below or by ~staging
    if (auto st = files::fsync_dir(root_); !st) return st;
    if (auto st = files::fsync_dir(stage_root); !st) return st;
    remove_tree(dir_);
    return ok_status();
  }
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return files::errno_error("swap into", final_);
  // No RENAME_EXCHANGE here: three renames, repaired by recover() after a crash.
  if (::rename(final_.c_str(), old_.c_str()) != 0) return files::errno_error("move previous version of", final_);
  if (::rename(dir_.c_str(), final_.c_str()) != 0) {
    auto e = files::errno_error("publish to", final_);
    (void)::rename(old_.c_str(), final_.c_str());
    return e;
  }
  published_ = true;
  if (auto st = files::fsync_dir(root_); !st) return st;
  if (auto st = files::fsync_dir(stage_root); !st) return st;
  remove_tree(old_);
  return ok_status();
}

}  // namespace loom::ingest
