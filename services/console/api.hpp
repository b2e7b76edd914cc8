// api: the console's JSON API, one function per route. Each route turns the
// browser's call into the typed request the CLI sends (backend.hpp) under the
// session's token, and the reply into JSON (protobuf's JSON mapping, field
// names as in proto/); a service's refusal becomes the HTTP status of its
// errc with the service's own words. No route decides a permission itself:
// the services do, and audit what they refuse.
//
//   GET  /api/session                 who is logged in, and the CSRF token
//   GET  /api/overview                nodes, queue, running jobs, alerts
//   GET  /api/topology                cloud, sites, trainers, aggregator, links
//   GET  /api/jobs[?state=S]          ListJobs
//   GET  /api/jobs/ID                 GetJob + the console's curve of it
//   POST /api/jobs                    {template, overrides[]} -> SubmitJob
//   POST /api/jobs/ID/cancel          CancelJob
//   GET  /api/templates               the templates the console can submit
//   GET  /api/nodes                   ListNodes
//   POST /api/nodes/ID/drain|undrain  DrainNode / UndrainNode
//   GET  /api/sites                   ListSites
//   POST /api/sites/token             {site, ttl_s} -> IssueSiteToken
//   POST /api/sites/NAME/revoke       RevokeSite
//   GET  /api/models                  ListModels
//   POST /api/models/VERSION/export   {format, type} -> StartModelExport (trainer)
//   GET  /api/exports/ID              GetModelExport
//   GET  /api/exports/ID/files/NAME   the file, streamed by FetchModelExport
//   GET  /api/datasets                ListDatasets (ingest)
//   POST /api/datasets                {path, dataset, profile} -> ImportDataset (ingest)
//   GET  /api/datasets/NAME           DatasetStatus (ingest)
//   GET  /api/datasets/NAME/rejects[?offset=O&limit=N]   ListRejects (ingest)
//   POST /api/datasets/NAME/verify    VerifyDataset (ingest)
//   GET  /api/tasks/ID                GetTask (ingest): an import's or a verify's progress
//   GET  /api/audit[?job=ID&limit=N]  AuditQuery (newest first)
// Thread-safe: called from every HTTPS worker.
#pragma once

#include "services/console/backend.hpp"
#include "services/console/job_series.hpp"
#include "services/console/sessions.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace loom::console {

struct api_call {
  std::string method;  // GET, POST
  std::string path;    // /api/jobs/j-1/cancel
  std::map<std::string, std::string> query;
  nlohmann::json body;  // POST: the parsed JSON body (an object)
  session who;
};

struct api_reply {
  int status = 200;
  nlohmann::json body;
  // A file download (GET /api/exports/ID/files/NAME): written by the server
  // in pieces through `stream` instead of `body`.
  std::function<bool(const std::function<bool(const std::string&)>& write)> stream;
  std::string file_name;
  std::uint64_t file_bytes = 0;
};

// The HTTP status for an errc (401, 403, 404, 400, 503, 500 ...).
int http_status(errc code);
// {"error": {"code": "...", "message": "..."}} with http_status(e.code).
api_reply error_reply(const error& e);

class api {
 public:
  api(backend& b, job_series& series, std::vector<std::string> template_dirs);

  api_reply handle(const api_call& c);

  // The live stream's pieces (live.hpp): the same JSON the GET routes give,
  // both from one round of requests (ListNodes, ListJobs, and ListSites
  // unless `with_topology` is false: the overview alone, topology null).
  struct cluster_pages {
    nlohmann::json topology, overview;
  };
  result<cluster_pages> cluster(const session& who, bool with_topology = true);
  // GetJob under who's token; adds its progress to the curve and returns the
  // job with the curve's points from `from` (next: where to resume).
  result<nlohmann::json> job(const session& who, const std::string& id, std::size_t from, std::size_t* next);

 private:
  api_reply jobs_route(const api_call& c, const std::vector<std::string>& parts);
  api_reply cluster_route(const api_call& c, const std::vector<std::string>& parts);
  api_reply models_route(const api_call& c, const std::vector<std::string>& parts);
  api_reply data_route(const api_call& c, const std::vector<std::string>& parts);
  api_reply submit(const api_call& c);
  nlohmann::json templates() const;

  backend& b_;
  job_series& series_;
  std::vector<std::string> template_dirs_;
  std::string cloud_zone_;  // this deployment's zone (endpoints.json at start): its trainers are the cloud's
};

// A proto message as JSON (field names as in proto/, zero values printed).
nlohmann::json to_json(const google::protobuf::Message& m);

// The routes' replies (api.cpp, api_models.cpp): a JSON body with 200; a
// service's reply as JSON, or its error; 404 naming a route there is none of.
api_reply ok_reply(nlohmann::json body);
template <class M>
api_reply reply_of(const result<M>& r) {
  return r ? ok_reply(to_json(*r)) : error_reply(r.err());
}
api_reply not_route(const api_call& c);

}  // namespace loom::console
