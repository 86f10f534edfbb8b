// Remote decode over TLS, end to end: real `brigade worker` and `brigade run`
// processes with certificates made here by the `openssl` CLI — a job CA signing the
// worker's and the trainer's certificates, and a rogue CA signing an impostor's.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "media/synthetic.h"

extern char** environ;

namespace brigade::launch::tls_test {  // its own: the tests of one target share a unity batch
namespace {

namespace fs = std::filesystem;

constexpr int kFiles = 40;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A `brigade worker` child: its first stdout line is the address it listens on; its
// stderr goes to a file. SIGTERM and reaped on destruction.
class WorkerProcess {
 public:
  WorkerProcess(const std::vector<std::string>& args, const fs::path& log) : log_(log) {
    int out[2];
    if (pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> argv{BRIGADE_BINARY, "worker"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    if (posix_spawn(&pid_, BRIGADE_BINARY, &actions, nullptr, raw.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (FILE* f = fdopen(out[0], "r")) {
      char line[256] = {};
      if (std::fgets(line, sizeof line, f)) address_ = line;
      while (!address_.empty() && (address_.back() == '\n')) address_.pop_back();
      std::fclose(f);  // the worker writes nothing else to stdout
    }
  }
  ~WorkerProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  const std::string& address() const { return address_; }
  bool running() const {
    int status = 0;
    return pid_ > 0 && waitpid(pid_, &status, WNOHANG) == 0;
  }
  std::string log() const { return slurp(log_); }

 private:
  pid_t pid_ = -1;
  std::string address_;
  fs::path log_;
};

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::mt19937_64 rng(std::random_device{}());
    root_ = fs::temp_directory_path() / ("brigade-tls-" + std::to_string(rng()));
    fs::create_directories(root_ / "data");
    for (int i = 0; i < kFiles; ++i) {
      const auto bytes =
          media::make_image(media::ImageCodec::jpeg, 90 + 2 * i, 72, static_cast<std::uint64_t>(i));
      std::ofstream(root_ / "data" / ("img-" + std::to_string(100 + i) + ".jpg"), std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
    std::ofstream(root_ / "token") << "tls-test-token-" << rng() << "\n";
    fs::permissions(root_ / "token", fs::perms::owner_read | fs::perms::owner_write);
    openssl_ok_ = make_certificates();
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // job-ca signs worker and trainer; rogue-ca signs rogue (a trainer's name).
  static bool make_certificates() {
    const std::string d = "'" + root_.string() + "'/";
    std::string script = "set -e; cd " + d + "; ";
    for (const char* ca : {"job-ca", "rogue-ca"}) {
      script += std::string("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=") + ca +
                " -keyout " + ca + ".key -out " + ca + ".pem; ";
    }
    int serial = 1;
    for (auto [name, ca] : {std::pair{"worker", "job-ca"}, std::pair{"trainer", "job-ca"},
                            std::pair{"rogue", "rogue-ca"}}) {
      script += std::string("openssl req -newkey rsa:2048 -nodes -subj /CN=") + name + " -keyout " +
                name + ".key -out " + name + ".csr; " + "openssl x509 -req -days 2 -in " + name +
                ".csr -CA " + ca + ".pem -CAkey " + ca + ".key -set_serial " +
                std::to_string(serial++) + " -out " + name + ".pem; ";
    }
    script += "chmod 600 *.key";
    return shell("(" + script + ") > " + d + "openssl.log 2>&1") == 0;
  }

  void SetUp() override {
    if (!openssl_ok_) GTEST_FAIL() << "openssl failed:\n" << slurp(root_ / "openssl.log");
    dir_ = root_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }

  // --tls-cert/--tls-key of `name` and --tls-ca of `ca`.
  static std::vector<std::string> tls(const std::string& name, const std::string& ca) {
    return {"--tls-cert", (root_ / (name + ".pem")).string(),
            "--tls-key",  (root_ / (name + ".key")).string(),
            "--tls-ca",   (root_ / (ca + ".pem")).string()};
  }
  static std::string joined(const std::vector<std::string>& args) {
    std::string s;
    for (const auto& a : args) s += " '" + a + "'";
    return s;
  }

  std::unique_ptr<WorkerProcess> start_worker(const std::string& cert = "worker") {
    std::vector<std::string> args{"--listen", "127.0.0.1:0",  "--threads",
                                  "2",        "--token-file", (root_ / "token").string()};
    const auto t = tls(cert, "job-ca");
    args.insert(args.end(), t.begin(), t.end());
    auto w = std::make_unique<WorkerProcess>(args, dir_ / "worker.log");
    EXPECT_FALSE(w->address().empty()) << w->log();
    return w;
  }

  // `brigade run` on the dataset; `tag` names its ids, digests, stdout and stderr.
  Result run(const std::string& tag, const std::string& args) {
    const auto p = [&](const char* ext) { return "'" + (dir_ / (tag + ext)).string() + "'"; };
    const std::string cmd = "'" BRIGADE_BINARY "' run --data '" + (root_ / "data").string() +
                            "' --batch-size 6 --seed 5 --epochs 2 --no-progress --threads 2 " +
                            "--json --ids-out " + p(".ids") + " --digests-out " + p(".digests") +
                            " --token-file '" + (root_ / "token").string() + "' " + args + " > " +
                            p(".out") + " 2> " + p(".err");
    Result r;
    r.code = shell(cmd);
    r.out = slurp(dir_ / (tag + ".out"));
    r.err = slurp(dir_ / (tag + ".err"));
    return r;
  }
  std::string file(const std::string& name) const { return slurp(dir_ / name); }

  static inline fs::path root_;
  static inline bool openssl_ok_ = false;
  fs::path dir_;
};

TEST_F(TlsTest, JobCertificatesDecodeLikeALocalRun) {
  auto worker = start_worker();
  const auto local = run("local", "");
  ASSERT_EQ(local.code, 0) << local.err;
  const auto remote = run("remote", "--on-no-workers fail --workers " + worker->address() +
                                        joined(tls("trainer", "job-ca")));
  ASSERT_EQ(remote.code, 0) << remote.err << "\nworker:\n" << worker->log();
  EXPECT_EQ(file("remote.ids"), file("local.ids"));
  EXPECT_EQ(file("remote.digests"), file("local.digests"));
  EXPECT_FALSE(file("local.digests").empty());
  const auto json = nlohmann::json::parse(remote.out);
  EXPECT_EQ(json["samples"], 2 * kFiles);
  ASSERT_TRUE(json.contains("remote")) << remote.out;
  ASSERT_EQ(json["remote"]["workers"].size(), 1u) << remote.out;
  EXPECT_EQ(json["remote"]["workers"][0]["tasks"], 2 * ((kFiles + 5) / 6)) << remote.out;
}

TEST_F(TlsTest, RogueCertificateIsRefusedAndTheWorkerKeepsServing) {
  auto worker = start_worker();
  // The impostor trusts the job CA (it could check the worker) but its own certificate
  // is signed by the rogue CA: the worker's handshake must refuse it.
  const auto rogue = run("rogue", "--on-no-workers fail --workers " + worker->address() +
                                      joined(tls("rogue", "job-ca")));
  EXPECT_EQ(rogue.code, 1) << rogue.err << "\nworker:\n" << worker->log();
  EXPECT_TRUE(file("rogue.ids").empty()) << "nothing decoded for the impostor";
  // CAF's OpenSSL module ends the connection in the handshake (the worker never sees a
  // hello), and the trainer names it.
  EXPECT_NE(rogue.err.find("cannot reach worker " + worker->address()), std::string::npos)
      << rogue.err;
  EXPECT_NE(rogue.err.find("handshake"), std::string::npos) << rogue.err;
  EXPECT_EQ(worker->log().find("session opened"), std::string::npos) << worker->log();
  EXPECT_TRUE(worker->running()) << worker->log();
  // ... and a trainer of the job is still served.
  const auto local = run("local", "");
  ASSERT_EQ(local.code, 0) << local.err;
  const auto good = run("good", "--on-no-workers fail --workers " + worker->address() +
                                    joined(tls("trainer", "job-ca")));
  ASSERT_EQ(good.code, 0) << good.err << "\nworker:\n" << worker->log();
  EXPECT_EQ(file("good.digests"), file("local.digests"));
}

TEST_F(TlsTest, PlainTrainerIsRefusedByATlsWorker) {
  auto worker = start_worker();
  const auto plain = run("plain", "--on-no-workers fail --workers " + worker->address());
  EXPECT_EQ(plain.code, 1) << plain.err << "\nworker:\n" << worker->log();
  EXPECT_TRUE(file("plain.ids").empty());
  EXPECT_NE(plain.err.find("cannot reach worker " + worker->address()), std::string::npos)
      << plain.err;
  EXPECT_EQ(worker->log().find("session opened"), std::string::npos) << worker->log();
  EXPECT_TRUE(worker->running()) << worker->log();
}

TEST_F(TlsTest, TrainerRefusesAWorkerOfAnotherCa) {
  // The trainer checks the worker too: a worker whose certificate the rogue CA signed
  // (it trusts the job CA, so only the trainer's check can refuse it) gets no task.
  auto worker = start_worker("rogue");
  const auto r = run("trainer", "--on-no-workers fail --workers " + worker->address() +
                                    joined(tls("trainer", "job-ca")));
  EXPECT_EQ(r.code, 1) << r.err << "\nworker:\n" << worker->log();
  EXPECT_TRUE(file("trainer.ids").empty());
  EXPECT_NE(r.err.find("handshake"), std::string::npos) << r.err;
  EXPECT_EQ(worker->log().find("session opened"), std::string::npos) << worker->log();
}

}  // namespace
}  // namespace brigade::launch::tls_test
