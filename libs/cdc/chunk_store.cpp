#include "libs/cdc/chunk_store.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/files/files.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::cdc {
namespace {

constexpr std::string_view index_suffix = ".idx";

bool read_at(int fd, std::string& buf, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < buf.size()) {
    ssize_t n = ::pread(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool parse_hex(std::string_view hex, crypto::digest& out) {
  auto raw = crypto::from_hex(hex);
  if (!raw.ok() || raw->size() != out.size()) return false;
  std::memcpy(out.data(), raw->data(), out.size());
  return true;
}

}  // namespace

std::size_t chunk_store::id_hash::operator()(const crypto::digest& d) const noexcept {
  std::size_t h;
  std::memcpy(&h, d.data(), sizeof h);
  return h;
}

chunk_store::chunk_store(std::string root) : root_(std::move(root)) {
  (void)files::make_dirs(root_);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root_, ec)) {
    const std::string idx = e.path().string();
    if (!idx.ends_with(index_suffix)) continue;
    const std::string pack = idx.substr(0, idx.size() - index_suffix.size());
    struct stat st {};
    auto text = files::read_file(idx);
    if (!text.ok() || ::stat(pack.c_str(), &st) != 0) continue;
    std::istringstream in(*text);
    std::string hex;
    stored_chunk c{pack, 0, 0};
    while (in >> hex >> c.offset >> c.length) {
      crypto::digest id{};
      if (parse_hex(hex, id) && c.offset + c.length <= static_cast<std::uint64_t>(st.st_size))
        index_[id].push_back(c);
    }
  }
}

result<std::size_t> chunk_store::add_pack(const std::string& name, const std::string& pack_path,
                                          const std::vector<crypto::digest>& ids,
                                          const std::vector<std::uint32_t>& lengths) {
  if (ids.size() != lengths.size()) return make_error(errc::invalid_argument, "pack: ids and lengths differ in count");
  const std::string target = root_ + "/" + name;
  struct stat st {};
  if (::stat(pack_path.c_str(), &st) != 0) return files::errno_error("stat", pack_path);
  std::ostringstream idx;
  std::vector<std::pair<crypto::digest, stored_chunk>> entries;
  std::uint64_t off = 0;
  for (std::size_t i = 0; i < ids.size(); off += lengths[i++]) {
    idx << crypto::to_hex(crypto::as_view(ids[i])) << ' ' << off << ' ' << lengths[i] << '\n';
    entries.push_back({ids[i], stored_chunk{target, off, lengths[i]}});
  }
  if (off != static_cast<std::uint64_t>(st.st_size))
    return make_error(errc::corruption, "pack " + pack_path + " does not hold its chunk list");
  if (::rename(pack_path.c_str(), target.c_str()) != 0) return files::errno_error("rename to", target);
  // The index is written after the pack is in place; its directory fsync
  // makes both entries durable. A pack without an index is never read.
  if (auto s = files::write_atomic(target + std::string(index_suffix), idx.str()); !s.ok()) return s.err();
  for (auto& [id, c] : entries) index_[id].push_back(std::move(c));
  return entries.size();
}

result<std::string> chunk_store::get(const crypto::digest& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return make_error(errc::not_found, "chunk not in the store");
  auto& copies = it->second;
  while (!copies.empty()) {
    const stored_chunk& c = copies.front();
    std::string buf(c.length, '\0');
    int fd = ::open(c.pack.c_str(), O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && read_at(fd, buf, c.offset) && crypto::sha256(buf) == id;
    if (fd >= 0) ::close(fd);
    if (ok) return buf;
    copies.erase(copies.begin());
  }
  index_.erase(it);
  return make_error(errc::corruption, "stored chunk " + crypto::to_hex(crypto::as_view(id)) +
                                          " does not match its hash; dropped");
}

const stored_chunk* chunk_store::locate(const crypto::digest& id) const {
  auto it = index_.find(id);
  return it == index_.end() || it->second.empty() ? nullptr : &it->second.front();
}

status chunk_store::clear() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root_, ec)) {
    std::filesystem::remove_all(e.path(), ec);
    if (ec) return make_error(errc::internal, "remove " + e.path().string() + ": " + ec.message());
  }
  index_.clear();
  return {};
}

}  // namespace loom::cdc
