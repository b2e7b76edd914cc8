#include "libs/cdc/served_dataset.hpp"

#include "libs/files/files.hpp"

#include "libs/cdc/plain_file.hpp"
#include "libs/cdc/protocol.hpp"
#include "libs/crypto/encoding.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::cdc {
namespace {

status write_exact(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return files::errno_error("write", path);
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

}  // namespace

dataset_cache::dataset_cache(params chunking) : chunking_(chunking) {}

result<std::shared_ptr<const snapshot>> dataset_cache::refresh(const std::string& dir, const std::string& dataset) {
  if (auto s = valid_dataset_name(dataset); !s.ok()) return s.err();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error(errc::not_found, "no dataset \"" + dataset + "\"");
  // One refresh at a time: concurrent sessions share the work of the first.
  std::lock_guard lock(mu_);
  auto it = last_.find(dir);
  const manifest* previous = it != last_.end() ? &it->second->m : nullptr;
  auto m = build_manifest(dir, chunking_, previous);
  if (!m.ok()) return m.err();
  auto s = std::make_shared<snapshot>();
  s->dir = dir;
  s->m = std::move(*m);
  for (std::uint32_t f = 0; f < s->m.files.size(); ++f)
    for (std::uint32_t c = 0; c < s->m.files[f].chunks.size(); ++c)
      s->index.try_emplace(s->m.files[f].chunks[c].sha256, chunk_location{f, c});
  last_[dir] = s;
  return std::shared_ptr<const snapshot>(s);
}

result<std::uint64_t> build_pack(const snapshot& s, const std::vector<crypto::digest>& ids,
                                 const std::string& pack_path, bool corrupt_first,
                                 const wire::bulk_piece_codec* codec, std::uint32_t piece_bytes) {
  // Where the chunks go: a sealed-pieces writer, or the plain file.
  std::optional<wire::pieces_writer> sealed;
  int out = -1;
  if (codec) {
    auto w = wire::pieces_writer::create(pack_path, piece_bytes, *codec);
    if (!w.ok()) return w.err();
    sealed.emplace(std::move(*w));
  } else {
    out = ::open(pack_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) return files::errno_error("create", pack_path);
  }
  plain_file_cache sources;
  std::string buf;
  std::uint64_t total = 0;
  auto fail = [&](error e) -> result<std::uint64_t> {
    sealed.reset();  // removes its file
    if (out >= 0) {
      ::close(out);
      ::unlink(pack_path.c_str());
    }
    return e;
  };
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto it = s.index.find(ids[i]);
    if (it == s.index.end())
      return fail(make_error(errc::not_found, "chunk " + crypto::to_hex(crypto::as_view(ids[i])) +
                                                  " is not in the dataset"));
    const file_entry& f = s.m.files[it->second.file];
    const chunk& c = f.chunks[it->second.chunk];
    total += c.length;
    if (total > max_pack_bytes) return fail(make_error(errc::invalid_argument, "pack larger than 64 MiB"));
    std::string path = s.dir + "/" + f.path;
    auto src = sources.get(path);
    if (!src.ok()) return fail(src.err().code == errc::not_found && src.err().message.starts_with("open ")
                                   ? make_error(errc::conflict, path + " was removed since its manifest")
                                   : src.err());
    buf.resize(c.length);
    if (auto st = (*src)->read(c.offset, buf.data(), c.length); !st.ok()) return fail(st.err());
    if (crypto::sha256(buf) != c.sha256)
      return fail(make_error(errc::conflict, path + " changed since its manifest was built"));
    if (corrupt_first && i == 0) buf[buf.size() / 2] ^= 0x20;
    if (auto st = sealed ? sealed->append(buf) : write_exact(out, buf, pack_path); !st.ok()) return fail(st.err());
  }
  if (sealed) {
    auto n = sealed->finish();
    if (!n.ok()) return n.err();
    return total;
  }
  if (::close(out) != 0) {
    auto e = files::errno_error("close", pack_path);
    ::unlink(pack_path.c_str());
    return e;
  }
  return total;
}

}  // namespace loom::cdc
