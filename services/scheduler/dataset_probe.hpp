// dataset_probe: how the scheduler asks the ingest service, at submit, whether
// a dataset a job names is there and ready — so a job on a missing or
// half-imported dataset is refused before it is stored, whoever submits it
// (the CLI or the raw wire). One request per dataset, CURVE with the
// scheduler's own key and a service token; a short timeout so the actor is
// not held when ingest is down (the submit is then refused as unavailable).
#pragma once

#include "libs/status/status.hpp"

#include <functional>
#include <string>

namespace loom::runtime {
struct service_env;
}

namespace loom::scheduler {

// Whether `tenant`'s `dataset` is ready (datasets are per tenant: the job's
// tenant is asked for, ingest honours it from the scheduler's own key). ok;
// not_found (also another tenant's); conflict (importing, failed, damaged,
// empty: its state and the reason named); unavailable (ingest did not answer).
using dataset_probe = std::function<status(const std::string& tenant, const std::string& dataset)>;

// The probe over this deployment's ingest endpoint (read from endpoints.json
// at each call: ingest may have restarted on another port).
dataset_probe ingest_probe(runtime::service_env& env);

}  // namespace loom::scheduler
