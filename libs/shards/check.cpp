#include "libs/shards/check.hpp"

#include "libs/atrest/object.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <vector>

namespace loom::shards {
namespace {

// Read buffer of the full check: large enough that the hash, not the system
// calls, sets the pace; small enough to poll the stop flag every few ms.
constexpr std::size_t hash_buffer_bytes = std::size_t{1} << 20;

// The first bytes of a file that is sealed at rest; nullopt for a plain (or unreadable) one.
std::optional<std::string> sealed_head(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  std::string head(atrest::sealed_header_size, '\0');
  ssize_t n;
  do {
    n = ::pread(fd, head.data(), head.size(), 0);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n < 8 || !atrest::looks_sealed(head)) return std::nullopt;
  head.resize(static_cast<std::size_t>(n));
  return head;
}

std::optional<std::string> cheap_problem(const std::string& path, const shard_info& s) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)  // a link is not the dataset's own file
    return errno == ENOENT ? std::string("is missing") : "cannot be read: " + std::string(std::strerror(errno));
  if (S_ISLNK(st.st_mode)) return std::string("is a symbolic link, not a file of the dataset");
  if (!S_ISREG(st.st_mode)) return std::string("is not a regular file");
  auto size = static_cast<std::uint64_t>(st.st_size);
  if (auto head = sealed_head(path)) {  // sealed at rest: the manifest lists the plaintext's size
    auto plain = atrest::sealed_plain_size(*head, size);
    if (!plain) return "is sealed at rest but its header and size (" + std::to_string(size) + " bytes) do not fit";
    size = *plain;
  }
  if (size != s.bytes) return "has " + std::to_string(size) + " bytes, the manifest says " + std::to_string(s.bytes);
  return std::nullopt;
}

// The file's SHA-256 (hex); nullopt and `why` when it cannot be read.
result<std::optional<std::string>> sha256_of(const std::string& path, std::vector<char>& buf, std::string& why,
                                             const std::atomic<bool>* stop) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    why = "cannot be read: " + std::string(std::strerror(errno));
    return std::optional<std::string>();
  }
  crypto::sha256_stream h;
  for (;;) {
    if (stop && stop->load(std::memory_order_relaxed)) {
      ::close(fd);
      return make_error(errc::unavailable, "shard check stopped");
    }
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = "cannot be read: " + std::string(std::strerror(errno));
      ::close(fd);
      return std::optional<std::string>();
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  const auto d = h.finish();
  return std::optional<std::string>(crypto::to_hex(crypto::as_view(d)));
}

}  // namespace

result<std::vector<shard_problem>> check_shards(const std::string& dir, std::span<const shard_info> shards,
                                                check_depth depth, const std::atomic<bool>* stop) {
  std::vector<shard_problem> out;
  std::vector<char> buf(depth == check_depth::full ? hash_buffer_bytes : 0);
  for (const auto& s : shards) {
    const std::string path = dir + "/" + s.name;
    if (auto p = cheap_problem(path, s)) {
      out.push_back({s.name, std::move(*p)});
      continue;
    }
    if (depth == check_depth::cheap) continue;
    std::string why;
    if (sealed_head(path)) {  // the plaintext's hash: unsealing verifies every chunk's tag first
      if (stop && stop->load(std::memory_order_relaxed)) return make_error(errc::unavailable, "shard check stopped");
      crypto::sha256_stream h;
      auto st = atrest::read_object_stream(path, [&](std::string_view piece) {
        h.update(piece.data(), piece.size());
        return ok_status();
      });
      if (!st) out.push_back({s.name, "cannot be unsealed: " + st.err().message});
      else if (auto got = crypto::to_hex(crypto::as_view(h.finish())); got != s.sha256)
        out.push_back({s.name, "has SHA-256 " + got + ", the manifest says " + s.sha256});
      continue;
    }
    auto got = sha256_of(path, buf, why, stop);
    if (!got) return got.err();
    if (!*got) out.push_back({s.name, std::move(why)});
    else if (**got != s.sha256) out.push_back({s.name, "has SHA-256 " + **got + ", the manifest says " + s.sha256});
  }
  return out;
}

std::vector<shard_info> media_as_files(const manifest& m) {
  std::vector<shard_info> out;
  out.reserve(m.media.size());
  for (const auto& s : m.media) {
    shard_info f;
    f.name = s.name;
    f.sha256 = s.sha256;
    f.bytes = s.bytes;
    f.docs = s.records;
    f.node = s.node;
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<shard_problem> check_dataset_dir(const std::string& dir) {
  auto m = read_manifest(dir);
  if (!m) return {{std::string(manifest_file_name), m.code() == errc::not_found ? "is missing" : m.err().message}};
  auto p = check_shards(dir, m->shards, check_depth::cheap);
  if (!p) return {};
  auto q = check_shards(dir, media_as_files(*m), check_depth::cheap);
  if (q) p->insert(p->end(), q->begin(), q->end());
  return std::move(*p);
}

std::string describe(std::span<const shard_problem> problems, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < problems.size() && i < max; ++i)
    out += (i ? "; " : "") + problems[i].shard + " " + problems[i].what;
  if (problems.size() > max) out += "; and " + std::to_string(problems.size() - max) + " more";
  return out;
}

}  // namespace loom::shards
