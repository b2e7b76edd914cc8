#include "libs/cdc/chunk_store.hpp"

#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"
#include "libs/status/unix_time.hpp"

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

chunk_store::chunk_store(std::string root, std::shared_ptr<atrest::kek_store> keys)
    : root_(std::move(root)), keys_(std::move(keys)) {
  (void)files::make_dirs(root_);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root_, ec)) {
    const std::string idx = e.path().string();
    if (!idx.ends_with(index_suffix)) continue;
    const std::string pack = idx.substr(0, idx.size() - index_suffix.size());
    struct stat st {};
    auto text = files::read_file(idx);
    if (!text.ok() || ::stat(pack.c_str(), &st) != 0) continue;
    std::istringstream lines(*text);
    for (std::string line; std::getline(lines, line);) {  // "<sha256 hex> <offset> <length>[ sealed]"
      std::istringstream in(line);
      std::string hex, mark;
      stored_chunk c{pack, 0, 0, false};
      if (!(in >> hex >> c.offset >> c.length)) continue;
      c.sealed = (in >> mark) && mark == "sealed";
      crypto::digest id{};
      if (parse_hex(hex, id) && c.offset + c.length <= static_cast<std::uint64_t>(st.st_size))
        index_[id].push_back(c);
    }
  }
}

result<std::size_t> chunk_store::add_pack(const std::string& name, const std::string& pack_path,
                                          const std::vector<crypto::digest>& ids,
                                          const std::vector<std::uint32_t>& lengths,
                                          const wire::bulk_piece_codec* incoming) {
  if (ids.size() != lengths.size()) return make_error(errc::invalid_argument, "pack: ids and lengths differ in count");
  if (incoming && !keys_)
    return make_error(errc::invalid_argument, "pack " + pack_path + ": a sealed pack needs a store with keys");
  const std::string target = root_ + "/" + name;
  std::uint64_t total = 0;
  for (auto n : lengths) total += n;
  std::uint64_t held = 0;
  if (incoming) {
    auto plain = wire::pieces_plain_size(pack_path);
    if (!plain.ok()) return plain.err();
    held = *plain;
  } else {
    struct stat st {};
    if (::stat(pack_path.c_str(), &st) != 0) return files::errno_error("stat", pack_path);
    held = static_cast<std::uint64_t>(st.st_size);
  }
  if (total != held) return make_error(errc::corruption, "pack " + pack_path + " does not hold its chunk list");
  std::ostringstream idx;
  std::vector<std::pair<crypto::digest, stored_chunk>> entries;
  if (keys_) {
    // Each chunk sealed alone, back to back, streamed through reused
    // buffers (no 16 MiB string: fresh pages cost more than the cipher); the
    // index names the sealed bytes. Published like write_atomic: a temp,
    // fdatasync, rename, then the directory with the index below.
    const std::string tmp = target + ".tmp." + std::to_string(::getpid());
    const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) return files::errno_error("open", tmp);
    auto fail = [&](error e) {
      ::close(out);
      ::unlink(tmp.c_str());
      return e;
    };
    std::string one;
    const auto now = loom::wall_now();
    std::uint64_t written = 0;
    std::size_t i = 0;
    // Seals chunk i (its plaintext `plain`) into the store's pack.
    auto put = [&](std::string_view plain) -> status {
      if (auto st = atrest::seal_into(plain, *keys_, now, one); !st.ok())
        return make_error(st.code(), "sealing pack " + name + ": " + st.err().message);
      if (auto st = files::write_all(out, one, tmp); !st.ok()) return st;
      const stored_chunk c{target, written, static_cast<std::uint32_t>(one.size()), true};
      idx << crypto::to_hex(crypto::as_view(ids[i])) << ' ' << c.offset << ' ' << c.length << " sealed\n";
      entries.push_back({ids[i], c});
      written += one.size();
      ++i;
      return {};
    };
    if (incoming) {
      // Pieces arrive in the bulk transfer's size; chunks are cut from them.
      std::string pending;
      std::size_t used = 0;
      auto s = wire::read_pieces(pack_path, *incoming, [&](std::string_view piece) -> status {
        pending.erase(0, used);
        used = 0;
        pending.append(piece);
        while (i < ids.size() && pending.size() - used >= lengths[i]) {
          const std::size_t n = lengths[i];
          if (auto st = put(std::string_view(pending).substr(used, n)); !st.ok()) return st;
          used += n;
        }
        return {};
      });
      if (!s.ok()) return fail(s.err());
    } else {
      const int in = ::open(pack_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (in < 0) return fail(files::errno_error("open", pack_path));
      std::string plain;
      for (std::uint64_t at = 0; i < ids.size(); at += plain.size()) {
        plain.resize(lengths[i]);
        if (!read_at(in, plain, at)) {
          ::close(in);
          return fail(make_error(errc::corruption, "pack " + pack_path + " ends early"));
        }
        if (auto st = put(plain); !st.ok()) {
          ::close(in);
          return fail(st.err());
        }
      }
      ::close(in);
    }
    if (i != ids.size()) return fail(make_error(errc::corruption, "pack " + pack_path + " ends early"));
    if (files::fdatasync_fd(out) != 0) return fail(files::errno_error("fdatasync", tmp));
    if (::close(out) != 0) {
      ::unlink(tmp.c_str());
      return files::errno_error("close", tmp);
    }
    if (::rename(tmp.c_str(), target.c_str()) != 0) {
      ::unlink(tmp.c_str());
      return files::errno_error("rename to", target);
    }
  } else {
    std::uint64_t off = 0;
    for (std::size_t i = 0; i < ids.size(); off += lengths[i++]) {
      idx << crypto::to_hex(crypto::as_view(ids[i])) << ' ' << off << ' ' << lengths[i] << '\n';
      entries.push_back({ids[i], stored_chunk{target, off, lengths[i], false}});
    }
    if (::rename(pack_path.c_str(), target.c_str()) != 0) return files::errno_error("rename to", target);
  }
  // The index is written after the pack is in place; its directory fsync
  // makes both entries durable. A pack without an index is never read.
  if (auto s = files::write_atomic(target + std::string(index_suffix), idx.str()); !s.ok()) return s.err();
  if (keys_ && ::unlink(pack_path.c_str()) != 0 && errno != ENOENT) return files::errno_error("unlink", pack_path);
  for (auto& [id, c] : entries) index_[id].push_back(std::move(c));
  return entries.size();
}

result<std::string> chunk_store::get(const crypto::digest& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return make_error(errc::not_found, "chunk not in the store");
  auto& copies = it->second;
  std::string why = "does not match its hash";
  while (!copies.empty()) {
    const stored_chunk& c = copies.front();
    std::string buf(c.length, '\0');
    int fd = ::open(c.pack.c_str(), O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && read_at(fd, buf, c.offset);
    if (fd >= 0) ::close(fd);
    if (ok && c.sealed) {
      auto plain = keys_ ? atrest::unseal(buf, *keys_, c.pack + " at " + std::to_string(c.offset))
                         : result<std::string>(make_error(errc::not_found, c.pack + ": sealed, and this store has no keys"));
      ok = plain.ok();
      if (ok) buf = std::move(*plain);
      else why = plain.err().message;
    }
    if (ok && crypto::sha256(buf) == id) return buf;
    copies.erase(copies.begin());
  }
  index_.erase(it);
  return make_error(errc::corruption, "stored chunk " + crypto::to_hex(crypto::as_view(id)) + " " + why + "; dropped");
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
