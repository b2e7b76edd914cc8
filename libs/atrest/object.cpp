#include "libs/atrest/object.hpp"

#include "libs/atrest/read_whole.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/files/files.hpp"

#include <cerrno>
#include <fcntl.h>
#include <mutex>
#include <unistd.h>

namespace loom::atrest {
namespace {

std::mutex process_mu;
std::shared_ptr<kek_store> process_store;  // guarded by process_mu
bool process_seals = true;                  // guarded by process_mu

std::string no_keys(const std::string& path) {
  return path + " is sealed at rest, and this process has no at-rest key directory (<data>/keys/atrest) to open it "
                "with";
}

}  // namespace

void set_process_keys(std::shared_ptr<kek_store> keys) {
  std::lock_guard lock(process_mu);
  process_store = std::move(keys);
}

std::shared_ptr<kek_store> process_keys() {
  std::lock_guard lock(process_mu);
  return process_store;
}

void set_sealing(bool on) {
  std::lock_guard lock(process_mu);
  process_seals = on;
}

std::shared_ptr<kek_store> sealing_keys() {
  std::lock_guard lock(process_mu);
  return process_seals ? process_store : nullptr;
}

result<std::shared_ptr<kek_store>> open_process_keys(const std::string& dir, kek_options o, sys_time now) {
  auto k = kek_store::open(dir, std::move(o), now);
  if (!k) return k.err();
  std::shared_ptr<kek_store> shared = std::move(*k);
  set_process_keys(shared);
  return shared;
}

result<std::shared_ptr<kek_store>> open_process_keys_from_env(
    const std::string& dir, const std::function<const char*(const char*)>& getenv, sys_time now,
    std::function<void(std::uint32_t version, bool scheduled)> on_rotate) {
  const char* mode = getenv("LOOM_AT_REST");
  const std::string m = mode ? mode : "on";
  if (m != "on" && m != "off")
    return make_error(errc::invalid_argument, "LOOM_AT_REST=" + m + ": expected on or off");
  kek_options o;
  if (const char* days = getenv("LOOM_AT_REST_ROTATION_DAYS")) {
    const std::string d = days;
    int v = 0;
    const bool digits = !d.empty() && d.size() <= 4 && d.find_first_not_of("0123456789") == std::string::npos;
    if (digits) v = std::stoi(d);
    if (!digits || v < 1 || v > 3650)
      return make_error(errc::invalid_argument, "LOOM_AT_REST_ROTATION_DAYS=" + d + ": expected whole days 1..3650");
    o.rotation = std::chrono::days(v);
  }
  o.on_rotate = std::move(on_rotate);
  if (m == "off") {
    set_sealing(false);
    o.create = false;  // readers only: no KEK is made
    auto k = open_process_keys(dir, std::move(o), now);
    if (!k && k.code() != errc::not_found) return k.err();
    if (!k) set_process_keys(nullptr);
    return std::shared_ptr<kek_store>();
  }
  set_sealing(true);
  return open_process_keys(dir, std::move(o), now);
}

bool is_sealed_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char head[8];
  ssize_t n;
  do {
    n = ::pread(fd, head, sizeof head, 0);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  return n == static_cast<ssize_t>(sizeof head) && looks_sealed({head, sizeof head});
}

status read_object_into(const std::string& path, std::string& scratch, std::string& out, kek_store* keys,
                        bool* sealed) {
  if (auto st = detail::read_whole(path, scratch); !st) return st;
  const bool is = looks_sealed(scratch);
  if (sealed) *sealed = is;
  if (!is) {
    out.swap(scratch);
    return ok_status();
  }
  std::shared_ptr<kek_store> held;
  if (!keys) {
    held = process_keys();
    keys = held.get();
  }
  if (!keys) return make_error(errc::not_found, no_keys(path));
  return unseal_into(scratch, *keys, path, out);
}

status read_object_stream(const std::string& path, const std::function<status(std::string_view)>& sink,
                          kek_store* keys) {
  if (is_sealed_file(path)) {
    std::shared_ptr<kek_store> held;
    if (!keys) {
      held = process_keys();
      keys = held.get();
    }
    if (!keys) return make_error(errc::not_found, no_keys(path));
    return unseal_file(path, *keys, sink);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  std::string buf(std::size_t{1} << 20, '\0');
  status st = ok_status();
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = files::errno_error("read", path);
      break;
    }
    if (n == 0) break;
    if (st = sink(std::string_view(buf.data(), static_cast<std::size_t>(n))); !st) break;
  }
  ::close(fd);
  return st;
}

result<std::string> read_object(const std::string& path, kek_store* keys) {
  std::string scratch, out;
  if (auto st = read_object_into(path, scratch, out, keys); !st) return st.err();
  return out;
}

status write_object(const std::string& path, std::string_view plain, kek_store* keys, sys_time now, mode_t mode) {
  if (!keys) return files::write_atomic(path, plain, mode);
  return write_sealed(path, plain, *keys, now, default_chunk, mode);
}

}  // namespace loom::atrest
