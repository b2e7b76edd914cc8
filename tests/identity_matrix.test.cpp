// Cross-process, on loopback (issue 24, "the systematic one"): every request
// type any socket accepts, sent from every identity through the real gateways
// of a cloud (`loom up`) with two enrolled edge sites (north, south), checked
// against docs/security.md's authorization table, and every denial found in
// the cloud's audit chain under the real caller (its key, and its token's
// principal when the token got that far). A request type with no row in the
// table, or a row naming no type, fails the test.
//
// The objects the requests name belong to tenant A or to site north: A's
// dataset, import task, finished job and its model version, A's running
// diloco job (placed on north) and its aggregation, and a node north's
// trainer key registered in zone north. Bodies are built by reflection from
// the field names, so the test compiles whatever types exist; allowed
// state-changing calls are chosen to be harmless (empty bodies the service
// refuses with its own error, cancels of a finished job, a drain undone).
#include "tests/support/audit_events.hpp"
#include "tests/support/authz_table.hpp"
#include "tests/support/edge_sites.hpp"

#include "libs/auth/policy.hpp"
#include "loom/v1/common.pb.h"
#include "loom/v1/ingest.pb.h"
#include "loom/v1/models.pb.h"

#include <doctest/doctest.h>
#include <zmq_addon.hpp>
#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace pb = google::protobuf;

namespace {

// The messages the aggregator's delta socket accepts besides *Request types.
const std::set<std::string> delta_types{"DeltaJoin", "DeltaHeader", "DeltaChunk", "GlobalPull", "RoundStatusQuery"};

// The wire contract, read from proto/loom/v1/*.proto by protobuf's own
// compiler: every message, whether or not the test's code names it.
struct contract {
  struct errors : pb::compiler::MultiFileErrorCollector {
    std::string text;
    void AddError(const std::string& file, int line, int, const std::string& message) override {
      text += file + ":" + std::to_string(line) + ": " + message + "\n";
    }
  } errs;
  pb::compiler::DiskSourceTree tree;
  pb::compiler::Importer importer{&tree, &errs};
  pb::DynamicMessageFactory factory;
  std::vector<const pb::FileDescriptor*> files;
  contract() {
    tree.MapPath("", std::string(LOOM_SOURCE_DIR) + "/proto");
    for (const auto& f : std::filesystem::directory_iterator(std::string(LOOM_SOURCE_DIR) + "/proto/loom/v1"))
      if (f.path().extension() == ".proto") {
        const auto* file = importer.Import("loom/v1/" + f.path().filename().string());
        REQUIRE_MESSAGE(file, errs.text);
        files.push_back(file);
      }
  }
  const pb::Descriptor* find(const std::string& full) const { return importer.pool()->FindMessageTypeByName(full); }
  std::unique_ptr<pb::Message> make(const pb::Descriptor* d) { return std::unique_ptr<pb::Message>(factory.GetPrototype(d)->New()); }
};
contract& wire_contract() {
  static contract c;
  return c;
}

// Every request type of the wire contract: messages named *Request, the
// policy table's types (BulkOffer, BulkChunk) and the delta socket's.
std::set<std::string> request_types() {
  std::set<std::string> out;
  for (const auto* file : wire_contract().files) {
    for (int i = 0; i < file->message_type_count(); ++i) {
      const std::string name = file->message_type(i)->name();
      if (name.ends_with("Request") || delta_types.count(name)) out.insert(name);
    }
  }
  for (const auto& e : auth::policy_table()) out.insert(std::string(e.type.substr(std::string("loom.v1.").size())));
  return out;
}

// A message of `type` (short name) with the fields `set` ("node.value" =
// "x": nested messages by dotted path; numbers and bools from their text;
// a repeated field gets one element), serialized.
std::string build(const std::string& type, const std::vector<std::pair<std::string, std::string>>& set) {
  const auto* d = wire_contract().find("loom.v1." + type);
  REQUIRE_MESSAGE(d, "no message loom.v1." << type);
  auto m = wire_contract().make(d);
  for (const auto& [path, value] : set) {
    pb::Message* at = m.get();
    std::string rest = path;
    for (auto dot = rest.find('.'); dot != std::string::npos; dot = rest.find('.')) {
      const auto* f = at->GetDescriptor()->FindFieldByName(rest.substr(0, dot));
      REQUIRE_MESSAGE(f, type << " has no field " << path);
      at = at->GetReflection()->MutableMessage(at, f);
      rest = rest.substr(dot + 1);
    }
    const auto* f = at->GetDescriptor()->FindFieldByName(rest);
    REQUIRE_MESSAGE(f, type << " has no field " << path);
    const auto* r = at->GetReflection();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_STRING:
        f->is_repeated() ? r->AddString(at, f, value) : r->SetString(at, f, value);
        break;
      case pb::FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(at, f, std::stoull(value)); break;
      case pb::FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(at, f, static_cast<std::uint32_t>(std::stoul(value))); break;
      case pb::FieldDescriptor::CPPTYPE_INT64: r->SetInt64(at, f, std::stoll(value)); break;
      case pb::FieldDescriptor::CPPTYPE_BOOL: r->SetBool(at, f, value == "true"); break;
      default: FAIL("build: unsupported field type of " << type << "." << path);
    }
  }
  return m->SerializeAsString();
}

struct identity {
  std::string name;           // the table's column
  wire::curve_keypair key;
  std::string key_principal;  // how the cloud's gateways name the key
  std::string token;
  std::string token_principal;
};

// What the test's requests name: tenant A's and site north's objects.
struct objects {
  std::string dataset = "a-text", task, job, version, diloco_job, aggregation, stage_dir, node;
  std::string export_id, export_end;  // two finished exports of `version` by op-A (EndModelExport ends the second)
};

// The request each type sends, at the objects of tenant A / site north.
std::string body_of(const std::string& type, const objects& o) {
  using kv = std::vector<std::pair<std::string, std::string>>;
  static const std::set<std::string> empty{"SubmitJobRequest", "ImportDatasetRequest", "PullDatasetRequest",
                                           "IssueSiteTokenRequest", "RevokeSiteRequest", "EnrolSiteRequest",
                                           "RecordModelExportRequest", "BulkOffer", "BulkChunk",
                                           "ListNodesRequest", "ListSitesRequest", "SiteKeysRequest", "SyncInfoRequest",
                                           "TrainerStatusRequest", "AggregatorStatusRequest",
                                           "RotateKeysRequest", "ListDatasetsRequest",
                                           "AuditArchiveRequest"};
  if (empty.count(type)) return "";
  if (type == "PingRequest") return build(type, kv{{"payload", "matrix"}});
  if (type == "HealthRequest" || type == "ReplicaStatusRequest") return "";
  if (type == "CrashRequest") return build(type, kv{{"reason", "identity matrix"}});
  if (type == "RegisterNodeRequest")
    return build(type, kv{{"node.value", o.node}, {"service", "trainer"}, {"zone", "north"},
                          {"resources.cpu_cores", "1"}, {"resources.memory_bytes", "1073741824"}});
  if (type == "NodeHeartbeatRequest") return build(type, kv{{"node.value", o.node}});
  if (type == "PollWorkRequest") return build(type, kv{{"node.value", o.node}, {"state", "idle"}});
  if (type == "DrainNodeRequest" || type == "UndrainNodeRequest")
    return build(type, kv{{"node.value", o.node}, {"reason", "identity matrix"}});
  if (type == "ListJobsRequest") return "";
  if (type == "GetJobRequest") return build(type, kv{{"id", o.job}});
  if (type == "CancelJobRequest") return build(type, kv{{"id", o.job}, {"reason", "identity matrix"}});
  if (type == "ListModelsRequest") return "";
  if (type == "GetModelRequest" || type == "RollbackModelRequest") {
    kv f{{"version", o.version}};
    if (type == "RollbackModelRequest") f.push_back({"reason", "identity matrix"});
    return build(type, f);
  }
  if (type == "DiffModelsRequest") return build(type, kv{{"a", o.version}, {"b", o.version}});
  if (type == "GetTaskRequest" || type == "CancelTaskRequest") return build(type, kv{{"id", o.task}});
  if (type == "ResolveModelVersionRequest")
    return build(type, kv{{"version", o.version}, {"caller.principal", "op-a"}, {"caller.role", "operator"},
                          {"caller.tenant", "A"}});
  if (type == "StartModelExportRequest") return build(type, kv{{"version", o.version}, {"action", "check"}});
  if (type == "GetModelExportRequest") return build(type, kv{{"id", o.export_id}});
  if (type == "FetchModelExportRequest")
    return build(type, kv{{"id", o.export_id}, {"file", "model.safetensors"}, {"max_bytes", "64"}});
  if (type == "EndModelExportRequest") return build(type, kv{{"id", o.export_end}});
  if (type == "DatasetStatusRequest" || type == "VerifyDatasetRequest") return build(type, kv{{"name", o.dataset}});
  if (type == "ListRejectsRequest") return build(type, kv{{"dataset", o.dataset}});
  if (type == "PlaceDatasetRequest")  // no nodes: refused as malformed by whoever may place A's dataset at all
    return build(type, kv{{"dataset", o.dataset}});
  if (type == "StartAggregationRequest") return build(type, kv{{"spec.job", o.aggregation}});
  if (type == "ExportGlobalRequest")
    return build(type, kv{{"job", o.aggregation}, {"stage_dir", o.stage_dir}, {"step", "1"}});
  if (type == "InspectCheckpointRequest")  // the diloco stage's checkpoint place: refused before it is looked at
    return build(type, kv{{"checkpoint", o.stage_dir + "/checkpoints/step-000001"}});
  if (type == "AuditWatermarkRequest") return build(type, kv{{"source", "scheduler"}});
  if (type == "AuditQueryRequest") return build(type, kv{{"job_id", o.job}, {"limit", "100"}});
  if (type == "IssueTokenRequest")
    return build(type, kv{{"principal", "matrix-issued"}, {"role", "viewer"}, {"zones", "*"}, {"ttl_s", "60"}});
  if (type == "DeltaJoin" || type == "RoundStatusQuery") {
    kv f{{"job", o.aggregation}};
    if (type == "DeltaJoin") f.push_back({"site", "north"});
    return build(type, f);
  }
  if (type == "GlobalPull")
    return build(type, kv{{"job", o.aggregation}, {"site", "north"}, {"fragment", "0"}, {"have_version", "0"}});
  if (type == "DeltaChunk")  // a piece without bytes: refused as malformed once the key may stream to the job at all
    return build(type, kv{{"job", o.aggregation}, {"site", "north"}, {"fragment", "0"}, {"total_bytes", "10"}});
  if (type == "DeltaHeader")  // refused as malformed (no values) by whoever may send it at all
    return build(type, kv{{"job", o.aggregation}, {"site", "north"}, {"codec", "fp32"}});
  if (type == "SyncManifestRequest" || type == "SyncChunksRequest" || type == "SyncPackRequest")
    return build(type, kv{{"dataset", o.dataset}, {"tenant", "A"}});
  FAIL("no body for " << type << ": add one to body_of");
  return "";
}

// Does a successful reply show the named object (list and query types)?
// nullopt: not a list type (any success is "allow").
std::optional<bool> shows(const std::string& type, const std::string& reply_type, const std::string& body,
                          const objects& o) {
  if (type == "ListJobsRequest") return body.find(o.job) != std::string::npos;
  if (type == "ListModelsRequest") return body.find(o.version) != std::string::npos;
  if (type == "ListDatasetsRequest") return body.find(o.dataset) != std::string::npos;
  if (type == "AggregatorStatusRequest") return body.find(o.diloco_job) != std::string::npos;
  if (type == "AuditQueryRequest") {
    v1::AuditQueryReply r;
    return r.ParseFromString(body) && r.events_size() > 0;
  }
  (void)reply_type;
  return std::nullopt;
}

// Field 1 (the code) of a serialized loom.v1.Status, read by hand: it holds
// even where the message text would not parse.
v1::Code status_code(const std::string& bytes) {
  std::size_t i = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0; i < bytes.size() && shift < 64; shift += 7) {
      const auto b = static_cast<unsigned char>(bytes[i++]);
      v |= std::uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  };
  while (i < bytes.size()) {
    const auto tag = varint();
    if (tag == 8) return static_cast<v1::Code>(varint());
    if ((tag & 7) == 0) varint();
    else if ((tag & 7) == 2) i += varint();
    else break;
  }
  return v1::OK;
}

outcome of_code(v1::Code c) {
  if (c == v1::PERMISSION_DENIED || c == v1::UNAUTHENTICATED) return outcome::deny;
  if (c == v1::NOT_FOUND) return outcome::hidden;
  return outcome::allow;
}

// One identity's connections, one per endpoint, kept open for the whole test
// (the revoked column uses those made before the revocation).
struct connections {
  std::map<std::string, std::unique_ptr<wire::client>> rpc;
  std::map<std::string, std::unique_ptr<zmq::socket_t>> raw;
  std::set<std::string> closed;  // endpoints whose handshake refused the key
  std::set<std::string> answered;  // rpc endpoints that answered this identity at least once
};

constexpr auto reply_wait = 3000ms;  // a refused handshake: nothing comes back
// A connection that has answered before was not refused: a reply it misses is
// a slow service on a loaded machine, asked once more (the same request id)
// for this long before the cell counts as closed.
constexpr auto slow_reply_wait = 20000ms;

// A raw [type][body] exchange on a DEALER (the delta and sync sockets): the
// outcome from the reply's Status (a loom.v1.Status frame, or a reply
// message's `status` field); closed when nothing comes back.
outcome raw_call(zmq::context_t& ctx, connections& conns, const identity& id, const std::string& endpoint,
                 const std::string& server_key, const std::string& type, const std::string& body, bool with_payload) {
  if (conns.closed.count(endpoint)) return outcome::closed;
  auto& s = conns.raw[endpoint];
  if (!s) {
    s = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    wire::make_curve_client(*s, id.key, server_key);
    s->set(zmq::sockopt::linger, 0);
    s->connect(endpoint);
  }
  const std::string full_type = "loom.v1." + type;  // alive until sent (a buffer of a temporary would dangle)
  std::vector<zmq::const_buffer> frames{zmq::buffer(full_type), zmq::buffer(body)};
  if (with_payload) frames.push_back(zmq::buffer(std::string()));
  REQUIRE(zmq::send_multipart(*s, frames));
  zmq::pollitem_t item{s->handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, reply_wait);
  if (!(item.revents & ZMQ_POLLIN)) {
    conns.closed.insert(endpoint);
    return outcome::closed;
  }
  std::vector<zmq::message_t> in;
  REQUIRE(zmq::recv_multipart(*s, std::back_inserter(in)));
  REQUIRE(in.size() >= 2);
  const std::string rtype = in[0].to_string();
  if (rtype == "loom.v1.Status") {
    v1::Status st;
    CHECK_MESSAGE(st.ParseFromArray(in[1].data(), static_cast<int>(in[1].size())),
                  type << " at " << endpoint << ": its Status reply does not parse (a message that is not UTF-8?): "
                       << auth::printable(in[1].to_string()));
    return of_code(status_code(in[1].to_string()));
  }
  const auto* d = wire_contract().find(rtype);
  REQUIRE_MESSAGE(d, "unknown reply type " << rtype);
  auto m = wire_contract().make(d);
  REQUIRE(m->ParseFromArray(in[1].data(), static_cast<int>(in[1].size())));
  if (const auto* f = d->FindFieldByName("status"); f && f->message_type()->full_name() == "loom.v1.Status") {
    const auto& st = m->GetReflection()->GetMessage(*m, f);
    const auto* code = st.GetDescriptor()->FindFieldByName("code");
    return of_code(static_cast<v1::Code>(st.GetReflection()->GetEnumValue(st, code)));
  }
  return outcome::allow;
}

std::string now_token(const std::string& key, const std::string& principal, auth::role r, const std::string& tenant,
                      std::uint64_t epoch) {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count();
  auth::claims c{principal, r, {"*"}, now + 3600, epoch, now, tenant};
  auto t = auth::issue_token(c, key);
  REQUIRE(t.ok());
  return *t;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

TEST_CASE("every request type has a row in docs/security.md's authorization table, and every row a type") {
  auto md = files::read_file(std::string(LOOM_SOURCE_DIR) + "/docs/security.md");
  REQUIRE(md.ok());
  auto table = parse_authz_table(*md);
  for (const auto& e : table.errors) CHECK_MESSAGE(false, "docs/security.md: " << e);
  const auto types = request_types();
  for (const auto& t : types) CHECK_MESSAGE(table.rows.count(t), t << " has no row in docs/security.md's table");
  for (const auto& [t, row] : table.rows)
    CHECK_MESSAGE(types.count(t), "docs/security.md line " << row.line << ": " << t << " is no request type");
}

TEST_CASE("every request type from every identity is allowed or denied as docs/security.md's table says") {
  auto md = files::read_file(std::string(LOOM_SOURCE_DIR) + "/docs/security.md");
  REQUIRE(md.ok());
  const auto table = parse_authz_table(*md);
  REQUIRE(table.errors.empty());

  // A cloud and two sites, each with its own text as "text".
  cluster c({"--import-root", licences});
  REQUIRE(c.up);
  auto north = start_edge_site(c, "north", "GPL-3");
  auto south = start_edge_site(c, "south", "GPL-2");
  auto epoch_read = auth::read_epoch(c.paths.epoch());
  const std::uint64_t epoch = epoch_read ? *epoch_read : 0;

  // The identities.
  auto client_key = wire::load_keypair(c.paths.curve_dir(), "client");
  auto cloud_trainer_key = wire::load_keypair(c.paths.curve_dir(), "trainer");
  auto north_key = wire::load_keypair(north->home.path() + "/keys/curve", "trainer");
  auto south_key = wire::load_keypair(south->home.path() + "/keys/curve", "trainer");
  auto north_token = files::read_file(north->home.path() + "/keys/cloud/token");
  auto south_token = files::read_file(south->home.path() + "/keys/cloud/token");
  REQUIRE((client_key && cloud_trainer_key && north_key && south_key && north_token && south_token));
  std::map<std::string, identity> ids;
  auto human = [&](const std::string& name, const std::string& principal, auth::role r, const std::string& tenant) {
    ids[name] = identity{name, *client_key, "client", now_token(c.token_key, principal, r, tenant, epoch), principal};
  };
  human("admin", "matrix-admin", auth::role::admin, "default");
  human("op-A", "op-a", auth::role::operator_, "A");
  human("view-A", "view-a", auth::role::viewer, "A");
  human("op-B", "op-b", auth::role::operator_, "B");
  human("view-B", "view-b", auth::role::viewer, "B");
  ids["north"] = identity{"north", *north_key, "site:north:trainer", trimmed(*north_token), "site:north"};
  ids["south"] = identity{"south", *south_key, "site:south:trainer", trimmed(*south_token), "site:south"};
  ids["trainer"] = identity{"trainer", *cloud_trainer_key, "trainer",
                            now_token(c.token_key, "trainer@matrix", auth::role::operator_, "default", epoch),
                            "trainer@matrix"};
  ids["unenrolled"] = identity{"unenrolled", wire::generate_keypair(), "unenrolled", ids["admin"].token, ""};

  // Tenant A's objects: a dataset, its import task, a finished job and its
  // model version, a running diloco job placed on north with its aggregation.
  objects o;
  const std::string op_a = ids["op-A"].token;
  auto imp = loom_json(c.home.path(), {"data", "import", std::string(licences) + "/Apache-2.0", "--dataset", o.dataset,
                                       "--token", op_a}, 120s);
  o.task = imp.value("task", imp.value("id", std::string()));
  if (o.task.empty() && imp.contains("task") && imp["task"].is_object()) o.task = imp["task"].value("id", "");
  REQUIRE_MESSAGE(!o.task.empty(), imp.dump());
  auto sub = loom_json(c.home.path(), {"job", "submit", "--template", "pretrain-tiny", "--set", "dataset=" + o.dataset,
                                       "--set", "steps=2", "--set", "export.max_loss=20.0", "--zone", c.eps.zone,
                                       "--token", op_a});
  REQUIRE_MESSAGE(sub.contains("id"), sub.dump());
  o.job = sub["id"].get<std::string>();
  auto done = wait_job_done(c.home.path(), o.job, 180s);
  REQUIRE_MESSAGE(done.value("state", "") == "succeeded", done.dump());
  auto models = loom_json(c.home.path(), {"model", "list", "--token", op_a});
  REQUIRE_MESSAGE(models.dump().find(o.job) != std::string::npos, models.dump());
  for (const auto& v : models.is_array() ? models : models.value("versions", json::array()))
    if (v.value("job_id", v.value("job", "")) == o.job) o.version = v.value("version", "");
  REQUIRE_MESSAGE(!o.version.empty(), models.dump());
  // Two Hugging Face exports of it by op-A, run by the cloud's trainer to the end.
  auto export_of_a = [&] {
    auto cli = c.client("trainer", 0, 5000ms);
    v1::StartModelExportRequest q;
    q.set_version(o.version);
    q.set_action("export");
    q.set_format("hf");
    q.set_out(c.home.path() + "/../matrix-export");
    auto r = cli->call(wire::request{wire::new_request_id(), "loom.v1.StartModelExportRequest", q.SerializeAsString(), op_a});
    v1::StartModelExportReply rep;
    REQUIRE_MESSAGE((r && r->ok() && rep.ParseFromString(r->body)), (r ? r->message : "no reply"));
    const std::string id = rep.info().id();
    v1::ModelExportInfo info;
    REQUIRE(eventually([&] {
      v1::GetModelExportRequest g;
      g.set_id(id);
      auto gr = cli->call(wire::request{wire::new_request_id(), "loom.v1.GetModelExportRequest", g.SerializeAsString(), op_a});
      v1::GetModelExportReply gi;
      if (!gr || !gr->ok() || !gi.ParseFromString(gr->body)) return false;
      info = gi.info();
      return info.state() != "queued" && info.state() != "running";
    }, 120s));
    REQUIRE_MESSAGE((info.state() == "done" && info.files_size() > 0), info.DebugString());
    return id;
  };
  o.export_id = export_of_a();
  o.export_end = export_of_a();
  // North's own copy of tenant A's text (datasets are per tenant at a site too):
  // the diloco stage of A's job trains on it there.
  {
    const layout::paths np{north->home.path()};
    auto north_key = auth::load_token_key(np.token_key());
    REQUIRE(north_key.ok());
    const auto north_epoch = auth::read_epoch(np.epoch());
    auto imp_n = run_loom(north->home.path(),
                          {"data", "import", std::string(licences) + "/GPL-3", "--dataset", "text", "--token",
                           now_token(*north_key, "op-a", auth::role::operator_, "A", north_epoch ? *north_epoch : 0)},
                          120s);
    REQUIRE_MESSAGE(imp_n.code == 0, imp_n.out << imp_n.err);
  }
  auto dil = loom_json(c.home.path(), {"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                                       "diloco.sites=[\"north\"]", "--set", "dataset=text", "--set",
                                       "pretrain.steps=100000", "--token", op_a});
  REQUIRE_MESSAGE(dil.contains("id"), dil.dump());
  o.diloco_job = dil["id"].get<std::string>();
  o.stage_dir = c.home.path() + "/jobs/" + o.diloco_job + "/pretrain";
  // Its aggregation, as the aggregator names it (the job and stage).
  auto find_aggregation = [&] {
    c.refresh();
    auto cli = c.client("aggregator", 0, 2000ms);
    auto r = cli->call(wire::request{wire::new_request_id(), "loom.v1.AggregatorStatusRequest", "", c.admin()});
    v1::AggregatorStatusReply rep;
    if (!r || !r->ok() || !rep.ParseFromString(r->body)) return false;
    for (const auto& j : rep.jobs())
      if (j.spec().job().rfind(o.diloco_job + ".", 0) == 0) o.aggregation = j.spec().job();
    return !o.aggregation.empty();
  };
  REQUIRE_MESSAGE(eventually(find_aggregation, 120s), loom_json(c.home.path(), {"job", "show", o.diloco_job}).dump());

  // Endpoints: each service's RPC, the aggregator's delta socket, the cloud ingest's sync socket.
  c.refresh();
  std::string delta_ep, delta_key, sync_ep, sync_key;
  {
    auto cli = c.client("aggregator");
    auto r = cli->call(wire::request{wire::new_request_id(), "loom.v1.AggregatorStatusRequest", "", c.admin()});
    v1::AggregatorStatusReply rep;
    REQUIRE((r && r->ok() && rep.ParseFromString(r->body)));
    delta_ep = rep.delta_endpoint();
    delta_key = rep.public_key();
    auto ing = c.client("ingest");
    auto s = ing->call(wire::request{wire::new_request_id(), "loom.v1.SyncInfoRequest", "", c.admin()});
    v1::SyncInfoReply si;
    REQUIRE((s && s->ok() && si.ParseFromString(s->body)));
    sync_ep = si.endpoint();
    sync_key = si.public_key();
  }
  zmq::context_t zctx{1};
  std::map<std::string, connections> conns;

  // north's node, registered first by north's trainer key in zone north.
  o.node = "matrix@north.node";
  auto rpc = [&](const identity& id, const std::string& service, const std::string& type,
                 const std::string& body, const std::string& rid) -> std::pair<outcome, wire::reply> {
    auto& cs = conns[id.name];
    const auto& ep = c.ep(service);
    if (cs.closed.count(ep.rpc)) return {outcome::closed, {}};
    auto& cli = cs.rpc[ep.rpc];
    if (!cli) {
      auto server = wire::load_public_key(c.paths.curve_dir(), service);
      REQUIRE(server.ok());
      cli = std::make_unique<wire::client>(zctx, ep.rpc, *server, id.key, wire::client_options{reply_wait, 0});
    }
    auto r = cli->call(wire::request{rid, "loom.v1." + type, body, id.token});
    if (!r && cs.answered.count(ep.rpc)) {
      auto server = wire::load_public_key(c.paths.curve_dir(), service);
      REQUIRE(server.ok());
      MESSAGE(type << " from " << id.name << ": no reply in " << reply_wait.count() << " ms from " << service
                   << ", which answered it before; asked again");
      cli = std::make_unique<wire::client>(zctx, ep.rpc, *server, id.key, wire::client_options{slow_reply_wait, 0});
      r = cli->call(wire::request{rid, "loom.v1." + type, body, id.token});
    }
    if (!r) {
      cs.closed.insert(ep.rpc);
      return {outcome::closed, {}};
    }
    cs.answered.insert(ep.rpc);
    v1::Status st;
    return {of_code(static_cast<v1::Code>(static_cast<int>(r->code))), *r};
  };
  {
    auto [res, rep] = rpc(ids["north"], "scheduler", "RegisterNodeRequest", body_of("RegisterNodeRequest", o),
                          wire::new_request_id());
    REQUIRE_MESSAGE(res == outcome::allow, rep.message);
  }

  struct sent {
    std::string type, identity, rid;
    outcome expected, got;
    std::string message;
  };
  std::vector<sent> log;
  auto send_one = [&](const authz_row& row, const identity& id) {
    const std::string rid = "matrix-" + id.name + "-" + row.type;
    const std::string body = body_of(row.type, o);
    outcome got;
    std::string message;
    if (row.service == "aggregator delta socket") {
      got = raw_call(zctx, conns[id.name], id, delta_ep, delta_key, row.type, body, row.type == "DeltaHeader");
    } else if (row.service == "ingest sync socket") {
      got = raw_call(zctx, conns[id.name], id, sync_ep, sync_key, row.type, body, false);
    } else {
      auto [res, rep] = rpc(id, row.service, row.type, body, rid);
      got = res;
      message = rep.message;
      if (got == outcome::allow && rep.ok())
        if (auto seen = shows(row.type, rep.type, rep.body, o); seen && !*seen) got = outcome::hidden;
    }
    log.push_back({row.type, id.name, rid, row.cells.at(id.name), got, message});
  };

  // Every type from every identity but `revoked` (north first: it registered
  // the node the node-scoped rows name), then south's site is revoked and its
  // open connections try every type again.
  const std::vector<std::string> order{"north", "admin", "op-A", "view-A", "op-B", "view-B", "south", "trainer",
                                       "unenrolled"};
  for (const auto& [type, row] : table.rows)
    for (const auto& who : order) send_one(row, ids[who]);
  auto rev = run_loom(c.home.path(), {"site", "revoke", "south", "--reason", "identity matrix"});
  REQUIRE_MESSAGE(rev.code == 0, rev.err);
  ids["revoked"] = ids["south"];
  ids["revoked"].name = "revoked";
  conns["revoked"] = std::move(conns["south"]);
  // Revocation reaches every cloud service within a second (admission):
  // wait until south's open scheduler connection is refused.
  for (const char* service : {"scheduler", "aggregator", "ingest", "trainer", "audit"})
    REQUIRE_MESSAGE(eventually([&] {
      return rpc(ids["revoked"], service, "PingRequest", "", wire::new_request_id()).first == outcome::deny;
    }, 20s), service << " still answers the revoked site");
  for (const auto& [type, row] : table.rows) send_one(row, ids["revoked"]);

  // The matrix: every cell as expected.
  std::string mismatches;
  for (const auto& s : log)
    if (s.got != s.expected)
      mismatches += "\n  " + s.type + " from " + s.identity + ": expected " + to_string(s.expected) + ", got " +
                    to_string(s.got) + (s.message.empty() ? "" : " (" + s.message + ")");
  CHECK_MESSAGE(mismatches.empty(), "cells that differ from docs/security.md:" << mismatches);

  // Every denial is in the audit chain under the real caller: a record of its
  // request id (gateway requests), decision deny, the caller's key, and the
  // token's principal unless the key alone was refused (revoked, unenrolled).
  // The delta and sync sockets carry no request ids and no tokens, and name
  // keys their own way: for them, every key refused there has a deny record of
  // that socket's service (aggregation.*, dataset.sync_refused) under its name.
  std::vector<v1::AuditEvent> events;
  std::string missing;
  eventually([&] {
    events = all_events(c);
    missing.clear();
    std::map<std::string, std::set<std::string>> raw_refused, raw_recorded;  // socket -> key principals
    for (const auto& s : log) {
      if (s.got != outcome::deny || s.expected != outcome::deny) continue;
      const auto& id = ids[s.identity];
      const std::string& where = table.rows.at(s.type).service;
      if (where == "aggregator delta socket" || where == "ingest sync socket") {
        raw_refused[where].insert(id.key_principal);
        continue;
      }
      bool found = false;
      for (const auto& e : events) {
        if (e.decision() != v1::DENY || e.peer_key() != id.key_principal) continue;
        // Its own record, or the counted summary of a window of identical
        // denials it was merged into (the revoked site's own trainer keeps
        // polling with the same key: runtime/denial_merge.hpp).
        const bool merged = e.request_id().empty() && e.action() == "loom.v1." + s.type &&
                            e.payload().find("merged_denials") != std::string::npos;
        if (e.request_id() != s.rid && !merged) continue;
        if (!e.principal().empty() && e.principal() != id.token_principal) continue;
        if (e.principal().empty() && s.identity != "revoked" && s.identity != "unenrolled") continue;
        found = true;
        break;
      }
      if (found) continue;
      missing += "\n  " + s.type + " from " + s.identity + " (" + s.rid + ")";
      for (const auto& e : events)  // what there is instead, to say why
        if (e.request_id() == s.rid || (e.action() == "loom.v1." + s.type && e.peer_key() == id.key_principal))
          missing += "\n    seen: " + e.action() + " decision " + std::to_string(e.decision()) + " principal '" +
                     e.principal() + "' peer '" + e.peer_key() + "' request '" + e.request_id() + "' " + e.reason();
    }
    for (const auto& e : events) {
      if (e.decision() != v1::DENY || e.peer_key().empty()) continue;
      if (e.action().rfind("aggregation.", 0) == 0) raw_recorded["aggregator delta socket"].insert(e.peer_key());
      if (e.action() == "dataset.sync_refused") raw_recorded["ingest sync socket"].insert(e.peer_key());
    }
    for (const auto& [where, keys] : raw_refused)
      if (raw_recorded[where].size() < keys.size())
        missing += "\n  " + where + ": " + std::to_string(keys.size()) + " keys refused, deny records under " +
                   std::to_string(raw_recorded[where].size()) + " key names";
    return missing.empty();
  }, 30s);
  CHECK_MESSAGE(missing.empty(), "denials with no audit record under the real caller:" << missing);

  // The diloco job is only a fixture: stop it.
  run_loom(c.home.path(), {"job", "cancel", o.diloco_job, "--reason", "identity matrix done"});
}
