#include "libs/shards/writer.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/atrest/object.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"

#include <cstring>

namespace loom::shards {
namespace {

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

}  // namespace

result<shard_writer> shard_writer::create(writer_options opt) {
  if (opt.dir.empty()) return make_error(errc::invalid_argument, "shard_writer: empty dir");
  if (opt.target_bytes <= header_bytes)
    return make_error(errc::invalid_argument, "shard_writer: target_bytes " +
                                                  std::to_string(opt.target_bytes) +
                                                  " leaves no room after the 64-byte header");
  if (auto s = files::make_dirs(opt.dir); !s) return s.err();
  return shard_writer(std::move(opt));
}

std::uint64_t shard_writer::bytes_with(std::uint64_t more_tokens) const {
  return header_bytes + tokens_.size() + more_tokens * width(opt_.type) + (starts_.size() + 1) * 8;
}

status shard_writer::append(std::span<const std::uint32_t> doc) {
  if (finished_) return make_error(errc::invalid_argument, "shard_writer: append after finish");
  if (opt_.type == dtype::uint16) {
    for (std::size_t i = 0; i < doc.size(); ++i) {
      if (doc[i] > 0xFFFF)
        return make_error(errc::invalid_argument,
                          "shard_writer: token id " + std::to_string(doc[i]) + " at " +
                              std::to_string(i) + " does not fit a uint16 shard");
    }
  }
  if (!starts_.empty() && bytes_with(doc.size()) > opt_.target_bytes) {
    if (auto s = publish_shard(); !s) return s;
  }
  starts_.push_back(tokens_.size() / width(opt_.type));
  if (opt_.type == dtype::uint16) {
    for (std::uint32_t id : doc) put(tokens_, static_cast<std::uint16_t>(id));
  } else {
    tokens_.append(reinterpret_cast<const char*>(doc.data()), doc.size_bytes());
  }
  return ok_status();
}

status shard_writer::publish_shard() {
  const std::uint64_t tokens = tokens_.size() / width(opt_.type);
  const std::uint64_t docs = starts_.size();
  const std::uint64_t index_offset = header_bytes + tokens_.size();
  const std::uint64_t file_size = index_offset + docs * 8;
  std::string file;
  file.reserve(file_size);
  file.append(magic);
  put(file, format_version);
  put(file, static_cast<std::uint32_t>(opt_.type));
  put(file, tokens);
  put(file, docs);
  put(file, std::uint64_t{header_bytes});
  put(file, index_offset);
  put(file, file_size);
  put(file, std::uint64_t{0});
  file += tokens_;
  for (std::uint64_t s : starts_) put(file, s);

  shard_info info;
  info.name = shard_file_name(manifest_.shards.size() + 1);
  info.sha256 = crypto::sha256_hex(file);
  info.bytes = file.size();
  info.tokens = tokens;
  info.docs = docs;
  info.type = opt_.type;
  if (opt_.place) info.node = opt_.place(info);
  const auto now = opt_.now ? opt_.now() : loom::wall_now();
  if (auto s = atrest::write_object(opt_.dir + "/" + info.name, file, opt_.seal, now); !s) return s;
  manifest_.shards.push_back(std::move(info));
  tokens_.clear();
  starts_.clear();
  return ok_status();
}

result<manifest> shard_writer::finish() {
  if (finished_) return make_error(errc::invalid_argument, "shard_writer: finish called twice");
  finished_ = true;
  if (!starts_.empty()) {
    if (auto s = publish_shard(); !s) return s.err();
  }
  if (auto s = write_manifest(opt_.dir, manifest_); !s) return s.err();
  return manifest_;
}

}  // namespace loom::shards
