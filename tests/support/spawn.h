/// @file tests/support/spawn.h
/// @brief A lab's own program started as a user's shell would start it, its output (stdout and stderr) in a
/// log file, for the tests that signal or watch a running lab.
#pragma once
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <string>
#include <vector>

extern char** environ;

namespace speedlabs::testing {

/// Starts @p args (the program first) with stdout and stderr into @p log; returns its pid, or -1 when it could
/// not be started.
inline pid_t spawn_logged(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  return error == 0 ? pid : -1;
}

}  // namespace speedlabs::testing
