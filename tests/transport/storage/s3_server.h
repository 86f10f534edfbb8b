#pragma once

// s3_fixture.py as a child process for tests: a real S3 server (s3rver) and its
// fault-injecting, signature-checking proxy on 127.0.0.1. The fixture's "name=value"
// lines (endpoint, proxy, bucket, key_id, secret; "missing" when s3rver or boto3 is not
// installed: the tests skip with it) and fault commands over its stdin.

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

extern char** environ;

namespace brigade::test {

// The fixture process: its "name=value" lines, and fault commands over its stdin.
class S3Server {
 public:
  /// Starts `fixture` (s3_fixture.py) with MIRROR_DIR `mirror`; `upload`: a folder whose files are
  /// put in the bucket too (keys: their relative paths).
  S3Server(const std::string& fixture, const std::filesystem::path& mirror,
           const std::filesystem::path& upload = {}) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    posix_spawn_file_actions_addclose(&actions, to_child[1]);
    posix_spawn_file_actions_addclose(&actions, from_child[0]);
    // Debian's python3, where python3-boto3 installs boto3.
    const char* python = std::getenv("BRIGADE_TEST_PYTHON") ? std::getenv("BRIGADE_TEST_PYTHON")
                                                            : "/usr/bin/python3";
    std::string script = fixture, dir = mirror.string(), up = upload.string();
    char* argv[] = {const_cast<char*>(python), script.data(), dir.data(),
                    up.empty() ? nullptr : up.data(), nullptr};
    bool spawned = posix_spawnp(&pid_, python, &actions, nullptr, argv, environ) == 0;
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    commands_ = fdopen(to_child[1], "w");
    answers_ = fdopen(from_child[0], "r");
    if (!spawned) pid_ = -1;
    for (std::string line; pid_ > 0 && (line = read_line()) != "ready";) {
      if (line.empty()) return;  // the fixture died (its stderr says why)
      auto equals = line.find('=');
      values_[line.substr(0, equals)] = line.substr(equals + 1);
    }
    ready_ = pid_ > 0;
  }
  ~S3Server() {
    if (commands_) std::fclose(commands_);
    if (answers_) std::fclose(answers_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  bool ready() const { return ready_; }
  // Why the server is not ready: the fixture's "missing=" line, or a generic reason.
  std::string why_not() const {
    auto missing = values_.find("missing");
    return missing != values_.end() ? missing->second
                                    : "s3_fixture.py failed to start (its stderr says why)";
  }
  std::string operator[](const std::string& name) const { return values_.at(name); }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  // Arms a fault in the proxy ("fail 2"); returns once the fixture has armed it.
  void arm(const std::string& command) {
    std::fprintf(commands_, "%s\n", command.c_str());
    std::fflush(commands_);
    ASSERT_EQ(read_line(), "ok");
  }
  // Requests the proxy has received so far, and body bytes it has answered.
  std::pair<std::uint64_t, std::uint64_t> traffic() {
    std::fprintf(commands_, "requests 0\n");
    std::fflush(commands_);
    std::string line = read_line();
    EXPECT_EQ(read_line(), "ok");
    unsigned long long requests = 0, bytes = 0;
    std::sscanf(line.c_str(), "requests=%llu bytes=%llu", &requests, &bytes);
    return {requests, bytes};
  }
  // How many signatures the proxy has verified so far.
  std::uint64_t checked() {
    std::fprintf(commands_, "checked 0\n");
    std::fflush(commands_);
    std::string line = read_line();
    EXPECT_EQ(read_line(), "ok");
    return line.rfind("checked=", 0) == 0 ? std::stoull(line.substr(8)) : 0;
  }

 private:
  std::string read_line() {
    char buffer[4096];
    if (!answers_ || !std::fgets(buffer, sizeof buffer, answers_)) return {};
    std::string line(buffer);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }
  pid_t pid_ = -1;
  FILE* commands_ = nullptr;
  FILE* answers_ = nullptr;
  std::map<std::string, std::string> values_;
  bool ready_ = false;
};

}  // namespace brigade::test
