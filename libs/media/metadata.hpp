// What metadata an image file carries, for the ingest report: EXIF (parsed with
// libexif: GPS and the tags that name or describe people), XMP, ICC, IPTC and
// text chunks. Ingest never stores the original bytes: it stores the output of
// normalise() + encode_*(), which writes none of these, so this report is the
// list of what was stripped. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom::media {

struct metadata_report {
  bool exif = false;                    // an EXIF block (JPEG APP1, PNG eXIf, WebP EXIF)
  bool gps = false;                     // any tag in EXIF's GPS IFD, or GPS properties in XMP
  std::vector<std::string> pii_tags;    // EXIF tags present, by name: "Artist", "Copyright",
                                        // "ImageDescription", "UserComment", "CameraOwnerName",
                                        // "BodySerialNumber", "XPAuthor", "XPComment"
  bool xmp = false;                     // JPEG APP1 XMP, PNG iTXt XML:com.adobe.xmp, WebP XMP, GIF XMP app ext
  bool icc = false;                     // JPEG APP2 ICC_PROFILE, PNG iCCP, WebP ICCP
  bool iptc = false;                    // JPEG APP13 "Photoshop 3.0"
  std::vector<std::string> text_keys;   // PNG tEXt/zTXt/iTXt keywords; "comment" for JPEG COM / GIF comment

  // Whether anything at all was found (and so was stripped by re-encoding).
  bool any() const;
};

// Scans the container's metadata segments (no pixel decode). Unknown or
// malformed input gives whatever was found before the damage, never an error:
// the decode path is what refuses bad files.
metadata_report scan_metadata(std::string_view bytes);

}  // namespace loom::media
