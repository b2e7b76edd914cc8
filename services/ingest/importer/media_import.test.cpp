// Images and audio through the importer (issue 33): a mixed folder of text,
// images with sidecar and manifest captions, speech with a transcript, copies
// and hostile files becomes one dataset: token shards for the text,
// WebDataset-style media tars for the images and audio, every
// refusal and duplicate in rejects.jsonl with its reason, no EXIF in anything
// stored, captions cleaned and redacted. Needs the GPT-2 vocabulary.
#include "libs/atrest/object.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/media/audio.hpp"
#include "libs/media/audio_fixtures.hpp"
#include "libs/media/audio_testing.hpp"
#include "libs/media/codec.hpp"
#include "libs/media/fixtures.hpp"
#include "libs/media/metadata.hpp"
#include "libs/media/normalise.hpp"
#include "libs/media/testing.hpp"
#include "libs/engine/kernels.hpp"
#include "libs/shards/check.hpp"
#include "libs/vision/filter.hpp"
#include "libs/vision/generate.hpp"
#include "services/ingest/importer/importer.hpp"
#include "services/ingest/importer/media_output.hpp"
#include "services/ingest/importer/testing.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sndfile.h>
#include <sstream>

using namespace loom;
using namespace loom::ingest;
using ingest::importer_testing::prose;
using ingest::importer_testing::slurp;
using ingest::importer_testing::write_file;

namespace {

// name -> bytes of every member of a tar.
std::map<std::string, std::string> untar(const std::string& tar) {
  std::map<std::string, std::string> out;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  REQUIRE(archive_read_open_memory(a, tar.data(), tar.size()) == ARCHIVE_OK);
  archive_entry* e;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string data(static_cast<std::size_t>(archive_entry_size(e)), '\0');
    if (!data.empty()) REQUIRE(archive_read_data(a, data.data(), data.size()) == static_cast<la_ssize_t>(data.size()));
    out[archive_entry_pathname(e)] = std::move(data);
  }
  archive_read_free(a);
  return out;
}

std::string jpeg_of(const media::image& img, int q = 88) {
  auto j = media::encode_jpeg(img, q);
  REQUIRE(j.ok());
  return *j;
}

std::string png_of(const media::image& img) {
  auto p = media::encode_png(img);
  REQUIRE(p.ok());
  return *p;
}

std::vector<nlohmann::json> jsonl(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("a folder of text, captioned images, copies and hostile files imports as shards plus media tars") {
  files::temp_dir t("loom-media-import");
  const std::string in = t.path() + "/in";
  const media::image a = media::testing::scene(1, 640, 480), b = media::testing::scene(2, 300, 200),
                     c = media::testing::scene(3, 400, 400);
  // a.jpg carries EXIF with GPS, an Artist and a CameraOwnerName.
  write_file(in + "/pics/a.jpg", media::testing::jpeg_insert_after_soi(jpeg_of(a), {{0xE1, media::testing::exif_block()}}));
  write_file(in + "/pics/a.txt", "A red barn at dusk, sent by jane.doe@example.com.\n");
  write_file(in + "/pics/b.png", png_of(b));
  write_file(in + "/pics/b.json", R"({"caption": "A  gradient\u00a0with shapes."})");
  write_file(in + "/pics/c.webp", media::testing::webp_lossy(c, 85));
  write_file(in + "/captions.jsonl", R"({"image": "pics/c.webp", "caption": "Three squares on blue."})" "\n"
                                     R"({"image": "pics/nowhere.jpg", "caption": "A lost one."})" "\n");
  std::vector<std::uint8_t> idx(64 * 48);
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::uint8_t>((i % 64) / 16 + (i / 64) / 12 * 4);
  std::vector<std::array<std::uint8_t, 3>> pal(16);
  for (int i = 0; i < 16; ++i) pal[i] = {static_cast<std::uint8_t>(i * 16), static_cast<std::uint8_t>(255 - i * 16), 128};
  write_file(in + "/pics/d.gif", media::testing::gif(64, 48, pal, {{0, 0, 64, 48, idx, -1, false}}));
  // Copies: a rescaled, re-encoded a (near) and b's pixels again as a PNG (exact).
  write_file(in + "/pics/e_small_copy.jpg", jpeg_of(media::resize_area(a, 480, 360), 75));
  write_file(in + "/pics/f_same_pixels.png", png_of(b));
  // Hostile: truncated, not an image at all, a JPEG named .png, a tracking pixel.
  const std::string whole = jpeg_of(c);
  write_file(in + "/bad/cut.jpg", whole.substr(0, whole.size() / 3));
  write_file(in + "/bad/fake.png", "this is not an image, whatever its name says\n");
  write_file(in + "/bad/liar.png", jpeg_of(b));
  write_file(in + "/bad/pixel.png", png_of(media::make_image(4, 4, 10, 20, 30)));
  write_file(in + "/notes.txt", prose(7, 300));
  // Audio: speech-like sound at 44.1 kHz stereo with a transcript, the same
  // samples again as FLAC (an exact duplicate once decoded), and silence.
  const auto talk = media::testing::speechlike(5, 2.0, 44100, 2);
  write_file(in + "/sound/talk.wav", media::encode_wav16(talk, 44100, 2));
  write_file(in + "/sound/talk.txt", "Hello from the river bank, mail sam@example.org tomorrow.");
  write_file(in + "/sound/talk_again.flac", media::testing::sf_encode(talk, 44100, 2, SF_FORMAT_FLAC | SF_FORMAT_PCM_16));
  write_file(in + "/sound/quiet.wav", media::encode_wav16(std::vector<float>(16000, 0.0f), 16000, 1));

  import_options o;
  o.source = in;
  o.datasets_root = t.path() + "/datasets";
  o.dataset = "mixed";
  o.memory_budget = 64u << 20;
  o.nodes = {"edge-a", "edge-b"};
  auto s = import_dataset(o);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  MESSAGE(summary_text(*s));
  const media_figures& m = s->media;
  CHECK(m.seen == 13);
  CHECK(m.images == 4);
  CHECK(m.audio == 1);
  CHECK(m.exact_duplicates == 2);
  CHECK(m.near_duplicates == 1);
  CHECK(m.rejected == 5);
  CHECK(m.rejected_by_reason == std::map<std::string, std::uint64_t>{{"truncated", 1},
                                                                      {"wrong_magic", 1},
                                                                      {"extension_mismatch", 1},
                                                                      {"too_small", 1},
                                                                      {"silent", 1}});
  CHECK(m.captioned == 4);
  CHECK(m.caption_problems == 1);
  CHECK(m.stripped.at("exif_gps") == 1);
  CHECK(m.stripped.at("exif:Artist") == 1);
  // The captions and the manifest are not documents: only notes.txt is text.
  CHECK(s->documents == 1);
  CHECK(s->kept == 1);

  const std::string dir = s->dir;
  auto man = shards::read_manifest(dir);
  REQUIRE(man.ok());
  REQUIRE(man->media.size() == 1);
  CHECK(man->media[0].records == 5);
  CHECK(man->media[0].kind == "mixed");
  CHECK((man->media[0].node == "edge-a" || man->media[0].node == "edge-b"));
  CHECK(shards::check_dataset_dir(dir).empty());

  auto tar = atrest::read_object(dir + "/" + man->media[0].name, atrest::sealing_keys().get());
  REQUIRE(tar.ok());
  const auto members = untar(*tar);
  // Records in input order: pics/a.jpg, pics/b.png, pics/c.webp, pics/d.gif, sound/talk.wav.
  REQUIRE(members.size() == 5 + 5 + 4);  // 5 files, 5 json, 4 captions (d.gif has none)
  const std::vector<std::string> sources = {"a.jpg", "b.png", "c.webp", "d.gif"};
  for (int i = 0; i < 4; ++i) {
    const std::string key = "00000000" + std::to_string(i);
    REQUIRE(members.count(key + ".jpg"));
    const std::string& img = members.at(key + ".jpg");
    const auto meta = media::scan_metadata(img);
    CHECK_FALSE(meta.exif);  // nothing stored keeps EXIF, GPS least of all
    CHECK_FALSE(meta.gps);
    auto dec = media::decode(img);
    REQUIRE(dec.ok());
    CHECK(std::max(dec->width, dec->height) <= 512);
    const auto j = nlohmann::json::parse(members.at(key + ".json"));
    CHECK(std::string(j["source"]).ends_with(sources[i]));
  }
  CHECK(members.at("000000000.txt") == "A red barn at dusk, sent by <EMAIL>.");
  CHECK(members.at("000000001.txt") == "A gradient with shapes.");
  CHECK(members.at("000000002.txt") == "Three squares on blue.");
  CHECK(nlohmann::json::parse(members.at("000000000.json"))["stripped"].size() >= 3);
  {  // the speech: 16 kHz mono, about as long as it was, at the target loudness
    REQUIRE(members.count("000000004.wav"));
    const auto dec = media::testing::sf_decode(members.at("000000004.wav"));
    CHECK(dec.rate == 16000);
    CHECK(dec.channels == 1);
    const double secs = static_cast<double>(dec.samples.size()) / 16000;
    CHECK(secs > 1.5);
    CHECK(secs <= 2.0 + 1e-3);
    auto l = media::measure_loudness(dec.samples, 16000);
    REQUIRE(l.ok());
    CHECK(std::abs(l->integrated_lufs - (-23)) < 1.0);
    CHECK(members.at("000000004.txt") == "Hello from the river bank, mail <EMAIL> tomorrow.");
    const auto j = nlohmann::json::parse(members.at("000000004.json"));
    CHECK(j["source_rate"] == 44100);
    CHECK(j["source_channels"] == 2);
  }

  std::map<std::string, std::string> rule_of;
  for (const auto& j : jsonl(*atrest::read_object(dir + "/rejects.jsonl", atrest::sealing_keys().get()))) {
    const std::string f = j["file"];
    rule_of[f.substr(f.rfind('/') + 1)] = j["rule"];
  }
  CHECK(rule_of["e_small_copy.jpg"] == "duplicate_near");
  CHECK(rule_of["f_same_pixels.png"] == "duplicate_exact");
  CHECK(rule_of["cut.jpg"] == "truncated");
  CHECK(rule_of["fake.png"] == "wrong_magic");
  CHECK(rule_of["liar.png"] == "extension_mismatch");
  CHECK(rule_of["pixel.png"] == "too_small");
  CHECK(rule_of["captions.jsonl"] == "caption_target_missing");
  CHECK(rule_of["talk_again.flac"] == "duplicate_exact");
  CHECK(rule_of["quiet.wav"] == "silent");

  const auto report = nlohmann::json::parse(slurp(dir + "/report.json"));
  CHECK(report["media"]["images"] == 4);
  CHECK(report["media"]["rejected_by_reason"]["truncated"] == 1);
  CHECK(report["media"]["tars"] == 1);

  SUBCASE("with media off, images are refused as before and sidecars are text again") {
    o.media = false;
    o.dataset = "textonly";
    auto s2 = import_dataset(o);
    REQUIRE_MESSAGE(s2.ok(), s2.err().to_string());
    CHECK(s2->media.seen == 0);
    auto m2 = shards::read_manifest(s2->dir);
    REQUIRE(m2.ok());
    CHECK(m2->media.empty());
    CHECK(s2->documents > 1);  // a.txt and the JSONL captions became documents
  }
}

TEST_CASE("media tars roll at the target size, keep keys contiguous and are byte-identical for the same input") {
  files::temp_dir t("loom-media-tars");
  auto write = [&](const std::string& sub) {
    std::string d = t.path() + "/" + sub;
    std::filesystem::create_directories(d);
    media_output out(d, 8192, nullptr);
    for (int i = 0; i < 7; ++i) {
      media_record r{"image", "jpg", std::string(2000 + i, static_cast<char>('a' + i)), i % 2 ? "cap " + std::to_string(i) : "",
                     "{\"i\":" + std::to_string(i) + "}"};
      REQUIRE(out.add(r).ok());
    }
    REQUIRE(out.finish().ok());
    return out.shards();
  };
  const auto one = write("one"), two = write("two");
  REQUIRE(one.size() >= 3);
  REQUIRE(one.size() == two.size());
  std::uint64_t records = 0;
  int next = 0;
  for (std::size_t k = 0; k < one.size(); ++k) {
    CHECK(one[k].sha256 == two[k].sha256);
    CHECK(one[k].name == media_shard_name(k + 1));
    CHECK(one[k].bytes <= 8192 + 4096);
    auto tar = atrest::read_object(t.path() + "/one/" + one[k].name);
    REQUIRE(tar.ok());
    CHECK(tar->size() == one[k].bytes);
    for (const auto& [name, data] : untar(*tar))
      if (name.ends_with(".jpg")) {
        CHECK(name == "00000000" + std::to_string(next) + ".jpg");
        CHECK(data.size() == std::size_t(2000 + next));
        ++next;
      }
    records += one[k].records;
  }
  CHECK(records == 7);
  CHECK(next == 7);
}

TEST_CASE("a learned image filter refuses the images it labels unusable, by label, and a bad model file stops the import") {
  files::temp_dir t("loom-media-filter");
  // A small model of the built-in generator: enough to tell a flat image from a scene.
  vision::filter_options fo;
  fo.epochs = 4;
  fo.seed = 3;
  engine::kernels::set_threads(2);
  auto model = vision::train_image_filter_generated(fo, 120, 11);
  REQUIRE_MESSAGE(model.ok(), model.err().to_string());
  const std::string model_path = t.path() + "/filter.cnn";
  REQUIRE(vision::save(*model, model_path).ok());

  const std::string in = t.path() + "/in";
  // Images of the generator's own kinds, from seeds it did not train on.
  for (int i = 0; i < 3; ++i)
    write_file(in + "/scene" + std::to_string(i) + ".png",
               png_of(vision::generate_example(vision::image_label::ok, 9000 + i).img));
  write_file(in + "/flat.png", png_of(vision::generate_example(vision::image_label::blank, 9100).img));
  // scene0 mirrored: its pHash is far from the original's, its embedding is not.
  media::image mirrored = vision::generate_example(vision::image_label::ok, 9000).img;
  for (std::uint32_t y = 0; y < mirrored.height; ++y)
    for (std::uint32_t x = 0; x < mirrored.width / 2; ++x)
      for (int c = 0; c < 3; ++c)
        std::swap(mirrored.pixels[y * mirrored.stride() + x * 3 + c],
                  mirrored.pixels[y * mirrored.stride() + (mirrored.width - 1 - x) * 3 + c]);
  write_file(in + "/scene0_mirrored.png", png_of(mirrored));
  import_options o;
  o.source = in;
  o.datasets_root = t.path() + "/datasets";
  o.dataset = "filtered";
  o.memory_budget = 64u << 20;
  o.image_filter = model_path;
  auto s = import_dataset(o);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  MESSAGE(summary_text(*s));
  for (const auto& [why, n] : s->media.rejected_by_reason) MESSAGE(why << " " << n);
  CHECK(s->media.images == 3);
  CHECK(s->media.rejected_by_reason == std::map<std::string, std::uint64_t>{{"image_blank", 1}});
  CHECK(s->media.near_duplicates == 0);      // pHash does not see the mirror...
  CHECK(s->media.semantic_duplicates == 1);  // ...the embedding does, and the three scenes stay apart
  bool named = false;
  for (const auto& j : jsonl(*atrest::read_object(s->dir + "/rejects.jsonl", atrest::sealing_keys().get())))
    named |= j["rule"] == "duplicate_semantic" && j["file"].get<std::string>().ends_with("scene0_mirrored.png") &&
             j["detail"].get<std::string>().find("semantic duplicate of") != std::string::npos;
  CHECK(named);
  auto tar = atrest::read_object(s->dir + "/" + s->manifest.media.at(0).name, atrest::sealing_keys().get());
  REQUIRE(tar.ok());
  CHECK(nlohmann::json::parse(untar(*tar).at("000000000.json"))["filter"] == "ok");

  // A damaged model file is refused by name before anything is read or published.
  std::string bytes = slurp(model_path);
  bytes[bytes.size() / 2] ^= 0x5a;
  write_file(model_path, bytes);
  o.dataset = "filtered2";
  auto bad = import_dataset(o);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().message.find(model_path) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.path() + "/datasets/filtered2"));
}

TEST_CASE("a caption sidecar that links outside the import roots is not read: the image stays, uncaptioned") {
  files::temp_dir t("loom-media-roots");
  const std::string in = t.path() + "/in", secret = t.path() + "/secret.txt";
  write_file(secret, "the root password is hunter2");
  write_file(in + "/a.png", png_of(media::testing::scene(5, 120, 90)));
  std::filesystem::create_symlink(secret, in + "/a.txt");  // a hostile tenant's "caption"
  import_options o;
  o.source = in;
  o.datasets_root = t.path() + "/datasets";
  o.dataset = "roots";
  o.memory_budget = 64u << 20;
  o.reader.roots = {in};
  auto s = import_dataset(o);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  CHECK(s->media.images == 1);
  CHECK(s->media.captioned == 0);
  CHECK(s->media.caption_problems == 1);
  auto tar = atrest::read_object(s->dir + "/" + s->manifest.media.at(0).name, atrest::sealing_keys().get());
  REQUIRE(tar.ok());
  CHECK(tar->find("hunter2") == std::string::npos);
  const std::string rejects = *atrest::read_object(s->dir + "/rejects.jsonl", atrest::sealing_keys().get());
  CHECK(rejects.find("caption_unreadable") != std::string::npos);
  CHECK(rejects.find("outside the allowed roots") != std::string::npos);
  CHECK(rejects.find("hunter2") == std::string::npos);
}
