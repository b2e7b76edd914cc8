#include "services/ingest/importer/media_output.hpp"

#include "libs/atrest/object.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/status/unix_time.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <cstdio>

namespace loom::ingest {
namespace {

// The ustar per-member cost: a 512-byte header, the data padded to 512.
std::uint64_t member_bytes(std::uint64_t data) { return 512 + (data + 511) / 512 * 512; }

la_ssize_t append_cb(struct archive*, void* client, const void* buf, size_t n) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

std::string key_of(std::uint64_t n) {
  char b[16];
  std::snprintf(b, sizeof b, "%09llu", static_cast<unsigned long long>(n));
  return b;
}

}  // namespace

void media_output::archive_closer::operator()(struct archive* a) const { archive_write_free(a); }

std::string media_shard_name(std::size_t n) {
  char b[32];
  std::snprintf(b, sizeof b, "media-%06zu.tar", n);
  return b;
}

media_output::media_output(std::string dir, std::uint64_t target_bytes, std::shared_ptr<atrest::kek_store> seal)
    : dir_(std::move(dir)), target_(target_bytes), seal_(std::move(seal)) {}

status media_output::open_tar() {
  tar_.clear();
  ar_.reset(archive_write_new());
  struct archive* a = ar_.get();
  if (!a) return make_error(errc::resource_exhausted, "media shard: out of memory for the tar writer");
  // ustar: every reader knows it (WebDataset, Python's tarfile, GNU tar); our
  // names are short and sizes far below its 8 GiB member limit.
  if (archive_write_set_format_ustar(a) != ARCHIVE_OK || archive_write_set_bytes_per_block(a, 512) != ARCHIVE_OK ||
      archive_write_open2(a, &tar_, nullptr, append_cb, nullptr, nullptr) != ARCHIVE_OK)
    return make_error(errc::internal, std::string("media shard: libarchive: ") + archive_error_string(a));
  return ok_status();
}

status media_output::put(const std::string& name, std::string_view data) {
  struct archive* a = ar_.get();
  std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(), archive_entry_free);
  archive_entry_set_pathname(e.get(), name.c_str());
  archive_entry_set_filetype(e.get(), AE_IFREG);
  archive_entry_set_perm(e.get(), 0644);
  archive_entry_set_size(e.get(), static_cast<la_int64_t>(data.size()));
  archive_entry_set_mtime(e.get(), 0, 0);  // reproducible tars: no clock in them
  if (archive_write_header(a, e.get()) != ARCHIVE_OK ||
      (!data.empty() && archive_write_data(a, data.data(), data.size()) != static_cast<la_ssize_t>(data.size())))
    return make_error(errc::internal, "media shard: writing " + name + ": " + archive_error_string(a));
  return ok_status();
}

status media_output::add(const media_record& r) {
  const std::uint64_t size = member_bytes(r.bytes.size()) + member_bytes(r.meta_json.size()) +
                             (r.caption.empty() ? 0 : member_bytes(r.caption.size()));
  if (ar_ && in_tar_ > 0 && tar_.size() + size + 1024 > target_) {
    if (auto st = publish(); !st) return st;
  }
  if (!ar_) {
    if (auto st = open_tar(); !st) return st;
  }
  const std::string key = key_of(records_);
  if (auto st = put(key + "." + r.ext, r.bytes); !st) return st;
  if (!r.caption.empty()) {
    if (auto st = put(key + ".txt", r.caption); !st) return st;
  }
  if (auto st = put(key + ".json", r.meta_json); !st) return st;
  ++in_tar_;
  ++records_;
  bytes_ += r.bytes.size();
  (r.kind == "audio" ? has_audio_ : has_image_) = true;
  return ok_status();
}

status media_output::publish() {
  if (archive_write_close(ar_.get()) != ARCHIVE_OK)  // the two zero blocks that end a tar
    return make_error(errc::internal, std::string("media shard: libarchive: ") + archive_error_string(ar_.get()));
  ar_.reset();
  shards::media_shard_info info;
  info.name = media_shard_name(shards_.size() + 1);
  info.sha256 = crypto::sha256_hex(tar_);
  info.bytes = tar_.size();
  info.records = in_tar_;
  info.kind = has_image_ && has_audio_ ? "mixed" : has_audio_ ? "audio" : "image";
  if (auto st = atrest::write_object(dir_ + "/" + info.name, tar_, seal_.get(), loom::wall_now()); !st) return st;
  shards_.push_back(std::move(info));
  tar_.clear();
  tar_.shrink_to_fit();
  in_tar_ = 0;
  has_image_ = has_audio_ = false;
  return ok_status();
}

status media_output::finish() {
  if (!ar_) return ok_status();
  return publish();
}

}  // namespace loom::ingest
