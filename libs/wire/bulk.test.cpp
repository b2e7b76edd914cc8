#include "libs/wire/bulk_receiver.hpp"
#include "libs/wire/bulk_sender.hpp"
#include "libs/wire/bulk_transport.hpp"
#include "libs/wire/link_spec.hpp"

#include "libs/files/files.hpp"
#include "loom/v1/bulk.pb.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>
#include <zmq_addon.hpp>

namespace fs = std::filesystem;
using namespace loom;
using namespace loom::wire;

namespace {

constexpr std::uint64_t file_bytes = 8 * (1u << 20) + (1u << 19);  // 8.5 MiB -> 9 chunks of 1 MiB

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/loom-bulk-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~temp_dir() { fs::remove_all(path); }
};

std::string random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::string write_file(const std::string& path, std::size_t n, std::uint64_t seed) {
  auto data = random_bytes(n, seed);
  REQUIRE(files::write_atomic(path, data).ok());
  return data;
}

std::string slurp(const std::string& path) {
  auto r = files::read_file(path);
  REQUIRE(r.ok());
  return *r;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A ROUTER on its own thread feeding a bulk_receiver: the shape of a real owner.
class bulk_server {
 public:
  bulk_server(zmq::context_t& ctx, const std::string& bind_to, std::string dest)
      : socket_(ctx, zmq::socket_type::router), receiver_(std::move(dest)) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::sndtimeo, 2000);
    socket_.bind(bind_to);
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { run(); });  // the socket moves to that thread from here on
  }
  ~bulk_server() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void run() {
    std::vector<std::string> reply;
    while (!stop_) {
      zmq_pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) == 0) continue;
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(socket_, std::back_inserter(frames), zmq::recv_flags::dontwait)) continue;
      zmq::message_t identity = std::move(frames.front());
      frames.erase(frames.begin());
      serve_bulk_message(receiver_, frames, reply);
      socket_.send(identity, zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(reply[0]), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(reply[1]), zmq::send_flags::none);
    }
    socket_.close();
  }

  zmq::socket_t socket_;
  bulk_receiver receiver_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

zmq::socket_t connect_dealer(zmq::context_t& ctx, const std::string& endpoint) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 5000);
  s.set(zmq::sockopt::sndtimeo, 5000);
  s.connect(endpoint);
  return s;
}

send_options test_options() {
  send_options o;
  o.reply_timeout = std::chrono::milliseconds(10000);
  static int next = 0;  // distinct, deterministic ids across calls
  o.transfer_id = "t-" + std::to_string(++next);
  return o;
}

// `base` with a fresh transfer id.
send_options test_options_with(send_options base) {
  base.transfer_id = test_options().transfer_id;
  return base;
}

bulk_chunk_header header_for(const std::string& id, std::uint32_t index, std::uint64_t offset, std::string_view data) {
  return {id, index, offset, crypto::sha256(data)};
}

}  // namespace

TEST_CASE("a sender splits an 8.5 MiB file into nine 1 MiB chunks whose hashes match their bytes") {
  temp_dir dir;
  auto data = write_file(dir.path + "/src", file_bytes, 1);
  auto tx = bulk_sender::open(dir.path + "/src", "model.bin");
  REQUIRE(tx.ok());
  const auto& o = tx->offer();
  CHECK(o.total_bytes == file_bytes);
  CHECK(o.chunk_bytes == default_chunk_bytes);
  CHECK(o.chunk_count == 9);
  CHECK(o.transfer_id.size() == 32);
  CHECK(o.sha256 == crypto::sha256(data));
  auto last = tx->chunk(8);
  REQUIRE(last.ok());
  CHECK(last->header.offset == 8u * default_chunk_bytes);
  CHECK(last->data == data.substr(8u * default_chunk_bytes));
  CHECK(last->header.sha256 == crypto::sha256(last->data));
  CHECK(tx->chunk(9).code() == errc::invalid_argument);
  CHECK(bulk_sender::open(dir.path + "/src", "../x").code() == errc::invalid_argument);
  CHECK(bulk_sender::open(dir.path + "/missing", "x").code() == errc::not_found);
}

TEST_CASE("an 8.5 MiB file sent over tcp loopback arrives with identical bytes and sha256") {
  temp_dir src, dst;
  auto data = write_file(src.path + "/f", file_bytes, 2);
  zmq::context_t ctx;
  bulk_server server(ctx, "tcp://127.0.0.1:*", dst.path);
  auto dealer = connect_dealer(ctx, server.endpoint());
  auto stats = send_file(dealer, src.path + "/f", "f.bin", test_options());
  REQUIRE_MESSAGE(stats.ok(), stats.err().to_string());
  CHECK(stats->complete);
  CHECK(stats->chunks_sent == 9);
  CHECK(stats->chunks_resent == 0);
  CHECK(stats->chunks_skipped == 0);
  CHECK(stats->bytes_sent == file_bytes);
  auto got = slurp(dst.path + "/f.bin");
  CHECK(got.size() == data.size());
  CHECK(crypto::sha256(got) == crypto::sha256(data));
  CHECK(got == data);
  CHECK(entries(dst.path) == std::vector<std::string>{"f.bin"});  // no .part / .state left
}

TEST_CASE("chunks 2 and 5 corrupted on their first attempt are re-sent once and the file is correct") {
  temp_dir src, dst;
  auto data = write_file(src.path + "/f", file_bytes, 3);
  zmq::context_t ctx;
  bulk_server server(ctx, "inproc://bulk-corrupt", dst.path);
  auto dealer = connect_dealer(ctx, server.endpoint());
  auto opt = test_options();
  opt.corrupt_chunk = [](std::uint32_t index, std::uint32_t attempt) {
    return (index == 2 || index == 5) && attempt == 1;
  };
  auto stats = send_file(dealer, src.path + "/f", "f.bin", opt);
  REQUIRE_MESSAGE(stats.ok(), stats.err().to_string());
  CHECK(stats->chunks_resent == 2);
  CHECK(stats->chunks_sent == 11);
  CHECK(stats->bytes_sent == file_bytes + 2 * default_chunk_bytes);
  CHECK(slurp(dst.path + "/f.bin") == data);
}

TEST_CASE("a chunk corrupted on every attempt fails the transfer as corruption after max_attempts sends") {
  temp_dir src, dst;
  write_file(src.path + "/f", 3 * 1000, 4);
  zmq::context_t ctx;
  bulk_server server(ctx, "inproc://bulk-always-bad", dst.path);
  auto dealer = connect_dealer(ctx, server.endpoint());
  auto opt = test_options();
  opt.chunk_bytes = 1000;
  opt.max_attempts = 3;
  opt.corrupt_chunk = [](std::uint32_t index, std::uint32_t) { return index == 1; };
  auto stats = send_file(dealer, src.path + "/f", "f.bin", opt);
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.code() == errc::corruption);
  CHECK(stats.err().message.find("sha256 mismatch") != std::string::npos);
  CHECK_FALSE(fs::exists(dst.path + "/f.bin"));
}

TEST_CASE("a transfer interrupted halfway resumes on a restarted receiver and sends only the missing chunks") {
  temp_dir src, dst;
  auto data = write_file(src.path + "/f", file_bytes, 5);
  zmq::context_t ctx;
  {
    bulk_server first(ctx, "inproc://bulk-resume-1", dst.path);
    auto dealer = connect_dealer(ctx, first.endpoint());
    auto opt = test_options();
    opt.max_chunks = 4;
    auto stats = send_file(dealer, src.path + "/f", "f.bin", opt);
    REQUIRE_MESSAGE(stats.ok(), stats.err().to_string());
    CHECK_FALSE(stats->complete);
    CHECK(stats->chunks_sent == 4);
  }  // receiver gone: only the files remain
  CHECK(fs::exists(dst.path + "/f.bin.part.state"));
  CHECK_FALSE(fs::exists(dst.path + "/f.bin"));

  bulk_server second(ctx, "inproc://bulk-resume-2", dst.path);
  auto dealer = connect_dealer(ctx, second.endpoint());
  auto stats = send_file(dealer, src.path + "/f", "f.bin", test_options());
  REQUIRE_MESSAGE(stats.ok(), stats.err().to_string());
  CHECK(stats->complete);
  CHECK(stats->chunks_skipped == 4);
  CHECK(stats->chunks_sent == 5);
  CHECK(stats->bytes_sent == file_bytes - 4 * default_chunk_bytes);
  CHECK(slurp(dst.path + "/f.bin") == data);
  CHECK(entries(dst.path) == std::vector<std::string>{"f.bin"});

  // Sending it once more sends nothing: the receiver already holds it.
  auto again = send_file(dealer, src.path + "/f", "f.bin", test_options());
  REQUIRE(again.ok());
  CHECK(again->complete);
  CHECK(again->chunks_skipped == 9);
  CHECK(again->chunks_sent == 0);
}

TEST_CASE("a partial left by a different version of the file is discarded and the new version sent in full") {
  temp_dir src, dst;
  write_file(src.path + "/v1", file_bytes, 6);
  auto v2 = write_file(src.path + "/v2", file_bytes, 7);  // same size, other bytes
  zmq::context_t ctx;
  bulk_server server(ctx, "inproc://bulk-version", dst.path);
  auto dealer = connect_dealer(ctx, server.endpoint());
  auto opt = test_options();
  opt.max_chunks = 5;
  auto half = send_file(dealer, src.path + "/v1", "f.bin", opt);
  REQUIRE(half.ok());
  CHECK_FALSE(half->complete);
  auto stats = send_file(dealer, src.path + "/v2", "f.bin", test_options());
  REQUIRE_MESSAGE(stats.ok(), stats.err().to_string());
  CHECK(stats->chunks_skipped == 0);
  CHECK(stats->chunks_sent == 9);
  CHECK(slurp(dst.path + "/f.bin") == v2);
}

TEST_CASE("an empty file transfers as zero chunks") {
  temp_dir src, dst;
  write_file(src.path + "/empty", 0, 8);
  zmq::context_t ctx;
  bulk_server server(ctx, "inproc://bulk-empty", dst.path);
  auto dealer = connect_dealer(ctx, server.endpoint());
  auto stats = send_file(dealer, src.path + "/empty", "empty", test_options());
  REQUIRE_MESSAGE(stats.ok(), stats.err().to_string());
  CHECK(stats->complete);
  CHECK(stats->chunks_sent == 0);
  CHECK(fs::file_size(dst.path + "/empty") == 0);
}

TEST_CASE("the receiver answers malicious offers and chunks with errors and writes nothing outside its directory") {
  temp_dir root;
  std::string dest = root.path + "/dest";
  REQUIRE(files::make_dirs(dest).ok());
  auto outside = write_file(root.path + "/outside", 64, 9);
  bulk_receiver rx(dest);

  bulk_offer bad{"t1", "../x", 40, 16, 3, crypto::sha256("whatever")};
  for (std::string name : {"../x", "", "a/b", "..", ".", "x.part", "y.part.state"}) {
    bad.name = name;
    CHECK_MESSAGE(rx.on_offer(bad).code() == errc::invalid_argument, name);
  }
  bulk_offer wrong_count{"t1", "ok.bin", 40, 16, 2, {}};
  CHECK(rx.on_offer(wrong_count).code() == errc::invalid_argument);
  bulk_offer huge_chunks{"t1", "ok.bin", 40, max_chunk_bytes + 1, 1, {}};
  CHECK(rx.on_offer(huge_chunks).code() == errc::invalid_argument);
  CHECK(rx.on_offer({"", "ok.bin", 40, 16, 3, {}}).code() == errc::invalid_argument);

  // A planted symlink in place of the partial must not be written through.
  fs::create_symlink(root.path + "/outside", dest + "/ok.bin.part");
  auto data = random_bytes(40, 10);
  auto need = rx.on_offer({"t1", "ok.bin", 40, 16, 3, crypto::sha256(data)});
  REQUIRE(need.ok());
  CHECK(need->missing == std::vector<std::uint32_t>{0, 1, 2});
  CHECK_FALSE(fs::is_symlink(dest + "/ok.bin.part"));

  std::string_view c0 = std::string_view(data).substr(0, 16);
  auto out_of_range = rx.on_chunk(header_for("t1", 3, 48, c0), c0);
  CHECK_FALSE(out_of_range.ok);
  CHECK(out_of_range.code == errc::invalid_argument);
  CHECK(out_of_range.reason.find("out of range") != std::string::npos);
  auto far_index = rx.on_chunk(header_for("t1", 0xffffffffu, 0, c0), c0);
  CHECK(far_index.code == errc::invalid_argument);
  auto wrong_offset = rx.on_chunk(header_for("t1", 0, 8, c0), c0);
  CHECK(wrong_offset.reason.find("offset mismatch") != std::string::npos);
  std::string oversize = std::string(c0) + "x";
  auto too_big = rx.on_chunk(header_for("t1", 0, 0, oversize), oversize);
  CHECK(too_big.reason.find("wrong size") != std::string::npos);
  auto short_last = rx.on_chunk(header_for("t1", 2, 32, "abc"), "abc");
  CHECK(short_last.reason.find("wrong size") != std::string::npos);
  bulk_chunk_header lying = header_for("t1", 0, 0, "something else");
  auto sha_bad = rx.on_chunk(lying, c0);
  CHECK(sha_bad.code == errc::corruption);
  CHECK_FALSE(sha_bad.fatal);
  auto unknown = rx.on_chunk(header_for("nope", 0, 0, c0), c0);
  CHECK(unknown.code == errc::not_found);
  CHECK(unknown.fatal);

  CHECK(slurp(root.path + "/outside") == outside);
  CHECK(entries(root.path) == std::vector<std::string>{"dest", "outside"});
  CHECK(entries(dest) == std::vector<std::string>{"ok.bin.part"});
  CHECK(slurp(dest + "/ok.bin.part") == std::string(40, '\0'));  // no bad chunk was written

  // The transfer survives the garbage: good chunks still complete it.
  for (std::uint32_t i = 0; i < 3; ++i) {
    auto part = std::string_view(data).substr(i * 16, 16);
    auto ack = rx.on_chunk(header_for("t1", i, i * 16, part), part);
    CHECK(ack.ok);
    CHECK(ack.complete == (i == 2));
  }
  CHECK(slurp(dest + "/ok.bin") == data);
}

TEST_CASE("an offer whose whole-file sha256 is wrong ends in corruption and leaves no file behind") {
  temp_dir dest;
  bulk_receiver rx(dest.path);
  auto data = random_bytes(40, 11);
  REQUIRE(rx.on_offer({"t1", "f.bin", 40, 16, 3, crypto::sha256("not the data")}).ok());
  bulk_ack last;
  for (std::uint32_t i = 0; i < 3; ++i) {
    auto part = std::string_view(data).substr(i * 16, 16);
    last = rx.on_chunk(header_for("t1", i, i * 16, part), part);
    if (i < 2) CHECK(last.ok);
  }
  CHECK_FALSE(last.ok);
  CHECK(last.fatal);
  CHECK(last.code == errc::corruption);
  CHECK(last.reason.find("whole-object sha256 mismatch") != std::string::npos);
  CHECK(entries(dest.path).empty());
}

TEST_CASE("malformed bulk frames get an error reply instead of a crash") {
  temp_dir dest;
  bulk_receiver rx(dest.path);
  std::vector<std::string> reply;
  auto frames = [](std::initializer_list<std::string> parts) {
    std::vector<zmq::message_t> v;
    for (const auto& p : parts) v.emplace_back(p.data(), p.size());
    return v;
  };
  auto status_code = [&] {
    REQUIRE(reply.size() == 2);
    CHECK(reply[0] == bulk_status_type);
    loom::v1::Status s;
    REQUIRE(s.ParseFromString(reply[1]));
    return static_cast<errc>(s.code());
  };
  serve_bulk_message(rx, {}, reply);
  CHECK(status_code() == errc::unimplemented);
  serve_bulk_message(rx, frames({"loom.v1.Nope", "x"}), reply);
  CHECK(status_code() == errc::unimplemented);
  serve_bulk_message(rx, frames({"loom.v1.BulkOffer", "\xff\xff\xff"}), reply);
  CHECK(status_code() == errc::invalid_argument);
  serve_bulk_message(rx, frames({"loom.v1.BulkChunk", ""}), reply);  // raw bytes frame missing
  CHECK(status_code() == errc::invalid_argument);

  loom::v1::BulkOffer offer;
  offer.set_transfer_id("t1");
  offer.set_name("../escape");
  offer.set_total_bytes(1);
  offer.set_chunk_bytes(1);
  offer.set_chunk_count(1);
  offer.set_sha256(std::string(32, 'a'));
  serve_bulk_message(rx, frames({"loom.v1.BulkOffer", offer.SerializeAsString()}), reply);
  REQUIRE(reply.size() == 2);
  CHECK(reply[0] == bulk_need_type);
  loom::v1::BulkNeed need;
  REQUIRE(need.ParseFromString(reply[1]));
  CHECK(need.status().code() == loom::v1::INVALID_ARGUMENT);
  CHECK(entries(dest.path).empty());
  CHECK(is_bulk_request(frames({"loom.v1.BulkChunk", "", ""})));
  CHECK_FALSE(is_bulk_request(frames({"loom.v1.Envelope"})));
}

TEST_CASE("a sender with no one answering gives up as unavailable within its reply timeout") {
  temp_dir src;
  write_file(src.path + "/f", 100, 12);
  zmq::context_t ctx;
  zmq::socket_t silent(ctx, zmq::socket_type::router);  // bound, never read
  silent.set(zmq::sockopt::linger, 0);
  silent.bind("inproc://bulk-silent");
  auto dealer = connect_dealer(ctx, "inproc://bulk-silent");
  auto opt = test_options();
  opt.reply_timeout = std::chrono::milliseconds(200);
  auto start = std::chrono::steady_clock::now();
  auto stats = send_file(dealer, src.path + "/f", "f", opt);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(stats.code() == errc::unavailable);
  CHECK(took < std::chrono::seconds(2));
}

// ---- over an emulated link (README "Link shaper") ----------------------------

TEST_CASE("a bulk transfer over a shaped link takes the time its bandwidth and latency say") {
  temp_dir src, dst;
  auto data = write_file(src.path + "/f", 2u << 20, 13);  // two 1 MiB chunks
  zmq::context_t ctx;
  bulk_server server(ctx, "tcp://127.0.0.1:*", dst.path);
  auto dealer = connect_dealer(ctx, server.endpoint());
  const auto start = std::chrono::steady_clock::now();
  shaped_link link(parse_link_spec("bw=8MB,burst=64KiB,lat=10ms").value(), start);
  auto opt = test_options();
  opt.link = &link;
  auto stats = send_file(dealer, src.path + "/f", "f.bin", opt);
  const double took_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_MESSAGE(stats.ok(), stats.err().to_string());
  CHECK(stats->complete);
  CHECK(slurp(dst.path + "/f.bin") == data);
  // Offer and need: one RTT; the chunks beyond the burst at 8 MB/s; the last ack: one RTT.
  const double model_ms = 20.0 + (2.0 * (1u << 20) - 65536.0) / 8e3 + 20.0;
  CHECK(took_ms >= model_ms - 2.0);
  CHECK(took_ms < model_ms + 1000.0);
  MESSAGE("2 MiB over bw=8MB,lat=10ms: " << took_ms << " ms (model " << model_ms << " ms)");
  CHECK(link.uplink().model().admitted() == 3);  // offer + 2 chunks
}

TEST_CASE("a transfer cut by an outage gives up, then resumes after it and sends only the chunks that did not arrive") {
  temp_dir src, dst;
  auto data = write_file(src.path + "/f", file_bytes, 14);  // nine chunks
  zmq::context_t ctx;
  bulk_server server(ctx, "tcp://127.0.0.1:*", dst.path);
  const auto start = std::chrono::steady_clock::now();
  shaped_link link(parse_link_spec("bw=16MB,lat=5ms,down=300ms-900ms").value(), start);
  auto opt = test_options();
  opt.link = &link;
  opt.reply_timeout = std::chrono::milliseconds(300);
  std::uint64_t first_chunks = 0;
  {
    auto dealer = connect_dealer(ctx, server.endpoint());
    auto cut = send_file(dealer, src.path + "/f", "f.bin", opt);
    REQUIRE_FALSE(cut.ok());
    CHECK(cut.code() == errc::unavailable);
    first_chunks = link.uplink().model().admitted() - 1;  // minus the offer
    CHECK(link.uplink().model().dropped_outage() >= 1);
  }
  std::this_thread::sleep_until(start + std::chrono::milliseconds(950));
  link.forget();  // the old socket is gone, and what it had on the wire
  auto dealer = connect_dealer(ctx, server.endpoint());
  auto resumed = send_file(dealer, src.path + "/f", "f.bin", test_options_with(opt));
  REQUIRE_MESSAGE(resumed.ok(), resumed.err().to_string());
  CHECK(resumed->complete);
  CHECK(resumed->chunks_skipped >= 1);  // what arrived before the cut is not sent again
  CHECK(resumed->chunks_skipped + resumed->chunks_sent == 9);
  CHECK(resumed->chunks_resent == 0);
  CHECK(first_chunks + resumed->chunks_sent < 2 * 9);
  CHECK(slurp(dst.path + "/f.bin") == data);
  MESSAGE("cut at 300 ms: " << first_chunks << " chunks sent before, " << resumed->chunks_skipped
                            << " verified by the receiver, " << resumed->chunks_sent << " sent after");
}
