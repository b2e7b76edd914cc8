// One image or audio file through ingest. An image:
// probe under the limits -> the name must agree with the magic -> decode ->
// minimum size -> metadata report (what re-encoding strips) -> normalise ->
// encode without metadata -> fingerprints. Audio: probe -> name vs magic ->
// decode, 16 kHz mono, trim, loudness (libs/media/audio.hpp). And the dedup of media across the
// corpus: exact by a digest of the decoded content, near by pHash, and with a
// learned image filter semantic by the CNN's embedding (libs/vision/dedup.hpp:
// catches what pHash cannot, e.g. a mirrored copy); the first in input order
// is kept, as for text. Owned by the importing thread.
#pragma once

#include "libs/crypto/hash.hpp"
#include "libs/media/audio.hpp"
#include "libs/media/image.hpp"
#include "libs/media/normalise.hpp"
#include "libs/status/status.hpp"
#include "libs/vision/dedup.hpp"
#include "services/ingest/importer/import_options.hpp"
#include "services/ingest/importer/media_output.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loom::vision {
struct image_filter_model;
}

namespace loom::ingest {

// How a profile treats media. Plain values.
struct media_policy {
  media::limits image_limits;                                    // bombs, sizes: libs/media/image.hpp
  media::normalise_policy normalise{512, media::fit_mode::fit};  // 512: CLIP-era encoders train at 224-448
  bool store_png = false;  // false: JPEG (photos); true: PNG (drawings, screenshots: lossless)
  int jpeg_quality = 90;   // visually lossless for photos at a third of q=100's bytes
  std::uint32_t min_side = 16;  // smaller: an icon or a tracking pixel, not a training image
  bool near_dedup = true;
  int phash_threshold = 14;
  // Semantic dedup (with a learned filter): embedding cosine at or above this.
  // Mirrored copies score ~1.000; distinct generated scenes up to 0.93 under
  // the test model (libs/vision/dedup.test.cpp), so 0.98: this step is for
  // what pHash cannot see, and must not cost a distinct image.
  float semantic_threshold = 0.98f;
  media::audio_limits audio_limits;  // 0.25 s .. 10 min, <= 8 channels, 8-192 kHz: libs/media/audio.hpp
  media::audio_options audio;        // 16 kHz mono, silence trimmed, -23 LUFS  // media::phash_threshold: chosen on phash.test.cpp's generated set
};

// The media policy of an import profile ("default", "web", "code", "minimal":
// all the same today, but for "minimal", which stores PNG and keeps duplicates),
// its limits within the import's memory plan (file bytes, pixels, seconds).
media_policy media_policy_for(std::string_view profile, const budget_plan& plan);

// A processed image, ready to store.
struct processed_media {
  media_record record;           // kind, ext, bytes, meta_json (caption filled by the caller)
  std::uint64_t phash = 0;       // images only
  crypto::digest content{};      // pixels (images), samples (audio)
  std::vector<std::string> stripped;  // "exif_gps", "exif:Artist", "xmp", "icc", ... (empty: nothing)
  std::uint32_t width = 0, height = 0;
  std::vector<float> embedding;  // images under a learned filter: vision::embed_mirror_invariant; else empty
};

// The image at `name` (bytes whole). Errors are refusals: their message
// starts "<reason_code>: " (libs/media/reject.hpp codes, "too_small", and
// with a learned filter "image_blank", "image_blurred", "image_corrupted",
// "image_mostly_text"); media_reason() gives the code. `filter` (may be
// null: no learned check) is the CNN of libs/vision, run on the decoded image.
result<processed_media> process_image(const std::string& name, std::string_view bytes, const media_policy& p,
                                      const vision::image_filter_model* filter = nullptr);

// The audio file at `name`: 16 kHz mono 16-bit WAV, trimmed and loudness-
// normalised. Refusals as process_image's (libs/media reasons for audio).
result<processed_media> process_audio(const std::string& name, std::string_view bytes, const media_policy& p);

// The reason code of a process_* error ("truncated", "bomb", ...); "media_error" for one without.
std::string media_reason(const error& e);

// Exact and near duplicates among the media kept so far.
class media_dedup {
 public:
  struct hit {
    bool exact = false;
    std::string kept;  // the source name of the copy that stays
    int distance = 0;  // pHash distance (near)
    bool semantic = false;  // by embedding: pHash saw no copy
    float cosine = 0;       // embedding cosine (semantic)
  };
  explicit media_dedup(const media_policy& p)
      : near_(p.near_dedup), threshold_(p.phash_threshold), semantic_(p.semantic_threshold) {}

  // A duplicate of one kept earlier, or nullopt: then `m` is kept and remembered.
  // Near search is a scan of every kept pHash (one XOR and popcount each: ~1 ns,
  // so 100,000 images cost ~5 s over a whole import); an index over bands of
  // the hash would prune it, but at distance 14 of 64 bits pigeonhole needs 15
  // bands, and a scan is faster than that below millions.
  std::optional<hit> check(const processed_media& m, const std::string& source);

 private:
  bool near_;
  int threshold_;
  std::unordered_map<std::string, std::uint32_t> exact_;  // content digest (raw bytes) -> index into sources_
  std::vector<std::uint64_t> hashes_;                     // images only, parallel to hash_owner_
  std::vector<std::uint32_t> hash_owner_;
  vision::embedding_index semantic_;          // kept images' embeddings (when the import has a filter)
  std::vector<std::uint32_t> embedding_owner_;  // index into sources_, parallel to semantic_'s entries
  std::vector<std::string> sources_;
};

}  // namespace loom::ingest
