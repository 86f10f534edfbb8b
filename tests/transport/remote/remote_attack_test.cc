// The cluster under attack (issue 21), in one process: a worker node or a rank-0 pool
// with its directory, and an attacker with an actor system of its own on 127.0.0.1 — a
// plain CAF client without the token, a peer that does know the token (the actors must
// not obey it either), raw sockets announcing huge BASP payloads, and a relay that
// captures every byte between a trainer and a worker.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <caf/all.hpp>
#include <caf/forwarding_actor_proxy.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/transport/remote/hostile_messages.h"
#include "tests/transport/remote/remote_test_util.h"
#include "transport/remote/detail/remote_auth.h"
#include "transport/remote/detail/remote_dispatch.h"
#include "transport/remote/detail/remote_guard.h"
#include "transport/remote/detail/remote_protocol.h"
#include "transport/remote/detail/wire_messages.h"
#include "transport/remote/remote.h"

namespace brigade::transport {
namespace {

using namespace std::chrono_literals;

using test::bytes_of;
using test::kSecurity;
using test::text_of;
using test::until;
using test::upper_ops;
using test::worker_options;

PoolOptions pool_for(std::vector<Endpoint> workers) {
  PoolOptions o;
  o.workers = std::move(workers);
  o.security = kSecurity;
  o.operations = {{"upper", 1}};
  o.name = "test trainer";
  o.reconnect_interval = 200ms;
  return o;
}

void expect_serves(RemotePool& pool, const std::string& text) {
  ASSERT_TRUE(pool.wait_for_worker(5s, {}));
  auto r = pool.call("upper", bytes_of(text), {});
  ASSERT_EQ(r.status, CallStatus::done) << r.reason;
  std::string upper = text;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(text_of(r.bytes), upper);
}

// The attacker's own actor system (no token of its own unless it connects with one).
struct Attacker {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  Attacker() {
    config.load<caf::io::middleman>();
    config.set("scheduler.max-threads", 2);
    system = std::make_unique<caf::actor_system>(config);
  }

  // A handle for actor `id` on `node`: the proxy CAF's BASP broker would make for it
  // (in CAF 0.17.6 a forwarding_actor_proxy whose messages the broker routes there).
  // Kept until the end: a proxy's destructor has the broker drop its own proxy of
  // that id (the published actor's, say).
  caf::actor guess(const caf::node_id& node, caf::actor_id id) {
    auto broker = system->middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
    caf::actor_config cfg;
    auto proxy = caf::make_actor<caf::forwarding_actor_proxy, caf::strong_actor_ptr>(
        id, node, system.get(), cfg, broker);
    guessed.push_back(caf::actor_cast<caf::actor>(proxy));
    return guessed.back();
  }
  std::vector<caf::actor> guessed;

  // Sends to `target` and waits for its answer: every message sent before over this
  // connection has been delivered (enqueued) by then.
  void sync(const caf::actor& target) {
    caf::scoped_actor self{*system};
    bool answered = false;
    self->request(target, 60s, caf::sys_atom::value, caf::get_atom::value, std::string("info"))
        .receive([&](caf::ok_atom, const std::string&, const caf::strong_actor_ptr&,
                     const std::string&) { answered = true; },
                 [&](const caf::error&) {});
    EXPECT_TRUE(answered);
  }

  void attack(const caf::actor& published, int ids) {
    test::hit(published);
    for (caf::actor_id id = 1; id <= static_cast<caf::actor_id>(ids); ++id)
      if (id != published.id()) test::hit(guess(published.node(), id));
    sync(published);
  }
};

// A plain CAF client (remote_actor, no token) cannot even reach the gate: the port
// speaks the token's handshake first. The worker is unharmed and serves.
TEST(RemoteAttack, APlainCafClientCannotReachTheGate) {
  WorkerNode worker(worker_options(), upper_ops());
  Attacker attacker;
  auto gate = caf::io::remote_actor(*attacker.system, "127.0.0.1", worker.address().port);
  EXPECT_FALSE(gate);
  EXPECT_TRUE(until(worker, [](const auto& s) { return s.connections_refused >= 1; }));
  RemotePool pool(pool_for({worker.address()}));
  expect_serves(pool, "still serving");
}

// A peer that knows the token (the actors' second line): exits (kill), errors, forged
// downs and unknown messages to the gate and to guessed ids 1..400 end nothing. An open
// session keeps serving, a new trainer still gets in, and the drops are counted and
// logged in a bounded number of lines: on the worker's clock (held still here), one line
// at once and nothing more within the 10 s interval, however many are dropped.
TEST(RemoteAttack, NoActorOfTheWorkerObeysAPeersExitsOrErrors) {
  auto options = worker_options();
  options.clock = std::make_shared<actors::ManualClock>();
  WorkerNode worker(options, upper_ops());
  RemotePool before(pool_for({worker.address()}));
  expect_serves(before, "before");
  Attacker attacker;
  auto gate = detail::connect_blocking(*attacker.system, kSecurity, worker.address());
  ASSERT_TRUE(gate);
  attacker.attack(gate, 400);
  for (int i = 0; i < 20; ++i) expect_serves(before, "session " + std::to_string(i));
  RemotePool after(pool_for({worker.address()}));
  expect_serves(after, "a new trainer");
  const auto s = worker.stats();
  std::cerr << "dropped at the mailbox: " << s.system_messages_dropped << ", log lines "
            << s.drop_log_lines << "\n";
  EXPECT_GE(s.system_messages_dropped, 4u);  // at least the gate's
  EXPECT_EQ(s.sessions_opened, 2u);
  EXPECT_EQ(before.stats().lost, 0u);
  EXPECT_EQ(s.drop_log_lines, 1u);
}

// The same against rank 0: the directory's port makes the attacker a peer of the
// trainer's own system (its dispatcher and its directory). Nothing ends: the trainer
// keeps its worker, and a second worker can still join.
TEST(RemoteAttack, NeitherTheDirectoryNorTheTrainerObeysAPeer) {
  PoolOptions o = pool_for({});
  o.directory = Endpoint{"127.0.0.1", 0};
  o.host_directory = true;
  RemotePool pool(o);
  auto wo = worker_options();
  wo.join = *pool.directory_address();
  WorkerNode first(wo, upper_ops());
  expect_serves(pool, "before");

  Attacker attacker;
  // Without the token: not even a peer.
  EXPECT_FALSE(
      caf::io::remote_actor(*attacker.system, "127.0.0.1", pool.directory_address()->port));
  // With it: a peer, and still obeyed by nobody.
  auto directory = detail::connect_blocking(*attacker.system, kSecurity, *pool.directory_address());
  ASSERT_TRUE(directory);
  attacker.attack(directory, 400);
  for (int i = 0; i < 20; ++i) expect_serves(pool, "after " + std::to_string(i));
  WorkerNode second(wo, upper_ops());
  EXPECT_TRUE(detail::PoolAccess::wait(
      pool, [](const auto& t) { return t.live() == 2; }, 60s));
  EXPECT_EQ(pool.stats().lost, 0u);
  std::cerr << "dropped: " << pool.stats().messages_dropped << "\n";
  EXPECT_GE(pool.stats().messages_dropped, 4u);
}

// REBALANCING: rank 0's weights reach every worker joined, and one that joins later; a
// peer that passed the handshake but sends weights without the token's digest is
// dropped and counted by the directory, and no worker sees its weights.
TEST(RemoteAttack, RankWeightsComeOnlyFromTheDirectoryWithTheToken) {
  PoolOptions o = pool_for({});
  o.directory = Endpoint{"127.0.0.1", 0};
  o.host_directory = true;
  RemotePool pool(o);
  auto wo = worker_options();
  wo.join = *pool.directory_address();
  WorkerNode first(wo, upper_ops());
  expect_serves(pool, "joined");
  pool.set_rank_weights({kNeutralRankWeight, 4 * kNeutralRankWeight});
  auto updated = [](const WorkerStats& s) { return s.weight_updates == 1; };
  EXPECT_TRUE(detail::WorkerAccess::wait(first, updated, 60s));
  WorkerNode second(wo, upper_ops());
  EXPECT_TRUE(detail::WorkerAccess::wait(second, updated, 60s)) << "sent to a late joiner";

  Attacker attacker;
  auto directory = detail::connect_blocking(*attacker.system, kSecurity, *pool.directory_address());
  ASSERT_TRUE(directory);
  const auto dropped = pool.stats().messages_dropped;
  caf::anon_send(directory, detail::weights_atom::value,
                 detail::write_rank_weights({detail::token_digest("not the token"), {1, 1}}));
  attacker.sync(directory);
  EXPECT_EQ(pool.stats().messages_dropped, dropped + 1);
  pool.set_rank_weights({kNeutralRankWeight, 2 * kNeutralRankWeight});  // after it, in order
  auto twice = [](const WorkerStats& s) { return s.weight_updates == 2; };
  EXPECT_TRUE(detail::WorkerAccess::wait(first, twice, 60s));
  EXPECT_TRUE(detail::WorkerAccess::wait(second, twice, 60s));
  EXPECT_EQ(first.stats().weight_updates, 2u) << "the forged weights never reached it";
}

std::size_t rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A BASP header (CAF 0.17.6: 32 bytes, big-endian) announcing a payload of 2 GiB made a
// worker reserve it before anything was authenticated (1.0–1.8 GB per connection). Now
// the port speaks the token's handshake first: the header is refused as such, and the
// worker holds at most kMaxPending × 64 bytes for connections in the handshake. Bound
// checked: the process grows by less than 64 MiB over three such connections.
TEST(RemoteAttack, AHeaderAnnouncingGigabytesReservesNothing) {
  WorkerNode worker(worker_options(), upper_ops());
  const auto before = rss_bytes();
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    const int fd = connect_to(worker.address().port);
    ASSERT_GE(fd, 0);
    unsigned char header[32] = {};
    header[0] = 0x01;  // client_handshake (source and destination actor 0: valid)
    const std::uint32_t payload = htonl(0x80000000u);
    std::memcpy(header + 4, &payload, sizeof payload);
    ASSERT_EQ(::send(fd, header, sizeof header, MSG_NOSIGNAL), 32);
    fds.push_back(fd);
  }
  ASSERT_TRUE(until(worker, [](const auto& s) { return s.connections_refused >= 3; }));
  EXPECT_EQ(worker.stats().connections_refused, 3u);
  EXPECT_EQ(worker.stats().connections_authenticated, 0u);
  const auto after = rss_bytes();
  std::cerr << "RSS " << (before >> 20) << " MiB before, " << (after >> 20) << " MiB after\n";
  EXPECT_LT(after, before + (std::size_t{64} << 20)) << before << " → " << after;
  for (int fd : fds) ::close(fd);
  RemotePool pool(pool_for({worker.address()}));
  expect_serves(pool, "unharmed");
}

// Connections that never finish the handshake: at most kMaxPending are held (each with
// its deadline); more are closed at once, and a real trainer still gets in.
TEST(RemoteAttack, IdleConnectionsInTheHandshakeAreBounded) {
  WorkerNode worker(worker_options(), upper_ops());
  std::vector<int> fds;
  for (std::size_t i = 0; i < detail::kMaxPending + 20; ++i) {
    const int fd = connect_to(worker.address().port);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  EXPECT_TRUE(until(worker, [](const auto& s) { return s.connections_refused >= 20; }));
  for (int fd : fds) ::close(fd);
  RemotePool pool(pool_for({worker.address()}));
  expect_serves(pool, "through");
}

// A TCP relay between a trainer and a worker that keeps every byte of both directions.
class Relay {
 public:
  explicit Relay(std::uint16_t target) : target_(target) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    ::bind(listen_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listen_, 8);
    socklen_t len = sizeof addr;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
  }
  std::uint16_t port() const { return port_; }
  std::string captured() {
    std::lock_guard lock(mutex_);
    return captured_;
  }

 private:
  void run() {
    std::vector<std::pair<int, int>> pairs;  // (from, to), both directions
    while (!stop_) {
      std::vector<pollfd> fds{{listen_, POLLIN, 0}};
      for (auto [from, to] : pairs) fds.push_back({from, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents) {
        const int a = ::accept(listen_, nullptr, nullptr);
        const int b = connect_to(target_);
        if (a >= 0 && b >= 0) {
          pairs.push_back({a, b});
          pairs.push_back({b, a});
        }
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        char buf[65536];
        const auto n = ::read(fds[i].fd, buf, sizeof buf);
        if (n <= 0) continue;
        {
          std::lock_guard lock(mutex_);
          captured_.append(buf, static_cast<std::size_t>(n));
        }
        [[maybe_unused]] auto w =
            ::send(pairs[i - 1].second, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
      }
    }
    for (auto [from, to] : pairs) ::close(from);
  }

  std::uint16_t target_, port_ = 0;
  int listen_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::string captured_;
};

// Without TLS the job token never crosses the network: the handshake proves it with
// HMACs over nonces from both sides, the hello carries a digest. Captured on a relay.
TEST(RemoteAttack, TheTokenNeverCrossesTheNetwork) {
  WorkerNode worker(worker_options(), upper_ops());
  Relay relay(worker.address().port);
  {
    RemotePool pool(pool_for({{"127.0.0.1", relay.port()}}));
    for (int i = 0; i < 5; ++i) expect_serves(pool, "through the relay " + std::to_string(i));
  }
  const auto bytes = relay.captured();
  EXPECT_GT(bytes.size(), 1000u);
  EXPECT_NE(bytes.find("THROUGH THE RELAY 4"), std::string::npos);  // it did capture
  EXPECT_EQ(bytes.find(kSecurity.token), std::string::npos);
}

// The log of dropped messages: a line at once, then at most one per interval.
TEST(RemoteAttack, TheDropLogIsBounded) {
  auto clock = std::make_shared<actors::ManualClock>();
  detail::DropLog log("test", std::chrono::seconds(10), clock);
  for (int i = 0; i < 21000; ++i) log.note(i % 2 ? "an exit message" : "an unknown message");
  EXPECT_EQ(log.total(), 21000u);
  EXPECT_EQ(log.lines(), 1u);
  clock->advance(std::chrono::milliseconds(9999));
  log.note("an exit message");
  EXPECT_EQ(log.lines(), 1u);  // not yet an interval since the first line
  clock->advance(std::chrono::milliseconds(1));
  log.note("an exit message");
  EXPECT_EQ(log.lines(), 2u);  // the interval has passed: what accumulated, in one line
  log.flush(true);
  EXPECT_EQ(log.lines(), 2u);  // nothing pending
  log.note("an unknown message");
  log.flush(true);
  EXPECT_EQ(log.lines(), 3u);
}

}  // namespace
}  // namespace brigade::transport

namespace brigade::transport {
namespace {

// A --join pointed at a worker's port rather than the directory's: the gate drops the
// join; the joining worker says so instead of waiting silently.
// What the log says, for a test to read while the actors write it.
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string str() {
    std::lock_guard lock(mutex_);
    return text_;
  }
  // Waits until the log holds `part` (re-checked at each line; no polling).
  bool wait_for(std::string_view part, std::chrono::seconds timeout) {
    std::unique_lock lock(mutex_);
    return logged_.wait_for(lock, timeout, [&] { return text_.find(part) != std::string::npos; });
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& m) override {
    text_.append(m.payload.data(), m.payload.size());
    text_ += '\n';
    logged_.notify_all();
  }
  void flush_() override {}

 private:
  std::string text_;
  std::condition_variable_any logged_;
};

TEST(RemoteAttack, AJoinNobodyAnswersIsReported) {
  auto sink = std::make_shared<CaptureSink>();
  auto& log = *sink;
  spdlog::default_logger()->sinks().push_back(sink);
  {
    WorkerNode gate(worker_options(), upper_ops());
    auto clock = std::make_shared<actors::ManualClock>();
    auto wo = worker_options();
    wo.join = gate.address();
    wo.clock = clock;
    WorkerNode joining(wo, upper_ops());
    // The join reached the gate (which drops it), then 5 s pass on the joiner's clock.
    ASSERT_TRUE(until(gate, [](const auto& s) { return s.messages_dropped >= 1; }));
    clock->advance(5001ms);
    log.wait_for("did not answer the join", 60s);
  }
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  EXPECT_NE(log.str().find(" did not answer the join within 5 s"), std::string::npos) << log.str();
}

}  // namespace
}  // namespace brigade::transport
