// run_program: runs a program with an argument vector (posix_spawnp, no shell), waits for it
// and returns its exit status (127 when it cannot be started). Arguments are never parsed by
// a shell, so untrusted text (a model id from a server) cannot run commands.
#pragma once
#include <string>
#include <vector>

namespace gs {

int run_program(const std::vector<std::string>& argv);

}  // namespace gs
