// dataset_fetch: a stage's data.dataset brought to this trainer — only the
// chunks that changed, from this deployment's ingest sync server, checked
// against their manifest — and where it then lies. Called on the training
// thread (worker); `stop` ends a pull at once.
#pragma once

#include "libs/status/status.hpp"

#include <atomic>
#include <cstdint>
#include <string>

namespace loom::runtime {
struct service_env;
}

namespace loom::trainer {

// Where a stage's data.dataset of `tenant` is fetched to and trained from
// (per tenant, as at ingest: libs/layout/dataset_dirs.hpp). With `node`
// (data.local): that node's share, <root>/.node-<node>/, apart from the whole
// copies so two trainers sharing a data dir never trim each other's files.
std::string fetched_datasets(const runtime::service_env& env, const std::string& tenant,
                             const std::string& node = "");

// What a fetch moved, for the job's events.
struct fetch_figures {
  std::uint64_t files = 0;          // in the dataset at ingest
  std::uint64_t files_here = 0;     // of those, kept here (all, or this node's share)
  std::uint64_t files_updated = 0;  // written by this fetch
  std::uint64_t files_removed = 0;
  std::uint64_t bytes_fetched = 0;  // chunk bytes received from ingest
  double seconds = 0;
  std::string describe(const std::string& dataset, const std::string& node) const;
};

// Brings fetched_datasets(env, tenant, node)/<name> up to date with dataset
// `name` of the tenant at this deployment's ingest (dataset_fetch.cpp says
// how). With `node`, only manifest.json and the files placed on that node
// (token shards and media tars) are kept: what is missing is fetched, what is
// no longer placed there is removed. Errors name the dataset and ingest.
result<fetch_figures> fetch_dataset(runtime::service_env& env, const std::string& tenant, const std::string& name,
                                    const std::atomic<bool>& stop, const std::string& node = "");

}  // namespace loom::trainer
