#pragma once

// Child processes for end-to-end tests that start several programs at once (workers,
// trainers, a FUSE helper) and signal them mid-run.
//
// A Subprocess is started with fork + execve: the child gets its own process group,
// SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG: a crashed or killed
// test leaves no orphan behind), an empty signal mask with default dispositions, stdin
// from /dev/null, stdout and stderr into files (never pipes, so a chatty child never
// blocks on a full pipe, and both can be read after it ended), and no other inherited
// descriptor. An exec that fails throws in the parent with the child's errno.
//
// OWNERSHIP. A Subprocess owns its child: the destructor kills its process group with
// SIGKILL (also a stopped one) and reaps it, so no test leaves a process or a zombie —
// unless a thread of the child stays blocked in the kernel (a read from a FUSE server
// that never answers: kill the server first); the destructor then gives up after 10 s.
// It is movable, not copyable.
//
// THREADING. One thread uses a Subprocess at a time; it must be the thread that
// started it when the child is to outlive other threads (PR_SET_PDEATHSIG follows the
// parent thread).
//
// EXIT CODES. wait_for() returns the exit status, or 128 + the signal that ended it (as
// a shell reports it): 137 after SIGKILL.

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace brigade::test {

/// Overrides of the inherited environment: a value sets the variable, nullopt unsets it.
using Environment = std::map<std::string, std::optional<std::string>>;

/// The whole content of a file ("" when it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Polls `done` every 10 ms until it holds (true) or `timeout` passed (false).
template <typename Predicate>
bool wait_until(Predicate done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

class Subprocess {
 public:
  /// Starts argv[0] (a path) with `argv`, the inherited environment with `env` applied,
  /// stdout into `out` and stderr into `err` (created or truncated). Throws
  /// std::system_error when the program cannot be started.
  Subprocess(std::vector<std::string> argv, const Environment& env, std::filesystem::path out,
             std::filesystem::path err)
      : out_(std::move(out)), err_(std::move(err)) {
    if (argv.empty()) throw std::invalid_argument("Subprocess: no program");
    std::vector<std::string> vars = environment(env);
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    int report[2];  // the child writes its errno here when exec fails
    if (pipe2(report, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category());
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      const int e = errno;
      close(report[0]);
      close(report[1]);
      throw std::system_error(e, std::generic_category(), "fork");
    }
    if (pid == 0) exec_child(args.data(), envp.data(), report[1], parent);  // never returns
    pid_ = pid;
    close(report[1]);
    int child_errno = 0;
    ssize_t n;
    do {
      n = read(report[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n > 0) {
      wait_for(std::chrono::seconds(5));
      pid_ = -1;
      throw std::system_error(child_errno, std::generic_category(), "exec " + argv[0]);
    }
  }

  ~Subprocess() { kill_and_reap(); }

  Subprocess(Subprocess&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)),
        code_(other.code_),
        out_(std::move(other.out_)),
        err_(std::move(other.err_)) {}
  Subprocess& operator=(Subprocess&& other) noexcept {
    if (this != &other) {
      kill_and_reap();
      pid_ = std::exchange(other.pid_, -1);
      code_ = other.code_;
      out_ = std::move(other.out_);
      err_ = std::move(other.err_);
    }
    return *this;
  }
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }

  /// The first line of stdout without its newline, once the child has written it;
  /// nullopt when the child ended first or `timeout` passed.
  std::optional<std::string> first_line(std::chrono::milliseconds timeout) {
    std::optional<std::string> line;
    wait_until(
        [&] {
          const auto text = read_text(out_);
          if (const auto nl = text.find('\n'); nl != std::string::npos) {
            line = text.substr(0, nl);
            return true;
          }
          return !running();
        },
        timeout);
    return line;
  }

  /// Sends `signal` to the child (not its group). False when it has been reaped.
  bool signal(int signal) { return pid_ > 0 && !code_ && ::kill(pid_, signal) == 0; }

  /// Whether the child has not ended (reaps it when it has).
  bool running() { return pid_ > 0 && !poll(); }

  /// The exit code once the child has ended (see EXIT CODES); nullopt when it is still
  /// running after `timeout`.
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return code_;
    wait_until([&] { return poll(); }, timeout);
    return code_;
  }

  /// The exit code, once reaped.
  std::optional<int> code() const { return code_; }

  std::string out() const { return read_text(out_); }
  std::string err() const { return read_text(err_); }
  const std::filesystem::path& out_path() const { return out_; }
  const std::filesystem::path& err_path() const { return err_; }

 private:
  static std::vector<std::string> environment(const Environment& env) {
    std::vector<std::string> vars;
    for (char** e = environ; *e; ++e) {
      const std::string var(*e);
      const auto eq = var.find('=');
      if (env.count(var.substr(0, eq))) continue;
      vars.push_back(var);
    }
    for (const auto& [name, value] : env)
      if (value) vars.push_back(name + "=" + *value);
    return vars;
  }

  // Between fork and exec only async-signal-safe calls (the parent has threads).
  [[noreturn]] void exec_child(char** args, char** envp, int report, pid_t parent) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent ended before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);  // fails harmlessly for some
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
      fail_child(report);
    // Every other descriptor is closed, except the report pipe (close-on-exec).
    if (report > 3) syscall(SYS_close_range, 3u, static_cast<unsigned>(report - 1), 0u);
    if (syscall(SYS_close_range, static_cast<unsigned>(report + 1), ~0u, 0u) != 0) {
      rlimit r{};
      const int top = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < 65536
                          ? static_cast<int>(r.rlim_cur)
                          : 65536;
      for (int fd = 3; fd < top; ++fd)
        if (fd != report) close(fd);
    }
    execve(args[0], args, envp);
    fail_child(report);
  }

  [[noreturn]] static void fail_child(int report) {
    const int e = errno;
    [[maybe_unused]] const auto n = write(report, &e, sizeof e);
    _exit(127);
  }

  // Reaps the child if it has ended; true once it has.
  bool poll() {
    if (code_) return true;
    if (pid_ <= 0) return true;
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == 0) return false;
    if (r < 0) {
      code_ = -1;  // not our child any more (cannot happen unless reaped elsewhere)
      return true;
    }
    if (WIFEXITED(status)) {
      code_ = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      code_ = 128 + WTERMSIG(status);
    } else {
      return false;  // stopped or continued: still running
    }
    return true;
  }

  void kill_and_reap() {
    if (pid_ <= 0) return;
    if (!code_) {
      ::kill(-pid_, SIGKILL);  // its group: anything it started too
      ::kill(pid_, SIGKILL);
      // A thread blocked in the kernel (a read from a FUSE server that never answers)
      // holds the process until that call ends: give up after a while rather than hang
      // the test (the zombie is reaped when the test process ends).
      if (!wait_until([&] { return poll(); }, std::chrono::seconds(10)))
        std::fprintf(stderr, "Subprocess: pid %d did not end after SIGKILL; left behind\n",
                     static_cast<int>(pid_));
    }
    pid_ = -1;
  }

  pid_t pid_ = -1;
  std::optional<int> code_{};
  std::filesystem::path out_, err_;
};

}  // namespace brigade::test
