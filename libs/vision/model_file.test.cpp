#include "libs/vision/filter.hpp"

#include "libs/engine/kernels.hpp"
#include "libs/files/files.hpp"
#include "libs/vision/generate.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <unistd.h>

namespace lv = loom::vision;

namespace {

// A tiny model: the file format does not care how good it is.
const lv::image_filter_model& small_model() {
  static const lv::image_filter_model m = [] {
    loom::engine::kernels::set_threads(2);
    lv::filter_options o;
    o.net.input = 16;
    o.net.channels = {4, 4, 8, 8};
    o.net.embed = 8;
    o.epochs = 1;
    o.batch = 5;
    auto r = lv::train_image_filter(o, lv::generate_set(3, 2));
    REQUIRE(r.ok());
    return std::move(*r);
  }();
  return m;
}

struct temp_dir {
  std::string path = std::filesystem::temp_directory_path() / ("vision_test_" + std::to_string(::getpid()));
  temp_dir() { std::filesystem::create_directories(path); }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

std::string write(const temp_dir& d, const std::string& name, const std::string& bytes) {
  const std::string p = d.path + "/" + name;
  REQUIRE(loom::files::write_atomic(p, bytes).ok());
  return p;
}

}  // namespace

TEST_CASE("a saved model loads back with the same weights and gives the same answers") {
  temp_dir d;
  const auto& m = small_model();
  const std::string path = d.path + "/filter.model";
  REQUIRE(lv::save(m, path).ok());
  auto back = lv::load(path);
  REQUIRE(back.ok());
  CHECK(back->net == m.net);
  CHECK(back->params == m.params);
  CHECK(back->hand_mean == m.hand_mean);
  CHECK(back->embed_std == m.embed_std);
  const auto img = lv::generate_example(lv::image_label::mostly_text, 5).img;
  CHECK(lv::classify(*back, img).probabilities == lv::classify(m, img).probabilities);
  CHECK(lv::embed(*back, img) == lv::embed(m, img));
}

TEST_CASE("truncated, extended, damaged and foreign model files are refused naming the file and the fault") {
  temp_dir d;
  const std::string good = d.path + "/good.model";
  REQUIRE(lv::save(small_model(), good).ok());
  const std::string bytes = *loom::files::read_file(good);

  auto refused = [](const std::string& path, loom::errc code, const std::string& fault) {
    auto r = lv::load(path);
    REQUIRE_FALSE(r.ok());
    INFO(r.err().to_string());
    CHECK(r.code() == code);
    CHECK(r.err().message.find(path) != std::string::npos);
    CHECK(r.err().message.find(fault) != std::string::npos);
  };
  refused(write(d, "cut.model", bytes.substr(0, bytes.size() - 100)), loom::errc::corruption, "truncated");
  refused(write(d, "header.model", bytes.substr(0, 20)), loom::errc::corruption, "truncated");
  refused(write(d, "long.model", bytes + "extra"), loom::errc::corruption, "bytes after the end");
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  refused(write(d, "flip.model", flipped), loom::errc::corruption, "checksum mismatch");
  std::string version = bytes;
  version[8] = 9;
  refused(write(d, "version.model", version), loom::errc::corruption, "unsupported version 9");
  std::string config = bytes;
  config[12] = 7;  // input side 7: not a multiple of 8
  refused(write(d, "config.model", config), loom::errc::corruption, "invalid config");
  refused(write(d, "foreign.model", "\x89PNG\r\n\x1a\n not a model at all"), loom::errc::invalid_argument, "not an image filter model");
  refused(write(d, "empty.model", ""), loom::errc::invalid_argument, "not an image filter model");
  CHECK(lv::load(d.path + "/missing.model").code() == loom::errc::not_found);
}

TEST_CASE("saving a model whose sizes disagree with its config is refused") {
  temp_dir d;
  lv::image_filter_model m = small_model();
  m.params.pop_back();
  CHECK(lv::save(m, d.path + "/x.model").code() == loom::errc::invalid_argument);
}
