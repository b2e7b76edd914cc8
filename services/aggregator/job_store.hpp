// job_store: an aggregation's state on disk, in <data>/aggregator/<job>/.
// Format 2: one file per fragment (fragment_store.hpp: θ_p, m_p, e_p, the
// fragment's version, held update and the sites' last rounds of it) and a
// small manifest, state.bin:
//
//   "LOOMAGG2" | u64 LE header length | AggregationState (protobuf): the spec,
//   the grant, the sites, the round counters, and each fragment's file by
//   name with its version, size and SHA-256
//
// A fragment's close writes that fragment's file under a new name (the
// version is in it), then the manifest, then removes the file it replaced;
// each write is atomic (files::write_atomic*: temp, fsync, rename, fsync dir).
// Why that is crash-consistent: the manifest is the commit point and is
// written last. A kill -9 anywhere leaves some manifest whole, and it names
// only files written before it, which still exist (a file goes only after a
// manifest naming its successor is durable) and whose SHA-256 it holds; so a
// load sees the job as it was after one close. A fragment file newer than
// the manifest is one no manifest names: an orphan of a save cut short,
// ignored and removed on reload (the close it held is lost, as a save cut
// short always lost it; its deltas are re-sent, as the sites were never told
// of its version). A manifest newer than a file it names cannot be made by a
// crash; a file missing or altered under it is corruption naming the file
// and the job. The sites' last rounds of fragment p live in p's file, so
// what is "inside a step" always agrees with the θ_p it is loaded with, even
// after a failed write of p left later manifests naming its previous file.
//
// Format 1 ("LOOMAGG1": the whole job in state.bin) still loads; the
// aggregation writes it as format 2 on reload, state.bin replaced last.
// Stateless functions, but job_files (one thread at a time: the one running
// the job's saves). One writer per job directory.
#pragma once

#include "services/aggregator/aggregation.hpp"
#include "services/aggregator/fragment_store.hpp"

#include <memory>
#include <string>
#include <vector>

namespace loom::aggregator {

// <data>/aggregator/<job>/state.bin (the manifest; format 1: the whole job)
std::string state_path(const std::string& data_dir, const std::string& job);

// The manifest at `path`: s's spec, grant, sites (phase, key, deltas
// accepted), counters, restarts, and s.files, in fragment order. Tensors,
// held updates and last rounds are the fragments' files' (s's are ignored).
status save_manifest(const std::string& path, const saved_state& s);
// Either format. Format 2: the manifest, then every file it names
// (fragment_store.hpp's checks, each file read whole to check it); s.files
// says which. Without with_values a format-2 state keeps no tensor and no
// held payload (the aggregation reads a fragment's when it needs them), so a
// load holds one fragment at a time; format 1 always has its values.
// corruption naming the file (and for a fragment's file, the job) and what
// is wrong.
result<saved_state> load_state(const std::string& path, bool with_values = true);

// Removes, beside the manifest `state_file`, what none names: fragment files
// not in `keep`, and temp files of a write cut short (write_atomic's
// <file>.tmp.<pid>.<n>). One aggregator runs per data dir, so none is in use.
void remove_strays(const std::string& state_file, const std::vector<fragment_file>& keep);

// A job's files as its last manifest names them. Used by one thread at a
// time: the one running the job's saves, in the order of its closes.
struct job_files {
  explicit job_files(std::string manifest) : state_file(std::move(manifest)) {}
  std::string state_file;
  std::vector<fragment_file> files;  // per fragment
};

// One close's save: fragment p's file, then the manifest naming it.
struct save_task {
  std::shared_ptr<job_files> files;
  fragment_source fragment;  // views of the live θ_p, m_p, e_p (aggregation::defer_saves)
  saved_state header;        // the job-level part at the close (no tensors)
};
// Writes the fragment's file, then the manifest (header + files, the new one
// in its place), then removes the file it replaced. Tasks of one job must
// run in the order of their closes: a manifest then names only files that
// are written. A failed fragment write leaves files and manifest as they
// were; the error names the file.
status run_save(save_task& t);

// Every job directory under <data>/aggregator holding a state.bin, sorted.
std::vector<std::string> saved_jobs(const std::string& data_dir);

// A retired aggregation's tombstone (loom.v1.RetiredAggregation, written by
// the engine): <data>/aggregator/<job>/retired, in place of its state,
// kept until its grant expires so the grant cannot start the job again.
std::string retired_path(const std::string& data_dir, const std::string& job);
// Every job directory holding one, sorted.
std::vector<std::string> retired_jobs(const std::string& data_dir);

}  // namespace loom::aggregator
