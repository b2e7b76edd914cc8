#include "services/ingest/importer/media_items.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/media/codec.hpp"
#include "libs/media/metadata.hpp"
#include "libs/media/phash.hpp"
#include "libs/media/probe.hpp"
#include "libs/media/reject.hpp"
#include "libs/vision/filter.hpp"

#include <nlohmann/json.hpp>

namespace loom::ingest {

media_policy media_policy_for(std::string_view profile, const budget_plan& plan) {
  media_policy p;
  p.image_limits.max_file_bytes = p.audio_limits.max_bytes = plan.media_file_bytes;
  p.image_limits.max_pixels = std::min(p.image_limits.max_pixels, plan.media_pixels);
  p.audio_limits.max_seconds = std::min(p.audio_limits.max_seconds, plan.media_seconds);
  if (profile == "minimal") {
    p.store_png = true;
    p.near_dedup = false;
  }
  return p;
}

std::string media_reason(const error& e) {
  if (auto r = media::reason_of(e)) return std::string(media::reason_code(*r));
  const auto colon = e.message.find(':');
  const std::string head = e.message.substr(0, colon);
  if (colon != std::string::npos && !head.empty() && head.find(' ') == std::string::npos) return head;
  return "media_error";
}

result<processed_media> process_image(const std::string& name, std::string_view bytes, const media_policy& p,
                                      const vision::image_filter_model* filter) {
  auto info = media::probe(bytes, p.image_limits);
  if (!info) return info.err();
  if (auto st = media::check_extension(name, info->fmt); !st) return st.err();
  auto img = media::decode(bytes, p.image_limits);
  if (!img) return img.err();
  if (img->width < p.min_side || img->height < p.min_side)
    return make_error(errc::invalid_argument, "too_small: " + std::to_string(img->width) + "x" +
                                                  std::to_string(img->height) + ", under " +
                                                  std::to_string(p.min_side) + " pixels a side");
  processed_media out;
  std::string verdict = "ok";
  if (filter) {
    const vision::classification c = vision::classify(*filter, *img);
    verdict = std::string(vision::label_name(c.label));
    if (c.label != vision::image_label::ok) {
      char p_text[16];
      std::snprintf(p_text, sizeof p_text, "%.2f", c.probabilities[static_cast<int>(c.label)]);
      return make_error(errc::invalid_argument,
                        "image_" + verdict + ": the learned image filter says " + verdict + " (p=" + p_text + ")");
    }
    out.embedding = vision::embed_mirror_invariant(*filter, *img);
  }
  const media::metadata_report meta = media::scan_metadata(bytes);
  if (meta.gps) out.stripped.push_back("exif_gps");
  for (const auto& t : meta.pii_tags) out.stripped.push_back("exif:" + t);
  if (meta.exif && !meta.gps && meta.pii_tags.empty()) out.stripped.push_back("exif");
  if (meta.xmp) out.stripped.push_back("xmp");
  if (meta.icc) out.stripped.push_back("icc");
  if (meta.iptc) out.stripped.push_back("iptc");
  for (const auto& k : meta.text_keys) out.stripped.push_back("text:" + k);

  // Fingerprints of the decoded original: a stored copy is smaller and lossy,
  // and two uploads of one photo at different sizes must still meet.
  out.phash = media::phash(*img);
  out.content = media::pixel_digest(*img);
  const media::image norm = media::normalise(*img, p.normalise);
  auto enc = p.store_png ? media::encode_png(norm) : media::encode_jpeg(norm, p.jpeg_quality);
  if (!enc) return enc.err();
  out.width = norm.width;
  out.height = norm.height;
  out.record.kind = "image";
  out.record.ext = p.store_png ? "png" : "jpg";
  out.record.bytes = std::move(*enc);
  nlohmann::json j = {{"source", name},
                      {"source_format", std::string(media::format_name(info->fmt))},
                      {"source_bytes", bytes.size()},
                      {"source_width", info->width},
                      {"source_height", info->height},
                      {"frames", info->frames},
                      {"width", norm.width},
                      {"height", norm.height},
                      {"phash", crypto::to_hex(std::string_view(reinterpret_cast<const char*>(&out.phash), 8))},
                      {"pixels_sha256", crypto::to_hex(crypto::as_view(out.content))},
                      {"stripped", out.stripped}};
  if (filter) j["filter"] = verdict;
  out.record.meta_json = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out;
}

result<processed_media> process_audio(const std::string& name, std::string_view bytes, const media_policy& p) {
  auto info = media::probe_audio(bytes, p.audio_limits);
  if (!info) return info.err();
  if (auto st = media::check_extension(name, info->fmt); !st) return st.err();
  auto clip = media::process_audio(bytes, p.audio_limits, p.audio);
  if (!clip) return clip.err();
  processed_media out;
  const media::audio_report& r = clip->report;
  // Exact duplicates: the same samples after decoding (a WAV and its FLAC meet).
  out.content = crypto::sha256(clip->wav);
  out.record.kind = "audio";
  out.record.ext = "wav";
  nlohmann::json j = {{"source", name},
                      {"source_format", std::string(media::audio_format_name(info->fmt))},
                      {"source_codec", info->codec},
                      {"source_bytes", bytes.size()},
                      {"source_rate", info->sample_rate},
                      {"source_channels", info->channels},
                      {"source_seconds", info->seconds},
                      {"rate", media::audio_output_rate},
                      {"seconds", r.seconds_out},
                      {"trimmed_start_ms", r.trimmed_start_ms},
                      {"trimmed_end_ms", r.trimmed_end_ms},
                      {"loudness_before_lufs", r.loudness_before_lufs},
                      {"loudness_lufs", r.loudness_after_lufs},
                      {"gain_db", r.gain_db},
                      {"peak_limited", r.peak_limited},
                      {"samples_sha256", crypto::to_hex(crypto::as_view(out.content))}};
  out.record.meta_json = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out.record.bytes = std::move(clip->wav);
  return out;
}

std::optional<media_dedup::hit> media_dedup::check(const processed_media& m, const std::string& source) {
  const std::string key(reinterpret_cast<const char*>(m.content.data()), m.content.size());
  if (auto it = exact_.find(key); it != exact_.end()) return hit{true, sources_[it->second], 0};
  const bool image = m.record.kind == "image";
  if (near_ && image) {
    for (std::size_t i = 0; i < hashes_.size(); ++i) {
      const int d = __builtin_popcountll(hashes_[i] ^ m.phash);
      if (d <= threshold_) return hit{false, sources_[hash_owner_[i]], d};
    }
  }
  const auto idx = static_cast<std::uint32_t>(sources_.size());
  if (near_ && image && !m.embedding.empty()) {  // kept by pHash: the same scene another way?
    const auto v = semantic_.add(m.embedding);   // adds it when it is no duplicate
    if (v.duplicate) return hit{false, sources_[embedding_owner_[v.of]], 0, true, v.cosine};
    embedding_owner_.push_back(idx);
  }
  sources_.push_back(source);
  exact_.emplace(key, idx);
  if (image) {
    hashes_.push_back(m.phash);
    hash_owner_.push_back(idx);
  }
  return std::nullopt;
}

}  // namespace loom::ingest
