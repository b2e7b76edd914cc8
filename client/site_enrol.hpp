// Enrolment of this data dir as an edge site of a cloud (issue 15): used by
// `loom site enrol` and by `loom up --site NAME --cloud EP --enrol-token T`
// when <data>/cloud.json is missing. Called from a command's main thread.
#pragma once

#include "client/lifecycle.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::cli {

struct enrolment {
  std::string site, cloud_zone;
  std::vector<std::string> services;  // the cloud's services the site was told of
};

// The command line's part of an enrolment, checked before anything is sent:
// invalid_argument naming --site, --cloud or --enrol-token when the name, the
// endpoint or the token is malformed (a usage error, exit 2). Anything the
// cloud answers later is a refusal with its own code, never a usage error.
status check_enrol_options(const std::string& site, const std::string& endpoint, const std::string& token_text);

// Sends the enrolment (once, never retried: the token is one-time) and keeps
// the cloud's keys, the site's bearer token and cloud.json; audited locally.
// conflict when the data dir is enrolled as another site; the cloud's refusal
// (permission_denied for a used, expired, foreign or revoked token) otherwise.
// REQUIRES: check_enrol_options passed; the data dir's keys exist
// (ensure_keys); `admin` from require_admin.
result<enrolment> enrol_site(context& c, const std::string& site, const std::string& endpoint,
                             const std::string& token_text, const caller& admin);

}  // namespace loom::cli

namespace loom::cli {

// What `loom up` runs as an edge site: its name (= its zone) and the cloud's
// scheduler and aggregator endpoints (from cloud.json) that endpoints.json
// names for them.
struct site_plan {
  std::string site;
  std::map<std::string, std::string> cloud_rpc;  // service -> tcp://HOST:PORT
};

// `loom up`'s --site/--cloud/--enrol-token/--zone as a command line: a bad
// combination or a malformed value is invalid_argument naming the option (a
// usage error), before anything is started or sent. `previous`: the data
// dir's endpoints.json (a data dir that ran as a site stays one).
status check_site_options(const context& c, const layout::endpoints& previous);

// `loom up` options --site/--cloud/--enrol-token, or a data dir that ran as a
// site before (`previous`): nullopt for a cloud (plain `loom up`). Enrols
// first when cloud.json is missing and --enrol-token is given. not_found when
// not enrolled and no --enrol-token; the enrolment's errors (enrol_site).
// REQUIRES: check_site_options passed.
result<std::optional<site_plan>> plan_site(context& c, const layout::endpoints& previous, const caller& admin);

}  // namespace loom::cli
