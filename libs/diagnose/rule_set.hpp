// The rule table's two halves (rules.cpp joins them): what goes wrong in the
// training itself, and what goes wrong around it (data, nodes, disks, files,
// placement, sites). Internal to libs/diagnose.
#pragma once

#include "libs/diagnose/rules.hpp"

#include <vector>

namespace loom::diagnose {

std::vector<rule> training_rules();  // rules_training.cpp
std::vector<rule> platform_rules();  // rules_platform.cpp

}  // namespace loom::diagnose
