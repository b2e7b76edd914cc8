// What a kept image or audio file becomes in the dataset: a record of a
// WebDataset-style tar shard ("media-000001.tar", ~16 MiB each), written as
// three members that share the record's key (its number, 9 digits):
//   000000042.jpg   the normalised bytes (jpg/png for images, wav for audio)
//   000000042.txt   the caption or transcript (absent when there is none)
//   000000042.json  what ingest knows of it: source, sizes, hashes, stripped metadata
// Members are ustar entries with mode 0644, owner 0 and mtime 0, so the same
// input makes byte-identical tars. Each tar is built in memory (one shard at
// most in flight), sealed at rest like the token shards, and listed in the
// manifest's "media" array with the plaintext's SHA-256. Owned by the
// importing thread.
#pragma once

#include "libs/shards/manifest.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct archive;

namespace loom::atrest {
class kek_store;
}

namespace loom::ingest {

struct media_record {
  std::string kind;       // "image" or "audio"
  std::string ext;        // of the stored bytes: "jpg", "png", "wav"
  std::string bytes;      // the normalised file
  std::string caption;    // "" = none
  std::string meta_json;  // one JSON object
};

class media_output {
 public:
  // Tars of about `target_bytes` each into `dir`, sealed under `seal` when given.
  media_output(std::string dir, std::uint64_t target_bytes, std::shared_ptr<atrest::kek_store> seal);

  // One record; a tar that would pass the target with it is published first.
  status add(const media_record& r);
  // Publishes the last tar. Call once; then shards() is complete.
  status finish();

  const std::vector<shards::media_shard_info>& shards() const { return shards_; }
  std::uint64_t records() const { return records_; }
  std::uint64_t bytes() const { return bytes_; }  // of the stored files (not the tar headers)

 private:
  status publish();
  status open_tar();
  status put(const std::string& name, std::string_view data);

  struct archive_closer {
    void operator()(struct archive* a) const;
  };

  std::string dir_;
  std::uint64_t target_;
  std::shared_ptr<atrest::kek_store> seal_;
  std::unique_ptr<struct archive, archive_closer> ar_;  // the open shard's writer (null: none open)
  std::string tar_;             // what it wrote so far
  std::uint64_t in_tar_ = 0;    // records in it
  bool has_image_ = false, has_audio_ = false;
  std::vector<shards::media_shard_info> shards_;
  std::uint64_t records_ = 0, bytes_ = 0;
};

// The name of media tar n (1-based): "media-000001.tar".
std::string media_shard_name(std::size_t n);

}  // namespace loom::ingest
