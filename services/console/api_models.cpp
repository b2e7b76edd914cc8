// The console's model, export, dataset and audit routes (api.hpp lists them).
#include "services/console/api.hpp"

#include "loom/v1/audit.pb.h"
#include "loom/v1/ingest.pb.h"
#include "loom/v1/models.pb.h"

namespace loom::console {

using nlohmann::json;

namespace {
std::string str(const json& body, const char* name) {
  return body.is_object() && body.contains(name) && body[name].is_string() ? body[name].get<std::string>() : "";
}

// A piece of an export's file per FetchModelExport: 4 MiB (the trainer's default).
constexpr std::uint32_t fetch_piece = 4u << 20;
}  // namespace

api_reply api::models_route(const api_call& c, const std::vector<std::string>& parts) {
  if (parts[1] == "models") {
    if (parts.size() == 2 && c.method == "GET") {
      loom::v1::ListModelsRequest req;
      req.set_limit(200);
      return reply_of(b_.typed<loom::v1::ListModelsReply>("scheduler", req, c.who.token));
    }
    if (parts.size() == 3 && c.method == "GET") {
      loom::v1::GetModelRequest req;
      req.set_version(parts[2]);
      return reply_of(b_.typed<loom::v1::GetModelReply>("scheduler", req, c.who.token));
    }
    if (parts.size() == 4 && parts[3] == "export" && c.method == "POST") {
      loom::v1::StartModelExportRequest req;
      req.set_version(parts[2]);
      const std::string action = str(c.body, "action");
      req.set_action(action.empty() ? "export" : action);
      const std::string format = str(c.body, "format");
      req.set_format(format.empty() && req.action() == "export" ? "hf" : format);
      req.set_type(str(c.body, "type"));
      return reply_of(b_.typed<loom::v1::StartModelExportReply>("trainer", req, c.who.token));
    }
    return not_route(c);
  }
  // exports
  if (parts.size() == 3 && c.method == "GET") {
    loom::v1::GetModelExportRequest req;
    req.set_id(parts[2]);
    return reply_of(b_.typed<loom::v1::GetModelExportReply>("trainer", req, c.who.token));
  }
  if (parts.size() == 5 && parts[3] == "files" && c.method == "GET") {
    loom::v1::GetModelExportRequest get;
    get.set_id(parts[2]);
    auto info = b_.typed<loom::v1::GetModelExportReply>("trainer", get, c.who.token);
    if (!info) return error_reply(info.err());
    const loom::v1::ModelExportFile* file = nullptr;
    for (const auto& f : info->info().files())
      if (f.name() == parts[4]) file = &f;
    if (!file) return error_reply(make_error(errc::not_found, "export " + parts[2] + " has no file " + parts[4]));
    api_reply r;
    r.file_name = file->name();
    r.file_bytes = file->bytes();
    const std::string id = parts[2], name = file->name(), token = c.who.token;
    const std::uint64_t total = file->bytes();
    r.stream = [this, id, name, token, total](const std::function<bool(const std::string&)>& write) {
      for (std::uint64_t off = 0; off < total;) {
        loom::v1::FetchModelExportRequest req;
        req.set_id(id);
        req.set_file(name);
        req.set_offset(off);
        req.set_max_bytes(fetch_piece);
        auto piece = b_.typed<loom::v1::FetchModelExportReply>("trainer", req, token);
        if (!piece || piece->data().empty() || !write(piece->data())) return false;
        off += piece->data().size();
      }
      return true;
    };
    return r;
  }
  return not_route(c);
}

namespace {
// A non-negative integer query parameter within [lo, hi]; `fallback` when absent.
result<std::uint64_t> query_number(const api_call& c, const char* name, std::uint64_t fallback, std::uint64_t lo,
                                   std::uint64_t hi) {
  auto it = c.query.find(name);
  if (it == c.query.end()) return fallback;
  const auto& v = it->second;
  if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos ||
      std::stoull(v) < lo || std::stoull(v) > hi)
    return make_error(errc::invalid_argument,
                      std::string(name) + " must be a number " + std::to_string(lo) + ".." + std::to_string(hi));
  return std::stoull(v);
}
}  // namespace

api_reply api::data_route(const api_call& c, const std::vector<std::string>& parts) {
  if (parts[1] == "tasks" && parts.size() == 3 && c.method == "GET") {
    loom::v1::GetTaskRequest req;
    req.set_id(parts[2]);
    return reply_of(b_.typed<loom::v1::GetTaskReply>("ingest", req, c.who.token));
  }
  if (parts[1] == "datasets" && c.method == "POST") {
    if (parts.size() == 2) {  // an import of a path on ingest's host, under its import roots
      loom::v1::ImportDatasetRequest req;
      req.set_path(str(c.body, "path"));
      req.set_dataset(str(c.body, "dataset"));
      req.set_profile(str(c.body, "profile"));
      if (req.path().size() > 4096 || req.dataset().size() > 128 || req.profile().size() > 32)
        return error_reply(make_error(errc::invalid_argument, "path, dataset or profile is too long"));
      return reply_of(b_.typed<loom::v1::ImportDatasetReply>("ingest", req, c.who.token));
    }
    if (parts.size() == 4 && parts[3] == "verify") {
      loom::v1::VerifyDatasetRequest req;
      req.set_name(parts[2]);
      return reply_of(b_.typed<loom::v1::VerifyDatasetReply>("ingest", req, c.who.token));
    }
    return not_route(c);
  }
  if (c.method != "GET") return not_route(c);
  if (parts[1] == "datasets") {
    if (parts.size() == 2)
      return reply_of(b_.typed<loom::v1::ListDatasetsReply>("ingest", loom::v1::ListDatasetsRequest{}, c.who.token));
    if (parts.size() == 3) {
      loom::v1::DatasetStatusRequest req;
      req.set_name(parts[2]);
      return reply_of(b_.typed<loom::v1::DatasetStatusReply>("ingest", req, c.who.token));
    }
    if (parts.size() == 4 && parts[3] == "rejects") {
      auto limit = query_number(c, "limit", 50, 1, 1000);
      auto offset = query_number(c, "offset", 0, 0, std::uint64_t{1} << 40);
      if (!limit) return error_reply(limit.err());
      if (!offset) return error_reply(offset.err());
      loom::v1::ListRejectsRequest req;
      req.set_dataset(parts[2]);
      req.set_limit(static_cast<std::uint32_t>(*limit));
      req.set_offset(*offset);
      return reply_of(b_.typed<loom::v1::ListRejectsReply>("ingest", req, c.who.token));
    }
    return not_route(c);
  }
  // audit
  if (parts.size() != 2) return not_route(c);
  loom::v1::AuditQueryRequest req;
  req.set_newest(true);
  auto limit = query_number(c, "limit", 100, 1, 1000);
  if (!limit) return error_reply(limit.err());
  req.set_limit(static_cast<std::uint32_t>(*limit));
  if (auto it = c.query.find("job"); it != c.query.end()) req.set_job_id(it->second);
  if (auto it = c.query.find("request"); it != c.query.end()) req.set_request_id(it->second);
  auto rep = b_.typed<loom::v1::AuditQueryReply>("audit", req, c.who.token);
  if (!rep) return error_reply(rep.err());
  json out = to_json(*rep);
  // Payloads are sealed bytes (base64 in JSON): not for a browser.
  if (out.contains("events"))
    for (auto& e : out["events"]) e.erase("payload");
  api_reply r;
  r.body = std::move(out);
  return r;
}

}  // namespace loom::console
