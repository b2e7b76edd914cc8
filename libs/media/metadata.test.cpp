#include "libs/media/metadata.hpp"

#include "libs/media/codec.hpp"
#include "libs/media/fixtures.hpp"
#include "libs/media/normalise.hpp"
#include "libs/media/testing.hpp"

#include <doctest/doctest.h>

#include <algorithm>

using namespace loom::media;
using namespace loom::media::testing;

namespace {

const std::string xmp_packet =
    "<x:xmpmeta xmlns:x='adobe:ns:meta/'><rdf:RDF><rdf:Description exif:GPSLatitude='52,31.2N'/>"
    "</rdf:RDF></x:xmpmeta>";

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// A JPEG as a phone would write it: EXIF with GPS and names, XMP, ICC, a comment.
std::string camera_jpeg(const image& img) {
  return jpeg_insert_after_soi(*encode_jpeg(img, 90),
                               {{0xE1, exif_block()},
                                {0xE1, std::string("http://ns.adobe.com/xap/1.0/\0", 29) + xmp_packet},
                                {0xE2, std::string("ICC_PROFILE\0\x01\x01", 14) + std::string(128, 'i')},
                                {0xFE, "shot by Jane"}});
}

}  // namespace

TEST_CASE("EXIF GPS, Artist and owner, XMP, ICC and a comment are reported for a camera JPEG") {
  const image img = scene(30, 80, 60);
  const std::string jpg = camera_jpeg(img);
  const auto r = scan_metadata(jpg);
  CHECK(r.exif);
  CHECK(r.gps);
  CHECK(has(r.pii_tags, "Artist"));
  CHECK(has(r.pii_tags, "CameraOwnerName"));
  CHECK_FALSE(has(r.pii_tags, "Copyright"));
  CHECK(r.xmp);
  CHECK(r.icc);
  CHECK(has(r.text_keys, "comment"));
  CHECK(r.any());
  const auto d = decode(jpg);  // the segments do not disturb decoding
  REQUIRE(d.ok());
  CHECK(d->width == 80);
}

TEST_CASE("GPS shows up from EXIF alone, not only from XMP") {
  const std::string jpg = jpeg_insert_after_soi(*encode_jpeg(scene(31, 16, 16), 80), {{0xE1, exif_block()}});
  const auto r = scan_metadata(jpg);
  CHECK(r.exif);
  CHECK(r.gps);
  CHECK_FALSE(r.xmp);
}

TEST_CASE("PNG eXIf, iTXt XMP, iCCP and text keys are reported") {
  const image img = scene(32, 40, 40);
  const std::string tiff = exif_block().substr(6);  // eXIf holds TIFF without the "Exif\0\0" header
  const std::string png = png_insert_after_ihdr(
      *encode_png(img), {png_chunk("iCCP", std::string("sRGB\0\0", 6) + "x"), png_chunk("eXIf", tiff),
                         png_chunk("tEXt", std::string("Author\0Jane", 11)),
                         png_chunk("iTXt", std::string("XML:com.adobe.xmp\0\0\0\0\0", 22) + xmp_packet)});
  const auto r = scan_metadata(png);
  CHECK(r.exif);
  CHECK(r.gps);
  CHECK(has(r.pii_tags, "Artist"));
  CHECK(r.xmp);
  CHECK(r.icc);
  CHECK(has(r.text_keys, "Author"));
  CHECK_FALSE(has(r.text_keys, "XML:com.adobe.xmp"));
  const auto d = decode(png);
  REQUIRE(d.ok());
  CHECK(d->pixels == img.pixels);
}

TEST_CASE("WebP EXIF, XMP and ICCP chunks are reported") {
  const image img = scene(33, 24, 24);
  const std::string webp =
      webp_with_chunks(img, {{"ICCP", std::string(64, 'i')}, {"EXIF", exif_block().substr(6)}, {"XMP ", xmp_packet}});
  const auto r = scan_metadata(webp);
  CHECK(r.exif);
  CHECK(r.gps);
  CHECK(has(r.pii_tags, "CameraOwnerName"));
  CHECK(r.xmp);
  CHECK(r.icc);
  const auto d = decode(webp);
  REQUIRE(d.ok());
  CHECK(d->pixels == img.pixels);
}

TEST_CASE("normalised and re-encoded output carries no EXIF, GPS or XMP") {
  const std::string jpg = camera_jpeg(scene(34, 300, 200));
  REQUIRE(scan_metadata(jpg).gps);
  const auto d = decode(jpg);
  REQUIRE(d.ok());
  for (auto mode : {fit_mode::fit, fit_mode::center_crop}) {
    const image n = normalise(*d, {128, mode});
    for (const auto& out : {*encode_jpeg(n, 85), *encode_png(n)}) {
      const auto r = scan_metadata(out);
      CHECK_FALSE(r.exif);
      CHECK_FALSE(r.gps);
      CHECK_FALSE(r.xmp);
      CHECK_FALSE(r.icc);
      CHECK(r.pii_tags.empty());
      CHECK(r.text_keys.empty());
      CHECK_FALSE(r.any());
    }
  }
}

TEST_CASE("metadata scans of damaged or foreign bytes report what they found and never fail") {
  const std::string jpg = camera_jpeg(scene(35, 32, 32));
  for (std::size_t cut = 0; cut < jpg.size(); cut += 7) (void)scan_metadata(std::string_view(jpg).substr(0, cut));
  CHECK_FALSE(scan_metadata("plain text").any());
  std::string bad_exif = jpeg_insert_after_soi(*encode_jpeg(scene(36, 8, 8), 80),
                                               {{0xE1, std::string("Exif\0\0II*\0\xff\xff\xff\x7f", 14)}});
  const auto r = scan_metadata(bad_exif);
  CHECK(r.exif);  // present, though unreadable
  CHECK_FALSE(r.gps);
}
