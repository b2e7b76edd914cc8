// command_table(): every `loom` command with its operands and options, the
// one place that says what a command line may hold (see options.hpp). A new
// option or subcommand is a new line here; the parser, `--help` and the
// command-line property test (tests/cli.test.cpp) pick it up.
#include "client/options.hpp"

#include "libs/layout/layout.hpp"
#include "libs/tokenizer/train/bpe_train.hpp"

#include <cstdint>
#include <limits>

namespace loom::cli {
namespace {

using namespace opt;

// Longest wait any option accepts: an hour bounds a typo like 1e300 (a
// command that would never time out) while leaving slow machines room.
constexpr double max_wait_s = 3600;
// A token lives at most a year (the audit service refuses longer: max_ttl_s).
constexpr std::uint64_t max_ttl_s = 365ULL * 24 * 3600;
// The most rows the services return per call (ingest's max_rejects; audit's query limit).
constexpr std::uint64_t max_rows = 10000;
constexpr std::uint64_t max_seq = std::numeric_limits<std::int64_t>::max();  // the store's seq is an int64
constexpr std::uint64_t max_memory = std::uint64_t{1} << 50;                  // 1 PiB: no machine has more
constexpr double max_enrol_ttl_s = 7 * 24 * 3600;  // the scheduler's site_registry::max_ttl

command_spec row(std::string path, std::string operands, std::size_t min, std::size_t max,
                 std::vector<option_spec> options, std::string help, std::string details = "", bool hidden = false) {
  return command_spec{std::move(path), std::move(operands), min, max, std::move(options), std::move(help),
                      std::move(details), hidden};
}

std::vector<command_spec> build() {
  const auto dataset = text("dataset", "NAME", "the dataset's name at ingest");
  // Datasets are per tenant: the token's, or (admins) the one named.
  const auto data_tenant = text("tenant", "T", "act on tenant T's datasets (admins; default the token's tenant)");
  const auto request_id = text("request-id", "ID", "the call's request id: a retry with the same id is done once");
  const auto templates = path("templates", "DIR", "look for templates in DIR first (also $LOOM_TEMPLATES)");
  return {
      row("up", "", 0, 0,
          {seconds("wait", max_wait_s, "how long to wait for every service to be healthy (default 30)"),
           text("zone", "Z", "the zone this deployment's nodes are in"),
           count("trainers", "N", 1, layout::max_trainers, "trainer processes (kept for later `loom up`)"),
           count("scheduler-replicas", "N", 1, layout::max_scheduler_replicas,
                 "scheduler replicas: one leads under a lease in the store, the others stand by (kept for later `loom up`)"),
           count("audit-replicas", "N", 1, layout::max_audit_replicas,
                 "audit replicas on this host: one stores the chain under a lease in the store, the others stand by "
                 "(kept for later `loom up`)"),
           count("scheduler-replica", "K", 1, layout::max_scheduler_replicas,
                 "with --only scheduler: run replica K of --scheduler-replicas here, the others on other hosts (kept)"),
           repeated(path("import-root", "DIR",
                         "a directory ingest may import from besides <data>/imports (repeatable; kept for later `loom up`)")),
           text("site", "NAME", "run as edge site NAME of a cloud: audit, ingest and trainers (zone NAME), no scheduler or aggregator"),
           text("cloud", "tcp://HOST:PORT", "the cloud scheduler to enrol with (with --site and --enrol-token)"),
           text("enrol-token", "T", "enrol first (when <data>/cloud.json is missing) with this `loom site token`"),
           text("listen", "ADDR", "the IPv4 address the services listen on: one of this host's, or 0.0.0.0 (default "
                                  "127.0.0.1; kept for later `loom up`)"),
           text("advertise", "HOST", "the address or name other hosts reach this one at (default the --listen "
                                     "address; kept)"),
           text("ports", "FIRST-LAST", "every listener's port from this range, e.g. 7400-7499 for one firewall rule "
                                       "(default any free port; kept)"),
           list("only", "S1,S2", "a cloud split over hosts: run only these services here, e.g. scheduler,audit "
                                 "(kept; the others' endpoints come from --peer-endpoints)"),
           repeated(path("peer-endpoints", "FILE", "with --only: a copy of another host's endpoints.json (repeatable; "
                                                   "merged into <data>/peers.json by process name; may be given to a "
                                                   "running deployment)"))},
          "start the services (on loopback unless --listen), wait until healthy"),
      row("init", "", 0, 0,
          {flag("yes", "take the flags and the defaults, ask nothing (needed off a terminal)"),
           text("site", "NAME", "set up edge site NAME (with --cloud and --enrol-token: enrolled now)"),
           text("cloud", "tcp://HOST:PORT", "the cloud scheduler a site enrols with"),
           text("enrol-token", "T", "the site's `loom site token` from the cloud"),
           text("zone", "Z", "a cloud's zone (default local)"),
           text("listen", "ADDR", "the IPv4 address the services listen on (default 127.0.0.1)"),
           text("advertise", "HOST", "the address other hosts reach this one at"),
           text("ports", "FIRST-LAST", "every listener's port from this range"),
           count("trainers", "N", 1, layout::max_trainers, "trainer processes (default 1)"),
           repeated(path("import-root", "DIR", "a directory ingest may import from besides <data>/imports (repeatable)")),
           text("database", "URL", "the store: sqlite (the data dir's file, the default) or a postgresql:// URL, "
                                   "connected to before anything is saved"),
           text("template", "T", "the template of the first job (default pretrain-tiny; checked to exist)"),
           templates},
          "guided set-up: keys, the first admin token, addresses, store, template (again: changes only what differs)",
          "On a terminal it asks for each answer not given as a flag; elsewhere give --yes. Every answer is\n"
          "checked before anything is written (a PostgreSQL URL is connected to); a second run with the same\n"
          "answers writes nothing. `loom up` then starts what it set up."),
      row("down", "", 0, 0, {}, "stop them (the data dir's owner: no token needed; names what it stopped)"),
      row("status", "", 0, 0, {}, "services and the node roster"),
      row("ping", "[SERVICE]...", 0, SIZE_MAX, {},
          "ingest | scheduler | trainer[-K] | aggregator | audit (all by default)"),
      row("watch", "", 0, 0, {}, "the supervisor `loom up` starts (internal)", "", true),
      row("token issue", "", 0, 0,
          {required(choice("role", {"viewer", "operator", "admin"}, "the token's role")),
           list("zones", "Z1,Z2|*", "zones the token may act in (default *)"),
           count("ttl", "SECONDS", 1, max_ttl_s, "lifetime (default 3600)"),
           text("principal", "P", "who the token names (default ROLE-<unix time>)"),
           text("tenant", "T", "the tenant whose jobs the token acts on (default: default)"),
           flag("offline", "issue locally with the admin key, without an audit record")},
          "a token, issued through the audit service (audited; needs the admin key)"),
      row("token revoke-all", "", 0, 0, {}, "revoke every token issued so far (bumps the epoch)"),
      row("keys init", "", 0, 0,
          {flag("force", "re-create missing or damaged keys on a stopped deployment (admin; says what each "
                         "new key invalidates)")},
          "create keys and the first admin token"),
      row("keys rotate", "", 0, 0, {}, "new audit key-encryption key version (old ones only decrypt)"),
      row("keys status", "", 0, 0, {},
          "the audit and at-rest key-encryption keys: versions, ages, when the next rotation is due (read locally)"),
      row("keys import", "", 0, 0,
          {required(path("from", "DIR", "a read-only copy of a deployment's keys/ (a Kubernetes Secret, a compose secret)"))},
          "copy keys into <data>/keys, owner-only (a container's init step)"),
      row("audit verify", "", 0, 0,
          {count("from", "SEQ", 1, max_seq, "first seq to check (default 1)"),
           text("database", "URL", "the store to read (default: the data dir's)"),
           path("keys", "DIR", "anchor public keys (default <data>/keys/audit)"),
           path("anchors", "FILE", "anchor file (default <data>/audit/anchors.log)"),
           path("archive", "DIR", "also check the archived segments' files there, first, end to end with the live "
                                  "chain (the audit service writes them to <data>/audit/archive)")},
          "check the audit hash chain and its signed anchors (store read directly)"),
      row("audit archive", "", 0, 0,
          {count("older-than-days", "N", 1, 36500, "archive records older than N days (default: the retention; "
                                                   "less than the retention is refused)"),
           flag("dry-run", "say what would be archived, move nothing")},
          "move audit records past the retention to an archive file (admin; the store refuses younger ones)"),
      row("audit trail", "JOB", 1, 1, {}, "a job's audit timeline"),
      row("audit tail", "", 0, 0,
          {count("lines", "N", 1, max_rows, "how many of the newest events (default 20)"),
           flag("follow", "keep printing new events until interrupted")},
          "the newest audit events"),
      row("tokenize", "PATH", 1, 1,
          {choice("encoding", {"gpt2"}, "the encoding (only gpt2)"),
           text("field", "F", "JSONL records: the string field to read (default text)"),
           flag("decode", "PATH holds ids: print the text back")},
          "GPT-2 ids, one line per document (.jsonl: per record)"),
      row("data import", "PATH", 1, 1,
          {required(dataset), choice("profile", {"default", "web", "code", "minimal"}, "cleaning rules"),
           size("memory", 1, max_memory, "the import's memory budget (e.g. 512MiB)"),
           list("nodes", "N1,N2", "nodes to place shards on"),
           list("deny", "IDS", "licences to reject (e.g. GPL-3.0,CC-BY-NC-*)"),
           flag("no-pii", "keep PII (no redaction)"), flag("no-dedup", "keep duplicates"),
           text("field", "F", "JSONL records: the text field"),
           flag("no-media", "refuse images and audio (default: imported into media tars)"),
           text("image-filter", "FILE", "a learned image filter (loom data train-filter --kind image)"),
           text("text-filter", "FILE", "a learned text filter (loom data train-filter --kind text)"),
           text("template", "T", "take the import options from template T's [ingest] section (flags override)"),
           templates, data_tenant},
          "import files into a dataset at ingest (follows the task)"),
      row("data list", "", 0, 0,
          {text("tenant", "T", "only tenant T's datasets (admins see every tenant's by default)")},
          "datasets at ingest (the token's tenant's)"),
      row("data status", "NAME", 1, 1, {data_tenant}, "a dataset's size, shards, placement and damage (cheap checks)"),
      row("data verify", "NAME", 1, 1, {data_tenant},
          "hash every shard of a dataset (a task; exit 1 naming damaged shards)"),
      row("data place", "NAME", 1, 1,
          {required(list("nodes", "N1,N2", "trainer nodes of the roster to place the dataset's shards on")),
           data_tenant},
          "place a dataset's shards anew when nodes join or leave: only those whose node changes move",
          "  Bounded rendezvous hashing, as at import: adding a node moves about 1/N of the shards. Each\n"
          "  trainer reading with data.local = true then fetches what is now placed on it and drops the rest."),
      row("data rejects", "NAME", 1, 1,
          {count("limit", "N", 1, max_rows, "how many to list (default 50)"),
           count("offset", "N", 0, max_seq, "skip the first N (default 0)"), data_tenant},
          "what an import rejected and why (the true total, a page at a time)"),
      row("data sync", "", 0, 0,
          {required(path("from", "A", "data dir of the deployment that has the dataset")),
           required(path("to", "B", "data dir of the deployment that pulls it")), required(dataset),
           text("from-token", "T", "token for A (default A/admin.token)"),
           text("to-token", "T", "token for B (default B/admin.token)"),
           text("tenant", "T", "the tenant whose dataset it is, on both sides (admins; default each token's)")},
          "B's ingest pulls a dataset from A's, fetching only the chunks it lacks",
          "  A is told to trust B's ingest key (copied into A/keys/peers/) and, with A's token, to let\n"
          "  that key read dataset D of the token's tenant (SyncInfoRequest naming D and the key); B\n"
          "  pulls it into B's token's tenant and accepts it only if every shard matches its\n"
          "  manifest.json. Two hosts: copy B's keys/curve/ingest.pub into A's keys/peers/ by hand,\n"
          "  start A's ingest with LOOM_INGEST_SYNC_BIND=tcp://0.0.0.0:PORT, send A that\n"
          "  SyncInfoRequest and B a PullDatasetRequest with the endpoint, key and tenant it answers."),
      row("data pii", "FILE", 1, 1,
          {text("region", "CC", "region for phone numbers without +country code (default US)")},
          "PII and secret spans in FILE's bytes (offline; --json: type/start/end)"),
      row("data train-tokenizer", "PATH", 1, 1,
          {required(count("vocab-size", "N", tokenizer::min_trained_vocab, tokenizer::max_trained_vocab,
                          "tokens in all: 256 bytes + merges + <|endoftext|>")),
           path("out", "FILE", "where to write tokenizer.json (default ./tokenizer.json; never an input, never in a "
                               "data dir's keys/, tokens or store)"),
           flag("force", "replace --out when it exists"),
           count("min-frequency", "F", 1, std::numeric_limits<std::uint64_t>::max(),
                 "stop when no pair occurs F times (default 2)")},
          "learn a byte-level BPE from a file or directory (offline)"),
      row("data train-filter", "[PATH]", 0, 1,
          {required(choice("kind", {"text", "image"}, "what the filter judges")),
           path("out", "FILE", "where to write the model (default ./text-filter.gpt or ./image-filter.cnn; never an "
                               "input, never in a data dir's keys/, tokens or store)"),
           flag("force", "replace --out when it exists"),
           text("good", "PATH", "text: documents to keep (a file or directory), for the quality head"),
           text("bad", "PATH", "text: documents to drop, for the quality head"),
           count("steps", "N", 1, 100000, "text: GPT training steps (default 300)"),
           count("generated", "N", 1, 100000, "image: train on N generated images per label instead of PATH"),
           count("epochs", "N", 1, 1000, "image: passes over the images (default 6)")},
          "train a learned filter for data import (text: PATH = reference text; image: PATH = ok/ blank/ "
          "blurred/ corrupted/ mostly_text/)"),
      row("templates", "[show TEMPLATE]", 0, 2,
          {templates, key_values("set", "show: override a template key, as at `loom job submit`")},
          "job templates with their summaries; `show T`: when to use it, its stages, data, ingest and resolved configs",
          "  Looked up in --templates DIR, $LOOM_TEMPLATES, the source tree's templates/, then\n"
          "  /usr/local/share/edgeloom/templates; industry templates are folders (industry/NAME/template.toml\n"
          "  with a sample/ corpus)."),
      row("job submit", "", 0, 0,
          {required(text("template", "T", "a template name, or a .toml file")),
           key_values("set", "override a template key (e.g. sft.train.steps=50)"),
           choice("priority", {"low", "normal", "high"}, "priority class (default: the template's)"),
           text("tenant", "T", "the job's tenant (default the token's; another needs the admin role)"), text("zone", "Z", "zone to run in"), request_id, templates},
          "queue a training job (a pipeline of stages)"),
      row("job list", "", 0, 0,
          {choice("state", {"pending", "queued", "running", "succeeded", "failed", "cancelled"},
                  "only jobs in this state")},
          "jobs at the scheduler"),
      row("job show", "ID", 1, 1, {}, "a job and its stages"),
      row("job logs", "ID", 1, 1, {}, "a job's events"),
      row("job watch", "ID", 1, 1,
          {seconds("interval", max_wait_s, "seconds between polls (default 1)")},
          "live progress until the job ends (exit 0 when it succeeds)"),
      row("diagnose", "JOB", 0, 1,
          {flag("rules-markdown", "print the rules as docs/troubleshooting.md (no JOB)")},
          "name what went wrong with a job: causes surest first, what was seen, repair steps",
          "Reads the job and its events, the node roster, each stage's metrics log and config (when this host\n"
          "can read the job's directory), free space there and the job's audit trail; what it could not read\n"
          "is listed as not seen. The rules: docs/troubleshooting.md."),
      row("suggest", "JOB", 1, 1, {},
          "settings the job could run better with, from what it measured: each with its numbers and --set",
          "Threads against the node's cores, micro-batch against memory headroom, bf16 where this CPU has\n"
          "it, the learning rate from the loss curve's shape, a cross-site stage's H and codec from its\n"
          "stalls, more steps when the loss still falls; largest expected gain first."),
      row("report", "JOB", 1, 1,
          {required(path("out", "FILE", "the HTML file to write (owner-only: it holds the job's audit trail)"))},
          "one self-contained HTML page of a job: diagnosis, curves, timeline, config, data, models, audit trail",
          "Inline CSS and SVG, no script, nothing fetched: it opens anywhere. The curves carry their points as\n"
          "data attributes; curves need this host to read the job's directory (else listed as not seen)."),
      row("job cancel", "ID", 1, 1, {text("reason", "TEXT", "why (kept in the job's log)"), request_id},
          "stop a job"),
      row("site token", "", 0, 0,
          {required(text("site", "NAME", "the site's name (a-z, 0-9, -): also its zone")),
           seconds("ttl", max_enrol_ttl_s, "seconds the token stays usable (default 3600, at most 7 days)")},
          "a one-time enrolment token for an edge site (admin; audited)"),
      row("site revoke", "NAME", 1, 1, {text("reason", "TEXT", "why (kept in the audit record)")},
          "revoke a site: the cloud's services refuse its keys (admin; audited)"),
      row("site list", "", 0, 0, {}, "edge sites: state, trainers, last contact, link, datasets"),
      row("node drain", "NODE", 1, 1, {text("reason", "TEXT", "why (kept in the audit record)")},
          "the node finishes what it runs and is given nothing new, until undrained (admin, or the node's own site)"),
      row("node undrain", "NODE", 1, 1, {text("reason", "TEXT", "why (kept in the audit record)")},
          "undo a drain: the node takes work again (admin, or the node's own site)"),
      row("model list", "", 0, 0,
          {text("model", "NAME", "only this model's versions (a model is its job's name)"),
           count("limit", "N", 1, max_rows, "how many to list (default 50)")},
          "model versions, newest first: each stage that succeeded leaves one"),
      row("model show", "VERSION", 1, 1, {}, "one model version with its lineage, hashes, metrics and config"),
      row("model diff", "A B", 2, 2, {}, "what differs between two model versions"),
      row("model rollback", "VERSION", 1, 1, {text("reason", "TEXT", "why (kept in the audit record)")},
          "make an earlier version its model's current one again (operator; hash-checked; audited)"),
      row("model check", "VERSION", 1, 1,
          {path("held-out", "FILE", "text to score the loss on (default: the tail of the version's own data)"),
           text("max-loss", "X", "the highest held-out loss accepted (with the template's export.max_loss: the lower)"),
           flag("override-compliance", "admin: accept a lineage with quarantined licences or unredacted PII (audited)"),
           text("reason", "TEXT", "why (with --override-compliance; kept in the audit record)")},
          "every pre-export check; lists every failure, exit 1 on any",
          "  signature (manifest HMAC, every file's SHA-256, params hash as recorded), finite\n"
          "  (no NaN/Inf), shapes (checkpoint = config), tokenizer (size = vocab, <|endoftext|>),\n"
          "  held_out_loss (finite, at most export.max_loss / --max-loss, else ln(vocab)),\n"
          "  compliance (the lineage's import reports; raw files: not assessed).\n"
          "  Runs on the deployment's machine: reads the checkpoint under the data dir."),
      row("model export", "VERSION", 1, 1,
          {required(choice("format", {"hf", "gguf"}, "a Hugging Face GPT-2 directory or a llama.cpp GGUF file")),
           choice("type", {"f32", "f16", "q8_0"}, "GGUF tensor type (default f32)"),
           required(path("out", "PATH", "hf: an absent or empty directory; gguf: the file, or a directory for it")),
           path("held-out", "FILE", "as for `model check`"), text("max-loss", "X", "as for `model check`"),
           flag("override-compliance", "as for `model check` (admin; audited)"),
           text("reason", "TEXT", "why (with --override-compliance)")},
          "check, then export a version (audited); a failed check exports nothing",
          "  gguf --out DIR (or PATH/) writes DIR/<model>-<version>-<type>.gguf."),
      row("site enrol", "", 0, 0,
          {required(text("site", "NAME", "the name the token was issued for")),
           required(text("cloud", "tcp://HOST:PORT", "the cloud scheduler (`loom site token` prints it)")),
           required(text("enrol-token", "T", "the one-time token from `loom site token`"))},
          "join this data dir to a cloud as an edge site (run on the site)",
          "  Creates the site's keys if missing, sends them with the token to the cloud scheduler\n"
          "  (whose key the token names) and keeps the cloud's keys and endpoints in\n"
          "  <data>/keys/cloud/ and <data>/cloud.json."),
  };
}

}  // namespace

const std::vector<command_spec>& command_table() {
  static const std::vector<command_spec> table = build();
  return table;
}

const std::vector<option_spec>& global_options() {
  static const std::vector<option_spec> globals = {
      path("data-dir", "D", "the deployment's data dir (else $LOOM_HOME, else ~/.local/share/edgeloom)"),
      flag("json", "print JSON"),
      text("token", "T", "the caller's token (else $LOOM_TOKEN, else <data>/admin.token)"),
      seconds("timeout", max_wait_s, "how long to wait for each reply"),
      flag("help", "this help"),
      flag("h", "this help"),
  };
  return globals;
}

}  // namespace loom::cli
