// scan_metadata(): the container walks of containers.hpp pick out the
// metadata segments; libexif parses EXIF blocks.
#include "libs/media/metadata.hpp"

#include "libs/media/containers.hpp"
#include "libs/media/probe.hpp"

#include <libexif/exif-data.h>

#include <algorithm>
#include <memory>
#include <string>

namespace loom::media {
namespace {

using detail::walk_gif;
using detail::walk_jpeg;
using detail::walk_png;
using detail::walk_riff;

// EXIF tags that name, describe or identify a person or their camera.
struct pii_tag {
  ExifTag tag;
  const char* name;
};
constexpr pii_tag pii_tags[] = {
    {EXIF_TAG_ARTIST, "Artist"},
    {EXIF_TAG_COPYRIGHT, "Copyright"},
    {EXIF_TAG_IMAGE_DESCRIPTION, "ImageDescription"},
    {EXIF_TAG_USER_COMMENT, "UserComment"},
    {EXIF_TAG_CAMERA_OWNER_NAME, "CameraOwnerName"},
    {EXIF_TAG_BODY_SERIAL_NUMBER, "BodySerialNumber"},
    {EXIF_TAG_XP_AUTHOR, "XPAuthor"},
    {EXIF_TAG_XP_COMMENT, "XPComment"},
};

constexpr std::string_view exif_header("Exif\0\0", 6);
constexpr std::string_view xmp_jpeg_header("http://ns.adobe.com/xap/1.0/\0", 29);

void add_unique(std::vector<std::string>& v, std::string s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(std::move(s));
}

// block: "Exif\0\0" + TIFF, or TIFF alone (PNG eXIf, most WebP EXIF chunks).
void parse_exif(std::string_view block, metadata_report& r) {
  r.exif = true;
  std::string owned;
  if (block.substr(0, 6) != exif_header) {
    owned.assign(exif_header);
    owned.append(block);
    block = owned;
  }
  std::unique_ptr<ExifData, void (*)(ExifData*)> ed(exif_data_new(), exif_data_unref);
  if (!ed) return;
  // Keep every tag as found: no dropping of tags libexif does not know in an
  // IFD, no "fixing" of the data to the specification.
  exif_data_unset_option(ed.get(), EXIF_DATA_OPTION_IGNORE_UNKNOWN_TAGS);
  exif_data_unset_option(ed.get(), EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  exif_data_load_data(ed.get(), reinterpret_cast<const unsigned char*>(block.data()),
                      static_cast<unsigned int>(std::min<std::size_t>(block.size(), 0xffffffffu)));
  if (ed->ifd[EXIF_IFD_GPS] && ed->ifd[EXIF_IFD_GPS]->count > 0) r.gps = true;
  for (const auto& t : pii_tags)
    for (int ifd = 0; ifd < EXIF_IFD_COUNT; ++ifd)
      if (ed->ifd[ifd] && exif_content_get_entry(ed->ifd[ifd], t.tag)) {
        add_unique(r.pii_tags, t.name);
        break;
      }
}

void note_xmp(std::string_view packet, metadata_report& r) {
  r.xmp = true;
  if (packet.find("GPSLatitude") != std::string_view::npos || packet.find("GPSLongitude") != std::string_view::npos)
    r.gps = true;
}

void scan_jpeg(std::string_view b, metadata_report& r) {
  walk_jpeg(b, [&](unsigned char marker, std::string_view p) {
    if (marker == 0xE1 && p.substr(0, 6) == exif_header) parse_exif(p, r);
    if (marker == 0xE1 && p.substr(0, xmp_jpeg_header.size()) == xmp_jpeg_header)
      note_xmp(p.substr(xmp_jpeg_header.size()), r);
    if (marker == 0xE1 && p.substr(0, 34) == "http://ns.adobe.com/xmp/extension/") r.xmp = true;
    if (marker == 0xE2 && p.substr(0, 12) == std::string_view("ICC_PROFILE\0", 12)) r.icc = true;
    if (marker == 0xED && p.substr(0, 14) == std::string_view("Photoshop 3.0\0", 14)) r.iptc = true;
    if (marker == 0xFE) add_unique(r.text_keys, "comment");
    return true;
  });
}

void scan_png(std::string_view b, metadata_report& r) {
  walk_png(b, [&](std::string_view type, std::string_view data) {
    if (type == "eXIf") parse_exif(data, r);
    if (type == "iCCP") r.icc = true;
    if (type == "tEXt" || type == "zTXt" || type == "iTXt") {
      const std::string key(data.substr(0, data.find('\0')));
      if (type == "iTXt" && key == "XML:com.adobe.xmp") {
        note_xmp(data, r);
      } else {
        if (key == "Raw profile type exif" || key == "Raw profile type APP1") r.exif = true;  // ImageMagick's hex EXIF
        add_unique(r.text_keys, key);
      }
    }
    return true;
  });
}

void scan_webp(std::string_view b, metadata_report& r) {
  walk_riff(b, [&](std::string_view fourcc, std::string_view data) {
    if (fourcc == "EXIF") parse_exif(data, r);
    if (fourcc == "XMP ") note_xmp(data, r);
    if (fourcc == "ICCP") r.icc = true;
    return true;
  });
}

void scan_gif(std::string_view b, metadata_report& r) {
  detail::gif_layout g;
  walk_gif(b, g, [&](unsigned char label, std::string_view first) {
    if (label == 0xFE) add_unique(r.text_keys, "comment");
    if (label == 0xFF && first == "XMP DataXMP") r.xmp = true;
    if (label == 0xFF && first == "ICCRGBG1012") r.icc = true;
  });
}

}  // namespace

bool metadata_report::any() const {
  return exif || gps || xmp || icc || iptc || !pii_tags.empty() || !text_keys.empty();
}

metadata_report scan_metadata(std::string_view bytes) {
  metadata_report r;
  const auto f = sniff(bytes);
  if (!f) return r;
  switch (*f) {
    case format::jpeg: scan_jpeg(bytes, r); break;
    case format::png: scan_png(bytes, r); break;
    case format::webp: scan_webp(bytes, r); break;
    case format::gif: scan_gif(bytes, r); break;
  }
  return r;
}

}  // namespace loom::media
