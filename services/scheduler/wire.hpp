// wire: the scheduler's protobuf <-> internal mapping, the only scheduler
// file that fills or reads loom.v1 messages field by field: jobs and their
// stages and events, trainers' polls and their answers, submits, and nodes.
// The logic (scheduler_logic.cpp) works on the internal records. Pure functions.
#pragma once

#include "services/scheduler/jobs/job_manager.hpp"
#include "services/scheduler/roster.hpp"

#include <string>

namespace loom::v1 {
class JobInfo;
class JobEvent;
class NodeInfo;
class PollWorkReply;
class PollWorkRequest;
class RegisterNodeRequest;
class SubmitJobRequest;
}  // namespace loom::v1

namespace loom::scheduler {

void to_wire(const job_rec& j, loom::v1::JobInfo* out);  // without stages' waiting (the logic adds it)
void to_wire(const job_event& e, loom::v1::JobEvent* out);
submit_args from_wire(const loom::v1::SubmitJobRequest& r);

poll_report from_wire(const loom::v1::PollWorkRequest& r);
void to_wire(const poll_answer& a, loom::v1::PollWorkReply* out);

// A node as it registered (its times are the caller's to set).
node from_wire(const loom::v1::RegisterNodeRequest& r);
// `state`: alive / suspect / dead / draining, as the roster judges it now.
void to_wire(const node& n, const std::string& state, loom::v1::NodeInfo* out);

}  // namespace loom::scheduler
