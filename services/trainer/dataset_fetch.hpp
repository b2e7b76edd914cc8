// dataset_fetch: a stage's data.dataset brought to this trainer — only the
// chunks that changed, from this deployment's ingest sync server, checked
// against their manifest — and where it then lies. Called on the training
// thread (worker); `stop` ends a pull at once.
#pragma once

#include "libs/status/status.hpp"

#include <atomic>
#include <string>

namespace loom::runtime {
struct service_env;
}

namespace loom::trainer {

// Where a stage's data.dataset of `tenant` is fetched to and trained from
// (per tenant, as at ingest: libs/layout/dataset_dirs.hpp).
std::string fetched_datasets(const runtime::service_env& env, const std::string& tenant);

// Brings fetched_datasets(env, tenant)/<name> up to date with dataset `name`
// of the tenant at this deployment's ingest (dataset_fetch.cpp says how).
// Errors name the dataset and ingest.
status fetch_dataset(runtime::service_env& env, const std::string& tenant, const std::string& name,
                     const std::atomic<bool>& stop);

}  // namespace loom::trainer
