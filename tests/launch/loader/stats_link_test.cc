// The statistics link (transport/remote/report_link.h): the handshake, the frames'
// refusals and the bounded memory of unauthenticated connections, against a raw client
// that speaks the protocol byte by byte.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "transport/remote/report_link.h"

namespace brigade::transport {
namespace {

const std::string kToken = "the-job-token-0123456789";

struct Received {
  std::uint32_t rank;
  std::uint64_t sequence;
  std::string payload;
};

// The collector with its deliveries recorded and a wait on its counts (no sleeps).
struct Fixture {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Received> received;
  ReportCollector collector;

  explicit Fixture(ReportCollectorOptions options)
      : collector(
            Endpoint{"127.0.0.1", 0}, std::move(options),
            [this](std::uint32_t rank, std::uint64_t sequence, std::span<const char> payload) {
              std::lock_guard lock(mutex);
              received.push_back({rank, sequence, std::string(payload.begin(), payload.end())});
            },
            [this] {
              std::lock_guard lock(mutex);
              changed.notify_all();
            }) {}

  template <class Predicate>
  bool wait(Predicate done) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(30),
                            [&] { return done(collector.counts()); });
  }
};

ReportCollectorOptions options(std::uint32_t world = 4) {
  return {.token = kToken, .world_size = world};
}

std::string mac(std::string_view key, std::string_view label, std::string_view a,
                std::string_view b) {
  std::string message(label);
  message.push_back('\0');
  message.append(a).append(b);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  HMAC(EVP_sha256(), key.data(), int(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &size);
  return {reinterpret_cast<const char*>(out), size};
}

void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(char((v >> (8 * i)) & 0xff));
}

// A client speaking the link's protocol by hand.
struct RawClient {
  int fd = -1;
  std::string key;

  explicit RawClient(std::uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ~RawClient() { ::close(fd); }

  std::string read(std::size_t n) {
    std::string out(n, '\0');
    std::size_t got = 0;
    while (got < n) {
      const auto r = ::recv(fd, out.data() + got, n - got, 0);
      if (r <= 0) return out.substr(0, got);
      got += std::size_t(r);
    }
    return out;
  }
  bool write(std::string_view data) {
    return ::send(fd, data.data(), data.size(), MSG_NOSIGNAL) == ssize_t(data.size());
  }
  // Whether the collector closed the connection (a blocking read returns end of file).
  bool closed_by_peer() {
    char c;
    return ::recv(fd, &c, 1, 0) <= 0;
  }
  // The handshake with `token` as `rank`; true if the collector's answer checks out.
  bool handshake(std::string_view token, std::uint32_t rank) {
    const auto greeting = read(32);
    if (greeting.size() != 32) return false;
    const auto cn = greeting.substr(16);
    std::string sn_rank(16, 'n');
    put_be(sn_rank, rank, 4);
    if (!write(greeting.substr(0, 16) + sn_rank + mac(token, "stats-sender", cn, sn_rank)))
      return false;
    const auto answer = read(32);
    key = mac(token, "stats-session", cn, sn_rank);
    return answer == mac(token, "stats-collector", cn, sn_rank);
  }
  std::string frame(std::uint64_t sequence, std::string_view payload, bool forge = false) const {
    std::string header;
    put_be(header, payload.size(), 4);
    put_be(header, sequence, 8);
    auto m = mac(key, "report", header, payload);
    if (forge) m[0] = char(m[0] ^ 1);
    return header + std::string(payload) + m;
  }
};

TEST(ReportLink, DeliversEachRanksReportsWithRankAndSequence) {
  Fixture f(options());
  {
    ReportSender one({"127.0.0.1", f.collector.port()}, kToken, 1);
    ReportSender three({"127.0.0.1", f.collector.port()}, kToken, 3);
    one.send({'a'});
    three.send({'x', 'y'});
    one.send({'b'});
    ASSERT_TRUE(f.wait([](const auto& c) { return c.delivered == 3; }));
    // The collector may deliver a frame before its sender's thread counts it sent.
    ASSERT_TRUE(one.drain(std::chrono::seconds(30)));
    EXPECT_EQ(one.counts().sent, 2u);
    EXPECT_EQ(one.counts().connected, 1u);
  }
  std::lock_guard lock(f.mutex);
  std::vector<std::string> of_one;
  for (const auto& r : f.received) {
    if (r.rank == 1) of_one.push_back(r.payload + std::to_string(r.sequence));
    if (r.rank == 3) {
      EXPECT_EQ(r.payload, "xy");
    }
  }
  EXPECT_EQ(of_one, (std::vector<std::string>{"a1", "b2"}));
  EXPECT_EQ(f.collector.counts().refused_frames, 0u);
}

TEST(ReportLink, TheHandshakeRefusesAForeignTokenWhicheverSideHasIt) {
  Fixture f(options());
  {
    ReportSender foreign({"127.0.0.1", f.collector.port()}, "another-job", 1);
    foreign.send({'a'});
    ASSERT_TRUE(f.wait([](const auto& c) { return c.refused_handshakes >= 1; }));
    EXPECT_EQ(foreign.counts().connected, 0u);
  }
  // The collector answers no hello that another token signed.
  RawClient raw(f.collector.port());
  EXPECT_FALSE(raw.handshake("another-job", 2));
  EXPECT_TRUE(raw.closed_by_peer());
  EXPECT_EQ(f.collector.counts().delivered, 0u);
  EXPECT_EQ(f.collector.counts().authenticated, 0u);
}

TEST(ReportLink, ARankOutsideTheWorldIsRefused) {
  Fixture f(options(2));
  RawClient raw(f.collector.port());
  raw.handshake(kToken, 2);
  EXPECT_TRUE(raw.closed_by_peer());
  EXPECT_EQ(f.collector.counts().refused_handshakes, 1u);
}

TEST(ReportLink, ReplayedAndOutOfOrderFramesAreRefusedAndTheConnectionKept) {
  Fixture f(options());
  RawClient raw(f.collector.port());
  ASSERT_TRUE(raw.handshake(kToken, 2));
  const auto five = raw.frame(5, "five");
  ASSERT_TRUE(raw.write(five));
  ASSERT_TRUE(raw.write(five));                 // replayed
  ASSERT_TRUE(raw.write(raw.frame(3, "old")));  // out of order
  ASSERT_TRUE(raw.write(raw.frame(6, "six")));
  ASSERT_TRUE(f.wait([](const auto& c) { return c.delivered == 2; }));
  EXPECT_EQ(f.collector.counts().refused_frames, 2u);
  {
    std::lock_guard lock(f.mutex);
    ASSERT_EQ(f.received.size(), 2u);
    EXPECT_EQ(f.received[0].payload, "five");
    EXPECT_EQ(f.received[1].payload, "six");
    EXPECT_EQ(f.received[1].rank, 2u);
  }
  // A frame of this session replayed on a new one: its MAC is the old key's.
  RawClient again(f.collector.port());
  ASSERT_TRUE(again.handshake(kToken, 2));
  ASSERT_TRUE(again.write(raw.frame(7, "seven")));
  EXPECT_TRUE(again.closed_by_peer());
  EXPECT_TRUE(f.wait([](const auto& c) { return c.refused_frames == 3 && c.delivered == 2; }));
}

TEST(ReportLink, WorkerNodesAuthenticateWithTheTokenAndKeepTheirOwnOrder) {
  auto o = options(2);
  o.max_workers = 2;
  Fixture f(o);
  // Two workers at once (no replacing each other, unlike a rank's connections), each
  // with its own sequence; a replay on one connection is refused, the other goes on.
  RawClient a(f.collector.port()), b(f.collector.port());
  ASSERT_TRUE(a.handshake(kToken, kWorkerSender));
  ASSERT_TRUE(b.handshake(kToken, kWorkerSender));
  ASSERT_TRUE(a.write(a.frame(1, "a1")));
  ASSERT_TRUE(b.write(b.frame(1, "b1")));
  ASSERT_TRUE(a.write(a.frame(1, "a1")));  // replayed
  ASSERT_TRUE(b.write(b.frame(2, "b2")));
  ASSERT_TRUE(f.wait([](const auto& c) { return c.delivered == 3 && c.refused_frames == 1; }));
  {
    std::lock_guard lock(f.mutex);
    for (const auto& r : f.received) EXPECT_EQ(r.rank, kWorkerSender);
  }
  // A third worker beyond max_workers, and a foreign token, are refused.
  RawClient c(f.collector.port());
  c.handshake(kToken, kWorkerSender);
  EXPECT_TRUE(c.closed_by_peer());
  RawClient foreign(f.collector.port());
  EXPECT_FALSE(foreign.handshake("another-token", kWorkerSender));
  EXPECT_TRUE(f.wait([](const auto& n) { return n.refused_handshakes == 2; }));
  EXPECT_EQ(f.collector.counts().authenticated, 2u);
}

TEST(ReportLink, AWorkersSenderReachesTheCollector) {
  Fixture f(options(1));
  ReportSender sender(Endpoint{"127.0.0.1", f.collector.port()}, kToken, kWorkerSender);
  sender.send({'h', 'i'});
  ASSERT_TRUE(sender.drain(std::chrono::seconds(30)));
  ASSERT_TRUE(f.wait([](const auto& c) { return c.delivered == 1; }));
  std::lock_guard lock(f.mutex);
  EXPECT_EQ(f.received.at(0).rank, kWorkerSender);
  EXPECT_EQ(f.received.at(0).payload, "hi");
}

TEST(ReportLink, ForgedAndOversizedFramesCloseTheConnectionUnread) {
  auto o = options();
  o.max_report_bytes = 1000;
  Fixture f(o);
  {
    RawClient raw(f.collector.port());
    ASSERT_TRUE(raw.handshake(kToken, 0));
    ASSERT_TRUE(raw.write(raw.frame(1, "forged", true)));
    EXPECT_TRUE(raw.closed_by_peer());
  }
  RawClient raw(f.collector.port());
  ASSERT_TRUE(raw.handshake(kToken, 0));
  std::string header;
  put_be(header, 1001, 4);  // announces more than the limit
  put_be(header, 1, 8);
  ASSERT_TRUE(raw.write(header));
  EXPECT_TRUE(raw.closed_by_peer());
  EXPECT_TRUE(f.wait([](const auto& c) {
    return c.refused_frames == 2 && c.buffered_bytes == 0 && c.delivered == 0;
  }));
}

TEST(ReportLink, UnauthenticatedConnectionsHoldBoundedMemory) {
  auto o = options();
  o.max_pending = 4;
  o.handshake_timeout = std::chrono::hours(1);  // none ends by its deadline here
  Fixture f(o);
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<RawClient>(f.collector.port()));
    ASSERT_EQ(idle.back()->read(32).size(), 32u);           // accepted and greeted
    ASSERT_TRUE(idle.back()->write(std::string(60, 'g')));  // a hello's first 60 bytes
  }
  ASSERT_TRUE(f.wait([](const auto& c) { return c.buffered_bytes == 4 * 60; }));
  // A fifth is closed at once, and megabytes of garbage on a pending one are never
  // buffered: its 68 bytes are a hello that fails, and it is closed.
  RawClient fifth(f.collector.port());
  EXPECT_TRUE(fifth.closed_by_peer());
  const std::string garbage(1 << 20, 'x');
  [[maybe_unused]] const auto n = ::send(idle[0]->fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
  EXPECT_TRUE(idle[0]->closed_by_peer());
  EXPECT_TRUE(f.wait([](const auto& c) {
    return c.refused_handshakes == 2 && c.pending == 3 && c.buffered_bytes == 3 * 60;
  }));
}

TEST(ReportLink, AHandshakeNotCompletedInTimeIsClosed) {
  auto o = options();
  o.handshake_timeout = std::chrono::milliseconds(50);
  Fixture f(o);
  RawClient raw(f.collector.port());
  EXPECT_EQ(raw.read(32).size(), 32u);
  EXPECT_TRUE(raw.closed_by_peer());  // it never answered
  EXPECT_TRUE(f.wait([](const auto& c) { return c.refused_handshakes == 1 && c.pending == 0; }));
}

TEST(ReportLink, SendNeverBlocksWithoutACollectorAndKeepsTheNewest) {
  // A port nobody listens on: the sender retries in the background, send() returns.
  std::uint16_t port = 0;
  {
    Fixture f(options());
    port = f.collector.port();
  }
  ReportSender sender({"127.0.0.1", port}, kToken, 1);
  for (char c = 'a'; c < 'a' + 10; ++c) sender.send({c});
  EXPECT_EQ(sender.counts().dropped, 10 - kSendQueue);
  EXPECT_EQ(sender.counts().sent, 0u);
}

}  // namespace
}  // namespace brigade::transport
