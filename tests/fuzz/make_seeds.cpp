// fuzz_seeds OUT_DIR SOURCE_DIR: writes the seed corpora of the fuzz targets
// (tests/fuzz/corpus/<target>/) with the product's own writers, so a seed is
// exactly what the product sends or stores: envelopes, bulk frames, ring
// frames, every codec's payload, a shard and its manifest, safetensors, GGUF,
// a trained tokenizer.json, tokens, the repository's own TOML templates, a
// body of every request type, enrolment requests and replies, checkpoint
// snapshots (plain and sealed), sealed objects and an audit archive.
// Deterministic (fixed seeds, fixed clock) except where the product itself
// draws random bytes (request ids, enrolment secrets, sealing nonces and data
// keys, the anchor signing key). The ingest seeds that
// need gzip/zstd/tar are added by tests/fuzz/make_seeds.sh, which runs this.
#include "libs/atrest/sealed.hpp"
#include "libs/auditchain/archive.hpp"
#include "libs/auditchain/checkpoint.hpp"
#include "libs/auth/policy.hpp"
#include "libs/auth/site_token.hpp"
#include "libs/auth/token.hpp"
#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/codec/codec.hpp"
#include "libs/collective/frame.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/diloco/grant/grant.hpp"
#include "libs/diloco/grant/stage_spec.hpp"
#include "libs/export/gguf.hpp"
#include "libs/shards/writer.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "libs/tokenizer/train/piece_counts.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/envelope.hpp"
#include "loom/v1/aggregator.pb.h"
#include "loom/v1/audit.pb.h"
#include "loom/v1/bulk.pb.h"
#include "loom/v1/ingest.pb.h"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/service.pb.h"
#include "loom/v1/sites.pb.h"
#include "libs/media/codec.hpp"
#include "libs/media/audio.hpp"
#include "libs/media/audio_fixtures.hpp"

#include <sndfile.h>
#include "libs/media/audio_testing.hpp"
#include "libs/media/fixtures.hpp"
#include "libs/media/testing.hpp"
#include "tests/fuzz/fixed_keys.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace loom;

namespace {

fs::path out_root;

void put(const std::string& target, const std::string& name, std::string_view bytes) {
  fs::create_directories(out_root / target);
  std::ofstream(out_root / target / name, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
template <class T>
T must(result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "fuzz_seeds: %s: %s\n", what, r.err().to_string().c_str());
    std::exit(1);
  }
  return std::move(*r);
}
std::string slurp(const fs::path& p) {
  std::ostringstream s;
  s << std::ifstream(p, std::ios::binary).rdbuf();
  return s.str();
}
std::string byte0(char b, std::string_view rest) { return std::string(1, b) + std::string(rest); }
std::string le(std::uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) s += static_cast<char>(v >> (8 * i) & 0xff);
  return s;
}
std::vector<float> wave(std::size_t n) {  // deterministic deltas of mixed magnitude
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = 0.01f * std::sin(0.7f * i) * (1.0f + (i % 7));
  return x;
}

void envelopes() {
  wire::request req{"0123456789abcdef0123456789abcdef", "loom.v1.PingRequest", "\x0a\x02hi", "lt1.x.y", 1700000000000, 2};
  put("fuzz_envelope", "request", wire::encode(req));
  auto rep = wire::error_reply(req.request_id, errc::invalid_argument, "bad field");
  rep.details["field"] = "name";
  put("fuzz_envelope", "error_reply", wire::encode(rep));
  wire::reply ok{req.request_id, "loom.v1.PingReply", "\x08\x01", errc::ok, "", {}};
  put("fuzz_envelope", "ok_reply", wire::encode(ok));
}

void bulk() {  // offer, then the object's 3 chunks of 1 KiB, 1 KiB, 952 bytes
  std::string object(3000, '\0');
  for (std::size_t i = 0; i < object.size(); ++i) object[i] = static_cast<char>('a' + i % 26);
  v1::BulkOffer o;
  o.set_transfer_id("t1");
  o.set_name("shard-000001.bin");
  o.set_total_bytes(object.size());
  o.set_chunk_bytes(1024);
  o.set_chunk_count(3);
  o.set_sha256(std::string(crypto::as_view(crypto::sha256(object))));
  std::string offer = o.SerializeAsString();
  std::string seq = byte0(0, le(offer.size(), 2) + offer);
  put("fuzz_bulk", "offer", seq);
  for (std::uint32_t i = 0; i < 3; ++i) {
    std::string data = object.substr(i * 1024, 1024);
    v1::BulkChunk c;
    c.set_transfer_id("t1");
    c.set_index(i);
    c.set_offset(i * 1024);
    c.set_sha256(std::string(crypto::as_view(crypto::sha256(data))));
    std::string h = c.SerializeAsString();
    seq += "\x01" + le(h.size(), 2) + h + le(data.size(), 4) + data;
  }
  put("fuzz_bulk", "offer_and_chunks", seq);
}

void ring_frames() {
  collective::frame_header h{1, 3, collective::phase::all_gather, 7, 2, 1, 2, 40, 5, 15};
  std::string f(collective::frame_header_bytes + 5 * 4, '\0');
  collective::encode_header(h, f.data());
  put("fuzz_collective_frame", "all_gather", f);
}

void codecs() {
  auto x = wave(300);
  codec::options small;  // small blocks and chunks: every block kind in a short payload
  small.int8_block = 32, small.int4_block = 16, small.topk_chunk = 128, small.topk_density = 0.1;
  for (auto c : codec::all_codecs) {
    auto p = must(codec::encode(c, x), "codec");
    put("fuzz_codec", std::string(codec::to_string(c)), {reinterpret_cast<const char*>(p.data()), p.size()});
    auto q = must(codec::encode(c, std::span<const float>(x).first(100), small), "codec");
    put("fuzz_codec", std::string(codec::to_string(c)) + "_small", {reinterpret_cast<const char*>(q.data()), q.size()});
  }
}

void shard_and_manifest(const fs::path& tmp) {
  for (auto type : {shards::dtype::uint16, shards::dtype::uint32}) {
    auto dir = tmp / std::string(shards::to_string(type));
    auto w = must(shards::shard_writer::create({dir.string(), type, std::uint64_t{16} << 20, {}}), "shard writer");
    for (std::uint32_t d = 0; d < 5; ++d) {
      std::vector<std::uint32_t> doc(3 + d * 4);
      for (std::size_t i = 0; i < doc.size(); ++i) doc[i] = (d * 977 + i * 31) % (type == shards::dtype::uint16 ? 50257 : 100000);
      if (!w.append(doc).ok()) std::exit(1);
    }
    must(w.finish(), "shard finish");
    put("fuzz_shard", std::string(shards::to_string(type)), slurp(dir / shards::shard_file_name(1)));
    put("fuzz_manifest", std::string(shards::to_string(type)), slurp(dir / shards::manifest_file_name));
  }
  put("fuzz_manifest", "cursor", R"({"epoch":1,"position":4096})");
}

void safetensors(const fs::path& tmp) {
  std::vector<float> a = wave(12);
  std::vector<std::uint16_t> b(6, 0x3c00);
  std::vector<ckpt::tensor_view> t{{"wte", ckpt::dtype::F32, {3, 4}, a.data(), a.size() * 4},
                                   {"ln.b", ckpt::dtype::F16, {6}, b.data(), b.size() * 2}};
  model::gpt2_config tiny{2, 2, 8, 16, 64, 64};
  auto p = (tmp / "m.safetensors").string();
  if (!ckpt::write_safetensors(p, t, ckpt::gpt2_metadata(tiny)).ok()) std::exit(1);
  put("fuzz_safetensors", "gpt2_meta", slurp(p));
}

void gguf(const fs::path& tmp) {
  auto v = wave(64);
  std::vector<exporter::gguf_kv> kv{{"general.architecture", exporter::gguf_value::string("gpt2")},
                                    {"gpt2.block_count", exporter::gguf_value::u32(2)},
                                    {"tokenizer.ggml.tokens", exporter::gguf_value::string_array({"a", "b", "ab"})},
                                    {"general.alignment", exporter::gguf_value::u32(32)}};
  std::vector<exporter::gguf_tensor_in> t{{"f32", {8, 2}, exporter::gguf_type::f32, std::span<const float>(v).first(16)},
                                          {"f16", {4}, exporter::gguf_type::f16, std::span<const float>(v).first(4)},
                                          {"q8", {32, 2}, exporter::gguf_type::q8_0, v}};
  auto p = tmp / "m.gguf";
  if (!exporter::write_gguf_file(p, kv, t).ok()) std::exit(1);
  put("fuzz_gguf", "three_types", slurp(p));
}

void hf_tokenizer() {
  tokenizer::piece_counts counts;
  for (int i = 0; i < 20; ++i) counts.add_document("the cat sat on the mat; the hat is flat. 12 34 ");
  auto t = must(tokenizer::train_bpe(counts, {280, 2, 1024}), "train_bpe");
  put("fuzz_hf_tokenizer", "trained", tokenizer::to_hf_json(tokenizer::spec_of(t)));
}

void tokens() {
  const std::string key(32, 'k');  // the fuzz target's key
  auth::claims c{"alice@site-a", auth::role::operator_, {"edge-a", "*"}, 1900000000, 3, 1600000000, "acme"};
  auto tok = must(auth::issue_token(c, key), "issue_token");
  put("fuzz_token", "raw_token", byte0(0, tok));
  auto first = tok.find('.'), second = tok.find('.', first + 1);
  put("fuzz_token", "payload", "\x01" + must(crypto::base64url_decode(tok.substr(first + 1, second - first - 1)), "b64"));
  put("fuzz_token", "enrol", "\x02" + auth::make_enrol_token(std::string(32, '\x11')));
}

void templates(const fs::path& src) {
  for (const auto& e : fs::directory_iterator(src / "templates")) {
    if (e.path().extension() != ".toml") continue;
    auto name = e.path().stem().string();
    auto text = slurp(e.path());
    put("fuzz_template", name, text);
    if (name.starts_with("pretrain-tiny") || name == "sft-tiny" || name == "pretrain-diloco-tiny")
      put("fuzz_run_config", name, text);
    if (name.starts_with("hpo")) {
      put("fuzz_hpo", name, text);
      put("fuzz_run_config", name, text);
    }
  }
  put("fuzz_template", "with_overrides", slurp(src / "templates/pretrain-tiny.toml") +
                                             std::string(1, '\0') + "train.steps=7\nstage.kind=\"lm\"\nlr=0.001");
}

void texts() {
  put("fuzz_tokenizer", "english", "Hello world! It's 2024, isn't it?  New\nlines\t\tand  spaces.");
  put("fuzz_tokenizer", "unicode", "Grüße, 世界 🌍 — ça va? ١٢٣ \u00a0nbsp");
  put("fuzz_tokenizer", "bad_utf8", "ab\xff\xfe\xc3 \xe2\x82 \xf0\x9f\x98 x<|endoftext|>");
  // Ingest: byte 0 = name index | split << 4 (fuzz_ingest's table).
  put("fuzz_ingest", "text", byte0(0, "First paragraph line one.\nline two.\n\nSecond paragraph.\n"));
  put("fuzz_ingest", "markdown", "\x11" "# Title\n\nSome *emphasis* and `code`.\n\n- item\n- [link](http://x)\n");
  put("fuzz_ingest", "html", "\x02" "<html><head><title>t</title><script>x()</script></head><body><p>A &amp; B &#x263a;</p><br>C</body></html>");
  put("fuzz_ingest", "jsonl", "\x03" "{\"text\":\"one\"}\n{\"text\":\"two\\u00e9\"}\n{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"yo\"}]}\n{\"prompt\":\"p\",\"chosen\":\"c\",\"rejected\":\"r\"}\n");
  put("fuzz_ingest", "csv", "\x04" "id,text\n1,\"quoted, with comma\"\n2,\"multi\nline \"\"q\"\"\"\n");
  put("fuzz_ingest", "tsv", "\x05" "id\ttext\n1\thello\n2\tworld\n");
}


// fuzz_request: byte 0 is the type's row in the policy table, the rest its body.
v1::AggregationGrant sample_grant() {
  v1::AggregationGrant g;
  g.set_job("job-000007");
  g.set_stage("pretrain");
  g.set_tenant("acme");
  g.set_stage_dir("/data/jobs/job-000007/pretrain");
  g.add_sites("north");
  g.add_sites("south");
  g.set_edge_sites(true);
  auto* s = g.mutable_spec();
  s->set_job(diloco::aggregation_name("job-000007", "pretrain"));
  s->set_flat_size(1000);
  s->set_fragments(2);
  s->set_sync_every(10);
  s->set_codec("int8");
  s->set_init_seed(1337);
  s->set_max_delta_tokens(16 * 8 * 64);
  g.set_expires_unix(1'700'000'000 + 3600);
  diloco::sign_grant(&g, std::string(32, 'k'));  // fuzz_request's key
  return g;
}
std::string z85_of(char fill) { return must(wire::key_z85(std::string(32, fill)), "key_z85"); }

void requests(const fs::path& src) {
  std::map<std::string, std::string> bodies;
  v1::PingRequest ping;
  ping.set_payload("hi");
  bodies["loom.v1.PingRequest"] = ping.SerializeAsString();
  v1::RegisterNodeRequest reg;
  reg.mutable_node()->set_value("trainer@h1");
  reg.set_service("trainer");
  reg.set_zone("local");
  bodies["loom.v1.RegisterNodeRequest"] = reg.SerializeAsString();
  v1::DrainNodeRequest drain;
  drain.mutable_node()->set_value("trainer@h1");
  drain.set_reason("disk swap\nsecond line \xc3\xa9");
  bodies["loom.v1.DrainNodeRequest"] = drain.SerializeAsString();
  v1::SubmitJobRequest submit;
  submit.set_template_name("pretrain-tiny");
  submit.set_template_toml(slurp(src / "templates/pretrain-tiny.toml"));
  submit.add_overrides("train.steps=7");
  submit.add_overrides("data.dataset=\"web-2024\"");
  submit.set_priority_class("normal");
  submit.set_tenant("acme");
  bodies["loom.v1.SubmitJobRequest"] = submit.SerializeAsString();
  submit.set_overrides(1, "data.text=\"/srv/corpus/a.txt\"");  // an input path: checked against the read roots
  const auto submit_row = std::find_if(auth::policy_table().begin(), auth::policy_table().end(),
                                       [](const auto& e) { return e.type == "loom.v1.SubmitJobRequest"; });
  put("fuzz_request", "SubmitJobRequest_text",
      byte0(static_cast<char>(submit_row - auth::policy_table().begin()), submit.SerializeAsString()));
  v1::IssueTokenRequest tok;
  tok.set_principal("bob@site-a");
  tok.set_role("operator");
  tok.add_zones("local");
  tok.add_zones("edge-a");
  tok.set_ttl_s(3600);
  tok.set_tenant("acme");
  bodies["loom.v1.IssueTokenRequest"] = tok.SerializeAsString();
  v1::EnrolSiteRequest enrol;
  enrol.set_site("edge-a");
  enrol.set_token(auth::make_enrol_token(std::string(32, '\x22')));
  (*enrol.mutable_public_keys())["trainer"] = z85_of('\x33');
  bodies["loom.v1.EnrolSiteRequest"] = enrol.SerializeAsString();
  v1::IssueSiteTokenRequest site_token;
  site_token.set_site("edge-a");
  site_token.set_ttl_ms(60000);
  bodies["loom.v1.IssueSiteTokenRequest"] = site_token.SerializeAsString();
  v1::RevokeSiteRequest revoke;
  revoke.set_site("edge-a");
  revoke.set_reason("lost laptop");
  bodies["loom.v1.RevokeSiteRequest"] = revoke.SerializeAsString();
  v1::ImportDatasetRequest import;
  import.set_path("/srv/corpus/../corpus/./a.txt");
  import.set_dataset("web-2024");
  import.set_for_tenant("acme");
  import.add_nodes("ingest@h1");
  bodies["loom.v1.ImportDatasetRequest"] = import.SerializeAsString();
  v1::SyncInfoRequest sync;
  sync.set_dataset("web-2024");
  sync.set_peer_public_key(z85_of('\x44'));
  bodies["loom.v1.SyncInfoRequest"] = sync.SerializeAsString();
  v1::PullDatasetRequest pull;
  pull.set_dataset("web-2024");
  pull.set_endpoint("tcp://10.0.0.7:7410");
  pull.set_public_key(z85_of('\x55'));
  pull.set_source_tenant("default");
  bodies["loom.v1.PullDatasetRequest"] = pull.SerializeAsString();
  v1::StartAggregationRequest start;
  *start.mutable_grant() = sample_grant();
  *start.mutable_spec() = start.grant().spec();
  bodies["loom.v1.StartAggregationRequest"] = start.SerializeAsString();
  v1::ExportGlobalRequest exp;
  *exp.mutable_grant() = sample_grant();
  bodies["loom.v1.ExportGlobalRequest"] = exp.SerializeAsString();
  v1::InspectCheckpointRequest inspect;
  inspect.set_checkpoint("/dev/shm/jobs/j1/checkpoints/step-000001");
  bodies["loom.v1.InspectCheckpointRequest"] = inspect.SerializeAsString();
  const auto policy = auth::policy_table();
  for (std::size_t i = 0; i < policy.size(); ++i) {
    const std::string type(policy[i].type);
    put("fuzz_request", type.substr(type.rfind('.') + 1), byte0(static_cast<char>(i), bodies[type]));
  }
}

// fuzz_enrol: byte 0 even, an EnrolSiteRequest; odd, an EnrolSiteReply.
void enrolment() {
  v1::EnrolSiteRequest req;
  req.set_site("edge-a");
  req.set_token(auth::make_enrol_token(std::string(32, '\x22')));
  (*req.mutable_public_keys())["trainer"] = z85_of('\x33');
  (*req.mutable_public_keys())["ingest"] = z85_of('\x34');
  put("fuzz_enrol", "request", byte0(0, req.SerializeAsString()));
  v1::EnrolSiteReply rep;
  rep.set_site("edge-a");
  rep.set_cloud_zone("cloud");
  for (auto [name, pull] : {std::pair{"scheduler", ""}, std::pair{"audit", "tcp://cloud.example:7402"}}) {
    auto* s = rep.add_services();
    s->set_name(name);
    s->set_endpoint("tcp://cloud.example:7400");
    s->set_public_key(z85_of('\x66'));
    s->set_pull(pull);
  }
  auth::claims c{"site:edge-a", auth::role::operator_, {"edge-a", "cloud"}, 1'700'003'600, 0, 1'700'000'000};
  rep.set_token(must(auth::issue_token(c, std::string(32, 'k')), "issue_token"));
  rep.set_token_expires_unix_ns(1'700'003'600'000'000'000ull);
  put("fuzz_enrol", "reply", byte0(1, rep.SerializeAsString()));
}

// fuzz_snapshot: flags, then u16-length sections: MANIFEST.json, name, file, ...
std::string sections(const fs::path& dir, const std::vector<std::string>& names) {
  auto section = [](std::string_view b) { return le(b.size(), 2) + std::string(b); };
  std::string out = byte0(3, section(slurp(dir / "MANIFEST.json")));
  for (const auto& n : names) out += section(n) + section(slurp(dir / n));
  return out;
}
void snapshots(const fs::path& tmp) {
  auto keys = fuzz::fixed_kek_store((tmp / "keys").string());
  const std::string tensors = slurp(tmp / "m.safetensors");  // safetensors() wrote it
  for (bool sealed : {false, true}) {
    const auto root = tmp / (sealed ? "snap-sealed" : "snap-plain");
    ckpt::snapshot_writer w;
    if (sealed) w.seal_with(keys.get(), fuzz::kek_made);
    if (!w.begin(root.string(), 7).ok() || !w.add_file("model.safetensors", tensors).ok() ||
        !w.add_file("state.json", "{\"step\": 7, \"loss\": 3.25}\n").ok())
      std::exit(1);
    auto dir = must(w.publish(fuzz::snapshot_key, 1'700'000'000), "snapshot publish");
    put("fuzz_snapshot", sealed ? "sealed" : "plain", sections(dir, {"model.safetensors", "state.json"}));
  }
}

// fuzz_sealed: objects sealed under the fixed KEK, in 4 KiB chunks.
void sealed_objects(const fs::path& tmp) {
  auto keys = fuzz::fixed_kek_store((tmp / "keys").string());
  std::string text;
  for (int i = 0; text.size() < 5000; ++i) text += "line " + std::to_string(i) + " of a sealed stage cache\n";
  for (auto [name, n] : {std::pair{"empty", 0}, std::pair{"one_chunk", 100}, std::pair{"two_chunks", 5000}})
    put("fuzz_sealed", name, must(atrest::seal(text.substr(0, n), *keys, fuzz::kek_made, 4096), "seal"));
}

// fuzz_audit_archive: a linked run of rows (v1 and v2, one field not UTF-8) and a signed checkpoint.
void audit_archive(const fs::path& tmp) {
  auditchain::row_hasher h;
  auditchain::chain_tail tail;
  std::vector<auditchain::chain_row> rows;
  for (int i = 0; i < 3; ++i) {
    auditchain::chain_row r;
    r.unix_ns = 1'700'000'000'000'000'000 + i;
    r.source = "scheduler@h1";
    r.source_seq = i + 1;
    r.service = "scheduler";
    r.peer_key = "client";
    r.principal = "alice";
    r.role = "admin";
    r.zone = "local";
    r.action = "loom.v1.SubmitJobRequest";
    r.job_id = "job-000001";
    r.request_id = "0123456789abcdef";
    r.decision = 1;
    r.reason = i == 1 ? std::string("caf\xe9") : "";
    r.payload = std::string("\x01sealed\x00payload", 15);
    r.tenant = i == 0 ? "" : "acme";
    r.version = i == 0 ? auditchain::row_version_v1 : auditchain::current_row_version;
    auditchain::link(tail, r, h);
    rows.push_back(r);
  }
  auto signer = must(auditchain::anchor_signer::generate((tmp / "anchor").string()), "anchor key");
  std::vector<auditchain::checkpoint> cps{signer.sign(3, rows.back().row_hash, rows.back().unix_ns)};
  auto e = must(auditchain::write_archive((tmp / "archive").string(), rows, cps, 1'700'000'000'000'000'000), "archive");
  put("fuzz_audit_archive", "three_rows", slurp(tmp / "archive" / e.file));
}
}  // namespace

// One small file of each image format and kind the reader meets: PNG, JPEG
// (baseline, progressive, with EXIF GPS), WebP (lossless, lossy, with EXIF),
// GIF, made by media_tests' own encoders.
void images() {
  namespace mt = media::testing;
  const media::image img = mt::scene(7, 24, 16);
  put("fuzz_media", "png", must(media::encode_png(img), "png"));
  const std::string jpeg = must(media::encode_jpeg(img, 80), "jpeg");
  put("fuzz_media", "jpeg", jpeg);
  put("fuzz_media", "jpeg_progressive", mt::jpeg_progressive(img, 80));
  put("fuzz_media", "jpeg_exif", mt::jpeg_insert_after_soi(jpeg, {{0xE1, mt::exif_block()}}));
  put("fuzz_media", "webp_lossless", mt::webp_lossless(img));
  put("fuzz_media", "webp_lossy", mt::webp_lossy(img, 70));
  put("fuzz_media", "webp_exif", mt::webp_with_chunks(img, {{"EXIF", mt::exif_block().substr(6)}}));
  mt::gif_frame f;
  f.w = 4;
  f.h = 3;
  f.indices = {0, 1, 2, 3, 3, 2, 1, 0, 0, 0, 1, 1};
  f.transparent = 3;
  put("fuzz_media", "gif", mt::gif(4, 3, {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {0, 0, 255}}, {f}));
}

// fuzz_audio: a quarter second of speech-like sound at 8 kHz in every
// container the reader takes (small, so mutations stay cheap).
void audio() {
  namespace mt = media::testing;
  const auto x = mt::speechlike(3, 0.25, 8000, 1);
  put("fuzz_audio", "wav", media::encode_wav16(x, 8000, 1));
  put("fuzz_audio", "flac", mt::sf_encode(x, 8000, 1, SF_FORMAT_FLAC | SF_FORMAT_PCM_16));
  put("fuzz_audio", "ogg", mt::sf_encode(x, 8000, 1, SF_FORMAT_OGG | SF_FORMAT_VORBIS));
  if (mt::sf_can_write(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 8000, 1))
    put("fuzz_audio", "mp3", mt::sf_encode(x, 8000, 1, SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III));
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_seeds OUT_DIR SOURCE_DIR\n");
    return 2;
  }
  out_root = argv[1];
  auto tmp = fs::temp_directory_path() / ("loom-fuzz-seeds-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  envelopes();
  bulk();
  ring_frames();
  codecs();
  shard_and_manifest(tmp);
  safetensors(tmp);
  gguf(tmp);
  hf_tokenizer();
  tokens();
  templates(argv[2]);
  texts();
  requests(argv[2]);
  enrolment();
  snapshots(tmp);
  sealed_objects(tmp);
  audit_archive(tmp);
  images();
  audio();
  fs::remove_all(tmp);
  return 0;
}
