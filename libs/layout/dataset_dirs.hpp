// Where a tenant's datasets lie under a datasets root (docs/security.md,
// "Datasets"). Dataset names are per tenant: tenant A's `notes` and tenant B's
// `notes` are two directories. Tenant `default` keeps the layout datasets had
// before tenants (<root>/<name>), so existing data dirs, jobs and tools read
// them unchanged; every other tenant has <root>/.tenant-<tenant>/<name>.
// Dataset names never start with '.', so no dataset is taken for a tenant's
// directory, and the prefix keeps tenant names "." and ".." (valid token
// tenants) one path component each. The same rule places the ingest's
// datasets (<data>/datasets) and a trainer's fetched copies
// (<data>/trainer/datasets). Pure functions; header-only.
#pragma once

#include <string>
#include <string_view>

namespace loom::layout {

// The tenant every pre-tenant dataset (and token) belongs to.
inline constexpr std::string_view default_tenant = "default";
// The directory-name prefix of a non-default tenant's datasets.
inline constexpr std::string_view tenant_dir_prefix = ".tenant-";

// The directory holding `tenant`'s datasets under `datasets_root` ("" is
// `default`). REQUIRES: tenant is a valid token tenant (auth::validate_name):
// no '/' and no NUL, 1..128 characters.
inline std::string tenant_datasets_root(const std::string& datasets_root, std::string_view tenant) {
  if (tenant.empty() || tenant == default_tenant) return datasets_root;
  return datasets_root + "/" + std::string(tenant_dir_prefix) + std::string(tenant);
}

// <datasets_root>/<name> of `tenant`. REQUIRES: as above, and a valid dataset name.
inline std::string tenant_dataset_dir(const std::string& datasets_root, std::string_view tenant,
                                      std::string_view name) {
  return tenant_datasets_root(datasets_root, tenant) + "/" + std::string(name);
}

}  // namespace loom::layout
